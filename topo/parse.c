/* Reader of `nvidia-smi topo -m` output, the format of PICOLL_TOPO_FILE and of the fixtures.
 *
 *         GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
 *   GPU0   X      NV4     PIX     0-23,48-71      0               N/A
 *   GPU1  NV4      X      PHB     0-23,48-71      0               N/A
 *   NIC0  PIX     PHB      X
 *
 *   Legend: ...
 *   NIC Legend:
 *     NIC0: mlx5_0
 *
 * Columns and cells are separated by spaces or tabs; the header names the devices (GPUn in order,
 * then NICs as NICn or by their own name, e.g. mlx5_0, as older drivers print them), then the
 * affinity columns present ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID"). Cells: X, NV#, PIX,
 * PXB, PHB, NODE, SYS (SOC: older name of SYS). Everything from "Legend:" on is ignored except
 * the NIC Legend. picoll extension: lines starting with '#' are comments.
 *
 * What a text cannot say is inferred: peer access is assumed for NV# and for PCIe paths below
 * SYS, and not across sockets; a GPU whose NV# entries add up to more than
 * PICOLL_TOPO_MAX_GPU_NVLINKS reaches its peers through NVSwitches. */
#include "build-config.h"
#include "topo/topo.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVS (PICOLL_TOPO_MAX_GPUS + PICOLL_TOPO_MAX_NICS)
#define MAX_TOKENS (MAX_DEVS + 16)
#define MAX_LINE 8192

typedef enum { AFF_CPU, AFF_NUMA, AFF_GPU_NUMA } aff_kind_t;

typedef struct {
    int is_nv; /* NV#: count in nv */
    int nv;
    picoll_topo_path_t path;
    int line;
} cell_t;

typedef struct {
    const char *name;
    char *err;
    size_t errlen;
    int ndev, ngpu, naff;
    char devname[MAX_DEVS][PICOLL_TOPO_NAME_LEN];
    int dev_is_gpu[MAX_DEVS];
    int dev_index[MAX_DEVS]; /* GPU or NIC index */
    aff_kind_t aff[4];
    int row_line[MAX_DEVS];
    cell_t cell[PICOLL_TOPO_MAX_GPUS][MAX_DEVS];
    int header_line;
} parser_t;

__attribute__((format(printf, 3, 4))) static picoll_status_t fail(parser_t *p, int line,
                                                                  const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(p->err, p->errlen, "topo file %s line %d: ", p->name, line);
    if (n >= 0 && (size_t)n < p->errlen) {
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return PICOLL_ERR_TOPOLOGY;
}

/* Removes terminal escapes (nvidia-smi underlines the header on a terminal) and CRs. */
static void clean_line(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r == '\033' && r[1] == '[') {
            r += 2;
            while (*r && !isalpha((unsigned char)*r)) {
                r++;
            }
            if (!*r) {
                break;
            }
            continue;
        }
        if (*r == '\r') {
            continue;
        }
        *w++ = *r;
    }
    *w = '\0';
}

static int tokenize(char *s, char **tok, int max)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, " \t\n", &save); t != NULL;
         t = strtok_r(NULL, " \t\n", &save)) {
        if (n == max) {
            return -1;
        }
        tok[n++] = t;
    }
    return n;
}

static int parse_uint(const char *s, int *out)
{
    char *end;
    long v;
    if (!isdigit((unsigned char)*s)) {
        return -1;
    }
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v > 1000000) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int gpu_number(const char *s)
{
    int v;
    if (strncmp(s, "GPU", 3) != 0 || parse_uint(s + 3, &v) != 0) {
        return -1;
    }
    return v;
}

