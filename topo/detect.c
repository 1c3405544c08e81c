/* Detection of this node's GPUs: NVML loaded with dlopen behind a table of function pointers
 * initialised once, hwloc linked when the build found it. Without NVML, or with no GPU, the
 * topology has no GPU (class none): host only. */
#include "build-config.h"
#include "util/log.h"
#include "topo/topo.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#ifdef PICOLL_HAVE_HWLOC
#include <hwloc.h>
#endif

/* ---- the few NVML declarations picoll needs (values from nvml.h, stable across versions) ---- */
typedef int nvml_return_t;
typedef struct nvml_device_st *nvml_device_t;
#define NVML_SUCCESS 0
#define NVML_FEATURE_ENABLED 1
#define NVML_P2P_CAPS_INDEX_READ 0
#define NVML_P2P_STATUS_OK 0
#define NVML_NVLINK_DEVICE_TYPE_GPU 0
#define NVML_NVLINK_DEVICE_TYPE_SWITCH 2
#define NVML_NVLINK_MAX_LINKS 18 /* links past the driver's own maximum answer an error */
#define NVML_TOPOLOGY_INTERNAL 0
#define NVML_TOPOLOGY_SINGLE 10
#define NVML_TOPOLOGY_MULTIPLE 20
#define NVML_TOPOLOGY_HOSTBRIDGE 30
#define NVML_TOPOLOGY_NODE 40
#define NVML_TOPOLOGY_SYSTEM 50

typedef struct {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} nvml_pci_info_t;

static struct {
    int ok;
    char why[160];
    nvml_return_t (*init)(void);
    const char *(*error_string)(nvml_return_t);
    nvml_return_t (*get_count)(unsigned *);
    nvml_return_t (*get_handle_by_index)(unsigned, nvml_device_t *);
    nvml_return_t (*get_pci_info)(nvml_device_t, nvml_pci_info_t *);
    nvml_return_t (*nvlink_state)(nvml_device_t, unsigned, int *);
    nvml_return_t (*nvlink_remote_pci)(nvml_device_t, unsigned, nvml_pci_info_t *);
    nvml_return_t (*nvlink_remote_type)(nvml_device_t, unsigned, int *);
    nvml_return_t (*p2p_status)(nvml_device_t, nvml_device_t, int, int *);
    nvml_return_t (*common_ancestor)(nvml_device_t, nvml_device_t, int *);
} nvml;

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

static void nvml_load(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(nvml.why, sizeof(nvml.why), "NVML not loadable: %s", e ? e : "?");
        return;
    }
