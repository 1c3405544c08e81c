/* The caches of the CPU a process runs on, which the host executor's chunk sizes scale by: a chunk
 * that one rank copies in and its peers copy out should still be in a cache when they do. */
#ifndef PICOLL_TOPO_CPU_H
#define PICOLL_TOPO_CPU_H

#include <stddef.h>

typedef struct {
    size_t l2;   /* bytes of the L2 of the core this process runs on */
    int l2_cpus; /* CPUs sharing it (0: unknown) */
    size_t l3;   /* bytes of its L3 (0: none or unknown) */
    int l3_cpus; /* CPUs sharing the L3 (0: unknown) */
    int cpu;     /* the CPU looked at (-1: unknown) */
    const char
        *from; /* "sysfs", "sysconf", or "default" (nothing readable: PICOLL_CPU_L2_DEFAULT) */
} picoll_topo_cpu_t;

/* The L2 assumed where nothing can be read: that of the machine the defaults were measured on
 * (2-core AMD EPYC VM, docs/performance.md). */
#define PICOLL_CPU_L2_DEFAULT ((size_t)512 << 10)

/* Reads /sys/devices/system/cpu/cpuN/cache (what hwloc reads on Linux) for the CPU this thread
 * runs on, else sysconf. Cheap enough for a communicator's set-up (a few small files). */
void picoll_topo_cpu_detect(picoll_topo_cpu_t *out);

#endif
