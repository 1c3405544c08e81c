#include "pmpi/classify.h"

#include <limits.h>
#include <wchar.h>

/* Most frequent first: the search is linear and runs on every intercepted call. MPI_AINT,
 * MPI_OFFSET and MPI_COUNT are 64-bit signed on every LP64 platform picoll builds for. */
#define DTYPE_ENTRY(mpi, dt)                                                                       \
    {                                                                                              \
        (mpi), (dt)                                                                                \
    }

/* Fortran's types, as the MPI built them: picoll_classify_check_fortran checks at MPI_Init that
 * each has the size of its C counterpart (gfortran's default kinds) before any is used. */
static int fortran_ok;
static const struct {
    MPI_Datatype mpi;
    picoll_dtype_t dt;
} fortran_table[] = {
    DTYPE_ENTRY(MPI_INTEGER, PICOLL_DT_INT32),
    DTYPE_ENTRY(MPI_REAL, PICOLL_DT_FLOAT),
    DTYPE_ENTRY(MPI_DOUBLE_PRECISION, PICOLL_DT_DOUBLE),
    DTYPE_ENTRY(MPI_INTEGER4, PICOLL_DT_INT32),
    DTYPE_ENTRY(MPI_INTEGER8, PICOLL_DT_INT64),
    DTYPE_ENTRY(MPI_REAL4, PICOLL_DT_FLOAT),
    DTYPE_ENTRY(MPI_REAL8, PICOLL_DT_DOUBLE),
    DTYPE_ENTRY(MPI_COMPLEX, PICOLL_DT_FLOAT_COMPLEX),
    DTYPE_ENTRY(MPI_DOUBLE_COMPLEX, PICOLL_DT_DOUBLE_COMPLEX),
};

static picoll_dtype_t classify_fortran(MPI_Datatype type)
{
    for (unsigned i = 0; i < sizeof(fortran_table) / sizeof(fortran_table[0]); i++) {
        if (fortran_table[i].mpi == type) {
            return fortran_table[i].dt;
        }
    }
    return PICOLL_DT_NONE;
}

void picoll_classify_check_fortran(void)
{
    int ok = 1;
    for (unsigned i = 0; i < sizeof(fortran_table) / sizeof(fortran_table[0]); i++) {
        int size = 0;
        /* an MPI built without Fortran may have them as MPI_DATATYPE_NULL, or not committed */
        ok &= fortran_table[i].mpi != MPI_DATATYPE_NULL &&
              PMPI_Type_size(fortran_table[i].mpi, &size) == MPI_SUCCESS &&
              (size_t)size == picoll_dtype_size(fortran_table[i].dt);
    }
    fortran_ok = ok;
}

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
    return fortran_ok ? classify_fortran(type) : PICOLL_DT_NONE;
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

/* Ops (one bit per picoll_op_t) with which the underlying MPI reduces MPI_CHAR and MPI_WCHAR:
 * the standard lists neither among the types of the reduction ops, the MPIs decide (Open MPI 4.1
 * and MPICH 4.0 reduce MPI_CHAR with every op, as the platform's char; neither takes MPI_WCHAR).
 * Found once, at MPI_Init; before that (and for an MPI that rejects them), picoll leaves the call
 * to the MPI, whose own error the application then gets. */
static unsigned char_ops, wchar_ops;

void picoll_classify_probe_chars(void)
{
    const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX,  MPI_MIN, MPI_LAND,
                          MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
    MPI_Errhandler old;
    char c = 1, cr;
    wchar_t w = 1, wr;

    /* a one-element reduction on MPI_COMM_SELF per op, with errors returned instead of fatal */
    if (PMPI_Comm_get_errhandler(MPI_COMM_SELF, &old) != MPI_SUCCESS) {
        return;
    }
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        picoll_op_t op = picoll_classify_op(ops[i]);
        if (PMPI_Allreduce(&c, &cr, 1, MPI_CHAR, ops[i], MPI_COMM_SELF) == MPI_SUCCESS) {
            char_ops |= 1u << op;
        }
        if (PMPI_Allreduce(&w, &wr, 1, MPI_WCHAR, ops[i], MPI_COMM_SELF) == MPI_SUCCESS) {
            wchar_ops |= 1u << op;
        }
    }
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, old);
    PMPI_Errhandler_free(&old);
}

picoll_dtype_t picoll_classify_char(MPI_Datatype type, picoll_op_t op)
{
    if (op == PICOLL_OP_NONE) {
        return PICOLL_DT_NONE;
    }
    if (type == MPI_CHAR && (char_ops >> op & 1u)) {
        _Static_assert(CHAR_BIT == 8, "picoll assumes 8-bit char");
        return CHAR_MIN < 0 ? PICOLL_DT_INT8 : PICOLL_DT_UINT8;
    }
    if (type == MPI_WCHAR && (wchar_ops >> op & 1u)) {
        _Static_assert(sizeof(wchar_t) == 4, "picoll assumes a 4-byte wchar_t");
        return WCHAR_MIN < 0 ? PICOLL_DT_INT32 : PICOLL_DT_UINT32;
    }
    return PICOLL_DT_NONE;
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
