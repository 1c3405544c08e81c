/* The staging engine (see stage.h).
 *
 * Stream ordering: every copy is the memory layer's host copy of a device buffer (mem/stage.h):
 * a copy in the buffer's own context on this thread's per-thread default stream, or on picoll's
 * own stream of that context while the per-thread stream is being captured into a CUDA graph
 * (picoll_cudrv_copy), synchronised before it returns. The per-thread stream synchronises with the
 * legacy default stream, so the inputs are read after the work the application queued there
 * (PyTorch's current stream by default), and the outputs are in place when the call (or the
 * completion call) returns. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "util/export.h"
#include "util/log.h"
#include "pmpi/stage.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct picoll_record {
    picoll_record_t *next;
    MPI_Request request;      /* PICOLL_MODE_REQUEST / PERSISTENT: the table's key */
    picoll_stage_mode_t mode;
    int active;               /* persistent: started and not yet completed */
    int copied;               /* outputs already copied back (MPI_Request_get_status) */
    picoll_call_t call;       /* its staged buffers own their host copies */
};

atomic_int picoll_stage_tracked;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#define NBUCKETS 256
static picoll_record_t *requests[NBUCKETS]; /* by request handle */
static picoll_record_t *windows;            /* one-sided records, newest first */
static picoll_record_t *splits;             /* split collective I/O, one per file at most */
static picoll_record_t *orphans;            /* freed by the application while active */

/* ---- starting a call ---- */

void picoll_call_start(picoll_call_t *c, const char *fn, int obj_kind, const void *obj, int root,
                       int target)
{
    c->fn = fn;
    c->obj_kind = obj_kind;
    if (obj_kind == PICOLL_OBJ_COMM) {
        c->obj.comm = *(const MPI_Comm *)obj;
    } else if (obj_kind == PICOLL_OBJ_WIN) {
        c->obj.win = *(const MPI_Win *)obj;
    } else if (obj_kind == PICOLL_OBJ_FILE) {
        c->obj.file = *(const MPI_File *)obj;
    }
    c->root = root;
    c->target = target;
    c->intra_only = 0;
    c->n = c->any = 0;
}

/* Where the data of ptr starts: MPI_BOTTOM with a type of absolute addresses starts at the type's
 * true lower bound. */
static const void *data_start(const picoll_bufspec_t *s)
{
    MPI_Aint tlb = 0, textent;
    MPI_Datatype t = s->shape == PICOLL_SHAPE_W ? MPI_DATATYPE_NULL : s->type;
    if (s->ptr != NULL || t == MPI_DATATYPE_NULL ||
        PMPI_Type_get_true_extent(t, &tlb, &textent) != MPI_SUCCESS) {
        return s->ptr;
    }
    return (const char *)s->ptr + tlb;
}

void picoll_call_buf(picoll_call_t *c, const picoll_bufspec_t *spec)
{
    picoll_stagebuf_t *b = &c->b[c->n];
    c->spec[c->n++] = *spec;
    b->user = spec->ptr;
    b->pass = (void *)spec->ptr;
    b->copy.host = NULL;
    b->flags = 0;
    b->staged = 0;
    if (spec->ptr == MPI_IN_PLACE) {
        return;
    }
    const void *at = data_start(spec);
    if (at == NULL) {
        return;
    }
    picoll_memkind_query(at, &b->info);
    b->staged = b->info.kind == PICOLL_MEM_DEVICE || b->info.kind == PICOLL_MEM_MANAGED;
    c->any |= b->staged;
}

/* ---- errors ---- */

static int raise_on(int obj_kind, const void *obj, int code)
{
    if (obj_kind == PICOLL_OBJ_WIN) {
        PMPI_Win_call_errhandler(*(const MPI_Win *)obj, code);
    } else if (obj_kind == PICOLL_OBJ_FILE) {
        PMPI_File_call_errhandler(*(const MPI_File *)obj, code);
    } else {
        PMPI_Comm_call_errhandler(obj_kind == PICOLL_OBJ_COMM ? *(const MPI_Comm *)obj
                                                              : MPI_COMM_WORLD, code);
    }
    return code;
}

