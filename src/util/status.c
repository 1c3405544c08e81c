#include "util/status.h"

static const char *const status_strings[] = {
#define PICOLL_STATUS_STRING(name, text) [name] = text,
    PICOLL_STATUS_LIST(PICOLL_STATUS_STRING)
#undef PICOLL_STATUS_STRING
};

static const char *const status_names[] = {
#define PICOLL_STATUS_NAME(name, text) [name] = #name,
    PICOLL_STATUS_LIST(PICOLL_STATUS_NAME)
#undef PICOLL_STATUS_NAME
};

const char *picoll_status_string(picoll_status_t status)
{
    if ((unsigned)status >= PICOLL_STATUS_COUNT) {
        return "unknown status";
    }
    return status_strings[status];
}

const char *picoll_status_name(picoll_status_t status)
{
    if ((unsigned)status >= PICOLL_STATUS_COUNT) {
        return "PICOLL_STATUS_UNKNOWN";
    }
    return status_names[status];
}
