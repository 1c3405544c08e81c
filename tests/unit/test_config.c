/* Unit test of the PICOLL_* configuration table and its parsers (src/config.c). No MPI calls. */
#include "build-config.h" /* _GNU_SOURCE, as in src/ */
#include "util/config.h"
#include "util/log.h"
#include "check.h"

#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const picoll_config_var_t *var_or_die(const char *name)
{
    const picoll_config_var_t *var = picoll_config_find(name);
    if (var == NULL) {
        printf("FAIL: %s is not in the configuration table\n", name);
        exit(1);
    }
    return var;
}

/* ---------------------------------------------------------------- sizes */

static void test_sizes(void)
{
    static const struct {
        const char *text;
        size_t value;
    } good[] = {
        {"0", 0},
        {"4096", 4096},
        {"256k", 256u << 10},
        {"256K", 256u << 10},
        {"10M", 10u << 20},
        {"10m", 10u << 20},
        {"1G", (size_t)1 << 30},
        {"2MB", 2u << 20},
        {"64KiB", 64u << 10},
        {"3GiB", (size_t)3 << 30},
        {"7b", 7},
        {"18446744073709551615", SIZE_MAX},          /* largest plain value (LP64) */
        {"17179869183G", (size_t)17179869183 << 30}, /* largest that fits with G */
    };
    static const char *const bad[] = {
        "",
        "-1",
        "12x",
        "k",
        "M",
        "1.5M",
        "+5",
        "0x10",
        "1 0",
        "10MM",
        "1T",
        "1e6",
        "18446744073709551616",    /* 2^64: overflow in the number */
        "99999999999999999999999", /* far beyond */
        "17179869184G",            /* 2^64 once scaled */
        "18014398509481984k",      /* 2^64 once scaled */
        "16777216T",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t out = 12345;
        int rc = picoll_parse_size(good[i].text, &out);
        CHECK(rc == 0, "picoll_parse_size(\"%s\") rejected a valid size", good[i].text);
        CHECK(rc != 0 || out == good[i].value, "picoll_parse_size(\"%s\") = %zu, expected %zu",
              good[i].text, out, good[i].value);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t out = 12345;
        int rc = picoll_parse_size(bad[i], &out);
        CHECK(rc != 0, "picoll_parse_size(\"%s\") accepted an invalid size (got %zu)", bad[i], out);
        CHECK(out == 12345, "picoll_parse_size(\"%s\") wrote its output on failure", bad[i]);
    }
}

/* ---------------------------------------------------------------- error messages */

/* Tokens of an error message: runs of characters that can appear in a value. */
static size_t tokenize(const char *msg, char tokens[][64], size_t max)
{
    size_t n = 0;
    const char *p = msg;
    while (*p != '\0' && n < max) {
        while (*p != '\0' && !(isalnum((unsigned char)*p) || *p == '-' || *p == '.')) {
            p++;
        }
        size_t len = 0;
        while (p[len] != '\0' &&
               (isalnum((unsigned char)p[len]) || p[len] == '-' || p[len] == '.')) {
            len++;
        }
        if (len == 0) {
            break;
        }
        size_t keep = len < 63 ? len : 63;
        memcpy(tokens[n], p, keep);
        tokens[n][keep] = '\0';
        while (keep > 0 && tokens[n][keep - 1] == '.') {
            tokens[n][--keep] = '\0'; /* end of a sentence */
        }
        if (keep > 0) {
            n++;
        }
        p += len;
    }
    return n;
}

static int has_token(char tokens[][64], size_t n, const char *word)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(tokens[i], word) == 0) {
            return 1;
        }
    }
    return 0;
}

/* A malformed value must give PICOLL_ERR_CONFIG with a message that names the variable and the
 * rejected text and describes the accepted form well enough that a value from the message itself
 * is accepted. */