static int raise_call(picoll_call_t *c, int code)
{
    return raise_on(c->obj_kind, &c->obj, code);
}

/* An error code whose text is msg, in picoll's own error class (MPICH garbles the text of a code
 * added to a predefined class): the MPI's error handlers print it, MPI_Error_string returns it.
 * Codes are made once per distinct text (a handful: one per refused call and argument); where the
 * MPI cannot add any, MPI_ERR_BUFFER. */
static int error_code(const char *msg)
{
    static struct {
        char msg[200];
        int code;
    } made[64];
    static int nmade, cls = -1;
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int code = MPI_ERR_BUFFER;
    pthread_mutex_lock(&m);
    for (int i = 0; i < nmade; i++) {
        if (strcmp(made[i].msg, msg) == 0) {
            pthread_mutex_unlock(&m);
            return made[i].code;
        }
    }
    if (cls < 0 && (PMPI_Add_error_class(&cls) != MPI_SUCCESS ||
                    PMPI_Add_error_string(cls, "picoll: CUDA device memory refused") != MPI_SUCCESS)) {
        cls = -1;
    }
    if (cls >= 0 && nmade < 64 && PMPI_Add_error_code(cls, &code) == MPI_SUCCESS &&
        PMPI_Add_error_string(code, msg) == MPI_SUCCESS) {
        snprintf(made[nmade].msg, sizeof(made[nmade].msg), "%s", msg);
        made[nmade++].code = code;
    } else {
        code = MPI_ERR_BUFFER;
    }
    pthread_mutex_unlock(&m);
    return code;
}

static int refuse(picoll_call_t *c, const char *arg, const char *why)
{
    char msg[200];
    snprintf(msg, sizeof(msg), "picoll: %s: %s is CUDA device memory, %s", c->fn, arg, why);
    picoll_warn("%s", msg);
    return raise_call(c, error_code(msg));
}

int picoll_call_refuse(picoll_call_t *c, const void *ptr, const char *arg, int *rc)
{
    picoll_meminfo_t info;
    if (ptr == NULL || ptr == MPI_IN_PLACE) {
        return 0;
    }
    picoll_memkind_query(ptr, &info);
    if (info.kind != PICOLL_MEM_DEVICE && info.kind != PICOLL_MEM_MANAGED) {
        return 0;
    }
    *rc = refuse(c, arg, "which this MPI cannot use here (it is not CUDA-aware, and picoll stages "
                         "only message buffers)");
    return 1;
}

/* ---- the shape of a call on this rank ---- */

typedef struct {
    int ok, inter, rank, size, gsize, is_root, indeg, outdeg;
} where_t;

static int comm_where(picoll_call_t *c, where_t *w)
{
    MPI_Comm comm = c->obj.comm;
    w->ok = 0;
    w->indeg = w->outdeg = -1;
    if (c->obj_kind != PICOLL_OBJ_COMM) {
        w->inter = 0;
        w->rank = w->size = w->gsize = 1;
        w->is_root = 0;
        w->ok = 1;
        return 0;
    }
    if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &w->inter) != MPI_SUCCESS ||
        PMPI_Comm_rank(comm, &w->rank) != MPI_SUCCESS ||
        PMPI_Comm_size(comm, &w->size) != MPI_SUCCESS) {
        return -1;
    }
    w->gsize = w->size;
    if (w->inter && PMPI_Comm_remote_size(comm, &w->gsize) != MPI_SUCCESS) {
        return -1;
    }
    if (c->root == PICOLL_NO_ROOT) {
        w->is_root = 0;
    } else if (w->inter) {
        if (c->root != MPI_ROOT && c->root != MPI_PROC_NULL && (c->root < 0 || c->root >= w->gsize)) {
            return -1;
        }
        w->is_root = c->root == MPI_ROOT;
    } else {
        if (c->root < 0 || c->root >= w->size) {
            return -1;
        }
        w->is_root = w->rank == c->root;
    }
    w->ok = 1;
    return 0;
}

