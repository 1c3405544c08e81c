/* Every MPI function that takes a user buffer (the cases of every_p2p.c, every_coll.c,
 * every_neigh.c, every_pack.c, every_rma.c and every_io.c), run on device buffers and then on
 * host buffers with the same contents: results, statuses and recorded values bit-identical,
 * send buffers unchanged. Each case runs over its variants: MPI_INT and a vector type with
 * gaps, 5, 0 and 20000 elements, in place where MPI allows it, roots last and first, every
 * completion call for the non-blocking ones, a cart and a dist graph for the neighbourhood
 * ones, fence and lock epochs for the one-sided ones. Then the refusals: MPI_Win_create over device memory and
 * MPI_Buffer_attach of device memory (and, where the MPI has them, MPI_Comm_attach_buffer and
 * MPI_Abi_get_fortran_booleans) must return an MPI error whose string names the call and the
 * argument.
 *
 * A plain MPI program that reaches the CUDA driver through dlopen (tests/cuda/drv.h): without a
 * device it prints "SKIP: ..." and exits 77. On tests/cuda/fake's driver, whose device memory the
 * CPU cannot touch, only buffers that picoll stages correctly pass.
 *   --host-only      the buffers under test are host memory too: proves the comparison itself
 *                    (runs without any driver), or, with picoll and a driver, that host buffers
 *                    pass through unchanged
 *   --case A,B       only the cases of these names (as failures print them)
 *   --list           prints the case names
 *   --quick          the small variants only, completed by MPI_Wait only
 *   --times          prints each case's time (rank 0) */
#include "drv.h"
#include "every.h"
#include "mpitest.h"

#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

MPI_Comm ev_cart = MPI_COMM_NULL, ev_graph = MPI_COMM_NULL;
static MPI_Comm world; /* MPI_COMM_WORLD's duplicate, errors returned */
static MPI_Datatype gap_type;
static int quick;

enum { LARGE_N = 20000 };

typedef struct {
    MPI_Datatype type;
    const char *tname;
    int n, inplace, mode, topo, epoch, root;
} variant_t;

/* ---- naming the current call, also from a crash ---- */

static char current[512];

static void describe(const ev_case_t *c, const variant_t *v, int test_kind)
{
    const char *epoch = v->epoch == EV_EPOCH_LOCK ? ", lock epoch" : ", fence epoch";
    snprintf(current, sizeof(current), "%s [%s n=%d%s%s%s%s%s%s] on %s buffers", c->name, v->tname,
             v->n, v->inplace ? " in place" : "",
             c->flags & EV_F_ROOTED ? (v->root ? " root last" : " root 0") : "",
             ev_nonblocking(c->form) ? ", " : "",
             ev_nonblocking(c->form) ? ev_mode_name[v->mode] : "",
             c->flags & EV_F_NEIGH ? (v->topo ? ", dist graph" : ", cart") : "",
             c->flags & EV_F_EPOCH ? epoch : "", tb_kind_name[test_kind]);
}

