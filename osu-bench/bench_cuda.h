/* osu-bench: the CUDA driver as the benchmarks use it (-d cuda), loaded with
 * dlopen("libcuda.so.1") at run time, so that the programs build without the CUDA Toolkit and run
 * on a real GPU and on the test driver's emulated one alike. No CUDA header and no CUDA runtime:
 * the few types and constants are declared in bench_cuda.c. */
#ifndef OSU_BENCH_CUDA_H
#define OSU_BENCH_CUDA_H

#include <stddef.h>

/* Loads the driver and does what cudaSetDevice(local_rank % devices) does: retains the primary
 * context of that device and makes it current in the calling thread. Returns 0, or -1 and why. */
int bench_cuda_setup(int local_rank, char *why, size_t len);

/* Zeroed device memory of the current context, or NULL. */
void *bench_cuda_alloc_device(size_t bytes);
void bench_cuda_free_device(void *p);
/* Pinned host memory (as cudaMallocHost gives), or NULL. */
void *bench_cuda_alloc_pinned(size_t bytes);
void bench_cuda_free_pinned(void *p);

/* Copies bytes from host memory to device memory (to_device) or back, synchronously as cudaMemcpy
 * does. Returns 0, or -1 and the driver's error in why. */
int bench_cuda_copy(void *device, void *host, size_t bytes, int to_device, char *why, size_t len);

/* Whether the loaded driver is one of the test suite's (tests/cuda: the emulated GPU, the strict
 * fake; they export fakecuda_* functions): there is no GPU, and a real library such as NCCL cannot
 * run on them. */
int bench_cuda_test_driver(void);

/* A stream of the current context (cuStreamCreate), for a library that takes the application's
 * stream (--nccl); synchronised as cudaStreamSynchronize does. Each returns 0, or -1 and why. */
int bench_cuda_stream_create(void **stream, char *why, size_t len);
int bench_cuda_stream_synchronize(void *stream, char *why, size_t len);
void bench_cuda_stream_destroy(void *stream);

/* CUDA graphs (--graph): whether the driver has the graph calls; capture of the stream's work begun (relaxed mode: the calls captured may
 * allocate) and ended, the graph instantiated into *exec (the graph itself freed); launched on a
 * stream; freed. Each returns 0, or -1 and why (the driver lacking the graph calls included). */
int bench_cuda_graph_check(char *why, size_t len);
int bench_cuda_graph_begin(void *stream, char *why, size_t len);
int bench_cuda_graph_end(void *stream, void **exec, char *why, size_t len);
int bench_cuda_graph_launch(void *exec, void *stream, char *why, size_t len);
void bench_cuda_graph_destroy(void *exec);

/* How many entry points the loaded driver counts the calls of (the test driver's emulated GPU
 * exports fakecuda_call_counts and fakecuda_call_name): 0 where it counts none (a real driver). */
int bench_cuda_counted_calls(void);
/* This process's calls so far of entry points 0..n-1 (n from bench_cuda_counted_calls). */
void bench_cuda_call_counts(long *counts, int n);
/* The name of counted entry point i ("cuLaunchKernel"). */
const char *bench_cuda_call_name(int i);

#endif