static int neighbours(MPI_Comm comm, where_t *w)
{
    int topo, nd, wt;
    if (w->indeg >= 0) {
        return 0;
    }
    if (PMPI_Topo_test(comm, &topo) != MPI_SUCCESS) {
        return -1;
    }
    if (topo == MPI_CART) {
        if (PMPI_Cartdim_get(comm, &nd) != MPI_SUCCESS) {
            return -1;
        }
        w->indeg = w->outdeg = 2 * nd;
    } else if (topo == MPI_GRAPH) {
        if (PMPI_Graph_neighbors_count(comm, w->rank, &nd) != MPI_SUCCESS) {
            return -1;
        }
        w->indeg = w->outdeg = nd;
    } else if (topo == MPI_DIST_GRAPH) {
        if (PMPI_Dist_graph_neighbors_count(comm, &w->indeg, &w->outdeg, &wt) != MPI_SUCCESS) {
            return -1;
        }
    } else {
        return -1;
    }
    return 0;
}

static int role_here(const picoll_bufspec_t *s, const where_t *w, int root)
{
    for (int i = 0; i < 2; i++) {
        int at = s->roles[i].at, ok;
        if (s->roles[i].role == PICOLL_ROLE_NONE) {
            break;
        }
        if (at == PICOLL_AT_ALL) {
            ok = 1;
        } else if (at == PICOLL_AT_ROOT) {
            ok = w->is_root;
        } else if (w->inter) {
            ok = root != MPI_ROOT && root != MPI_PROC_NULL; /* the non-root group */
        } else {
            ok = at == PICOLL_AT_LEAF || !w->is_root;
        }
        if (ok) {
            return s->roles[i].role;
        }
    }
    return PICOLL_ROLE_NONE;
}

static MPI_Count entry(const void *arr, int wide, int i)
{
    if (wide) {
        /* MPI_Count and MPI_Aint arrays: both 8 bytes on every platform picoll builds on */
        return ((const MPI_Count *)arr)[i];
    }
    return ((const int *)arr)[i];
}

static int mult_of(picoll_call_t *c, int mult, where_t *w, MPI_Count *out)
{
    if (mult == PICOLL_MULT_ONE) {
        *out = 1;
    } else if (mult == PICOLL_MULT_G) {
        *out = w->gsize;
    } else {
        if (c->obj_kind != PICOLL_OBJ_COMM || neighbours(c->obj.comm, w) != 0) {
            return -1;
        }
        *out = mult == PICOLL_MULT_IN ? w->indeg : w->outdeg;
    }
    return 0;
}

/* Extends [lo, hi) by count elements of type at byte offset first. */
static int span_add(MPI_Datatype type, MPI_Aint first, MPI_Count count, MPI_Aint *lo, MPI_Aint *hi,
                    int *empty, int *dense)
{
    MPI_Aint lb, extent, tlb, textent;
    int size;
    if (type == MPI_DATATYPE_NULL || count < 0 ||
        PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(type, &tlb, &textent) != MPI_SUCCESS ||
        PMPI_Type_size(type, &size) != MPI_SUCCESS) {
        return -1;
    }
    *dense = *dense && tlb == 0 && textent == extent && extent == (MPI_Aint)size;
    if (count == 0 || size == 0) {
        return 0;
    }
    MPI_Aint a = first + tlb, z = first + tlb + (MPI_Aint)(count - 1) * extent;
    if (a > z) {
        MPI_Aint t = a;
        a = z;
        z = t;
    }
    z += textent;
    *lo = *empty || a < *lo ? a : *lo;
    *hi = *empty || z > *hi ? z : *hi;
    *empty = 0;
    return 0;
}

