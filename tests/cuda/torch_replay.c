/* A replay of PyTorch's MPI backend (ProcessGroupMPI) on device buffers: MPI_THREAD_SERIALIZED,
 * the collectives run on one worker thread that takes queued work (allreduce in place, bcast,
 * reduce, allgather, alltoall, alltoallv, gather, scatter, reduce_scatter), the point-to-point calls are
 * MPI_Isend/MPI_Irecv from the calling thread, completed by MPI_Test loops (isCompleted) or
 * MPI_Wait (wait), every MPI call under one global lock as PyTorch holds it. Then the textbook
 * training steps: data parallel (allreduce of each layer's gradients), tensor parallel
 * (allgather of activation shards, reduce_scatter of partial sums) and pipeline parallel
 * (micro-batches sent from stage to stage round a ring of ranks). Every result is compared bit
 * for bit with one computed by plain loops: floats that hold small integers, so every sum is
 * exact whatever the order.
 *
 * Run with picoll preloaded, on a GPU, on the emulated GPU (tests/cuda/emu) or on tests/cuda/fake's
 * driver; without a device it prints "SKIP: ..." and exits 77. --host-only: host buffers (checks
 * the replay itself). --expect-device: broadcast, reduce, reduce_scatter and alltoallv (all_to_all
 * with uneven splits) must each run on picoll's device path, not staged through the host
 * (picoll_last_algorithm() of the worker thread, checked for every call). */
#include "drv.h"
#include "mpitest.h"
#include "tbuf.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int kind = TB_DEVICE;
static int expect_device;
static const char *(*last_path)(void); /* picoll_last_algorithm, where picoll is preloaded */
static pthread_mutex_t pg_lock = PTHREAD_MUTEX_INITIALIZER; /* PyTorch's pgGlobalMutex_ */

/* ---- the worker thread and its queue (ProcessGroupMPI::runLoop) ---- */

typedef struct work {
    void (*fn)(void *arg);
    void *arg;
    int done;
    struct work *next;
} work_t;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    work_t *head, *tail;
    int stop;
} queue = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0};

static void *worker_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&queue.lock);
    for (;;) {
        work_t *w;
        while (queue.head == NULL && !queue.stop) {
            pthread_cond_wait(&queue.changed, &queue.lock);
        }
        if (queue.head == NULL) {
            break;
        }
        w = queue.head;
        queue.head = w->next;
        if (queue.head == NULL) {
            queue.tail = NULL;
        }
        pthread_mutex_unlock(&queue.lock);
        pthread_mutex_lock(&pg_lock);
        w->fn(w->arg);
        pthread_mutex_unlock(&pg_lock);
        pthread_mutex_lock(&queue.lock);
        w->done = 1;
        pthread_cond_broadcast(&queue.changed);
    }
    pthread_mutex_unlock(&queue.lock);
    return NULL;
}

/* Enqueues fn(arg) for the worker and waits for it (work->wait()). */
static void on_worker(void (*fn)(void *), void *arg)
{
    work_t w = {fn, arg, 0, NULL};
    pthread_mutex_lock(&queue.lock);
    if (queue.tail) {
        queue.tail->next = &w;
    } else {
        queue.head = &w;
    }
    queue.tail = &w;
    pthread_cond_broadcast(&queue.changed);
    while (!w.done) {
        pthread_cond_wait(&queue.changed, &queue.lock);
    }
    pthread_mutex_unlock(&queue.lock);
}

/* ---- tensors: device buffers of floats ---- */

typedef struct {
    tbuf_t b;
    int n;
} tensor_t;

/* The value rank r holds at element i of tensor `what`: a small integer, exact as a float. */
static float value(int r, int i, int what)
{
    return (float)((r * 131 + i * 7 + what * 17) % 997);
}

static void t_make(tensor_t *t, int n, int rank, int what)
{
    float *h = malloc(((size_t)n + 1) * sizeof(float));
    for (int i = 0; i < n; i++) {
        h[i] = value(rank, i, what);
    }
    t->n = n;
    tb_alloc(&t->b, kind, (size_t)n * sizeof(float));
    tb_put(&t->b, h);
    free(h);
}

static void t_check(const tensor_t *t, const float *expect, const char *what)
{
    float *h = malloc(((size_t)t->n + 1) * sizeof(float));
    tb_get(&t->b, h);
    for (int i = 0; i < t->n; i++) {
        if (memcmp(&h[i], &expect[i], sizeof(float)) != 0) {
            mt_fail("%s: element %d is %g, expected %g", what, i, h[i], expect[i]);
            break;
        }
    }
    free(h);
}

