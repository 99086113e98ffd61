/* tests/warm_start/warm_start_trial.c — the C side of test_warm_start.py: a
 * small trial (Linear(4, hidden) -> ReLU -> Linear(hidden, 3), Adam,
 * StepLR(2, 0.5) stepped every batch) warm-started from a checkpoint
 * directory, two ways:
 *
 *   warm_start_trial direct DIR OUT.pth [HPARAMS_JSON]
 *       builds the trial's context and calls cti_context_warm_start(ctx, DIR)
 *       itself (module fit's internals, linked directly), then saves what
 *       the trial holds to OUT.pth (below). The warm start's console line
 *       goes to stdout; a failure prints "CODE_NAME\nmessage" on stderr and
 *       exits 3.
 *   warm_start_trial fit DIR OUT.pth OUTPUT_DIR [HPARAMS_JSON]
 *       ct_fit with opts.warm_start = DIR for 2 batches (reports every
 *       batch, checkpoints at the end in OUTPUT_DIR): the first train_batch
 *       saves what the trial holds, before it trains, to OUT.pth, with
 *       "first_batch" its batch_idx and "initial_batch" the context's.
 *
 * OUT.pth: {"model": state_dict, "optimizer": state_dict, "scheduler":
 * state_dict (when there is one), "lr": the optimizer's lr, "scaler": the
 * grad scaler's state_dict (with amp)}.
 *
 * Hyperparameters: hidden (8), schedulers (1: 0 leaves the scheduler out),
 * amp (false: fp16 autocast with a grad scaler, init_scale 64). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>
#include <jansson.h>

#include "base/value_json.h"
#include "fit/context.h"
#include "fit/warm_start.h"

typedef struct {
    ct_module *model;
    ct_optim *opt;
    ct_sched *sched;
    ct_tensor *x, *y;
    const char *out; /* fit: where the first batch saves the state */
    bool saved;
} Trial;

static const char *g_out;

/* 16 records that depend on no generator. */
static void make_records(Trial *t) {
    enum { N = 16, F = 4 };
    float x[N * F];
    int64_t y[N];
    for (int i = 0; i < N * F; i++) x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
    for (int i = 0; i < N; i++) y[i] = (x[i * F] + x[i * F + 1] > 0) + (x[i * F + 2] > 0.3f);
    t->x = ct_keep(ct_from_data(x, CT_SHAPE(N, F), CT_F32));
    t->y = ct_keep(ct_from_data(y, CT_SHAPE(N), CT_I64));
}

static void trial_destroy(void *self) {
    Trial *t = self;
    ct_tensor_free(t->x);
    ct_tensor_free(t->y);
    free(t);
}

static void *trial_init(ct_context *ctx) {
    Trial *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->out = g_out;
    make_records(t);
    int64_t hidden = ct_ctx_hparam_int(ctx, "hidden", 8);
    if (ct_ctx_hparam_bool(ctx, "amp", false)) {
        ct_amp_opts o = ct_amp_defaults();
        o.dtype = CT_F16;
        o.scaler.init_scale = 64;
        if (ct_ctx_use_amp(ctx, &o) != 0) goto fail;
    }
    t->model = ct_ctx_wrap_model(ctx, ct_nn_sequential(3, (ct_module *[]){ct_nn_linear(4, hidden, true), ct_nn_relu(),
                                                                          ct_nn_linear(hidden, 3, true)}));
    ct_adam_opts adam = ct_adam_defaults();
    adam.lr = 0.01;
    t->opt = t->model ? ct_ctx_wrap_optimizer(ctx, ct_optim_adam(t->model, &adam)) : NULL;
    if (!t->opt) goto fail;
    if (ct_ctx_hparam_int(ctx, "schedulers", 1) > 0 &&
        !(t->sched = ct_ctx_wrap_lr_scheduler(ctx, ct_sched_step_lr(t->opt, 2, 0.5), CT_STEP_EVERY_BATCH, 1)))
        goto fail;
    return t;
fail:
    trial_destroy(t);
    return NULL;
}

