#!/usr/bin/env bash
# gpu-bundle.sh BUILD_DIR OUT_DIR [--no-xz]: (OUT_DIR a folder at the top of this source tree) packs a built picoll tree and the Debian MPI it was built
# against into OUT_DIR/bundle.tar.xz (with OUT_DIR/unpack.sh), for a GPU machine that has the
# NVIDIA driver but no MPI and no package registry. On that machine, from a copy of this source
# tree:
#     . OUT_DIR/unpack.sh        # unpacks, sets PATH and LD_LIBRARY_PATH
#     bash tests/cuda/run-gpu.sh BUILD_DIR
# What goes in (and iproute2's ip and tc, for tests/net/hosts.sh, last on PATH):
#   - BUILD_DIR without objects (at its absolute path: CTest's files name it and the source tree);
#   - the MPI's own packages' files (Open MPI: openmpi-bin, libopenmpi3, openmpi-common, libpmix2,
#     and libopenmpi-dev, whose headers gpu-lease.sh's torch step compiles picoll_torch with;
#     MPICH: mpich, libmpich12) at their absolute paths: where the machine has folders of the same
#     MPI (another distribution's Open MPI, whose plugins would mix with these), unpack.sh moves
#     them aside (FOLDER.picoll-aside) first;
#   - every shared library those files and the build's programs need that the C library, the
#     C++ runtime or the driver do not provide, in one folder of its own (/opt/picoll-gpu/lib),
#     reached through LD_LIBRARY_PATH only, so the machine's own libraries stay as they were.
# --no-xz: OUT_DIR/bundle.tar, not compressed (CTest cuda.gpu_bundle, which checks the contents:
# xz took 14 of its 22 s of CPU, 2026-11-29), and an unpack.sh that unpacks that.
set -euo pipefail
build=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bundle=bundle.tar.xz zip=J
if [ "${3-}" = --no-xz ]; then bundle=bundle.tar zip=""; fi
flavour=$(sed -n 's/^MPI_FLAVOUR = //p' "$build/Makefile")
case $flavour in
    openmpi) pkgs="openmpi-bin libopenmpi3 openmpi-common libpmix2 libopenmpi-dev" ;;
    mpich) pkgs="mpich libmpich12" ;;
    *) echo "gpu-bundle.sh: unknown MPI flavour '$flavour' in $build/Makefile"; exit 1 ;;
esac
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
files="$stage/files"
# the MPI packages' regular files and links (no directories: tar adds their parents); not the -dev
# package's pkg-config files and Fortran modules (the machine's folders of those stay as they are)
for p in $pkgs; do
    dpkg -L "$p" | while read -r f; do
        if [ -L "$f" ] || [ -f "$f" ]; then echo "${f#/}"; fi
    done
done | grep -v '^usr/share/\(doc\|man\|lintian\)/' |
    grep -v '^usr/lib/x86_64-linux-gnu/\(pkgconfig\|fortran\)/' | sort -u > "$files"
# the plugins of hwloc, libfabric and UCX are loaded by path: kept where they are
for d in /usr/lib/x86_64-linux-gnu/hwloc /usr/lib/x86_64-linux-gnu/libfabric /usr/lib/x86_64-linux-gnu/ucx; do
    if [ -d "$d" ]; then find "$d" \( -type f -o -type l \) | sed 's|^/||' >> "$files"; fi
done

# ctest, for a machine without one (unpack.sh puts it last on PATH)
mkdir -p "$stage/opt/picoll-gpu/bin"
cp -L "$(command -v ctest)" "$stage/opt/picoll-gpu/bin/"

