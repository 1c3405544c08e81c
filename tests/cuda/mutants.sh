#!/bin/sh
# mutants.sh SRCDIR BUILDDIR [--soak N]
# The mutation check of the device kernel's sync points (CTest cuda.emu.mutants). Every sync point
# cuda/coll_kernel.cu (and cuda/coll_kernel_ll.cuh) marks with an id (DEV_SYNCTHREADS, DEV_FLAG_STORE, DEV_FLAG_LOAD,
# DEV_LINE_STORE, DEV_LINE_LOAD, DEV_WAIT) is weakened in turn on the emulated GPU (FAKECUDA_MUTANT:
# no barrier, a relaxed store or load, a low-latency line split into words, a wait deleted), and a few
# short device tests run until one fails: the emulation's memory model (tests/cuda/emu/emu_launch.c)
# must notice every one, or the point is either useless under PTX (remove it from the kernel,
# saying why) or the model too gentle (fix it). The unweakened kernel must then pass each test
# that caught a mutant, with the same seed.
# Beside the kernel's sync points, one host check: the IPC cache's buffer-id check
# (cuda/cuda_ipc_cache.c), deleted in tests/cuda/ipc_cache_mutant, must be caught (freed-mapping).
# Prints a table: mutant, where, the test that caught it or SURVIVED; exits 1 on any survivor.
# --soak N: no mutants; the same tests N times each with new seeds (CTest label soak).
# FAKECUDA_SEED fixes the fibers' schedule (default 1 here; the soak draws its own). A weakened
# run ends at its first failure (MT_FAIL_FAST: tests/mpi/mpitest.c), not after the whole matrix.
src="$1"; build="$2"; shift 2
soak=0
[ "$1" = "--soak" ] && soak="$2"
kernel="$src/cuda/coll_kernel.cu"
run="$build/tests/mpirun.sh"
coll="$build/tests/cuda/cuda_coll"
emu="LD_LIBRARY_PATH=$build/tests/cuda/emu"
topo="$src/tests/topo/fixtures/dgx1-v100.txt"
export PICOLL_STATS=1 PICOLL_WORKSPACE_SIZE=128k PICOLL_NVLINK_ONESHOT_MAX=4k \
    PICOLL_PCIE_ONESHOT_MAX=1G PICOLL_PCIE_IPC_MAX=1G
seed0="${FAKECUDA_SEED:-1}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# the tests, quickest first (the barrier floor's, which only its own kernel's mutants fail, and
# the stream-ordered queue before the slower ones, though only the stream's epoch wait needs it:
# the mutant of that wait runs no test after it), but the last (cuda_coll shuffle: calls drawn
# from FAKECUDA_SEED, so that the soak runs new sequences of calls as well as new schedules):
# name, then the command (run through sh -c); each must end within its limit (a hang counts as
# caught: a GPU would hang too)
tests='barrier.np3|60|'"$run"' 3 --preload env '"$emu $build"'/tests/cuda/barrier_floor
matrix.np2|60|'"$run"' 2 --preload env '"$emu $coll"' matrix --fast
zc.np2|60|env FAKECUDA_FREE_MAPPED=1 PICOLL_CUDA_ZERO_COPY_MIN=64k '"$run"' 2 --preload env '"$emu $coll"' zc
ll.np3|90|env PICOLL_CUDA_LL_MAX=64k '"$run"' 3 --preload env '"$emu $coll"' matrix --fast
queue.np3|30|'"$run"' 3 --preload env '"$emu $build"'/tests/cuda/enqueue --queue
matrix.np3|90|'"$run"' 3 --preload env '"$emu $coll"' matrix --fast
late.np3|60|env PICOLL_TIMEOUT=1 '"$run"' 3 --preload env '"$emu $coll"' late 1 1.5 allreduce
hcm.np8|150|env FAKECUDA_DEVICES=8 PICOLL_TOPO_FILE='"$topo"' PICOLL_TOPO_FILE_GPU=local-rank PICOLL_HCM_ONESHOT_MAX=1G '"$run"' 8 --preload env '"$emu $coll"' matrix --groups 4 --fast
shuffle.np4|90|env PICOLL_CUDA_LL_MAX=16k '"$run"' 4 --preload env '"$emu $coll"' shuffle --calls 150 --stream'

# Where each mutant was last caught (mutant id, test): tried first, so that a mutant does not run
# the tests that pass before its catcher (the check took 152 s of 2 loaded cores in CTest, 50 s
# alone, most of it the passing runs of matrix.np2 and ll.np3 ahead of mutants 5, 8-11 and 14;
# 27 s alone with the hints, 2026-11-29). A hint is only an order: a mutant its hint does not
# catch runs the other tests as before, its catch marked "(hint stale: HINT)" so that the hint is
# mended (some mutants are caught at some schedules only); a sync point without a hint runs them
# all.
hints='5 zc.np2
8 queue.np3
9 ll.np3
10 ll.np3
11 ll.np3
14 zc.np2'

# run_test LIMIT COMMAND: 0 when it passed (stdin closed: mpirun would read the test list)
run_test() {
    timeout -k 5 "$1" sh -c "$2" > "$log" 2>&1 < /dev/null
    rc=$?
    [ $rc = 0 ] && ! grep -q 'FAIL' "$log"
}

# why the test failed, in a few words
reason() {
    if grep -q 'FAIL fakecuda: kernel-race' "$log"; then echo "kernel-race"
    elif grep -q 'FAIL fakecuda' "$log"; then sed -n 's/.*FAIL fakecuda: \([a-z-]*\):.*/\1/p' "$log" | head -n 1
    elif grep -q 'FAIL' "$log"; then echo "wrong result"
    elif [ $rc = 124 ] || [ $rc = 137 ]; then echo "hang"
    else echo "exit $rc"; fi
}

