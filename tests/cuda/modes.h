/* The modes of tests/cuda/cuda_coll that test issue 12's defects (modes.c), and what they share
 * with the main program (cuda_coll.c). Each returns the process exit status, after MPI_Finalize. */
#ifndef PICOLL_TESTS_CUDA_MODES_H
#define PICOLL_TESTS_CUDA_MODES_H

#include <stddef.h>
#include <stdint.h>

extern int my_device; /* local rank % device count */
extern int ndev;      /* devices the driver sees */
extern int fast;      /* --fast */

/* Whether the underlying MPI (or picoll's staging below it) accepts device buffers in a call
 * picoll hands over: only then may ranks mix memory kinds or pass long double on the device. */
int fallback_takes_device_buffers(void);

/* Ends the job as skipped when the driver lacks one of the entry points (every rank loads the same
 * driver, so all skip together); -1 when it has them all. */
int skip_lacking(const size_t *need, int n, const char *mode);
/* The monotonic clock in seconds; a host function that sleeps *(unsigned *)arg microseconds. */
double now_s(void);
void sleep_host_fn(void *arg);

int mode_rehome(int argc, char **argv);
/* devcoll.c: reduce-scatter (block or not), bcast, reduce, allgatherv and alltoallv on device
 * buffers; the same with rank R's kernels S seconds late (devcoll-late R S) */
int mode_devcoll(int argc, char **argv);
int mode_devcoll_late(int argc, char **argv);
/* one of devcoll's collectives drawn from seed for cuda_coll shuffle's call k */
void devcoll_drawn(uint64_t seed, long k);
/* shuffle.c: calls drawn at random, blocking and (--stream) enqueued */
int mode_shuffle(int argc, char **argv);
/* cuda_coll.c: allreduce counts around the limits, in elements of esize bytes (16 at most) */
size_t edge_counts(size_t esize, size_t *out);
int mode_thread(int argc, char **argv);
int mode_ptds(int argc, char **argv);
int mode_mixed(int argc, char **argv);
int mode_commfree(int argc, char **argv);
int mode_finalize(int argc, char **argv);
int mode_ctx(int argc, char **argv);
int mode_twoctx(int argc, char **argv);
int mode_reset(int argc, char **argv);
int mode_crossed(int argc, char **argv);
int mode_capture(int argc, char **argv);
int mode_stall_kernel(int argc, char **argv);
int mode_backlog(int argc, char **argv);
int mode_late(int argc, char **argv);

#endif
