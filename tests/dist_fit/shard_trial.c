/* tests/dist_fit/shard_trial.c — the trial test_shard.py runs with and
 * without optimizations.shard_optimizer, under mpirun, through ct_main.
 *
 * An MLP 16 -> h -> h/2 -> 4 (ReLU between; six parameters of six sizes, so
 * that the ranks' shares differ), or with depth > 0 16 -> h, depth times
 * h -> h, then h -> 4 (many layers of one size, as a large model has), on
 * 240 fixed records in 4 classes,
 * shuffled, cross entropy. The optimizer has two groups, as a weight-decay
 * split is written in PyTorch: the weights (weight_decay wd) and the
 * biases (weight_decay 0).
 *
 * Hyperparameters: optimizer ("adam": sgd | adam | adamw | rmsprop |
 * adagrad | adadelta | adamax | nadam | radam | lbfgs), lr (0.01), momentum
 * (0.9, SGD's and RMSprop's), wd (0.01), hidden (32), depth (0), clip (0: none; > 0: the
 * step clips the gradients' norm to it with ct_clip_grad_norm), amp
 * (false: fp16 autocast with a GradScaler, ct_ctx_use_amp), init_scale (the
 * scaler's first scale: 65536), fused (false: Adam/AdamW/SGD's fused
 * kernels), halves (false: two backwards a batch, one on each half, before
 * the step).
 *
 * At on_trial_shutdown each rank writes $SHARD_OUT/rank<r>.json: the bytes
 * and entries of the optimizer state it holds, the parameters it holds
 * state for, the parameters' bytes, and from /proc/self/status (kB) the
 * largest VmData after a training step (vm_data_train_kb: before the last
 * checkpoint), VmData and VmHWM. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

enum { N_TRAIN = 240, N_VAL = 48, F = 16, CLASSES = 4 };

typedef struct {
    ct_module *model;
    ct_optim *opt;
    double clip;
    long vm_data_train_kb; /* the most VmData seen after a step */
    int64_t grads_at_clip; /* the most parameters with a gradient the clip callback saw */
    bool halves;           /* two backwards a batch, a half each */
    ct_tensor *x, *y; /* all records (owned) */
} Trial;

/* Records that depend on no generator: y is the argmax of four fixed
 * projections of x. */
