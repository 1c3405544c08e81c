#define _GNU_SOURCE /* sched_getcpu */
#include "build-config.h"
#include "topo/cpu.h"

#include <ctype.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first line of a sysfs file, without its newline; 0 when it cannot be read. */
static int cpu_read(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (ok) {
        buf[strcspn(buf, "\n")] = '\0';
    }
    return ok;
}

/* "512K", "8M", "1024" (bytes). */
static size_t cpu_size(const char *text)
{
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    switch (toupper((unsigned char)*end)) {
    case 'K': return (size_t)v << 10;
    case 'M': return (size_t)v << 20;
    case 'G': return (size_t)v << 30;
    default: return (size_t)v;
    }
}

/* CPUs in a list such as "0-3,8-11". */
static int cpu_count_list(const char *list)
{
    int n = 0;
    const char *p = list;
    while (*p != '\0') {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p) {
            break;
        }
        if (*end == '-') {
            p = end + 1;
            b = strtol(p, &end, 10);
        }
        if (b >= a) {
            n += (int)(b - a + 1);
        }
        p = *end == ',' ? end + 1 : end;
        if (*end != ',') {
            break;
        }
    }
    return n;
}

void picoll_topo_cpu_detect(picoll_topo_cpu_t *out)
{
    memset(out, 0, sizeof(*out));
    out->cpu = sched_getcpu();
    int cpu = out->cpu < 0 ? 0 : out->cpu;
    for (int index = 0; index < 16; index++) {
        char path[128], level[16], type[32], size[32], shared[256];
        int n = snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cache/index%d/", cpu,
                         index);
        if (n <= 0 || (size_t)n + 20 > sizeof(path)) {
            break;
        }
        strcpy(path + n, "level");
        if (!cpu_read(path, level, sizeof(level))) {
            break;
        }
        strcpy(path + n, "type");
        if (!cpu_read(path, type, sizeof(type)) || strcmp(type, "Instruction") == 0) {
            continue;
        }
        strcpy(path + n, "size");
        if (!cpu_read(path, size, sizeof(size))) {
            continue;
        }
        strcpy(path + n, "shared_cpu_list");
        int cpus = cpu_read(path, shared, sizeof(shared)) ? cpu_count_list(shared) : 0;
        if (atoi(level) == 2) {
            out->l2 = cpu_size(size);
            out->l2_cpus = cpus;
        } else if (atoi(level) == 3) {
            out->l3 = cpu_size(size);
            out->l3_cpus = cpus;
        }
    }
    if (out->l2 != 0) {
        out->from = "sysfs";
        return;
    }
#ifdef _SC_LEVEL2_CACHE_SIZE
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l2 > 0) {
        out->l2 = (size_t)l2;
        out->l3 = l3 > 0 ? (size_t)l3 : 0;
        out->from = "sysconf";
        return;
    }
#endif
    out->l2 = PICOLL_CPU_L2_DEFAULT;
    out->from = "default";
}
