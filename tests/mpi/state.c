/* picoll's process and communicator state as the environment sets it, with results still right:
 *
 *   --expect-active 0|1        picoll_active() on every rank
 *   --expect-context none|enabled|disabled
 *                              after collectives on MPI_COMM_WORLD and on a reversed split:
 *                              no context (picoll_comm_query fails), or one with this state
 *   --fail-rank R              with disabled: the reason names world rank R (on R itself: the
 *                              forced failure, PICOLL_TEST_FAIL_SETUP)
 *   --stats-differ             before MPI_Init, set PICOLL_STATS=1 on world rank 1 only (from the
 *                              launcher's rank variable), so that the ranks disagree
 *   --expect-picoll            picoll's API must be present */
#include "mpitest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether text contains "rank N" with N not followed by another digit. */
static int names_rank(const char *text, int n)
{
    char word[32];
    snprintf(word, sizeof(word), "rank %d", n);
    for (const char *p = text; (p = strstr(p, word)) != NULL; p++) {
        char next = p[strlen(word)];
        if (next < '0' || next > '9') {
            return 1;
        }
    }
    return 0;
}

static void collectives(MPI_Comm comm, const char *name)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    enum { N = 37 };
    long in[N], out[N], expect;
    for (int i = 0; i < N; i++) {
        in[i] = rank * 1000 + i;
    }
    MT_CHECK(MPI_Allreduce(in, out, N, MPI_LONG, MPI_SUM, comm) == MPI_SUCCESS,
             "MPI_Allreduce on %s failed", name);
    for (int i = 0; i < N; i++) {
        expect = 1000L * size * (size - 1) / 2 + (long)size * i;
        MT_CHECK(out[i] == expect, "MPI_Allreduce on %s: [%d] = %ld, expected %ld", name, i, out[i],
                 expect);
    }
    int *gin = malloc(sizeof(int) * 5), *gout = malloc(sizeof(int) * 5 * (size_t)size);
    int *tin = malloc(sizeof(int) * 3 * (size_t)size),
        *tout = malloc(sizeof(int) * 3 * (size_t)size);
    for (int i = 0; i < 5; i++) {
        gin[i] = rank * 10 + i;
    }
    for (int d = 0; d < size; d++) {
        for (int i = 0; i < 3; i++) {
            tin[d * 3 + i] = rank * 10000 + d * 10 + i;
        }
    }
    MT_CHECK(MPI_Allgather(gin, 5, MPI_INT, gout, 5, MPI_INT, comm) == MPI_SUCCESS,
             "MPI_Allgather on %s failed", name);
    MT_CHECK(MPI_Alltoall(tin, 3, MPI_INT, tout, 3, MPI_INT, comm) == MPI_SUCCESS,
             "MPI_Alltoall on %s failed", name);
    for (int s = 0; s < size; s++) {
        for (int i = 0; i < 5; i++) {
            MT_CHECK(gout[s * 5 + i] == s * 10 + i, "MPI_Allgather on %s: block %d wrong", name, s);
        }
        for (int i = 0; i < 3; i++) {
            MT_CHECK(tout[s * 3 + i] == s * 10000 + rank * 10 + i,
                     "MPI_Alltoall on %s: block %d "
                     "wrong",
                     name, s);
        }
    }
    free(gin);
    free(gout);
    free(tin);
    free(tout);
}

static void check_context(MPI_Comm comm, const char *name, const char *expect, int fail_rank,
                          int fail_comm_rank)
{
    picoll_comm_info_t info;
    int size;
    int rc = mt_picoll.comm_query(comm, &info);
    MPI_Comm_size(comm, &size);
    if (strcmp(expect, "none") == 0) {
        MT_CHECK(rc != MPI_SUCCESS, "%s: picoll_comm_query found a context (id %lu), expected none",
                 name, info.id);
        return;
    }
    MT_CHECK(rc == MPI_SUCCESS, "%s: no context after collectives", name);
    if (rc != MPI_SUCCESS) {
        return;
    }
    MT_CHECK(info.size == size, "%s: context size %d, expected %d", name, info.size, size);
    if (strcmp(expect, "enabled") == 0) {
        MT_CHECK(info.enabled == 1, "%s: context disabled (%s), expected enabled", name,
                 info.reason);
        return;
    }
    MT_CHECK(info.enabled == 0, "%s: context enabled, expected disabled", name);
    MT_CHECK(info.reason[0] != '\0', "%s: disabled without a reason", name);
    if (fail_rank < 0) {
        return;
    }
    if (mt_rank == fail_rank) {
        MT_CHECK(strstr(info.reason, "PICOLL_TEST_FAIL_SETUP") != NULL,
                 "%s: on the failing rank the reason should be the forced failure: \"%s\"", name,
                 info.reason);
    } else {
        MT_CHECK(names_rank(info.reason, fail_comm_rank),
                 "%s: reason does not name rank %d (world rank %d): \"%s\"", name, fail_comm_rank,
                 fail_rank, info.reason);
    }
}

int main(int argc, char **argv)
{
    int expect_active = atoi(mt_option(argc, argv, "--expect-active", "1"));
    const char *expect_ctx = mt_option(argc, argv, "--expect-context", "enabled");
    int fail_rank = atoi(mt_option(argc, argv, "--fail-rank", "-1"));
    MPI_Comm rev;

    if (mt_flag(argc, argv, "--stats-differ")) {
        static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
        const char *r = NULL;
        for (unsigned i = 0; i < 3 && r == NULL; i++) {
            r = getenv(vars[i]);
        }
        if (r == NULL) {
            printf("FAIL: --stats-differ: no rank in the environment (%s, %s, %s)\n", vars[0],
                   vars[1], vars[2]);
            return 1;
        }
        setenv("PICOLL_STATS", atoi(r) == 1 ? "1" : "0", 1);
    }
    MPI_Init(&argc, &argv);
    /* the API is there whenever picoll is preloaded, active or not */
    if (!mt_load_picoll(1)) {
        return mt_finish("state");
    }
    MT_CHECK(mt_picoll.active() == expect_active, "picoll_active() = %d, expected %d",
             mt_picoll.active(), expect_active);

    MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &rev);
    collectives(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    collectives(rev, "reversed split");
    check_context(MPI_COMM_WORLD, "MPI_COMM_WORLD", expect_ctx, fail_rank, fail_rank);
    check_context(rev, "reversed split", expect_ctx, fail_rank, mt_size - 1 - fail_rank);

    /* an inactive picoll cannot be switched on by clearing the bypass */
    if (!expect_active) {
        mt_picoll.set_bypass(0);
        MT_CHECK(mt_picoll.active() == 0, "picoll_set_bypass(0) made an inactive picoll active");
        collectives(MPI_COMM_WORLD, "MPI_COMM_WORLD after picoll_set_bypass(0)");
        check_context(MPI_COMM_WORLD, "MPI_COMM_WORLD after picoll_set_bypass(0)", expect_ctx,
                      fail_rank, fail_rank);
    }
    MT_CHECK(mt_picoll.active() == expect_active, "picoll_active() = %d at the end, expected %d",
             mt_picoll.active(), expect_active);
    MPI_Comm_free(&rev);
    return mt_finish("state");
}