/* 0: a cell, filled; -1: not a cell token */
static int parse_cell(const char *s, cell_t *c)
{
    static const struct {
        const char *name;
        picoll_topo_path_t path;
    } paths[] = {
        {"X", PICOLL_TOPO_PATH_SELF},    {"PIX", PICOLL_TOPO_PATH_PIX},
        {"PXB", PICOLL_TOPO_PATH_PXB},   {"PHB", PICOLL_TOPO_PATH_PHB},
        {"NODE", PICOLL_TOPO_PATH_NODE}, {"SYS", PICOLL_TOPO_PATH_SYS},
        {"SOC", PICOLL_TOPO_PATH_SYS},
    };
    memset(c, 0, sizeof(*c));
    if (strncmp(s, "NV", 2) == 0) {
        int v;
        if (parse_uint(s + 2, &v) != 0 || v < 1) {
            return -1;
        }
        c->is_nv = 1;
        c->nv = v;
        return 0;
    }
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        if (strcmp(s, paths[i].name) == 0) {
            c->path = paths[i].path;
            return 0;
        }
    }
    return -1;
}

static int find_dev(const parser_t *p, const char *name)
{
    for (int d = 0; d < p->ndev; d++) {
        if (strcmp(p->devname[d], name) == 0) {
            return d;
        }
    }
    return -1;
}

static picoll_status_t parse_header(parser_t *p, picoll_topo_t *t, char **tok, int ntok, int line)
{
    int k = 0;
    cell_t c;

    if (gpu_number(tok[0]) < 0) {
        return fail(p, line,
                    "missing header: expected the column names (GPU0 GPU1 ... CPU Affinity), "
                    "found '%s'",
                    tok[0]);
    }
    if (ntok > 1 && parse_cell(tok[1], &c) == 0) {
        return fail(p, line,
                    "missing header: '%s' starts a matrix row, but no line of column names "
                    "(GPU0 GPU1 ... CPU Affinity) comes before it",
                    tok[0]);
    }
    for (; k < ntok; k++) {
        if (!strcmp(tok[k], "CPU") || !strcmp(tok[k], "NUMA") ||
            (!strcmp(tok[k], "GPU") && k + 1 < ntok && !strcmp(tok[k + 1], "NUMA"))) {
            break;
        }
        if (p->ndev == MAX_DEVS) {
            return fail(p, line, "too many devices (at most %d GPUs and %d NICs)",
                        PICOLL_TOPO_MAX_GPUS, PICOLL_TOPO_MAX_NICS);
        }
        if (find_dev(p, tok[k]) >= 0) {
            return fail(p, line, "device '%s' appears twice in the header", tok[k]);
        }
        int g = gpu_number(tok[k]);
        int d = p->ndev;
        if (strlen(tok[k]) >= PICOLL_TOPO_NAME_LEN) {
            return fail(p, line, "device name '%.40s...' is too long", tok[k]);
        }
        snprintf(p->devname[d], sizeof(p->devname[d]), "%s", tok[k]);
        if (g >= 0) {
            if (g != p->ngpu) {
                return fail(p, line, "expected column GPU%d, found '%s'", p->ngpu, tok[k]);
            }
            if (p->ngpu == PICOLL_TOPO_MAX_GPUS) {
                return fail(p, line, "too many GPUs (at most %d)", PICOLL_TOPO_MAX_GPUS);
            }
            p->dev_is_gpu[d] = 1;
            p->dev_index[d] = p->ngpu++;
        } else {
            if (t->nnics == PICOLL_TOPO_MAX_NICS) {
                return fail(p, line, "too many NICs (at most %d)", PICOLL_TOPO_MAX_NICS);
            }
            p->dev_index[d] = t->nnics;
            snprintf(t->nic_names[t->nnics], PICOLL_TOPO_NAME_LEN, "%s", tok[k]);
            t->nnics++;
        }
        p->ndev++;
    }
    while (k < ntok) {
        if (p->naff == 4) {
            return fail(p, line, "too many affinity columns");
        }
        if (k + 1 < ntok && !strcmp(tok[k], "CPU") && !strcmp(tok[k + 1], "Affinity")) {
            p->aff[p->naff++] = AFF_CPU;
            k += 2;
        } else if (k + 1 < ntok && !strcmp(tok[k], "NUMA") && !strcmp(tok[k + 1], "Affinity")) {
            p->aff[p->naff++] = AFF_NUMA;
            k += 2;
        } else if (k + 2 < ntok && !strcmp(tok[k], "GPU") && !strcmp(tok[k + 1], "NUMA") &&
                   !strcmp(tok[k + 2], "ID")) {
            p->aff[p->naff++] = AFF_GPU_NUMA;
            k += 3;
        } else if (!strcmp(tok[k], "NUMA")) {
            p->aff[p->naff++] = AFF_NUMA;
            k += 1;
        } else {
            return fail(p, line,
                        "unknown column '%s' (expected CPU Affinity, NUMA Affinity or GPU NUMA ID "
                        "after the devices)",
                        tok[k]);
        }
    }
    if (p->ngpu == 0) {
        return fail(p, line, "the header names no GPU");
    }
    p->header_line = line;
    return PICOLL_OK;
}

