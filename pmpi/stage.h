/* Staging of CUDA buffers for an MPI that is not CUDA-aware: the interface of the engine behind the
 * wrappers that pmpi/gen_wrappers.py writes from pmpi/calls.def. A wrapper starts a call, describes
 * each buffer argument (picoll_call_buf), and picoll_call_begin copies every input that is device
 * or managed memory to pinned host memory; the wrapper runs the PMPI function on the pass
 * pointers, and picoll_call_end copies the outputs back: at once for a blocking call; for a
 * non-blocking or persistent one when its request completes, for one-sided calls at the window's
 * next synchronisation, for split collective I/O at the matching _end, the call then handed to the
 * registry of records (pmpi/records.h), which the completion calls (pmpi/requests.c) consult.
 *
 * The engine is pmpi/stage.c (describing the buffers, their spans, begin and end) and
 * pmpi/copies.c (the host copies in and back, shared with the registry); the MPI errors it raises
 * are pmpi/errors.c's.
 *
 * Host buffers are never copied: a call whose buffers are all host memory costs one memory-kind
 * query per buffer (a per-thread cache). Everything the MPI must judge (a bad communicator, a
 * negative count, a bad datatype) goes to it untouched, so that the application sees the MPI's own
 * error. Where device memory cannot be staged at all, the call is refused with an MPI error on the
 * call's communicator, window or file, whose text names the call and the argument. */
#ifndef PICOLL_STAGE_H
#define PICOLL_STAGE_H

#include <mpi.h>

#include "core/core.h"
#include "mem/memkind.h"
#include "mem/stage.h"

#include <stddef.h>

/* roles of a buffer: bits */
enum {
    PICOLL_ROLE_NONE = 0,
    PICOLL_ROLE_IN = 1,
    PICOLL_ROLE_OUT = 2,
    PICOLL_ROLE_INOUT = 3,
    PICOLL_ROLE_PARTIAL = 4,
    PICOLL_ROLE_RECV = 6
};
/* on which ranks a role applies (rooted collectives) */
enum { PICOLL_AT_ALL, PICOLL_AT_ROOT, PICOLL_AT_LEAF, PICOLL_AT_OTHER };
enum { PICOLL_SHAPE_N, PICOLL_SHAPE_V, PICOLL_SHAPE_W, PICOLL_SHAPE_SUM, PICOLL_SHAPE_AT };
enum { PICOLL_MULT_ONE, PICOLL_MULT_G, PICOLL_MULT_IN, PICOLL_MULT_OUT };
enum { PICOLL_OBJ_NONE, PICOLL_OBJ_COMM, PICOLL_OBJ_WIN, PICOLL_OBJ_FILE };
typedef enum {
    PICOLL_MODE_BLOCKING,   /* outputs copied back before the call returns */
    PICOLL_MODE_REQUEST,    /* ... when the request completes */
    PICOLL_MODE_PERSISTENT, /* inputs copied at every MPI_Start, outputs at every completion */
    PICOLL_MODE_RMA,        /* ... at the window's next synchronisation */
    PICOLL_MODE_SPLIT       /* ... by the file's matching split-collective _end */
} picoll_stage_mode_t;

#define PICOLL_NO_ROOT (-0x7ffffff0) /* the root argument of a call that has none */
#define PICOLL_STAGE_MAX 3

/* One buffer argument as the table describes it. */
typedef struct {
    const void *ptr;
    const char *name;
    struct {
        int role, at;
    } roles[2];
    int shape, mult;
    MPI_Count count;
    const void *counts, *displs; /* int, or MPI_Count / MPI_Aint when _wide */
    int counts_wide, displs_wide;
    MPI_Datatype type;
    const MPI_Datatype *types; /* PICOLL_SHAPE_W */
    MPI_Count ip_count;        /* in place: ip_count * ip_mult elements, or the sum */
    int ip_mult, ip_sum;
} picoll_bufspec_t;

typedef struct {
    const void *user; /* as the application passed it */
    void *pass;       /* what PMPI gets: user, or the host copy shifted by -lo */
    int flags;        /* PICOLL_ROLE_* bits on this rank; 0: not a buffer here */
    int staged;       /* device or managed memory */
    picoll_meminfo_t info;
    picoll_hostcopy_t copy; /* copy.host: the pinned copy of [user + lo, user + lo + bytes) */
    MPI_Aint lo;
    size_t bytes;
    int dense; /* contiguous from user on: a partial output needs no copy in */
} picoll_stagebuf_t;

typedef struct {
    const char *fn;
    int obj_kind;
    union {
        MPI_Comm comm;
        MPI_Win win;
        MPI_File file;
    } obj;
    int root, target, intra_only;
    int mode;   /* picoll_stage_mode_t */
    int n, any; /* any: 1 a buffer is staged; 2 and a copy in failed */
    picoll_bufspec_t spec[PICOLL_STAGE_MAX];
    picoll_stagebuf_t b[PICOLL_STAGE_MAX];
} picoll_call_t;

/* What the generated layer does with each function of this MPI that has a buffer: "staged",
 * "accelerated" (picoll's algorithms, staged when they decline), "refused" (device memory gets an
 * MPI error) or "no message data" (not wrapped; why says what the pointer is). */
typedef struct {
    const char *name, *kind, *why;
} picoll_gen_call_t;
extern const picoll_gen_call_t picoll_gen_calls[];
extern const int picoll_gen_ncalls;

#define PICOLL_STAGE_OFF() (!picoll_g.staging || picoll_reentry)

void picoll_call_start(picoll_call_t *c, const char *fn, int obj_kind, const void *obj, int root,
                       int target);
void picoll_call_buf(picoll_call_t *c, const picoll_bufspec_t *spec);
/* 0: run PMPI on picoll_call_pass() then picoll_call_end*; else *rc is the error, raised. */
int picoll_call_begin(picoll_call_t *c, picoll_stage_mode_t mode, int *rc);
static inline void *picoll_call_pass(picoll_call_t *c, int i)
{
    return c->b[i].pass;
}
/* Blocking: copies back (status: the receive's, for PARTIAL outputs). Request, persistent, RMA:
 * hands the copies to a record. Returns the call's MPI return code. */
int picoll_call_end(picoll_call_t *c, int rc, const MPI_Status *status, MPI_Request *request);
int picoll_call_end_split(picoll_call_t *c, int rc, MPI_File file);
/* Device memory in ptr refused: 1 with *rc the error raised; 0 otherwise. */
int picoll_call_refuse(picoll_call_t *c, const void *ptr, const char *arg, int *rc);

/* ---- the host copies of a call's staged buffers (pmpi/copies.c): the engine's, and the
 * registry's when a record completes or a persistent request starts ---- */
/* Copies the inputs in; 1 when a copy failed. */
int picoll_call_copy_in(picoll_call_t *c);
/* Copies the outputs back, the bytes of a PARTIAL output only as far as status says (none when
 * the receive was cancelled); 1 when a copy failed. */
int picoll_call_copy_out(picoll_call_t *c, const MPI_Status *status);
/* Gives the host copies back. */
void picoll_call_release(picoll_call_t *c);

#endif
