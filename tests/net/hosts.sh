#!/bin/sh
# hosts.sh [OPTIONS] -- PROGRAM ARGS...: runs an MPI job across real "hosts" on this machine, h1,
# h2, ...: network namespaces, two joined by a veth pair, more by a veth each to a bridge in a
# namespace of its own (10.250.14.1, .2, ... in a /24, lo up in each), each process with its own
# hostname and IPC namespace (tests/net/agent.sh). The launcher runs inside h1 and reaches the
# others through the agent, as it would through ssh. Whatever happens (the job fails, hangs, this
# script is interrupted or killed by CTest's timeout with SIGTERM), every process it started is
# SIGKILLed and the namespaces (with the veths) are removed.
#
#   --mpi openmpi|mpich      the launcher's flavour (with --mpiexec PATH, the launcher itself)
#   --np A+B[+C...]          A ranks on h1, then B on h2, C on h3, ... (default 2+2; up to 64 hosts)
#   --preload LIB            LD_PRELOAD of the ranks (not of the launcher)
#   --env NAME=VALUE         for every rank (repeatable)
#   --keep-going             the launcher leaves the survivors of a dead rank running (so that
#                            picoll's own diagnosis is what ends them)
#   --limit SECONDS          SIGKILL everything after this long (default 60): exit status 124
#   --rate RATE              slow the link from the start: tbf at RATE (tc's units, e.g. 20mbit)
#   --start REGEX            the output line that starts the fault steps (default "loop running"),
#                            or, with no --fault, marks the program's own fault (a killed rank)
#   --fault STEPS            comma-separated, run in order once --start matched: down (h2's link
#                            down), up, sleep:N, slow:RATE (tbf on both ends)
#   --expect-within REGEX S  after the fault's first step, the output must match REGEX and every
#                            rank must have ended within S seconds (a launcher that then still
#                            waits for the lost host, as Open MPI's does, is told apart and killed)
#   --done REGEX             the job's result is complete once its output matches REGEX: a launcher
#                            still running 5 s later is killed and the run counts as ended (for
#                            MPICH 4.0, whose UCX hangs in MPI_Finalize in about half the runs over
#                            tcp, also without picoll)
#   --min-bytes N            h1's veth must have sent and received at least N bytes each
#   --max-bytes N            and at most N bytes each (a slowed link held the traffic back)
# Skips (exit 77, "SKIP: ..." on one line) where namespaces cannot be made (not root, no
# CAP_NET_ADMIN, no ip or unshare). Also fails when the job leaves a picoll segment in /dev/shm.
mpi=openmpi; mpiexec=; np=2+2; preload=; limit=60; rate=; start_re="loop running"; fault=
expect_re=; expect_s=; min_bytes=0; max_bytes=; keep_going=; done_re=; done_at=; watch_pid=; steps_pid=
envs=""
while [ $# -gt 0 ]; do
    case "$1" in
        --mpi) mpi="$2"; shift 2 ;;
        --mpiexec) mpiexec="$2"; shift 2 ;;
        --np) np="$2"; shift 2 ;;
        --preload) preload="$2"; shift 2 ;;
        --env) envs="$envs $2"; shift 2 ;;
        --limit) limit="$2"; shift 2 ;;
        --keep-going) keep_going=1; shift ;;
        --rate) rate="$2"; shift 2 ;;
        --start) start_re="$2"; shift 2 ;;
        --fault) fault="$2"; shift 2 ;;
        --expect-within) expect_re="$2"; expect_s="$3"; shift 3 ;;
        --min-bytes) min_bytes="$2"; shift 2 ;;
        --max-bytes) max_bytes="$2"; shift 2 ;;
        --done) done_re="$2"; shift 2 ;;
        --) shift; break ;;
        *) echo "hosts.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: hosts.sh [OPTIONS] -- PROGRAM ARGS..." >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
counts=$(echo "$np" | tr '+' ' ')
nhosts=$(echo $counts | wc -w)
[ "$nhosts" -ge 2 ] && [ "$nhosts" -le 64 ] || { echo "hosts.sh: --np needs 2 to 64 hosts ('$np')" >&2; exit 2; }
total=0; hostlist=; i=0
for c in $counts; do
    i=$((i + 1)); total=$((total + c)); hostlist="$hostlist${hostlist:+,}h$i:$c"
done
n1=${np%%+*}
subnet=10.250.14.0/24

