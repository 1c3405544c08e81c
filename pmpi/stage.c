/* The staging engine (see stage.h): a call's buffers described, the span of each on this rank
 * computed (its role here, counts, displacements, datatypes), the host copies made and the inputs
 * copied in (picoll_call_begin), and at the call's end the outputs copied back or the call handed
 * to the registry of records (pmpi/records.c) that its completion consults. The copies themselves
 * are pmpi/copies.c's (stream ordering there), the errors raised pmpi/errors.c's. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "pmpi/errors.h"
#include "pmpi/records.h"
#include "pmpi/stage.h"

#include <stdint.h>

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
    *rc = picoll_raise_refused(c, arg,
                               "which this MPI cannot use here (it is not CUDA-aware, and "
                               "picoll stages only message buffers)");
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
        if (c->root != MPI_ROOT && c->root != MPI_PROC_NULL &&
            (c->root < 0 || c->root >= w->gsize)) {
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
        dense =
            0; /* blocks may leave gaps: copy the whole span in, so that they keep their bytes */
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
        *rc = picoll_raise_refused(c, "a buffer",
                                   "which picoll cannot stage on an intercommunicator");
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
            b->flags |=
                PICOLL_ROLE_IN; /* the bytes the MPI leaves alone must come back as they were */
        }
    }
    for (int i = 0; i < c->n; i++) {
        picoll_stagebuf_t *b = &c->b[i];
        if (!b->staged || b->bytes == 0) {
            continue;
        }
        if (picoll_hostcopy_get(&b->copy, (const char *)b->user + b->lo, b->bytes, b->info.context,
                                0) != PICOLL_OK) {
            picoll_call_release(c);
            *rc = picoll_raise_call(c, MPI_ERR_NO_MEM);
            return -1;
        }
        b->pass = (void *)((uintptr_t)b->copy.host - (uintptr_t)b->lo);
    }
    /* A persistent call copies its inputs again at each MPI_Start, and here too: MPICH 4.0's
     * MPI_Gather_init reads the send buffer when it is made, not when it starts, and the host copy
     * must then hold what the application's buffer held. A failed copy still joins the call, so
     * that the other ranks are not left waiting, and the error comes at its end. */
    if (picoll_call_copy_in(c)) {
        c->any = 2;
    }
    return 0;
}

/* Hands the call, its host copies with it, to a record of mode (request: the key of a request's
 * record); returns the call's return code. */
static int keep(picoll_call_t *c, picoll_stage_mode_t mode, MPI_Request request, int rc)
{
    if (picoll_record_keep(c, mode, request) != 0) {
        picoll_call_release(c);
        return picoll_raise_call(c, MPI_ERR_NO_MEM);
    }
    return c->any == 2 ? picoll_raise_call(c, MPI_ERR_OTHER) : rc;
}

int picoll_call_end(picoll_call_t *c, int rc, const MPI_Status *status, MPI_Request *request)
{
    if (!c->any) {
        return rc;
    }
    if (c->mode == PICOLL_MODE_RMA && rc == MPI_SUCCESS) {
        /* one-sided: MPI reads and writes the copies until the window synchronises */
        return keep(c, PICOLL_MODE_RMA, MPI_REQUEST_NULL, rc);
    }
    if (request != NULL && rc == MPI_SUCCESS && *request != MPI_REQUEST_NULL) {
        int persistent = c->mode == PICOLL_MODE_PERSISTENT;
        return keep(c, persistent ? PICOLL_MODE_PERSISTENT : PICOLL_MODE_REQUEST, *request, rc);
    }
    int failed = c->any == 2;
    if (rc == MPI_SUCCESS && request == NULL) {
        failed |= picoll_call_copy_out(c, status);
    }
    picoll_call_release(c);
    return rc == MPI_SUCCESS && failed ? picoll_raise_call(c, MPI_ERR_OTHER) : rc;
}

/* ---- split collective I/O ---- */

int picoll_call_end_split(picoll_call_t *c, int rc, MPI_File file)
{
    if (!c->any || rc != MPI_SUCCESS) {
        picoll_call_release(c);
        return rc;
    }
    (void)file;
    return keep(c, PICOLL_MODE_SPLIT, MPI_REQUEST_NULL, rc);
}
