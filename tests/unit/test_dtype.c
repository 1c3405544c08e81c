/* Unit test of picoll's element types and reduction operations (src/dtype.c). The validity table
 * below is written out by hand from the MPI standard (MPI 3.1 section 5.9.2, "Predefined
 * Reduction Operations"), not derived from the code under test:
 *   MAX, MIN                 C integer, floating point
 *   SUM, PROD                C integer, floating point, complex
 * (float16 and bfloat16, MPIX_C_FLOAT16 and MPIX_BFLOAT16 in MPICH, count as floating point)
 *   LAND, LOR, LXOR          C integer, logical (MPI_C_BOOL)
 *   BAND, BOR, BXOR          C integer, byte */
#include "build-config.h" /* _GNU_SOURCE, as in src/ */
#include "util/dtype.h"
#include "check.h"

#include <stdint.h>
#include <string.h>

#define ROW(sum, prod, max, min, land, lor, lxor, band, bor, bxor)                                 \
    {                                                                                              \
        1,                                                                                         \
        {                                                                                          \
            sum, prod, max, min, land, lor, lxor, band, bor, bxor                                  \
        }                                                                                          \
    }

static const struct {
    int present;
    int valid[PICOLL_OP_COUNT];
} expected[PICOLL_DT_COUNT] = {
    /*                                     SUM PROD MAX MIN LAND LOR LXOR BAND BOR BXOR */
    [PICOLL_DT_INT8] = ROW(1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    [PICOLL_DT_UINT8] = ROW(1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    [PICOLL_DT_INT16] = ROW(1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    [PICOLL_DT_UINT16] = ROW(1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    [PICOLL_DT_INT32] = ROW(1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    [PICOLL_DT_UINT32] = ROW(1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    [PICOLL_DT_INT64] = ROW(1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    [PICOLL_DT_UINT64] = ROW(1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    [PICOLL_DT_FLOAT] = ROW(1, 1, 1, 1, 0, 0, 0, 0, 0, 0),
    [PICOLL_DT_DOUBLE] = ROW(1, 1, 1, 1, 0, 0, 0, 0, 0, 0),
    [PICOLL_DT_LONG_DOUBLE] = ROW(1, 1, 1, 1, 0, 0, 0, 0, 0, 0),
    [PICOLL_DT_FLOAT16] = ROW(1, 1, 1, 1, 0, 0, 0, 0, 0, 0),
    [PICOLL_DT_BFLOAT16] = ROW(1, 1, 1, 1, 0, 0, 0, 0, 0, 0),
    [PICOLL_DT_BOOL] = ROW(0, 0, 0, 0, 1, 1, 1, 0, 0, 0),
    [PICOLL_DT_FLOAT_COMPLEX] = ROW(1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
    [PICOLL_DT_DOUBLE_COMPLEX] = ROW(1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
    [PICOLL_DT_LONG_DOUBLE_COMPLEX] = ROW(1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
    [PICOLL_DT_BYTE] = ROW(0, 0, 0, 0, 0, 0, 0, 1, 1, 1),
};

static const size_t expected_size[PICOLL_DT_COUNT] = {
    [PICOLL_DT_INT8] = 1,
    [PICOLL_DT_UINT8] = 1,
    [PICOLL_DT_INT16] = 2,
    [PICOLL_DT_UINT16] = 2,
    [PICOLL_DT_INT32] = 4,
    [PICOLL_DT_UINT32] = 4,
    [PICOLL_DT_INT64] = 8,
    [PICOLL_DT_UINT64] = 8,
    [PICOLL_DT_FLOAT] = 4,
    [PICOLL_DT_DOUBLE] = 8,
    [PICOLL_DT_LONG_DOUBLE] = sizeof(long double),
    [PICOLL_DT_FLOAT16] = 2,
    [PICOLL_DT_BFLOAT16] = 2,
    [PICOLL_DT_BOOL] = sizeof(_Bool),
    [PICOLL_DT_FLOAT_COMPLEX] = 8,
    [PICOLL_DT_DOUBLE_COMPLEX] = 16,
    [PICOLL_DT_LONG_DOUBLE_COMPLEX] = 2 * sizeof(long double),
    [PICOLL_DT_BYTE] = 1,
};

int main(void)
{
    CHECK(PICOLL_OP_COUNT == 10, "%d reduction operations, the table here has 10",
          (int)PICOLL_OP_COUNT);
    for (int dt = 0; dt < PICOLL_DT_COUNT; dt++) {
        const char *name = picoll_dtype_name((picoll_dtype_t)dt);
        CHECK(expected[dt].present, "datatype %d (%s) is not in this test's table: add its row", dt,
              name);
        CHECK(name != NULL && name[0] != '\0' && strcmp(name, "none") != 0,
              "datatype %d has no name", dt);
        for (int o = 0; o < dt; o++) {
            CHECK(strcmp(name, picoll_dtype_name((picoll_dtype_t)o)) != 0,
                  "datatypes %d and %d are both named %s", o, dt, name);
        }
        CHECK(picoll_dtype_size((picoll_dtype_t)dt) == expected_size[dt],
              "size of %s is %zu, expected %zu", name, picoll_dtype_size((picoll_dtype_t)dt),
              expected_size[dt]);
        if (!expected[dt].present) {
            continue;
        }
        for (int op = 0; op < PICOLL_OP_COUNT; op++) {
            int got = picoll_op_valid((picoll_dtype_t)dt, (picoll_op_t)op);
            CHECK(!!got == expected[dt].valid[op], "%s on %s: picoll says %s, MPI says %s",
                  picoll_op_name((picoll_op_t)op), name, got ? "valid" : "invalid",
                  expected[dt].valid[op] ? "valid" : "invalid");
        }
    }
    for (int op = 0; op < PICOLL_OP_COUNT; op++) {
        const char *name = picoll_op_name((picoll_op_t)op);
        CHECK(name != NULL && name[0] != '\0' && strcmp(name, "none") != 0, "op %d has no name",
              op);
        for (int o = 0; o < op; o++) {
            CHECK(strcmp(name, picoll_op_name((picoll_op_t)o)) != 0,
                  "ops %d and %d are both named %s", o, op, name);
        }
        CHECK(!picoll_op_valid(PICOLL_DT_NONE, (picoll_op_t)op), "%s valid on PICOLL_DT_NONE",
              name);
    }
    /* a few spelled out, as the issue states them */
    CHECK(!picoll_op_valid(PICOLL_DT_DOUBLE_COMPLEX, PICOLL_OP_MAX),
          "MAX on complex must be invalid");
    CHECK(!picoll_op_valid(PICOLL_DT_FLOAT, PICOLL_OP_BAND), "BAND on float must be invalid");
    CHECK(picoll_op_valid(PICOLL_DT_BOOL, PICOLL_OP_LXOR), "LXOR on bool must be valid");
    CHECK(!picoll_op_valid(PICOLL_DT_BOOL, PICOLL_OP_SUM), "SUM on bool must be invalid");
    CHECK(!picoll_op_valid(PICOLL_DT_BYTE, PICOLL_OP_SUM), "SUM on byte must be invalid");
    CHECK(!picoll_op_valid(PICOLL_DT_BYTE, PICOLL_OP_LAND), "LAND on byte must be invalid");
    CHECK(!picoll_op_valid(PICOLL_DT_DOUBLE, PICOLL_OP_LOR), "LOR on double must be invalid");
    CHECK(picoll_op_valid(PICOLL_DT_FLOAT16, PICOLL_OP_MIN), "MIN on float16 must be valid");
    CHECK(!picoll_op_valid(PICOLL_DT_BFLOAT16, PICOLL_OP_BXOR), "BXOR on bfloat16 must be invalid");
    CHECK(strcmp(picoll_dtype_name(PICOLL_DT_FLOAT16), "float16") == 0 &&
              strcmp(picoll_dtype_name(PICOLL_DT_BFLOAT16), "bfloat16") == 0,
          "half types named %s and %s", picoll_dtype_name(PICOLL_DT_FLOAT16),
          picoll_dtype_name(PICOLL_DT_BFLOAT16));

    /* out of range */
    CHECK(picoll_dtype_size(PICOLL_DT_NONE) == 0, "size of PICOLL_DT_NONE is not 0");
    CHECK(picoll_dtype_name(PICOLL_DT_NONE) != NULL, "name of PICOLL_DT_NONE is NULL");
    CHECK(picoll_op_name(PICOLL_OP_NONE) != NULL, "name of PICOLL_OP_NONE is NULL");
    for (int dt = 0; dt <= PICOLL_DT_COUNT; dt++) {
        CHECK(!picoll_op_valid((picoll_dtype_t)dt, PICOLL_OP_NONE), "PICOLL_OP_NONE valid on %d",
              dt);
    }
    return check_summary("test_dtype");
}
