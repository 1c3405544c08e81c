/* Unit test of the algorithm tables of the intercepted collectives (src/coll/tables.c). */
#include "build-config.h" /* _GNU_SOURCE, as in src/ */
#include "coll/coll.h"
#include "check.h"

#include <string.h>

int main(void)
{
    static const char *const expected_names[PICOLL_COLL_COUNT] = {
        [PICOLL_COLL_ALLREDUCE] = "allreduce",
        [PICOLL_COLL_ALLGATHER] = "allgather",
        [PICOLL_COLL_ALLTOALL] = "alltoall",
        [PICOLL_COLL_REDUCE_SCATTER_BLOCK] = "reduce_scatter_block",
        [PICOLL_COLL_REDUCE_SCATTER] = "reduce_scatter",
        [PICOLL_COLL_BCAST] = "bcast",
        [PICOLL_COLL_REDUCE] = "reduce",
        [PICOLL_COLL_ALLGATHERV] = "allgatherv",
        [PICOLL_COLL_ALLTOALLV] = "alltoallv",
    };

    CHECK(PICOLL_ALG_FALLBACK == 0, "the fallback must be algorithm 0");
    for (int c = 0; c < PICOLL_COLL_COUNT; c++) {
        const picoll_coll_desc_t *d = picoll_coll_desc((picoll_coll_t)c);
        CHECK(d != NULL, "collective %d has no table", c);
        if (d == NULL) {
            continue;
        }
        CHECK(d->name != NULL && expected_names[c] != NULL &&
                  strcmp(d->name, expected_names[c]) == 0,
              "collective %d is named \"%s\", expected \"%s\"", c, d->name ? d->name : "(null)",
              expected_names[c] ? expected_names[c] : "(null)");
        for (int o = 0; o < c; o++) {
            const picoll_coll_desc_t *od = picoll_coll_desc((picoll_coll_t)o);
            CHECK(od == NULL || d->name == NULL || od->name == NULL ||
                      strcmp(od->name, d->name) != 0,
                  "collectives %d and %d share the name %s", o, c, d->name);
        }
        CHECK(d->count >= 1 && d->count <= PICOLL_ALG_MAX,
              "%s has %d algorithms, expected 1..PICOLL_ALG_MAX (%d)", d->name, d->count,
              PICOLL_ALG_MAX);
        CHECK(d->algs != NULL, "%s has no algorithm array", d->name);
        if (d->algs == NULL || d->count < 1) {
            continue;
        }
        CHECK(d->algs[PICOLL_ALG_FALLBACK].name != NULL &&
                  strcmp(d->algs[PICOLL_ALG_FALLBACK].name, "fallback") == 0,
              "%s: algorithm 0 is \"%s\", expected \"fallback\"", d->name,
              d->algs[0].name ? d->algs[0].name : "(null)");
        int count = d->count <= PICOLL_ALG_MAX ? d->count : PICOLL_ALG_MAX;
        for (int a = 0; a < count; a++) {
            const char *n = d->algs[a].name;
            CHECK(n != NULL && n[0] != '\0', "%s: algorithm %d has no name", d->name, a);
            CHECK(d->algs[a].desc != NULL && d->algs[a].desc[0] != '\0',
                  "%s: algorithm %d (%s) has no description", d->name, a, n ? n : "(null)");
            if (n == NULL) {
                continue;
            }
            CHECK(strchr(n, ' ') == NULL,
                  "%s: algorithm name \"%s\" contains a space (the stats "
                  "lines are parsed by words)",
                  d->name, n);
            for (int b = 0; b < a; b++) {
                CHECK(d->algs[b].name == NULL || strcmp(d->algs[b].name, n) != 0,
                      "%s: algorithms %d and %d are both named \"%s\"", d->name, b, a, n);
            }
        }
    }
    CHECK(picoll_coll_desc(PICOLL_COLL_COUNT) == NULL, "a table past the last collective");
    CHECK(picoll_coll_desc((picoll_coll_t)100) == NULL, "a table for collective 100");
    return check_summary("test_coll_tables");
}
