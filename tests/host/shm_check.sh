#!/bin/sh
# host.shm_check: expect.sh --no-shm-leftovers flags a picoll segment that the job left in /dev/shm,
# and not one that a live process of another job holds (tests run side by side: tests/run.sh).
# Usage: shm_check.sh EXPECT_SH
exp=$1
tmp=$(mktemp -d) || exit 1
name="picoll-shmcheck-$$"
status=0
trap 'rm -rf "$tmp"; rm -f "/dev/shm/$name-left" "/dev/shm/$name-held"' EXIT
# left by the job: flagged
if sh "$exp" --no-shm-leftovers "x" -- sh -c "echo x; : > /dev/shm/$name-left" > "$tmp/1" 2>&1; then
    echo "FAIL: a segment the job left passed the check"; status=1
fi
grep -q "left in /dev/shm: *$name-left" "$tmp/1" || { echo "FAIL: the left segment not named:"; cat "$tmp/1"; status=1; }
rm -f "/dev/shm/$name-left"
# made during the job by a process that lives on and holds it open (another job's): not flagged
if ! sh "$exp" --no-shm-leftovers "x" -- sh -c "echo x; (exec 3>/dev/shm/$name-held; sleep 8) &" > "$tmp/2" 2>&1; then
    echo "FAIL: a segment a live process holds was taken for a leftover:"; cat "$tmp/2"; status=1
fi
[ $status = 0 ] && echo "shm_check: passed"
exit $status
