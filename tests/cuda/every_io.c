/* every_call's MPI-IO cases, on a temporary file every rank opens: before the call each rank
 * writes its slot (n elements of the type, packed) from host memory; a write case writes buffer
 * 0 into its own slot, a read case reads its right neighbour's slot (explicit offset, individual
 * pointer) or its own (shared pointer, taken in rank order; ordered) into buffer 1. The file
 * is truncated before each run. Afterwards
 * each rank records the whole file and the call's status count, compared with the host run's.
 * One run function serves every case; the case's io_t says which call it is. */
#include "every.h"

#include "mpitest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { IO_AT, IO_PTR, IO_SHARED, IO_ORDERED };

typedef struct {
    int how;   /* IO_* */
    int write; /* else read */
    int all;   /* collective (_all, ordered) */
    int split; /* _begin/_end */
} io_t;

static MPI_File the_file = MPI_FILE_NULL;

/* The file, opened at the first case and kept open (opening costs tens of milliseconds):
 * tmpfs where there is one, where MPI_File_sync's fsync costs nothing. */
static int open_file(MPI_Comm comm)
{
    char path[128];
    long id = (long)getpid();
    if (the_file != MPI_FILE_NULL) {
        return MPI_SUCCESS;
    }
    MPI_Bcast(&id, 1, MPI_LONG, 0, comm);
    snprintf(path, sizeof(path), "%s/every-call-io-%ld.dat",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", id);
    return MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                         MPI_INFO_NULL, &the_file);
}

void ev_io_close(void)
{
    if (the_file != MPI_FILE_NULL) {
        MPI_File_close(&the_file);
    }
}

static void plan_write(env_t *e)
{
    ev_plan(e, 0, e->n, EV_IN);
}

static void plan_read(env_t *e)
{
    ev_plan(e, 1, e->n, EV_OUT);
}

static MPI_Offset slot_bytes(const env_t *e)
{
    int size = 0;
    MPI_Type_size(e->type, &size);
    return (MPI_Offset)e->n * size;
}

/* ---- the call ---- */

static int blocking_call(const io_t *d, MPI_File fh, MPI_Offset off, void *b, int n, MPI_Datatype t,
                         MPI_Status *st, int large)
{
#if MPI_VERSION >= 4
    if (large) {
        if (d->how == IO_AT) {
            return d->write ? (d->all ? MPI_File_write_at_all_c : MPI_File_write_at_c)(fh, off, b,
                                                                                       n, t, st)
                            : (d->all ? MPI_File_read_at_all_c : MPI_File_read_at_c)(fh, off, b, n,
                                                                                     t, st);
        }
        if (d->how == IO_PTR) {
            return d->write ? (d->all ? MPI_File_write_all_c : MPI_File_write_c)(fh, b, n, t, st)
                            : (d->all ? MPI_File_read_all_c : MPI_File_read_c)(fh, b, n, t, st);
        }
        if (d->how == IO_SHARED) {
            return d->write ? MPI_File_write_shared_c(fh, b, n, t, st)
                            : MPI_File_read_shared_c(fh, b, n, t, st);
        }
        return d->write ? MPI_File_write_ordered_c(fh, b, n, t, st)
                        : MPI_File_read_ordered_c(fh, b, n, t, st);
    }
#else
    (void)large;
#endif
    if (d->how == IO_AT) {
        return d->write ? (d->all ? MPI_File_write_at_all : MPI_File_write_at)(fh, off, b, n, t, st)
                        : (d->all ? MPI_File_read_at_all : MPI_File_read_at)(fh, off, b, n, t, st);
    }
    if (d->how == IO_PTR) {
        return d->write ? (d->all ? MPI_File_write_all : MPI_File_write)(fh, b, n, t, st)
                        : (d->all ? MPI_File_read_all : MPI_File_read)(fh, b, n, t, st);
    }
    if (d->how == IO_SHARED) {
        return d->write ? MPI_File_write_shared(fh, b, n, t, st)
                        : MPI_File_read_shared(fh, b, n, t, st);
    }
    return d->write ? MPI_File_write_ordered(fh, b, n, t, st)
                    : MPI_File_read_ordered(fh, b, n, t, st);
}

