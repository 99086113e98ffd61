/* tests/config/test_config.c — the JSON experiment config: a config using
 * every key gives exactly the expected ct_fit_opts and hparams; every kind of
 * mistake fails with CT_ECONFIG and names the key path; the period
 * constructors and ct_fit_defaults. Run under ASan too (failure paths free). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/experiment.h"
#include "ct_test.h"

/* ---- periods and defaults ------------------------------------------------------- */

static void test_periods(void) {
    ct_period p = ct_batches(5);
    CHECK(p.unit == CT_BATCHES && p.n == 5 && p.num_points == 0);
    p = ct_epochs(3);
    CHECK(p.unit == CT_EPOCHS && p.n == 3 && p.num_points == 0);
    p = ct_records(6400);
    CHECK(p.unit == CT_RECORDS && p.n == 6400);
    p = ct_never();
    CHECK(p.unit == CT_NEVER && p.num_points == 0);

    p = ct_batches(0);
    CHECK(p.unit == CT_NEVER);
    CHECK_ERR(CT_EINVAL, "ct_batches: n must be >= 1, got 0");
    p = ct_epochs(-2);
    CHECK(p.unit == CT_NEVER);
    CHECK_ERR(CT_EINVAL, "ct_epochs: n must be >= 1, got -2");
    p = ct_records(0);
    CHECK(p.unit == CT_NEVER);
    CHECK_ERR(CT_EINVAL, "ct_records");

    /* Sorted, duplicates dropped. */
    p = ct_schedule(CT_BATCHES, 5, (const int64_t[]){30, 10, 20, 10, 30});
    CHECK(p.unit == CT_BATCHES && p.num_points == 3);
    CHECK(p.points[0] == 10 && p.points[1] == 20 && p.points[2] == 30);
    p = ct_schedule(CT_EPOCHS, 1, (const int64_t[]){2});
    CHECK(p.unit == CT_EPOCHS && p.num_points == 1 && p.points[0] == 2);

    int64_t many[CT_SCHEDULE_MAX + 1];
    for (int i = 0; i <= CT_SCHEDULE_MAX; i++) many[i] = CT_SCHEDULE_MAX + 1 - i;
    p = ct_schedule(CT_BATCHES, CT_SCHEDULE_MAX, many);
    CHECK(p.num_points == CT_SCHEDULE_MAX && p.points[0] == 2 &&
          p.points[CT_SCHEDULE_MAX - 1] == CT_SCHEDULE_MAX + 1);
    p = ct_schedule(CT_BATCHES, CT_SCHEDULE_MAX + 1, many);
    CHECK(p.unit == CT_NEVER);
    CHECK_ERR(CT_EINVAL, "65 points, expected 1..64");
    p = ct_schedule(CT_BATCHES, 0, many);
    CHECK(p.unit == CT_NEVER);
    CHECK_ERR(CT_EINVAL, "0 points");
    p = ct_schedule(CT_BATCHES, 2, (const int64_t[]){5, 0});
    CHECK(p.unit == CT_NEVER);
    CHECK_ERR(CT_EINVAL, "point 1 is 0, expected >= 1");
    p = ct_schedule(CT_BATCHES, 2, NULL);
    CHECK(p.unit == CT_NEVER);
    CHECK_ERR(CT_EINVAL, "points is NULL");
    p = ct_schedule(CT_RECORDS, 1, (const int64_t[]){5});
    CHECK(p.unit == CT_NEVER);
    CHECK_ERR(CT_EINVAL, "unit must be CT_BATCHES or CT_EPOCHS");
}

static void test_defaults(void) {
    ct_fit_opts o = ct_fit_defaults();
    CHECK(o.max_length.unit == CT_NEVER);
    CHECK(o.validation_period.unit == CT_NEVER);
    CHECK(o.checkpoint_period.unit == CT_NEVER);
    CHECK(o.reporting_period.unit == CT_BATCHES && o.reporting_period.n == 100);
    CHECK(o.checkpoint_policy == CT_CKPT_BEST);
    CHECK(strcmp(o.searcher_metric, "validation_loss") == 0);
    CHECK(o.smaller_is_better);
    CHECK(!o.step_zero_validation && !o.test_mode && !o.stop_on_nan && !o.quiet);
    CHECK(o.global_batch_size == 0);
    CHECK(o.aggregation_frequency == 1);
    CHECK(o.tune_malloc);
    CHECK(o.seed == 0);
    CHECK(strcmp(o.output_dir, "output") == 0);
    CHECK(o.checkpoint_dir == NULL && o.resume == NULL && o.device == NULL && o.warm_start == NULL);
    CHECK(o.save_trial_latest == 1 && o.save_trial_best == 1);
    CHECK(o.hparams == NULL && o.data == NULL && o.experiment_config == NULL && o.user == NULL);
    CHECK(o.experiment_id == 1 && o.trial_id == 1 && o.tensorboard);
}

/* ---- a config with every key ------------------------------------------------------- */

