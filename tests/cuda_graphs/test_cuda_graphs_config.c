/* tests/cuda_graphs/test_cuda_graphs_config.c — the CUDA-graph options in
 * the experiment config (optimizations.cuda_graphs, .cuda_graph_warmup) and
 * ct_main's --cuda-graphs flag, through the internal parsing layer
 * (module config, linked as in tests/config). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "config/flags.h"
#include "ct_test.h"

static void test_config_keys(void) {
    cti_config c;
    CHECK_OK(cti_config_init(&c));
    CHECK(!c.fit.cuda_graphs);
    CHECK(c.fit.cuda_graph_warmup == 3);
    CHECK_OK(cti_config_load_string(&c,
                                   "{\"optimizations\": {\"cuda_graphs\": true, \"cuda_graph_warmup\": 5,"
                                   " \"bucket_cap_mb\": 10}}",
                                   "exp.json"));
    CHECK(c.fit.cuda_graphs);
    CHECK(c.fit.cuda_graph_warmup == 5);
    cti_config_free(&c);

    CHECK_OK(cti_config_init(&c));
    CHECK(cti_config_load_string(&c, "{\"optimizations\": {\"cuda_graph_warmup\": 0}}", "exp.json") == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "optimizations.cuda_graph_warmup");
    cti_config_free(&c);

    CHECK_OK(cti_config_init(&c));
    CHECK(cti_config_load_string(&c, "{\"optimizations\": {\"cuda_graphs\": 1}}", "exp.json") == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "optimizations.cuda_graphs");
    cti_config_free(&c);
}

static void test_flag(void) {
    char prog[] = "trial", len[] = "--max-length", ten[] = "10", flag[] = "--cuda-graphs";
    char *argv[] = {prog, len, ten, flag, NULL};
    cti_main_args a;
    CHECK_OK(cti_main_parse(4, argv, 1, &a));
    CHECK(a.cfg.fit.cuda_graphs);
    CHECK(a.cfg.fit.cuda_graph_warmup == 3);
    cti_main_args_free(&a);

    char *argv2[] = {prog, len, ten, NULL};
    CHECK_OK(cti_main_parse(3, argv2, 1, &a));
    CHECK(!a.cfg.fit.cuda_graphs);
    cti_main_args_free(&a);

    char bad[] = "--cuda-graphs=yes";
    char *argv3[] = {prog, len, ten, bad, NULL};
    CHECK(cti_main_parse(4, argv3, 1, &a) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "--cuda-graphs takes no value");
    cti_main_args_free(&a);

    /* --help lists it. */
    char path[] = "/tmp/ct_cuda_graphs_help_XXXXXX";
    FILE *f = fdopen(mkstemp(path), "w+");
    CHECK(f != NULL);
    if (!f) return;
    cti_main_usage(f, "trial");
    rewind(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    remove(path);
    CHECK(strstr(buf, "--cuda-graphs") != NULL);
}

int main(void) {
    test_config_keys();
    test_flag();
    return ct_test_result("cuda_graphs_config");
}
