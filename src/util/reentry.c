#include "build-config.h"
#include "util/reentry.h"

_Thread_local int picoll_reentry __attribute__((tls_model("initial-exec")));