static picoll_status_t parse_row(parser_t *p, picoll_topo_t *t, char **tok, int ntok, int line)
{
    int d = find_dev(p, tok[0]);
    int nent = ntok - 1;

    if (d < 0) {
        return fail(p, line, "unknown device '%s' (not a column of the header, line %d)", tok[0],
                    p->header_line);
    }
    if (p->row_line[d]) {
        return fail(p, line, "second row for %s (first on line %d)", tok[0], p->row_line[d]);
    }
    if (p->dev_is_gpu[d] ? nent != p->ndev + p->naff
                         : (nent != p->ndev && nent != p->ndev + p->naff)) {
        return fail(p, line, "expected %d entries, found %d",
                    p->dev_is_gpu[d] ? p->ndev + p->naff : p->ndev, nent);
    }
    p->row_line[d] = line;
    for (int k = 0; k < p->ndev; k++) {
        cell_t c;
        if (parse_cell(tok[1 + k], &c) != 0) {
            return fail(p, line,
                        "unknown entry '%s' in column %s (expected X, NV#, PIX, PXB, PHB, NODE, "
                        "SYS or SOC)",
                        tok[1 + k], p->devname[k]);
        }
        if ((k == d) != (c.path == PICOLL_TOPO_PATH_SELF)) {
            return fail(p, line,
                        k == d ? "entry for %s itself must be X, found '%s'"
                               : "'X' (self) off the diagonal, in column %s",
                        p->devname[k], tok[1 + k]);
        }
        if (c.is_nv && !(p->dev_is_gpu[d] && p->dev_is_gpu[k])) {
            return fail(p, line, "'%s' between %s and %s: NV# only joins two GPUs", tok[1 + k],
                        tok[0], p->devname[k]);
        }
        c.line = line;
        if (p->dev_is_gpu[d]) {
            p->cell[p->dev_index[d]][k] = c;
        }
    }
    if (!p->dev_is_gpu[d]) {
        return PICOLL_OK;
    }
    picoll_topo_gpu_t *g = &t->gpus[p->dev_index[d]];
    for (int a = 0; a < p->naff; a++) {
        const char *v = tok[1 + p->ndev + a];
        int num;
        switch (p->aff[a]) {
        case AFF_CPU: snprintf(g->cpu_affinity, sizeof(g->cpu_affinity), "%s", v); break;
        case AFF_NUMA:
        case AFF_GPU_NUMA:
            if (!strcmp(v, "N/A")) {
                num = -1;
            } else if (parse_uint(v, &num) != 0) {
                return fail(p, line, "%s '%s' is neither a number nor N/A",
                            p->aff[a] == AFF_NUMA ? "NUMA Affinity" : "GPU NUMA ID", v);
            }
            if (p->aff[a] == AFF_NUMA || g->numa_node < 0) {
                g->numa_node = num;
            }
            break;
        }
    }
    return PICOLL_OK;
}

static void cell_name(const cell_t *c, char *buf, size_t len)
{
    if (c->is_nv) {
        snprintf(buf, len, "NV%d", c->nv);
    } else {
        snprintf(buf, len, "%s", picoll_topo_path_name(c->path));
    }
}

