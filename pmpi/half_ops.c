#include "pmpi/half_ops.h"

#include "build-config.h"
#include "pmpi/classify.h"
#include "core/core.h"
#include "reduce/reduce.h"

#if defined(MPIX_C_FLOAT16) || defined(MPIX_BFLOAT16)

/* [type][op]: the user ops, MPI_OP_NULL until created. Row 0 float16, row 1 bfloat16; columns the
 * four ops MPI defines on floating types, in picoll_op_t order (SUM, PROD, MAX, MIN). */
#define HALF_OPS 4
static MPI_Op half_ops[2][HALF_OPS];
static int half_ops_ready;

/* MPI's contract: inout[i] = in[i] op inout[i]. The ops are commutative (float sums and products
 * are, NaN results being canonical; MAX/MIN differ only between NaNs or signed zeros, as MPI's own
 * floating MAX/MIN may). */
static void half_apply(picoll_dtype_t dt, picoll_op_t op, void *in, void *inout, const int *len)
{
    if (*len > 0) {
        picoll_reduce_acc(dt, op, inout, in, (size_t)*len);
    }
}

/* One function per (type, op): a user function is told only the datatype, MPI_UINT16_T for all. */
#define HALF_USER_FN(name, dt, op)                                                                 \
    static void name(void *in, void *io, int *len, MPI_Datatype *type)                             \
    {                                                                                              \
        (void)type;                                                                                \
        half_apply(dt, op, in, io, len);                                                           \
    }
HALF_USER_FN(f16_sum, PICOLL_DT_FLOAT16, PICOLL_OP_SUM)
HALF_USER_FN(f16_prod, PICOLL_DT_FLOAT16, PICOLL_OP_PROD)
HALF_USER_FN(f16_max, PICOLL_DT_FLOAT16, PICOLL_OP_MAX)
HALF_USER_FN(f16_min, PICOLL_DT_FLOAT16, PICOLL_OP_MIN)
HALF_USER_FN(bf16_sum, PICOLL_DT_BFLOAT16, PICOLL_OP_SUM)
HALF_USER_FN(bf16_prod, PICOLL_DT_BFLOAT16, PICOLL_OP_PROD)
HALF_USER_FN(bf16_max, PICOLL_DT_BFLOAT16, PICOLL_OP_MAX)
HALF_USER_FN(bf16_min, PICOLL_DT_BFLOAT16, PICOLL_OP_MIN)
#undef HALF_USER_FN

void picoll_half_ops_init(void)
{
    static MPI_User_function *const fns[2][HALF_OPS] = {
        {f16_sum, f16_prod, f16_max, f16_min},
        {bf16_sum, bf16_prod, bf16_max, bf16_min},
    };
    _Static_assert(PICOLL_OP_SUM == 0 && PICOLL_OP_PROD == 1 && PICOLL_OP_MAX == 2 &&
                       PICOLL_OP_MIN == 3,
                   "half_ops columns follow picoll_op_t");
    if (!picoll_g.initialized || half_ops_ready) {
        return;
    }
    for (int t = 0; t < 2; t++) {
        for (int o = 0; o < HALF_OPS; o++) {
            if (PMPI_Op_create(fns[t][o], 1, &half_ops[t][o]) != MPI_SUCCESS) {
                half_ops[t][o] = MPI_OP_NULL; /* that pair goes to the MPI unchanged */
            }
        }
    }
    half_ops_ready = 1;
}

void picoll_half_ops_free(void)
{
    if (!half_ops_ready) {
        return;
    }
    half_ops_ready = 0;
    for (int t = 0; t < 2; t++) {
        for (int o = 0; o < HALF_OPS; o++) {
            if (half_ops[t][o] != MPI_OP_NULL) {
                PMPI_Op_free(&half_ops[t][o]);
            }
        }
    }
}

void picoll_half_ops_translate(MPI_Datatype *type, MPI_Op *op)
{
    /* a user op runs on the CPU: not where device buffers can reach the MPI unstaged */
    if (!half_ops_ready || !picoll_g.active || picoll_reentry ||
        (picoll_cuda.driver && !picoll_g.staging)) {
        return;
    }
    picoll_dtype_t dt = picoll_classify_dtype(*type);
    if (dt != PICOLL_DT_FLOAT16 && dt != PICOLL_DT_BFLOAT16) {
        return;
    }
    picoll_op_t pop = picoll_classify_op(*op);
    if (pop >= HALF_OPS) {
        return; /* not an op MPI defines on floating types: the MPI reports it */
    }
    MPI_Op mine = half_ops[dt == PICOLL_DT_BFLOAT16][pop];
    if (mine != MPI_OP_NULL) {
        *type = MPI_UINT16_T;
        *op = mine;
    }
}

#else /* neither type in this MPI */

void picoll_half_ops_init(void)
{
}

void picoll_half_ops_free(void)
{
}

void picoll_half_ops_translate(MPI_Datatype *type, MPI_Op *op)
{
    (void)type;
    (void)op;
}

#endif
