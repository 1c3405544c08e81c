#include "every.h"
const ev_case_t ev_rma_cases[] = {{0}};
const int ev_rma_ncases = 0;
