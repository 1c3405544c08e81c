#!/bin/sh
# run-gpu.sh [BUILD_DIR]: the device executor's checks, for a machine with a GPU (CI has none).
#   1. the tests/cuda CTests (correctness matrix at np 2, 3, 4; the timeout test), which must pass,
#      not skip;
#   2. compute-sanitizer memcheck and racecheck on one np=2 run of a few calls of each kind (every rank under the
#      sanitizer; racecheck covers shared-memory hazards inside the kernel).
# BUILD_DIR defaults to the current directory (a configured and built picoll build tree).
set -u
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

echo "== tests/cuda CTests"
skip='^$'
if ! "$prog" --probe 2 > /dev/null; then
    skip='^cuda\.rehome\.'
    echo "run-gpu.sh: one GPU: cuda.rehome.* (2 GPUs or more) not run"
fi
(cd "$build" && ctest --output-on-failure -R '^cuda\.' -E "$skip") > "$build/run-gpu-ctest.log" 2>&1
cat "$build/run-gpu-ctest.log"
if grep -q "Not Run\|\*\*\*Skipped\|Failed" "$build/run-gpu-ctest.log"; then
    echo "run-gpu.sh: some tests/cuda test failed or skipped on a GPU machine"; status=1
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
echo "run-gpu.sh: $( [ $status = 0 ] && echo passed || echo FAILED )"
exit $status