/* What the trial holds now, saved to path. */
static int save_state(ct_context *ctx, Trial *t, const char *path, int64_t first_batch) {
    ct_value *v = ct_value_dict();
    ct_value_dict_set(v, "model", ct_nn_state_dict(t->model));
    ct_value_dict_set(v, "optimizer", ct_optim_state_dict(t->opt));
    if (t->sched) ct_value_dict_set(v, "scheduler", ct_sched_state_dict(t->sched));
    ct_value_dict_set(v, "lr", ct_value_float(ct_optim_get_lr(t->opt, 0)));
    if (ct_ctx_grad_scaler(ctx)) ct_value_dict_set(v, "scaler", ct_grad_scaler_state_dict(ct_ctx_grad_scaler(ctx)));
    if (first_batch >= 0) {
        ct_value_dict_set(v, "first_batch", ct_value_int(first_batch));
        ct_value_dict_set(v, "initial_batch", ct_value_int(ct_ctx_initial_batch(ctx)));
    }
    int rc = ct_pth_save(path, v, NULL, NULL);
    ct_value_free(v);
    return rc;
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    Trial *t = self;
    if (!t->saved) {
        t->saved = true;
        if (save_state(ctx, t, t->out, batch_idx) != 0) return NULL;
    }
    ct_tensor *loss = ct_cross_entropy(ct_nn_forward(t->model, ct_batch_at(batch, 0)), ct_batch_at(batch, 1));
    if (ct_ctx_backward(ctx, loss) != 0 || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL) != 0) return NULL;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "loss", ct_value_tensor(ct_keep(ct_alias(loss))));
    return m;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    Trial *t = self;
    ct_tensor *out = ct_nn_forward(t->model, ct_batch_at(batch, 0));
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(ct_keep(ct_cross_entropy(out, ct_batch_at(batch, 1)))));
    return m;
}

static ct_loader *loader(void *self, ct_context *ctx) {
    Trial *t = self;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    return ct_loader_new(ct_dataset_tensors(2, (ct_tensor *[]){ct_alias(t->x), ct_alias(t->y)}), &o);
}

static const ct_trial trial = {
    .name = "warm_start_trial",
    .init = trial_init,
    .destroy = trial_destroy,
    .build_training_data_loader = loader,
    .build_validation_data_loader = loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
};

static int die(void) {
    const char *name = ct_strerror(ct_last_code());
    fprintf(stderr, "%.*s\n%s\n", (int)strcspn(name, ":"), name, ct_last_error());
    return 3;
}

static ct_value *hparams(const char *json) {
    ct_value *hp = NULL;
    if (json) {
        json_error_t err;
        json_t *j = json_loads(json, 0, &err);
        hp = j ? cti_value_from_json(j) : NULL;
        json_decref(j);
    }
    if (!hp) hp = ct_value_dict();
    if (!ct_value_dict_get(hp, "global_batch_size")) ct_value_dict_set(hp, "global_batch_size", ct_value_int(4));
    return hp;
}

static int direct(const char *dir, const char *out, const char *hp_json) {
    ct_value *hp = hparams(hp_json);
    ct_fit_opts o = ct_fit_defaults();
    o.hparams = hp;
    o.global_batch_size = 4;
    ct_context *ctx = cti_context_new(&trial, &o);
    int rc = ctx ? cti_context_build_trial(ctx) : ct_last_code();
    if (rc == 0) rc = cti_context_warm_start(ctx, dir);
    if (rc == 0) rc = save_state(ctx, ct_ctx_self(ctx), out, -1);
    if (rc != 0) rc = die();
    ct_ctx_free(ctx);
    ct_value_free(hp);
    return rc;
}

static int fit(const char *dir, const char *out, const char *output_dir, const char *hp_json) {
    ct_value *hp = hparams(hp_json);
    ct_fit_opts o = ct_fit_defaults();
    o.hparams = hp;
    o.max_length = ct_batches(2);
    o.reporting_period = ct_batches(1);
    o.output_dir = output_dir;
    o.warm_start = dir;
    o.tensorboard = false;
    g_out = out;
    int rc = ct_fit(&trial, &o);
    if (rc != 0) rc = die();
    ct_value_free(hp);
    return rc;
}

int main(int argc, char **argv) {
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "direct") == 0)
        return direct(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "fit") == 0)
        return fit(argv[2], argv[3], argv[4], argc == 6 ? argv[5] : NULL);
    fprintf(stderr, "usage: %s direct DIR OUT.pth [HPARAMS] | fit DIR OUT.pth OUTPUT_DIR [HPARAMS]\n", argv[0]);
    return 2;
}