static const char *full_config =
    "{\n"
    "  \"name\": \"mnist-mlp\",\n"
    "  \"description\": \"every key ctrial knows\",\n"
    "  \"labels\": [\"a\", \"b\"],\n"
    "  \"entrypoint\": \"model_def:MnistTrial\",\n"
    "  \"workspace\": \"ws\", \"project\": \"pr\",\n"
    "  \"max_restarts\": 0,\n"
    "  \"resources\": {\"slots_per_trial\": 2, \"device\": \"cuda:1\", \"dist_timeout\": 90.5},\n"
    "  \"hyperparameters\": {\n"
    "    \"global_batch_size\": 64,\n"
    "    \"lr\": 0.01,\n"
    "    \"layers\": 3,\n"
    "    \"use_bn\": true,\n"
    "    \"act\": \"relu\",\n"
    "    \"opt\": {\"name\": \"adam\", \"betas\": [0.9, 0.999],\n"
    "            \"eps\": {\"type\": \"const\", \"val\": 1e-08}},\n"
    "    \"wd\": {\"type\": \"const\", \"val\": 0.0005},\n"
    "    \"nothing\": null\n"
    "  },\n"
    "  \"searcher\": {\"name\": \"single\", \"metric\": \"accuracy\",\n"
    "               \"smaller_is_better\": false, \"max_length\": {\"epochs\": 3},\n"
    "               \"source_checkpoint_uuid\": null, \"source_trial_id\": null},\n"
    "  \"warm_start\": \"/runs/exp0/ckpt-000300-0badc0de\",\n"
    "  \"min_validation_period\": {\"batches\": 100},\n"
    "  \"min_checkpoint_period\": {\"records\": 6400},\n"
    "  \"checkpoint_policy\": \"all\",\n"
    "  \"checkpoint_storage\": {\"type\": \"shared_fs\", \"host_path\": \"/tmp/ck\",\n"
    "                         \"storage_path\": \"exp1\", \"save_trial_latest\": 2,\n"
    "                         \"save_trial_best\": 3, \"save_experiment_best\": 0},\n"
    "  \"reproducibility\": {\"experiment_seed\": 1234, \"deterministic\": true},\n"
    "  \"records_per_epoch\": 60000,\n"
    "  \"optimizations\": {\"aggregation_frequency\": 4, \"average_training_metrics\": true,\n"
    "                    \"tune_malloc\": false},\n"
    "  \"scheduling_unit\": 50,\n"
    "  \"perform_initial_validation\": true,\n"
    "  \"data\": {\"path\": \"/data/mnist\", \"workers\": 2, \"splits\": [0.8, 0.2],\n"
    "           \"spec\": {\"type\": \"const\", \"val\": 1}}\n"
    "}\n";

static ct_value *expected_hparams(void) {
    ct_value *hp = ct_value_dict();
    ct_value_dict_set(hp, "global_batch_size", ct_value_int(64));
    ct_value_dict_set(hp, "lr", ct_value_float(0.01));
    ct_value_dict_set(hp, "layers", ct_value_int(3));
    ct_value_dict_set(hp, "use_bn", ct_value_bool(true));
    ct_value_dict_set(hp, "act", ct_value_str("relu"));
    ct_value *opt = ct_value_dict();
    ct_value_dict_set(opt, "name", ct_value_str("adam"));
    ct_value *betas = ct_value_list();
    ct_value_list_append(betas, ct_value_float(0.9));
    ct_value_list_append(betas, ct_value_float(0.999));
    ct_value_dict_set(opt, "betas", betas);
    ct_value_dict_set(opt, "eps", ct_value_float(1e-08)); /* nested const spec unwrapped */
    ct_value_dict_set(hp, "opt", opt);
    ct_value_dict_set(hp, "wd", ct_value_float(0.0005)); /* const spec unwrapped */
    ct_value_dict_set(hp, "nothing", ct_value_none());
    return hp;
}

static ct_value *expected_data(void) {
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "path", ct_value_str("/data/mnist"));
    ct_value_dict_set(d, "workers", ct_value_int(2));
    ct_value *splits = ct_value_list();
    ct_value_list_append(splits, ct_value_float(0.8));
    ct_value_list_append(splits, ct_value_float(0.2));
    ct_value_dict_set(d, "splits", splits);
    ct_value *spec = ct_value_dict(); /* data is free-form: no spec unwrapping */
    ct_value_dict_set(spec, "type", ct_value_str("const"));
    ct_value_dict_set(spec, "val", ct_value_int(1));
    ct_value_dict_set(d, "spec", spec);
    return d;
}

static void check_full(const cti_config *c) {
    const ct_fit_opts *o = &c->fit;
    CHECK(strcmp(c->name, "mnist-mlp") == 0);
    CHECK(o->max_length.unit == CT_EPOCHS && o->max_length.n == 3 && o->max_length.num_points == 0);
    CHECK(o->validation_period.unit == CT_BATCHES && o->validation_period.n == 100);
    /* records 6400 / global_batch_size 64 */
    CHECK(o->checkpoint_period.unit == CT_BATCHES && o->checkpoint_period.n == 100);
    CHECK(o->reporting_period.unit == CT_BATCHES && o->reporting_period.n == 50);
    CHECK(o->checkpoint_policy == CT_CKPT_ALL);
    CHECK(strcmp(o->searcher_metric, "accuracy") == 0);
    CHECK(!o->smaller_is_better);
    CHECK(o->step_zero_validation);
    CHECK(!o->test_mode && !o->stop_on_nan && !o->quiet);
    CHECK(o->global_batch_size == 64);
    CHECK(o->aggregation_frequency == 4);
    CHECK(o->dist_timeout == 90.5);
    CHECK(!o->tune_malloc);
    CHECK(o->seed == 1234 && o->deterministic);
    CHECK(strcmp(o->output_dir, "output") == 0);
    CHECK(o->checkpoint_dir && strcmp(o->checkpoint_dir, "/tmp/ck/exp1") == 0);
    CHECK(o->save_trial_latest == 2 && o->save_trial_best == 3);
    CHECK(o->resume == NULL && o->device && strcmp(o->device, "cuda:1") == 0);
    CHECK(o->warm_start && strcmp(o->warm_start, "/runs/exp0/ckpt-000300-0badc0de") == 0);
    ct_value *hp = expected_hparams(), *data = expected_data();
    CHECK(o->hparams == c->hparams && ct_value_equal(o->hparams, hp));
    CHECK(o->data == c->data && ct_value_equal(o->data, data));
    /* The whole file as a tree, for ct_ctx_experiment_config. */
    CHECK(o->experiment_config == c->whole && ct_value_equal(ct_value_dict_get(o->experiment_config, "data"), data));
    CHECK(ct_value_get_str(ct_value_dict_get(o->experiment_config, "name")));
    ct_value_free(hp);
    ct_value_free(data);
}

