#!/usr/bin/env bash
# gpu-lease.sh BUILD_DIR LOG_DIR SECONDS ARCHIVE [STEP...]: what a short lease of a GPU machine is
# for, step by step, each under its own time limit, so that a lease cut short still leaves the
# first steps' logs. The steps, in the order given (default: all, in this order):
#   tests      run-gpu.sh --no-emu: the GPU tests, then compute-sanitizer memcheck and racecheck
#   allreduce  the latency table: osu-bench's driver, CUDA buffers, staged MPI / picoll / NCCL
#              per round, allreduce MPI_FLOAT at np 2 and 4, 8 B to 16 MiB
#   before     the same allreduce rows with another libpicoll.so preloaded (LEASE_BEFORE_LIB,
#              e.g. a build of an older commit): before/after figures of a change, same machine
#   torch      picoll_torch built against the machine's PyTorch, its CUDA tests (tests/torch/
#              test_cuda.py, graph capture included) and torch_bench.py on CUDA tensors, np 2 and 4
#   enqueue    the stream-ordered tests alone (ctest -R '^cuda\.enqueue\.'), kernels on the
#              stream and the progress thread's path
#   stream     osu_allreduce --enqueue --graph beside the blocking call, np 2 and 4
#   gather     the driver's table for allgather and alltoall (MPI_CHAR), np 2 and 4, 8 B to 4 MiB
#   hier       between virtual nodes of 2 ranks at np 4 (issue 24): cuda_coll's matrix on the device
#              hierarchy, then osu_allreduce A/B (staged MPI / picoll) with the device hierarchy,
#              the staged host hierarchy pipelined, and the same copying the whole buffer first
#   hiercheck  cuda_coll's matrix on the device hierarchy at np 4, 5 (nodes of 3 and 2) and 6
#   hierchunk  the device hierarchy's allreduce at 4 and 16 MiB (np 4, virtual nodes of 2) for
#              PICOLL_HIER_CUDA_CHUNK 256k, 1M, 4M x PICOLL_STAGE_DEPTH 0, 1, 2, 4
#   hierhosts  the same allreduce A/B between the two network-namespace hosts of tests/net/hosts.sh
#              (2+2 ranks, the GPU shared under MPS, the network step over the veth): the device
#              hierarchy and the whole-buffer staging it replaced, 1 to 16 MiB
#   fixed      the device matrix at np 2 and 4 alone (cuda.matrix.np2/np4): the kernel entries of
#              fixed type, op and rank count (float and double sums on 2 and 4 ranks) on the GPU
#   libab      osu_allreduce on device buffers (blocking, enqueued, graph) at np 2 and 4 with
#              LEASE_BEFORE_LIB and with this build's library, turn about, twice
#   fixedab    osu_allreduce on device buffers at np 2 and 4 with PICOLL_CUDA_FIXED=0 (the generic
#              kernel) and 1 (the entries), turn about, twice: their A/B in one lease
#   floor      osu-bench --floor (issue 40): the GPU's floor in the same job (an empty kernel
#              launched and waited for, queued on the stream, a copy of the bytes each call must
#              move) beside allreduce (8 B to 16 MiB), allgather and alltoall (8 B to 4 MiB),
#              blocking, enqueued and graph-launched, at np 2 and 4, each row with its ratios
#   floor50    issue 50, items 3 and 4: osu_allreduce on device buffers, MPI_CHAR (OSU's default)
#              8 B to 2 MiB, at np 2, 4 and 8, with --floor's barrier floor (picoll_device_barrier_floor:
#              blocking, enqueued, graph-launched; each row's ratios to it) beside the blocking,
#              enqueued and graph columns, and --osu-timing (each call alone between two
#              MPI_Barrier calls, -c's buffer fills and warm-up calls on other buffers) beside the
#              back-to-back blocking column. About 3 minutes.
#   drv50      issue 50, item 3: what each driver call picoll makes around a call costs the host
#              (tests/cuda/drvcost: cuCtxPushCurrent/Pop, cuPointerGetAttribute, the 7-attribute
#              query, cuStreamIsCapturing, event record, wait and query), 1 process, then 4 at
#              once (MPS clients of the one GPU). About 30 s.
#   zc50       issue 50, items 1 and 5: the zero-copy path (PICOLL_CUDA_ZERO_COPY=on, the IPC
#              cache) against the copy path (off), turn about, osu-bench --floor 1 to 64 MiB:
#              allreduce at np 2, 4 and 8 (two rounds), allgather and alltoall 256 KiB to 16 MiB
#              blocks at np 2 and 4; then cuda.zc.* (the matrix on the cache, the end of a call
#              with picoll's allocator). About 10 minutes at most; LEASE_ZC_TURNS="off on" and
#              LEASE_ZC_NPS="2 8" make it about 4.
#   torch50    issue 50: a 25 MiB all_reduce, reduce_scatter_tensor and all_gather_into_tensor
#              through picoll_torch from picoll_torch.mem_pool() (zero-copy) against PyTorch's
#              allocator, np 2 and 4 (tests/torch/zc_pool.py).
#   zcmiss     issue 50: what a miss of the zero-copy path's IPC cache costs against the copy it
#              saves: cuda_coll zcmiss (allreduces of fresh buffers, then of reused ones, 1 to
#              64 MiB) with PICOLL_CUDA_ZERO_COPY=off, on and reused (a buffer met once copied),
#              turn about (LEASE_ZCMISS_TURNS, default "off on reused reused on off"), np 2
#              and 4. About 4 minutes; 2 with LEASE_ZCMISS_TURNS="off on reused".
#   envab      a variable's A/B: allreduce and allgather (LEASE_AB_COLLS) 8 B to 64 KiB with --floor,
#              --enqueue and --graph at np 2 and 4 with LEASE_AB_VAR (default PICOLL_CUDA_FENCES)
#              set to each of LEASE_AB_VALUES (default "all needed"), turn about, LEASE_AB_ROUNDS
#              times (default 2); e.g. PICOLL_CUDA_SMALL_THREADS with "0 32"
#   ll         issue 40's low-latency lines (PICOLL_CUDA_LL_MAX): cuda_coll's matrix and the
#              40-call enqueued queue with them on the GPU, then envab's A/B of "0 64k" (allreduce)
#   torch49    issue 49's table: torch_bench (8 B, 64 KiB, 2 MiB, 16 MiB, nccl(1) beside) for a
#              group of one, np 2 auto/caller, np 4 auto, blocking at np 2 and 4; test_cuda.py and
#              test_train_cuda.py (DDP, FSDP) at np 2 and 4; cuda.enqueue.np2; then the np 4 hang:
#              the default stream's kernels and the group's stream at np 4, each also with half the
#              blocks (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12). About 9 minutes with the build.
#   torchhang  the group stream's hang at np 4 (docs/torch.md): test_cuda.py on the group's stream
#              under LEASE_TORCH_ENV, with picoll naming late ranks after 10 s, its Python stacks
#              dumped at 40 s and every rank's threads' kernel waits (wchan) at 30 s
#              (hang-watch.sh); builds picoll_torch first where the torch step has not
#   hang49     issue 49's np 4 hang: enqueue --big (the C path) at np 4 with and without a cap on
#              the blocks per launch (PICOLL_CUDA_BLOCKS), the cap's cost (osu_allreduce
#              enqueued), torch_bench and the DDP step at np 4 with it. About 6 minutes.
#   fix49      the fix of issue 49's np 4 hang with no variable set: enqueue --big, torch_bench
#              ("auto" twice, "group"), test_cuda.py, the DDP/FSDP steps at np 4. About 4 minutes.
#   share8     issue 49 beyond 4 ranks a GPU: 8 ranks on one GPU with the default stream on the
#              kernels (PICOLL_STREAM_DEFAULT_SHARING=8): enqueue --big twice, torch_bench and the
#              DDP/FSDP steps at np 8. About 3 minutes.
#   table49    issue 49's table with the fix: a group of one, np 2 and 4, back to back and
#              --blocking, nccl(1) beside; np 2 and 4 with PICOLL_CUDA_ZERO_COPY=reused. About 4
#              minutes.
#   verify51   issue 51's splits on the GPU: cuda.matrix.np2, cuda.enqueue.np2, enqueue --big at
#              np 4, test_cuda.py at np 2 and 4, test_train_cuda.py at np 4. About 2 minutes.
#   hierblocks cuda_coll's matrix at np 6 (2 virtual nodes of 3), osu_allgather and osu_alltoall
#              A/B (np 4, virtual nodes of 2) with the device hierarchy and the staged host one
# First, always: the machine (nvidia-smi, the OS) into machine.log, and an MPS control daemon
# for ranks sharing the GPU (unless CUDA_MPS_PIPE_DIRECTORY is set), stopped at the end.
# SECONDS bounds the whole. ARCHIVE is a .tar.gz of LOG_DIR written anew after every step (one
# file to fetch, however many logs). Made for a machine without MPI: see gpu-bundle.sh.
set -u
build=$(cd "$1" && pwd)
logs=$(mkdir -p "$2" && cd "$2" && pwd)
budget=$3
archive=$4
shift 4
steps=${*:-tests allreduce before stream gather}
src=$(cd "$(dirname "$0")/../.." && pwd)
t0=$(date +%s)
left() { echo $((budget - ($(date +%s) - t0))); }
# step NAME SECONDS COMMAND...: runs COMMAND with its output in LOG_DIR/NAME.log, for at most
# SECONDS or what is left of the budget, whichever is less
step() {
    local name=$1 limit=$2; shift 2
    local l; l=$(left)
    [ "$l" -lt "$limit" ] && limit=$l
    if [ "$limit" -le 5 ]; then echo "gpu-lease.sh: $name: no time left" | tee -a "$logs/steps.log"; return; fi
    local s; s=$(date +%s)
    echo "== $name (at most $limit s)"
    timeout -k 5 "$limit" "$@" > "$logs/$name.log" 2>&1
    local rc=$?
    echo "== $name: exit $rc after $(( $(date +%s) - s )) s" | tee -a "$logs/steps.log"
    tar -czf "$archive" -C "$logs" .
}

