#!/usr/bin/env bash
# sanitize.sh [--thread] BUILD [CTEST ARGS...]: picoll and its tests under AddressSanitizer and
# UndefinedBehaviorSanitizer (no recovery: the first report ends the process, and so fails its
# test), configured against Open MPI in BUILD (made where missing), then CTest there. Not part of
# the test command (its CTest took 1248 s on the 2-core machine, other work beside it);
# docs/testing.md, "Sanitizers".
#
# - The emulated GPU (tests/cuda/emu/libcuda.so.1, with the kernels' code compiled for the CPU)
#   is built under UndefinedBehaviorSanitizer only: it runs each kernel's threads as fibers on
#   stacks of its own, which AddressSanitizer takes for overflows (its own rules check the
#   kernels' accesses: bounds, alignment, races).
# - The kernels' fatbin is copied from build-openmpi/ where it has one (no test reads it).
# - Left out: the tests that read the library's object code or count its instructions
#   (unit.layers, unit.reduce_vectorised, perf.*), and those of PyTorch (an uninstrumented
#   Python), soak and baseline.
# - Leaks are not reported (the MPI's own are many); ASAN_OPTIONS and UBSAN_OPTIONS from the
#   environment are kept, after these.
#
# --thread: ThreadSanitizer instead, on the tests that run threads of picoll's or the
# application's (names matching THREAD_TESTS below; CTEST ARGS add to them). The host reductions
# (libpicoll_reduce) are built without it: their loops' ifunc resolvers run while the library is
# relocated, before ThreadSanitizer's run time is up (a segmentation fault before main otherwise).
# UCX's memory hooks are turned off (with them a process ends with a segmentation fault in its
# exit). Neither the MPI nor the emulated GPU is instrumented, so what orders through them is not
# seen: the reports from within the MPI, of a buffer the MPI filled, or of what a stream's order
# carries (a kernel's status words, a host function's hand-over, a call the application
# synchronised) are many. The script lists the reports whose accesses are all picoll's own code
# (src/, pmpi/, cuda/), to be read; it fails only where a test fails.
set -u
thread=0
if [ "${1:-}" = --thread ]; then
    thread=1
    shift
fi
build=${1:?usage: sanitize.sh BUILD [CTEST ARGS...]}
shift
top=$(cd "$(dirname "$0")/.." && pwd)
san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
[ "$thread" = 1 ] && san="-fsanitize=thread"

mkdir -p "$build" || exit 1
build=$(cd "$build" && pwd)
if [ ! -f "$build/Makefile" ]; then
    (cd "$build" && "$top/configure" -q MPICC="${MPICC:-mpicc.openmpi}" --with-cuda-archs=90 \
        --disable-cuda-ptx CFLAGS="-O1 -g $san" LDFLAGS="$san") || exit 1
fi
if [ -f "$top/build-openmpi/cuda/coll_kernel.fatbin" ] && [ ! -f "$build/cuda/coll_kernel.fatbin" ]; then
    mkdir -p "$build/cuda"
    cp -p "$top/build-openmpi/cuda/coll_kernel.fatbin" "$top/build-openmpi/cuda/coll_kernel.usage" \
        "$build/cuda/"
fi
cd "$build" || exit 1
echo "== sanitize.sh: build in $build"
if [ "$thread" = 1 ]; then # the reductions first, uninstrumented (above)
    make CFLAGS="-O1 -g" libpicoll_reduce.la > build.log 2>&1 || { tail -20 build.log; exit 1; }
fi
make -j"$(nproc)" all tests >> build.log 2>&1 || { tail -20 build.log; exit 1; }
# the emulated GPU again (its objects only): under UndefinedBehaviorSanitizer alone, which minds
# no fibers (the kernels' code included), or, with --thread, under none
emu_san="-fsanitize=undefined -fno-sanitize-recover=undefined"
[ "$thread" = 1 ] && emu_san=""
rm -f tests/cuda/emu/tests_cuda_emu_libcuda_so_1-*.o tests/cuda/emu/libcuda.so.1
make CFLAGS="-O1 -g $emu_san" CXXFLAGS="-O1 -g $emu_san" LDFLAGS="$emu_san" \
    tests/cuda/emu/libcuda.so.1 >> build.log 2>&1 || { tail -20 build.log; exit 1; }
if [ "$thread" = 1 ]; then
    # each process's reports in a file of its own (the ranks' would interleave on one output)
    rm -rf tsan-logs && mkdir tsan-logs
    export TSAN_OPTIONS="halt_on_error=0:report_signal_unsafe=0:exitcode=0:log_path=$build/tsan-logs/tsan${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
    export UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none
    THREAD_TESTS='^(mpi\.threads\..*|mpi\.shuffle\.threads\..*|host\.thread\..*|cuda\.emu\.thread\..*|cuda\.emu\.hier\.thread\..*|cuda\.emu\.enqueue\..*|cuda\.emu\.shuffle\.np3|net\.matrix\.np4\.v2\.tcp)$'
    echo "== sanitize.sh --thread: ctest"
    ctest --timeout 600 -j"$(nproc)" -R "$THREAD_TESTS" "$@" > ctest.log 2>&1
    rc=$?
    grep -E "tests passed|\*\*\*Failed|Timeout" ctest.log
    # each report as one line, the first three frames of each access; those whose every access
    # is picoll's own code (src/, pmpi/, cuda/) kept
    python3 - tsan-logs/tsan.* > tsan-picoll.txt <<'PY'
import re, sys
text = "".join(open(f, errors="replace").read() for f in sys.argv[1:])
seen = {}
for rep in text.split("WARNING: ThreadSanitizer: ")[1:]:
    rep = rep.split("SUMMARY:")[0]
    kind = rep.split("(")[0].strip()
    firsts, stacks = [], []
    for acc in re.split(r"\n  (?=[A-Z])", rep):
        if acc.startswith(("Thread ", "Mutex ", "Location ")):
            continue  # where a thread or mutex was made, the memory: not an access
        frames = [(f, w) for f, w in re.findall(r"#\d+ (\S+) (\S+)", acc)
                  if "libsanitizer" not in w][:3]
        if frames:
            firsts.append(frames[0][1])
            stacks.append(" < ".join(f"{f} {w.split('/')[-1]}" for f, w in frames))
    if firsts and all(re.match(r"\.\./(src|pmpi|cuda)/", w) for w in firsts):
        key = kind + ": " + " / ".join(stacks)
        seen[key] = seen.get(key, 0) + 1
for k, n in sorted(seen.items(), key=lambda x: -x[1]):
    print(n, k)
PY
    cat tsan-picoll.txt
    echo "sanitize.sh --thread: $(wc -l < tsan-picoll.txt) kind(s) of report between accesses of picoll's own code (each process's reports: $build/tsan-logs/; docs/testing.md says which were read and why they are not races)"
    [ "$rc" -eq 0 ]
    exit
fi
export ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0:halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
echo "== sanitize.sh: ctest"
ctest --output-on-failure --timeout 600 -j"$(nproc)" -LE '^(soak|torch|baseline)$' \
    -E '^(unit\.layers|unit\.reduce_vectorised|perf\..*)$' "$@" > ctest.log 2>&1
rc=$?
grep -E "tests passed|\*\*\*Failed|Timeout" ctest.log
reports=$(grep -c -E "ERROR: AddressSanitizer|runtime error:" ctest.log)
echo "sanitize.sh: $reports sanitizer report(s) in $build/ctest.log"
[ "$rc" -eq 0 ] && [ "$reports" -eq 0 ]
