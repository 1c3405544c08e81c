#include "core/core.h"

picoll_global_t picoll_g;
