/* Re-entry guard: nonzero while picoll itself is calling MPI on this thread, so that the wrappers
 * send those calls straight to PMPI. */
#ifndef PICOLL_REENTRY_H
#define PICOLL_REENTRY_H

extern _Thread_local int picoll_reentry __attribute__((tls_model("initial-exec")));

#endif
