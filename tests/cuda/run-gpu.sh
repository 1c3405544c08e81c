#!/bin/sh
# run-gpu.sh [--no-emu] [BUILD_DIR]: the device executor's checks, for a machine with a GPU (CI has none).
#   1. the tests/cuda CTests on the real GPU (correctness matrix at np 2, 3, 4, HCM at np 8, the
#      timeout test, ...), which must pass, not skip, and the emulated-GPU twins (cuda.emu.*) that
#      CI runs as well;
#   2. compute-sanitizer memcheck and racecheck on one np=2 run of a few calls of each kind (every rank under the
#      sanitizer; racecheck covers shared-memory hazards inside the kernel).
# BUILD_DIR defaults to the current directory (a configured and built picoll build tree).
# --no-emu leaves out the tests that need no GPU, which CI runs (the emulated-GPU twins cuda.emu.*
# and cuda.soak.emu, the fake driver's cuda.*.fake*), for a short lease of a GPU machine.
# With fewer GPUs than ranks, the ranks share GPUs: picoll runs kernels across processes only under
# MPS (without it they would be time-sliced, and picoll hands the call over), so this script
# starts an MPS control daemon when none runs (pipe and log in a temporary directory) and stops it
# at the end. It ends with one line: "run-gpu.sh: passed" or "run-gpu.sh: FAILED (...)".
set -u
no_emu=0
if [ "${1:-}" = --no-emu ]; then no_emu=1; shift; fi
build=$(cd "${1:-.}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
prog="$build/tests/cuda/cuda_coll"
status=0

if ! why=$("$prog" --probe); then
    echo "run-gpu.sh: $why"
    echo "run-gpu.sh: this script needs a GPU"
    exit 77
fi
nvidia-smi -L 2>/dev/null || true

mps_started=0
if [ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && ! pgrep -x nvidia-cuda-mps-control >/dev/null 2>&1; then
    mps=$(mktemp -d)
    export CUDA_MPS_PIPE_DIRECTORY="$mps/pipe" CUDA_MPS_LOG_DIRECTORY="$mps/log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
        mps_started=1
        echo "run-gpu.sh: MPS control daemon started ($CUDA_MPS_PIPE_DIRECTORY)"
    else
        echo "run-gpu.sh: could not start MPS: ranks sharing a GPU will fall back"
    fi
fi

echo "== tests/cuda CTests"
# skipped by design where a GPU exists: cuda.skip.* (no device) and cuda.query.np2 (no driver);
# cuda.gpu_bundle packs a build for a GPU machine: nothing to do on one
skip='^cuda\.skip\.|^cuda\.query\.np2$|^cuda\.gpu_bundle$'
if [ $no_emu = 1 ]; then
    skip="$skip|^cuda\.emu\.|^cuda\.soak\.emu$|\.fake"
    echo "run-gpu.sh: --no-emu: cuda.emu.*, cuda.soak.emu and cuda.*.fake* (no GPU needed) not run"
fi
if ! "$prog" --probe 2 > /dev/null; then
    skip="$skip|^cuda\.rehome\.np"
    echo "run-gpu.sh: one GPU: cuda.rehome.np* (2 GPUs or more) not run"
fi
(cd "$build" && ctest --output-on-failure -R '^cuda\.' -E "$skip") > "$build/run-gpu-ctest.log" 2>&1
cat "$build/run-gpu-ctest.log"
if grep -q "Not Run\|\*\*\*Skipped\|Failed" "$build/run-gpu-ctest.log"; then
    echo "run-gpu.sh: some tests/cuda test failed or skipped on a GPU machine"; status=1
fi
if ! grep -q "tests passed" "$build/run-gpu-ctest.log"; then
    echo "run-gpu.sh: ctest gave no summary"; status=1
fi

sanitizer=compute-sanitizer
command -v $sanitizer >/dev/null 2>&1 || sanitizer=/usr/local/cuda/bin/compute-sanitizer
export PICOLL_STATS=1 PICOLL_WORKSPACE_SIZE=128k PICOLL_NVLINK_ONESHOT_MAX=4k \
       PICOLL_PCIE_ONESHOT_MAX=1G PICOLL_PCIE_IPC_MAX=1G PICOLL_TIMEOUT=600
for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool, np=2"
    log="$build/run-gpu-$tool.log"
    # the sanitizer runs inside each rank, with libpicoll.so preloaded into the rank only
    "$build/tests/mpirun.sh" 2 $sanitizer --tool $tool --error-exitcode 3 \
        --target-processes all \
        env LD_PRELOAD="$build/.libs/libpicoll.so" "$prog" quick > "$log" 2>&1
    rc=$?
    tail -20 "$log"
    if [ $rc != 0 ] || grep -q "ERROR SUMMARY: [1-9]\|RACECHECK SUMMARY: [1-9]" "$log"; then
        echo "run-gpu.sh: $tool found errors (status $rc), see $log"; status=1
    fi
done
if [ $mps_started = 1 ]; then
    echo quit | nvidia-cuda-mps-control
fi
if [ $status = 0 ]; then
    echo "run-gpu.sh: passed"
else
    echo "run-gpu.sh: FAILED (see the lines starting run-gpu.sh above)"
fi
exit $status
