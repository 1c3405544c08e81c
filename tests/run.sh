#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what is missing, then configures,
# builds and runs CTest against Open MPI (build-openmpi/), MPICH 4 (build-mpich/) and MPICH 5 from
# the package registry (pip, into build-mpich5/mpi/; with its own UCX), and that MPICH again through
# the MPI-5 standard ABI (build-mpich5-abi/). The first MPI runs every test; MPICH 4 runs MPICH 5's
# subset and a few more (MPICH_TESTS below; docs/testing.md, "The subset at the second MPI");
# MPICH 5 runs a subset: start-up, the collectives, staging, the stream layer and the network
# step over its own UCX (MPICH5_TESTS below), and the ABI build a smaller one (ABI_TESTS); none
# runs the soak (label soak: ctest -L soak) or the records of the MPI's own behaviour (label
# baseline: ctest -L baseline). The later MPIs are installed and built beside the
# first one's tests, at the lowest priority. Prints the time of each phase at the end.
#   bash tests/run.sh            the four builds
#   PICOLL_TEST_MPIS=openmpi bash tests/run.sh    one of them
#   PICOLL_TEST_FULL=all bash tests/run.sh        every test on every MPI (or a list of MPIs)
#   PICOLL_TEST_BUILD_PREFIX=build-x- bash tests/run.sh    build in build-x-openmpi/, ...
#   PICOLL_TEST_SLOTS=1 bash tests/run.sh         one test at a time (default 4 slots: side by side)
#   PICOLL_TEST_CUDA_ARCHS=all bash tests/run.sh  kernels for every GPU architecture even without
#                                                 a GPU (default there: "80 90"; with one: all)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

start=$(date +%s)
times=""
phase_start=$start
# phase NAME: the time since the last phase ended, recorded under NAME
phase() {
    local now; now=$(date +%s)
    times="$times$(printf '   %-28s %5d s' "$1" $((now - phase_start)))
"
    phase_start=$now
}
# failed WHAT: records a failure, said again at the end (a long log's tail is what is read first)
failures=""
failed() {
    echo "== $1"
    failures="$failures   $1
"
    status=1
}
report() {
    phase_start=$start
    phase "whole suite"
    echo "== wall time"
    printf '%s' "$times"
    if [ -n "$failures" ]; then echo "== what failed"; printf '%s' "$failures"; fi
}
trap report EXIT

bash "$top/tests/install-deps.sh" autoconf automake libtool make pkg-config gcc g++ openmpi-bin libopenmpi-dev mpich libmpich-dev libhwloc-dev libucx-dev cmake valgrind python3 python3-venv gfortran iproute2 clang-format
phase "install"

echo "== autoreconf"
autoreconf -fi >/dev/null
phase "autoreconf"

