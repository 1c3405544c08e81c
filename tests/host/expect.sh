#!/bin/sh
# expect.sh [--fail|--any-status] [--within SECONDS] [--no-shm-leftovers] [--count N REGEX]...
#           REGEX... -- COMMAND...
# Runs COMMAND; passes when its exit status is zero (nonzero with --fail), every REGEX matches its
# combined output, each --count REGEX matches exactly N of its lines, it ended within SECONDS,
# and (with --no-shm-leftovers) it left no picoll segment in /dev/shm.
want_fail=0; within=0; shm_check=0; counts=""
while [ $# -gt 0 ]; do
    case "$1" in
        --fail) want_fail=1; shift ;;
        --any-status) want_fail=2; shift ;;
        --within) within="$2"; shift 2 ;;
        --no-shm-leftovers) shm_check=1; shift ;;
        --count) counts="$counts
$2 $3"; shift 3 ;;
        --) shift; break ;;
        *) break ;;
    esac
done
regexes=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do regexes="$regexes
$1"; shift; done
[ "$1" = "--" ] && shift
out=$(mktemp)
before=$(mktemp)
ls /dev/shm 2>/dev/null | grep '^picoll-' | sort > "$before"
start=$(date +%s)
"$@" > "$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
status=0
if [ $want_fail = 1 ] && [ $rc = 0 ]; then echo "expect.sh: command succeeded, expected failure"; status=1; fi
if [ $want_fail = 0 ] && [ $rc != 0 ]; then echo "expect.sh: command failed with status $rc"; status=1; fi
if [ "$within" != 0 ] && [ "$elapsed" -gt "$within" ]; then
    echo "expect.sh: took ${elapsed}s, more than ${within}s"; status=1
fi
echo "$regexes" | while IFS= read -r re; do
    [ -z "$re" ] && continue
    grep -Eq -- "$re" "$out" || { echo "expect.sh: output does not match: $re"; exit 1; }
done || status=1
echo "$counts" | while IFS= read -r line; do
    [ -z "$line" ] && continue
    n=${line%% *}; re=${line#* }
    got=$(grep -Ec -- "$re" "$out")
    [ "$got" = "$n" ] || { echo "expect.sh: $got lines match $re, expected $n"; exit 1; }
done || status=1
if [ $shm_check = 1 ]; then
    # A segment of another job running at the same time (tests side by side) lives only until its
    # ranks have mapped it, and while it lives a process of that job maps or holds it: a leftover
    # is one still there 2 s later that no live process maps or holds open.
    new_segs() { ls /dev/shm 2>/dev/null | grep '^picoll-' | sort | comm -13 "$before" -; }
    left=$(new_segs)
    if [ -n "$left" ]; then
        printf '%s\n' $left > "$out.first"
        sleep 2
        left=$(new_segs | comm -12 - "$out.first")
        rm -f "$out.first"
        kept=""
        for f in $left; do sh "$(dirname "$0")/shm_in_use.sh" "$f" || kept="$kept $f"; done
        left=$kept
    fi
    if [ -n "$left" ]; then echo "expect.sh: left in /dev/shm:$left"; status=1; fi
fi
rm -f "$out" "$before"
exit $status