# iproute2's ip and tc, for tests/net/hosts.sh on a machine without them (a GPU machine without
# iproute2 skipped the two-host runs, 2026-11-26): each with its own libraries, reached through
# the dynamic loader for it alone (nothing it runs, as ip netns exec does, inherits them)
mkdir -p "$stage/opt/picoll-gpu/iproute/lib"
for t in ip tc; do
    tp=$(command -v $t || true)
    [ -n "$tp" ] || continue
    cp -L "$tp" "$stage/opt/picoll-gpu/iproute/$t.real"
    ldd "$tp" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
        grep -v -E '/(libc|ld-linux-x86-64)\.so' |
        while read -r lib; do cp -L "$lib" "$stage/opt/picoll-gpu/iproute/lib/"; done
    printf '#!/bin/sh\nexec /lib64/ld-linux-x86-64.so.2 --library-path /opt/picoll-gpu/iproute/lib /opt/picoll-gpu/iproute/%s.real "$@"\n' "$t" > "$stage/opt/picoll-gpu/bin/$t"
    chmod +x "$stage/opt/picoll-gpu/bin/$t"
done

# the libraries they and the build need, less those every Linux with a CUDA driver has
elfs=$( (sed 's|^|/|' "$files"; command -v ctest; find "$build" -type f \( -perm -u+x -o -name '*.so*' \)) |
        while read -r f; do [ -f "$f" ] && head -c4 "$f" 2>/dev/null | grep -q ELF && echo "$f"; done)
mkdir -p "$stage/opt/picoll-gpu/lib"
for e in $elfs; do ldd "$e" 2>/dev/null || true; done |
    awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libnvidia-[a-z-]*)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/opt/picoll-gpu/lib/"; done

(cd / && tar -cf "$stage/mpi.tar" -T "$files")
tar -xf "$stage/mpi.tar" -C "$stage" --exclude='usr/lib/x86_64-linux-gnu/lib*.so*' 2>/dev/null || true
# the build tree, without what only make needs
tar -cf "$stage/build.tar" --exclude='*.o' --exclude='*.lo' --exclude='.deps' \
    --exclude='build.log' --exclude='Testing' -C / "${build#/}"
tar -xf "$stage/build.tar" -C "$stage"
rm -f "$stage/mpi.tar" "$stage/build.tar" "$files"
# UCX finds its modules beside the libucs it runs: a copy beside the one in LD_LIBRARY_PATH
if [ -d /usr/lib/x86_64-linux-gnu/ucx ]; then cp -r /usr/lib/x86_64-linux-gnu/ucx "$stage/opt/picoll-gpu/lib/"; fi
# the folders that belong to these packages alone, moved aside on the machine where they exist
aside=$(cd "$stage" && for d in usr/lib/x86_64-linux-gnu/* usr/share/* etc/*; do
            if [ -d "$d" ] && [ ! -L "$d" ]; then printf '/%s ' "$d"; fi; done)
# named, not ".": the archive must carry no entry for / itself
tar -c${zip}f "$out/$bundle" -C "$stage" $(cd "$stage" && ls)
cat > "$out/unpack.sh" <<EOF
# . unpack.sh: unpacks $bundle beside it into / (the build tree, the MPI's files and
# /opt/picoll-gpu; the MPI's own folders found there are moved aside first: $aside)
# and sets PATH and LD_LIBRARY_PATH for it.
_b=\$(cd "\$(dirname "\${BASH_SOURCE[0]:-\$0}")" && pwd)
# the source tree at the path the build names, where this copy of it lies elsewhere
_src=$(cd "$build/$(sed -n 's/^top_srcdir = //p' "$build/Makefile")" && pwd)
if [ ! -e "\$_src" ]; then mkdir -p "\$(dirname "\$_src")"; ln -s "\$(cd "\$_b/.." && pwd)" "\$_src"; fi
if [ ! -e /opt/picoll-gpu/unpacked ]; then
    for d in $aside; do if [ -e "\$d" ]; then mv "\$d" "\$d.picoll-aside" && echo "unpack.sh: \$d moved aside"; fi; done
    tar -x${zip}f "\$_b/$bundle" -C / --no-overwrite-dir --keep-directory-symlink && touch /opt/picoll-gpu/unpacked
fi
export LD_LIBRARY_PATH=/opt/picoll-gpu/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PATH=\$PATH:/opt/picoll-gpu/bin
echo "unpack.sh: $flavour and $build unpacked"
EOF
ls -la "$out"