for tool in ip unshare tc; do
    command -v $tool >/dev/null 2>&1 || { echo "SKIP: two hosts need '$tool' (iproute2, util-linux)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: two hosts need root (network namespaces)"; exit 77; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# unique names: tests may run side by side
tag="pc$$"
ns1="$tag-h1"; ns2="$tag-h2"; nssw="$tag-sw"
all_ns() { for i in $(seq "$nhosts"); do echo "$tag-h$i"; done; [ "$nhosts" -le 2 ] || echo "$nssw"; }
run=$(mktemp -d /tmp/picoll-hosts.XXXXXX)
shm_before="$run/shm-before"
ls /dev/shm 2>/dev/null | sort > "$shm_before"

kill_all() {
    # everything in the namespaces (launcher, daemons, ranks: they fork, so until none is left)
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(for ns in $(all_ns); do ip netns pids "$ns"; done 2>/dev/null)
        [ -n "$pids" ] || break
        kill -9 $pids 2>/dev/null
        sleep 0.1
    done
}
cleanup() {
    trap - EXIT INT TERM HUP
    trap '' PIPE # a reader that went away must not stop the cleaning
    for p in $watch_pid $steps_pid; do kill -9 "$p" 2>/dev/null; done
    kill_all
    for ns in $(all_ns); do ip netns del "$ns" 2>/dev/null; done
    rm -rf "$run"
}
trap cleanup EXIT
trap 'trap "" PIPE; echo "hosts.sh: interrupted: removing the hosts" 2>/dev/null; exit 143' INT TERM HUP PIPE

# the hosts of an earlier run that was SIGKILLed (no trap runs then: CTest's timeout kills so)
for old in $(ip netns list 2>/dev/null | sed -n 's/^pc\([0-9]*\)-\(h[0-9]*\|sw\)\( .*\)*$/\1/p' | sort -u); do
    if ! kill -0 "$old" 2>/dev/null; then
        echo "hosts.sh: removing the hosts of an earlier run (process $old is gone)"
        for ns in $(ip netns list 2>/dev/null | sed -n "s/^\(pc$old-[a-z0-9]*\).*/\1/p"); do
            pids=$(ip netns pids "$ns" 2>/dev/null); [ -z "$pids" ] || kill -9 $pids
            ip netns del "$ns" 2>/dev/null
        done
        for f in $(grep -lx "pc$old-h1" /tmp/picoll-hosts.*/ns-h1 2>/dev/null); do
            rm -rf "$(dirname "$f")"
        done
    fi
done

if ! err=$(ip netns add "$ns1" 2>&1); then
    echo "SKIP: cannot make network namespaces: $(echo "$err" | head -n 1)"
    exit 77
fi
if [ "$nhosts" = 2 ]; then
    ip netns add "$ns2" || exit 1
    ip link add veth1 netns "$ns1" type veth peer name veth2 netns "$ns2" || exit 1
else
    # more hosts: each host's veth to a bridge in a namespace of its own (a switch)
    ip netns add "$nssw" && ip -n "$nssw" link add br0 type bridge &&
    ip -n "$nssw" link set br0 up || exit 1
    for i in $(seq "$nhosts"); do
        [ "$i" = 1 ] || ip netns add "$tag-h$i" || exit 1
        ip link add "veth$i" netns "$tag-h$i" type veth peer name "p$i" netns "$nssw" &&
        ip -n "$nssw" link set "p$i" master br0 && ip -n "$nssw" link set "p$i" up || exit 1
    done
fi
for i in $(seq "$nhosts"); do
    ip -n "$tag-h$i" addr add "10.250.14.$i/24" dev "veth$i" &&
    ip -n "$tag-h$i" link set "veth$i" up && ip -n "$tag-h$i" link set lo up || exit 1
done
# the carrier comes up asynchronously (up to a second later): UCX leaves out an interface that
# is not running yet, and would then find no way to the other hosts
for _ in $(seq 50); do
    down=
    for i in $(seq "$nhosts"); do
        [ "$(ip netns exec "$tag-h$i" cat "/sys/class/net/veth$i/operstate")" = up ] || down="$down h$i"
    done
    [ -z "$down" ] && break
    sleep 0.1
done
[ -z "$down" ] || { echo "hosts.sh: the veths of$down are not up after 5 s"; exit 1; }
printf '127.0.0.1 localhost\n' > "$run/hosts"
for i in $(seq "$nhosts"); do
    echo "$tag-h$i" > "$run/ns-h$i"; mkdir -p "$run/tmp-h$i"
    printf '10.250.14.%d h%d\n' "$i" "$i" >> "$run/hosts"
done
printf '#!/bin/sh\nexec sh "%s" "%s" "$@"\n' "$here/agent.sh" "$run" > "$run/agent"
chmod +x "$run/agent"

slow() {
    ip netns exec "$ns1" tc qdisc replace dev veth1 root tbf rate "$1" burst 64kb latency 400ms &&
    ip netns exec "$ns2" tc qdisc replace dev veth2 root tbf rate "$1" burst 64kb latency 400ms
}
[ -z "$rate" ] || slow "$rate" || exit 1
counter() { ip netns exec "$ns1" cat "/sys/class/net/veth1/statistics/$1"; }
tx0=$(counter tx_bytes); rx0=$(counter rx_bytes)

# the launcher's command line, as a script run on h1 through the agent
q() { printf "'%s' " "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
{
    echo "#!/bin/sh"
    echo "cd $(q "$PWD")"
    printf 'exec '
    case "$mpi" in
        openmpi)
            q "${mpiexec:-mpirun}"
            printf -- '--allow-run-as-root --oversubscribe --bind-to none -np %d --host %s ' \
                "$total" "$hostlist"
            printf -- '--mca plm_rsh_agent %s ' "$(q "$run/agent")"
            printf -- '--mca oob_tcp_if_include %s --mca pml ob1 --mca btl self,vader,tcp ' $subnet
            printf -- '--mca btl_tcp_if_include %s --mca mpi_yield_when_idle 1 ' $subnet
            [ -z "$keep_going" ] || printf -- '--enable-recovery '
            [ -z "$preload" ] || printf -- '-x %s ' "$(q "LD_PRELOAD=$preload")"
            for e in $envs; do printf -- '-x %s ' "$(q "$e")"; done
            ;;
        mpich)
            q "${mpiexec:-mpiexec.mpich}"
            printf -- '-launcher ssh -launcher-exec %s -hosts %s -np %d ' \
                "$(q "$run/agent")" "$hostlist" "$total"
            [ -z "$keep_going" ] || printf -- '-disable-auto-cleanup '
            [ -z "$preload" ] || printf -- '-genv LD_PRELOAD %s ' "$(q "$preload")"
            for e in $envs; do printf -- '-genv %s %s ' "$(q "${e%%=*}")" "$(q "${e#*=}")"; done
            ;;
        *) echo "hosts.sh: unknown MPI '$mpi'" >&2; exit 2 ;;
    esac
    for a in "$@"; do q "$a"; done
    echo
} > "$run/launch.sh"