static void check_rejected(const char *name, const char *text)
{
    const picoll_config_var_t *var = var_or_die(name);
    picoll_config_t cfg, scratch;
    char err[512], scratch_err[512];
    char tokens[128][64];
    size_t ntok;

    picoll_config_load(&cfg, NULL);
    memset(err, 0, sizeof(err));
    picoll_status_t st = picoll_config_parse(var, text, &cfg, err, sizeof(err));
    CHECK(st == PICOLL_ERR_CONFIG, "%s=\"%s\" accepted (status %d), expected PICOLL_ERR_CONFIG",
          name, text, (int)st);
    if (st != PICOLL_ERR_CONFIG) {
        return;
    }
    CHECK(strstr(err, name) != NULL, "message for %s=\"%s\" does not name the variable: %s", name,
          text, err);
    CHECK(text[0] == '\0' || strstr(err, text) != NULL,
          "message for %s=\"%s\" does not quote the value: %s", name, text, err);

    ntok = tokenize(err, tokens, 128);
    switch (var->type) {
    case PICOLL_CFG_BOOL: {
        int yes = 0, no = 0;
        for (size_t i = 0; i < ntok; i++) {
            scratch = cfg;
            if (picoll_config_parse(var, tokens[i], &scratch, scratch_err, sizeof(scratch_err)) ==
                PICOLL_OK) {
                int v = *(int *)((char *)&scratch + var->offset);
                yes |= v == 1;
                no |= v == 0;
            }
        }
        CHECK(yes && no, "message for %s=\"%s\" shows no accepted true and false values: %s", name,
              text, err);
        break;
    }
    case PICOLL_CFG_SIZE: {
        int example = 0;
        for (size_t i = 0; i < ntok; i++) {
            size_t v;
            int unit = isdigit((unsigned char)tokens[i][0]) &&
                       isalpha((unsigned char)tokens[i][strlen(tokens[i]) - 1]);
            if (unit && strcmp(tokens[i], text) != 0 && picoll_parse_size(tokens[i], &v) == 0) {
                example = 1;
            }
        }
        CHECK(example, "message for %s=\"%s\" shows no accepted size with a unit: %s", name, text,
              err);
        CHECK(strstr(err, "size") != NULL,
              "message for %s=\"%s\" does not say a size is expected: %s", name, text, err);
        break;
    }
    case PICOLL_CFG_INT: {
        char lo[32], hi[32];
        snprintf(lo, sizeof(lo), "%ld", var->min);
        snprintf(hi, sizeof(hi), "%ld", var->max);
        CHECK(has_token(tokens, ntok, lo) && has_token(tokens, ntok, hi),
              "message for %s=\"%s\" does not give the range %s..%s: %s", name, text, lo, hi, err);
        break;
    }
    case PICOLL_CFG_DOUBLE: {
        int example = 0;
        for (size_t i = 0; i < ntok; i++) {
            scratch = cfg;
            if (isdigit((unsigned char)tokens[i][0]) && strcmp(tokens[i], text) != 0 &&
                picoll_config_parse(var, tokens[i], &scratch, scratch_err, sizeof(scratch_err)) ==
                    PICOLL_OK) {
                example = 1;
            }
        }
        CHECK(example, "message for %s=\"%s\" shows no accepted number: %s", name, text, err);
        break;
    }
    case PICOLL_CFG_ENUM: {
        char choices[256];
        snprintf(choices, sizeof(choices), "%s", var->choices);
        for (char *save = NULL, *c = strtok_r(choices, ",", &save); c != NULL;
             c = strtok_r(NULL, ",", &save)) {
            CHECK(has_token(tokens, ntok, c), "message for %s=\"%s\" does not list choice %s: %s",
                  name, text, c, err);
        }
        break;
    }
    case PICOLL_CFG_STRING: break;
    }
}

/* ---------------------------------------------------------------- typed parses */

