/* The searcher's part of the experiment config (src/config/experiment.c):
 * Determined's own mnist_pytorch example configs, before and after 0.38,
 * load unchanged (with the global_batch_size their train.py gives and, for
 * dist_random.yaml, a --max-length), into the searcher's options and the
 * hyperparameters' space; --hparam fixes a sampled hyperparameter; the keys
 * only a cluster uses are collected for ct_main's one warning. */
#define _DEFAULT_SOURCE /* mkstemps */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/experiment.h"
#include "ct_test.h"

/* examples/tutorials/mnist_pytorch/adaptive.yaml before v0.38 (27bebdd4) */
static const char *old_adaptive =
    "name: mnist_pytorch_adaptive_search\n"
    "hyperparameters:\n"
    "  learning_rate:\n    type: double\n    minval: .0001\n    maxval: 1.0\n"
    "  n_filters1:\n    type: int\n    minval: 8\n    maxval: 64\n"
    "  n_filters2:\n    type: int\n    minval: 8\n    maxval: 72\n"
    "  dropout1:\n    type: double\n    minval: .2\n    maxval: .8\n"
    "  dropout2:\n    type: double\n    minval: .2\n    maxval: .8\n"
    "searcher:\n  name: adaptive_asha\n  metric: validation_loss\n  smaller_is_better: true\n  max_trials: 16\n"
    "  max_length:\n    batches: 937 #60,000 training images with batch size 64\n"
    "entrypoint: python3 train.py\n";

/* the same file at Determined's HEAD (0.38: time_metric and max_time) */
static const char *new_searcher =
    "searcher:\n  name: adaptive_asha\n  metric: validation_loss\n  smaller_is_better: true\n  max_trials: 16\n"
    "  time_metric: batches\n  max_time: 937  # 60,000 training images with batch size 64\n"
    "entrypoint: python3 train.py --epochs 1\n";

/* dist_random.yaml at HEAD */
static const char *dist_random =
    "name: mnist_pytorch_dist_random_search\n"
    "hyperparameters:\n"
    "  learning_rate:\n    type: double\n    minval: .0001\n    maxval: 1.0\n"
    "  dropout1:\n    type: double\n    minval: .2\n    maxval: .8\n"
    "searcher:\n  name: random\n  metric: accuracy\n  smaller_is_better: true\n  max_trials: 2\n"
    "resources:\n  slots_per_trial: 1\n"
    "entrypoint: >-\n  python3 -m determined.launch.torch_distributed\n  python3 train.py --epochs 1\n"
    "environment:\n  image: determinedai/pytorch-ngc:0.38.0\n"
    "bind_mounts:\n  - host_path: /data\n    container_path: /data\n";

static char *write_yaml(const char *text) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/ct_search_XXXXXX.yaml");
    int fd = mkstemps(path, 5);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* Loads `text`, applies the --hparam assignments, finishes for 1 rank. */
static int load(cti_config *c, const char *text, const char *const *hparams, int64_t max_length) {
    CHECK(cti_config_init(c) == 0);
    char *path = write_yaml(text);
    int rc = cti_config_load_file(c, path);
    unlink(path);
    for (int i = 0; rc == 0 && hparams && hparams[i]; i++) rc = cti_config_set_hparam(c, hparams[i]);
    if (rc == 0 && max_length) c->fit.max_length = ct_batches(max_length);
    return rc ? rc : cti_config_finish(c, 1);
}

static const char *const gbs64[] = {"global_batch_size=64", NULL};