echo "hosts.sh: $nhosts hosts, ranks $hostlist, $mpi${rate:+, link at $rate}${fault:+, fault: $fault}"
: > "$run/out"
t0=$(now)
sh "$run/agent" h1 sh "$run/launch.sh" > "$run/out" 2>&1 &
job=$!
# the output, as it comes
tail -n +1 -f "$run/out" --pid=$$ &
watch_pid=$!

steps() {
    now > "$run/fault-at"
    for step in $(echo "$fault" | tr ',' ' '); do
        case "$step" in
            down) ip -n "$ns2" link set veth2 down ;;
            up) ip -n "$ns2" link set veth2 up ;;
            sleep:*) sleep "${step#sleep:}" ;;
            slow:*) slow "${step#slow:}" ;;
            *) echo "hosts.sh: unknown fault step '$step'" ;;
        esac
        echo "hosts.sh: +$(since "$t0") s: $step"
    done
}
# the ranks: processes of PROGRAM in either namespace
prog=$(command -v "$1"); prog=$(readlink -f "$prog")
ranks_alive() {
    for p in $(for ns in $(all_ns); do ip netns pids "$ns"; done 2>/dev/null); do
        [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$prog" ] && return 0
    done
    return 1
}
# say_alive: each rank still running, with its host, rank, state and where it is (the kernel's
# wait channel; where gdb is installed, every thread's backtrace, of 4 ranks at most: 10 s each at
# most, inside CTest's time limit), before the limit's kill
say_alive() {
    local ns p rank traced=0
    for ns in $(all_ns); do
        for p in $(ip netns pids "$ns" 2>/dev/null); do
            [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$prog" ] || continue
            rank=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null |
                   sed -n 's/^\(OMPI_COMM_WORLD_RANK\|PMI_RANK\)=//p' | head -n 1)
            echo "hosts.sh: still running on ${ns#"$tag"-}: rank ${rank:-?}, pid $p, state" \
                 "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null), in $(cat "/proc/$p/wchan" 2>/dev/null)"
            if [ "$traced" -lt 4 ] && command -v gdb >/dev/null 2>&1; then
                traced=$((traced + 1))
                timeout 10 gdb -p "$p" -batch -nx -ex "thread apply all bt 12" 2>/dev/null |
                    grep -E '^(#|Thread)' | head -n 60 | sed 's/^/hosts.sh:   /'
            fi
        done
    done
}
status=0; started=0; matched=; ranks_gone=
while kill -0 $job 2>/dev/null; do
    if [ $started = 0 ] && [ -n "$fault$expect_re" ] && grep -Eq -- "$start_re" "$run/out"; then
        started=1
        if [ -n "$fault" ]; then
            steps &
            steps_pid=$!
        else
            now > "$run/fault-at" # the program's own fault (a rank that kills itself)
        fi
    fi
    if [ -n "$expect_re" ] && [ -z "$matched" ] && [ -f "$run/fault-at" ] && grep -Eq -- "$expect_re" "$run/out"; then
        matched=$(since "$(cat "$run/fault-at")")
    fi
    if [ -n "$expect_re" ] && [ -f "$run/fault-at" ] && [ -z "$ranks_gone" ] && ! ranks_alive; then
        ranks_gone=$(since "$(cat "$run/fault-at")")
        ranks_gone_at=$(now)
    fi
    if [ -n "$ranks_gone" ] && [ "$(since "$ranks_gone_at" | cut -d. -f1)" -ge 3 ]; then
        echo "hosts.sh: every rank ended, but the launcher still runs 3 s later (waiting for the lost host): killing it"
        kill_all
        break
    fi
    if [ -n "$done_re" ] && [ -z "$done_at" ] && grep -Eq -- "$done_re" "$run/out"; then
        done_at=$(now)
    fi
    if [ -n "$done_at" ] && [ "$(since "$done_at" | cut -d. -f1)" -ge 5 ]; then
        echo "hosts.sh: the job printed its result but has not ended 5 s later (MPI_Finalize of MPICH's UCX, a known hang): killing it"
        kill_all
        wait $job 2>/dev/null
        status=done
        break
    fi
    if [ "$(since "$t0" | cut -d. -f1)" -ge "$limit" ]; then
        echo "hosts.sh: still running after $limit s: killing everything"
        say_alive
        kill_all
        status=124
        break
    fi
    sleep 0.1
done
wait $job 2>/dev/null; rc=$?
case $status in 124) ;; done) status=0 ;; *) status=$rc ;; esac
[ -z "$steps_pid" ] || kill "$steps_pid" 2>/dev/null
ended=$(since "$t0")
sleep 0.3
kill "$watch_pid" 2>/dev/null; watch_pid=
echo "hosts.sh: job ended after $ended s with status $status"
if [ -n "$expect_re" ]; then
    if [ ! -f "$run/fault-at" ]; then
        echo "hosts.sh: FAIL: no fault happened (no line matched '$start_re')"; status=1
    else
        took=${ranks_gone:-$(since "$(cat "$run/fault-at")")}
        [ -n "$matched" ] || { grep -Eq -- "$expect_re" "$run/out" && matched=$took; }
        if [ -z "$matched" ]; then
            echo "hosts.sh: FAIL: no line matched '$expect_re' after the fault"; status=1
        elif awk -v a="$took" -v b="$expect_s" 'BEGIN { exit !(a > b) }'; then
            echo "hosts.sh: FAIL: the ranks ended $took s after the fault (error after $matched s), more than $expect_s s"; status=1
        else
            echo "hosts.sh: the error came $matched s and the ranks ended $took s after the fault (at most $expect_s s)"
        fi
    fi