static void on_crash(int sig)
{
    char line[700];
    int n = snprintf(line, sizeof(line), "FAIL [rank %d] %s: crashed (signal %d)\n", mt_rank,
                     current, sig);
    if (write(STDOUT_FILENO, line, (size_t)n) < 0) {
        /* nothing more to do in a signal handler */
    }
    /* where: the stack, for a crash seen on one machine only (symbols of the exported functions;
     * addresses within the libraries otherwise) */
    void *frames[32];
    backtrace_symbols_fd(frames, backtrace(frames, 32), STDOUT_FILENO);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ---- variants ---- */

static int add(variant_t *out, int n, variant_t v)
{
    out[n] = v;
    return n + 1;
}

/* The variants of case c: the first one (MPI_INT, 5 elements, root last) with every completion
 * call, topology and epoch; the others with the first completion call. */
static int variants(const ev_case_t *c, variant_t *out)
{
    int modes = ev_nonblocking(c->form) && !quick ? ev_nmodes : 1;
    int topos = c->flags & EV_F_NEIGH ? 2 : 1;
    int epochs = c->flags & EV_F_EPOCH ? 2 : 1;
    int last = mt_size - 1, k = 0;
    for (int m = 0; m < modes; m++) {
        if ((c->flags & EV_F_NO_GET_STATUS) && EV_MODE_GET_STATUS(m)) {
            continue;
        }
        for (int t = 0; t < topos; t++) {
            for (int ep = 0; ep < epochs; ep++) {
                k = add(out, k, (variant_t){MPI_INT, "int", 5, 0, m, t, ep, last});
                if (!quick && !(c->flags & (EV_F_FIXED | EV_F_SMALL)) &&
                    (m == 0 || m == ev_nmodes - 1)) {
                    k = add(out, k, (variant_t){MPI_INT, "int", LARGE_N, 0, m, t, ep, 0});
                }
            }
        }
    }
    if (c->flags & EV_F_INPLACE) {
        k = add(out, k, (variant_t){MPI_INT, "int", 5, 1, 0, 0, 0, last});
        k = add(out, k, (variant_t){MPI_INT, "int", 5, 1, 0, 0, 0, 0});
    }
    if (!(c->flags & EV_F_INTONLY)) {
        k = add(out, k, (variant_t){gap_type, "vector with gaps", 5, 0, 0, 0, 0, 0});
        if (c->flags & EV_F_INPLACE) {
            k = add(out, k, (variant_t){gap_type, "vector with gaps", 5, 1, 0, 0, 0, last});
        }
    }
    if (!(c->flags & EV_F_FIXED)) {
        k = add(out, k, (variant_t){MPI_INT, "int", 0, 0, 0, 0, 0, 0});
    }
    return k;
}

/* ---- one run of a case ---- */

typedef struct {
    unsigned char *final[EV_NBUF];
    size_t bytes[EV_NBUF];
    unsigned char *log;
    size_t log_len;
    int rc;
    const char *rc_call;
} result_t;

static void setup(env_t *e, const ev_case_t *c, const variant_t *v, unsigned long seed)
{
    memset(e, 0, sizeof(*e));
    e->c = c;
    e->type = v->type;
    e->tname = v->tname;
    e->n = v->n;
    e->root = v->root;
    e->inplace = v->inplace;
    e->mode = v->mode;
    e->topo = v->topo;
    e->epoch = v->epoch;
    e->seed = seed;
    e->comm = c->flags & EV_F_NEIGH ? (v->topo ? ev_graph : ev_cart) : world;
    MPI_Comm_rank(e->comm, &e->rank);
    MPI_Comm_size(e->comm, &e->size);
    e->left = (e->rank + e->size - 1) % e->size;
    e->right = (e->rank + 1) % e->size;
    MPI_Aint lb;
    MPI_Type_get_extent(e->type, &lb, &e->extent);
    MPI_Type_get_true_extent(e->type, &e->tlb, &e->textent);
    if (c->flags & EV_F_NEIGH) {
        int weighted;
        MPI_Dist_graph_neighbors_count(e->comm, &e->indeg, &e->outdeg, &weighted);
        if (v->topo == 0) {
            e->indeg = e->outdeg = 2; /* a periodic 1-d cart: left and right */
        }
    }
    for (int i = 0; i < EV_MAXP; i++) {
        e->types[i] = e->type;
    }
    c->plan(e);
    ev_widen(e);
}

static void run_once(const ev_case_t *c, const variant_t *v, unsigned long seed, int test_kind,
                     unsigned char *const *init, result_t *res)
{
    env_t e;
    setup(&e, c, v, seed);
    e.test_kind = test_kind;
    for (int i = 0; i < EV_NBUF; i++) {
        int kind = e.role[i] & EV_HELPER ? TB_HOST : test_kind;
        tb_alloc(&e.tb[i], kind, e.bytes[i]);
        tb_put(&e.tb[i], init[i]);
        e.buf[i] = e.tb[i].ptr;
    }
    describe(c, v, test_kind);
    c->run(&e);
    for (int i = 0; i < EV_NBUF; i++) {
        res->bytes[i] = e.bytes[i];
        res->final[i] = malloc(e.bytes[i] + 1);
        tb_get(&e.tb[i], res->final[i]);
        tb_free(&e.tb[i]);
    }
    res->log = e.log;
    res->log_len = e.log_len;
    res->rc = e.rc;
    res->rc_call = e.rc_call;
}

static void free_result(result_t *r)
{
    for (int i = 0; i < EV_NBUF; i++) {
        free(r->final[i]);
    }
    free(r->log);
}

static size_t first_difference(const unsigned char *a, const unsigned char *b, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] == b[i]) {
        i++;
    }
    return i;
}

static const char *error_text(int rc)
{
    static char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (rc == MPI_SUCCESS) {
        return "MPI_SUCCESS";
    }
    MPI_Error_string(rc, s, &len);
    return s;
}