static void adaptive_before_and_after(void) {
    cti_config c;
    CHECK(load(&c, old_adaptive, gbs64, 0) == 0);
    CHECK(cti_config_is_search(&c) && c.search.kind == CT_SEARCHER_ADAPTIVE_ASHA && c.search.max_trials == 16);
    CHECK(c.fit.max_length.unit == CT_BATCHES && c.search.max_length == 937 && c.search.divisor == 4);
    CHECK(strcmp(c.fit.searcher_metric, "validation_loss") == 0 && c.search.smaller_is_better);
    CHECK(c.space != NULL && c.hp_sampled && c.cluster_keys[0] == '\0');
    /* the plan of worked example (e): 16 trials over 937 batches */
    cti_searcher *s = cti_searcher_new(&c.search, c.space);
    const cti_asha_plan *p = s ? cti_searcher_plan(s) : NULL;
    CHECK(p && p->n == 2 && p->b[0].max_trials == 12 && p->b[1].max_trials == 4 && p->b[0].units[0] == 58 &&
          p->b[0].units[1] == 234 && p->b[0].units[2] == 937);
    cti_searcher_free(s);
    cti_config_free(&c);

    /* HEAD's form: the header of the old file, the new searcher */
    char text[4096];
    snprintf(text, sizeof text, "%.*s%s", (int)(strstr(old_adaptive, "searcher:") - old_adaptive), old_adaptive,
             new_searcher);
    CHECK(load(&c, text, gbs64, 0) == 0);
    CHECK(c.fit.max_length.unit == CT_BATCHES && c.search.max_length == 937 && c.search.max_trials == 16);
    cti_config_free(&c);
    /* time_metric without max_time, or beside max_length */
    snprintf(text, sizeof text, "searcher:\n  name: adaptive_asha\n  metric: m\n  max_trials: 4\n  time_metric: "
                                "batches\n");
    CHECK(load(&c, text, gbs64, 0) == CT_ECONFIG && strstr(ct_last_error(), "'searcher.time_metric' needs"));
    cti_config_free(&c);
    snprintf(text, sizeof text, "searcher:\n  name: adaptive_asha\n  metric: m\n  max_trials: 4\n  time_metric: "
                                "batches\n  max_time: 9\n  max_length: {batches: 9}\n");
    CHECK(load(&c, text, gbs64, 0) == CT_ECONFIG && strstr(ct_last_error(), "both max_length and max_time"));
    cti_config_free(&c);
    snprintf(text, sizeof text, "searcher:\n  name: adaptive_asha\n  metric: m\n  max_trials: 4\n  time_metric: "
                                "validation_loss\n  max_time: 9\n");
    CHECK(load(&c, text, gbs64, 0) == CT_ECONFIG && strstr(ct_last_error(), "'searcher.time_metric'"));
    cti_config_free(&c);
}

static void random_with_cluster_keys(void) {
    cti_config c;
    const char *const fix[] = {"global_batch_size=64", "learning_rate=0.25", NULL};
    CHECK(load(&c, dist_random, fix, 100) == 0);
    CHECK(c.search.kind == CT_SEARCHER_RANDOM && c.search.max_trials == 2 && c.slots_per_trial == 1);
    CHECK(strcmp(c.cluster_keys, "environment, bind_mounts") == 0);
    /* --hparam learning_rate=0.25 fixes it in every trial; dropout1 is drawn */
    cti_searcher *s = cti_searcher_new(&c.search, c.space);
    cti_search_ops ops = {0};
    CHECK(s && cti_searcher_start(s, &ops) == 0);
    for (int64_t t = 1; s && t <= 2; t++) {
        const json_t *h = cti_searcher_hparams(s, t);
        double d = json_real_value(json_object_get(h, "dropout1"));
        CHECK(json_real_value(json_object_get(h, "learning_rate")) == 0.25 && d >= 0.2 && d < 0.8);
        CHECK(json_integer_value(json_object_get(h, "global_batch_size")) == 64);
    }
    free(ops.v);
    cti_searcher_free(s);
    cti_config_free(&c);
    /* a single searcher draws its one trial's values at once (seed 0) */
    CHECK(load(&c, "hyperparameters:\n  global_batch_size: 8\n  lr: {type: double, minval: 0, maxval: 1}\n"
                   "searcher: {name: single, metric: m, max_length: {batches: 5}}\n", NULL, 0) == 0);
    double lr = 0;
    CHECK(!cti_config_is_search(&c) && ct_value_get_float(ct_value_dict_get(c.fit.hparams, "lr"), &lr) == 0 &&
          lr == 0.5488135039273248);
    cti_config_free(&c);
    /* the cluster's resources keys too */
    CHECK(load(&c, "hyperparameters: {global_batch_size: 8}\nsearcher: {name: single, metric: m, max_length: "
                   "{batches: 5}}\nresources: {resource_pool: gpu, priority: 3, slots_per_trial: 2}\n",
               NULL, 0) == 0);
    CHECK(strcmp(c.cluster_keys, "resources.resource_pool, resources.priority") == 0);
    cti_config_free(&c);
}

int main(void) {
    adaptive_before_and_after();
    random_with_cluster_keys();
    return ct_test_result("config_search");
}
