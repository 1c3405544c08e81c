#!/bin/sh
# scale.sh [--mpi openmpi|mpich] [--mpiexec PATH] --preload LIB [--hosts "2 4 8 16"]
#          [--ranks K] [--vnode V] [--methods R] [-- NET_SCALE_ARGS...]: picoll's network step as
#          the nodes grow.
# For each number of hosts N, runs tests/mpi/net_scale across N network-namespace hosts
# (tests/net/hosts.sh) with K ranks a host (default 1; with --vnode V, virtual nodes of V ranks,
# so N x K / V nodes) and prints one row: nodes, set-up time, endpoints, liveness connections,
# sockets and resident memory gained per rank (the largest over the ranks), before and after an
# alltoall.
# With --methods R, instead, at each N: the mean time of R allreduces (8 B, 64 KiB, 1 MiB) and
# allgathers (8 B, 64 KiB a rank) with each network method forced in turn and with the model's
# choice (net_scale --time R). Used by docs/network.md ("At scale") and docs/performance.md;
# CTest runs one point of it (hosts.scale.np16).
here=$(cd "$(dirname "$0")" && pwd)
mpi=openmpi; mpiexec=; preload=; hosts="2 4 8 16"; ranks=1; vnode=; methods=
while [ $# -gt 0 ]; do
    case "$1" in
        --mpi) mpi="$2"; shift 2 ;;
        --mpiexec) mpiexec="$2"; shift 2 ;;
        --preload) preload="$2"; shift 2 ;;
        --hosts) hosts="$2"; shift 2 ;;
        --ranks) ranks="$2"; shift 2 ;;
        --vnode) vnode="$2"; shift 2 ;;
        --methods) methods="$2"; shift 2 ;;
        --) shift; break ;;
        *) echo "scale.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ -n "$preload" ] || { echo "usage: scale.sh --preload BUILD/.libs/libpicoll.so [...]" >&2; exit 2; }
prog="$(dirname "$(dirname "$preload")")/tests/mpi/net_scale"
[ -x "$prog" ] || { echo "scale.sh: $prog not built (make tests)" >&2; exit 2; }
run() { # N PICOLL_VAR=VALUE ARGS...: the job's output
    n=$1; var=$2; shift 2
    np=$(awk -v n="$n" -v k="$ranks" 'BEGIN { s = k; for (i = 1; i < n; i++) s = s "+" k; print s }')
    sh "$here/hosts.sh" --mpi "$mpi" ${mpiexec:+--mpiexec "$mpiexec"} --np "$np" --limit 300 \
        --preload "$preload" --env PICOLL_HOST=on ${vnode:+--env PICOLL_VNODE_SIZE=$vnode} \
        --env "$var" -- "$prog" "$@" 2>&1
}
if [ -n "$methods" ]; then
    printf '%6s %-34s %32s %22s\n' nodes method "allreduce 8 B, 64 KiB, 1 MiB (us)" \
        "allgather 8 B, 64 KiB"
    for n in $hosts; do
        for m in PICOLL_NET_ALLREDUCE=rd PICOLL_NET_ALLREDUCE=rabenseifner \
                 PICOLL_NET_ALLREDUCE=ring PICOLL_NET_ALLGATHER=ring PICOLL_NET_ALLGATHER=bruck \
                 PICOLL_NET=1; do
            line=$(run "$n" "$m" --time "$methods" "$@" | grep '^net_scale: time')
            [ "$m" = PICOLL_NET=1 ] && m="(the model's choice)"
            echo "$line" | awk -v n="$n" -v m="$m" '{ printf "%6s %-34s %10.0f %10.0f %10.0f %10.0f %10.0f\n",
                n, m, $5, $7, $9, $12, $14 }'
        done
    done
    exit 0
fi
printf '%6s %6s %10s %9s %8s %8s %8s | %9s %8s %8s %8s\n' nodes ranks setup_ms endpoints watched \
    sockets rss_kb endpoints watched sockets rss_kb
status=0
for n in $hosts; do
    out=$(run "$n" PICOLL_NET=1 "$@")
    line=$(echo "$out" | grep '^net_scale: nodes ')
    if [ -z "$line" ] || ! echo "$out" | grep -q '^net_scale: passed'; then
        echo "$out" | tail -n 20
        echo "scale.sh: $n hosts: FAIL"
        status=1
        continue
    fi
    echo "$line" | awk '{ printf "%6s %6s %10.1f %9s %8s %8s %8s | %9s %8s %8s %8s\n",
        $3, $5, $7 / 1000, $9, $11, $13, $15, $20, $22, $24, $26 }'
done
exit $status