/* The bytes of buffer i on this rank; -1 for arguments the MPI must judge. */
static int span_of(picoll_call_t *c, int i, int in_place, where_t *w)
{
    const picoll_bufspec_t *s = &c->spec[i];
    picoll_stagebuf_t *b = &c->b[i];
    MPI_Aint lo = 0, hi = 0, extent = 0, lb;
    MPI_Count n = 0, m = 1;
    int empty = 1, dense = 1, blocks;

    if (s->shape == PICOLL_SHAPE_N && !(in_place && s->ip_sum)) {
        if (in_place && s->ip_mult) {
            n = s->ip_count;
            if (mult_of(c, s->ip_mult, w, &m) != 0) {
                return -1;
            }
        } else {
            n = s->count;
            if (mult_of(c, s->mult, w, &m) != 0) {
                return -1;
            }
        }
        if (span_add(s->type, 0, n * m, &lo, &hi, &empty, &dense) != 0) {
            return -1;
        }
        /* a neighbourhood's MPI_PROC_NULL neighbours leave their blocks alone */
        dense &= s->mult != PICOLL_MULT_IN && s->mult != PICOLL_MULT_OUT;
    } else if (s->shape == PICOLL_SHAPE_SUM || s->shape == PICOLL_SHAPE_AT ||
               (in_place && s->ip_sum)) {
        if (s->counts == NULL) {
            return -1;
        }
        if (s->shape == PICOLL_SHAPE_AT && !in_place) {
            n = entry(s->counts, s->counts_wide, w->rank);
        } else {
            for (int r = 0; r < w->size; r++) {
                n += entry(s->counts, s->counts_wide, r);
            }
        }
        if (span_add(s->type, 0, n, &lo, &hi, &empty, &dense) != 0) {
            return -1;
        }
    } else {
        if (s->counts == NULL || s->displs == NULL || mult_of(c, s->mult, w, &m) != 0 ||
            (s->shape == PICOLL_SHAPE_W && s->types == NULL) ||
            (s->shape == PICOLL_SHAPE_V &&
             PMPI_Type_get_extent(s->type, &lb, &extent) != MPI_SUCCESS)) {
            return -1;
        }
        blocks = (int)m;
        dense = 0; /* blocks may leave gaps: copy the whole span in, so that they keep their bytes */
        for (int k = 0; k < blocks; k++) {
            MPI_Datatype t = s->shape == PICOLL_SHAPE_W ? s->types[k] : s->type;
            MPI_Aint d = (MPI_Aint)entry(s->displs, s->displs_wide, k);
            if (span_add(t, s->shape == PICOLL_SHAPE_W ? d : d * extent,
                         entry(s->counts, s->counts_wide, k), &lo, &hi, &empty, &dense) != 0) {
                return -1;
            }
        }
    }
    b->lo = lo;
    b->bytes = empty ? 0 : (size_t)(hi - lo);
    b->dense = dense && lo == 0;
    return 0;
}

static void release(picoll_call_t *c)
{
    for (int i = 0; i < c->n; i++) {
        picoll_hostcopy_put(&c->b[i].copy);
    }
}

static int copy_in(picoll_call_t *c)
{
    int failed = 0;
    for (int i = 0; i < c->n; i++) {
        picoll_stagebuf_t *b = &c->b[i];
        if (b->copy.host != NULL && (b->flags & PICOLL_ROLE_IN) &&
            picoll_hostcopy_in(&b->copy) != PICOLL_OK) {
            failed = 1;
        }
    }
    return failed;
}

