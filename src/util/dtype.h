/* Element types and reduction operations picoll handles, independent of MPI handles. */
#ifndef PICOLL_DTYPE_H
#define PICOLL_DTYPE_H

#include <stddef.h>

/* X(enum, name, C type): one list for the enum, the names and the sizes. The half-precision types
 * are held as their uint16_t bit patterns (no compiler _Float16 or __bf16 needed) and reduced
 * through float (src/reduce/half.h). */
#define PICOLL_DTYPE_LIST(X)                                                                       \
    X(PICOLL_DT_INT8, "int8", int8_t)                                                              \
    X(PICOLL_DT_UINT8, "uint8", uint8_t)                                                           \
    X(PICOLL_DT_INT16, "int16", int16_t)                                                           \
    X(PICOLL_DT_UINT16, "uint16", uint16_t)                                                        \
    X(PICOLL_DT_INT32, "int32", int32_t)                                                           \
    X(PICOLL_DT_UINT32, "uint32", uint32_t)                                                        \
    X(PICOLL_DT_INT64, "int64", int64_t)                                                           \
    X(PICOLL_DT_UINT64, "uint64", uint64_t)                                                        \
    X(PICOLL_DT_FLOAT, "float", float)                                                             \
    X(PICOLL_DT_DOUBLE, "double", double)                                                          \
    X(PICOLL_DT_LONG_DOUBLE, "long double", long double)                                           \
    X(PICOLL_DT_FLOAT16, "float16", uint16_t)   /* IEEE binary16, as its bits */                   \
    X(PICOLL_DT_BFLOAT16, "bfloat16", uint16_t) /* bfloat16, as its bits */                        \
    X(PICOLL_DT_BOOL, "bool", _Bool)                                                               \
    X(PICOLL_DT_FLOAT_COMPLEX, "float complex", float _Complex)                                    \
    X(PICOLL_DT_DOUBLE_COMPLEX, "double complex", double _Complex)                                 \
    X(PICOLL_DT_LONG_DOUBLE_COMPLEX, "long double complex", long double _Complex)                  \
    X(PICOLL_DT_BYTE, "byte", unsigned char)

typedef enum {
#define PICOLL_DTYPE_ENUM(e, name, ctype) e,
    PICOLL_DTYPE_LIST(PICOLL_DTYPE_ENUM)
#undef PICOLL_DTYPE_ENUM
        PICOLL_DT_COUNT,
    PICOLL_DT_NONE = PICOLL_DT_COUNT /* not handled: the call goes to PMPI */
} picoll_dtype_t;

typedef enum {
    PICOLL_OP_SUM,
    PICOLL_OP_PROD,
    PICOLL_OP_MAX,
    PICOLL_OP_MIN,
    PICOLL_OP_LAND,
    PICOLL_OP_LOR,
    PICOLL_OP_LXOR,
    PICOLL_OP_BAND,
    PICOLL_OP_BOR,
    PICOLL_OP_BXOR,
    PICOLL_OP_COUNT,
    PICOLL_OP_NONE = PICOLL_OP_COUNT
} picoll_op_t;

size_t picoll_dtype_size(picoll_dtype_t dt);
const char *picoll_dtype_name(picoll_dtype_t dt);
const char *picoll_op_name(picoll_op_t op);
/* Whether MPI defines op on dt (MPI 3.1 section 5.9.2), e.g. no MAX on complex, no BAND on float. */
int picoll_op_valid(picoll_dtype_t dt, picoll_op_t op);

#endif