static int nonblocking_call(const io_t *d, MPI_File fh, MPI_Offset off, void *b, int n,
                            MPI_Datatype t, MPI_Request *q, int large)
{
#if MPI_VERSION >= 4
    if (large) {
        if (d->how == IO_AT) {
            return d->write ? (d->all ? MPI_File_iwrite_at_all_c : MPI_File_iwrite_at_c)(fh, off, b,
                                                                                         n, t, q)
                            : (d->all ? MPI_File_iread_at_all_c : MPI_File_iread_at_c)(fh, off, b,
                                                                                       n, t, q);
        }
        if (d->how == IO_PTR) {
            return d->write ? (d->all ? MPI_File_iwrite_all_c : MPI_File_iwrite_c)(fh, b, n, t, q)
                            : (d->all ? MPI_File_iread_all_c : MPI_File_iread_c)(fh, b, n, t, q);
        }
        return d->write ? MPI_File_iwrite_shared_c(fh, b, n, t, q)
                        : MPI_File_iread_shared_c(fh, b, n, t, q);
    }
#else
    (void)large;
#endif
    if (d->how == IO_AT) {
        return d->write
                   ? (d->all ? MPI_File_iwrite_at_all : MPI_File_iwrite_at)(fh, off, b, n, t, q)
                   : (d->all ? MPI_File_iread_at_all : MPI_File_iread_at)(fh, off, b, n, t, q);
    }
    if (d->how == IO_PTR) {
        return d->write ? (d->all ? MPI_File_iwrite_all : MPI_File_iwrite)(fh, b, n, t, q)
                        : (d->all ? MPI_File_iread_all : MPI_File_iread)(fh, b, n, t, q);
    }
    return d->write ? MPI_File_iwrite_shared(fh, b, n, t, q)
                    : MPI_File_iread_shared(fh, b, n, t, q);
}

/* split collectives: _begin, then _end with the status */
static void split_call(env_t *e, const io_t *d, MPI_File fh, MPI_Offset off, void *b,
                       MPI_Status *st)
{
    int n = e->n;
    MPI_Datatype t = e->type;
#if MPI_VERSION >= 4
    if (e->c->form == EV_LARGE) {
        if (d->how == IO_AT) {
            EV_RC(e, d->write ? MPI_File_write_at_all_begin_c(fh, off, b, n, t)
                              : MPI_File_read_at_all_begin_c(fh, off, b, n, t));
        } else if (d->how == IO_PTR) {
            EV_RC(e, d->write ? MPI_File_write_all_begin_c(fh, b, n, t)
                              : MPI_File_read_all_begin_c(fh, b, n, t));
        } else {
            EV_RC(e, d->write ? MPI_File_write_ordered_begin_c(fh, b, n, t)
                              : MPI_File_read_ordered_begin_c(fh, b, n, t));
        }
    } else
#endif
        if (d->how == IO_AT) {
        EV_RC(e, d->write ? MPI_File_write_at_all_begin(fh, off, b, n, t)
                          : MPI_File_read_at_all_begin(fh, off, b, n, t));
    } else if (d->how == IO_PTR) {
        EV_RC(e, d->write ? MPI_File_write_all_begin(fh, b, n, t)
                          : MPI_File_read_all_begin(fh, b, n, t));
    } else {
        EV_RC(e, d->write ? MPI_File_write_ordered_begin(fh, b, n, t)
                          : MPI_File_read_ordered_begin(fh, b, n, t));
    }
    if (d->how == IO_AT) {
        EV_RC(e, d->write ? MPI_File_write_at_all_end(fh, b, st)
                          : MPI_File_read_at_all_end(fh, b, st));
    } else if (d->how == IO_PTR) {
        EV_RC(e, d->write ? MPI_File_write_all_end(fh, b, st) : MPI_File_read_all_end(fh, b, st));
    } else {
        EV_RC(e, d->write ? MPI_File_write_ordered_end(fh, b, st)
                          : MPI_File_read_ordered_end(fh, b, st));
    }
}

/* The call once, on this rank's offset; a shared-pointer call without a turn order is made by
 * one rank at a time, in rank order, so that the file comes out the same in every run. */
static void one_call(env_t *e, const io_t *d, MPI_File fh, MPI_Status *st)
{
    MPI_Offset slot = slot_bytes(e);
    MPI_Offset off = d->write ? e->rank * slot : e->right * slot;
    void *b = d->write ? e->buf[0] : e->buf[1];
    int large = e->c->form == EV_LARGE || e->c->form == EV_LARGE_NB;
    if (d->how == IO_PTR) {
        EV_RC(e, MPI_File_seek(fh, off, MPI_SEEK_SET));
    }
    if (d->split) {
        split_call(e, d, fh, off, b, st);
    } else if (ev_nonblocking(e->c->form)) {
        EV_RC(e, nonblocking_call(d, fh, off, b, e->n, e->type, ev_req(e), large));
        ev_complete(e);
        *st = e->st[0];
    } else {
        EV_RC(e, blocking_call(d, fh, off, b, e->n, e->type, st, large));
    }
}