int picoll_call_begin(picoll_call_t *c, picoll_stage_mode_t mode, int *rc)
{
    where_t w;
    int in_place = 0;

    c->mode = mode;
    if (!c->any) {
        return 0;
    }
    if (comm_where(c, &w) != 0) {
        c->any = 0;
        return 0; /* the MPI judges the communicator or the root */
    }
    if (c->intra_only && w.inter) {
        *rc = refuse(c, "a buffer", "which picoll cannot stage on an intercommunicator");
        return -1;
    }
    for (int i = 0; i < c->n; i++) {
        in_place |= c->b[i].user == MPI_IN_PLACE;
    }
    for (int i = 0; i < c->n; i++) {
        picoll_stagebuf_t *b = &c->b[i];
        if (!b->staged) {
            continue;
        }
        b->flags = role_here(&c->spec[i], &w, c->root);
        if (b->flags == PICOLL_ROLE_NONE) {
            b->staged = 0; /* not significant on this rank: the MPI does not look at it */
            continue;
        }
        if (in_place && (b->flags & PICOLL_ROLE_OUT)) {
            b->flags |= PICOLL_ROLE_IN;
        }
        if (span_of(c, i, in_place, &w) != 0) {
            c->any = 0;
            return 0; /* nothing copied: the call goes to the MPI untouched */
        }
        if ((b->flags & PICOLL_ROLE_OUT) && !b->dense) {
            b->flags |= PICOLL_ROLE_IN; /* the bytes the MPI leaves alone must come back as they were */
        }
    }
    for (int i = 0; i < c->n; i++) {
        picoll_stagebuf_t *b = &c->b[i];
        if (!b->staged || b->bytes == 0) {
            continue;
        }
        if (picoll_hostcopy_get(&b->copy, (const char *)b->user + b->lo, b->bytes, b->info.context,
                                0) != PICOLL_OK) {
            release(c);
            *rc = raise_call(c, MPI_ERR_NO_MEM);
            return -1;
        }
        b->pass = (void *)((uintptr_t)b->copy.host - (uintptr_t)b->lo);
    }
    /* A persistent call copies its inputs again at each MPI_Start, and here too: MPICH 4.0's
     * MPI_Gather_init reads the send buffer when it is made, not when it starts, and the host copy
     * must then hold what the application's buffer held. A failed copy still joins the call, so
     * that the other ranks are not left waiting, and the error comes at its end. */
    if (copy_in(c)) {
        c->any = 2;
    }
    return 0;
}

/* Copies the outputs back; the bytes of a PARTIAL output only as far as status says. */
static int copy_out(picoll_call_t *c, const MPI_Status *status)
{
    int failed = 0, cancelled = 0, receive = 0;
    for (int i = 0; i < c->n; i++) {
        receive |= c->b[i].copy.host != NULL && (c->b[i].flags & PICOLL_ROLE_PARTIAL);
    }
    /* only a receive can be cancelled with its buffer unwritten; Open MPI leaves the cancelled
     * field of I/O statuses uninitialised, so it is not read for anything else */
    if (receive && status != NULL && status != MPI_STATUS_IGNORE) {
        PMPI_Test_cancelled(status, &cancelled);
    }
    for (int i = 0; i < c->n && !cancelled; i++) {
        picoll_stagebuf_t *b = &c->b[i];
        size_t bytes = b->bytes;
        if (b->copy.host == NULL || !(b->flags & PICOLL_ROLE_OUT)) {
            continue;
        }
        if ((b->flags & PICOLL_ROLE_PARTIAL) && !(b->flags & PICOLL_ROLE_IN) && status != NULL &&
            status != MPI_STATUS_IGNORE) {
            MPI_Count got = 0;
            if (PMPI_Get_elements_x(status, MPI_BYTE, &got) == MPI_SUCCESS && got >= 0 &&
                (size_t)got < bytes) {
                bytes = (size_t)got;
            }
        }
        if (bytes > 0 && picoll_hostcopy_back(&b->copy, bytes) != PICOLL_OK) {
            failed = 1;
        }
    }
    return failed;
}

static picoll_record_t *record_of(picoll_call_t *c, picoll_stage_mode_t mode)
{
    picoll_record_t *r = calloc(1, sizeof(*r));
    if (r != NULL) {
        r->mode = mode;
        r->call = *c;
        atomic_fetch_add(&picoll_stage_tracked, 1);
    }
    return r;
}

static void record_free(picoll_record_t *r)
{
    release(&r->call);
    atomic_fetch_sub(&picoll_stage_tracked, 1);
    free(r);
}

static unsigned bucket(MPI_Request req)
{
    uint64_t k = 0;
    memcpy(&k, &req, sizeof(req) < sizeof(k) ? sizeof(req) : sizeof(k));
    k ^= k >> 17;
    k *= 0x9e3779b97f4a7c15ull;
    return (unsigned)(k >> 56) % NBUCKETS;
}