if [ "$soak" != 0 ]; then
    i=0; bad=0
    while [ $i -lt "$soak" ]; do
        seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
        echo "$tests" | while IFS='|' read -r name limit cmd; do
            if ! FAKECUDA_SEED=$seed run_test "$limit" "$cmd"; then
                echo "soak: $name FAILED with FAKECUDA_SEED=$seed ($(reason))"; tail -n 20 "$log"; exit 1
            fi
            echo "soak: $name passed with FAKECUDA_SEED=$seed"
        done || bad=1
        i=$((i + 1))
    done
    [ $bad = 0 ] && echo "mutants.sh: soak passed" && exit 0
    echo "mutants.sh: soak FAILED"; exit 1
fi

export FAKECUDA_SEED="$seed0"
echo "mutants.sh: FAKECUDA_SEED=$FAKECUDA_SEED"

# the sync points: id, line, what (from the source, so that a new one is checked at once)
# (id file line what: the kernel and the headers it includes with modes of their own)
points=$(grep -H -n -o 'DEV_\(SYNCTHREADS\|FLAG_STORE\|FLAG_LOAD\|LINE_STORE\|LINE_LOAD\|WAIT\)([0-9]*' \
             "$kernel" "$src/cuda/coll_kernel_ll.cuh" |
         sed 's/^\([^:]*\):\([0-9]*\):DEV_\([A-Z_]*\)(\([0-9]*\)$/\4 \1 \2 \3/' | sort -n)
if [ -z "$points" ]; then
    echo "mutants.sh: no sync point found in $kernel"; exit 1
fi
printf '%-7s %-44s %s\n' mutant where "caught by"
survivors=0
catchers=""
for id in $(echo "$points" | cut -d' ' -f1 | uniq); do
    file=$(echo "$points" | awk -v id="$id" '$1 == id { print $2; exit }')
    line=$(echo "$points" | awk -v id="$id" '$1 == id { print $3; exit }')
    what=$(echo "$points" | awk -v id="$id" '$1 == id { print $4; exit }')
    # the function around it: the last line opening a __device__ function or a kernel entry
    # (its name at the start of the line) before it
    fn=$(head -n "$line" "$file" | grep -E '^(__device__ [a-z_ ]*)?[a-z_]+\(' | tail -n 1 |
         sed -E 's/^(.* )?([a-z_]+)\(.*/\2/')
    caught=""
    hint=$(echo "$hints" | awk -v id="$id" '$1 == id { print $2 }')
    # a hint that names no test (renamed since) is no hint
    echo "$tests" | cut -d'|' -f1 | grep -q -x -F "${hint:-/}" || hint=""
    stale=""
    for t in $hint $(echo "$tests" | cut -d'|' -f1 | grep -v -x -F "${hint:-/}"); do
        limit=$(echo "$tests" | awk -F'|' -v t="$t" '$1 == t { print $2 }')
        cmd=$(echo "$tests" | awk -F'|' -v t="$t" '$1 == t { print $3 }')
        if ! FAKECUDA_MUTANT=$id MT_FAIL_FAST=1 run_test "$limit" "$cmd"; then
            caught="$t ($(reason))$stale"
            break
        fi
        [ "$t" = "$hint" ] && stale=" (hint stale: $hint)"
    done
    if [ -z "$caught" ]; then
        caught="SURVIVED"
        survivors=$((survivors + 1))
    else
        catchers="$catchers ${caught%% *}"
    fi
    printf '%-7s %-44s %s\n' "$id" "$fn:$line $what" "$caught"
done
# the host's buffer-id check of the IPC cache (cuda/cuda_ipc_cache.c): ipc_cache_mutant is the
# cache built with it deleted; the emulated GPU must end it (rule freed-mapping: a read through a
# mapping of a freed allocation), and the cache as built must pass the same test (below)
cache_test='ipc_cache.np2|60|'"$run"' 2 env '"$emu"' FAKECUDA_FREE_MAPPED=1 PICOLL_CUDA_IPC_CACHE=2 '"$build"'/tests/cuda/ipc_cache'
if [ -x "$build/tests/cuda/ipc_cache_mutant" ]; then
    if ! run_test 60 "$(echo "$cache_test" | cut -d'|' -f3)_mutant" && grep -q 'FAIL fakecuda: freed-mapping' "$log"; then
        caught="ipc_cache.np2 (freed-mapping)"
        catchers="$catchers ipc_cache.np2"
        tests="$tests
$cache_test"
    else
        caught="SURVIVED"
        survivors=$((survivors + 1))
    fi
    printf '%-7s %-44s %s\n' bufid "cuda_ipc_cache.c: the buffer-id check" "$caught"
fi
if [ $survivors != 0 ]; then
    echo "mutants.sh: FAILED: $survivors sync point(s) survived"
    exit 1
fi
# a catch counts only if the unweakened kernel passes the same test with the same seed (the
# suite runs every one of them unweakened too, with other seeds)
for t in $(echo "$catchers" | tr ' ' '\n' | sort -u); do
    limit=$(echo "$tests" | awk -F'|' -v t="$t" '$1 == t { print $2 }')
    cmd=$(echo "$tests" | awk -F'|' -v t="$t" '$1 == t { print $3 }')
    start=$(date +%s)
    if ! run_test "$limit" "$cmd"; then
        echo "mutants.sh: the unweakened kernel fails $t too ($(reason)):"; tail -n 30 "$log"
        echo "mutants.sh: FAILED"; exit 1
    fi
    echo "unweakened: $t passed ($(( $(date +%s) - start )) s)"
done
echo "mutants.sh: passed"
