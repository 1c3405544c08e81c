/* Status codes: one list, from which both the enum and the strings are generated. */
#ifndef PICOLL_STATUS_H
#define PICOLL_STATUS_H

/* PICOLL_DECLINED and PICOLL_RETRY are not errors but answers that steer the caller: every rank
 * hands the call to the underlying MPI; the call is voted on again. The errors are PICOLL_ERR_*. */
#define PICOLL_STATUS_LIST(X)                                                                      \
    X(PICOLL_OK, "success")                                                                        \
    X(PICOLL_DECLINED, "declined: the underlying MPI takes the call")                              \
    X(PICOLL_RETRY, "a rank said no on the device hot path: vote again")                           \
    X(PICOLL_ERR_INVALID_PARAM, "invalid parameter")                                               \
    X(PICOLL_ERR_NO_MEMORY, "out of memory")                                                       \
    X(PICOLL_ERR_NOT_SUPPORTED, "operation not supported")                                         \
    X(PICOLL_ERR_CONFIG, "invalid configuration")                                                  \
    X(PICOLL_ERR_MPI, "error from the underlying MPI")                                             \
    X(PICOLL_ERR_SYSTEM, "system call failed")                                                     \
    X(PICOLL_ERR_TIMEOUT, "timed out waiting for a peer")                                          \
    X(PICOLL_ERR_CUDA, "CUDA error")                                                               \
    X(PICOLL_ERR_UCX, "UCX error")                                                                 \
    X(PICOLL_ERR_TOPOLOGY, "topology error")                                                       \
    X(PICOLL_ERR_PEER_FAILED, "a peer rank failed")

typedef enum {
#define PICOLL_STATUS_ENUM(name, text) name,
    PICOLL_STATUS_LIST(PICOLL_STATUS_ENUM)
#undef PICOLL_STATUS_ENUM
        PICOLL_STATUS_COUNT
} picoll_status_t;

/* Never NULL: an out-of-range value gives "unknown status". */
const char *picoll_status_string(picoll_status_t status);
/* The enumerator's own name, e.g. "PICOLL_ERR_TIMEOUT". */
const char *picoll_status_name(picoll_status_t status);

#endif
