/* osu-bench: NCCL through dlopen, for the --nccl column (see bench_nccl.h).
 *
 * The benchmark links no NCCL: the types and values below are nccl.h's (NCCL's documented API,
 * stable since NCCL 2.0), declared here so that the programs build anywhere and load the library
 * only when the column is asked for. The library is libnccl.so.2 from the loader's default path,
 * then from the CUDA Toolkit's directories, or the file PICOLL_BENCH_NCCL names. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "bench_nccl.h"
#include "bench_cuda.h"
#include "src/util/dltable.h"

#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nccl_result_t; /* ncclResult_t: 0 is ncclSuccess */
typedef struct nccl_comm_st *nccl_comm_t;
typedef struct {
    char internal[128]; /* NCCL_UNIQUE_ID_BYTES */
} nccl_unique_id_t;

/* ncclDataType_t and ncclRedOp_t values */
enum { NCCL_INT8 = 0, NCCL_INT32 = 2, NCCL_FLOAT32 = 7, NCCL_FLOAT64 = 8 };
enum { NCCL_SUM = 0, NCCL_PROD = 1, NCCL_MAX = 2, NCCL_MIN = 3 };

typedef struct {
    nccl_result_t (*get_version)(int *version);
    nccl_result_t (*get_unique_id)(nccl_unique_id_t *id);
    nccl_result_t (*comm_init_rank)(nccl_comm_t *comm, int nranks, nccl_unique_id_t id, int rank);
    nccl_result_t (*comm_destroy)(nccl_comm_t comm);
    const char *(*get_error_string)(nccl_result_t rc);
    nccl_result_t (*all_reduce)(const void *send, void *recv, size_t count, int type, int op,
                                nccl_comm_t comm, void *stream);
    nccl_result_t (*all_gather)(const void *send, void *recv, size_t count, int type,
                                nccl_comm_t comm, void *stream);
    nccl_result_t (*send)(const void *buf, size_t count, int type, int peer, nccl_comm_t comm,
                          void *stream);
    nccl_result_t (*recv)(void *buf, size_t count, int type, int peer, nccl_comm_t comm,
                          void *stream);
    nccl_result_t (*group_start)(void);
    nccl_result_t (*group_end)(void);
} nccl_table_t;

#define NCCL_SYM(field, name) PICOLL_DL_SYM(nccl_table_t, field, name)
static const picoll_dl_sym_t nccl_syms[] = {
    NCCL_SYM(get_version, "ncclGetVersion"),
    NCCL_SYM(get_unique_id, "ncclGetUniqueId"),
    NCCL_SYM(comm_init_rank, "ncclCommInitRank"),
    NCCL_SYM(comm_destroy, "ncclCommDestroy"),
    NCCL_SYM(get_error_string, "ncclGetErrorString"),
    NCCL_SYM(all_reduce, "ncclAllReduce"),
    NCCL_SYM(all_gather, "ncclAllGather"),
    NCCL_SYM(send, "ncclSend"),
    NCCL_SYM(recv, "ncclRecv"),
    NCCL_SYM(group_start, "ncclGroupStart"),
    NCCL_SYM(group_end, "ncclGroupEnd"),
};

static struct {
    nccl_table_t fn;
    nccl_comm_t comm;
    void *stream;
    int rank, np;
    int type, op;
    size_t esize;
    char describe[512];
} nccl;

/* The test suite's NCCL over MPI (osu-bench/fake_nccl.c) exports this: it runs on the test
 * suite's emulated GPU, which the real NCCL cannot. */
#define FAKE_NCCL_MARK "fakenccl_over_mpi"

static const char *nccl_error(nccl_result_t rc)
{
    const char *s = nccl.fn.get_error_string != NULL ? nccl.fn.get_error_string(rc) : NULL;
    return s != NULL ? s : "unknown error";
}

/* dlopen of libnccl.so.2: the loader's search path, then the CUDA Toolkit's library folders; or
 * PICOLL_BENCH_NCCL's file. The first dlerror is kept for the message. */
