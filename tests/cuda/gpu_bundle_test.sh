#!/usr/bin/env bash
# gpu_bundle_test.sh SRC BUILD: CTest cuda.gpu_bundle. Packs BUILD with gpu-bundle.sh into a
# scratch folder and checks what a GPU machine without MPI would get: the build tree without
# objects, the MPI's launcher, and libraries that all resolve (ldd, with the bundle's folder in
# LD_LIBRARY_PATH) with the MPI's own from the bundle; iproute2's ip and tc run; unpack.sh
# parses. Skips (77) without dpkg.
set -u
src=$1
build=$2
command -v dpkg >/dev/null 2>&1 || { echo "SKIP: no dpkg (gpu-bundle.sh packs Debian's MPI packages)"; exit 77; }
flavour=$(sed -n 's/^MPI_FLAVOUR = //p' "$build/Makefile")
pkg=$([ "$flavour" = mpich ] && echo libmpich12 || echo libopenmpi3)
dpkg -L "$pkg" >/dev/null 2>&1 || { echo "SKIP: $pkg is not installed by dpkg (the MPI of this build is not Debian's)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL gpu_bundle: $*"; exit 1; }

# not compressed: the test checks the contents, not the size
bash "$src/tests/cuda/gpu-bundle.sh" "$build" "$tmp/out" --no-xz > "$tmp/log" 2>&1 ||
    { cat "$tmp/log"; fail "gpu-bundle.sh failed"; }
[ -s "$tmp/out/bundle.tar" ] || fail "no bundle.tar"
bash -n "$tmp/out/unpack.sh" || fail "unpack.sh does not parse"
grep -q "moved aside" "$tmp/out/unpack.sh" || fail "unpack.sh moves no folder aside"
grep -q 'tar -xf "$_b/bundle.tar"' "$tmp/out/unpack.sh" || fail "unpack.sh does not unpack bundle.tar"
mkdir "$tmp/root"
# unpacked once, its entries listed as they come (a second pass to list them took 4 s of CPU)
tar -xvf "$tmp/out/bundle.tar" -C "$tmp/root" > "$tmp/entries" || fail "the bundle does not unpack"
grep -q '^\./\?$' "$tmp/entries" && fail "the bundle has an entry for / itself"

b="$tmp/root$build"
lib="$tmp/root/opt/picoll-gpu/lib"
[ -e "$b/.libs/libpicoll.so" ] || fail "no libpicoll.so in the bundle's build tree"
[ -x "$b/tests/cuda/cuda_coll" ] || fail "no tests/cuda/cuda_coll"
[ -f "$b/tests/mpirun.sh" ] || fail "no tests/mpirun.sh"
[ -z "$(find "$b" -name '*.o' | head -1)" ] || fail "objects in the bundle's build tree"
launcher=$(sed -n 's/^exec "\(.*\)" "\$@"$/\1/p' "$build/tests/mpirun.sh")
[ -n "$launcher" ] || fail "no launcher named in $build/tests/mpirun.sh"
[ -e "$tmp/root$launcher" ] || fail "the launcher $launcher is not in the bundle"

for f in "$b/.libs/libpicoll.so" "$b/tests/cuda/cuda_coll" "$(readlink -f "$tmp/root$launcher")"; do
    out=$(LD_LIBRARY_PATH="$lib" ldd "$f" 2>&1) || fail "ldd $f: $out"
    if echo "$out" | grep -q "not found"; then echo "$out"; fail "$f: a library not found"; fi
done
# iproute2's ip and tc (tests/net/hosts.sh), run through the loader with their own libraries
for t in ip tc; do
    command -v $t >/dev/null 2>&1 || continue
    w="$tmp/root/opt/picoll-gpu/bin/$t"
    [ -x "$w" ] || fail "no $t in the bundle"
    r="$tmp/root/opt/picoll-gpu/iproute"
    /lib64/ld-linux-x86-64.so.2 --library-path "$r/lib" "$r/$t.real" -V >/dev/null 2>&1 ||
        fail "the bundle's $t does not run with its libraries"
done
out=$(LD_LIBRARY_PATH="$lib" ldd "$b/.libs/libpicoll.so")
mpilib=$(echo "$out" | awk '$1 ~ /^lib(mpi|mpich)\.so/ {print $3}')
case $mpilib in
    "$lib"/*) ;;
    *) echo "$out"; fail "the MPI library resolves to '$mpilib', not the bundle's" ;;
esac
echo "gpu_bundle: passed ($(du -k "$tmp/out/bundle.tar" | cut -f1) KiB, MPI library $(basename "$mpilib"))"