#define NVML_SYM(field, name)                                                                      \
    do {                                                                                           \
        *(void **)&nvml.field = dlsym(h, name);                                                    \
        if (nvml.field == NULL) {                                                                  \
            snprintf(nvml.why, sizeof(nvml.why), "NVML lacks %s", name);                           \
            return;                                                                                \
        }                                                                                          \
    } while (0)
    NVML_SYM(init, "nvmlInit_v2");
    NVML_SYM(error_string, "nvmlErrorString");
    NVML_SYM(get_count, "nvmlDeviceGetCount_v2");
    NVML_SYM(get_handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
    NVML_SYM(get_pci_info, "nvmlDeviceGetPciInfo_v3");
    NVML_SYM(nvlink_state, "nvmlDeviceGetNvLinkState");
    NVML_SYM(nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    NVML_SYM(p2p_status, "nvmlDeviceGetP2PStatus");
    NVML_SYM(common_ancestor, "nvmlDeviceGetTopologyCommonAncestor");
#undef NVML_SYM
    /* optional (drivers before 460 lack it): without it, an unknown remote is a switch */
    *(void **)&nvml.nvlink_remote_type = dlsym(h, "nvmlDeviceGetNvLinkRemoteDeviceType");
    nvml_return_t rc = nvml.init();
    if (rc != NVML_SUCCESS) {
        snprintf(nvml.why, sizeof(nvml.why), "nvmlInit_v2 failed: %s", nvml.error_string(rc));
        return;
    }
    nvml.ok = 1; /* the library stays loaded and initialised for the life of the process */
}

static picoll_topo_path_t nvml_level_path(int level)
{
    switch (level) {
    case NVML_TOPOLOGY_INTERNAL:
    case NVML_TOPOLOGY_SINGLE: return PICOLL_TOPO_PATH_PIX;
    case NVML_TOPOLOGY_MULTIPLE: return PICOLL_TOPO_PATH_PXB;
    case NVML_TOPOLOGY_HOSTBRIDGE: return PICOLL_TOPO_PATH_PHB;
    case NVML_TOPOLOGY_NODE: return PICOLL_TOPO_PATH_NODE;
    case NVML_TOPOLOGY_SYSTEM: return PICOLL_TOPO_PATH_SYS;
    default: return PICOLL_TOPO_PATH_UNKNOWN;
    }
}

#ifdef PICOLL_HAVE_HWLOC
/* NUMA node and nearest NIC of each GPU, from its bus id. */
/* The deepest object that is an ancestor of both (or one of them): hwloc's own
 * hwloc_get_common_ancestor_obj() compares depths, which are negative for I/O objects, and walks
 * past the root for a GPU and a NIC (it is documented for normal objects only). */
static hwloc_obj_t hwloc_common(hwloc_obj_t a, hwloc_obj_t b)
{
    for (hwloc_obj_t x = a; x != NULL; x = x->parent) {
        for (hwloc_obj_t y = b; y != NULL; y = y->parent) {
            if (x == y) {
                return x;
            }
        }
    }
    return NULL;
}

/* Depth of an object counted from the root (I/O objects included, unlike obj->depth). */
static int hwloc_height(hwloc_obj_t o)
{
    int h = 0;
    for (; o != NULL && o->parent != NULL; o = o->parent) {
        h++;
    }
    return h;
}

void picoll_topo_hwloc_fill(picoll_topo_t *t)
{
    hwloc_topology_t topo;
    unsigned dom, bus, dev, fn;

    if (hwloc_topology_init(&topo) != 0) {
        return;
    }
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return;
    }
    /* the NICs: network and OpenFabrics OS devices */
    hwloc_obj_t nics[PICOLL_TOPO_MAX_NICS];
    hwloc_obj_t os = NULL;
    while ((os = hwloc_get_next_osdev(topo, os)) != NULL && t->nnics < PICOLL_TOPO_MAX_NICS) {
        if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS ||
            (os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK &&
             hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PCI_DEVICE, os) != NULL)) {
            nics[t->nnics] = os;
            snprintf(t->nic_names[t->nnics], PICOLL_TOPO_NAME_LEN, "%s", os->name ? os->name : "?");
            t->nnics++;
        }
    }
    for (int i = 0; i < t->ngpus; i++) {
        picoll_topo_gpu_t *g = &t->gpus[i];
        if (sscanf(g->bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) {
            continue;
        }
        hwloc_obj_t pci = hwloc_get_pcidev_by_busid(topo, dom, bus, dev, fn);
        if (pci == NULL) {
            continue;
        }
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, pci);
        if (anc != NULL && anc->nodeset != NULL && hwloc_bitmap_weight(anc->nodeset) == 1) {
            g->numa_node = hwloc_bitmap_first(anc->nodeset);
        }
        int best_depth = -1;
        for (int n = 0; n < t->nnics; n++) {
            hwloc_obj_t common = hwloc_common(pci, nics[n]);
            picoll_topo_path_t path;
            if (common == NULL) {
                continue;
            }
            /* a common PCI bridge: same switch (depth >= the GPU's parent) or switches below one
             * host bridge; a common CPU-side object: host bridge, NUMA node, or the machine */
            if (common->type == HWLOC_OBJ_BRIDGE &&
                common->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
                path = common == pci->parent ? PICOLL_TOPO_PATH_PIX : PICOLL_TOPO_PATH_PXB;
            } else if (common->type == HWLOC_OBJ_BRIDGE) {
                path = PICOLL_TOPO_PATH_PHB;
            } else if (common->type == HWLOC_OBJ_MACHINE) {
                path = PICOLL_TOPO_PATH_SYS;
            } else {
                path = PICOLL_TOPO_PATH_NODE;
            }
            t->gpu_nic[i][n] = path;
            if (hwloc_height(common) > best_depth) {
                best_depth = hwloc_height(common);
                g->nic = n;
                g->nic_path = path;
            }
        }
    }
    hwloc_topology_destroy(topo);
}
#else
void picoll_topo_hwloc_fill(picoll_topo_t *t)
{
    (void)t;
}
#endif