{ date -u; nvidia-smi; nvidia-smi topo -m; cat /etc/os-release; ldd --version | head -1; nproc
  command -v ctest python3 nvidia-cuda-mps-control; } > "$logs/machine.log" 2>&1
nvidia-smi -L
mps_started=0
if [ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/picoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/picoll-mps/log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d && mps_started=1 && echo "gpu-lease.sh: MPS control daemon started"
fi
export PICOLL_HOST=on
bench="$build/osu-bench"
# env_ab VAR "VALUES" "COLLS" ROUNDS: osu-bench on device buffers 8 B to 64 KiB with the floor,
# enqueued and graph-launched, at np 2 and 4, with VAR set to each value in turn, ROUNDS times
env_ab() {
    local var=$1 values=$2 colls=$3 rounds=$4 round v c np
    for round in $(seq "$rounds"); do
        for v in $values; do
            for c in $colls; do
                for np in 2 4; do
                    step envab-$c-$v-np$np-$round 40 env "$var=$v" "$build/tests/mpirun.sh" \
                        $np --preload "$bench/osu_$c" -d cuda --ab=3 --enqueue --graph --floor \
                        -c -T mpi_float -m 8:64K --factor 8
                done
            done
        done
    done
}
site=/tmp/picoll-torch-site
py=$(command -v python3)
# torch_site [SECONDS]: picoll_torch built against the machine's own PyTorch into $site (no
# package registry: no build isolation; once a lease, the later steps find it), and $site on
# PYTHONPATH
torch_site() {
    if [ ! -d "$site/picoll_torch" ]; then
        step torch-build "${1:-240}" env PICOLL_TORCH_DIR="$build" "$py" -m pip install \
            --no-build-isolation --no-deps --target "$site" -v "$src/torch"
    fi
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
}
for s in $steps; do
    case $s in
    tests)
        step tests 300 bash "$src/tests/cuda/run-gpu.sh" --no-emu "$build"
        cp "$build"/run-gpu-*.log "$logs/" 2>/dev/null
        grep -E "^run-gpu.sh|tests passed|tests failed|\(Failed\)|\*\*\*|Not Run|SUMMARY" "$logs/tests.log" ;;
    fixed)
        step fixed 150 bash -c "cd '$build' && ctest -R '^cuda\.matrix\.np[24]\$' --output-on-failure"
        grep -E "tests passed|tests failed|\(Failed\)|\*\*\*" "$logs/fixed.log" ;;
    allreduce)
        step allreduce 150 python3 "$src/osu-bench/driver.py" --build-dir "$build" --np 2,4 \
            --colls allreduce --mem cuda --sizes 8:16M --factor 4 --rounds 4 --no-osu --no-osu-type \
            --no-plots --out "$logs/allreduce" ;;
    before)
        if [ -z "${LEASE_BEFORE_LIB:-}" ]; then echo "gpu-lease.sh: before: LEASE_BEFORE_LIB unset"; continue; fi
        for np in 2 4; do
            step before-np$np 60 "$build/tests/mpirun.sh" $np env LD_PRELOAD="$LEASE_BEFORE_LIB" \
                "$bench/osu_allreduce" -d cuda --ab=3 -c -T mpi_float -m 8:16M
        done ;;
    fixedab)
        # the same calls on the generic kernel (PICOLL_CUDA_FIXED=0) and on the entries, turn
        # about, in one lease: what the entries gain on this machine
        for round in 1 2; do
            for on in 0 1; do
                for np in 2 4; do
                    step fixedab-$on-np$np-$round 60 env PICOLL_CUDA_FIXED=$on "$build/tests/mpirun.sh" $np \
                        --preload "$bench/osu_allreduce" -d cuda --ab=3 -c -T mpi_float -m 8:16M
                done
            done
        done ;;
    libab)
        # a change's before/after in one lease: the same calls (blocking, enqueued and graph-launched,
        # A/B against staged MPI) with the library of another build (LEASE_BEFORE_LIB) and with
        # this build's, turn about, twice
        if [ -z "${LEASE_BEFORE_LIB:-}" ]; then echo "gpu-lease.sh: libab: LEASE_BEFORE_LIB unset"; continue; fi
        for round in 1 2; do
            for which in before after; do
                lib="$build/.libs/libpicoll.so"; [ $which = before ] && lib=$LEASE_BEFORE_LIB
                for np in 2 4; do
                    step libab-$which-np$np-$round 60 "$build/tests/mpirun.sh" $np env LD_PRELOAD="$lib" \
                        "$bench/osu_allreduce" -d cuda --ab=3 --enqueue --graph -c -T mpi_float -m 8:16M
                done
            done
        done ;;
    torch)
        # picoll_torch (docs/torch.md): built here against the machine's own PyTorch (no package
        # registry: no build isolation, into a folder of its own on PYTHONPATH), then the
        # all_reduce benchmark on CUDA tensors (picoll against gloo, which stages them through the
        # host; nccl where it starts) and the CUDA tensors' tests with graph capture, np 2 then 4
        # (LEASE_TORCH_NPS), each under LEASE_TORCH_ENV (e.g. CUDA_DEVICE_MAX_CONNECTIONS=32).
        # The Python by its path: mpirun, started by its path, puts its own folder first on the
        # ranks' PATH.
        step torch-build 300 env PICOLL_TORCH_DIR="$build" "$py" -m pip install --no-build-isolation \
            --no-deps --target "$site" -v "$src/torch"
        export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
        for np in ${LEASE_TORCH_NPS:-2 4}; do
            step torch-bench-np$np 90 env ${LEASE_TORCH_ENV:-} "$build/tests/mpirun.sh" $np "$py" \
                "$src/osu-bench/torch_bench.py" --device cuda --max 16M --rounds 3 \
                --json "$logs/torch-bench-np$np.json"
            step torch-cuda-np$np 60 env ${LEASE_TORCH_ENV:-} "$build/tests/mpirun.sh" $np "$py" \
                "$src/tests/torch/test_cuda.py" --backend picoll
            grep -E "passed|FAIL|Error|error|still waiting" "$logs/torch-cuda-np$np.log" | head -8
        done ;;
    floor)
        for np in 2 4; do
            step floor-allreduce-np$np 75 "$build/tests/mpirun.sh" $np --preload \
                "$bench/osu_allreduce" -d cuda --ab=3 --enqueue --graph --floor -c -T mpi_float \
                -m 8:16M --factor 4
            for c in allgather alltoall; do
                step floor-$c-np$np 60 "$build/tests/mpirun.sh" $np --preload "$bench/osu_$c" \
                    -d cuda --ab=3 --enqueue --graph --floor -c -T mpi_char -m 8:4M --factor 8
            done
        done
        grep -h "^# floor: \|^# floor: skipped" "$logs"/floor-*.log | head -6 ;;
    floor50)
        for np in 2 4 8; do
            step floor50-np$np 90 "$build/tests/mpirun.sh" $np --preload "$bench/osu_allreduce" \
                -d cuda --ab=3 --enqueue --graph --floor --osu-timing -c -T mpi_char -m 8:2M \
                --factor 4
        done
        grep -h "^# barrier floor\|^# osu timing\|^8 " "$logs"/floor50-*.log | cut -c1-200 | head -24 ;;
    drv50)
        for np in 1 4; do
            step drv50-np$np 60 "$build/tests/mpirun.sh" $np "$build/tests/cuda/drvcost" --iters 20000
        done
        grep -h "^drvcost:" "$logs"/drv50-*.log | cut -c1-160 | head -24 ;;
    zc50)
        # issue 50 item 5: the zero-copy path (through the IPC cache: the benchmark's buffers are
        # not registered) against the copy path, turn about in one job each, 1 to 64 MiB, with
        # the copy floor; then the GPU twins of the emulated zero-copy tests
        # (--floor needs --ab: one round, the staged MPI beside; LEASE_ZC_TURNS and LEASE_ZC_NPS
        # shorten it for a lease shared with other steps, e.g. "off on" and "2 8")
        n=0
        for np in ${LEASE_ZC_NPS:-2 4 8}; do
            for v in ${LEASE_ZC_TURNS:-off on off on}; do
                n=$((n + 1))
                step zc50-allreduce-$v-np$np-$n 45 env PICOLL_CUDA_ZERO_COPY=$v \
                    PICOLL_NVLINK_TWOSHOT_MAX=1G "$build/tests/mpirun.sh" $np --preload \
                    "$bench/osu_allreduce" -d cuda --ab=1 --floor -c -T mpi_float -m 1M:64M \
                    --factor 4
            done
        done
        for c in allgather alltoall; do
            for np in 2 4; do
                for v in off on; do
                    step zc50-$c-$v-np$np 45 env PICOLL_CUDA_ZERO_COPY=$v \
                        PICOLL_NVLINK_IPC_MAX=1G "$build/tests/mpirun.sh" $np --preload \
                        "$bench/osu_$c" -d cuda --ab=1 --floor -c -T mpi_char -m 256K:16M \
                        --factor 4
                done
            done
        done
        step zc50-tests 200 bash -c "cd '$build' && ctest -R '^cuda\.(zc|enqueue\.zc)\.' --output-on-failure"
        grep -h "^[0-9]\|tests passed\|Failed" "$logs"/zc50-*.log | cut -c1-160 | head -60 ;;
    zcmiss)
        # issue 50: a cache miss (cuIpcGetMemHandle at the owner, cuIpcOpenMemHandle at every
        # peer, each call of fresh buffers) against the copy it saves; reused buffers beside
        for np in 2 4; do
            for v in ${LEASE_ZCMISS_TURNS:-off on reused reused on off}; do
                step zcmiss-$v-np$np 60 env PICOLL_STATS=1 PICOLL_CUDA_ZERO_COPY=$v \
                    PICOLL_NVLINK_TWOSHOT_MAX=1G "$build/tests/mpirun.sh" $np --preload \
                    "$build/tests/cuda/cuda_coll" zcmiss --calls 10
            done
        done
        grep -h "zcmiss:\|zero-copy" "$logs"/zcmiss-*.log | head -40 ;;
    torch50)
        # issue 50's done-when: a 25 MiB all_reduce through picoll_torch from picoll's allocator
        # (picoll_torch.mem_pool()) on the zero-copy path, against PyTorch's own allocator, turn
        # about, at np 2 and 4 (tests/torch/zc_pool.py); then again with
        # PICOLL_CUDA_ZERO_COPY=reused, where PyTorch's own tensors take the path from their
        # second call (the "default" rows of round 1)
        torch_site
        for np in 2 4; do
            step torch50-np$np 60 env PICOLL_STATS=1 PICOLL_TIMEOUT=10 "$build/tests/mpirun.sh" \
                $np "$py" "$src/tests/torch/zc_pool.py"
            step torch50-reused-np$np 60 env PICOLL_STATS=1 PICOLL_TIMEOUT=10 \
                PICOLL_CUDA_ZERO_COPY=reused "$build/tests/mpirun.sh" $np "$py" \
                "$src/tests/torch/zc_pool.py"
        done
        grep -h "zc_pool\|cuda_zc" "$logs"/torch50-*.log | head -16 ;;
    envab)
        env_ab "${LEASE_AB_VAR:-PICOLL_CUDA_FENCES}" "${LEASE_AB_VALUES:-all needed}" \
            "${LEASE_AB_COLLS:-allreduce allgather}" "${LEASE_AB_ROUNDS:-2}" ;;
    ll)
        # issue 40's low-latency lines: right on the GPU first (cuda_coll's matrix with every
        # allreduce up to 4 KiB on the lines, np 2 and 4; the 40-call queue of enqueued 16 KiB
        # calls), then their A/B against one-shot's flags (PICOLL_CUDA_LL_MAX 0 and 64k: every
        # size of the table up to 64 KiB), allreduce with the floor, blocking, enqueued and
        # graph-launched, np 2 and 4, turn about, twice
        for np in 2 4; do
            step ll-matrix-np$np 120 env PICOLL_STATS=1 PICOLL_WORKSPACE_SIZE=128k \
                PICOLL_NVLINK_ONESHOT_MAX=4k PICOLL_PCIE_ONESHOT_MAX=1G PICOLL_PCIE_IPC_MAX=1G \
                PICOLL_CUDA_LL_MAX=4k "$build/tests/mpirun.sh" $np --preload \
                "$build/tests/cuda/cuda_coll" matrix --fast
        done
        step ll-queue-np3 60 env PICOLL_STATS=1 PICOLL_WORKSPACE_SIZE=1M PICOLL_CUDA_LL_MAX=16k \
            "$build/tests/mpirun.sh" 3 --preload "$build/tests/cuda/enqueue" --queue
        grep -hE "passed|FAIL|cuda_ll" "$logs"/ll-*.log | head -12
        env_ab PICOLL_CUDA_LL_MAX "0 64k" allreduce 2 ;;
    torchhang)
        torch_site 300
        step torchhang-np4 75 bash "$src/tests/cuda/hang-watch.sh" 30 "$logs/torchhang-wchan.txt" \
            env ${LEASE_TORCH_ENV:-} TORCH_TEST_CUDA_STREAM=group PICOLL_TIMEOUT=10 \
            "$build/tests/mpirun.sh" 4 "$py" "$src/tests/torch/test_cuda.py" --timeout 40
        grep -E "passed|FAIL|still waiting|File" "$logs/torchhang-np4.log" | head -20 ;;
    torch49)
        # issue 49 in one job: the per-call table (all_reduce of float32 CUDA tensors at 8 B,
        # 64 KiB, 2 MiB and 16 MiB, back to back and --blocking, beside gloo, the staged MPI and
        # NCCL's process group of one rank, nccl(1)) for a group of one, np 2 "auto" (group) and
        # "caller" (the default stream's kernels), np 4 "auto" (caller: the default stream staged
        # where more than PICOLL_STREAM_DEFAULT_SHARING=2 ranks share the GPU); the CUDA tests
        # (graph capture included) and the DDP/FSDP steps at np 2 and 4; cuda.enqueue.np2 (the
        # default streams, a communicator of one); then the np 4 hang (docs/torch.md): the default
        # stream's kernels at np 4 (PICOLL_STREAM_DEFAULT_SHARING=4) and the group's stream, each
        # as it is and with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12 (half the blocks per launch: the
        # four ranks' kernels no longer fill the GPU), stacks at 25 s, late ranks named at 5 s
        torch_site
        tb() { # NAME NP LIMIT ENV... -- BENCH-ARGS...
            local name=$1 np=$2 limit=$3; shift 3
            local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
            step "t49-$name" "$limit" env "${envs[@]}" PICOLL_TIMEOUT=5 "$build/tests/mpirun.sh" \
                $np "$py" "$src/osu-bench/torch_bench.py" --device cuda --sizes 8,64K,2M,16M \
                --rounds 3 --seconds 0.02 --timeout 25 --json "$logs/t49-$name.json" "$@"
        }
        tb np2-auto 2 40 TORCH_TEST_CUDA_STREAM=auto --
        tb np2-caller 2 40 TORCH_TEST_CUDA_STREAM=caller --
        tb np1 1 40 TORCH_TEST_CUDA_STREAM=auto --
        tb np4-auto 4 60 TORCH_TEST_CUDA_STREAM=auto --
        tb np2-auto-blocking 2 40 TORCH_TEST_CUDA_STREAM=auto -- --blocking
        tb np2-caller-blocking 2 40 TORCH_TEST_CUDA_STREAM=caller -- --blocking
        tb np4-auto-blocking 4 60 TORCH_TEST_CUDA_STREAM=auto -- --blocking
        for np in 2 4; do
            step t49-cuda-np$np 60 env PICOLL_TIMEOUT=5 "$build/tests/mpirun.sh" $np "$py" \
                "$src/tests/torch/test_cuda.py" --backend picoll --timeout 50
            step t49-train-np$np 60 env PICOLL_TIMEOUT=5 "$build/tests/mpirun.sh" $np "$py" \
                "$src/tests/torch/test_train_cuda.py" --backend picoll --timeout 50
        done
        step t49-enqueue 60 sh -c "cd '$build' && ctest --output-on-failure -R '^cuda\.enqueue\.np2\$'"
        tb np4-default-kernels 4 40 TORCH_TEST_CUDA_STREAM=caller PICOLL_STREAM_DEFAULT_SHARING=4 --
        tb np4-default-kernels-pct12 4 40 TORCH_TEST_CUDA_STREAM=caller \
            PICOLL_STREAM_DEFAULT_SHARING=4 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12 --
        tb np4-group 4 40 TORCH_TEST_CUDA_STREAM=group --
        tb np4-group-pct12 4 40 TORCH_TEST_CUDA_STREAM=group CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12 --
        grep -hE "passed|FAIL|still waiting|Error|ms a step" "$logs"/t49-*.log | head -30 ;;
    hang49)
        # issue 49's np 4 hang (the default stream's kernels at 16 MiB): is it picoll's C path
        # (tests/cuda/enqueue --big: six in-place float allreduces of 16 MiB back to back on the
        # legacy stream, 4 ranks on the GPU), and does it go with fewer blocks per launch
        # (PICOLL_CUDA_BLOCKS; the workspace's budget in the debug line)? Then the cost of a cap
        # (osu_allreduce enqueued, np 2 and 4), and torch (the default stream's kernels at np 4
        # and the DDP step) with the cap. About 6 minutes with the torch build.
        big() { # NAME ENV...
            local name=$1; shift
            step "h49-big-$name" 20 env PICOLL_STREAM_DEFAULT_SHARING=4 PICOLL_TIMEOUT=5 "$@" \
                "$build/tests/mpirun.sh" 4 --preload "$build/tests/cuda/enqueue" --big 4194304 6
        }
        big b0-1 PICOLL_LOG_LEVEL=debug
        big b0-2
        big b0-3
        big b32-1 PICOLL_CUDA_BLOCKS=32
        big b32-2 PICOLL_CUDA_BLOCKS=32
        big b48 PICOLL_CUDA_BLOCKS=48
        big b16 PICOLL_CUDA_BLOCKS=16
        big pct12 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12
        grep -h "device workspace on" "$logs/h49-big-b0-1.log" | head -2
        grep -hE "passed|FAIL|still waiting" "$logs"/h49-big-*.log | sort | uniq -c | head -20
        for np in 2 4; do
            for b in 0 32; do
                step "h49-osu-np$np-b$b" 30 env PICOLL_CUDA_BLOCKS=$b PICOLL_TIMEOUT=5 \
                    "$build/tests/mpirun.sh" $np --preload "$bench/osu_allreduce" -d cuda --ab=3 \
                    --enqueue -c -T mpi_float -m 1M:64M
            done
        done
        torch_site
        for b in 32 0; do
            step "h49-tb-np4-default-b$b" 35 env TORCH_TEST_CUDA_STREAM=caller \
                PICOLL_STREAM_DEFAULT_SHARING=4 PICOLL_CUDA_BLOCKS=$b PICOLL_TIMEOUT=5 \
                "$build/tests/mpirun.sh" 4 "$py" "$src/osu-bench/torch_bench.py" --device cuda \
                --sizes 2M,16M,64M --rounds 3 --seconds 0.02 --timeout 25 --no-nccl1 \
                --json "$logs/h49-tb-np4-default-b$b.json"
        done
        step h49-train-np4-default-b32 40 env TORCH_TEST_CUDA_STREAM=caller \
            PICOLL_STREAM_DEFAULT_SHARING=4 PICOLL_CUDA_BLOCKS=32 PICOLL_TIMEOUT=5 \
            "$build/tests/mpirun.sh" 4 "$py" "$src/tests/torch/test_train_cuda.py" \
            --backend picoll --timeout 30
        step h49-tb-np4-group-b32 35 env TORCH_TEST_CUDA_STREAM=group PICOLL_CUDA_BLOCKS=32 \
            PICOLL_TIMEOUT=5 "$build/tests/mpirun.sh" 4 "$py" "$src/osu-bench/torch_bench.py" \
            --device cuda --sizes 2M,16M,64M --rounds 3 --seconds 0.02 --timeout 25 --no-nccl1
        grep -hE "passed|FAIL|still waiting|MiB" "$logs"/h49-*.log | cut -c1-160 | head -40 ;;
    fix49)
        # issue 49's fix at np 4 on one GPU, with no variable set: launches of half the GPU's
        # blocks over the ranks sharing it (33 on an H100/H200 at np 4) and the default stream on
        # the kernels there (PICOLL_STREAM_DEFAULT_SHARING 4): enqueue --big twice, torch_bench
        # "auto" (= caller) twice and "group", test_cuda.py and the DDP/FSDP steps. About 4
        # minutes with the torch build.
        for i in 1 2; do
            step "f49-big-$i" 20 env PICOLL_TIMEOUT=5 PICOLL_LOG_LEVEL=debug "$build/tests/mpirun.sh" 4 \
                --preload "$build/tests/cuda/enqueue" --big 4194304 6
        done
        grep -h "device workspace on" "$logs/f49-big-1.log" | head -1
        torch_site
        for run in auto-1 auto-2 group; do
            step "f49-tb-np4-$run" 40 env TORCH_TEST_CUDA_STREAM=${run%-*} PICOLL_TIMEOUT=5 \
                "$build/tests/mpirun.sh" 4 "$py" "$src/osu-bench/torch_bench.py" --device cuda \
                --sizes 8,64K,2M,16M,64M --rounds 3 --seconds 0.02 --timeout 30 \
                --json "$logs/f49-tb-np4-$run.json"
        done
        step f49-train-np4 40 env PICOLL_TIMEOUT=5 "$build/tests/mpirun.sh" 4 "$py" \
            "$src/tests/torch/test_train_cuda.py" --backend picoll --timeout 30
        step f49-cuda-np4 40 env PICOLL_TIMEOUT=5 "$build/tests/mpirun.sh" 4 "$py" \
            "$src/tests/torch/test_cuda.py" --backend picoll --timeout 30
        grep -hE "passed|FAIL|still waiting|MiB|KiB| 8 B|ms a step|DDP|FSDP" "$logs"/f49-*.log |
            cut -c1-200 | head -40 ;;
    share8)
        # issue 49 item 2 beyond 4 ranks a GPU: 8 ranks on one GPU with the default stream on
        # picoll's kernels (PICOLL_STREAM_DEFAULT_SHARING=8; the default, 4, stages it there),
        # each launch half the GPU's resident blocks over the ranks sharing it (16 on an
        # H100/H200): enqueue --big twice (six in-place 16 MiB allreduces back to back on the
        # legacy stream), then torch_bench on the caller's stream and the DDP/FSDP steps at np 8.
        # Where all pass, the default can go to 8. About 3 minutes with the torch build.
        for i in 1 2; do
            step "s8-big-$i" 30 env PICOLL_STREAM_DEFAULT_SHARING=8 PICOLL_TIMEOUT=5 \
                PICOLL_LOG_LEVEL=debug "$build/tests/mpirun.sh" 8 --preload \
                "$build/tests/cuda/enqueue" --big 4194304 6
        done
        grep -h "device workspace on" "$logs/s8-big-1.log" | head -1
        torch_site
        step s8-tb-np8 60 env TORCH_TEST_CUDA_STREAM=caller PICOLL_STREAM_DEFAULT_SHARING=8 \
            PICOLL_TIMEOUT=5 "$build/tests/mpirun.sh" 8 "$py" "$src/osu-bench/torch_bench.py" \
            --device cuda --sizes 8,64K,2M,16M --rounds 3 --seconds 0.02 --timeout 40 \
            --json "$logs/s8-tb-np8.json"
        step s8-train-np8 60 env TORCH_TEST_CUDA_STREAM=caller PICOLL_STREAM_DEFAULT_SHARING=8 \
            PICOLL_TIMEOUT=5 "$build/tests/mpirun.sh" 8 "$py" \
            "$src/tests/torch/test_train_cuda.py" --backend picoll --timeout 40
        grep -hE "passed|FAIL|still waiting|MiB|KiB| 8 B|ms a step|DDP|FSDP" "$logs"/s8-*.log |
            cut -c1-200 | head -40 ;;
    table49)
        # issue 49's table in one job with the code of its fix ("auto" = the caller's stream
        # wherever ranks share the GPU, its default stream on the kernels at 2 and 4 ranks): a
        # group of one, np 2 and np 4, back to back and --blocking, nccl(1) beside each; then np 2
        # and 4 back to back with PICOLL_CUDA_ZERO_COPY=reused (torch_bench's tensors are the same
        # at every call: 2 and 16 MiB on the zero-copy path from the second call, issue 49's 16 MiB
        # np 4 against np 2 without the copies). About 4 minutes with the torch build.
        torch_site
        for run in 1 2 2-blocking 4 4-blocking 2-reused 4-reused; do
            step "t49b-np$run" 40 env PICOLL_TIMEOUT=5 \
                $([ "${run#*-}" = reused ] && echo PICOLL_CUDA_ZERO_COPY=reused) \
                "$build/tests/mpirun.sh" "${run%-*}" \
                "$py" "$src/osu-bench/torch_bench.py" --device cuda --sizes 8,64K,2M,16M \
                --rounds 3 --seconds 0.02 --timeout 30 --json "$logs/t49b-np$run.json" \
                $([ "${run#*-}" = blocking ] && echo --blocking)
        done
        grep -hE "torch_bench:| 8 B|KiB|MiB" "$logs"/t49b-*.log | cut -c1-200 | head -60 ;;
    verify51)
        # issue 51's splits on the GPU (the executor by concept, the check family, picoll_torch's
        # one dispatcher): cuda.matrix.np2 and cuda.enqueue.np2, enqueue --big at np 4, then
        # test_cuda.py at np 2 and 4 and test_train_cuda.py at np 4. About 2 minutes with the
        # torch build.
        step v51-ctest 90 sh -c "cd '$build' && ctest --output-on-failure -R '^cuda\.(matrix|enqueue)\.np2\$'"
        step v51-big-np4 20 env PICOLL_TIMEOUT=5 "$build/tests/mpirun.sh" 4 --preload \
            "$build/tests/cuda/enqueue" --big 4194304 6
        torch_site
        for np in 2 4; do
            step v51-cuda-np$np 40 env PICOLL_TIMEOUT=5 "$build/tests/mpirun.sh" $np "$py" \
                "$src/tests/torch/test_cuda.py" --backend picoll --timeout 30
        done
        step v51-train-np4 40 env PICOLL_TIMEOUT=5 "$build/tests/mpirun.sh" 4 "$py" \
            "$src/tests/torch/test_train_cuda.py" --backend picoll --timeout 30
        grep -hE "tests passed|tests failed|passed|FAIL|still waiting" "$logs"/v51-*.log | head -20 ;;
    enqueue)
        step enqueue 150 sh -c "cd '$build' && ctest --output-on-failure -R '^cuda\.enqueue\.'" ;;
    stream)
        for np in 2 4; do
            step stream-np$np 60 "$build/tests/mpirun.sh" $np --preload "$bench/osu_allreduce" -d cuda \
                --ab=3 --nccl --enqueue --graph -c -T mpi_float -m 8:16M
        done ;;
    gather)
        step gather 150 python3 "$src/osu-bench/driver.py" --build-dir "$build" --np 2,4 \
            --colls allgather,alltoall --mem cuda --sizes 8:4M --factor 4 --rounds 4 --no-osu \
            --type mpi_char --no-plots --out "$logs/gather" ;;
    hier)
        step hier-matrix 120 env PICOLL_VNODE_SIZE=2 PICOLL_STATS=1 "$build/tests/mpirun.sh" 4 \
            --preload "$build/tests/cuda/cuda_coll" matrix --hier 2 --fast
        for variant in 1:2 0:2 0:0; do
            step "hier-ab-cuda${variant%:*}-depth${variant#*:}" 100 env PICOLL_VNODE_SIZE=2 \
                PICOLL_HIER_CUDA="${variant%:*}" PICOLL_STAGE_DEPTH="${variant#*:}" PICOLL_STATS=1 \
                "$build/tests/mpirun.sh" 4 --preload "$bench/osu_allreduce" -d cuda --ab=3 -c \
                -T mpi_float -m 8:16M
        done ;;
    hierblocks)
        step hier-matrix-np6 120 env PICOLL_VNODE_SIZE=3 PICOLL_STATS=1 "$build/tests/mpirun.sh" 6 \
            --preload "$build/tests/cuda/cuda_coll" matrix --hier 3 --fast
        for variant in 1 0; do
            for coll in allgather alltoall; do
                step "hier-$coll-cuda$variant" 100 env PICOLL_VNODE_SIZE=2 PICOLL_HIER_CUDA=$variant \
                    PICOLL_STATS=1 "$build/tests/mpirun.sh" 4 --preload "$bench/osu_$coll" -d cuda \
                    --ab=3 -c -m 8:4M
            done
        done ;;
    hiercheck)
        # the device hierarchy's correctness on the GPU: nodes of 2 (np 4), of 3 and 2 (np 5:
        # unequal), of 3 (np 6)
        for shape in 4:2 5:3 6:3; do
            step "hiercheck-np${shape%:*}-vn${shape#*:}" 100 env PICOLL_VNODE_SIZE="${shape#*:}" \
                PICOLL_STATS=1 "$build/tests/mpirun.sh" "${shape%:*}" --preload \
                "$build/tests/cuda/cuda_coll" matrix --hier "${shape#*:}" --fast
        done ;;
    hierchunk)
        # the device hierarchy's pipeline: chunk x depth, one 4 MiB and 16 MiB allreduce job each
        for chunk in 256k 1M 4M; do
            for depth in 0 1 2 4; do
                step "hierchunk-$chunk-d$depth" 40 env PICOLL_VNODE_SIZE=2 PICOLL_HIER_CUDA_CHUNK=$chunk \
                    PICOLL_STAGE_DEPTH=$depth "$build/tests/mpirun.sh" 4 --preload \
                    "$bench/osu_allreduce" -d cuda --ab=3 -c -T mpi_float -m 4M:16M
            done
        done ;;
    hierhosts)
        # the two network-namespace hosts of tests/net/hosts.sh on this machine, 2+2 ranks sharing
        # the GPU under MPS (namespaces do not hide it), the network step over the veth: the
        # device hierarchy, then the whole-buffer staging it replaced, each against the staged MPI
        flavour=$(sed -n 's/^MPI_FLAVOUR = //p' "$build/Makefile")
        mpiexec=$(sed -n 's/^MPIEXEC = //p' "$build/Makefile")
        for variant in 1:2 0:0; do
            step "hierhosts-cuda${variant%:*}-depth${variant#*:}" 140 sh "$src/tests/net/hosts.sh" \
                --mpi "$flavour" --mpiexec "$mpiexec" --np 2+2 --limit 130 \
                --preload "$build/.libs/libpicoll.so" --env PICOLL_HOST=on --env PICOLL_STATS=1 \
                --env PICOLL_HIER_CUDA="${variant%:*}" --env PICOLL_STAGE_DEPTH="${variant#*:}" \
                --env CUDA_MPS_PIPE_DIRECTORY="${CUDA_MPS_PIPE_DIRECTORY:-}" \
                --env CUDA_MPS_LOG_DIRECTORY="${CUDA_MPS_LOG_DIRECTORY:-}" \
                -- "$bench/osu_allreduce" -d cuda --ab=3 -c -T mpi_float -m 1M:16M --factor 4
        done ;;
    *) echo "gpu-lease.sh: unknown step '$s'" ;;
    esac
done
if [ $mps_started = 1 ]; then echo quit | nvidia-cuda-mps-control; fi
tar -czf "$archive" -C "$logs" .
echo "gpu-lease.sh: $steps: done after $(( $(date +%s) - t0 )) s"