static void test_bools(void)
{
    static const char *const yes[] = {"1", "y", "yes", "on", "true", "YES", "On", "TRUE"};
    static const char *const no[] = {"0", "n", "no", "off", "false", "NO", "Off", "False"};
    static const char *const bad[] = {"", "2", "-1", "yess", "tru", "o", "1 ", "enable", "10"};
    const picoll_config_var_t *var = var_or_die("PICOLL_STATS");
    picoll_config_t cfg;
    char err[512];

    CHECK(var->type == PICOLL_CFG_BOOL, "PICOLL_STATS is not a boolean");
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        picoll_config_load(&cfg, NULL);
        cfg.stats = 0;
        CHECK(picoll_config_parse(var, yes[i], &cfg, err, sizeof(err)) == PICOLL_OK &&
                  cfg.stats == 1,
              "PICOLL_STATS=%s should give 1 (got %d)", yes[i], cfg.stats);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        picoll_config_load(&cfg, NULL);
        cfg.stats = 1;
        CHECK(picoll_config_parse(var, no[i], &cfg, err, sizeof(err)) == PICOLL_OK &&
                  cfg.stats == 0,
              "PICOLL_STATS=%s should give 0 (got %d)", no[i], cfg.stats);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        check_rejected("PICOLL_STATS", bad[i]);
        check_rejected("PICOLL_ENABLE", bad[i]);
    }
}

static void test_enums(void)
{
    static const struct {
        const char *name, *text;
        int value;
    } good[] = {
        {"PICOLL_HOST", "off", PICOLL_HOST_OFF},
        {"PICOLL_HOST", "on", PICOLL_HOST_ON},
        {"PICOLL_HOST", "auto", PICOLL_HOST_AUTO},
        {"PICOLL_HOST", "AUTO", PICOLL_HOST_AUTO},
        {"PICOLL_LOG_LEVEL", "error", PICOLL_LOG_ERROR},
        {"PICOLL_LOG_LEVEL", "warn", PICOLL_LOG_WARN},
        {"PICOLL_LOG_LEVEL", "info", PICOLL_LOG_INFO},
        {"PICOLL_LOG_LEVEL", "debug", PICOLL_LOG_DEBUG},
        {"PICOLL_LOG_LEVEL", "Trace", PICOLL_LOG_TRACE},
        {"PICOLL_CUDA_STAGING", "auto", PICOLL_STAGING_AUTO},
        {"PICOLL_CUDA_STAGING", "on", PICOLL_STAGING_ON},
        {"PICOLL_CUDA_STAGING", "OFF", PICOLL_STAGING_OFF},
        {"PICOLL_CMA", "auto", PICOLL_CMA_AUTO},
        {"PICOLL_CMA", "Off", PICOLL_CMA_OFF},
    };
    static const char *const bad[] = {"", "of", "offf", "on,auto", "o", "1", " on", "auto "};
    picoll_config_t cfg;
    char err[512];

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        const picoll_config_var_t *var = var_or_die(good[i].name);
        picoll_config_load(&cfg, NULL);
        int *field = (int *)((char *)&cfg + var->offset);
        *field = -7;
        CHECK(var->type == PICOLL_CFG_ENUM, "%s is not an enum", good[i].name);
        CHECK(picoll_config_parse(var, good[i].text, &cfg, err, sizeof(err)) == PICOLL_OK &&
                  *field == good[i].value,
              "%s=%s should give %d (got %d)", good[i].name, good[i].text, good[i].value, *field);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        check_rejected("PICOLL_HOST", bad[i]);
    }
    check_rejected("PICOLL_CUDA_STAGING", "1");
    check_rejected("PICOLL_CUDA_STAGING", "yes");
    check_rejected("PICOLL_CUDA_STAGING", "always");
    check_rejected("PICOLL_CMA", "on");
    check_rejected("PICOLL_CMA", "0");
    check_rejected("PICOLL_CMA", "");
    check_rejected("PICOLL_LOG_LEVEL", "verbose");
    check_rejected("PICOLL_LOG_LEVEL", "warning");
}

