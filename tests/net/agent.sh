#!/bin/sh
# agent.sh RUNDIR [SSH-OPTIONS] HOST COMMAND...: the launchers' "ssh" between the two hosts that
# tests/net/hosts.sh makes. Runs COMMAND on HOST (h1 or h2) as ssh would, through `sh -c`: in
# HOST's network namespace, with its own UTS namespace (hostname HOST) and IPC namespace (so that
# UCX and the MPIs see two machines, not one), its own PID namespace (a process on one host cannot
# look up the other host's in /proc: a rank that exits on a host behind a downed link is not seen
# to exit, as on two machines), and RUNDIR/hosts over /etc/hosts (in the mount namespace
# `ip netns exec` makes). RUNDIR/ns-HOST names HOST's network namespace.
run="$1"; shift
# hydra passes "-x" (no X11 forwarding) and may pass other ssh options before the host
while [ $# -gt 0 ]; do
    case "$1" in
        -[1246AaCfgKkMNnqsTtVvXxYy]) shift ;;
        -[BbcDEeFIiJLlmOopQRSWw]) shift 2 ;;
        -*) shift ;;
        *) break ;;
    esac
done
host="$1"; shift
if [ ! -f "$run/ns-$host" ]; then
    echo "agent.sh: unknown host '$host' (not one of hosts.sh's)" >&2
    exit 255
fi
ns=$(cat "$run/ns-$host")
# Open MPI quotes its arguments for a remote shell: one more `sh -c` reads them as ssh's would.
# TMPDIR: each host its own /tmp for the launchers' session files, removed with RUNDIR.
exec ip netns exec "$ns" unshare --uts --ipc --pid --fork --mount-proc -- sh -c '
    hostname "$1" && mount --bind "$2/hosts" /etc/hosts || exit 255
    export TMPDIR="$2/tmp-$1"
    shift 2
    exec sh -c "$*"' agent "$host" "$run" "$@"
