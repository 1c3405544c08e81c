/* Unit test of the mapping from MPI handles to picoll's element types and ops (pmpi/classify.c).
 * Only compares predefined handles: no MPI call is made. The expected mapping is written out by
 * hand from the C types the MPI standard gives for each handle. */
#include "build-config.h" /* _GNU_SOURCE, as in src/ */
#include <mpi.h>
#include "pmpi/classify.h"
#include "check.h"

#include <stdint.h>

int main(void)
{
    static const struct {
        MPI_Datatype mpi;
        const char *name;
        picoll_dtype_t dt;
        size_t csize; /* sizeof the C type MPI says the handle describes */
    } types[] = {
        {MPI_INT8_T, "MPI_INT8_T", PICOLL_DT_INT8, sizeof(int8_t)},
        {MPI_UINT8_T, "MPI_UINT8_T", PICOLL_DT_UINT8, sizeof(uint8_t)},
        {MPI_INT16_T, "MPI_INT16_T", PICOLL_DT_INT16, sizeof(int16_t)},
        {MPI_UINT16_T, "MPI_UINT16_T", PICOLL_DT_UINT16, sizeof(uint16_t)},
        {MPI_INT32_T, "MPI_INT32_T", PICOLL_DT_INT32, sizeof(int32_t)},
        {MPI_UINT32_T, "MPI_UINT32_T", PICOLL_DT_UINT32, sizeof(uint32_t)},
        {MPI_INT64_T, "MPI_INT64_T", PICOLL_DT_INT64, sizeof(int64_t)},
        {MPI_UINT64_T, "MPI_UINT64_T", PICOLL_DT_UINT64, sizeof(uint64_t)},
        {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", PICOLL_DT_INT8, sizeof(signed char)},
        {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", PICOLL_DT_UINT8, sizeof(unsigned char)},
        {MPI_SHORT, "MPI_SHORT", PICOLL_DT_INT16, sizeof(short)},
        {MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", PICOLL_DT_UINT16, sizeof(unsigned short)},
        {MPI_INT, "MPI_INT", PICOLL_DT_INT32, sizeof(int)},
        {MPI_UNSIGNED, "MPI_UNSIGNED", PICOLL_DT_UINT32, sizeof(unsigned)},
        {MPI_LONG, "MPI_LONG", PICOLL_DT_INT64, sizeof(long)},
        {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", PICOLL_DT_UINT64, sizeof(unsigned long)},
        {MPI_LONG_LONG, "MPI_LONG_LONG", PICOLL_DT_INT64, sizeof(long long)},
        {MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", PICOLL_DT_UINT64,
         sizeof(unsigned long long)},
        {MPI_AINT, "MPI_AINT", PICOLL_DT_INT64, sizeof(MPI_Aint)},
        {MPI_OFFSET, "MPI_OFFSET", PICOLL_DT_INT64, sizeof(MPI_Offset)},
        {MPI_COUNT, "MPI_COUNT", PICOLL_DT_INT64, sizeof(MPI_Count)},
        {MPI_C_BOOL, "MPI_C_BOOL", PICOLL_DT_BOOL, sizeof(_Bool)},
        {MPI_FLOAT, "MPI_FLOAT", PICOLL_DT_FLOAT, sizeof(float)},
        {MPI_DOUBLE, "MPI_DOUBLE", PICOLL_DT_DOUBLE, sizeof(double)},
        {MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", PICOLL_DT_LONG_DOUBLE, sizeof(long double)},
        {MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX", PICOLL_DT_FLOAT_COMPLEX,
         sizeof(float _Complex)},
        {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", PICOLL_DT_DOUBLE_COMPLEX,
         sizeof(double _Complex)},
        {MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX", PICOLL_DT_LONG_DOUBLE_COMPLEX,
         sizeof(long double _Complex)},
        {MPI_BYTE, "MPI_BYTE", PICOLL_DT_BYTE, 1},
#ifdef MPIX_C_FLOAT16 /* MPICH: IEEE binary16 */
        {MPIX_C_FLOAT16, "MPIX_C_FLOAT16", PICOLL_DT_FLOAT16, 2},
#endif
#ifdef MPIX_BFLOAT16
        {MPIX_BFLOAT16, "MPIX_BFLOAT16", PICOLL_DT_BFLOAT16, 2},
#endif
        /* not run by picoll: no reduction defined, pair types, or no fixed C type */
        {MPI_CHAR, "MPI_CHAR", PICOLL_DT_NONE, 0},
        {MPI_WCHAR, "MPI_WCHAR", PICOLL_DT_NONE, 0},
        {MPI_PACKED, "MPI_PACKED", PICOLL_DT_NONE, 0},
        {MPI_2INT, "MPI_2INT", PICOLL_DT_NONE, 0},
        {MPI_DOUBLE_INT, "MPI_DOUBLE_INT", PICOLL_DT_NONE, 0},
        {MPI_FLOAT_INT, "MPI_FLOAT_INT", PICOLL_DT_NONE, 0},
        {MPI_LONG_INT, "MPI_LONG_INT", PICOLL_DT_NONE, 0},
        {MPI_SHORT_INT, "MPI_SHORT_INT", PICOLL_DT_NONE, 0},
        {MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT", PICOLL_DT_NONE, 0},
        {MPI_DATATYPE_NULL, "MPI_DATATYPE_NULL", PICOLL_DT_NONE, 0},
    };
    static const struct {
        MPI_Op mpi;
        const char *name;
        picoll_op_t op;
    } ops[] = {
        {MPI_SUM, "MPI_SUM", PICOLL_OP_SUM},          {MPI_PROD, "MPI_PROD", PICOLL_OP_PROD},
        {MPI_MAX, "MPI_MAX", PICOLL_OP_MAX},          {MPI_MIN, "MPI_MIN", PICOLL_OP_MIN},
        {MPI_LAND, "MPI_LAND", PICOLL_OP_LAND},       {MPI_LOR, "MPI_LOR", PICOLL_OP_LOR},
        {MPI_LXOR, "MPI_LXOR", PICOLL_OP_LXOR},       {MPI_BAND, "MPI_BAND", PICOLL_OP_BAND},
        {MPI_BOR, "MPI_BOR", PICOLL_OP_BOR},          {MPI_BXOR, "MPI_BXOR", PICOLL_OP_BXOR},
        {MPI_MAXLOC, "MPI_MAXLOC", PICOLL_OP_NONE},   {MPI_MINLOC, "MPI_MINLOC", PICOLL_OP_NONE},
        {MPI_REPLACE, "MPI_REPLACE", PICOLL_OP_NONE}, {MPI_NO_OP, "MPI_NO_OP", PICOLL_OP_NONE},
        {MPI_OP_NULL, "MPI_OP_NULL", PICOLL_OP_NONE},
    };

    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        picoll_dtype_t got = picoll_classify_dtype(types[i].mpi);
        CHECK(got == types[i].dt, "%s classified as %s, expected %s", types[i].name,
              picoll_dtype_name(got), picoll_dtype_name(types[i].dt));
        if (types[i].dt != PICOLL_DT_NONE) {
            CHECK(picoll_dtype_size(got) == types[i].csize,
                  "%s: picoll's element is %zu bytes, the "
                  "C type %zu",
                  types[i].name, picoll_dtype_size(got), types[i].csize);
            CHECK(picoll_classify_copy_size(types[i].mpi) == types[i].csize,
                  "%s: copied as %zu-byte "
                  "elements, the C type is %zu",
                  types[i].name, picoll_classify_copy_size(types[i].mpi), types[i].csize);
        }
    }
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        picoll_op_t got = picoll_classify_op(ops[i].mpi);
        CHECK(got == ops[i].op, "%s classified as %s, expected %s", ops[i].name,
              picoll_op_name(got), picoll_op_name(ops[i].op));
    }
    return check_summary("test_classify");
}