static void test_ints(void)
{
    static const struct {
        const char *text;
        long value;
    } good[] = {{"-1", -1}, {"0", 0}, {"1", 1}, {"3", 3}, {"2147483647", INT_MAX}};
    static const char *const bad[] = {
        "-2",  "2147483648", "-9223372036854775809", "99999999999999999999", "", "abc", "3x",
        "1.0", "0x1"};
    const picoll_config_var_t *var = var_or_die("PICOLL_TEST_FAIL_SETUP");
    picoll_config_t cfg;
    char err[512];

    CHECK(var->type == PICOLL_CFG_INT && var->min == -1 && var->max == INT_MAX,
          "PICOLL_TEST_FAIL_SETUP should be an integer in [-1, INT_MAX]");
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        picoll_config_load(&cfg, NULL);
        cfg.test_fail_setup = 12345;
        CHECK(picoll_config_parse(var, good[i].text, &cfg, err, sizeof(err)) == PICOLL_OK &&
                  cfg.test_fail_setup == good[i].value,
              "PICOLL_TEST_FAIL_SETUP=%s should give %ld (got %ld)", good[i].text, good[i].value,
              cfg.test_fail_setup);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        check_rejected("PICOLL_TEST_FAIL_SETUP", bad[i]);
    }
}

static void test_doubles(void)
{
    static const struct {
        const char *text;
        double value;
    } good[] = {{"0", 0.0}, {"30", 30.0}, {"0.5", 0.5}, {"1e3", 1000.0}};
    static const char *const bad[] = {"", "-1", "abc", "1x", "nan", "inf", "-0.5", "1e300"};
    const picoll_config_var_t *var = var_or_die("PICOLL_TIMEOUT");
    picoll_config_t cfg;
    char err[512];

    CHECK(var->type == PICOLL_CFG_DOUBLE, "PICOLL_TIMEOUT is not a number");
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        picoll_config_load(&cfg, NULL);
        cfg.timeout = -3;
        CHECK(picoll_config_parse(var, good[i].text, &cfg, err, sizeof(err)) == PICOLL_OK &&
                  cfg.timeout == good[i].value,
              "PICOLL_TIMEOUT=%s should give %g (got %g)", good[i].text, good[i].value,
              cfg.timeout);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        check_rejected("PICOLL_TIMEOUT", bad[i]);
    }
}

static void test_size_vars(void)
{
    static const char *const names[] = {"PICOLL_WORKSPACE_SIZE", "PICOLL_ALLREDUCE_ONESHOT_MAX",
                                        "PICOLL_ALLREDUCE_TWOSHOT_MAX"};
    static const char *const bad[] = {"12x",         "-1", "", "1.5M", "18446744073709551616",
                                      "17179869184G"};
    picoll_config_t cfg;
    char err[512];

    for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
        const picoll_config_var_t *var = var_or_die(names[n]);
        size_t *field;
        CHECK(var->type == PICOLL_CFG_SIZE, "%s is not a size", names[n]);
        picoll_config_load(&cfg, NULL);
        field = (size_t *)((char *)&cfg + var->offset);
        CHECK(picoll_config_parse(var, "64KiB", &cfg, err, sizeof(err)) == PICOLL_OK &&
                  *field == 65536,
              "%s=64KiB should give 65536 (got %zu)", names[n], *field);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            check_rejected(names[n], bad[i]);
        }
    }
}

/* ---------------------------------------------------------------- the table */