jobs=$(nproc 2>/dev/null || echo 2)
mpis=${PICOLL_TEST_MPIS:-openmpi mpich mpich5 mpich5-abi}
# MPICH 5's subset: the wrapper table, start-up and set-up, the collectives (MPI, shared memory,
# rooted, large counts, calls drawn at random: mpi.shuffle.np4), staging of device buffers
# (every call, refusals), the stream layer on MPICH's own MPIX_Stream, the network step over
# MPICH's UCX (virtual nodes, netns hosts), and invalid arguments (less the calls that MPICH 5
# from pip aborts on without picoll too: mt_mpich_version in the tests).
MPICH5_VERSION=5.0.2
MPICH5_TESTS='^(unit\.table_complete|mpi\.(setup|matrix|rooted|large_count|null_status|progress|comm_lifecycle|threads|config|bad_args|stats)\..*|mpi\.shuffle\.np4|host\.matrix\..*|cuda\.(staged\.fake|every\.fake|every\.host\.fake|bad_args\.fake)\..*|cuda\.emu\.enqueue\.(np3|thread\.np3|single\.np1|late\.np2|queue\.np3)|net\.matrix\.np4\.v2\.tcp|hosts\.matrix\.np4)$'
# MPICH 4's subset (Debian's MPICH 4.0): the wrapper table, set-up, the collectives against the
# MPI's (mpi.matrix, mpi.rooted, host.matrix, mpi.shuffle.np4), threads, invalid arguments, staging
# of device buffers, the stream layer without MPIX_Stream, the network step over Debian's UCX, and
# Fortran's bindings, PICOLL_ENABLE=0, a late rank on the host path and the device executor's
# matrix; MPICH 5's other tests (the rest of mpi.*, cuda.every.host.fake, cuda.bad_args.fake, the
# stream layer's threads, late ranks and queue, hosts.matrix.np4) run there and at the first MPI
# (the rest runs at the first MPI: on MPICH 4 its 147 tests took 161 s of a 1272 s run, 2026-11-28,
# for no test that is MPICH's own; 55 tests took 75 s of a 913 s run)
MPICH_TESTS='^(unit\.table_complete|mpi\.(setup|matrix|rooted|threads|bad_args)\..*|mpi\.shuffle\.np4|host\.matrix\..*|cuda\.(staged\.fake|every\.fake)\..*|cuda\.emu\.enqueue\.(np3|single\.np1)|net\.matrix\.np4\.v2\.tcp|fortran\.calls\.np3|mpi\.enable0\.np2|host\.late\.np3|cuda\.emu\.matrix\.fast\.np2)$'
# The standard-ABI build (the same MPICH 5 through mpicc_abi and libmpi_abi.so.1): the table, the
# collectives, staging and the stream layer (picoll's own MPIX_Stream there: mpi_abi.h has none).
ABI_TESTS='^(unit\.table_complete|mpi\.(setup|matrix)\..*|cuda\.(staged\.fake|every\.fake)\.np2|cuda\.emu\.enqueue\.np3)$'

full=${PICOLL_TEST_FULL:-${mpis%% *}}
prefix=${PICOLL_TEST_BUILD_PREFIX:-build-}
fatbin_from=""
status=0
# The kernels' architectures: without a GPU (no nvidia-smi answers) the emulated GPU runs the
# CPU build of the kernels and no fatbin, so the build makes sm_90 only (H100 and H200, the GPUs
# the lease lends: the register check cuda.kernel.usage covers it) instead of every one nvcc
# knows (nvcc took 162 s of CPU for sm_80 and sm_90, half of the first build's, 2026-11-28;
# docs/testing.md); with a GPU, every architecture (configure's default).
# PICOLL_TEST_CUDA_ARCHS="LIST" (or "all") chooses: "80 90" checks the A100's registers too.
archs=${PICOLL_TEST_CUDA_ARCHS-}
# Without a GPU the PTX is left out too (--disable-cuda-ptx: no test reads it; nvcc took 121 s
# of CPU for the fatbin instead of 165, 2026-11-29).
noptx=""
if [ -z "${PICOLL_TEST_CUDA_ARCHS+set}" ] && ! nvidia-smi -L >/dev/null 2>&1; then
    archs="90"
    noptx="--disable-cuda-ptx"
    echo "== no GPU answers (nvidia-smi -L): the kernels' fatbin for sm_90 only, no PTX (PICOLL_TEST_CUDA_ARCHS=all for every one)"
fi
slots=${PICOLL_TEST_SLOTS:-4}
# pip_retry PIP ARGS...: pip, three times at most, with its own retries and a longer timeout per
# connection: once (CI, 2026-11-27) PyTorch's installation failed where it had passed the run
# before with the same version, and the whole run was red for it alone
pip_retry() {
    local pip=$1 try; shift
    for try in 1 2 3; do
        "$pip" --retries 10 --timeout 60 "$@" && return 0
        echo "== pip $* failed (try $try of 3)"
        [ "$try" = 3 ] || sleep $((30 * try))
    done
    return 1
}
# picoll_torch (torch/, label torch): PyTorch from the package registry in a virtual environment
# (${prefix}torch/venv), installed in the background while the first MPI's build runs; the
# extension is built against that build, whose CTest runs the torch tests (the other MPIs leave
# them out). PICOLL_TEST_TORCH=0 leaves PyTorch out altogether. --no-compile: Python compiles the
# modules a test imports when it first imports them; byte-compiling all of torch's at install
# time took 15 s of CPU beside the build (2026-11-27). --no-cache-dir: torch's wheels and their
# CUDA libraries are about 3 GB, kept a second time in pip's cache otherwise (the venv is 5.4 GB;
# a disk that ran out of space made pip fail here, 2026-11-28).
TORCH_VERSION=2.15.0
torch_mpi=""
torch_venv="$top/${prefix}torch/venv"
if [ "${PICOLL_TEST_TORCH:-1}" != 0 ]; then
    torch_mpi=${mpis%% *}
    mkdir -p "$top/${prefix}torch"
    (
        if ! "$torch_venv/bin/python" -c "import torch, numpy" 2>/dev/null; then
            python3 -m venv "$torch_venv" &&
                pip_retry "$torch_venv/bin/pip" install -q --no-compile --no-cache-dir \
                    "torch==$TORCH_VERSION" numpy ninja
        fi
    ) > "$top/${prefix}torch/install.log" 2>&1 &
    torch_pid=$!
