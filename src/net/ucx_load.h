/* UCX, loaded at run time behind a table of its functions, as the CUDA driver is (mem/cudrv.h).
 *
 * A process whose MPI carries a UCX of its own (MPICH 5 from pip: its lib/mpich/libucp.so.0)
 * already has one loaded when picoll's network step first needs it: picoll then uses that one,
 * never a second copy whose libraries would resolve each other's symbols (a linked libucp made
 * such programs die at start with "undefined symbol" errors). Where the process has none, picoll
 * loads the UCX that configure found. The headers are configure's UCX; a loaded UCX whose API is
 * older than theirs is not used (the network step is then off, with one warning naming both). */
#ifndef PICOLL_NET_UCX_LOAD_H
#define PICOLL_NET_UCX_LOAD_H

#include <stdio.h>
#include <ucp/api/ucp.h>

typedef struct {
    __typeof__(ucp_config_read) *config_read;
    __typeof__(ucp_config_modify) *config_modify;
    __typeof__(ucp_config_release) *config_release;
    __typeof__(ucp_init_version) *init_version;
    __typeof__(ucp_get_version) *get_version;
    __typeof__(ucp_get_version_string) *get_version_string;
    __typeof__(ucp_context_print_info) *context_print_info;
    __typeof__(ucp_worker_create) *worker_create;
    __typeof__(ucp_worker_destroy) *worker_destroy;
    __typeof__(ucp_worker_get_address) *worker_get_address;
    __typeof__(ucp_worker_release_address) *worker_release_address;
    __typeof__(ucp_worker_progress) *worker_progress;
    __typeof__(ucp_ep_create) *ep_create;
    __typeof__(ucp_ep_close_nbx) *ep_close_nbx;
    __typeof__(ucp_ep_flush_nbx) *ep_flush_nbx;
    __typeof__(ucp_tag_send_nbx) *tag_send_nbx;
    __typeof__(ucp_tag_recv_nbx) *tag_recv_nbx;
    __typeof__(ucp_request_check_status) *request_check_status;
    __typeof__(ucp_request_free) *request_free;
    __typeof__(ucs_status_string) *status_string;
} picoll_ucx_fn_t;

/* The table; valid once picoll_ucx_load has returned 0. */
extern picoll_ucx_fn_t picoll_ucx;

/* Load UCX once (thread-safe). Returns 0, or -1 with the reason in picoll_ucx_why() (warned about
 * once, by the first call that needed UCX). */
int picoll_ucx_load(void);
const char *picoll_ucx_why(void);

/* On one line: the UCX in use, its version and file, and whether it was the process's own. */
void picoll_ucx_print(FILE *out);

#endif
