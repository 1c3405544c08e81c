/* Detection on this machine: it must not crash; without NVML or GPUs the class is none (host
 * only), with GPUs every GPU has a bus id. Loading through the config follows PICOLL_TOPO_FILE. */
#include "util/config.h"
#include "build-config.h"
#include "test_topo.h"
#include "topo/topo.h"

#include <stdlib.h>

int main(void)
{
    picoll_topo_t *t = malloc(sizeof(*t));
    picoll_config_t cfg;
    char err[512];

    CHECK_EQ(picoll_topo_detect(t), PICOLL_OK);
    printf("detected: %s, %d GPU(s), class %s\n", t->source, t->ngpus,
           picoll_topo_class_name(t->cls.cls));
    if (t->ngpus == 0) {
        CHECK_STR(picoll_topo_class_name(t->cls.cls), "none");
        CHECK(strstr(t->source, "host only") != NULL);
        int ranks[2] = {0, 0};
        CHECK_EQ(picoll_topo_reach(t, ranks, 2), PICOLL_TOPO_REACH_NONE);
    } else {
        CHECK(t->cls.cls != PICOLL_TOPO_CLASS_NONE);
        for (int i = 0; i < t->ngpus; i++) {
            CHECK(t->gpus[i].bus_id[0] != '\0');
            CHECK_EQ(picoll_topo_find_bus_id(t, t->gpus[i].bus_id), i);
        }
    }
    /* a second call (NVML loaded once) gives the same topology */
    picoll_topo_t *t2 = malloc(sizeof(*t2));
    CHECK_EQ(picoll_topo_detect(t2), PICOLL_OK);
    CHECK_EQ(picoll_topo_hash(t2), picoll_topo_hash(t));

    /* picoll_topo_load: no file set: detection; a file that does not exist: an error */
    picoll_config_load(&cfg, NULL);
    CHECK_EQ(picoll_topo_load(&cfg, t2, err, sizeof(err)), PICOLL_OK);
    CHECK_EQ(t2->ngpus, t->ngpus);
    char *env[] = {"PICOLL_TOPO_FILE=/nonexistent/topo.txt", NULL};
    picoll_config_load(&cfg, env);
    CHECK_EQ(picoll_topo_load(&cfg, t2, err, sizeof(err)), PICOLL_ERR_TOPOLOGY);
    CHECK(strstr(err, "/nonexistent/topo.txt") != NULL);
    CHECK_EQ(t2->ngpus, 0);

    /* bus ids */
    char b[PICOLL_TOPO_BUSID_LEN];
    CHECK_EQ(picoll_topo_normalize_bus_id("00000000:3B:00.0", b, sizeof(b)), 0);
    CHECK_STR(b, "0000:3b:00.0");
    CHECK_EQ(picoll_topo_normalize_bus_id("07:00.0", b, sizeof(b)), 0);
    CHECK_STR(b, "0000:07:00.0");
    CHECK(picoll_topo_normalize_bus_id("GPU0", b, sizeof(b)) != 0);

    free(t);
    free(t2);
    if (test_failures) {
        fprintf(stderr, "%d check(s) failed\n", test_failures);
        return 1;
    }
    printf("all detection checks passed\n");
    return 0;
}