fi
# torch_build DIR: waits for PyTorch's installation, then pip-installs picoll_torch built against
# the picoll of DIR; the torch tests find that Python through TORCH_TEST_PYTHON
torch_build() {
    local log="$top/${prefix}torch/install.log"
    if ! wait "$torch_pid"; then
        tail -n 20 "$log"; df -h "$top" | sed 's/^/   /'
        failed "torch: pip install torch==$TORCH_VERSION failed (above)"
        phase "torch install (beside the build)"; return
    fi
    phase "torch install (beside the build)"
    # picoll_torch's build (about 50 s of compiling) runs beside the first tests: its exit status
    # goes to TORCH_TEST_READY, which CTest's torch.ready waits for before the torch tests
    # (tests/torch/ready.sh; it fails, showing the end of this log, where pip failed)
    export TORCH_TEST_PYTHON="$torch_venv/bin/python"
    export TORCH_TEST_READY="$top/${prefix}torch/picoll_torch.status"
    rm -f "$TORCH_TEST_READY"
    (
        PICOLL_TORCH_DIR="$top/$1" "$torch_venv/bin/pip" install -q "$top/torch" \
            > "${TORCH_TEST_READY%.status}.log" 2>&1
        echo $? > "$TORCH_TEST_READY.tmp" && mv "$TORCH_TEST_READY.tmp" "$TORCH_TEST_READY"
    ) &
}
# the script's own settings stay out of the tests' environment (picoll warns of an unknown PICOLL_*)
unset PICOLL_TEST_MPIS PICOLL_TEST_FULL PICOLL_TEST_BUILD_PREFIX PICOLL_TEST_CUDA_ARCHS PICOLL_TEST_SLOTS
unset PICOLL_TEST_TORCH
# configure_mpi MPI: installs it where it comes from the package registry, then configures picoll
# against it in ${prefix}MPI; 0 when configured. build_mpi MPI: builds that tree; 0 when it is
# ready to test. Both record their phases and failures (phase, failed).
configure_mpi() {
    local mpi=$1 dir="$prefix$1" mpicc venv
    mkdir -p "$dir"
    case $mpi in
        openmpi) mpicc=mpicc.openmpi ;;
        mpich) mpicc=mpicc.mpich ;;
        mpich5|mpich5-abi)
            # from the package registry, in a virtual environment of the mpich5 build tree;
            # mpich5-abi: the same MPICH through the MPI-5 standard ABI (mpicc_abi, libmpi_abi)
            venv="$top/${prefix}mpich5/mpi"
            mpicc="$venv/bin/mpicc"
            [ "$mpi" = mpich5 ] || mpicc="$venv/bin/mpicc_abi"
            if [ ! -x "$mpicc" ]; then
                echo "== $mpi: pip install mpich==$MPICH5_VERSION into ${prefix}mpich5/mpi"
                if ! { python3 -m venv "$venv" &&
                       pip_retry "$venv/bin/pip" install -q "mpich==$MPICH5_VERSION"; }; then
                    failed "$mpi: installing MPICH $MPICH5_VERSION failed"
                    phase "$mpi install"; return 1
                fi
            fi
            phase "$mpi install" ;;
        *) echo "unknown MPI '$mpi' in PICOLL_TEST_MPIS (openmpi, mpich, mpich5, mpich5-abi)"
           exit 2 ;;
    esac
    echo "== $mpi: configure in $dir"
    (cd "$dir" && "$top/configure" -q MPICC="$mpicc" ${archs:+--with-cuda-archs="$archs"} $noptx) || { failed "$mpi: configure failed"; phase "$mpi configure"; return 1; }
    phase "$mpi configure"
}
build_mpi() {
    local mpi=$1 dir="$prefix$1"
    echo "== $mpi: build in $dir"
    # The kernels' fatbin (nvcc, every GPU architecture: most of a build's time) does not depend
    # on the MPI: a build configured with the same nvcc and architectures reuses the first one's.
    # Copied with its time, it is newer than its sources unless they changed since; make rebuilds
    # it then.
    if [ -n "$fatbin_from" ] &&
       [ "$(grep -E '^NVCC(_GENCODE)? =' "$fatbin_from/Makefile")" = "$(grep -E '^NVCC(_GENCODE)? =' "$dir/Makefile")" ]; then
        mkdir -p "$dir/cuda"
        cp -p "$fatbin_from/cuda/coll_kernel.fatbin" "$dir/cuda/coll_kernel.fatbin"
        cp -p "$fatbin_from/cuda/coll_kernel.usage" "$dir/cuda/coll_kernel.usage"
        echo "== $mpi: the kernels' fatbin from $fatbin_from"
    fi
    # an MPI that runs a subset (-R) builds the library and the test programs its tests name
    # (tests/programs-for.py: 8 to 17 of 50; 57 s of CPU instead of 80 for MPICH 4's)
    local subset what targets=tests
    selection "$mpi"
    if [ "${subset[0]}" = -R ]; then
        if ! targets=$(cd "$dir" && python3 "$top/tests/programs-for.py" . "${subset[@]}"); then
            failed "$mpi: tests/programs-for.py failed"; phase "$mpi build"; return 1
        fi
        echo "== $mpi: the library and the programs of its tests: $targets"
    fi
    if ! (cd "$dir" && make -j"$jobs" all > build.log 2>&1 &&
          make -j"$jobs" $targets >> build.log 2>&1); then
        tail -n 40 "$dir/build.log"; failed "$mpi: build failed (above; $dir/build.log)"
        phase "$mpi build"; return 1
    fi
    phase "$mpi build"
}

