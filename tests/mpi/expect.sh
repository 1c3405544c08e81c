#!/bin/sh
# Runs an MPI test and checks its exit status and output (stdout and stderr together):
#   expect.sh [--status N] [--match ERE]... [--no-match ERE]... [--stats COLL=CALLS/BYTES]... -- CMD...
# --status N    the exit status CMD must have (default 0)
# --match ERE   a line of the output must match (grep -E)
# --no-match    no line may match
# --stats       the "picoll stats: COLL ALG calls N bytes B" lines, summed over the algorithms,
#               must give exactly CALLS and BYTES for COLL (a collective without a line has 0/0)
# The output is printed, then one line per failed expectation; exits 1 if any failed.
status=0 matches="" nomatches="" stats=""
nl='
'
while [ $# -gt 0 ]; do
    case $1 in
        --status) status=$2; shift 2 ;;
        --match) matches="$matches$2$nl"; shift 2 ;;
        --no-match) nomatches="$nomatches$2$nl"; shift 2 ;;
        --stats) stats="$stats $2"; shift 2 ;;
        --) shift; break ;;
        *) echo "expect.sh: unknown option $1"; exit 2 ;;
    esac
done
out=$(mktemp "${TMPDIR:-/tmp}/picoll-expect.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
bad=0
if [ "$rc" != "$status" ]; then
    echo "EXPECT FAILED: exit status $rc, expected $status"; bad=1
fi
IFS=$nl
for re in $matches; do
    grep -Eq -- "$re" "$out" || { echo "EXPECT FAILED: no output line matches: $re"; bad=1; }
done
for re in $nomatches; do
    grep -Eq -- "$re" "$out" && { echo "EXPECT FAILED: an output line matches: $re"; bad=1; }
done
unset IFS
for s in $stats; do
    coll=${s%%=*}; want=${s#*=}
    got=$(awk -v c="$coll" '$1 == "picoll" && $2 == "stats:" && $3 == c && $5 == "calls" && $7 == "bytes" { n += $6; b += $8 } END { printf "%d/%d", n, b }' "$out")
    [ "$got" = "$want" ] || { echo "EXPECT FAILED: $coll stats (calls/bytes summed over algorithms) $got, expected $want"; bad=1; }
done
[ $bad = 0 ] && echo "expect.sh: all expectations met"
exit $bad
