/* Helpers shared by picoll's MPI tests. The tests are plain MPI programs: they do not link
 * picoll; when it is preloaded they reach its public API through dlsym, and --expect-picoll makes
 * a missing API a failure instead of a plain-MPI run. */
#ifndef PICOLL_MPITEST_H
#define PICOLL_MPITEST_H

#include "build-config.h" /* _GNU_SOURCE */
#include <mpi.h>
#include <picoll.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status that CTest's SKIP_RETURN_CODE maps to "skipped". */
#define MT_SKIP 77

typedef struct {
    int found;
    const char *(*version)(void);
    int (*active)(void);
    void (*set_bypass)(int);
    int (*comm_query)(MPI_Comm comm, picoll_comm_info_t *info);
    const char *(*last_algorithm)(void); /* NULL in a picoll without it */
} mt_picoll_t;

extern mt_picoll_t mt_picoll;
extern int mt_rank, mt_size; /* in MPI_COMM_WORLD */
extern long mt_failures;

/* Looks picoll's API up in the process. With expect, a missing symbol is a failure. */
int mt_load_picoll(int expect);

/* One line per failure (the first 20 on each rank), counted for mt_finish. */
void mt_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define MT_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            mt_fail(__VA_ARGS__);                                                                  \
        }                                                                                          \
    } while (0)

/* Sums the failures over MPI_COMM_WORLD (through PMPI, out of picoll's way), prints the verdict
 * on rank 0, calls MPI_Finalize and returns the process exit status. */
int mt_finish(const char *test);

/* The MPI's library as a number when it is MPICH (MPI_Get_library_version: "MPICH Version:
 * 5.0.2" gives 50002, also through the MPI-5 standard ABI), else 0. For the known deviations of
 * an MPI's own that a test leaves out. */
int mt_mpich_version(void);

/* Ends the job as skipped (every rank must call it): prints why on rank 0. */
int mt_skip(const char *why);

/* Deterministic pseudo-random stream: every rank can regenerate every other rank's data. */
static inline uint64_t mt_hash(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static inline uint64_t mt_rand(uint64_t seed, uint64_t a, uint64_t b)
{
    return mt_hash(seed ^ mt_hash(a * 0x100000001b3ull + mt_hash(b)));
}

/* MPICH 4.0.2 (Debian 12) crashes in MPI_Reduce with MPI_IN_PLACE at a root other than 0 from
 * 513 ints (2 KiB) on, picoll or not (a segfault inside its reduce algorithm): tests skip those. */
static inline int mt_reduce_in_place_broken(int root, size_t bytes)
{
#ifdef MPICH_VERSION
    return root != 0 && bytes > 2048;
#else
    (void)root;
    (void)bytes;
    return 0;
#endif
}

/* Whether a command-line flag is present. */
int mt_flag(int argc, char **argv, const char *flag);
/* The value after a --name option, or def. */
const char *mt_option(int argc, char **argv, const char *name, const char *def);

#endif
