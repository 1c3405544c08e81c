#include "every.h"
const ev_case_t ev_io_cases[] = {{0}};
const int ev_io_ncases = 0;