static void test_full_config(void) {
    cti_config c;
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(&c, full_config, "exp.json"));
    CHECK_OK(cti_config_finish(&c, 2));
    check_full(&c);
    cti_config_free(&c);

    /* The same from a file. */
    char path[] = "/tmp/ct_config_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(full_config, f);
    fclose(f);
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_file(&c, path));
    CHECK_OK(cti_config_finish(&c, 1));
    check_full(&c);
    /* A second config is refused. */
    CHECK(cti_config_load_file(&c, path) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "only one experiment config");
    cti_config_free(&c);
    unlink(path);

    CHECK_OK(cti_config_init(&c));
    CHECK(cti_config_load_file(&c, "/nonexistent/ct.json") == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "/nonexistent/ct.json: cannot open (No such file");
    cti_config_free(&c);

    /* What is not a regular file is refused before it is read: a FIFO would
     * block until a writer came, /dev/zero never end. */
    char fifo[64];
    snprintf(fifo, sizeof fifo, "/tmp/ct_config_fifo_%d.json", (int)getpid());
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_OK(cti_config_init(&c));
    CHECK(cti_config_load_file(&c, fifo) == CT_ECONFIG);
    CHECK(strstr(ct_last_error(), fifo) != NULL);
    CHECK_ERR(CT_ECONFIG, "not a regular file (a FIFO)");
    cti_config_free(&c);
    unlink(fifo);
    CHECK_OK(cti_config_init(&c));
    CHECK(cti_config_load_file(&c, "/dev/zero") == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "/dev/zero: not a regular file");
    cti_config_free(&c);
}

