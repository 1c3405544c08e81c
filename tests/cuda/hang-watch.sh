#!/usr/bin/env bash
# hang-watch.sh SECONDS OUT COMMAND...: runs COMMAND; if it still runs after SECONDS, writes to
# OUT what each of its processes' threads waits in (name, state, kernel wait channel from /proc)
# and nvidia-smi's view, then waits for COMMAND to end (its own timeouts end it). For the GPU
# lease (gpu-lease.sh torchhang): what a hung job's ranks do, without a debugger on the machine.
set -u
after=$1 out=$2
shift 2
"$@" &
job=$!
# every process below pid, depth first
descendants() {
    local c
    for c in $(pgrep -P "$1"); do
        echo "$c"
        descendants "$c"
    done
}
for _ in $(seq "$after"); do
    sleep 1
    kill -0 "$job" 2>/dev/null || break
done
if kill -0 "$job" 2>/dev/null; then
    {
        echo "still running after $after s: $*"
        for pid in $(descendants "$job"); do
            [ -r "/proc/$pid/status" ] || continue
            echo "== pid $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" | cut -c1-200)"
            for t in /proc/"$pid"/task/*; do
                echo "  $(basename "$t") $(cat "$t/comm") $(awk '{print $3}' "$t/stat") $(cat "$t/wchan" 2>/dev/null)"
            done
        done
        nvidia-smi 2>&1 | tail -15
    } > "$out" 2>&1
fi
wait "$job"