static int make_records(Trial *t) {
    enum { N = N_TRAIN + N_VAL };
    static float x[N * F];
    static int64_t y[N];
    uint32_t s = 777;
    for (int i = 0; i < N * F; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    for (int i = 0; i < N; i++) {
        const float *r = x + i * F;
        float p[CLASSES] = {r[0] + r[1], r[2] - r[3], r[4] * r[5], r[6] + r[7] - r[8]};
        int best = 0;
        for (int c = 1; c < CLASSES; c++)
            if (p[c] > p[best]) best = c;
        y[i] = best;
    }
    t->x = ct_keep(ct_from_data(x, CT_SHAPE(N, F), CT_F32));
    t->y = ct_keep(ct_from_data(y, CT_SHAPE(N), CT_I64));
    return t->x && t->y ? 0 : -1;
}

/* The optimizer over no parameters yet, of the kind the hyperparameters name. */
static ct_optim *make_optimizer(ct_context *ctx) {
    const char *kind = ct_ctx_hparam_str(ctx, "optimizer", "adam");
    double lr = ct_ctx_hparam_double(ctx, "lr", 0.01), momentum = ct_ctx_hparam_double(ctx, "momentum", 0.9);
    if (!strcmp(kind, "sgd")) {
        ct_sgd_opts o = ct_sgd_defaults();
        o.lr = lr;
        o.momentum = momentum;
        return ct_optim_sgd(NULL, &o);
    }
    if (!strcmp(kind, "adam") || !strcmp(kind, "adamw")) {
        ct_adam_opts o = !strcmp(kind, "adam") ? ct_adam_defaults() : ct_adamw_defaults();
        o.lr = lr;
        return !strcmp(kind, "adam") ? ct_optim_adam(NULL, &o) : ct_optim_adamw(NULL, &o);
    }
    if (!strcmp(kind, "rmsprop")) {
        ct_rmsprop_opts o = ct_rmsprop_defaults();
        o.lr = lr;
        o.momentum = momentum;
        return ct_optim_rmsprop(NULL, &o);
    }
    if (!strcmp(kind, "adagrad")) {
        ct_adagrad_opts o = ct_adagrad_defaults();
        o.lr = lr;
        return ct_optim_adagrad(NULL, &o);
    }
    if (!strcmp(kind, "adadelta")) {
        ct_adadelta_opts o = ct_adadelta_defaults();
        o.lr = lr * 100;
        return ct_optim_adadelta(NULL, &o);
    }
    if (!strcmp(kind, "adamax")) {
        ct_adamax_opts o = ct_adamax_defaults();
        o.lr = lr;
        return ct_optim_adamax(NULL, &o);
    }
    if (!strcmp(kind, "nadam")) {
        ct_nadam_opts o = ct_nadam_defaults();
        o.lr = lr;
        return ct_optim_nadam(NULL, &o);
    }
    if (!strcmp(kind, "radam")) {
        ct_radam_opts o = ct_radam_defaults();
        o.lr = lr;
        return ct_optim_radam(NULL, &o);
    }
    if (!strcmp(kind, "lbfgs")) return ct_optim_lbfgs(NULL, NULL);
    ct_set_error(CT_ECONFIG, "shard_trial: unknown optimizer '%s'", kind);
    return NULL;
}

static void trial_destroy(void *self) {
    Trial *t = self;
    ct_tensor_free(t->x);
    ct_tensor_free(t->y);
    free(t);
}

static void *trial_init(ct_context *ctx) {
    Trial *t = calloc(1, sizeof *t);
    if (!t || make_records(t) != 0) goto fail;
    int64_t h = ct_ctx_hparam_int(ctx, "hidden", 32);
    t->clip = ct_ctx_hparam_double(ctx, "clip", 0);
    t->halves = ct_ctx_hparam_bool(ctx, "halves", false);
    ct_amp_opts amp = {.dtype = CT_F16, .scaler = ct_grad_scaler_defaults()};
    amp.scaler.init_scale = ct_ctx_hparam_double(ctx, "init_scale", amp.scaler.init_scale);
    if (ct_ctx_hparam_bool(ctx, "amp", false) && ct_ctx_use_amp(ctx, &amp) != CT_OK) goto fail;
    int64_t depth = ct_ctx_hparam_int(ctx, "depth", 0);
    if (depth < 0 || depth > 64) {
        ct_set_error(CT_ECONFIG, "shard_trial: depth must be 0..64");
        goto fail;
    }
    ct_module *layers[2 * 64 + 3];
    int n = 0;
    layers[n++] = ct_nn_linear(F, h, true);
    layers[n++] = ct_nn_relu();
    for (int64_t i = 0; i < (depth ? depth : 1); i++) {
        layers[n++] = ct_nn_linear(h, depth ? h : h / 2, true);
        layers[n++] = ct_nn_relu();
    }
    layers[n++] = ct_nn_linear(depth ? h : h / 2, CLASSES, true);
    t->model = ct_ctx_wrap_model(ctx, ct_nn_sequential(n, layers));
    if (!t->model) goto fail;
    /* Weights with weight decay, biases without: two groups. */
    size_t np = ct_nn_num_params(t->model), nw = 0, nb = 0;
    ct_tensor *all[2 * 64 + 4], *weights[64 + 2], *biases[64 + 2];
    for (size_t i = 0; i < np; i++) {
        const char *name = NULL;
        ct_tensor *p = ct_nn_param_at(t->model, i, &name);
        all[i] = p;
        if (strstr(name, "weight")) weights[nw++] = p;
        else biases[nb++] = p;
    }
    ct_optim *opt = make_optimizer(ctx);
    bool lbfgs = opt && !strcmp(ct_optim_type(opt), "LBFGS");
    int g0 = opt ? ct_optim_add_param_group(opt, lbfgs ? np : nw, lbfgs ? all : weights) : -1;
    int g1 = g0 >= 0 && !lbfgs ? ct_optim_add_param_group(opt, nb, biases) : 0;
    if (g0 < 0 || g1 < 0 ||
        (!lbfgs && ct_optim_set_option(opt, 0, "weight_decay", ct_ctx_hparam_double(ctx, "wd", 0.01)) != CT_OK) ||
        (!lbfgs && ct_optim_set_option(opt, 1, "weight_decay", 0.0) != CT_OK)) {
        ct_optim_free(opt);
        goto fail;
    }
    if (ct_ctx_hparam_bool(ctx, "fused", false))
        for (int g = 0; g < 2; g++)
            if (ct_optim_set_option(opt, (size_t)g, "fused", 1) != CT_OK) {
                ct_optim_free(opt);
                goto fail;
            }
    t->opt = ct_ctx_wrap_optimizer(ctx, opt);
    if (!t->opt) goto fail;
    return t;
fail:
    if (t) trial_destroy(t);
    return NULL;
}

/* A line of /proc/self/status in kB ("VmData"), -1 when absent. */
static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') kb = strtol(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return kb;
}

static int clip(ct_tensor *const *params, size_t n, void *ctx) {
    Trial *t = ctx;
    /* The gradients this rank holds at the step: sharded, its own share's only. */
    int64_t have = 0;
    for (size_t i = 0; i < n; i++) have += ct_has_grad(params[i]);
    if (have > t->grads_at_clip) t->grads_at_clip = have;
    return ct_clip_grad_norm(n, params, t->clip, 2.0, NULL);
}

