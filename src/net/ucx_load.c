/* UCX loaded at run time: the process's own UCX if it has one, else configure's (ucx_load.h). */
#define _GNU_SOURCE /* dladdr */
#include "build-config.h"
#include "net/ucx_load.h"
#include "util/dltable.h"
#include "util/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

picoll_ucx_fn_t picoll_ucx;

static pthread_once_t ucx_once = PTHREAD_ONCE_INIT;
static int ucx_loaded;
static int ucx_own; /* the process had it loaded before picoll asked */
static char ucx_file[512] = "?";
static char ucx_why[768] = "UCX not loaded yet";

#define UCX_SYM(field, name) PICOLL_DL_SYM(picoll_ucx_fn_t, field, name)
static const picoll_dl_sym_t ucx_syms[] = {
    UCX_SYM(config_read, "ucp_config_read"),
    UCX_SYM(config_modify, "ucp_config_modify"),
    UCX_SYM(config_release, "ucp_config_release"),
    UCX_SYM(init_version, "ucp_init_version"),
    UCX_SYM(get_version, "ucp_get_version"),
    UCX_SYM(get_version_string, "ucp_get_version_string"),
    UCX_SYM(context_print_info, "ucp_context_print_info"),
    UCX_SYM(worker_create, "ucp_worker_create"),
    UCX_SYM(worker_destroy, "ucp_worker_destroy"),
    UCX_SYM(worker_get_address, "ucp_worker_get_address"),
    UCX_SYM(worker_release_address, "ucp_worker_release_address"),
    UCX_SYM(worker_progress, "ucp_worker_progress"),
    UCX_SYM(ep_create, "ucp_ep_create"),
    UCX_SYM(ep_close_nbx, "ucp_ep_close_nbx"),
    UCX_SYM(ep_flush_nbx, "ucp_ep_flush_nbx"),
    UCX_SYM(tag_send_nbx, "ucp_tag_send_nbx"),
    UCX_SYM(tag_recv_nbx, "ucp_tag_recv_nbx"),
    UCX_SYM(request_check_status, "ucp_request_check_status"),
    UCX_SYM(request_free, "ucp_request_free"),
    UCX_SYM(status_string, "ucs_status_string"), /* libucs: found through libucp's dependencies */
};

/* The library: the libucp.so.0 already in the process (its MPI's), else the one configure found
 * (PICOLL_UCX_LIB: the file in --with-ucx=DIR, or the name for the system's search). */
static void *ucx_open(void)
{
    const char *file = PICOLL_UCX_LIB;
    void *lib = dlopen("libucp.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (lib != NULL) {
        ucx_own = 1;
        return lib;
    }
    lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *e = dlerror();
        snprintf(ucx_why, sizeof(ucx_why), "cannot load UCX (%s): %s", file,
                 e != NULL ? e : "dlopen failed");
    }
    return lib;
}

static void ucx_load_once(void)
{
    picoll_ucx_fn_t table;
    unsigned major = 0, minor = 0, release = 0;
    Dl_info where;
    void *lib = ucx_open();

    if (lib == NULL) {
        return;
    }
    const char *missing = picoll_dl_fill(lib, ucx_syms, PICOLL_DL_COUNT(ucx_syms), &table);
    if (missing != NULL) {
        snprintf(ucx_why, sizeof(ucx_why), "the UCX loaded lacks %s", missing);
        return;
    }
    if (dladdr(*(void **)&table.get_version, &where) != 0 && where.dli_fname != NULL) {
        snprintf(ucx_file, sizeof(ucx_file), "%s", where.dli_fname);
    }
    table.get_version(&major, &minor, &release);
    /* UCX keeps its ABI within a major version: a newer minor serves these headers, an older
     * one may lack what they describe */
    if (major != UCP_API_MAJOR || minor < UCP_API_MINOR) {
        snprintf(ucx_why, sizeof(ucx_why),
                 "the process %s UCX %u.%u (%s) but picoll was built against UCX %d.%d: the "
                 "network step between nodes is off (the MPI's algorithms run there instead)",
                 ucx_own ? "has its MPI's" : "loaded", major, minor, ucx_file, UCP_API_MAJOR,
                 UCP_API_MINOR);
        return;
    }
    picoll_ucx = table;
    ucx_loaded = 1;
    ucx_why[0] = '\0';
    picoll_debug("UCX %s from %s (%s)", table.get_version_string(), ucx_file,
                 ucx_own ? "the process's own" : "loaded by picoll");
}

int picoll_ucx_load(void)
{
    pthread_once(&ucx_once, ucx_load_once);
    return ucx_loaded ? 0 : -1;
}

const char *picoll_ucx_why(void)
{
    return ucx_why;
}

void picoll_ucx_print(FILE *out)
{
    if (picoll_ucx_load() != 0) {
        fprintf(out, "not in use: %s\n", ucx_why);
        return;
    }
    fprintf(out, "%s (%s, %s)\n", picoll_ucx.get_version_string(), ucx_file,
            ucx_own ? "the process's own, loaded by its MPI" : "loaded by picoll");
}
