/* Erroneous calls return the same error class with picoll as the underlying MPI gives on its own.
 * With MPI_ERRORS_RETURN on MPI_COMM_WORLD, MPI_COMM_SELF and the communicators used, each call is
 * made through picoll, then again with picoll_set_bypass(1) (the plain-MPI reference, in the same
 * process), and the two error classes compared. Calls that are invalid by any reading of the
 * standard must also fail in plain MPI (so that the comparison has something to compare).
 * Options: --expect-picoll (required for the comparison; without picoll only plain MPI runs). */
#include "mpitest.h"

#include <stdio.h>
#include <string.h>

typedef enum { ALLREDUCE, ALLGATHER, ALLTOALL } coll_t;

typedef struct {
    const char *what;
    coll_t coll;
    int must_fail; /* invalid beyond doubt: plain MPI must report it */
    int sendbuf_is_recvbuf, send_in_place, recv_in_place;
    int count, sendcount;
    MPI_Datatype type, sendtype;
    MPI_Op op;
    int comm_null;
} bad_case_t;

static char sbuf[4096], rbuf[4096];

static int call(const bad_case_t *c, MPI_Comm comm)
{
    MPI_Comm cm = c->comm_null ? MPI_COMM_NULL : comm;
    void *recv = c->recv_in_place ? MPI_IN_PLACE : rbuf;
    const void *send = c->send_in_place ? MPI_IN_PLACE : c->sendbuf_is_recvbuf ? rbuf : sbuf;
    switch (c->coll) {
    case ALLREDUCE: return MPI_Allreduce(send, recv, c->count, c->type, c->op, cm);
    case ALLGATHER:
        return MPI_Allgather(send, c->sendcount, c->sendtype, recv, c->count, c->type, cm);
    case ALLTOALL:
        return MPI_Alltoall(send, c->sendcount, c->sendtype, recv, c->count, c->type, cm);
    }
    return MPI_ERR_OTHER;
}

static const char *class_name(int cls)
{
    static char buf[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(cls, buf, &len) != MPI_SUCCESS) {
        snprintf(buf, sizeof(buf), "class %d", cls);
    }
    return buf;
}

static void run_case(const bad_case_t *c, MPI_Comm comm, const char *comm_name)
{
    int rc_picoll, rc_plain, cls_picoll = MPI_SUCCESS, cls_plain = MPI_SUCCESS;
    char pname[MPI_MAX_ERROR_STRING];

    rc_picoll = call(c, comm);
    if (mt_picoll.found) {
        mt_picoll.set_bypass(1);
        rc_plain = call(c, comm);
        mt_picoll.set_bypass(0);
    } else {
        rc_plain = rc_picoll;
    }
    if (rc_picoll != MPI_SUCCESS) {
        MPI_Error_class(rc_picoll, &cls_picoll);
    }
    if (rc_plain != MPI_SUCCESS) {
        MPI_Error_class(rc_plain, &cls_plain);
    }
    snprintf(pname, sizeof(pname), "%s", class_name(cls_picoll));
    if (c->must_fail) {
        MT_CHECK(rc_plain != MPI_SUCCESS, "%s on %s: the underlying MPI accepted it", c->what,
                 comm_name);
    }
    MT_CHECK(cls_picoll == cls_plain, "%s on %s: error class %d (%s) with picoll, %d (%s) without",
             c->what, comm_name, cls_picoll, pname, cls_plain, class_name(cls_plain));
    if (mt_rank == 0) {
        printf("  %-55s on %-8s class %d with picoll, %d plain\n", c->what, comm_name, cls_picoll,
               cls_plain);
    }
}

