#!/bin/sh
# check_link.sh LIBPICOLL_SO: picoll reaches CUDA through the driver only (libcuda.so.1, opened
# at run time), so that libpicoll.so loads where there is no CUDA at all and never stands in for
# the application's own runtime: no dependency on any CUDA library, no CUDA runtime inside
# (static or not), no cu*/cuda* symbol exported; and the kernels are inside, as a fatbin.
lib="$1"
status=0
deps=$(ldd "$lib" 2>&1) || { echo "check_link.sh: ldd $lib failed: $deps"; exit 1; }
if echo "$deps" | grep -E "libcudart|libcuda\.so|libnvrtc|libcublas"; then
    echo "check_link.sh: $lib depends on a CUDA library"; status=1
fi
exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep -E "^_*cu" | head -5)
if [ -n "$exported" ]; then
    echo "check_link.sh: $lib exports CUDA-like symbols: $exported"; status=1
fi
runtime=$(nm "$lib" | awk '{print $NF}' | grep -E "^(cudaMalloc|cudaLaunchKernel|__cudaRegisterFatBinary)$" | head -3)
if [ -n "$runtime" ]; then
    echo "check_link.sh: $lib holds the CUDA runtime: $runtime"; status=1
fi
if ! nm "$lib" | grep -q " picoll_cuda_fatbin$"; then
    echo "check_link.sh: $lib does not embed the kernels' fatbin (picoll_cuda_fatbin)"; status=1
fi
[ $status = 0 ] && echo "check_link.sh: $lib needs no CUDA library and embeds its kernels"
exit $status