/* A minimal config: what is absent keeps ct_fit_defaults(). */
static void test_minimal_config(void) {
    cti_config c;
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 7}}}", NULL));
    CHECK_OK(cti_config_finish(&c, 1));
    ct_fit_opts d = ct_fit_defaults();
    CHECK(c.name == NULL);
    CHECK(c.fit.max_length.unit == CT_BATCHES && c.fit.max_length.n == 7);
    CHECK(c.fit.validation_period.unit == CT_NEVER && c.fit.checkpoint_period.unit == CT_NEVER);
    CHECK(c.fit.reporting_period.n == d.reporting_period.n);
    CHECK(c.fit.checkpoint_policy == CT_CKPT_BEST && c.fit.smaller_is_better);
    CHECK(strcmp(c.fit.searcher_metric, "validation_loss") == 0);
    CHECK(c.fit.global_batch_size == 0 && c.fit.aggregation_frequency == 1 && c.fit.seed == 0);
    CHECK(c.fit.checkpoint_dir == NULL && c.fit.data == NULL);
    CHECK(ct_value_kind_of(c.fit.hparams) == CT_VALUE_DICT && ct_value_len(c.fit.hparams) == 0);
    cti_config_free(&c);

    /* Records round down, but never below one batch. */
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"hyperparameters\": {\"global_batch_size\": 64},"
            " \"searcher\": {\"name\": \"single\", \"max_length\": {\"records\": 10}},"
            " \"min_validation_period\": {\"records\": 200},"
            " \"min_checkpoint_period\": {\"epochs\": 2},"
            " \"checkpoint_policy\": \"none\","
            " \"checkpoint_storage\": {\"host_path\": \"ckpts\"}}", NULL));
    CHECK_OK(cti_config_finish(&c, 64));
    CHECK(c.fit.max_length.unit == CT_BATCHES && c.fit.max_length.n == 1);
    CHECK(c.fit.validation_period.unit == CT_BATCHES && c.fit.validation_period.n == 3);
    CHECK(c.fit.checkpoint_period.unit == CT_EPOCHS && c.fit.checkpoint_period.n == 2);
    CHECK(c.fit.checkpoint_policy == CT_CKPT_NONE);
    CHECK(strcmp(c.fit.checkpoint_dir, "ckpts") == 0);
    cti_config_free(&c);

    /* Determined's s3 storage: the bucket and prefix as a URL, the client's
     * keys as they are; null is Determined's default for the optional ones. */
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1}},"
            " \"checkpoint_storage\": {\"type\": \"s3\", \"bucket\": \"ckpts\", \"prefix\": \"team/run\","
            " \"endpoint_url\": \"http://127.0.0.1:9000\", \"access_key\": \"AK\", \"secret_key\": \"SK\","
            " \"save_trial_latest\": 2}}", NULL));
    CHECK_OK(cti_config_finish(&c, 1));
    CHECK(c.fit.checkpoint_storage && strcmp(c.fit.checkpoint_storage, "s3://ckpts/team/run") == 0);
    CHECK(c.fit.s3_endpoint_url && strcmp(c.fit.s3_endpoint_url, "http://127.0.0.1:9000") == 0);
    CHECK(c.fit.s3_access_key && strcmp(c.fit.s3_access_key, "AK") == 0);
    CHECK(c.fit.s3_secret_key && strcmp(c.fit.s3_secret_key, "SK") == 0);
    CHECK(c.fit.save_trial_latest == 2 && c.fit.checkpoint_dir == NULL);
    cti_config_free(&c);
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1}},"
            " \"checkpoint_storage\": {\"type\": \"s3\", \"bucket\": \"b\", \"prefix\": null,"
            " \"endpoint_url\": null}}", NULL));
    CHECK(strcmp(c.fit.checkpoint_storage, "s3://b") == 0 && c.fit.s3_endpoint_url == NULL);
    cti_config_free(&c);
    /* async_halving: one bracket of num_rungs; Determined's current
     * async_halving stops trials early (stop_once true unless given). */
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"hyperparameters\": {\"global_batch_size\": 8, \"lr\": {\"type\": \"double\", \"minval\": 0.1,"
            " \"maxval\": 1}}, \"searcher\": {\"name\": \"async_halving\", \"metric\": \"validation_loss\","
            " \"num_rungs\": 3, \"max_trials\": 9, \"divisor\": 3, \"max_length\": {\"batches\": 90}}}", NULL));
    CHECK_OK(cti_config_finish(&c, 1));
    CHECK(c.search.kind == CT_SEARCHER_ASYNC_HALVING && c.search.num_rungs == 3 && c.search.max_trials == 9 &&
          c.search.stop_once && c.search.max_length == 90);
    cti_config_free(&c);
    /* adaptive_asha too stops early unless stop_once false asks for the promotions of before 0.38 */
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"hyperparameters\": {\"global_batch_size\": 8}, \"searcher\": {\"name\": \"adaptive_asha\","
            " \"metric\": \"m\", \"max_trials\": 4, \"max_length\": {\"batches\": 8}}}", NULL));
    CHECK(c.search.kind == CT_SEARCHER_ADAPTIVE_ASHA && c.search.stop_once);
    cti_config_free(&c);
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"hyperparameters\": {\"global_batch_size\": 8}, \"searcher\": {\"name\": \"async_halving\","
            " \"metric\": \"m\", \"num_rungs\": 2, \"max_trials\": 4, \"stop_once\": false,"
            " \"time_metric\": \"batches\", \"max_time\": 40}}", NULL));
    CHECK(c.search.kind == CT_SEARCHER_ASYNC_HALVING && !c.search.stop_once && c.fit.max_length.n == 40);
    cti_config_free(&c);

    /* Determined's optimizations: mixed_precision O1 is AMP, the fusion
     * threshold sizes the buckets, Horovod's own knobs are named once (and
     * only when set to something other than their defaults). */
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1}},"
            " \"optimizations\": {\"aggregation_frequency\": 1, \"average_aggregated_gradients\": true,"
            " \"average_training_metrics\": true, \"gradient_compression\": false, \"mixed_precision\": \"O0\","
            " \"tensor_fusion_threshold\": 64, \"tensor_fusion_cycle_time\": 1, \"auto_tune_tensor_fusion\": false,"
            " \"grad_updates_size_file\": null}}", NULL));
    CHECK(!c.fit.mixed_precision && c.fit.average_aggregated_gradients && c.fit.bucket_cap_mb == 64);
    CHECK(c.horovod_keys[0] == '\0'); /* Determined's defaults, written out: nothing to say */
    cti_config_free(&c);
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1}},"
            " \"optimizations\": {\"mixed_precision\": \"O1\", \"average_aggregated_gradients\": false,"
            " \"gradient_compression\": true, \"tensor_fusion_cycle_time\": 5, \"tensor_fusion_threshold\": 0,"
            " \"grad_updates_size_file\": \"/tmp/g\", \"auto_tune_tensor_fusion\": true}}", NULL));
    CHECK(c.fit.mixed_precision && !c.fit.average_aggregated_gradients && c.fit.bucket_cap_mb == 1);
    CHECK(c.amp_level[0] == '\0');
    CHECK(strcmp(c.horovod_keys, "optimizations.gradient_compression, optimizations.tensor_fusion_cycle_time, "
                                 "optimizations.grad_updates_size_file, optimizations.auto_tune_tensor_fusion") == 0);
    cti_config_free(&c);
    /* ctrial's own: the optimizer state sharded across ranks, a boolean */
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1}},"
            " \"optimizations\": {\"shard_optimizer\": true}}", NULL));
    CHECK(c.fit.shard_optimizer && !c.fit.background_checkpoints);
    cti_config_free(&c);
    CHECK_OK(cti_config_init(&c));
    CHECK(cti_config_load_string(&c, "{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1}},"
                                     " \"optimizations\": {\"shard_optimizer\": \"yes\"}}", NULL) == CT_ECONFIG);
    CHECK(strstr(ct_last_error(), "optimizations.shard_optimizer") != NULL);
    cti_config_free(&c);
    /* O2 and O3, which Determined accepts: AMP as O1, the level kept for ct_main's warning */
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1}},"
            " \"optimizations\": {\"mixed_precision\": \"O2\"}}", NULL));
    CHECK(c.fit.mixed_precision && strcmp(c.amp_level, "O2") == 0);
    cti_config_free(&c);
    CHECK_OK(cti_config_init(&c)); /* ctrial's own bucket_cap_mb wins over the fusion threshold, in any order */
    CHECK_OK(cti_config_load_string(
        &c, "{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1}},"
            " \"optimizations\": {\"bucket_cap_mb\": 8, \"tensor_fusion_threshold\": 32}}", NULL));
    CHECK(c.fit.bucket_cap_mb == 8);
    cti_config_free(&c);

    /* directory: container_path is the checkpoint directory */
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1}},"
            " \"checkpoint_storage\": {\"type\": \"directory\", \"container_path\": \"/mnt/ckpts\"}}", NULL));
    CHECK(strcmp(c.fit.checkpoint_dir, "/mnt/ckpts") == 0 && c.fit.checkpoint_storage == NULL);
    cti_config_free(&c);

    /* The largest seed (Determined's 2^31 - 1) and global batch size (2^40). */
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(
        &c, "{\"hyperparameters\": {\"global_batch_size\": 1099511627776},"
            " \"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1}},"
            " \"reproducibility\": {\"experiment_seed\": 2147483647}}", NULL));
    CHECK_OK(cti_config_finish(&c, 1));
    CHECK(c.fit.seed == 2147483647 && c.fit.global_batch_size == (int64_t)1 << 40);
    cti_config_free(&c);
}

