#include "classify.h"

#include <wchar.h>

/* Most frequent first: the search is linear and runs on every intercepted call. MPI_AINT,
 * MPI_OFFSET and MPI_COUNT are 64-bit signed on every LP64 platform picoll builds for. */
#define DTYPE_ENTRY(mpi, dt) {(mpi), (dt)}

picoll_dtype_t picoll_classify_dtype(MPI_Datatype type)
{
    static const struct {
        MPI_Datatype mpi;
        picoll_dtype_t dt;
    } table[] = {
        DTYPE_ENTRY(MPI_FLOAT, PICOLL_DT_FLOAT),
        DTYPE_ENTRY(MPI_DOUBLE, PICOLL_DT_DOUBLE),
        DTYPE_ENTRY(MPI_INT, PICOLL_DT_INT32),
        DTYPE_ENTRY(MPI_LONG, PICOLL_DT_INT64),
        DTYPE_ENTRY(MPI_BYTE, PICOLL_DT_BYTE),
        DTYPE_ENTRY(MPI_UNSIGNED, PICOLL_DT_UINT32),
        DTYPE_ENTRY(MPI_UNSIGNED_LONG, PICOLL_DT_UINT64),
        DTYPE_ENTRY(MPI_LONG_LONG, PICOLL_DT_INT64),
        DTYPE_ENTRY(MPI_UNSIGNED_LONG_LONG, PICOLL_DT_UINT64),
        DTYPE_ENTRY(MPI_INT8_T, PICOLL_DT_INT8),
        DTYPE_ENTRY(MPI_UINT8_T, PICOLL_DT_UINT8),
        DTYPE_ENTRY(MPI_INT16_T, PICOLL_DT_INT16),
        DTYPE_ENTRY(MPI_UINT16_T, PICOLL_DT_UINT16),
        DTYPE_ENTRY(MPI_INT32_T, PICOLL_DT_INT32),
        DTYPE_ENTRY(MPI_UINT32_T, PICOLL_DT_UINT32),
        DTYPE_ENTRY(MPI_INT64_T, PICOLL_DT_INT64),
        DTYPE_ENTRY(MPI_UINT64_T, PICOLL_DT_UINT64),
        DTYPE_ENTRY(MPI_SIGNED_CHAR, PICOLL_DT_INT8),
        DTYPE_ENTRY(MPI_UNSIGNED_CHAR, PICOLL_DT_UINT8),
        DTYPE_ENTRY(MPI_SHORT, PICOLL_DT_INT16),
        DTYPE_ENTRY(MPI_UNSIGNED_SHORT, PICOLL_DT_UINT16),
        DTYPE_ENTRY(MPI_C_BOOL, PICOLL_DT_BOOL),
        DTYPE_ENTRY(MPI_LONG_DOUBLE, PICOLL_DT_LONG_DOUBLE),
        DTYPE_ENTRY(MPI_C_FLOAT_COMPLEX, PICOLL_DT_FLOAT_COMPLEX),
        DTYPE_ENTRY(MPI_C_COMPLEX, PICOLL_DT_FLOAT_COMPLEX), /* a separate handle in Open MPI */
        DTYPE_ENTRY(MPI_C_DOUBLE_COMPLEX, PICOLL_DT_DOUBLE_COMPLEX),
        DTYPE_ENTRY(MPI_C_LONG_DOUBLE_COMPLEX, PICOLL_DT_LONG_DOUBLE_COMPLEX),
        DTYPE_ENTRY(MPI_AINT, PICOLL_DT_INT64),
        DTYPE_ENTRY(MPI_OFFSET, PICOLL_DT_INT64),
        DTYPE_ENTRY(MPI_COUNT, PICOLL_DT_INT64),
#ifdef MPIX_C_FLOAT16 /* MPICH (not Open MPI 4.1) */
        DTYPE_ENTRY(MPIX_C_FLOAT16, PICOLL_DT_FLOAT16),
#endif
#ifdef MPIX_BFLOAT16 /* newer MPICH */
        DTYPE_ENTRY(MPIX_BFLOAT16, PICOLL_DT_BFLOAT16),
#endif
    };
    _Static_assert(sizeof(long) == 8 && sizeof(MPI_Aint) == 8 && sizeof(MPI_Offset) == 8 &&
                       sizeof(MPI_Count) == 8,
                   "picoll assumes LP64 and 64-bit MPI_Aint, MPI_Offset and MPI_Count");

    for (unsigned i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (table[i].mpi == type) {
            return table[i].dt;
        }
    }
    return PICOLL_DT_NONE;
}

picoll_op_t picoll_classify_op(MPI_Op op)
{
    static const struct {
        MPI_Op mpi;
        picoll_op_t op;
    } table[] = {
        {MPI_SUM, PICOLL_OP_SUM},   {MPI_MAX, PICOLL_OP_MAX},   {MPI_MIN, PICOLL_OP_MIN},
        {MPI_PROD, PICOLL_OP_PROD}, {MPI_BAND, PICOLL_OP_BAND}, {MPI_BOR, PICOLL_OP_BOR},
        {MPI_BXOR, PICOLL_OP_BXOR}, {MPI_LAND, PICOLL_OP_LAND}, {MPI_LOR, PICOLL_OP_LOR},
        {MPI_LXOR, PICOLL_OP_LXOR},
    };
    for (unsigned i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (table[i].mpi == op) {
            return table[i].op;
        }
    }
    return PICOLL_OP_NONE;
}

size_t picoll_classify_copy_size(MPI_Datatype type)
{
    picoll_dtype_t dt = picoll_classify_dtype(type);
    if (dt != PICOLL_DT_NONE) {
        return picoll_dtype_size(dt);
    }
    if (type == MPI_CHAR) {
        return sizeof(char);
    }
    if (type == MPI_WCHAR) {
        return sizeof(wchar_t);
    }
    return 0;
}