/* Compares the run on the buffers under test with the host run; returns the failures. */
static int compare(const ev_case_t *c, const env_t *plan, const result_t *ref, const result_t *got)
{
    int failures = 0;
    int got_class = got->rc, ref_class = ref->rc;
    MPI_Error_class(got->rc, &got_class);
    MPI_Error_class(ref->rc, &ref_class);
    if (got_class != ref_class) {
        mt_fail("%s: %s returned %s; on host buffers %s", current,
                got->rc_call ? got->rc_call : ref->rc_call, error_text(got->rc),
                ref->rc == MPI_SUCCESS ? "MPI_SUCCESS" : "an error");
        return 1;
    }
    if (got->log_len != ref->log_len ||
        (got->log_len != 0 && memcmp(got->log, ref->log, got->log_len) != 0)) {
        mt_fail("%s: statuses or recorded values differ from the host run's (byte %zu of %zu)",
                current,
                first_difference(got->log, ref->log,
                                 got->log_len < ref->log_len ? got->log_len : ref->log_len),
                ref->log_len);
        failures++;
    }
    for (int i = 0; i < EV_NBUF; i++) {
        size_t at;
        if ((c->flags & EV_F_EXSCAN) && i == 1 && plan->rank == 0) {
            continue; /* undefined there */
        }
        at = first_difference(got->final[i], ref->final[i], ref->bytes[i]);
        if (at == ref->bytes[i]) {
            continue;
        }
        failures++;
        if (plan->role[i] == EV_IN || plan->role[i] == (EV_IN | EV_HELPER)) {
            mt_fail("%s: send buffer %d changed (byte %zu of %zu)", current, i, at, ref->bytes[i]);
        } else {
            mt_fail("%s: buffer %d differs from the host run's at byte %zu of %zu", current, i, at,
                    ref->bytes[i]);
        }
    }
    return failures;
}

/* Runs variant v of case c on host buffers, then on buffers of test_kind; returns the failures
 * on this rank. */
static int check_variant(const ev_case_t *c, const variant_t *v, unsigned long seed, int test_kind)
{
    unsigned char *init[EV_NBUF];
    result_t ref, got;
    env_t plan;
    int failures;

    setup(&plan, c, v, seed);
    for (int i = 0; i < EV_NBUF; i++) {
        init[i] = malloc(plan.bytes[i] + 1);
        ev_fill(init[i], plan.bytes[i], seed * 131 + (unsigned long)i);
    }
    run_once(c, v, seed, TB_HOST, init, &ref);
    if (ref.rc != MPI_SUCCESS && mt_rank == 0) {
        printf("note: %s: the MPI itself refuses it: %s: %s\n", current, ref.rc_call,
               error_text(ref.rc));
    }
    run_once(c, v, seed, test_kind, init, &got);
    describe(c, v, test_kind);
    failures = compare(c, &plan, &ref, &got);
    free_result(&ref);
    free_result(&got);
    for (int i = 0; i < EV_NBUF; i++) {
        free(init[i]);
    }
    return failures;
}

/* ---- the refusals ---- */

/* The call must fail with an error string that names it and its argument. */
static void check_refusal(int rc, const char *call, const char *arg)
{
    char s[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (rc == MPI_SUCCESS) {
        mt_fail("%s on device memory: accepted, expected an MPI error naming %s and %s", call, call,
                arg);
        return;
    }
    MPI_Error_string(rc, s, &len);
    const char *at = strstr(s, call); /* the argument after the call ("buffer" is in its name) */
    MT_CHECK(at != NULL && strstr(at + strlen(call), arg) != NULL,
             "%s on device memory: error string \"%s\" does not name %s and its argument %s", call,
             s, call, arg);
}

static void check_refusals(void)
{
    tbuf_t d;
    MPI_Win win = MPI_WIN_NULL;
    int rc;
    tb_alloc(&d, TB_DEVICE, 1 << 16);
    snprintf(current, sizeof(current), "MPI_Win_create over device memory");
    rc = MPI_Win_create(d.ptr, 1 << 16, 1, MPI_INFO_NULL, world, &win);
    check_refusal(rc, "MPI_Win_create", "base");
    if (rc == MPI_SUCCESS) {
        MPI_Win_free(&win);
    }
    snprintf(current, sizeof(current), "MPI_Buffer_attach of device memory");
    rc = MPI_Buffer_attach(d.ptr, 1 << 16);
    check_refusal(rc, "MPI_Buffer_attach", "buffer");
    if (rc == MPI_SUCCESS) {
        void *p;
        int size;
        MPI_Buffer_detach(&p, &size);
    }
#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
    snprintf(current, sizeof(current), "MPI_Comm_attach_buffer of device memory");
    rc = MPI_Comm_attach_buffer(world, d.ptr, 1 << 16);
    check_refusal(rc, "MPI_Comm_attach_buffer", "buffer");
    if (rc == MPI_SUCCESS) {
        void *p;
        int size;
        MPI_Comm_detach_buffer(world, &p, &size);
    }
#endif
#if MPI_VERSION >= 5
    /* the second of two refused arguments: a host logical_true, a device logical_false */
    int host_true, is_set;
    snprintf(current, sizeof(current), "MPI_Abi_get_fortran_booleans into device memory");
    rc = MPI_Abi_get_fortran_booleans((int)sizeof(int), &host_true, d.ptr, &is_set);
    check_refusal(rc, "MPI_Abi_get_fortran_booleans", "logical_false");
#endif
    tb_free(&d);
}

/* ---- main ---- */

static int selected(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p != NULL && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0')) {
            return 1;
        }
    }
    return list == NULL;
}