/* ---- errors --------------------------------------------------------------------------- */

/* Loads `json` (label exp.json) and finishes for `world` ranks; expects
 * CT_ECONFIG with `needle` in the message. */
static void expect_fail(int line, const char *json, int world, const char *needle) {
    cti_config c;
    cti_config_init(&c);
    int rc = cti_config_load_string(&c, json, "exp.json");
    if (rc == 0) rc = cti_config_finish(&c, world);
    ct_test_checks++;
    if (rc != CT_ECONFIG || ct_last_code() != CT_ECONFIG || !strstr(ct_last_error(), needle)) {
        ct_test_failures++;
        fprintf(stderr, "%s:%d: config %s\n  expected CT_ECONFIG with \"%s\", got %s (rc %d): \"%s\"\n",
                __FILE__, line, json, needle, ct_strerror(ct_last_code()), rc, ct_last_error());
    }
    ct_clear_error();
    cti_config_free(&c);
}
#define FAIL(json, needle) expect_fail(__LINE__, json, 1, needle)
#define ML "\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 10}}"

static void test_errors(void) {
    /* unknown keys, at every depth, with the full path */
    FAIL("{\"nmae\": \"x\"}", "exp.json: unknown key 'nmae'");
    FAIL("{\"searcher\": {\"name\": \"single\", \"metrc\": \"loss\"}}",
         "exp.json: unknown key 'searcher.metrc'");
    FAIL("{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batchs\": 10}}}",
         "exp.json: unknown key 'searcher.max_length.batchs'");
    FAIL("{" ML ", \"checkpoint_storage\": {\"host_pth\": \"/x\"}}",
         "unknown key 'checkpoint_storage.host_pth'");
    FAIL("{" ML ", \"optimizations\": {\"mixed_precison\": \"O1\"}}",
         "unknown key 'optimizations.mixed_precison'");
    FAIL("{" ML ", \"reproducibility\": {\"seed\": 1}}", "unknown key 'reproducibility.seed'");
    FAIL("{" ML ", \"resources\": {\"slots\": 1}}", "unknown key 'resources.slots'");
    FAIL("{" ML ", \"resources\": {\"device\": \"gpu0\"}}", "'resources.device' must be cpu, cuda or cuda:N, got 'gpu0'");
    FAIL("{" ML ", \"resources\": {\"device\": 0}}", "resources.device");
    FAIL("{" ML ", \"resources\": {\"dist_timeout\": -1}}",
         "'resources.dist_timeout' must be seconds, a number >= 0 (0 or \"never\": no timeout), got -1");
    FAIL("{" ML ", \"resources\": {\"dist_timeout\": \"soon\"}}",
         "'resources.dist_timeout' must be seconds, a number >= 0, or \"never\", got a string");
    FAIL("{" ML ", \"min_validation_period\": {\"steps\": 1}}",
         "unknown key 'min_validation_period.steps'");
    FAIL("{" ML ", \"environmnet\": {}}", "unknown key 'environmnet'"); /* environment: a cluster's (config_search) */
    FAIL("{" ML ", \"hyperparameters\": {\"lr\": {\"type\": \"const\", \"val\": 1, \"vale\": 2}}}",
         "unknown key 'hyperparameters.lr.vale'");

    /* warm starts: a path here, never a UUID or a trial id of Determined's database */
    FAIL("{" ML ", \"warm_start\": 3}", "'warm_start' must be a string, got an integer");
    FAIL("{" ML ", \"warm_start\": \"\"}", "'warm_start' is empty");
    FAIL("{\"searcher\": {\"name\": \"single\", \"source_checkpoint_uuid\": \"7e0a1f2c\"}}",
         "'searcher.source_checkpoint_uuid' names a checkpoint in Determined's database; ctrial takes the "
         "checkpoint directory's path instead: \"warm_start\": \"DIR\"");
    FAIL("{\"searcher\": {\"name\": \"single\", \"source_trial_id\": 12}}",
         "'searcher.source_trial_id' names a checkpoint in Determined's database");

    /* wrong types */
    FAIL("{\"name\": 3}", "'name' must be a string, got an integer");
    FAIL("{\"searcher\": {\"name\": \"single\", \"smaller_is_better\": \"yes\"}}",
         "'searcher.smaller_is_better' must be a boolean, got a string");
    FAIL("{\"searcher\": {\"name\": \"single\", \"metric\": 1}}",
         "'searcher.metric' must be a string, got an integer");
    FAIL("{\"hyperparameters\": [1]}", "'hyperparameters' must be an object, got an array");
    FAIL("{\"searcher\": {\"name\": \"single\", \"max_length\": 100}}",
         "'searcher.max_length' must be an object such as {\"batches\": N}, got an integer");
    FAIL("{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1.5}}}",
         "'searcher.max_length.batches' must be a positive integer, got a real number");
    FAIL("{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": \"10\"}}}",
         "'searcher.max_length.batches' must be a positive integer, got a string");
    FAIL("{\"searcher\": 1}", "'searcher' must be an object, got an integer");
    FAIL("{\"labels\": [\"a\", 1]}", "'labels[1]' must be a string, got an integer");
    FAIL("{\"checkpoint_policy\": true}", "'checkpoint_policy' must be a string, got a boolean");
    FAIL("{\"perform_initial_validation\": 1}",
         "'perform_initial_validation' must be a boolean, got an integer");
    FAIL("{\"checkpoint_storage\": {\"save_trial_best\": null}}",
         "'checkpoint_storage.save_trial_best' must be a non-negative integer, got null");
    FAIL("[1, 2]", "exp.json: the config must be a JSON object, got an array");

    /* impossible values */
    FAIL("{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": -5}}}",
         "'searcher.max_length.batches' must be a positive integer, got -5");
    FAIL("{\"searcher\": {\"name\": \"single\", \"max_length\": {\"epochs\": 0}}}",
         "'searcher.max_length.epochs' must be a positive integer, got 0");
    FAIL("{" ML ", \"min_validation_period\": {\"batches\": 0}}",
         "'min_validation_period.batches' must be a positive integer, got 0");
    FAIL("{" ML ", \"min_checkpoint_period\": {\"records\": -64}}",
         "'min_checkpoint_period.records' must be a positive integer, got -64");
    FAIL("{" ML ", \"optimizations\": {\"tune_malloc\": \"yes\"}}", "'optimizations.tune_malloc' must be a boolean");
    FAIL("{" ML ", \"optimizations\": {\"aggregation_frequency\": 0}}",
         "'optimizations.aggregation_frequency' must be a positive integer, got 0");
    FAIL("{" ML ", \"checkpoint_storage\": {\"save_trial_latest\": -1}}",
         "'checkpoint_storage.save_trial_latest' must be a non-negative integer, got -1");
    FAIL("{" ML ", \"reproducibility\": {\"deterministic\": 1}}",
         "'reproducibility.deterministic' must be a boolean");
    FAIL("{" ML ", \"reproducibility\": {\"experiment_seed\": -1}}",
         "'reproducibility.experiment_seed' must be a non-negative integer, got -1");
    /* Determined's experiment seeds are 0 to 2^31 - 1 (issue 17) */
    FAIL("{" ML ", \"reproducibility\": {\"experiment_seed\": 2147483648}}",
         "exp.json: 'reproducibility.experiment_seed' is 2147483648, at most 2147483647");
    FAIL("{" ML ", \"reproducibility\": {\"experiment_seed\": 9223372036854775807}}",
         "'reproducibility.experiment_seed' is 9223372036854775807, at most 2147483647");
    FAIL("{" ML ", \"scheduling_unit\": 0}", "'scheduling_unit' must be a positive integer, got 0");
    FAIL("{" ML ", \"records_per_epoch\": -1}", "'records_per_epoch' must be a non-negative");
    FAIL("{" ML ", \"resources\": {\"slots_per_trial\": 0}}",
         "'resources.slots_per_trial' must be a positive integer, got 0");
    FAIL("{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 1, \"epochs\": 1}}}",
         "'searcher.max_length' must have exactly one of batches, epochs, records");
    FAIL("{\"searcher\": {\"name\": \"single\", \"max_length\": {}}}",
         "'searcher.max_length' must have one of batches, epochs, records");
    FAIL("{\"searcher\": {\"name\": \"single\", \"metric\": \"\"}}", "'searcher.metric' is empty");
    FAIL("{" ML ", \"optimizations\": {\"aggregation_frequency\": 3000000000}}",
         "'optimizations.aggregation_frequency' is 3000000000, at most 2147483647");

    /* schedules: never max_length, and not in the config at all */
    FAIL("{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": [10, 20]}}}",
         "'searcher.max_length.batches' is a schedule; max_length must be one length");
    FAIL("{" ML ", \"min_validation_period\": {\"epochs\": [1, 2]}}",
         "'min_validation_period.epochs' is a schedule");

    /* policies, searchers, storage */
    FAIL("{" ML ", \"checkpoint_policy\": \"sometimes\"}",
         "'checkpoint_policy' must be one of best, all, none, got 'sometimes'");
    FAIL("{\"searcher\": {\"name\": \"adaptive_asha\", \"max_length\": {\"batches\": 1}}}",
         "'searcher.max_trials' is missing: searcher 'adaptive_asha' needs the number of trials");
    FAIL("{\"searcher\": {\"name\": \"sync_halving\", \"max_length\": {\"batches\": 1}}}",
         "the 'sync_halving' searcher has been removed from Determined");
    FAIL("{\"searcher\": {\"name\": \"bayes\", \"max_length\": {\"batches\": 1}}}",
         "'searcher.name' is 'bayes', expected one of single, random, grid, adaptive_asha, async_halving");
    FAIL("{\"searcher\": {\"max_length\": {\"batches\": 1}}}", "'searcher.name' is missing");
    FAIL("{" ML ", \"checkpoint_storage\": {\"type\": \"gcs\", \"bucket\": \"b\"}}",
         "'checkpoint_storage.type' is 'gcs': Google Cloud Storage is reached through its S3-compatible API here: "
         "type 's3' with endpoint_url 'https://storage.googleapis.com'");
    FAIL("{" ML ", \"checkpoint_storage\": {\"type\": \"azure\", \"container\": \"c\"}}",
         "'checkpoint_storage.type' is 'azure': Azure Blob Storage is reached through an S3-compatible gateway");
    FAIL("{" ML ", \"checkpoint_storage\": {\"type\": \"ftp\"}}",
         "'checkpoint_storage.type' is 'ftp'; expected 'shared_fs', 'directory' or 's3'");
    FAIL("{" ML ", \"checkpoint_storage\": {\"type\": \"s3\", \"prefix\": \"p\"}}",
         "'checkpoint_storage' of type 's3' needs 'bucket'");
    FAIL("{" ML ", \"checkpoint_storage\": {\"type\": \"s3\", \"bucket\": \"b\", \"host_path\": \"/x\"}}",
         "unknown key 'checkpoint_storage.host_path'");
    FAIL("{" ML ", \"checkpoint_storage\": {\"type\": \"s3\", \"bucket\": \"a/b\"}}",
         "'checkpoint_storage.bucket' is 'a/b': a bucket's name has no '/'");
    FAIL("{\"searcher\": {\"name\": \"async_halving\", \"max_trials\": 4, \"max_length\": {\"batches\": 8}}}",
         "'searcher.num_rungs' is missing: searcher 'async_halving' needs the number of rungs");
    FAIL("{\"searcher\": {\"name\": \"async_halving\", \"num_rungs\": 2, \"max_trials\": 4, \"mode\": \"standard\","
         " \"max_length\": {\"batches\": 8}}}",
         "'searcher.mode' is not a key of searcher 'async_halving'");
    FAIL("{\"searcher\": {\"name\": \"adaptive_asha\", \"num_rungs\": 2, \"max_trials\": 4,"
         " \"max_length\": {\"batches\": 8}}}",
         "'searcher.num_rungs' is not a key of searcher 'adaptive_asha'");
    FAIL("{" ML ", \"optimizations\": {\"mixed_precision\": \"fp16\"}}",
         "'optimizations.mixed_precision' must be O0, O1, O2 or O3, got 'fp16'");
    FAIL("{" ML ", \"optimizations\": {\"tensor_fusion_threshold\": -1}}",
         "'optimizations.tensor_fusion_threshold'");
    FAIL("{" ML ", \"optimizations\": {\"gradient_compression\": \"yes\"}}",
         "'optimizations.gradient_compression'");
    FAIL("{" ML ", \"checkpoint_storage\": {\"type\": \"directory\"}}",
         "'checkpoint_storage' of type 'directory' needs 'container_path'");
    FAIL("{" ML ", \"checkpoint_storage\": {\"storage_path\": \"sub\"}}",
         "'checkpoint_storage.storage_path' needs 'checkpoint_storage.host_path'");
    FAIL("{" ML ", \"checkpoint_storage\": {\"host_path\": \"\"}}",
         "'checkpoint_storage.host_path' is empty");

    /* hyperparameters */
    FAIL("{" ML ", \"hyperparameters\": {\"global_batch_size\": 0}}",
         "'hyperparameters.global_batch_size' must be a positive integer, got 0");
    FAIL("{" ML ", \"hyperparameters\": {\"global_batch_size\": 32.0}}",
         "'hyperparameters.global_batch_size' must be a positive integer, got 32 (a float)");
    FAIL("{" ML ", \"hyperparameters\": {\"global_batch_size\": \"64\"}}",
         "'hyperparameters.global_batch_size' must be a positive integer, got '64'");
    FAIL("{" ML ", \"hyperparameters\": {\"global_batch_size\": {\"type\": \"const\", \"val\": -3}}}",
         "'hyperparameters.global_batch_size' must be a positive integer, got -3");
    /* more records a batch than a loader can index (issue 17) */
    FAIL("{" ML ", \"hyperparameters\": {\"global_batch_size\": 9223372036854775807}}",
         "exp.json: 'hyperparameters.global_batch_size' is 9223372036854775807, at most 1099511627776 (a batch of "
         "more records than any machine holds)");
    FAIL("{" ML ", \"hyperparameters\": {\"global_batch_size\": 1099511627777}}",
         "'hyperparameters.global_batch_size' is 1099511627777, at most 1099511627776");
    FAIL("{" ML ", \"hyperparameters\": {\"opt\": {\"lr\": {\"type\": \"log\", \"minval\": -4}}}}",
         "hyperparameters.opt.lr.maxval: is missing"); /* single draws it: the spec is checked */
    FAIL("{" ML ", \"hyperparameters\": {\"lr\": {\"type\": \"const\"}}}",
         "'hyperparameters.lr.val' is missing");
    FAIL("{" ML ", \"hyperparameters\": {\"lr\": {\"type\": \"constant\", \"val\": 1}}}",
         "'hyperparameters.lr.type' is 'constant', expected one of const, int, double, log, categorical");

    /* finishing: records need global_batch_size, which must cover every rank */
    FAIL("{\"searcher\": {\"name\": \"single\", \"max_length\": {\"records\": 6400}}}",
         "exp.json: 'searcher.max_length.records': records need hyperparameters.global_batch_size");
    FAIL("{" ML ", \"min_checkpoint_period\": {\"records\": 64}}",
         "exp.json: 'min_checkpoint_period.records': records need");
    expect_fail(__LINE__, "{" ML ", \"hyperparameters\": {\"global_batch_size\": 2}}", 4,
                "hyperparameters.global_batch_size is 2, smaller than the number of ranks (4)");
    FAIL("{\"name\": \"no length\"}", "no max_length: set searcher.max_length");

    /* JSON syntax */
    FAIL("{\"name\": \"x\",}", "exp.json:1:");
    FAIL("{\"name\": \"x\", \"name\": \"y\"}", "duplicate object key");
    FAIL("", "exp.json:");
}