int picoll_call_end(picoll_call_t *c, int rc, const MPI_Status *status, MPI_Request *request)
{
    picoll_record_t *r;
    if (!c->any) {
        return rc;
    }
    if (c->mode == PICOLL_MODE_RMA && rc == MPI_SUCCESS) {
        /* one-sided: MPI reads and writes the copies until the window synchronises */
        if ((r = record_of(c, PICOLL_MODE_RMA)) == NULL) {
            release(c);
            return raise_call(c, MPI_ERR_NO_MEM);
        }
        pthread_mutex_lock(&lock);
        r->next = windows;
        windows = r;
        pthread_mutex_unlock(&lock);
        return c->any == 2 ? raise_call(c, MPI_ERR_OTHER) : rc;
    }
    if (request != NULL && rc == MPI_SUCCESS && *request != MPI_REQUEST_NULL) {
        int persistent = c->mode == PICOLL_MODE_PERSISTENT;
        if ((r = record_of(c, persistent ? PICOLL_MODE_PERSISTENT : PICOLL_MODE_REQUEST)) == NULL) {
            release(c);
            return raise_call(c, MPI_ERR_NO_MEM);
        }
        r->request = *request;
        pthread_mutex_lock(&lock);
        unsigned k = bucket(r->request);
        r->next = requests[k];
        requests[k] = r;
        pthread_mutex_unlock(&lock);
        return c->any == 2 ? raise_call(c, MPI_ERR_OTHER) : rc;
    }
    int failed = c->any == 2;
    if (rc == MPI_SUCCESS && request == NULL) {
        failed |= copy_out(c, status);
    }
    release(c);
    return rc == MPI_SUCCESS && failed ? raise_call(c, MPI_ERR_OTHER) : rc;
}

/* ---- requests ---- */

