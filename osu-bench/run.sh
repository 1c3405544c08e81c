#!/usr/bin/env bash
# picoll's main job, from a fresh Debian 12 machine: installs what is missing, builds picoll and
# the OSU-compatible benchmarks in build-bench/, then times allreduce, allgather and alltoall
# under mpirun with plain MPI and with LD_PRELOAD=libpicoll.so, side by side.
#
#   bash osu-bench/run.sh              default: sizes 4 B..16 MiB (every other power of two; CUDA
#                                      buffers to 1 MiB), np 2 then 4, 5 A/B rounds per size (the
#                                      ratio's min/median/max; a row whose rounds of one side are
#                                      over 2x apart is flagged unstable; 4 and 16 MiB in a
#                                      second job, 10 calls timed a round after 2)
#   bash osu-bench/run.sh --sizes 4:1M     up to 1 MiB only (the default before issue 52)
#   bash osu-bench/run.sh --sizes 4:16M    OSU's call counts at 4 and 16 MiB too (4 minutes more)
#   bash osu-bench/run.sh --stability 10 --colls allreduce --np 2    10 jobs in a row at 16 MiB:
#                                      each job's medians, their spread across jobs (issue 52)
#   bash osu-bench/run.sh --full       the whole OSU range (every power of two up to 1 MiB)
#   bash osu-bench/run.sh --np 2 --rounds 9 --colls allreduce     any driver.py option
#   bash osu-bench/run.sh --hosts [OSU OPTIONS]    allreduce between two real hosts on this machine
#       (network namespaces, tests/net/hosts.sh; needs root): 2+2 ranks, picoll against plain MPI
#       in the same job (--ab=4), 8 B to 16 MiB; OSU OPTIONS replace those of osu_allreduce
#
# Environment: PICOLL_BENCH_BUILD (build directory, default build-bench, or the test command's
# build-openmpi where it exists), PICOLL_BENCH_CUDA_ARCHS (kernels' architectures, default those of
# the GPUs present, none without one), MPICC (default mpicc),
# OSU_DIR (real OSU micro-benchmarks to run as well), TORCH_BENCH_PYTHON (a Python with torch and
# picoll_torch: then osu-bench/torch_bench.py too, picoll against gloo through torch.distributed;
# default the test command's build-torch/venv). Results: osu-bench/results/<date>-<host>/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
start=$(date +%s)
echo "== load before the build: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc 2>/dev/null || echo '?') CPUs"

# the full build: UCX for the network step, hwloc for GPU and NIC locality, as the test command
hosts=0
if [ "${1:-}" = "--hosts" ]; then hosts=1; shift; fi
bash "$top/tests/install-deps.sh" autoconf automake libtool make pkg-config gcc openmpi-bin libopenmpi-dev libhwloc-dev libucx-dev python3 python3-matplotlib iproute2

if [ ! -x configure ] || [ configure.ac -nt configure ]; then
    echo "== autoreconf"
    autoreconf -fi >/dev/null
fi

# An existing build is reused: build-bench/ once made, else the test command's Open MPI build
# (build-openmpi/, which has the benchmarks) when MPICC does not ask for another MPI.
build="${PICOLL_BENCH_BUILD:-}"
if [ -z "$build" ]; then
    build=build-bench
    if [ ! -f build-bench/Makefile ] && [ -z "${MPICC:-}" ] && [ -f build-openmpi/Makefile ]; then
        build=build-openmpi
    fi
fi
jobs=$(nproc 2>/dev/null || echo 2)
mkdir -p "$build"
if [ ! -f "$build/Makefile" ]; then
    # The kernels only for the GPUs present: their compute capabilities from nvidia-smi; none
    # answers, no kernels at all (the host benchmarks never load them, and the fatbin for every
    # architecture nvcc knows is most of a build's time). PICOLL_BENCH_CUDA_ARCHS chooses ("all").
    cuda_opt=""
    archs=${PICOLL_BENCH_CUDA_ARCHS:-}
    if [ -z "$archs" ]; then
        archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
                tr -d '. ' | sort -un | tr '\n' ' ' | sed 's/ *$//') || archs=""
    fi
    if [ -n "$archs" ]; then
        cuda_opt="--with-cuda-archs=$archs"
        echo "== configure in $build (kernels for sm: $archs)"
    else
        cuda_opt="--without-cuda"
        echo "== configure in $build (no GPU answers nvidia-smi: host benchmarks, no kernels)"
    fi
    (cd "$build" && "$top/configure" -q ${MPICC:+MPICC="$MPICC"} $cuda_opt)
fi
echo "== build in $build"
make -C "$build" -s -j"$jobs" all >/dev/null

if [ $hosts = 1 ]; then
    # between two hosts: the network step crosses a veth pair, and Open MPI's own traffic its tcp BTL
    flavour=$(sed -n 's/^MPI_FLAVOUR = //p' "$build/Makefile")
    mpiexec=$(sed -n 's/^MPIEXEC = //p' "$build/Makefile")
    [ $# -gt 0 ] || set -- --ab=4 -c -T mpi_float -m 8:16M --factor 2
    echo "== allreduce between two hosts (setup took $(( $(date +%s) - start )) s), load: $(cut -d' ' -f1-3 /proc/loadavg)"
    status=0
    env -u PICOLL_BENCH_BUILD sh "$top/tests/net/hosts.sh" --mpi "$flavour" --mpiexec "$mpiexec" --np 2+2 --limit 580 \
        --preload "$build/.libs/libpicoll.so" --env PICOLL_HOST=on -- "$build/osu-bench/osu_allreduce" "$@" || status=$?
    echo "== main job took $(( $(date +%s) - start )) s"
    exit $status
fi

# Debian's python3 has python3-matplotlib; another python3 first on PATH may not.
python=python3
[ -x /usr/bin/python3 ] && python=/usr/bin/python3
echo "== benchmarks (setup took $(( $(date +%s) - start )) s)"
status=0
"$python" "$top/osu-bench/driver.py" --build-dir "$build" "$@" || status=$?
# PyTorch's all_reduce through picoll's process group against gloo (docs/torch.md), where a Python
# has torch and picoll_torch: TORCH_BENCH_PYTHON, else the test command's build-torch/venv
tpy=${TORCH_BENCH_PYTHON:-$top/build-torch/venv/bin/python}
if [ -x "$tpy" ] && "$tpy" -c "import importlib.util as u, sys; sys.exit(not u.find_spec('picoll_torch'))" 2>/dev/null; then
    mpirun_sh="$build/tests/mpirun.sh"
    for np in 2 4; do
        echo "== torch.distributed all_reduce, picoll against gloo, np $np ($tpy)"
        "$mpirun_sh" $np "$tpy" "$top/osu-bench/torch_bench.py" || status=$?
    done
else
    echo "== torch benchmark left out: no Python with torch and picoll_torch (TORCH_BENCH_PYTHON)"
fi
echo "== main job took $(( $(date +%s) - start )) s"
exit $status
