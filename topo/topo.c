#include "build-config.h"
#include "topo/topo.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void picoll_topo_init(picoll_topo_t *t, const char *source)
{
    memset(t, 0, sizeof(*t));
    for (int i = 0; i < PICOLL_TOPO_MAX_GPUS; i++) {
        t->gpus[i].numa_node = -1;
        t->gpus[i].nic = -1;
        t->cls.hcm_relay[i] = -1;
        for (int k = 0; k < 4; k++) {
            t->cls.hcm_neighbors[i][k] = -1;
        }
    }
    snprintf(t->source, sizeof(t->source), "%s", source ? source : "");
}

const char *picoll_topo_class_name(picoll_topo_class_t cls)
{
    static const char *const names[] = {
        [PICOLL_TOPO_CLASS_NONE] = "none",         [PICOLL_TOPO_CLASS_SINGLE] = "single",
        [PICOLL_TOPO_CLASS_NVSWITCH] = "nvswitch", [PICOLL_TOPO_CLASS_FULL_MESH] = "full-mesh",
        [PICOLL_TOPO_CLASS_HCM] = "hcm",           [PICOLL_TOPO_CLASS_PCIE] = "pcie",
        [PICOLL_TOPO_CLASS_MIXED] = "mixed",
    };
    return (unsigned)cls < sizeof(names) / sizeof(names[0]) ? names[cls] : "?";
}

const char *picoll_topo_path_name(picoll_topo_path_t path)
{
    static const char *const names[] = {
        [PICOLL_TOPO_PATH_UNKNOWN] = "?", [PICOLL_TOPO_PATH_SELF] = "X",
        [PICOLL_TOPO_PATH_PIX] = "PIX",   [PICOLL_TOPO_PATH_PXB] = "PXB",
        [PICOLL_TOPO_PATH_PHB] = "PHB",   [PICOLL_TOPO_PATH_NODE] = "NODE",
        [PICOLL_TOPO_PATH_SYS] = "SYS",
    };
    return (unsigned)path < sizeof(names) / sizeof(names[0]) ? names[path] : "?";
}

const char *picoll_topo_path_desc(picoll_topo_path_t path)
{
    static const char *const descs[] = {
        [PICOLL_TOPO_PATH_UNKNOWN] = "unknown",
        [PICOLL_TOPO_PATH_SELF] = "same device",
        [PICOLL_TOPO_PATH_PIX] = "same PCIe switch",
        [PICOLL_TOPO_PATH_PXB] = "PCIe switches below one host bridge",
        [PICOLL_TOPO_PATH_PHB] = "through a PCIe host bridge",
        [PICOLL_TOPO_PATH_NODE] = "across host bridges of one NUMA node",
        [PICOLL_TOPO_PATH_SYS] = "across sockets",
    };
    return (unsigned)path < sizeof(descs) / sizeof(descs[0]) ? descs[path] : "unknown";
}

int picoll_topo_nvlinks(const picoll_topo_t *t, int a, int b)
{
    if (a == b || a < 0 || b < 0 || a >= t->ngpus || b >= t->ngpus) {
        return 0;
    }
    return t->links[a][b].nvlinks + t->links[a][b].nvswitch_links;
}

int picoll_topo_normalize_bus_id(const char *in, char *out, size_t len)
{
    unsigned dom = 0, bus, dev, fn = 0;
    int n = 0;

    if (in == NULL || *in == '\0') {
        return -1;
    }
    /* "dddddddd:bb:dd.f", "dddd:bb:dd.f", or "bb:dd.f" */
    if (sscanf(in, "%x:%x:%x.%x%n", &dom, &bus, &dev, &fn, &n) == 4 && in[n] == '\0') {
        /* full form */
    } else if (sscanf(in, "%x:%x.%x%n", &bus, &dev, &fn, &n) == 3 && in[n] == '\0') {
        dom = 0;
    } else {
        return -1;
    }
    if (bus > 0xff || dev > 0x1f || fn > 7) {
        return -1;
    }
    snprintf(out, len, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return 0;
}

int picoll_topo_find_bus_id(const picoll_topo_t *t, const char *bus_id)
{
    char want[PICOLL_TOPO_BUSID_LEN], have[PICOLL_TOPO_BUSID_LEN];

    if (picoll_topo_normalize_bus_id(bus_id, want, sizeof(want)) != 0) {
        return -1;
    }
    for (int i = 0; i < t->ngpus; i++) {
        if (picoll_topo_normalize_bus_id(t->gpus[i].bus_id, have, sizeof(have)) == 0 &&
            strcmp(want, have) == 0) {
            return i;
        }
    }
    return -1;
}

static uint32_t fnv(uint32_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ c[i]) * 16777619u;
    }
    return h;
}

uint32_t picoll_topo_hash(const picoll_topo_t *t)
{
    uint32_t h = 2166136261u;
    h = fnv(h, &t->ngpus, sizeof(t->ngpus));
    for (int i = 0; i < t->ngpus; i++) {
        h = fnv(h, t->gpus[i].bus_id, strlen(t->gpus[i].bus_id));
        for (int j = 0; j < t->ngpus; j++) {
            const picoll_topo_link_t *l = &t->links[i][j];
            int v[4] = {l->nvlinks, l->nvswitch_links, (int)l->path, (int)l->p2p};
            h = fnv(h, v, sizeof(v));
        }
    }
    return h;
}
