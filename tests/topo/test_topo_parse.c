/* Malformed topology texts give an error naming the file and the line; variants of the real
 * format parse. */
#include "build-config.h"
#include "test_topo.h"
#include "topo/topo.h"

#include <stdlib.h>
#include <unistd.h>

static picoll_topo_t t;

/* text must fail with an error containing each of the substrings want1 and want2 */
static void bad(int line, const char *text, const char *want1, const char *want2)
{
    char err[512] = "";
    picoll_status_t st = picoll_topo_parse_text(text, "T", &t, err, sizeof(err));
    if (st != PICOLL_ERR_TOPOLOGY || !strstr(err, want1) || (want2 && !strstr(err, want2))) {
        fprintf(stderr, "test_topo_parse.c:%d: status %s, error \"%s\"; expected \"%s\"%s%s\n",
                line, picoll_status_name(st), err, want1, want2 ? " and " : "", want2 ? want2 : "");
        test_failures++;
    }
    CHECK_EQ(t.ngpus, 0); /* no half-parsed topology comes back */
}

static void good(int line, const char *text, const char *cls)
{
    char err[512] = "";
    picoll_status_t st = picoll_topo_parse_text(text, "T", &t, err, sizeof(err));
    if (st != PICOLL_OK || strcmp(picoll_topo_class_name(t.cls.cls), cls) != 0) {
        fprintf(stderr, "test_topo_parse.c:%d: status %s, class %s, error \"%s\"; expected %s\n",
                line, picoll_status_name(st), picoll_topo_class_name(t.cls.cls), err, cls);
        test_failures++;
    }
}