int main(int argc, char **argv)
{
    int expect_picoll = mt_flag(argc, argv, "--expect-picoll");
    MPI_Comm split;
    int ok[4] = {1, 2, 3, 4}, out[4];

    MPI_Init(&argc, &argv);
    mt_load_picoll(expect_picoll);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &split);
    MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN);
    /* contexts exist on both communicators, so that the calls below meet an initialised picoll */
    MPI_Allreduce(ok, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(ok, out, 4, MPI_INT, MPI_SUM, split);

    const bad_case_t cases[] = {
        /* what                                           coll  must sbr sip rip count scount type sendtype op null */
        {"MPI_Allreduce on MPI_COMM_NULL", ALLREDUCE, 1, 0, 0, 0, 4, 0, MPI_INT, MPI_INT, MPI_SUM,
         1},
        {"MPI_Allreduce count -1", ALLREDUCE, 1, 0, 0, 0, -1, 0, MPI_INT, MPI_INT, MPI_SUM, 0},
        {"MPI_Allreduce MPI_DATATYPE_NULL", ALLREDUCE, 1, 0, 0, 0, 4, 0, MPI_DATATYPE_NULL, MPI_INT,
         MPI_SUM, 0},
        {"MPI_Allreduce MPI_OP_NULL", ALLREDUCE, 1, 0, 0, 0, 4, 0, MPI_INT, MPI_INT, MPI_OP_NULL,
         0},
        {"MPI_Allreduce recvbuf MPI_IN_PLACE", ALLREDUCE, 0, 0, 0, 1, 4, 0, MPI_INT, MPI_INT,
         MPI_SUM, 0},
        {"MPI_Allreduce sendbuf == recvbuf (not MPI_IN_PLACE)", ALLREDUCE, 0, 1, 0, 0, 4, 0,
         MPI_INT, MPI_INT, MPI_SUM, 0},
        {"MPI_Allreduce MPI_MAX on MPI_C_DOUBLE_COMPLEX", ALLREDUCE, 0, 0, 0, 0, 4, 0,
         MPI_C_DOUBLE_COMPLEX, MPI_INT, MPI_MAX, 0},
        {"MPI_Allreduce MPI_BAND on MPI_FLOAT", ALLREDUCE, 0, 0, 0, 0, 4, 0, MPI_FLOAT, MPI_INT,
         MPI_BAND, 0},
        {"MPI_Allreduce MPI_SUM on MPI_C_BOOL", ALLREDUCE, 0, 0, 0, 0, 4, 0, MPI_C_BOOL, MPI_INT,
         MPI_SUM, 0},
        {"MPI_Allreduce MPI_LAND on MPI_AINT", ALLREDUCE, 0, 0, 0, 0, 4, 0, MPI_AINT, MPI_INT,
         MPI_LAND, 0},
        {"MPI_Allreduce MPI_SUM on MPI_BYTE", ALLREDUCE, 0, 0, 0, 0, 4, 0, MPI_BYTE, MPI_INT,
         MPI_SUM, 0},
        {"MPI_Allgather on MPI_COMM_NULL", ALLGATHER, 1, 0, 0, 0, 4, 4, MPI_INT, MPI_INT,
         MPI_OP_NULL, 1},
        {"MPI_Allgather recvcount -1", ALLGATHER, 1, 0, 0, 0, -1, 4, MPI_INT, MPI_INT, MPI_OP_NULL,
         0},
        {"MPI_Allgather sendcount -1", ALLGATHER, 1, 0, 0, 0, 4, -1, MPI_INT, MPI_INT, MPI_OP_NULL,
         0},
        {"MPI_Allgather recvtype MPI_DATATYPE_NULL", ALLGATHER, 1, 0, 0, 0, 4, 4, MPI_DATATYPE_NULL,
         MPI_INT, MPI_OP_NULL, 0},
        {"MPI_Allgather sendtype MPI_DATATYPE_NULL", ALLGATHER, 1, 0, 0, 0, 4, 4, MPI_INT,
         MPI_DATATYPE_NULL, MPI_OP_NULL, 0},
        {"MPI_Allgather recvbuf MPI_IN_PLACE", ALLGATHER, 0, 0, 0, 1, 4, 4, MPI_INT, MPI_INT,
         MPI_OP_NULL, 0},
        {"MPI_Alltoall on MPI_COMM_NULL", ALLTOALL, 1, 0, 0, 0, 4, 4, MPI_INT, MPI_INT, MPI_OP_NULL,
         1},
        {"MPI_Alltoall recvcount -1", ALLTOALL, 1, 0, 0, 0, -1, 4, MPI_INT, MPI_INT, MPI_OP_NULL,
         0},
        {"MPI_Alltoall sendcount -1", ALLTOALL, 1, 0, 0, 0, 4, -1, MPI_INT, MPI_INT, MPI_OP_NULL,
         0},
        {"MPI_Alltoall recvtype MPI_DATATYPE_NULL", ALLTOALL, 1, 0, 0, 0, 4, 4, MPI_DATATYPE_NULL,
         MPI_INT, MPI_OP_NULL, 0},
        {"MPI_Alltoall sendtype MPI_DATATYPE_NULL", ALLTOALL, 1, 0, 0, 0, 4, 4, MPI_INT,
         MPI_DATATYPE_NULL, MPI_OP_NULL, 0},
        {"MPI_Alltoall recvbuf MPI_IN_PLACE", ALLTOALL, 0, 0, 0, 1, 4, 4, MPI_INT, MPI_INT,
         MPI_OP_NULL, 0},
    };
    const int ncases = (int)(sizeof(cases) / sizeof(cases[0]));
    const char *only = mt_option(argc, argv, "--only", NULL); /* one case, for investigating */

    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    MPI_Get_library_version(version, &vlen);
    int ompi4 = strstr(version, "Open MPI v4.") != NULL;
    int mpich = mt_mpich_version();
    int mpich40 = mpich >= 40000 && mpich < 40100;

    for (int i = 0; i < ncases; i++) {
        if (only != NULL && strstr(cases[i].what, only) == NULL) {
            continue;
        }
        /* Open MPI 4.1.4's own MPI_Allgather dereferences MPI_COMM_NULL before checking it
         * (SIGSEGV without picoll too) */
        if (ompi4 && cases[i].coll == ALLGATHER && cases[i].comm_null) {
            if (mt_rank == 0) {
                printf("  %-55s skipped: crashes Open MPI 4 itself\n", cases[i].what);
            }
            continue;
        }
        /* MPICH 4.0.2's own MPI_Allreduce asserts on a negative count (abort without picoll too) */
        if (mpich40 && cases[i].coll == ALLREDUCE && cases[i].count < 0) {
            if (mt_rank == 0) {
                printf("  %-55s skipped: aborts MPICH 4.0 itself\n", cases[i].what);
            }
            continue;
        }
        /* MPICH 5.0 from pip takes a negative count in MPI_Allreduce, or trips an assertion in
         * it, and asserts on MPI_DATATYPE_NULL (an abort without picoll too) */
        if (mpich >= 50000 &&
            ((cases[i].coll == ALLREDUCE && cases[i].count < 0) ||
             cases[i].type == MPI_DATATYPE_NULL || cases[i].sendtype == MPI_DATATYPE_NULL)) {
            if (mt_rank == 0) {
                printf("  %-55s skipped: aborts MPICH 5 itself\n", cases[i].what);
            }
            continue;
        }
        run_case(&cases[i], MPI_COMM_WORLD, "world");
        if (!cases[i].comm_null) {
            run_case(&cases[i], split, "split");
            run_case(&cases[i], MPI_COMM_SELF, "self");
        }
    }
    /* after all of that, a valid call still works and picoll is still on */
    MT_CHECK(MPI_Allreduce(ok, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS &&
                 out[3] == 4 * mt_size,
             "a valid MPI_Allreduce after the erroneous ones gave %d, expected %d", out[3],
             4 * mt_size);
    if (mt_picoll.found) {
        MT_CHECK(mt_picoll.active() == 1, "picoll_active() = %d after the bypassed calls",
                 mt_picoll.active());
    }
    MPI_Comm_free(&split);
    return mt_finish("bad_args");
}