static ct_tensor *loss_of(Trial *t, const ct_value *batch) {
    return ct_cross_entropy(ct_nn_forward(t->model, ct_batch_at(batch, 0)), ct_batch_at(batch, 1));
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    Trial *t = self;
    ct_tensor *loss = NULL;
    if (t->halves) {
        /* Two backwards before the step, half the batch each (their mean:
         * the batch's loss): the second completes the first's window. */
        ct_tensor *x = ct_batch_at(batch, 0), *y = ct_batch_at(batch, 1);
        int64_t n = ct_size(x, 0), h = n / 2;
        ct_tensor *la = ct_mul_scalar(ct_cross_entropy(ct_nn_forward(t->model, ct_narrow(x, 0, 0, h)),
                                                       ct_narrow(y, 0, 0, h)), (double)h / (double)n);
        if (!la || ct_ctx_backward(ctx, la) != 0) return NULL;
        ct_tensor *lb = ct_mul_scalar(ct_cross_entropy(ct_nn_forward(t->model, ct_narrow(x, 0, h, n - h)),
                                                       ct_narrow(y, 0, h, n - h)), (double)(n - h) / (double)n);
        if (!lb || ct_ctx_backward(ctx, lb) != 0) return NULL;
        loss = ct_add(ct_detach(la), ct_detach(lb));
    } else {
        loss = loss_of(t, batch);
        if (!loss || ct_ctx_backward(ctx, loss) != 0) return NULL;
    }
    if (!loss || ct_ctx_step_optimizer(ctx, t->opt, t->clip > 0 ? clip : NULL, t) != 0) return NULL;
    long kb = status_kb("VmData");
    if (kb > t->vm_data_train_kb) t->vm_data_train_kb = kb;
    return ct_value_tensor(ct_keep(ct_alias(loss)));
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(ct_keep(loss_of(self, batch))));
    return m;
}

static ct_loader *loader(Trial *t, ct_context *ctx, bool training) {
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.shuffle = training;
    o.seed = ct_ctx_trial_seed(ctx);
    ct_tensor *x = ct_narrow(t->x, 0, training ? 0 : N_TRAIN, training ? N_TRAIN : N_VAL);
    ct_tensor *y = ct_narrow(t->y, 0, training ? 0 : N_TRAIN, training ? N_TRAIN : N_VAL);
    ct_dataset *ds = ct_dataset_tensors(2, (ct_tensor *[]){x, y});
    ct_tensor_free(x);
    ct_tensor_free(y);
    return ds ? ct_loader_new(ds, &o) : NULL;
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return loader(self, ctx, true); }
static ct_loader *val_loader(void *self, ct_context *ctx) { return loader(self, ctx, false); }

static int on_trial_shutdown(void *self, ct_context *ctx) {
    Trial *t = self;
    ct_value *sd = ct_optim_state_dict(t->opt);
    const ct_value *state = ct_value_dict_get(sd, "state");
    int64_t bytes = 0, param_bytes = 0;
    char path[4096], ids[4096] = "";
    for (size_t i = 0; i < ct_optim_num_params(t->opt); i++)
        param_bytes += ct_numel(ct_optim_param(t->opt, i)) * 4;
    for (size_t e = 0; e < ct_value_len(state); e++) {
        int64_t id = -1;
        const ct_value *entry = ct_value_dict_at(state, e, NULL, &id);
        size_t len = strlen(ids);
        snprintf(ids + len, sizeof ids - len, "%s%lld", e ? ", " : "", (long long)id);
        for (size_t k = 0; k < ct_value_len(entry); k++) {
            ct_tensor *v = ct_value_get_tensor(ct_value_dict_at(entry, k, NULL, NULL));
            if (v) bytes += ct_numel(v) * (int64_t)ct_dtype_size(ct_dtype_of(v));
        }
    }
    const char *dir = getenv("SHARD_OUT");
    snprintf(path, sizeof path, "%s/rank%d.json", dir && dir[0] ? dir : ".", ct_ctx_rank(ctx));
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "{\"rank\": %d, \"size\": %d, \"state_bytes\": %lld, \"entries\": %zu, \"params\": [%s], "
                   "\"param_bytes\": %lld, \"vm_data_train_kb\": %ld, \"vm_data_kb\": %ld, \"vm_hwm_kb\": %ld, "
                   "\"grads_at_clip\": %lld}\n",
                ct_ctx_rank(ctx), ct_ctx_size(ctx), (long long)bytes, ct_value_len(state), ids, (long long)param_bytes,
                t->vm_data_train_kb, status_kb("VmData"), status_kb("VmHWM"), (long long)t->grads_at_clip);
        fclose(f);
    }
    ct_value_free(sd);
    return f ? 0 : ct_set_error(CT_EIO, "cannot write %s", path);
}

static int build_callbacks(void *self, ct_context *ctx) {
    ct_callback cb = {.name = "report", .self = self, .on_trial_shutdown = on_trial_shutdown};
    return ct_ctx_add_callback(ctx, &cb);
}

static const ct_trial trial = {
    .name = "shard_trial",
    .init = trial_init,
    .destroy = trial_destroy,
    .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
    .build_callbacks = build_callbacks,
};

int main(int argc, char **argv) { return ct_main(argc, argv, &trial); }
