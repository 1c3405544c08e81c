#!/bin/sh
# selftest.sh HOSTS...: what tests/net/hosts.sh (run as HOSTS..., options may follow) promises
# about itself: it skips with a reason where it cannot make namespaces, and it removes the hosts
# and kills every process it started when the job outlives --limit, when it is sent SIGTERM, when
# its reader goes away (SIGPIPE), and, at the next run, when it was SIGKILLed (CTest's timeout);
# and its hosts do not see each other's processes. A job of `sleep` stands in for the ranks.
fails=0
fail() { echo "selftest: FAIL: $*"; fails=$((fails + 1)); }
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "SKIP: two hosts need root and iproute2"
    exit 77
fi
# what is left of the run of hosts.sh with process id $1
left() {
    ip netns list 2>/dev/null | grep "^pc$1-h" | tr '\n' ' '
    ps -eo args | grep -x "sleep 4711" | head -n 1
}

# 1. not root: a one-line reason and 77
if command -v setpriv >/dev/null 2>&1; then
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$@" -- true 2>&1); rc=$?
    echo "as an unprivileged user: $out (status $rc)"
    [ $rc = 77 ] && echo "$out" | grep -q '^SKIP: ' || fail "no skip (status 77, a SKIP line) without root"
fi

# 2. --limit: the job is killed, status 124, nothing left
"$@" --limit 3 -- sleep 4711 & pid=$!
wait $pid; rc=$?
[ $rc = 124 ] || fail "--limit 3 on a job of sleep: status $rc, expected 124"
l=$(left $pid); [ -z "$l" ] || fail "left after --limit: $l"

# 3. SIGTERM while the job runs: nothing left
"$@" --limit 60 -- sleep 4711 & pid=$!
for _ in $(seq 100); do
    ps -eo args | grep -qx "sleep 4711" && break
    sleep 0.1
done
ps -eo args | grep -qx "sleep 4711" || fail "the job of sleep did not start"
kill -TERM $pid
wait $pid; rc=$?
echo "after SIGTERM: status $rc"
l=$(left $pid); [ -z "$l" ] || fail "left after SIGTERM: $l"

# 4. its reader goes away (SIGPIPE): nothing left
"$@" --limit 5 -- sleep 4711 | head -n 1
sleep 6
ps -eo args | grep -qx "sleep 4711" && fail "the job of sleep outlived its reader's end"
l=$(ip netns list 2>/dev/null | grep '^pc[0-9]*-h'); [ -z "$l" ] || fail "left after SIGPIPE: $l"

# 5. SIGKILLed (no trap runs): the next run removes what it left
"$@" --limit 60 -- sleep 4711 > /dev/null 2>&1 & pid=$!
for _ in $(seq 100); do
    ps -eo args | grep -qx "sleep 4711" && break
    sleep 0.1
done
kill -9 $pid
wait $pid 2>/dev/null
[ -n "$(left $pid)" ] || fail "a SIGKILLed run left nothing: the test did not test"
"$@" --limit 20 -- true
l=$(left $pid); [ -z "$l" ] || fail "left by a SIGKILLed run after the next: $l"

# 6. two machines as the ranks see them: each host its own name and its own PID namespace, not
#    the caller's (a rank cannot look up the other host's processes in /proc, so a rank that exits
#    behind a downed link is not seen to exit, as on two machines)
out=$("$@" --np 1+1 --limit 30 -- sh -c 'echo "rank on $(hostname): $(readlink /proc/self/ns/pid)"' 2>&1)
echo "$out" | grep '^rank on '
ns1=$(echo "$out" | sed -n 's/^rank on h1: //p'); ns2=$(echo "$out" | sed -n 's/^rank on h2: //p')
mine=$(readlink /proc/self/ns/pid)
if [ -z "$ns1" ] || [ -z "$ns2" ]; then
    fail "a job of 1+1 ranks did not report from both hosts: $out"
elif [ "$ns1" = "$ns2" ] || [ "$ns1" = "$mine" ] || [ "$ns2" = "$mine" ]; then
    fail "the hosts share a PID namespace (h1 $ns1, h2 $ns2, the caller $mine)"
fi

[ $fails = 0 ] && echo "selftest: passed" || echo "selftest: FAILED ($fails)"
[ $fails = 0 ]
