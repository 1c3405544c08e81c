/* Unit test of picoll's status codes and their strings (src/status.c). */
#include "build-config.h" /* _GNU_SOURCE, as in src/ */
#include "util/status.h"
#include "check.h"

#include <string.h>

int main(void)
{
    CHECK(PICOLL_OK == 0, "PICOLL_OK must be 0 so that `if (status)` tests for failure");
    CHECK(PICOLL_STATUS_COUNT >= 2, "fewer than two status codes");
    for (int i = 0; i < PICOLL_STATUS_COUNT; i++) {
        const char *s = picoll_status_string((picoll_status_t)i);
        const char *n = picoll_status_name((picoll_status_t)i);
        CHECK(s != NULL && s[0] != '\0', "status %d has no string", i);
        CHECK(n != NULL && strncmp(n, "PICOLL_", 7) == 0 && n[7] != '\0',
              "status %d has no PICOLL_ name (\"%s\")", i, n ? n : "(null)");
        if (s == NULL || n == NULL) {
            continue;
        }
        CHECK(strcmp(s, "unknown status") != 0, "status %d (%s) reads as unknown", i, n);
        for (int j = 0; j < i; j++) {
            CHECK(strcmp(s, picoll_status_string((picoll_status_t)j)) != 0,
                  "statuses %d and %d share the string \"%s\"", i, j, s);
            CHECK(strcmp(n, picoll_status_name((picoll_status_t)j)) != 0,
                  "statuses %d and %d share the name \"%s\"", i, j, n);
        }
    }
    CHECK(strcmp(picoll_status_name(PICOLL_OK), "PICOLL_OK") == 0, "name of PICOLL_OK");
    CHECK(strcmp(picoll_status_name(PICOLL_ERR_TIMEOUT), "PICOLL_ERR_TIMEOUT") == 0,
          "name of PICOLL_ERR_TIMEOUT is %s", picoll_status_name(PICOLL_ERR_TIMEOUT));
    CHECK(strcmp(picoll_status_name(PICOLL_ERR_CONFIG), "PICOLL_ERR_CONFIG") == 0,
          "name of PICOLL_ERR_CONFIG is %s", picoll_status_name(PICOLL_ERR_CONFIG));

    /* out of range, on both sides */
    static const int outside[] = {PICOLL_STATUS_COUNT, PICOLL_STATUS_COUNT + 1, 1000, -1, -1000};
    for (unsigned k = 0; k < sizeof(outside) / sizeof(outside[0]); k++) {
        const char *s = picoll_status_string((picoll_status_t)outside[k]);
        const char *n = picoll_status_name((picoll_status_t)outside[k]);
        CHECK(s != NULL && strcmp(s, "unknown status") == 0,
              "picoll_status_string(%d) = \"%s\", expected \"unknown status\"", outside[k],
              s ? s : "(null)");
        CHECK(n != NULL && n[0] != '\0', "picoll_status_name(%d) is empty", outside[k]);
    }
    return check_summary("test_status");
}
