/* every_call's packing cases: MPI_Pack and MPI_Pack_external pack the elements twice, the second
 * time at the position the first left (recorded); MPI_Unpack and MPI_Unpack_external unpack
 * bytes into elements, the gaps of the vector type untouched. */
#include "every.h"

#include "mpitest.h"

static const char rep[] = "external32";

static MPI_Aint packed_size(env_t *e, int external)
{
    int size = 0;
    MPI_Aint asize = 0;
    if (external) {
        MPI_Pack_external_size(rep, e->n, e->type, &asize);
        return asize;
    }
    MPI_Pack_size(e->n, e->type, e->comm, &size);
    return size;
}

static void plan_pack(env_t *e)
{
    ev_plan(e, 0, e->n, EV_IN);
    ev_plan_bytes(e, 1, 2 * (size_t)packed_size(e, 0), EV_OUT);
}

static void plan_pack_external(env_t *e)
{
    ev_plan(e, 0, e->n, EV_IN);
    ev_plan_bytes(e, 1, 2 * (size_t)packed_size(e, 1), EV_OUT);
}

static void plan_unpack(env_t *e)
{
    ev_plan_bytes(e, 0, (size_t)packed_size(e, 0), EV_IN);
    ev_plan(e, 1, e->n, EV_OUT);
}

static void plan_unpack_external(env_t *e)
{
    ev_plan_bytes(e, 0, (size_t)packed_size(e, 1), EV_IN);
    ev_plan(e, 1, e->n, EV_OUT);
}

static void run_pack(env_t *e)
{
    int size = (int)e->bytes[1], pos = 0;
    for (int k = 0; k < 2; k++) {
#if MPI_VERSION >= 4
        if (e->c->form == EV_LARGE) {
            MPI_Count cpos = pos;
            EV_RC(e, MPI_Pack_c(e->buf[0], e->n, e->type, e->buf[1], size, &cpos, e->comm));
            pos = (int)cpos;
            ev_log(e, &pos, sizeof(pos));
            continue;
        }
#endif
        EV_RC(e, MPI_Pack(e->buf[0], e->n, e->type, e->buf[1], size, &pos, e->comm));
        ev_log(e, &pos, sizeof(pos));
    }
}

static void run_unpack(env_t *e)
{
    int size = (int)e->bytes[0], pos = 0;
#if MPI_VERSION >= 4
    if (e->c->form == EV_LARGE) {
        MPI_Count cpos = 0;
        EV_RC(e, MPI_Unpack_c(e->buf[0], size, &cpos, e->buf[1], e->n, e->type, e->comm));
        pos = (int)cpos;
    } else
#endif
    {
        EV_RC(e, MPI_Unpack(e->buf[0], size, &pos, e->buf[1], e->n, e->type, e->comm));
    }
    ev_log(e, &pos, sizeof(pos));
}

static void run_pack_external(env_t *e)
{
    MPI_Aint size = (MPI_Aint)e->bytes[1], pos = 0;
    for (int k = 0; k < 2; k++) {
#if MPI_VERSION >= 4
        if (e->c->form == EV_LARGE) {
            MPI_Count cpos = pos;
            EV_RC(e, MPI_Pack_external_c(rep, e->buf[0], e->n, e->type, e->buf[1], size, &cpos));
            pos = (MPI_Aint)cpos;
            ev_log(e, &pos, sizeof(pos));
            continue;
        }
#endif
        EV_RC(e, MPI_Pack_external(rep, e->buf[0], e->n, e->type, e->buf[1], size, &pos));
        ev_log(e, &pos, sizeof(pos));
    }
}

static void run_unpack_external(env_t *e)
{
    MPI_Aint size = (MPI_Aint)e->bytes[0], pos = 0;
#if MPI_VERSION >= 4
    if (e->c->form == EV_LARGE) {
        MPI_Count cpos = 0;
        EV_RC(e, MPI_Unpack_external_c(rep, e->buf[0], size, &cpos, e->buf[1], e->n, e->type));
        pos = (MPI_Aint)cpos;
    } else
#endif
    {
        EV_RC(e, MPI_Unpack_external(rep, e->buf[0], size, &pos, e->buf[1], e->n, e->type));
    }
    ev_log(e, &pos, sizeof(pos));
}

const ev_case_t ev_pack_cases[] = {
    {"MPI_Pack", run_pack, plan_pack, EV_BLOCKING, 0, NULL},
    {"MPI_Unpack", run_unpack, plan_unpack, EV_BLOCKING, 0, NULL},
    {"MPI_Pack_external", run_pack_external, plan_pack_external, EV_BLOCKING, 0, NULL},
    {"MPI_Unpack_external", run_unpack_external, plan_unpack_external, EV_BLOCKING, 0, NULL},
#if MPI_VERSION >= 4
    {"MPI_Pack_c", run_pack, plan_pack, EV_LARGE, 0, NULL},
    {"MPI_Unpack_c", run_unpack, plan_unpack, EV_LARGE, 0, NULL},
    {"MPI_Pack_external_c", run_pack_external, plan_pack_external, EV_LARGE, 0, NULL},
    {"MPI_Unpack_external_c", run_unpack_external, plan_unpack_external, EV_LARGE, 0, NULL},
#endif
};
const int ev_pack_ncases = (int)(sizeof(ev_pack_cases) / sizeof(ev_pack_cases[0]));
