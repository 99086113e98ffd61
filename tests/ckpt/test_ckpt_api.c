/* tests/ckpt/test_ckpt_api.c — checkpoint calls from C: what ct_fit writes,
 * the metadata and state it holds, and refusals that need a second trial
 * shape (a different count of models / optimizers / schedulers). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ct_test.h"

/* y = x with one weight per model; hparams: models (1 or 2), scheduler (bool). */
typedef struct {
    ct_module *m[2];
    ct_optim *o[2];
    int n;
    double scale; /* the data config's scale (ct_ctx_data_config), as a data setting (1) */
} Tiny;

static void *tiny_init(ct_context *ctx) {
    Tiny *t = calloc(1, sizeof *t);
    t->n = (int)ct_ctx_hparam_int(ctx, "models", 1);
    if (ct_value_get_float(ct_value_dict_get(ct_ctx_data_config(ctx), "scale"), &t->scale) != 0) t->scale = 1;
    for (int i = 0; i < t->n; i++) {
        t->m[i] = ct_ctx_wrap_model(ctx, ct_nn_linear(1, 1, false));
        ct_sgd_opts o = ct_sgd_defaults();
        o.lr = 0.01;
        t->o[i] = ct_ctx_wrap_optimizer(ctx, ct_optim_sgd(t->m[i], &o));
    }
    if (ct_ctx_hparam_bool(ctx, "scheduler", false))
        ct_ctx_wrap_lr_scheduler(ctx, ct_sched_step_lr(t->o[0], 2, 0.5), CT_STEP_EVERY_BATCH, 1);
    return t;
}

static ct_value *tiny_train(void *self, ct_context *ctx, const ct_value *batch, int64_t e, int64_t b) {
    Tiny *t = self;
    ct_tensor *loss = NULL;
    for (int i = 0; i < t->n; i++) {
        ct_tensor *l = ct_mse_loss(ct_nn_forward(t->m[i], ct_batch_at(batch, 0)), ct_batch_at(batch, 1), CT_REDUCE_MEAN);
        loss = loss ? ct_add(loss, l) : l;
    }
    if (ct_ctx_backward(ctx, loss)) return NULL;
    for (int i = 0; i < t->n; i++)
        if (ct_ctx_step_optimizer(ctx, t->o[i], NULL, NULL)) return NULL;
    return ct_value_tensor(ct_keep(loss));
}

static ct_value *tiny_eval(void *self, ct_context *ctx, const ct_value *batch, int64_t b) {
    Tiny *t = self;
    ct_value *m = ct_value_dict();
    ct_tensor *l = ct_mse_loss(ct_nn_forward(t->m[0], ct_batch_at(batch, 0)), ct_batch_at(batch, 1), CT_REDUCE_MEAN);
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(ct_keep(l)));
    return m;
}

static ct_loader *tiny_loader(void *self, ct_context *ctx) {
    ct_tensor *x = ct_ones(CT_SHAPE(8, 1), NULL);
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = 4;
    return ct_loader_new(ct_dataset_tensors(2, (ct_tensor *[]){x, x}), &o);
}

static const ct_trial tiny = {
    .name = "tiny", .init = tiny_init, .destroy = free,
    .build_training_data_loader = tiny_loader, .build_validation_data_loader = tiny_loader,
    .train_batch = tiny_train, .evaluate_batch = tiny_eval,
};

static ct_value *hparams(int models, bool scheduler) {
    ct_value *h = ct_value_dict();
    ct_value_dict_set(h, "global_batch_size", ct_value_int(4));
    ct_value_dict_set(h, "models", ct_value_int(models));
    ct_value_dict_set(h, "scheduler", ct_value_bool(scheduler));
    return h;
}

/* The experiment config a program's ct_main would pass: {"data": {"scale": 3.5}}. */
static ct_value *experiment_config(void) {
    ct_value *data = ct_value_dict(), *c = ct_value_dict();
    ct_value_dict_set(data, "scale", ct_value_float(3.5));
    ct_value_dict_set(c, "data", data);
    return c;
}

/* Whether fit() passes only a data config, as a program of its own may,
 * instead of ct_main's experiment config with the data config in it. */
static bool g_data_only;