static void *open_library(char *path, size_t plen, char *why, size_t len)
{
    static const char *const dirs[] = {"/usr/local/cuda/lib64/", "/usr/local/cuda/lib/",
                                       "/usr/local/cuda/targets/*/lib/"};
    const char *env = getenv("PICOLL_BENCH_NCCL");
    const char *e;
    void *lib;

    if (env != NULL && env[0] != '\0') {
        lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL) {
            e = dlerror();
            snprintf(why, len, "%s not found (PICOLL_BENCH_NCCL: %s)", env,
                     e != NULL ? e : "dlopen failed");
        }
        snprintf(path, plen, "%s", env);
        return lib;
    }
    snprintf(path, plen, "libnccl.so.2");
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) {
        return lib;
    }
    e = dlerror();
    snprintf(why, len,
             "libnccl.so.2 not found (%s; nor in /usr/local/cuda's lib64, lib, "
             "targets/*/lib; PICOLL_BENCH_NCCL names another)",
             e != NULL ? e : "dlopen failed");
    for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
        glob_t g;
        char pattern[256];
        snprintf(pattern, sizeof(pattern), "%slibnccl.so.2", dirs[d]);
        if (glob(pattern, 0, NULL, &g) != 0) {
            continue;
        }
        for (size_t i = 0; i < g.gl_pathc && lib == NULL; i++) {
            lib = dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_LOCAL);
            if (lib != NULL) {
                snprintf(path, plen, "%s", g.gl_pathv[i]);
            }
        }
        globfree(&g);
        if (lib != NULL) {
            return lib;
        }
    }
    return NULL;
}

/* Fills the table; the library stays loaded for the process's life (NCCL's own threads). */
static int load(char *why, size_t len)
{
    char path[256], where[384], origin[PATH_MAX];
    nccl_table_t table;
    void *lib = open_library(path, sizeof(path), why, len);
    int version = 0;

    if (lib == NULL) {
        return -1;
    }
    const char *missing = picoll_dl_fill(lib, nccl_syms, PICOLL_DL_COUNT(nccl_syms), &table);
    if (missing != NULL) {
        snprintf(why, len, "%s lacks %s", path, missing);
        return -1;
    }
    if (bench_cuda_test_driver() && dlsym(lib, FAKE_NCCL_MARK) == NULL) {
        snprintf(why, len,
                 "no GPU (the CUDA driver is one of the test suite's, tests/cuda, which "
                 "%s cannot run on)",
                 path);
        return -1;
    }
    nccl.fn = table;
    if (nccl.fn.get_version(&version) != 0) {
        version = 0;
    }
    /* the file the library came from: the loader's folder of it where dlopen searched */
    if (strchr(path, '/') == NULL && dlinfo(lib, RTLD_DI_ORIGIN, origin) == 0) {
        snprintf(where, sizeof(where), "%.300s/%.60s", origin, path);
    } else {
        snprintf(where, sizeof(where), "%.380s", path);
    }
    /* NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9, major*1000 + ... before */
    snprintf(nccl.describe, sizeof(nccl.describe), "NCCL %d.%d.%d (%s)",
             version >= 10000 ? version / 10000 : version / 1000,
             version >= 10000 ? version % 10000 / 100 : version % 1000 / 100, version % 100, where);
    return 0;
}

/* MPI's datatype and operation as NCCL's: 0, or -1 and why where NCCL has none. */
static int map_type(MPI_Datatype type, MPI_Op op, char *why, size_t len)
{
    char name[MPI_MAX_OBJECT_NAME] = "";
    int n = 0;
    if (type == MPI_CHAR || type == MPI_SIGNED_CHAR || type == MPI_INT8_T) {
        nccl.type = NCCL_INT8;
        nccl.esize = 1;
    } else if (type == MPI_INT || type == MPI_INT32_T) {
        nccl.type = NCCL_INT32;
        nccl.esize = 4;
    } else if (type == MPI_FLOAT) {
        nccl.type = NCCL_FLOAT32;
        nccl.esize = 4;
    } else if (type == MPI_DOUBLE) {
        nccl.type = NCCL_FLOAT64;
        nccl.esize = 8;
    } else {
        PMPI_Type_get_name(type, name, &n);
        snprintf(why, len, "NCCL has no datatype for %s", n > 0 ? name : "this MPI datatype");
        return -1;
    }
    if (op == MPI_OP_NULL || op == MPI_SUM) {
        nccl.op = NCCL_SUM;
    } else if (op == MPI_PROD) {
        nccl.op = NCCL_PROD;
    } else if (op == MPI_MAX) {
        nccl.op = NCCL_MAX;
    } else if (op == MPI_MIN) {
        nccl.op = NCCL_MIN;
    } else {
        snprintf(why, len, "NCCL has no reduction for this MPI operation");
        return -1;
    }
    return 0;
}