static void test_table(void)
{
    size_t count = 0;
    const picoll_config_var_t *vars = picoll_config_vars(&count);
    picoll_config_t cfg, again;
    char err[512], text[256], text2[256];

    CHECK(vars != NULL && count > 0, "empty configuration table");
    for (size_t i = 0; i < count; i++) {
        const picoll_config_var_t *v = &vars[i];
        CHECK(v->name != NULL && strncmp(v->name, "PICOLL_", 7) == 0 && v->name[7] != '\0',
              "entry %zu: name \"%s\" does not start with PICOLL_", i,
              v->name ? v->name : "(null)");
        for (const char *p = v->name + 7; *p; p++) {
            CHECK(isupper((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_',
                  "%s: names are upper case", v->name);
        }
        for (size_t j = 0; j < i; j++) {
            CHECK(strcmp(v->name, vars[j].name) != 0, "%s appears twice in the table", v->name);
            CHECK(v->offset != vars[j].offset, "%s and %s share a field", v->name, vars[j].name);
        }
        CHECK(picoll_config_find(v->name) == v, "picoll_config_find(%s) does not return its entry",
              v->name);
        CHECK(v->doc != NULL && strlen(v->doc) > 10, "%s has no documentation line", v->name);
        /* one sentence each (the measurements behind a default are in docs/performance.md) */
        CHECK(v->doc == NULL || (strstr(v->doc, ". ") == NULL && strlen(v->doc) <= 200),
              "%s: the documentation is more than one short sentence", v->name);
        CHECK(v->internal == (strncmp(v->name, "PICOLL_TEST_", 12) == 0),
              "%s: the tests' own variables, and only they, are internal", v->name);
        CHECK(v->def != NULL, "%s has no default", v->name);
        CHECK(v->offset < sizeof(picoll_config_t), "%s: offset outside picoll_config_t", v->name);
        if (v->type == PICOLL_CFG_ENUM) {
            CHECK(v->choices != NULL && v->choices[0] != '\0', "enum %s has no choices", v->name);
        }
        if (v->type == PICOLL_CFG_INT) {
            CHECK(v->min <= v->max, "%s: min > max", v->name);
        }

        /* the default parses, and so does the default as formatted back */
        memset(&cfg, 0, sizeof(cfg));
        picoll_status_t st = picoll_config_parse(v, v->def, &cfg, err, sizeof(err));
        CHECK(st == PICOLL_OK, "default %s=\"%s\" does not parse: %s", v->name, v->def, err);
        picoll_config_format(v, &cfg, text, sizeof(text));
        memset(&again, 0, sizeof(again));
        st = picoll_config_parse(v, text, &again, err, sizeof(err));
        picoll_config_format(v, &again, text2, sizeof(text2));
        CHECK(st == PICOLL_OK && strcmp(text, text2) == 0,
              "%s: formatted default \"%s\" does not parse back to the same value (\"%s\")",
              v->name, text, text2);
    }

    CHECK(picoll_config_find("PICOLL_FOO") == NULL, "picoll_config_find found PICOLL_FOO");
    CHECK(picoll_config_find("PICOLL_ENABLE") != NULL, "PICOLL_ENABLE not found");
    CHECK(picoll_config_find("picoll_enable") == NULL, "variable names are case-sensitive");

    /* defaults as documented */
    picoll_status_t st = picoll_config_load(&cfg, NULL);
    CHECK(st == PICOLL_OK, "picoll_config_load(NULL) failed: %d", (int)st);
    CHECK(cfg.enable == 1, "PICOLL_ENABLE defaults to %d, expected 1", cfg.enable);
    CHECK(cfg.stats == 0, "PICOLL_STATS defaults to %d, expected 0", cfg.stats);
    CHECK(cfg.host == PICOLL_HOST_AUTO, "PICOLL_HOST defaults to %d, expected auto", cfg.host);
    CHECK(cfg.log_level == PICOLL_LOG_WARN, "PICOLL_LOG_LEVEL defaults to %d, expected warn",
          cfg.log_level);
    CHECK(cfg.test_fail_setup == -1, "PICOLL_TEST_FAIL_SETUP defaults to %ld, expected -1",
          cfg.test_fail_setup);
    CHECK(cfg.cuda_staging == PICOLL_STAGING_AUTO,
          "PICOLL_CUDA_STAGING defaults to %d, expected auto", cfg.cuda_staging);
    CHECK(cfg.cma == PICOLL_CMA_AUTO, "PICOLL_CMA defaults to %d, expected auto", cfg.cma);
    CHECK(cfg.test_cma_fault == -1, "PICOLL_TEST_CMA_FAULT defaults to %ld, expected -1",
          cfg.test_cma_fault);
    /* single copy is opt-in: it lost to the workspace wherever measured */
    CHECK(cfg.cma_min == 0, "PICOLL_CMA_MIN defaults to %zu, expected 0 (never)", cfg.cma_min);
    CHECK(cfg.allreduce_cma_min == 0,
          "PICOLL_ALLREDUCE_CMA_MIN defaults to %zu, expected 0 (never)", cfg.allreduce_cma_min);
    CHECK(cfg.workspace_size > 0, "PICOLL_WORKSPACE_SIZE defaults to 0");
    CHECK(cfg.timeout > 0, "PICOLL_TIMEOUT defaults to %g", cfg.timeout);
}

/* ---------------------------------------------------------------- loading an environment */

/* Runs picoll_config_load with stderr captured into out. */
static picoll_status_t load_captured(picoll_config_t *cfg, char *const *env, char *out, size_t len)
{
    FILE *tmp = tmpfile();
    int saved;
    picoll_status_t st;
    size_t n = 0;

    fflush(stderr);
    saved = dup(2);
    if (tmp == NULL || saved < 0 || dup2(fileno(tmp), 2) < 0) {
        printf("FAIL: cannot capture stderr\n");
        exit(1);
    }
    st = picoll_config_load(cfg, env);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    n = fread(out, 1, len - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
    return st;
}

static void test_load(void)
{
    picoll_config_t cfg, def;
    char out[8192];
    picoll_status_t st;
    size_t def_ws;

    picoll_log_level = PICOLL_LOG_WARN;
    picoll_config_load(&def, NULL);
    def_ws = def.workspace_size;

    {
        char *env[] = {"HOME=/root",
                       "PICOLL_WORKSPACE_SIZE=1M",
                       "PICOLL_STATS=yes",
                       "PICOLL_HOST=auto",
                       "PICOLL_TIMEOUT=2.5",
                       "PICOLL_TEST_FAIL_SETUP=3",
                       "NOT_PICOLL_X=1",
                       "PICOLLX=1",
                       NULL};
        st = load_captured(&cfg, env, out, sizeof(out));
        CHECK(st == PICOLL_OK, "valid environment rejected: %s", out);
        CHECK(cfg.workspace_size == (1u << 20), "PICOLL_WORKSPACE_SIZE=1M gave %zu",
              cfg.workspace_size);
        CHECK(cfg.stats == 1 && cfg.host == PICOLL_HOST_AUTO && cfg.timeout == 2.5 &&
                  cfg.test_fail_setup == 3,
              "values from the environment not applied");
        CHECK(out[0] == '\0', "valid environment printed: %s", out);
    }
    {
        /* the benchmarks' own variables are set in the jobs picoll runs in: no warning */
        char *env[] = {"PICOLL_BENCH_NCCL=/no/such/libnccl.so", "PICOLL_UCX_TLS=tcp", NULL};
        st = load_captured(&cfg, env, out, sizeof(out));
        CHECK(st == PICOLL_OK && out[0] == '\0',
              "PICOLL_BENCH_NCCL, PICOLL_UCX_TLS: status %d, "
              "printed \"%s\"",
              (int)st, out);
    }
    {
        char *env[] = {"PICOLL_FOO=1", "PICOLL_STATS=1", NULL};
        st = load_captured(&cfg, env, out, sizeof(out));
        CHECK(st == PICOLL_OK, "an unknown variable must only warn, got status %d", (int)st);
        CHECK(strstr(out, "PICOLL_FOO") != NULL, "no warning naming PICOLL_FOO: \"%s\"", out);
        CHECK(cfg.stats == 1, "the valid variable beside an unknown one was not applied");
    }
    {
        char *env[] = {"PICOLL_STATS=1", "PICOLL_WORKSPACE_SIZE=12x", "PICOLL_HOST=on", NULL};
        st = load_captured(&cfg, env, out, sizeof(out));
        CHECK(st == PICOLL_ERR_CONFIG,
              "PICOLL_WORKSPACE_SIZE=12x: status %d, expected "
              "PICOLL_ERR_CONFIG",
              (int)st);
        CHECK(strstr(out, "PICOLL_WORKSPACE_SIZE") != NULL && strstr(out, "12x") != NULL,
              "error does not name PICOLL_WORKSPACE_SIZE=12x: \"%s\"", out);
        CHECK(cfg.workspace_size == def_ws, "rejected value changed the workspace size to %zu",
              cfg.workspace_size);
        CHECK(cfg.stats == 1 && cfg.host == PICOLL_HOST_ON,
              "valid variables around a malformed one were not applied");
    }
    {
        /* the log level in the environment is not what gates the loader's own messages */
        char *env[] = {"PICOLL_LOG_LEVEL=loud", NULL};
        st = load_captured(&cfg, env, out, sizeof(out));
        CHECK(st == PICOLL_ERR_CONFIG, "PICOLL_LOG_LEVEL=loud accepted");
        CHECK(strstr(out, "PICOLL_LOG_LEVEL") != NULL,
              "error does not name PICOLL_LOG_LEVEL: \"%s\"", out);
    }
}

/* ---------------------------------------------------------------- the agreement hash */

static void test_hash(void)
{
    picoll_config_t a, b;
    char err[512];

    picoll_config_load(&a, NULL);
    picoll_config_load(&b, NULL);
    CHECK(picoll_config_hash(&a) == picoll_config_hash(&b), "equal configurations hash apart");
    picoll_config_parse(var_or_die("PICOLL_LOG_LEVEL"), "debug", &b, err, sizeof(err));
    CHECK(picoll_config_hash(&a) == picoll_config_hash(&b),
          "the log level (allowed to differ between ranks) changes the hash");
    picoll_config_parse(var_or_die("PICOLL_STATS"), "1", &b, err, sizeof(err));
    CHECK(picoll_config_hash(&a) != picoll_config_hash(&b),
          "PICOLL_STATS does not change the hash");
    picoll_config_load(&b, NULL);
    picoll_config_parse(var_or_die("PICOLL_WORKSPACE_SIZE"), "16M", &b, err, sizeof(err));
    CHECK(picoll_config_hash(&a) != picoll_config_hash(&b),
          "PICOLL_WORKSPACE_SIZE does not change the hash");
    picoll_config_load(&b, NULL);
    picoll_config_parse(var_or_die("PICOLL_CUDA_STAGING"), "on", &b, err, sizeof(err));
    CHECK(picoll_config_hash(&a) != picoll_config_hash(&b),
          "PICOLL_CUDA_STAGING does not change the hash");
    /* PICOLL_CMA may differ between ranks (the node agrees on it); its threshold may not */
    picoll_config_load(&b, NULL);
    picoll_config_parse(var_or_die("PICOLL_CMA"), "off", &b, err, sizeof(err));
    CHECK(picoll_config_hash(&a) == picoll_config_hash(&b),
          "PICOLL_CMA (agreed per node, allowed to differ between ranks) changes the hash");
    picoll_config_parse(var_or_die("PICOLL_CMA_MIN"), "64k", &b, err, sizeof(err));
    CHECK(picoll_config_hash(&a) != picoll_config_hash(&b),
          "PICOLL_CMA_MIN does not change the hash");
    picoll_config_load(&b, NULL);
    picoll_config_parse(var_or_die("PICOLL_ALLREDUCE_CMA_MIN"), "1M", &b, err, sizeof(err));
    CHECK(picoll_config_hash(&a) != picoll_config_hash(&b),
          "PICOLL_ALLREDUCE_CMA_MIN does not change the hash");
    /* the same value written two ways is the same configuration */
    picoll_config_load(&b, NULL);
    picoll_config_parse(var_or_die("PICOLL_WORKSPACE_SIZE"), "8192KiB", &b, err, sizeof(err));
    picoll_config_parse(var_or_die("PICOLL_WORKSPACE_SIZE"), "8M", &a, err, sizeof(err));
    CHECK(picoll_config_hash(&a) == picoll_config_hash(&b), "8M and 8192KiB hash apart");
}

int main(void)
{
    test_sizes();
    test_bools();
    test_enums();
    test_ints();
    test_doubles();
    test_size_vars();
    test_table();
    test_load();
    test_hash();
    return check_summary("test_config");
}