static int fit(const char *out, int models, bool scheduler, const char *resume, int64_t batches) {
    ct_value *h = hparams(models, scheduler), *config = experiment_config();
    ct_fit_opts o = ct_fit_defaults();
    o.experiment_config = g_data_only ? NULL : config;
    o.data = ct_value_dict_get(config, "data");
    o.max_length = ct_batches(batches);
    o.validation_period = ct_batches(2);
    o.checkpoint_period = ct_batches(3);
    o.output_dir = out;
    o.overwrite = !resume; /* each case replaces the last one's run */
    o.hparams = h;
    o.quiet = true;
    o.resume = resume;
    int rc = ct_fit(&tiny, &o);
    ct_value_free(h);
    ct_value_free(config);
    return rc;
}

/* The smallest finite validation_loss over the committed checkpoints in
 * dir, read from each metadata.json (independently of ct_ckpt_best). */
static double min_validation_loss(const char *dir, char *which, size_t len) {
    DIR *d = opendir(dir);
    double best = INFINITY;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "ckpt-", 5) != 0) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ct_value *meta = ct_ckpt_metadata(path);
        double v;
        if (ct_value_get_float(ct_value_dict_get(ct_value_dict_get(meta, "validation_metrics"), "validation_loss"),
                               &v) == 0 &&
            v < best) {
            best = v;
            snprintf(which, len, "%s", path);
        }
        ct_value_free(meta);
    }
    if (d) closedir(d);
    return best;
}