/* Whether every rank succeeded; where one did not, rank 0 says so unless it has its own reason. */
static int agree(MPI_Comm comm, int ok, const char *what, char *why, size_t len)
{
    int all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all && ok) {
        snprintf(why, len, "%s failed on another rank", what);
    }
    return all;
}

int bench_nccl_open(MPI_Comm comm, MPI_Datatype type, MPI_Op op, char *why, size_t len)
{
    nccl_unique_id_t id;
    nccl_result_t rc = 0;
    int ok;

    PMPI_Comm_rank(comm, &nccl.rank);
    PMPI_Comm_size(comm, &nccl.np);
    ok = map_type(type, op, why, len) == 0 && load(why, len) == 0;
    if (!agree(comm, ok, "loading NCCL", why, len)) {
        return -1;
    }
    ok = bench_cuda_stream_create(&nccl.stream, why, len) == 0;
    if (!agree(comm, ok, "cuStreamCreate", why, len)) {
        bench_cuda_stream_destroy(nccl.stream);
        nccl.stream = NULL;
        return -1;
    }
    memset(&id, 0, sizeof(id));
    if (nccl.rank == 0) {
        rc = nccl.fn.get_unique_id(&id);
        if (rc != 0) {
            snprintf(why, len, "ncclGetUniqueId: %s", nccl_error(rc));
        }
    }
    /* the id, or rank 0's failure (every rank skips together) */
    PMPI_Bcast(&rc, 1, MPI_INT, 0, comm);
    if (rc == 0) {
        PMPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, comm);
        rc = nccl.fn.comm_init_rank(&nccl.comm, nccl.np, id, nccl.rank);
        if (rc != 0) {
            snprintf(why, len, "ncclCommInitRank: %s", nccl_error(rc));
            nccl.comm = NULL;
        }
        ok = agree(comm, rc == 0, "ncclCommInitRank", why, len);
    } else {
        ok = 0;
        if (nccl.rank != 0) {
            snprintf(why, len, "ncclGetUniqueId failed on rank 0");
        }
    }
    if (!ok) {
        bench_nccl_close();
        return -1;
    }
    return 0;
}

const char *bench_nccl_describe(void)
{
    return nccl.describe;
}

int bench_nccl_call(bench_coll_id_t coll, const void *sendbuf, void *recvbuf, size_t count,
                    char *why, size_t len)
{
    size_t block = count * nccl.esize;
    nccl_result_t rc = 0;
    const char *what = "";

    switch (coll) {
    case BENCH_COLL_ALLREDUCE:
        what = "ncclAllReduce";
        rc = nccl.fn.all_reduce(sendbuf != NULL ? sendbuf : recvbuf, recvbuf, count, nccl.type,
                                nccl.op, nccl.comm, nccl.stream);
        break;
    case BENCH_COLL_ALLGATHER:
        /* in place: this rank's block is already where the result puts it */
        what = "ncclAllGather";
        rc = nccl.fn.all_gather(sendbuf != NULL ? sendbuf : (char *)recvbuf + nccl.rank * block,
                                recvbuf, count, nccl.type, nccl.comm, nccl.stream);
        break;
    case BENCH_COLL_ALLTOALL:
        /* NCCL has no alltoall: a send and a receive of a block per peer in one group */
        what = "ncclSend/ncclRecv";
        rc = nccl.fn.group_start();
        for (int p = 0; p < nccl.np && rc == 0; p++) {
            rc = nccl.fn.send((const char *)sendbuf + p * block, count, nccl.type, p, nccl.comm,
                              nccl.stream);
            if (rc == 0) {
                rc = nccl.fn.recv((char *)recvbuf + p * block, count, nccl.type, p, nccl.comm,
                                  nccl.stream);
            }
        }
        {
            nccl_result_t end = nccl.fn.group_end();
            rc = rc != 0 ? rc : end;
        }
        break;
    case BENCH_COLL_OTHER: snprintf(why, len, "no NCCL collective"); return -1;
    }
    if (rc != 0) {
        snprintf(why, len, "%s: %s", what, nccl_error(rc));
        return -1;
    }
    return bench_cuda_stream_synchronize(nccl.stream, why, len);
}

void bench_nccl_close(void)
{
    if (nccl.comm != NULL) {
        nccl.fn.comm_destroy(nccl.comm);
        nccl.comm = NULL;
    }
    bench_cuda_stream_destroy(nccl.stream);
    nccl.stream = NULL;
}