# selection MPI: the ctest arguments that select the tests of MPI's share (every test at the
# first MPI), in the array subset; what: " (subset)" where some are left out
selection() {
    local mpi=$1
    subset=(-LE '^(full|soak|torch|baseline)$'); what=" (subset)"
    case " $full " in
        *" $mpi "*|*" all "*) subset=(-LE '^(soak|baseline)$'); what="" ;;&
        *" $mpi "*|*" all "*) [ "$mpi" = "$torch_mpi" ] || subset=(-LE '^(soak|torch|baseline)$') ;;
        *) case $mpi in
               # less the tests labelled full there too (host.matrix at np 3 and 5,
               # cuda.every.fake.np3: 24 to 40 s each of MPICH's busy polling, 2026-11-28)
               mpich) subset=(-R "$MPICH_TESTS" -LE '^(full|soak|torch|baseline)$') ;;
               mpich5) subset=(-R "$MPICH5_TESTS" -LE '^(full|soak|torch|baseline)$') ;;
               mpich5-abi) subset=(-R "$ABI_TESTS") ;;
           esac ;;
    esac
}

# test MPI: CTest in ${prefix}MPI, the tests of the MPI's share
test_mpi() {
    local mpi=$1 dir="$prefix$1" subset what
    selection "$mpi"
    if [ "${subset[0]}" = -R ]; then
        echo "== $mpi: ctest -R (its subset: MPICH_TESTS, MPICH5_TESTS or ABI_TESTS in run.sh)"
    else
        echo "== $mpi: ctest ${subset[*]}${what:+ (the tests labelled full run at $full)}"
    fi
    # -j 4: tests side by side in four slots of half a core each, a test taking the slots it was
    # measured to need (tests/slots.cmake; CTestTestfile.cmake.in); PICOLL_TEST_SLOTS=1 runs them
    # one at a time
    if ! (cd "$dir" && ctest --output-on-failure --timeout 300 -j "$slots" "${subset[@]}"); then
        failed "$mpi: ctest: $(tr '\n' ' ' < "$dir/Testing/Temporary/LastTestsFailed.log" 2>/dev/null)"
    fi
    phase "$mpi ctest$what"
}

