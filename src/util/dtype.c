#include "util/dtype.h"

#include <stdint.h>

static const size_t dtype_sizes[] = {
#define PICOLL_DTYPE_SIZE(e, name, ctype) [e] = sizeof(ctype),
    PICOLL_DTYPE_LIST(PICOLL_DTYPE_SIZE)
#undef PICOLL_DTYPE_SIZE
};

static const char *const dtype_names[] = {
#define PICOLL_DTYPE_NAME(e, name, ctype) [e] = name,
    PICOLL_DTYPE_LIST(PICOLL_DTYPE_NAME)
#undef PICOLL_DTYPE_NAME
};

static const char *const op_names[] = {
    [PICOLL_OP_SUM] = "sum",   [PICOLL_OP_PROD] = "prod", [PICOLL_OP_MAX] = "max",
    [PICOLL_OP_MIN] = "min",   [PICOLL_OP_LAND] = "land", [PICOLL_OP_LOR] = "lor",
    [PICOLL_OP_LXOR] = "lxor", [PICOLL_OP_BAND] = "band", [PICOLL_OP_BOR] = "bor",
    [PICOLL_OP_BXOR] = "bxor",
};

size_t picoll_dtype_size(picoll_dtype_t dt)
{
    return dt < PICOLL_DT_COUNT ? dtype_sizes[dt] : 0;
}

const char *picoll_dtype_name(picoll_dtype_t dt)
{
    return dt < PICOLL_DT_COUNT ? dtype_names[dt] : "none";
}

const char *picoll_op_name(picoll_op_t op)
{
    return op < PICOLL_OP_COUNT ? op_names[op] : "none";
}

int picoll_op_valid(picoll_dtype_t dt, picoll_op_t op)
{
    int integer = dt <= PICOLL_DT_UINT64;
    int floating = dt == PICOLL_DT_FLOAT || dt == PICOLL_DT_DOUBLE || dt == PICOLL_DT_LONG_DOUBLE ||
                   dt == PICOLL_DT_FLOAT16 || dt == PICOLL_DT_BFLOAT16;
    int complex = dt == PICOLL_DT_FLOAT_COMPLEX || dt == PICOLL_DT_DOUBLE_COMPLEX ||
                  dt == PICOLL_DT_LONG_DOUBLE_COMPLEX;

    switch (op) {
    case PICOLL_OP_MAX:
    case PICOLL_OP_MIN: return integer || floating;
    case PICOLL_OP_SUM:
    case PICOLL_OP_PROD: return integer || floating || complex;
    case PICOLL_OP_LAND:
    case PICOLL_OP_LOR:
    case PICOLL_OP_LXOR: return integer || dt == PICOLL_DT_BOOL;
    case PICOLL_OP_BAND:
    case PICOLL_OP_BOR:
    case PICOLL_OP_BXOR: return integer || dt == PICOLL_DT_BYTE;
    default: return 0;
    }
}