picoll_record_t *picoll_request_find(MPI_Request request)
{
    picoll_record_t **p, *r = NULL;
    if (request == MPI_REQUEST_NULL) {
        return NULL;
    }
    pthread_mutex_lock(&lock);
    for (p = &requests[bucket(request)]; *p != NULL; p = &(*p)->next) {
        if ((*p)->request == request) {
            r = *p;
            if (r->mode != PICOLL_MODE_PERSISTENT) {
                *p = r->next; /* the completing thread owns it now */
            }
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

int picoll_request_done(picoll_record_t *r, int rc, const MPI_Status *status, int keep_copied)
{
    int failed = 0;
    if (r == NULL) {
        return rc;
    }
    if (rc == MPI_SUCCESS && !r->copied) {
        failed = copy_out(&r->call, status);
    }
    if (keep_copied) {
        r->copied = 1; /* MPI_Request_get_status: the request lives on; done once */
        if (r->mode != PICOLL_MODE_PERSISTENT) {
            /* it was taken out of the table by the find: put it back for the completion call */
            pthread_mutex_lock(&lock);
            unsigned k = bucket(r->request);
            r->next = requests[k];
            requests[k] = r;
            pthread_mutex_unlock(&lock);
        }
    } else if (r->mode == PICOLL_MODE_PERSISTENT) {
        r->active = 0;
        r->copied = 0;
    } else {
        record_free(r);
    }
    return rc == MPI_SUCCESS && failed ? raise_call(&r->call, MPI_ERR_OTHER) : rc;
}

int picoll_request_start(MPI_Request request)
{
    picoll_record_t *r = picoll_request_find(request);
    if (r == NULL || r->mode != PICOLL_MODE_PERSISTENT) {
        return MPI_SUCCESS;
    }
    r->active = 1;
    r->copied = 0;
    return copy_in(&r->call) ? raise_call(&r->call, MPI_ERR_OTHER) : MPI_SUCCESS;
}

int picoll_request_free(MPI_Request *request, int *rc)
{
    picoll_record_t *r = picoll_request_find(*request);
    if (r == NULL) {
        return 0;
    }
    if (r->mode == PICOLL_MODE_PERSISTENT) {
        /* take it out of the table: the handle dies here */
        picoll_record_t **p;
        pthread_mutex_lock(&lock);
        for (p = &requests[bucket(r->request)]; *p != r; p = &(*p)->next) {
        }
        *p = r->next;
        pthread_mutex_unlock(&lock);
        if (!r->active) {
            record_free(r);
            return 0; /* the MPI frees the inactive request */
        }
    }
    /* still active: the MPI may still read or write the copies; picoll keeps the request and
     * completes it later (picoll_orphans_poll) */
    pthread_mutex_lock(&lock);
    r->next = orphans;
    orphans = r;
    pthread_mutex_unlock(&lock);
    *request = MPI_REQUEST_NULL;
    *rc = MPI_SUCCESS;
    return 1;
}

void picoll_orphans_poll(int wait)
{
    picoll_record_t *list, *keep = NULL, *r, *next;
    pthread_mutex_lock(&lock);
    list = orphans;
    orphans = NULL;
    pthread_mutex_unlock(&lock);
    for (r = list; r != NULL; r = next) {
        MPI_Status st;
        int flag = 0;
        next = r->next;
        if (wait) {
            flag = PMPI_Wait(&r->request, &st) == MPI_SUCCESS;
        } else if (PMPI_Test(&r->request, &flag, &st) != MPI_SUCCESS) {
            flag = 1;
        }
        if (!flag) {
            r->next = keep;
            keep = r;
            continue;
        }
        copy_out(&r->call, &st);
        if (r->request != MPI_REQUEST_NULL) {
            PMPI_Request_free(&r->request); /* a persistent one */
        }
        record_free(r);
    }
    if (keep != NULL) {
        pthread_mutex_lock(&lock);
        for (r = keep; r->next != NULL; r = r->next) {
        }
        r->next = orphans;
        orphans = keep;
        pthread_mutex_unlock(&lock);
    }
}

/* ---- one-sided ---- */

int picoll_rma_done(MPI_Win win, int target, int rc)
{
    picoll_record_t **p, *done = NULL, *r;
    int failed = 0;
    pthread_mutex_lock(&lock);
    for (p = &windows; *p != NULL;) {
        r = *p;
        if (r->call.obj.win == win && (target < 0 || r->call.target == target)) {
            *p = r->next;
            r->next = done;
            done = r;
        } else {
            p = &r->next;
        }
    }
    pthread_mutex_unlock(&lock);
    for (; done != NULL; done = r) {
        r = done->next;
        if (rc == MPI_SUCCESS) {
            failed |= copy_out(&done->call, NULL);
        }
        record_free(done);
    }
    return rc == MPI_SUCCESS && failed ? raise_on(PICOLL_OBJ_WIN, &win, MPI_ERR_OTHER) : rc;
}

/* ---- split collective I/O ---- */

int picoll_call_end_split(picoll_call_t *c, int rc, MPI_File file)
{
    picoll_record_t *r;
    if (!c->any || rc != MPI_SUCCESS) {
        release(c);
        return rc;
    }
    if ((r = record_of(c, PICOLL_MODE_SPLIT)) == NULL) {
        release(c);
        return raise_call(c, MPI_ERR_NO_MEM);
    }
    (void)file;
    pthread_mutex_lock(&lock);
    r->next = splits;
    splits = r;
    pthread_mutex_unlock(&lock);
    return c->any == 2 ? raise_call(c, MPI_ERR_OTHER) : rc;
}

picoll_record_t *picoll_split_take(MPI_File file)
{
    picoll_record_t **p, *r = NULL;
    if (atomic_load(&picoll_stage_tracked) == 0) {
        return NULL;
    }
    pthread_mutex_lock(&lock);
    for (p = &splits; *p != NULL; p = &(*p)->next) {
        if ((*p)->call.obj.file == file) {
            r = *p;
            *p = r->next;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

void *picoll_record_pass(picoll_record_t *r, int i)
{
    return r->call.b[i].pass;
}

int picoll_split_end(picoll_record_t *r, int rc, const MPI_Status *status)
{
    return picoll_request_done(r, rc, status, 0);
}

/* ---- MPIX_Query_cuda_support ---- */

/* Open MPI declares it in mpi-ext.h, MPICH in mpi.h: declared here for both. */
int MPIX_Query_cuda_support(void);

PICOLL_EXPORT int MPIX_Query_cuda_support(void)
{
    const char *how;
    if (picoll_cuda.active) {
        return 1;
    }
    if (picoll_g.initialized) {
        return picoll_cuda.mpi_aware;
    }
    return picoll_mpi_cuda_aware(&how); /* before MPI_Init, or with picoll off */
}