# The first MPI is built, then tested; the others are installed and configured beside its build
# (its nvcc keeps one core busy for two minutes while the other is idle), and built beside its
# tests, one after the other at the lowest priority (nice 19: they take the CPU time its build and
# tests leave, 2 cores at 172% over a whole run before, 2026-11-28), each built once the first
# MPI's build has ended (its fatbin is theirs) and tested once the first MPI's tests are done and
# its build is ready. A background MPI's phases and failures come back through files in its build
# tree (.phases, .failures; .ready holds its status); the first build's status is in its .built.
first=${mpis%% *}
rest=${mpis#"$first"}
prepared=0
rm -f "$prefix$first/.built"
bg_pid=""
if [ -n "${rest// /}" ]; then
    for mpi in $rest; do mkdir -p "$prefix$mpi"; rm -f "$prefix$mpi/.ready" "$prefix$mpi/.phases" "$prefix$mpi/.failures"; done
    (
        renice -n 19 -p $BASHPID > /dev/null 2>&1 || true
        # keep MPI STATUS: its phases so far and failures to its files; STATUS (when not empty)
        # to .ready, which says it is done
        keep() {
            printf '%s' "$times" | sed 's/ s$/ s (beside the first build and tests)/' >> "$prefix$1/.phases"
            printf '%s' "$failures" >> "$prefix$1/.failures"
            times=""; failures=""
            [ -z "$2" ] || echo "$2" > "$prefix$1/.ready"
        }
        configured=""
        for mpi in $rest; do
            times=""; failures=""; phase_start=$(date +%s)
            if configure_mpi "$mpi" > "$prefix$mpi/prepare.log" 2>&1; then
                configured="$configured $mpi"; keep "$mpi" ""
            else
                keep "$mpi" 1
            fi
        done
        # (and end with the script: $$ is its process)
        while [ ! -f "$prefix$first/.built" ]; do kill -0 $$ 2>/dev/null || exit 1; sleep 1; done
        [ "$(cat "$prefix$first/.built")" != 0 ] || fatbin_from=$prefix$first
        for mpi in $configured; do
            times=""; failures=""; phase_start=$(date +%s)
            if build_mpi "$mpi" >> "$prefix$mpi/prepare.log" 2>&1; then rc=0; else rc=$?; fi
            keep "$mpi" "$rc"
        done
    ) &
    bg_pid=$!
fi
if configure_mpi "$first" && build_mpi "$first"; then
    prepared=1
    if [ -z "$fatbin_from" ] && [ -f "$prefix$first/cuda/coll_kernel.fatbin" ]; then fatbin_from=$prefix$first; fi
    if [ "$first" = "$torch_mpi" ]; then torch_build "$prefix$first"; fi
fi
# the background builds wait for this: 0 where the fatbin is there to copy
if [ $prepared = 1 ] && [ -n "$fatbin_from" ]; then echo 0 > "$prefix$first/.built"; else echo 1 > "$prefix$first/.built"; fi
if [ $prepared = 1 ]; then test_mpi "$first"; fi
for mpi in $rest; do
    dir="$prefix$mpi"
    while [ ! -f "$dir/.ready" ] && kill -0 "$bg_pid" 2>/dev/null; do sleep 1; done
    phase "$mpi waited for its build"
    cat "$dir/prepare.log" 2>/dev/null || true
    times="$times$(cat "$dir/.phases" 2>/dev/null || true)
"
    if [ "$(cat "$dir/.ready" 2>/dev/null)" != 0 ]; then
        failures="$failures$(cat "$dir/.failures" 2>/dev/null || true)
"
        [ -n "$(cat "$dir/.failures" 2>/dev/null)" ] || failed "$mpi: its build ended without a status"
        status=1
        continue
    fi
    test_mpi "$mpi"
done
exit $status