/* ---- the collectives, as ProcessGroupMPI's work functions ---- */

typedef struct {
    void *buf, *out;
    int n, root;
    int *counts, *displs, *rcounts, *rdispls;
    int rc;
    const char *path; /* the worker thread's picoll_last_algorithm() after the call */
} coll_t;

static void note_path(coll_t *c)
{
    c->path = last_path != NULL ? last_path() : NULL;
}

static void w_allreduce(void *p)
{
    coll_t *c = p;
    c->rc = MPI_Allreduce(MPI_IN_PLACE, c->buf, c->n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static void w_bcast(void *p)
{
    coll_t *c = p;
    c->rc = MPI_Bcast(c->buf, c->n, MPI_FLOAT, c->root, MPI_COMM_WORLD);
    note_path(c);
}
/* ProcessGroupMPI::reduce: in place at the root, no receive buffer elsewhere */
static void w_reduce(void *p)
{
    coll_t *c = p;
    int root = mt_rank == c->root;
    c->rc = MPI_Reduce(root ? MPI_IN_PLACE : c->buf, root ? c->buf : NULL, c->n, MPI_FLOAT, MPI_SUM,
                       c->root, MPI_COMM_WORLD);
    note_path(c);
}
static void w_allgather(void *p)
{
    coll_t *c = p;
    c->rc = MPI_Allgather(c->buf, c->n, MPI_FLOAT, c->out, c->n, MPI_FLOAT, MPI_COMM_WORLD);
}
static void w_alltoall(void *p)
{
    coll_t *c = p;
    c->rc = MPI_Alltoall(c->buf, c->n, MPI_FLOAT, c->out, c->n, MPI_FLOAT, MPI_COMM_WORLD);
}
static void w_alltoallv(void *p)
{
    coll_t *c = p;
    c->rc = MPI_Alltoallv(c->buf, c->counts, c->displs, MPI_FLOAT, c->out, c->rcounts, c->rdispls,
                          MPI_FLOAT, MPI_COMM_WORLD);
    note_path(c);
}
static void w_gather(void *p)
{
    coll_t *c = p;
    c->rc = MPI_Gather(c->buf, c->n, MPI_FLOAT, c->out, c->n, MPI_FLOAT, c->root, MPI_COMM_WORLD);
}
static void w_scatter(void *p)
{
    coll_t *c = p;
    c->rc = MPI_Scatter(c->buf, c->n, MPI_FLOAT, c->out, c->n, MPI_FLOAT, c->root, MPI_COMM_WORLD);
}
static void w_reduce_scatter(void *p)
{
    coll_t *c = p;
    c->rc = MPI_Reduce_scatter_block(c->buf, c->out, c->n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    note_path(c);
}

static void run(void (*fn)(void *), coll_t *c, const char *what)
{
    on_worker(fn, c);
    MT_CHECK(c->rc == MPI_SUCCESS, "%s: MPI error %d", what, c->rc);
    if (expect_device &&
        (fn == w_bcast || fn == w_reduce || fn == w_reduce_scatter || fn == w_alltoallv)) {
        MT_CHECK(c->path != NULL && strncmp(c->path, "cuda_", 5) == 0,
                 "%s (n %d): path %s, expected picoll's device path (not staged)", what, c->n,
                 c->path != NULL ? c->path : "(none)");
    }
}

static void check_collectives(int n)
{
    int p = mt_size, r = mt_rank;
    float *e = calloc((size_t)n * (size_t)p + 16, sizeof(float));
    tensor_t a, out;
    coll_t c = {0};

    t_make(&a, n, r, 1); /* allreduce in place */
    c = (coll_t){.buf = a.b.ptr, .n = n};
    run(w_allreduce, &c, "allreduce in place");
    for (int i = 0; i < n; i++) {
        e[i] = 0;
        for (int k = 0; k < p; k++) {
            e[i] += value(k, i, 1);
        }
    }
    t_check(&a, e, "allreduce in place");
    tb_free(&a.b);

    for (int root = 0; root < p; root++) { /* broadcast from each rank */
        t_make(&a, n, r, 2);
        c = (coll_t){.buf = a.b.ptr, .n = n, .root = root};
        run(w_bcast, &c, "bcast");
        for (int i = 0; i < n; i++) {
            e[i] = value(root, i, 2);
        }
        t_check(&a, e, "bcast");
        tb_free(&a.b);
    }

    for (int root = 0; root < p; root += p - 1) { /* reduce, roots first and last */
        if (mt_reduce_in_place_broken(root, (size_t)n * sizeof(float))) {
            break; /* where the call reaches MPICH 4.0.2 (mpitest.h) */
        }
        t_make(&a, n, r, 14);
        c = (coll_t){.buf = a.b.ptr, .n = n, .root = root};
        run(w_reduce, &c, "reduce");
        for (int i = 0; i < n; i++) {
            e[i] = r == root ? 0 : value(r, i, 14); /* a leaf's tensor stays as it was */
            for (int k = 0; k < p && r == root; k++) {
                e[i] += value(k, i, 14);
            }
        }
        t_check(&a, e, "reduce");
        tb_free(&a.b);
        if (p == 1) {
            break;
        }
    }

    t_make(&a, n, r, 3); /* allgather */
    t_make(&out, n * p, r, 4);
    c = (coll_t){.buf = a.b.ptr, .out = out.b.ptr, .n = n};
    run(w_allgather, &c, "allgather");
    for (int k = 0; k < p; k++) {
        for (int i = 0; i < n; i++) {
            e[k * n + i] = value(k, i, 3);
        }
    }
    t_check(&out, e, "allgather");
    tb_free(&a.b);
    tb_free(&out.b);

    t_make(&a, n * p, r, 5); /* alltoall: block k of rank j goes to rank k */
    t_make(&out, n * p, r, 6);
    c = (coll_t){.buf = a.b.ptr, .out = out.b.ptr, .n = n};
    run(w_alltoall, &c, "alltoall");
    for (int k = 0; k < p; k++) {
        for (int i = 0; i < n; i++) {
            e[k * n + i] = value(k, r * n + i, 5);
        }
    }
    t_check(&out, e, "alltoall");
    tb_free(&a.b);
    tb_free(&out.b);

    for (int root = 0; root < p; root += p - 1) { /* gather and scatter, roots first and last */
        t_make(&a, n, r, 7);
        t_make(&out, n * p, r, 8);
        c = (coll_t){.buf = a.b.ptr, .out = out.b.ptr, .n = n, .root = root};
        run(w_gather, &c, "gather");
        for (int k = 0; k < p; k++) {
            for (int i = 0; i < n; i++) {
                e[k * n + i] = r == root ? value(k, i, 7) : value(r, k * n + i, 8);
            }
        }
        t_check(&out, e, "gather");
        tb_free(&a.b);
        tb_free(&out.b);

        t_make(&a, n * p, r, 9);
        t_make(&out, n, r, 10);
        c = (coll_t){.buf = a.b.ptr, .out = out.b.ptr, .n = n, .root = root};
        run(w_scatter, &c, "scatter");
        for (int i = 0; i < n; i++) {
            e[i] = value(root, r * n + i, 9);
        }
        t_check(&out, e, "scatter");
        tb_free(&a.b);
        tb_free(&out.b);
        if (p == 1) {
            break;
        }
    }
    free(e);
}

/* alltoall_base with split sizes: rank j sends n + (j + k) % 3 elements to rank k */
static void check_alltoallv(int n)
{
    int p = mt_size, r = mt_rank, sc[64], sd[64], rc[64], rd[64], stotal = 0, rtotal = 0;
    tensor_t a, out;
    coll_t c;
    float *e;
    for (int k = 0; k < p; k++) {
        sc[k] = n + (r + k) % 3;
        sd[k] = stotal;
        stotal += sc[k];
        rc[k] = n + (k + r) % 3;
        rd[k] = rtotal;
        rtotal += rc[k];
    }
    t_make(&a, stotal, r, 11);
    t_make(&out, rtotal, r, 12);
    c = (coll_t){.buf = a.b.ptr,
                 .out = out.b.ptr,
                 .n = n,
                 .counts = sc,
                 .displs = sd,
                 .rcounts = rc,
                 .rdispls = rd};
    run(w_alltoallv, &c, "alltoallv");
    e = calloc((size_t)rtotal + 1, sizeof(float));
    for (int k = 0; k < p; k++) {
        int at = 0; /* where rank k's block for me starts in its send buffer */
        for (int j = 0; j < r; j++) {
            at += n + (k + j) % 3;
        }
        for (int i = 0; i < rc[k]; i++) {
            e[rd[k] + i] = value(k, at + i, 11);
        }
    }
    t_check(&out, e, "alltoallv");
    free(e);
    tb_free(&a.b);
    tb_free(&out.b);
}

/* ---- point to point, from the calling thread (ProcessGroupMPI::send/recv) ---- */

static MPI_Request isend(const tensor_t *t, int dst, int tag)
{
    MPI_Request q;
    pthread_mutex_lock(&pg_lock);
    MT_CHECK(MPI_Isend(t->b.ptr, t->n, MPI_FLOAT, dst, tag, MPI_COMM_WORLD, &q) == MPI_SUCCESS,
             "MPI_Isend to %d failed", dst);
    pthread_mutex_unlock(&pg_lock);
    return q;
}

static MPI_Request irecv(tensor_t *t, int src, int tag)
{
    MPI_Request q;
    pthread_mutex_lock(&pg_lock);
    MT_CHECK(MPI_Irecv(t->b.ptr, t->n, MPI_FLOAT, src, tag, MPI_COMM_WORLD, &q) == MPI_SUCCESS,
             "MPI_Irecv from %d failed", src);
    pthread_mutex_unlock(&pg_lock);
    return q;
}

/* work.wait(): MPI_Wait under the lock */
static void wait_req(MPI_Request *q, MPI_Status *st)
{
    pthread_mutex_lock(&pg_lock);
    MT_CHECK(MPI_Wait(q, st) == MPI_SUCCESS, "MPI_Wait failed");
    pthread_mutex_unlock(&pg_lock);
}

/* work.is_completed() polled until true: MPI_Test under the lock, released between polls */
static void test_loop(MPI_Request *q, MPI_Status *st)
{
    int flag = 0;
    while (!flag) {
        pthread_mutex_lock(&pg_lock);
        MT_CHECK(MPI_Test(q, &flag, st) == MPI_SUCCESS, "MPI_Test failed");
        pthread_mutex_unlock(&pg_lock);
        if (mt_failures) {
            break;
        }
    }
}

/* dist.send/recv: even ranks send to the next odd one; the receiver polls, the sender waits */
static void check_send_recv(int n)
{
    int r = mt_rank, peer = r % 2 ? r - 1 : r + 1;
    tensor_t t;
    MPI_Request q;
    MPI_Status st;
    float *e;
    if (peer >= mt_size) {
        return;
    }
    e = malloc((size_t)n * sizeof(float));
    t_make(&t, n, r, 13);
    if (r % 2 == 0) {
        q = isend(&t, peer, 7);
        wait_req(&q, &st);
        for (int i = 0; i < n; i++) {
            e[i] = value(r, i, 13);
        }
        t_check(&t, e, "send: send buffer after MPI_Wait");
    } else {
        q = irecv(&t, peer, 7);
        test_loop(&q, &st);
        MT_CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 7,
                 "recv: status source %d tag %d, "
                 "expected %d and 7",
                 st.MPI_SOURCE, st.MPI_TAG, peer);
        for (int i = 0; i < n; i++) {
            e[i] = value(peer, i, 13);
        }
        t_check(&t, e, "recv completed by an MPI_Test loop");
    }
    tb_free(&t.b);
    free(e);
}

/* ---- training steps ---- */

/* Data parallel: each layer's gradients all-reduced in place, a step after another. */
static void step_data_parallel(void)
{
    static const int layers[] = {1000, 37, 4096, 1};
    for (int step = 0; step < 2; step++) {
        for (unsigned l = 0; l < sizeof(layers) / sizeof(layers[0]); l++) {
            int n = layers[l], what = 20 + step * 8 + (int)l;
            tensor_t g;
            coll_t c;
            float *e = malloc((size_t)n * sizeof(float));
            t_make(&g, n, mt_rank, what);
            c = (coll_t){.buf = g.b.ptr, .n = n};
            run(w_allreduce, &c, "data parallel: gradient allreduce");
            for (int i = 0; i < n; i++) {
                e[i] = 0;
                for (int k = 0; k < mt_size; k++) {
                    e[i] += value(k, i, what);
                }
            }
            t_check(&g, e, "data parallel: gradient allreduce");
            tb_free(&g.b);
            free(e);
        }
    }
}

/* Tensor parallel: activation shards all-gathered, partial sums reduce-scattered. */
static void step_tensor_parallel(int n)
{
    int p = mt_size, r = mt_rank;
    tensor_t shard, full, part, mine;
    coll_t c;
    float *e = malloc((size_t)n * (size_t)p * sizeof(float));
    t_make(&shard, n, r, 40);
    t_make(&full, n * p, r, 41);
    c = (coll_t){.buf = shard.b.ptr, .out = full.b.ptr, .n = n};
    run(w_allgather, &c, "tensor parallel: activation allgather");
    for (int k = 0; k < p; k++) {
        for (int i = 0; i < n; i++) {
            e[k * n + i] = value(k, i, 40);
        }
    }
    t_check(&full, e, "tensor parallel: activation allgather");
    t_make(&part, n * p, r, 42);
    t_make(&mine, n, r, 43);
    c = (coll_t){.buf = part.b.ptr, .out = mine.b.ptr, .n = n};
    run(w_reduce_scatter, &c, "tensor parallel: reduce_scatter of partial sums");
    for (int i = 0; i < n; i++) {
        e[i] = 0;
        for (int k = 0; k < p; k++) {
            e[i] += value(k, r * n + i, 42);
        }
    }
    t_check(&mine, e, "tensor parallel: reduce_scatter of partial sums");
    tb_free(&shard.b);
    tb_free(&full.b);
    tb_free(&part.b);
    tb_free(&mine.b);
    free(e);
}

/* Pipeline parallel: rank s is stage s; each micro-batch starts at stage 0, each stage adds
 * s + 1 to every element (on the host, as a kernel would on the device) and passes it on, the
 * last stage back to stage 0, which checks it. Receives are polled, sends waited for. */
static void step_pipeline(int n)
{
    enum { MICRO = 4 };
    int p = mt_size, s = mt_rank, prev = (s + p - 1) % p, next = (s + 1) % p;
    float *h = malloc((size_t)n * sizeof(float)), *e = malloc((size_t)n * sizeof(float));
    int added = p * (p + 1) / 2; /* 1 + 2 + ... + p */
    for (int m = 0; m < MICRO; m++) {
        tensor_t t;
        MPI_Request q;
        MPI_Status st;
        t_make(&t, n, 0, 50 + m);
        if (s != 0) {
            q = irecv(&t, prev, 100 + m);
            test_loop(&q, &st);
        }
        tb_get(&t.b, h);
        for (int i = 0; i < n; i++) {
            h[i] += (float)(s + 1);
        }
        tb_put(&t.b, h);
        q = isend(&t, next, 100 + m);
        wait_req(&q, &st);
        if (s == 0) {
            q = irecv(&t, prev, 100 + m);
            test_loop(&q, &st);
            for (int i = 0; i < n; i++) {
                e[i] = value(0, i, 50 + m) + (float)added;
            }
            t_check(&t, e, "pipeline parallel: micro-batch after every stage");
        }
        tb_free(&t.b);
    }
    free(h);
    free(e);
}

int main(int argc, char **argv)
{
    int provided = MPI_THREAD_SINGLE;
    pthread_t worker;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    mt_load_picoll(0);
    if (mt_size > 64) {
        return mt_skip("at most 64 ranks");
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        return mt_skip("the MPI does not provide MPI_THREAD_SERIALIZED");
    }
    *(void **)&last_path = dlsym(RTLD_DEFAULT, "picoll_last_algorithm");
    expect_device = mt_flag(argc, argv, "--expect-device");
    if (mt_flag(argc, argv, "--host-only")) {
        kind = TB_HOST;
    } else {
        if (tb_use_device() == 0) {
            MPI_Finalize();
            return MT_SKIP;
        }
    }
    pthread_create(&worker, NULL, worker_main, NULL);
    for (int n = 1; n <= 70000; n = n * 37 + 3) { /* 1, 40, 1483, 54874 */
        check_collectives(n);
        check_alltoallv(n);
        check_send_recv(n);
    }
    step_data_parallel();
    step_tensor_parallel(1000);
    step_pipeline(5000);
    pthread_mutex_lock(&queue.lock);
    queue.stop = 1;
    pthread_cond_broadcast(&queue.changed);
    pthread_mutex_unlock(&queue.lock);
    pthread_join(worker, NULL);
    return mt_finish("torch_replay");
}