picoll_status_t picoll_topo_detect(picoll_topo_t *out)
{
    nvml_device_t dev[PICOLL_TOPO_MAX_GPUS];
    nvml_pci_info_t pci[PICOLL_TOPO_MAX_GPUS];
    int switch_links[PICOLL_TOPO_MAX_GPUS] = {0};
    unsigned count = 0;

    pthread_once(&nvml_once, nvml_load);
    if (!nvml.ok) {
        picoll_topo_init(out, "");
        snprintf(out->source, sizeof(out->source), "none (%s): host only", nvml.why);
        picoll_topo_classify(out);
        return PICOLL_OK;
    }
    picoll_topo_init(out, "nvml");
    if (nvml.get_count(&count) != NVML_SUCCESS || count == 0) {
        snprintf(out->source, sizeof(out->source), "none (NVML reports no GPU): host only");
        picoll_topo_classify(out);
        return PICOLL_OK;
    }
    if (count > PICOLL_TOPO_MAX_GPUS) {
        picoll_warn("%u GPUs on this node: only the first %d are considered", count,
                    PICOLL_TOPO_MAX_GPUS);
        count = PICOLL_TOPO_MAX_GPUS;
    }
    for (unsigned i = 0; i < count; i++) {
        nvml_return_t rc = nvml.get_handle_by_index(i, &dev[i]);
        if (rc == NVML_SUCCESS) {
            rc = nvml.get_pci_info(dev[i], &pci[i]);
        }
        if (rc != NVML_SUCCESS) {
            picoll_warn("NVML cannot describe GPU %u (%s): no GPU topology, host only", i,
                        nvml.error_string(rc));
            picoll_topo_init(out, "none (NVML error): host only");
            picoll_topo_classify(out);
            return PICOLL_OK;
        }
        snprintf(out->gpus[i].bus_id, PICOLL_TOPO_BUSID_LEN, "%04x:%02x:%02x.0", pci[i].domain,
                 pci[i].bus, pci[i].device);
    }
    out->ngpus = (int)count;
    for (unsigned i = 0; i < count; i++) {
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
            int active = 0, type = -1;
            nvml_pci_info_t rp;
            if (nvml.nvlink_state(dev[i], l, &active) != NVML_SUCCESS ||
                active != NVML_FEATURE_ENABLED) {
                continue;
            }
            out->gpus[i].total_nvlinks++;
            if (nvml.nvlink_remote_pci(dev[i], l, &rp) != NVML_SUCCESS) {
                continue;
            }
            if (nvml.nvlink_remote_type != NULL &&
                nvml.nvlink_remote_type(dev[i], l, &type) != NVML_SUCCESS) {
                type = -1;
            }
            int peer = -1;
            for (unsigned j = 0; j < count; j++) {
                if (j != i && pci[j].domain == rp.domain && pci[j].bus == rp.bus &&
                    pci[j].device == rp.device) {
                    peer = (int)j;
                }
            }
            if (peer >= 0) {
                out->links[i][peer].nvlinks++;
            } else if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH ||
                       type != NVML_NVLINK_DEVICE_TYPE_GPU) {
                /* a switch, or a remote NVML cannot name (NVSwitches hidden from VMs) */
                switch_links[i]++;
            }
        }
    }
    for (unsigned i = 0; i < count; i++) {
        for (unsigned j = 0; j < count; j++) {
            picoll_topo_link_t *lk = &out->links[i][j];
            int level = -1, p2p = -1;
            if (i == j) {
                lk->path = PICOLL_TOPO_PATH_SELF;
                lk->p2p = PICOLL_TOPO_P2P_OK;
                continue;
            }
            /* links through switches: as many as the less connected side has */
            if (switch_links[i] > 0 && switch_links[j] > 0) {
                lk->nvswitch_links =
                    switch_links[i] < switch_links[j] ? switch_links[i] : switch_links[j];
            }
            if (nvml.common_ancestor(dev[i], dev[j], &level) == NVML_SUCCESS) {
                lk->path = nvml_level_path(level);
            }
            if (nvml.p2p_status(dev[i], dev[j], NVML_P2P_CAPS_INDEX_READ, &p2p) == NVML_SUCCESS) {
                lk->p2p = p2p == NVML_P2P_STATUS_OK ? PICOLL_TOPO_P2P_OK : PICOLL_TOPO_P2P_NO;
            }
        }
    }
    picoll_topo_hwloc_fill(out);
    picoll_topo_classify(out);
    return PICOLL_OK;
}

picoll_status_t picoll_topo_load(const picoll_config_t *cfg, picoll_topo_t *out, char *err,
                                 size_t errlen)
{
    if (cfg != NULL && cfg->topo_file != NULL && cfg->topo_file[0] != '\0') {
        return picoll_topo_parse_file(cfg->topo_file, out, err, errlen);
    }
    if (errlen > 0) {
        err[0] = '\0';
    }
    return picoll_topo_detect(out);
}
