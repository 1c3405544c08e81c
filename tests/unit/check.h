/* Minimal assertion helpers for picoll's unit tests: every failed check prints one line naming
 * the file, the line and what was expected; the program exits nonzero if any check failed. */
#ifndef PICOLL_TEST_CHECK_H
#define PICOLL_TEST_CHECK_H

#include <stdio.h>

static int check_count;
static int check_failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        check_count++;                                                                             \
        if (!(cond)) {                                                                             \
            check_failures++;                                                                      \
            fprintf(stdout, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stdout, __VA_ARGS__);                                                          \
            fputc('\n', stdout);                                                                   \
            fflush(stdout);                                                                        \
        }                                                                                          \
    } while (0)

static inline int check_summary(const char *what)
{
    printf("%s: %d checks, %d failed\n", what, check_count, check_failures);
    return check_failures == 0 ? 0 : 1;
}

#endif