/* A key that fails leaves no leak and the earlier keys' effects do not matter:
 * the whole config is refused. Also checks NULL arguments. */
static void test_misuse(void) {
    cti_config c;
    CHECK_OK(cti_config_init(&c));
    CHECK(cti_config_load_string(&c, NULL, "x") == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL argument");
    CHECK(cti_config_finish(&c, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "world_size 0");
    cti_config_free(&c);
    cti_config_free(NULL);
}

/* resources.dist_timeout: seconds; 0 and "never" wait forever (INFINITY,
 * as --dist-timeout gives ct_fit_opts); absent keeps the process's (0). */
static void test_dist_timeout(void) {
    const char *cases[] = {"3", "0", "\"never\""};
    const double want[] = {3, INFINITY, INFINITY};
    for (int i = 0; i < 3; i++) {
        char json[256];
        snprintf(json, sizeof json, "{" ML ", \"resources\": {\"dist_timeout\": %s}}", cases[i]);
        cti_config c;
        CHECK_OK(cti_config_init(&c));
        CHECK_OK(cti_config_load_string(&c, json, "exp.json"));
        CHECK(c.fit.dist_timeout == want[i]);
        cti_config_free(&c);
    }
}

/* 100,000 hyperparameters (the fault campaign's config): every one read
 * back, in the file's order, and a key set again replaces its value. The
 * dicts behind them are hashed: before, loading this took 45 s (each insert
 * compared the key with every one before it); tests.cmake's TIMEOUT guards
 * against that coming back. */
static void test_many_hparams(void) {
    enum { N = 100000 };
    size_t cap = (size_t)N * 32 + 256, n = 0;
    char *json = malloc(cap);
    CHECK(json != NULL);
    if (!json) return;
    n += (size_t)snprintf(json + n, cap - n, "{" ML ", \"hyperparameters\": {\"global_batch_size\": 8");
    for (int i = 0; i < N; i++) n += (size_t)snprintf(json + n, cap - n, ", \"h%d\": %d", i, 3 * i);
    snprintf(json + n, cap - n, "}}");
    cti_config c;
    CHECK_OK(cti_config_init(&c));
    CHECK_OK(cti_config_load_string(&c, json, "many.json"));
    CHECK_OK(cti_config_finish(&c, 1));
    bool all = ct_value_len(c.hparams) == N + 1;
    for (int i = 0; all && i < N; i++) {
        char key[16];
        snprintf(key, sizeof key, "h%d", i);
        int64_t v = -1, ikey = 0;
        const char *at = NULL;
        all = ct_value_get_int(ct_value_dict_get(c.hparams, key), &v) == 0 && v == 3 * i &&
              ct_value_dict_at(c.hparams, (size_t)i + 1, &at, &ikey) && at && strcmp(at, key) == 0;
    }
    CHECK(all);
    CHECK(ct_value_dict_set(c.hparams, "h77777", ct_value_int(-5)) == 0);
    int64_t v = 0;
    CHECK(ct_value_get_int(ct_value_dict_get(c.hparams, "h77777"), &v) == 0 && v == -5);
    CHECK(ct_value_len(c.hparams) == N + 1 && ct_value_dict_get(c.hparams, "h100000") == NULL);
    cti_config_free(&c);
    free(json);

    /* integer and string keys side by side past the index's threshold: an
     * integer key 5 and a string key "5" are different keys */
    ct_value *d = ct_value_dict();
    for (int i = 0; i < 1000; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        CHECK(ct_value_dict_set_int(d, i, ct_value_int(i)) == 0 && ct_value_dict_set(d, key, ct_value_int(-i)) == 0);
    }
    bool ok = ct_value_len(d) == 2000;
    for (int i = 0; ok && i < 1000; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        int64_t a = 0, b = 0;
        ok = ct_value_get_int(ct_value_dict_get_int(d, i), &a) == 0 && a == i &&
             ct_value_get_int(ct_value_dict_get(d, key), &b) == 0 && b == -i;
    }
    CHECK(ok && !ct_value_dict_get_int(d, 1000) && !ct_value_dict_get(d, "1000"));
    ct_value_free(d);
}

int main(void) {
    test_periods();
    test_many_hparams();
    test_dist_timeout();
    test_defaults();
    test_full_config();
    test_minimal_config();
    test_errors();
    test_misuse();
    return ct_test_result("config_load");
}
