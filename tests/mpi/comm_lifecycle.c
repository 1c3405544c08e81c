/* Life cycle of picoll's per-communicator contexts:
 *  - none before the first collective on a communicator, one (enabled, of the right size) after;
 *  - a dup does not inherit its parent's context;
 *  - MPI_Comm_free drops the context: communicators created afterwards, which the MPI library
 *    may give the freed handles again, get NEW contexts (ids never seen before, their own size),
 *    never a stale one, and correct results.
 * Options: --expect-picoll, --rounds N (default 3), --comms N per round (default 6). */
#include "mpitest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IDS 4096
static unsigned long seen[MAX_IDS];
static int nseen;
static MPI_Comm seen_handles[MAX_IDS];
static int nhandles;

static void allreduce_check(MPI_Comm comm, const char *name, int salt)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int in[9], out[9];
    for (int i = 0; i < 9; i++) {
        in[i] = (rank + 1) * (i + salt);
    }
    MT_CHECK(MPI_Allreduce(in, out, 9, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS,
             "MPI_Allreduce on %s failed", name);
    for (int i = 0; i < 9; i++) {
        int expect = size * (size + 1) / 2 * (i + salt);
        MT_CHECK(out[i] == expect, "MPI_Allreduce on %s (size %d): [%d] = %d, expected %d", name,
                 size, i, out[i], expect);
    }
}

/* No context yet; one collective; then a new, enabled context of the communicator's size. */
static void first_use(MPI_Comm comm, const char *name, int salt)
{
    picoll_comm_info_t info;
    int size;
    MPI_Comm_size(comm, &size);
    if (mt_picoll.found) {
        int rc = mt_picoll.comm_query(comm, &info);
        MT_CHECK(rc != MPI_SUCCESS,
                 "%s: a context (id %lu, size %d) exists before any collective "
                 "on it",
                 name, info.id, info.size);
    }
    allreduce_check(comm, name, salt);
    if (!mt_picoll.found) {
        return;
    }
    int rc = mt_picoll.comm_query(comm, &info);
    MT_CHECK(rc == MPI_SUCCESS, "%s: no context after a collective", name);
    if (rc != MPI_SUCCESS) {
        return;
    }
    MT_CHECK(info.enabled == 1, "%s: context disabled: %s", name, info.reason);
    MT_CHECK(info.size == size, "%s: context size %d, communicator size %d (stale context?)", name,
             info.size, size);
    for (int i = 0; i < nseen; i++) {
        MT_CHECK(seen[i] != info.id,
                 "%s: context id %lu was already used by an earlier "
                 "communicator (stale context)",
                 name, info.id);
    }
    if (nseen < MAX_IDS) {
        seen[nseen++] = info.id;
    }
    /* a second collective keeps the same context */
    allreduce_check(comm, name, salt + 1);
    picoll_comm_info_t again;
    rc = mt_picoll.comm_query(comm, &again);
    MT_CHECK(rc == MPI_SUCCESS && again.id == info.id,
             "%s: context changed between two "
             "collectives (%lu then %lu)",
             name, info.id, again.id);
}

static int reused(MPI_Comm c)
{
    for (int i = 0; i < nhandles; i++) {
        if (seen_handles[i] == c) {
            return 1;
        }
    }
    return 0;
}

static void remember(MPI_Comm c)
{
    if (nhandles < MAX_IDS && !reused(c)) {
        seen_handles[nhandles++] = c;
    }
}

int main(int argc, char **argv)
{
    int expect_picoll = mt_flag(argc, argv, "--expect-picoll");
    int rounds = atoi(mt_option(argc, argv, "--rounds", "3"));
    int per_round = atoi(mt_option(argc, argv, "--comms", "6"));
    MPI_Comm *comms;
    int nreused = 0;
    char name[64];
    picoll_comm_info_t info;

    MPI_Init(&argc, &argv);
    mt_load_picoll(expect_picoll);
    comms = calloc((size_t)per_round, sizeof(MPI_Comm));

    if (mt_picoll.found) {
        MT_CHECK(mt_picoll.comm_query(MPI_COMM_NULL, &info) != MPI_SUCCESS,
                 "picoll_comm_query(MPI_COMM_NULL) succeeded");
    }
    first_use(MPI_COMM_WORLD, "MPI_COMM_WORLD", 1);
    first_use(MPI_COMM_SELF, "MPI_COMM_SELF", 2);

    /* a dup of a communicator with a context gets its own */
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    first_use(dup, "dup of MPI_COMM_WORLD", 3);
    MPI_Comm dupdup;
    MPI_Comm_dup(dup, &dupdup);
    first_use(dupdup, "dup of the dup", 4);
    MPI_Comm_free(&dupdup);
    MPI_Comm_free(&dup);
    MT_CHECK(dup == MPI_COMM_NULL, "MPI_Comm_free did not reset the handle");

    /* rounds of create, use, free; each round with a different shape, so that a reused handle
     * with a stale context would show the wrong size */
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < per_round; i++) {
            int shape = (r + i) % 3;
            if (shape == 0) {
                MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]);
            } else if (shape == 1) {
                /* halves of different sizes: ranks below size/3 apart from the others */
                MPI_Comm_split(MPI_COMM_WORLD, mt_rank < mt_size / 3, mt_size - mt_rank, &comms[i]);
            } else {
                /* size 1, 2, 3... groups of consecutive ranks */
                MPI_Comm_split(MPI_COMM_WORLD, mt_rank / (r % 3 + 1), mt_rank, &comms[i]);
            }
            if (reused(comms[i])) {
                nreused++;
            }
            remember(comms[i]);
            snprintf(name, sizeof(name), "round %d communicator %d (shape %d)", r, i, shape);
            first_use(comms[i], name, 10 * r + i);
        }
        /* free in an order other than creation */
        for (int i = per_round - 1; i >= 0; i -= 2) {
            MPI_Comm_free(&comms[i]);
        }
        for (int i = per_round - 2; i >= 0; i -= 2) {
            MPI_Comm_free(&comms[i]);
        }
    }
    /* world's context is unaffected by all of it */
    if (mt_picoll.found) {
        int rc = mt_picoll.comm_query(MPI_COMM_WORLD, &info);
        MT_CHECK(rc == MPI_SUCCESS && info.size == mt_size && info.id == seen[0],
                 "MPI_COMM_WORLD's context changed: rc %d id %lu (was %lu) size %d", rc, info.id,
                 seen[0], info.size);
    }
    allreduce_check(MPI_COMM_WORLD, "MPI_COMM_WORLD at the end", 5);
    if (mt_rank == 0) {
        printf("comm_lifecycle: %d contexts, %d communicators got a handle freed before\n", nseen,
               nreused);
    }
    free(comms);
    return mt_finish("comm_lifecycle");
}