int main(void)
{
    /* wrong column count */
    bad(__LINE__,
        "     GPU0 GPU1 CPU Affinity\n"
        "GPU0  X   NV1  0-7\n"
        "GPU1 NV1   X\n",
        "topo file T line 3: ", "expected 3 entries, found 2");
    /* unknown token */
    bad(__LINE__,
        "     GPU0 GPU1 CPU Affinity\n"
        "GPU0  X   FOO  0-7\n"
        "GPU1 NV1   X   0-7\n",
        "line 2: ", "unknown entry 'FOO' in column GPU1");
    bad(__LINE__,
        "     GPU0 GPU1\n"
        "GPU0  X   NV0\n"
        "GPU1 NV0   X\n",
        "line 2: ", "unknown entry 'NV0'");
    /* missing header: the first line is a row; comments count as lines */
    bad(__LINE__,
        "GPU0  X   NV1  0-7\n"
        "GPU1 NV1   X   0-7\n",
        "line 1: ", "missing header");
    bad(__LINE__,
        "# recorded on node 7\n"
        "\n"
        "GPU0  X   NV1  0-7\n",
        "line 3: ", "missing header");
    bad(__LINE__, "", "line 1: ", "missing header");
    bad(__LINE__, "Legend:\n  X = Self\n", "line 1: ", "missing header");
    bad(__LINE__, "hello world\n", "line 1: ", "missing header");
    /* header problems */
    bad(__LINE__, "  GPU1 GPU0\nGPU1 X PIX\nGPU0 PIX X\n", "line 1: ", "expected column GPU0");
    bad(__LINE__, "  GPU0 GPU1 CPU Foo\n", "line 1: ", "unknown column");
    /* rows: unknown device, duplicate, missing, X misplaced, asymmetric */
    bad(__LINE__, "  GPU0 GPU1\nGPU0 X PIX\nGPU7 PIX X\n", "line 3: ", "unknown device 'GPU7'");
    bad(__LINE__, "  GPU0 GPU1\nGPU0 X PIX\nGPU0 X PIX\n", "line 3: ", "second row for GPU0");
    bad(__LINE__, "  GPU0 GPU1\nGPU0 X PIX\n", "line 2: ", "no row for GPU1");
    bad(__LINE__, "  GPU0 GPU1\nGPU0 PIX X\nGPU1 X PIX\n", "line 2: ", "must be X");
    bad(__LINE__, "  GPU0 GPU1\nGPU0 X NV2\nGPU1 NV1 X\n",
        "line 3: ", "GPU1/GPU0 is NV1 but GPU0/GPU1 (line 2) is NV2");
    bad(__LINE__, "  GPU0 NIC0\nGPU0 X NV2\nNIC0 NV2 X\n", "line 2: ", "NV# only joins two GPUs");
    bad(__LINE__, "  GPU0 GPU1 NUMA Affinity\nGPU0 X PIX zero\nGPU1 PIX X 0\n",
        "line 2: ", "NUMA Affinity 'zero'");

    /* a file: the error names the path and the line */
    char path[] = "/tmp/picoll_topo_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        const char *txt = "\tGPU0\tGPU1\tGPU2\n"
                          "GPU0\t X \tNV1\tNV1\n"
                          "GPU1\tNV1\t X \tNV1\n"
                          "GPU2\tNV1\tNV1\n";
        CHECK_EQ(write(fd, txt, strlen(txt)), (long long)strlen(txt));
        close(fd);
        char err[512], want[600];
        CHECK_EQ(picoll_topo_parse_file(path, &t, err, sizeof(err)), PICOLL_ERR_TOPOLOGY);
        snprintf(want, sizeof(want), "topo file %s line 4: expected 3 entries, found 2", path);
        CHECK_STR(err, want);
        unlink(path);
        CHECK_EQ(picoll_topo_parse_file(path, &t, err, sizeof(err)), PICOLL_ERR_TOPOLOGY);
        CHECK(strstr(err, "cannot open") != NULL);
    }

    /* variants of the real format */
    good(__LINE__, "  GPU0 GPU1 CPU Affinity\r\nGPU0 X SOC 0-7\r\nGPU1 SOC X 8-15\r\n", "pcie");
    CHECK_EQ(t.links[0][1].path, PICOLL_TOPO_PATH_SYS);
    good(__LINE__,
         "\033[4m\tGPU0\tGPU1\tCPU Affinity\tNUMA\033[0m\nGPU0\t X \tNV2\t0-7\t0\nGPU1\tNV2\t X "
         "\t0-7\t1\n",
         "full-mesh");
    CHECK_EQ(t.gpus[1].numa_node, 1);
    good(__LINE__, "  GPU0 CPU Affinity NUMA Affinity GPU NUMA ID\nGPU0 X 0-7 N/A N/A\n", "single");
    CHECK_EQ(t.gpus[0].numa_node, -1);
    /* NVSwitch inference: 2 GPUs with NV18 are a bridge-sized direct link; 3 GPUs with NV12 to
     * each peer need 24 links, more than any GPU has */
    good(__LINE__, "  GPU0 GPU1\nGPU0 X NV18\nGPU1 NV18 X\n", "full-mesh");
    good(__LINE__, "  GPU0 GPU1 GPU2\nGPU0 X NV12 NV12\nGPU1 NV12 X NV12\nGPU2 NV12 NV12 X\n",
         "nvswitch");
    CHECK_EQ(t.links[0][2].nvswitch_links, 12);
    /* not an HCM: 8 GPUs in a ring */
    good(__LINE__,
         "  GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7\n"
         "GPU0 X NV1 PIX PIX PIX PIX PIX NV1\n"
         "GPU1 NV1 X NV1 PIX PIX PIX PIX PIX\n"
         "GPU2 PIX NV1 X NV1 PIX PIX PIX PIX\n"
         "GPU3 PIX PIX NV1 X NV1 PIX PIX PIX\n"
         "GPU4 PIX PIX PIX NV1 X NV1 PIX PIX\n"
         "GPU5 PIX PIX PIX PIX NV1 X NV1 PIX\n"
         "GPU6 PIX PIX PIX PIX PIX NV1 X NV1\n"
         "GPU7 NV1 PIX PIX PIX PIX PIX NV1 X\n",
         "mixed");
    CHECK_EQ(t.cls.subset_size, 2);
    CHECK_EQ(t.cls.nsubsets, 8);

    if (test_failures) {
        fprintf(stderr, "%d check(s) failed\n", test_failures);
        return 1;
    }
    printf("all parse checks passed\n");
    return 0;
}