static void run_io(env_t *e)
{
    const io_t *d = e->c->arg;
    MPI_Offset slot = slot_bytes(e), total = slot * e->size;
    unsigned char *mine = malloc((size_t)slot + 1), *all = malloc((size_t)total + 1);
    MPI_File fh;
    MPI_Status st;
    int count = -1;

    memset(&st, 0, sizeof(st));
    EV_RC(e, open_file(e->comm));
    if (e->rc != MPI_SUCCESS) {
        free(mine), free(all);
        return;
    }
    fh = the_file;
    ev_fill(mine, (size_t)slot, e->seed * 3 + 1);
    EV_RC(e, MPI_Barrier(e->comm)); /* the last run's reads are over */
    EV_RC(e, MPI_File_set_size(fh, 0));
    EV_RC(e,
          MPI_File_write_at_all(fh, e->rank * slot, mine, (int)slot, MPI_BYTE, MPI_STATUS_IGNORE));
    EV_RC(e, MPI_File_sync(fh));
    EV_RC(e, MPI_Barrier(e->comm));
    EV_RC(e, MPI_File_sync(fh));
    EV_RC(e, MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    if (d->how == IO_SHARED) {
        for (int k = 0; k < e->size; k++) {
            if (k == e->rank) {
                one_call(e, d, fh, &st);
            }
            EV_RC(e, MPI_Barrier(e->comm));
        }
    } else {
        one_call(e, d, fh, &st);
    }
    MPI_Get_count(&st, e->type, &count);
    ev_log(e, &count, sizeof(count));
    EV_RC(e, MPI_File_sync(fh));
    EV_RC(e, MPI_Barrier(e->comm));
    EV_RC(e, MPI_File_sync(fh));
    EV_RC(e, MPI_File_read_at(fh, 0, all, (int)total, MPI_BYTE, MPI_STATUS_IGNORE));
    ev_log(e, all, (size_t)total);
    free(mine);
    free(all);
}

static const io_t w_at = {IO_AT, 1, 0, 0}, r_at = {IO_AT, 0, 0, 0};
static const io_t w_at_all = {IO_AT, 1, 1, 0}, r_at_all = {IO_AT, 0, 1, 0};
static const io_t w_ptr = {IO_PTR, 1, 0, 0}, r_ptr = {IO_PTR, 0, 0, 0};
static const io_t w_all = {IO_PTR, 1, 1, 0}, r_all = {IO_PTR, 0, 1, 0};
static const io_t w_shared = {IO_SHARED, 1, 0, 0}, r_shared = {IO_SHARED, 0, 0, 0};
static const io_t w_ordered = {IO_ORDERED, 1, 1, 0}, r_ordered = {IO_ORDERED, 0, 1, 0};
static const io_t w_at_split = {IO_AT, 1, 1, 1}, r_at_split = {IO_AT, 0, 1, 1};
static const io_t w_all_split = {IO_PTR, 1, 1, 1}, r_all_split = {IO_PTR, 0, 1, 1};
static const io_t w_ord_split = {IO_ORDERED, 1, 1, 1}, r_ord_split = {IO_ORDERED, 0, 1, 1};

/* MPICH 4.0.2's MPI_Request_get_status never sees ROMIO's non-blocking I/O requests complete
 * (only MPI_Test and MPI_Wait make them progress), on host buffers alone */
#ifdef MPICH_VERSION
#define IO_FLAGS (EV_F_SMALL | EV_F_NO_GET_STATUS)
#else
#define IO_FLAGS EV_F_SMALL
#endif
#define W(name, form, d)                                                                           \
    {                                                                                              \
        name, run_io, plan_write, form, IO_FLAGS, &d                                               \
    }
#define R(name, form, d)                                                                           \
    {                                                                                              \
        name, run_io, plan_read, form, IO_FLAGS, &d                                                \
    }
const ev_case_t ev_io_cases[] = {
    W("MPI_File_write_at", EV_BLOCKING, w_at),
    R("MPI_File_read_at", EV_BLOCKING, r_at),
    W("MPI_File_write_at_all", EV_BLOCKING, w_at_all),
    R("MPI_File_read_at_all", EV_BLOCKING, r_at_all),
    W("MPI_File_write", EV_BLOCKING, w_ptr),
    R("MPI_File_read", EV_BLOCKING, r_ptr),
    W("MPI_File_write_all", EV_BLOCKING, w_all),
    R("MPI_File_read_all", EV_BLOCKING, r_all),
    W("MPI_File_write_shared", EV_BLOCKING, w_shared),
    R("MPI_File_read_shared", EV_BLOCKING, r_shared),
    W("MPI_File_write_ordered", EV_BLOCKING, w_ordered),
    R("MPI_File_read_ordered", EV_BLOCKING, r_ordered),
    W("MPI_File_iwrite_at", EV_NONBLOCKING, w_at),
    R("MPI_File_iread_at", EV_NONBLOCKING, r_at),
    W("MPI_File_iwrite_at_all", EV_NONBLOCKING, w_at_all),
    R("MPI_File_iread_at_all", EV_NONBLOCKING, r_at_all),
    W("MPI_File_iwrite", EV_NONBLOCKING, w_ptr),
    R("MPI_File_iread", EV_NONBLOCKING, r_ptr),
    W("MPI_File_iwrite_all", EV_NONBLOCKING, w_all),
    R("MPI_File_iread_all", EV_NONBLOCKING, r_all),
    W("MPI_File_iwrite_shared", EV_NONBLOCKING, w_shared),
    R("MPI_File_iread_shared", EV_NONBLOCKING, r_shared),
    W("MPI_File_write_at_all_begin+end", EV_BLOCKING, w_at_split),
    R("MPI_File_read_at_all_begin+end", EV_BLOCKING, r_at_split),
    W("MPI_File_write_all_begin+end", EV_BLOCKING, w_all_split),
    R("MPI_File_read_all_begin+end", EV_BLOCKING, r_all_split),
    W("MPI_File_write_ordered_begin+end", EV_BLOCKING, w_ord_split),
    R("MPI_File_read_ordered_begin+end", EV_BLOCKING, r_ord_split),
#if MPI_VERSION >= 4
    W("MPI_File_write_at_c", EV_LARGE, w_at),
    R("MPI_File_read_at_c", EV_LARGE, r_at),
    W("MPI_File_write_at_all_c", EV_LARGE, w_at_all),
    R("MPI_File_read_at_all_c", EV_LARGE, r_at_all),
    W("MPI_File_write_c", EV_LARGE, w_ptr),
    R("MPI_File_read_c", EV_LARGE, r_ptr),
    W("MPI_File_write_all_c", EV_LARGE, w_all),
    R("MPI_File_read_all_c", EV_LARGE, r_all),
    W("MPI_File_write_shared_c", EV_LARGE, w_shared),
    R("MPI_File_read_shared_c", EV_LARGE, r_shared),
    W("MPI_File_write_ordered_c", EV_LARGE, w_ordered),
    R("MPI_File_read_ordered_c", EV_LARGE, r_ordered),
    W("MPI_File_iwrite_at_c", EV_LARGE_NB, w_at),
    R("MPI_File_iread_at_c", EV_LARGE_NB, r_at),
    W("MPI_File_iwrite_at_all_c", EV_LARGE_NB, w_at_all),
    R("MPI_File_iread_at_all_c", EV_LARGE_NB, r_at_all),
    W("MPI_File_iwrite_c", EV_LARGE_NB, w_ptr),
    R("MPI_File_iread_c", EV_LARGE_NB, r_ptr),
    W("MPI_File_iwrite_all_c", EV_LARGE_NB, w_all),
    R("MPI_File_iread_all_c", EV_LARGE_NB, r_all),
    W("MPI_File_iwrite_shared_c", EV_LARGE_NB, w_shared),
    R("MPI_File_iread_shared_c", EV_LARGE_NB, r_shared),
    W("MPI_File_write_at_all_begin_c+end", EV_LARGE, w_at_split),
    R("MPI_File_read_at_all_begin_c+end", EV_LARGE, r_at_split),
    W("MPI_File_write_all_begin_c+end", EV_LARGE, w_all_split),
    R("MPI_File_read_all_begin_c+end", EV_LARGE, r_all_split),
    W("MPI_File_write_ordered_begin_c+end", EV_LARGE, w_ord_split),
    R("MPI_File_read_ordered_begin_c+end", EV_LARGE, r_ord_split),
#endif
};
const int ev_io_ncases = (int)(sizeof(ev_io_cases) / sizeof(ev_io_cases[0]));
