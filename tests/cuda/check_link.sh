#!/bin/sh
# check_link.sh LIBPICOLL_SO: the CUDA runtime is linked in statically and kept private, so that
# libpicoll.so loads where there is no CUDA at all and never stands in for the application's own
# runtime: no dependency on libcudart.so or libcuda.so, no cuda* symbol exported.
lib="$1"
status=0
deps=$(ldd "$lib" 2>&1) || { echo "check_link.sh: ldd $lib failed: $deps"; exit 1; }
if echo "$deps" | grep -E "libcudart|libcuda\.so"; then
    echo "check_link.sh: $lib depends on a CUDA library"; status=1
fi
exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep -E "^_*cuda" | head -5)
if [ -n "$exported" ]; then
    echo "check_link.sh: $lib exports CUDA runtime symbols: $exported"; status=1
fi
if ! nm "$lib" | grep -q " t cudaMalloc$"; then
    echo "check_link.sh: $lib does not hold the CUDA runtime (cudaMalloc)"; status=1
fi
[ $status = 0 ] && echo "check_link.sh: $lib holds a private CUDA runtime and needs no CUDA library"
exit $status