static picoll_status_t finish(parser_t *p, picoll_topo_t *t, int last_line)
{
    t->ngpus = p->ngpu;
    for (int d = 0; d < p->ndev; d++) {
        if (p->dev_is_gpu[d] && !p->row_line[d]) {
            return fail(p, last_line, "no row for %s (a column of the header, line %d)",
                        p->devname[d], p->header_line);
        }
    }
    /* GPU-GPU cells, checked for symmetry */
    int gpu_dev[PICOLL_TOPO_MAX_GPUS];
    for (int d = 0; d < p->ndev; d++) {
        if (p->dev_is_gpu[d]) {
            gpu_dev[p->dev_index[d]] = d;
        }
    }
    for (int i = 0; i < p->ngpu; i++) {
        for (int j = 0; j < p->ngpu; j++) {
            const cell_t *a = &p->cell[i][gpu_dev[j]], *b = &p->cell[j][gpu_dev[i]];
            if (a->is_nv != b->is_nv || a->nv != b->nv || a->path != b->path) {
                char sa[16], sb[16];
                cell_name(a, sa, sizeof(sa));
                cell_name(b, sb, sizeof(sb));
                return fail(p, b->line, "GPU%d/GPU%d is %s but GPU%d/GPU%d (line %d) is %s", j, i,
                            sb, i, j, a->line, sa);
            }
            picoll_topo_link_t *l = &t->links[i][j];
            if (i == j) {
                l->path = PICOLL_TOPO_PATH_SELF;
                l->p2p = PICOLL_TOPO_P2P_OK;
            } else if (a->is_nv) {
                l->nvlinks = a->nv;
                l->path = PICOLL_TOPO_PATH_UNKNOWN; /* NV# hides the PCIe path */
                l->p2p = PICOLL_TOPO_P2P_OK;
                t->gpus[i].total_nvlinks += a->nv;
            } else {
                l->path = a->path;
                l->p2p = a->path == PICOLL_TOPO_PATH_SYS ? PICOLL_TOPO_P2P_NO : PICOLL_TOPO_P2P_OK;
            }
        }
    }
    /* more links than a GPU has ports: they go through NVSwitches */
    for (int i = 0; i < p->ngpu; i++) {
        for (int j = 0; j < p->ngpu; j++) {
            picoll_topo_link_t *l = &t->links[i][j];
            if (l->nvlinks > 0 && (t->gpus[i].total_nvlinks > PICOLL_TOPO_MAX_GPU_NVLINKS ||
                                   t->gpus[j].total_nvlinks > PICOLL_TOPO_MAX_GPU_NVLINKS)) {
                l->nvswitch_links = l->nvlinks;
                l->nvlinks = 0;
            }
        }
    }
    /* GPU-NIC paths, and the nearest NIC of each GPU (first on ties) */
    for (int d = 0; d < p->ndev; d++) {
        if (!p->dev_is_gpu[d]) {
            int n = p->dev_index[d];
            for (int i = 0; i < p->ngpu; i++) {
                picoll_topo_path_t path = p->cell[i][d].path;
                picoll_topo_gpu_t *g = &t->gpus[i];
                t->gpu_nic[i][n] = path;
                if (g->nic < 0 || path < g->nic_path) {
                    g->nic = n;
                    g->nic_path = path;
                }
            }
        }
    }
    picoll_topo_classify(t);
    return PICOLL_OK;
}