int main(void) {
    const char *out = "ckpt_api_output";
    char latest[4096], dir[4200];
    CHECK_OK(fit(out, 2, true, NULL, 6));

    /* The latest checkpoint is the one at 6 (end); metadata as documented. */
    CHECK_OK(ct_ckpt_latest("ckpt_api_output/checkpoints", latest, sizeof latest));
    CHECK(strstr(latest, "ckpt-000006-") != NULL);
    CHECK_OK(ct_ckpt_verify(latest));
    ct_value *meta = ct_ckpt_metadata(latest);
    int64_t steps = 0;
    CHECK_OK(ct_value_get_int(ct_value_dict_get(meta, "steps_completed"), &steps));
    CHECK(steps == 6);
    CHECK(strcmp(ct_value_get_str(ct_value_dict_get(meta, "format")), "pickle") == 0);
    CHECK(strncmp(ct_value_get_str(ct_value_dict_get(meta, "framework")), "torch-", 6) == 0);
    const ct_value *vm = ct_value_dict_get(meta, "validation_metrics");
    CHECK(ct_value_dict_get(vm, "validation_loss") != NULL); /* validated at 6 */
    const ct_value *ts = ct_value_dict_get(meta, "trial_state");
    CHECK(strcmp(ct_value_get_str(ct_value_dict_get(ts, "reason")), "policy") == 0); /* validated at 6: best so far */
    double scale = 0; /* the experiment config is kept */
    CHECK_OK(ct_value_get_float(ct_value_dict_get(ct_value_dict_get(ct_value_dict_get(meta, "experiment_config"), "data"),
                                                  "scale"),
                                &scale));
    CHECK(scale == 3.5);
    ct_value_free(meta);

    /* state_dict.pth: two models, two optimizers, one scheduler, rng. */
    snprintf(dir, sizeof dir, "%s/state_dict.pth", latest);
    ct_value *state = NULL;
    CHECK_OK(ct_pth_load(dir, &state));
    CHECK(ct_value_len(ct_value_dict_get(state, "models_state_dict")) == 2);
    CHECK(ct_value_len(ct_value_dict_get(state, "optimizers_state_dict")) == 2);
    CHECK(ct_value_len(ct_value_dict_get(state, "lr_schedulers_state_dict")) == 1);
    ct_tensor *rng = ct_value_get_tensor(ct_value_dict_get(ct_value_dict_get(state, "rng_state"), "cpu_rng_state"));
    CHECK(rng && ct_dtype_of(rng) == CT_U8 && ct_numel(rng) > 0);
    CHECK(ct_value_dict_get(state, "accumulated_gradients") == NULL);
    ct_value_free(state);

    /* Resuming into a trial with one model / without the scheduler: refused,
     * naming the counts. */
    CHECK(fit(out, 1, true, latest, 9) == CT_ECHECKPOINT);
    CHECK_ERR(CT_ECHECKPOINT, "holds 2 models, the trial has 1");
    CHECK(fit(out, 2, false, latest, 9) == CT_ECHECKPOINT);
    CHECK_ERR(CT_ECHECKPOINT, "holds 1 LR schedulers, the trial has 0");
    CHECK(ct_exit_code(CT_ECHECKPOINT) == CT_EXIT_CHECKPOINT);

    /* The matching trial resumes and continues to 9 (checkpoint at 9). */
    CHECK_OK(fit(out, 2, true, latest, 9));
    CHECK_OK(ct_ckpt_latest("ckpt_api_output/checkpoints", latest, sizeof latest));
    CHECK(strstr(latest, "ckpt-000009-") != NULL);

    /* Loading for use: models in eval mode, the trial's own struct. */
    ct_context *ctx = NULL;
    CHECK(ct_load_trial_from_checkpoint("no/such/dir", &tiny, NULL, "cpu", &ctx) == CT_ECHECKPOINT);
    CHECK_ERR(CT_ECHECKPOINT, "not a directory");
    CHECK(ctx == NULL);
    ct_value *one = hparams(1, false);
    CHECK(ct_load_trial_from_checkpoint(latest, &tiny, one, "cpu", &ctx) == CT_ECHECKPOINT);
    CHECK_ERR(CT_ECHECKPOINT, "holds 2 models, the trial has 1");
    ct_value_free(one);
    CHECK_OK(ct_load_trial_from_checkpoint(latest, &tiny, NULL, "cpu", &ctx));
    CHECK(ct_ctx_model(ctx, 1) != NULL && ct_ctx_model(ctx, 2) == NULL);
    CHECK(!ct_nn_is_training(ct_ctx_model(ctx, 0)));
    CHECK(((Tiny *)ct_ctx_self(ctx))->n == 2);
    /* init read the experiment config the checkpoint was trained with. */
    CHECK(((Tiny *)ct_ctx_self(ctx))->scale == 3.5);
    CHECK(ct_value_equal(ct_ctx_experiment_config(ctx), (meta = experiment_config())));
    ct_value_free(meta);
    snprintf(dir, sizeof dir, "%s/state_dict.pth", latest);
    CHECK_OK(ct_pth_load(dir, &state));
    ct_value *sd = ct_nn_state_dict(ct_ctx_model(ctx, 1));
    CHECK(ct_value_equal(sd, ct_value_list_get(ct_value_dict_get(state, "models_state_dict"), 1)));
    ct_value_free(sd);
    ct_value_free(state);
    ct_ctx_free(ctx);

    /* ct_fit with a data config and no experiment config: the checkpoint
     * keeps the data config, and init reads it when loading. */
    g_data_only = true;
    CHECK_OK(fit("ckpt_api_data_only", 1, false, NULL, 3));
    g_data_only = false;
    CHECK_OK(ct_ckpt_latest("ckpt_api_data_only/checkpoints", dir, sizeof dir));
    meta = ct_ckpt_metadata(dir);
    CHECK(ct_value_dict_get(meta, "experiment_config") == NULL && ct_value_dict_get(meta, "data_config") != NULL);
    ct_value_free(meta);
    CHECK_OK(ct_load_trial_from_checkpoint(dir, &tiny, NULL, "cpu", &ctx));
    CHECK(((Tiny *)ct_ctx_self(ctx))->scale == 3.5 && ct_ctx_experiment_config(ctx) == NULL);
    ct_ctx_free(ctx);

    /* The best checkpoint: the one whose validation_loss is the smallest. */
    char best[4096], want[4200] = "";
    double best_value = 0, want_value = min_validation_loss("ckpt_api_output/checkpoints", want, sizeof want);
    CHECK(isfinite(want_value));
    CHECK_OK(ct_ckpt_best("ckpt_api_output/checkpoints", "validation_loss", true, best, sizeof best, &best_value));
    CHECK(strcmp(best, want) == 0 && best_value == want_value);
    CHECK(ct_ckpt_best("ckpt_api_output/checkpoints", "accuracy", true, best, sizeof best, NULL) == CT_ECHECKPOINT);
    CHECK_ERR(CT_ECHECKPOINT, "no checkpoint in ckpt_api_output/checkpoints has a finite validation metric 'accuracy'");

    /* No checkpoint directory: a clear error, not a crash. */
    CHECK(ct_ckpt_latest("ckpt_api_output/nothing_here", latest, sizeof latest) == CT_ECHECKPOINT);
    CHECK_ERR(CT_ECHECKPOINT, "no checkpoint in");
    CHECK(ct_ckpt_verify("ckpt_api_output") == CT_ECHECKPOINT);
    CHECK_ERR(CT_ECHECKPOINT, "metadata.json");
    return ct_test_result("ckpt_api");
}