fi
tx=$(( $(counter tx_bytes) - tx0 )); rx=$(( $(counter rx_bytes) - rx0 ))
echo "hosts.sh: h1's veth sent $tx and received $rx bytes"
if [ "$tx" -lt "$min_bytes" ] || [ "$rx" -lt "$min_bytes" ]; then
    echo "hosts.sh: FAIL: fewer than $min_bytes bytes crossed the veth each way"; status=1
fi
if [ -n "$max_bytes" ] && { [ "$tx" -gt "$max_bytes" ] || [ "$rx" -gt "$max_bytes" ]; }; then
    echo "hosts.sh: FAIL: more than $max_bytes bytes crossed the veth one way"; status=1
fi
kill_all
# The MPIs' own files of killed jobs (named after the hosts) go; picoll's must not be there. A file
# of another test running beside this one (tests side by side) is mapped or held open by a live
# process of that test (a picoll segment only until its ranks have mapped it): it is neither a
# leftover nor this job's to remove.
new_shm() { ls /dev/shm 2>/dev/null | sort | comm -13 "$shm_before" -; }
if new_shm | grep -q '^picoll-'; then sleep 2; fi
for f in $(new_shm); do
    sh "$(dirname "$0")/../host/shm_in_use.sh" "$f" && continue
    case "$f" in
        picoll-*) echo "hosts.sh: FAIL: left in /dev/shm: $f"; status=1; rm -f "/dev/shm/$f" ;;
        *h[0-9]*) rm -f "/dev/shm/$f" ;;
    esac
done
exit $status
