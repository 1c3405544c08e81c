/* Single-copy transfers between the ranks of a node: cross-memory attach (process_vm_readv), a
 * rank reading a peer's user buffer straight into its own. The kernel allows it only where the
 * reader may ptrace the peer (same user, and a Yama ptrace_scope or a seccomp filter that does not
 * forbid it), so a node decides once, by trying, and agrees. */
#ifndef PICOLL_CMA_H
#define PICOLL_CMA_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include "host/shm.h"

/* Collective over node_comm; every rank must call it, whatever its own `want`. Each rank publishes
 * its pid and the address and value of a probe word, reads every peer's word with
 * process_vm_readv and checks the value; the outcomes are AND-ed over node_comm. A rank with
 * want == 0 (PICOLL_CMA=off, or no workspace) counts as one that cannot read. Returns the
 * agreed capability, the same on every rank. On success *pids (malloc'd, one per local rank) holds
 * each local rank's pid; otherwise *pids is NULL. */
int picoll_cma_probe(MPI_Comm node_comm, int want, int **pids);

/* Read len bytes at address remote of process pid into local, looping on partial reads.
 * Returns 0, or the errno of the failed process_vm_readv (EFAULT for a read that stops short). */
int picoll_cma_read(int pid, void *local, uint64_t remote, size_t len);

/* Publish, for this call, the address of what the peers will read from this rank (before the
 * call's first barrier). */
void picoll_cma_publish(picoll_shm_t *shm, const void *addr);

/* Read len bytes at offset off of what local rank r published for this call into local (between
 * the call's first and second barriers). A failure here, after the node agreed that it can read,
 * means a buffer the peer does not own: the error names the collective and the peer's rank in the
 * communicator, and the job ends (the peers would wait for this rank at the next barrier). */
void picoll_cma_read_peer(const picoll_shm_t *shm, int r, void *local, size_t off, size_t len,
                          const char *coll);

/* Single-copy allreduce: the address of this rank's receive buffer, published like the block
 * (before the call's first barrier), and read by the peers after the reduction's barrier. */
void picoll_cma_publish_result(picoll_shm_t *shm, void *addr);
void picoll_cma_read_peer_result(const picoll_shm_t *shm, int r, void *local, size_t off,
                                 size_t len, const char *coll);

#endif