static void make_comms(void)
{
    int dims[1] = {mt_size}, periods[1] = {1}, r = mt_rank, p = mt_size;
    int src[2] = {(r + p - 1) % p, (r + p - 2) % p}, dst[2] = {(r + 1) % p, (r + 2) % p};
    int weights[2] = {1, 1}; /* (MPI_UNWEIGHTED, a small constant address, upsets GCC) */
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ev_cart);
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src, weights, 2, dst, weights, MPI_INFO_NULL,
                                   0, &ev_graph);
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(ev_cart, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(ev_graph, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
}

static void make_types(void)
{
    MPI_Datatype vec;
    /* 2 ints with a 1-int hole, resized to 4 ints: holes inside and between elements */
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, 4 * sizeof(int), &gap_type);
    MPI_Type_commit(&gap_type);
    MPI_Type_free(&vec);
}

static const struct {
    const ev_case_t *cases;
    const int *n;
} tables[] = {
    {ev_p2p_cases, &ev_p2p_ncases},     {ev_coll_cases, &ev_coll_ncases},
    {ev_neigh_cases, &ev_neigh_ncases}, {ev_pack_cases, &ev_pack_ncases},
    {ev_rma_cases, &ev_rma_ncases},     {ev_io_cases, &ev_io_ncases},
};

int main(int argc, char **argv)
{
    static variant_t vs[256];
    int host_only, times, provided, test_kind, ncases = 0, nruns = 0;
    const char *only;
    static char *attached;
    unsigned long seed = 1;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    mt_load_picoll(0);
    host_only = mt_flag(argc, argv, "--host-only");
    quick = mt_flag(argc, argv, "--quick");
    times = mt_flag(argc, argv, "--times");
    only = mt_option(argc, argv, "--case", NULL);
    if (mt_flag(argc, argv, "--list")) {
        for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]) && mt_rank == 0; t++) {
            for (int i = 0; i < *tables[t].n; i++) {
                printf("%s\n", tables[t].cases[i].name);
            }
        }
        MPI_Finalize();
        return 0;
    }
    if (!host_only) {
        if (tb_use_device() == 0) {
            MPI_Finalize();
            return MT_SKIP;
        }
    }
    test_kind = host_only ? TB_HOST : TB_DEVICE;
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGABRT, on_crash);
    make_comms();
    make_types();
    attached = malloc(8 << 20); /* for MPI_Bsend and its kin: host memory */
    MPI_Buffer_attach(attached, 8 << 20);

    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        for (int i = 0; i < *tables[t].n; i++) {
            const ev_case_t *c = &tables[t].cases[i];
            long before = mt_failures;
            double t0 = MPI_Wtime();
            int nv;
            if (!selected(only, c->name)) {
                continue;
            }
            nv = variants(c, vs);
            for (int k = 0; k < nv; k++, seed++) {
                check_variant(c, &vs[k], seed, test_kind);
                nruns++;
            }
            ncases++;
            if (times && mt_rank == 0) {
                printf("%8.3f s %s\n", MPI_Wtime() - t0, c->name);
            }
            if (mt_failures > before) {
                printf("FAIL [rank %d] %s: %ld failed check(s)\n", mt_rank, c->name,
                       mt_failures - before);
            }
        }
    }
    {
        void *p;
        int size;
        MPI_Buffer_detach(&p, &size);
        free(attached);
    }
    ev_io_close();
    if (!host_only && only == NULL) {
        check_refusals();
    }
    if (mt_rank == 0) {
        printf("every_call: %d case(s), %d variant run(s) on %s buffers against host buffers\n",
               ncases, nruns, tb_kind_name[test_kind]);
    }
    MPI_Type_free(&gap_type);
    MPI_Comm_free(&ev_cart);
    MPI_Comm_free(&ev_graph);
    MPI_Comm_free(&world);
    return mt_finish("every_call");
}