picoll_status_t picoll_topo_parse_text(const char *text, const char *name, picoll_topo_t *out,
                                       char *err, size_t errlen)
{
    enum { ST_HEADER, ST_ROWS, ST_LEGEND, ST_NIC_LEGEND } st = ST_HEADER;
    parser_t *p = calloc(1, sizeof(*p));
    char *buf = malloc(MAX_LINE);
    char *tok[MAX_TOKENS];
    picoll_status_t status = PICOLL_OK;
    int line = 0;

    if (p == NULL || buf == NULL) {
        free(p);
        free(buf);
        snprintf(err, errlen, "topo file %s: out of memory", name);
        return PICOLL_ERR_NO_MEMORY;
    }
    p->name = name;
    p->err = err;
    p->errlen = errlen;
    picoll_topo_init(out, "");
    snprintf(out->source, sizeof(out->source), "file %s", name);

    for (const char *s = text; *s != '\0' && status == PICOLL_OK;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        line++;
        if (len >= MAX_LINE) {
            status = fail(p, line, "line longer than %d characters", MAX_LINE - 1);
            break;
        }
        memcpy(buf, s, len);
        buf[len] = '\0';
        s = nl ? nl + 1 : s + len;

        clean_line(buf);
        int ntok = tokenize(buf, tok, MAX_TOKENS);
        if (ntok < 0) {
            status = fail(p, line, "too many entries (at most %d)", MAX_TOKENS);
            break;
        }
        if (ntok == 0 || tok[0][0] == '#') {
            continue;
        }
        if (!strcmp(tok[0], "Legend:")) {
            if (st == ST_HEADER) {
                status = fail(p, line, "missing header: 'Legend:' before any matrix");
            }
            st = ST_LEGEND;
            continue;
        }
        if (ntok >= 2 && !strcmp(tok[0], "NIC") && !strcmp(tok[1], "Legend:")) {
            st = ST_NIC_LEGEND;
            continue;
        }
        switch (st) {
        case ST_HEADER:
            status = parse_header(p, out, tok, ntok, line);
            st = ST_ROWS;
            break;
        case ST_ROWS: status = parse_row(p, out, tok, ntok, line); break;
        case ST_LEGEND: break;
        case ST_NIC_LEGEND: {
            /* "NIC0: mlx5_0" gives the NIC's own name */
            size_t l0 = strlen(tok[0]);
            if (ntok == 2 && l0 > 1 && tok[0][l0 - 1] == ':') {
                tok[0][l0 - 1] = '\0';
                int d = find_dev(p, tok[0]);
                if (d >= 0 && !p->dev_is_gpu[d]) {
                    snprintf(out->nic_names[p->dev_index[d]], PICOLL_TOPO_NAME_LEN, "%s", tok[1]);
                }
            }
            break;
        }
        }
    }
    if (status == PICOLL_OK && st == ST_HEADER) {
        status = fail(p, line + 1, "missing header: no topology matrix in the file");
    }
    if (status == PICOLL_OK) {
        status = finish(p, out, line);
    }
    if (status != PICOLL_OK) {
        picoll_topo_init(out, "");
        snprintf(out->source, sizeof(out->source), "none (%s)", err);
    }
    free(buf);
    free(p);
    return status;
}

picoll_status_t picoll_topo_parse_file(const char *path, picoll_topo_t *out, char *err,
                                       size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t len = 0, cap = 0;
    picoll_status_t status;

    if (f == NULL) {
        snprintf(err, errlen, "topo file %s: cannot open: %s", path, strerror(errno));
        picoll_topo_init(out, "none (topo file unreadable)");
        return PICOLL_ERR_TOPOLOGY;
    }
    for (;;) {
        if (cap - len < 4096) {
            char *n;
            if (cap > (1u << 24) || (n = realloc(text, cap + 65536)) == NULL) {
                free(text);
                fclose(f);
                snprintf(err, errlen, "topo file %s: too large or out of memory", path);
                picoll_topo_init(out, "none (topo file unreadable)");
                return PICOLL_ERR_TOPOLOGY;
            }
            text = n;
            cap += 65536;
        }
        size_t got = fread(text + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) {
            break;
        }
    }
    int rerr = ferror(f);
    fclose(f);
    text[len] = '\0';
    if (rerr) {
        free(text);
        snprintf(err, errlen, "topo file %s: read error", path);
        picoll_topo_init(out, "none (topo file unreadable)");
        return PICOLL_ERR_TOPOLOGY;
    }
    status = picoll_topo_parse_text(text, path, out, err, errlen);
    free(text);
    return status;
}
