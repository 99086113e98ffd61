/* tests/loop/determined_order.c — a trial whose losses depend on every draw
 * from the global generator: Linear(8, 16) -> ReLU -> Dropout(0.5) ->
 * Linear(16, 3), SGD lr 0.1, cross entropy, on 48 training records
 * x[i, j] = sin(0.37 (8 i + j)), y[i] = 7 i mod 3 (16 validation records
 * likewise from i = 48). With --hparam full=1 it validates with
 * evaluate_full_dataset (rank 0 iterates the loader itself) instead of
 * evaluate_batch. test_determined_order.py runs the same trial in
 * Determined's own loop and compares the losses; test_evaluate.py
 * evaluates its checkpoints (ct_evaluate), with a named validation loader. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

typedef struct {
    ct_module *model;
    ct_optim *opt;
} Trial;

static void *init(ct_context *ctx) {
    Trial *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    ct_module *layers[4] = {ct_nn_linear(8, 16, true), ct_nn_relu(), ct_nn_dropout(0.5), ct_nn_linear(16, 3, true)};
    t->model = ct_ctx_wrap_model(ctx, ct_nn_sequential(4, layers));
    ct_sgd_opts o = ct_sgd_defaults();
    o.lr = 0.1;
    t->opt = t->model ? ct_ctx_wrap_optimizer(ctx, ct_optim_sgd(t->model, &o)) : NULL;
    if (!t->opt) {
        free(t);
        return NULL;
    }
    return t;
}

static ct_loader *loader(ct_context *ctx, int64_t first, int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)n * 8);
    int64_t *y = malloc(sizeof(int64_t) * (size_t)n);
    if (!x || !y) {
        free(x);
        free(y);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < 8; j++) x[i * 8 + j] = sinf(0.37f * (float)((first + i) * 8 + j));
        y[i] = (7 * (first + i)) % 3;
    }
    ct_tensor *tx = ct_from_data(x, CT_SHAPE(n, 8), CT_F32), *ty = ct_from_data(y, CT_SHAPE(n), CT_I64);
    free(x);
    free(y);
    ct_dataset *ds = ct_dataset_tensors(2, (ct_tensor *[]){tx, ty});
    ct_tensor_free(tx);
    ct_tensor_free(ty);
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    return ct_loader_new(ds, &o);
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return loader(ctx, 0, 48); }
/* With the hyperparameter named (a string), a second validation loader of
 * that name over 24 records from i = 64 (test_evaluate.py). */
static ct_loader *val_loader(void *self, ct_context *ctx) {
    const char *named = ct_ctx_hparam_str(ctx, "named", "");
    if (named[0] && ct_ctx_add_validation_loader(ctx, named, loader(ctx, 64, 24)) != 0) return NULL;
    return loader(ctx, 48, 16);
}

static ct_tensor *loss_of(Trial *t, const ct_value *batch) {
    return ct_cross_entropy(ct_nn_forward(t->model, ct_batch_at(batch, 0)), ct_batch_at(batch, 1));
}

static ct_value *metric(const char *name, ct_tensor *v) {
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, name, ct_value_tensor(ct_keep(v)));
    return m;
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch, int64_t idx) {
    Trial *t = self;
    ct_tensor *loss = loss_of(t, batch);
    if (ct_ctx_backward(ctx, loss) != 0 || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL) != 0) return NULL;
    return metric("loss", loss);
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t idx) {
    return metric("validation_loss", loss_of(self, batch));
}

/* The mean of the batches' losses, over the loader as the trial iterates it. */
static ct_value *evaluate_full(void *self, ct_context *ctx, ct_loader *l) {
    ct_value *batch = NULL;
    double sum = 0;
    int n = 0, got;
    while ((got = ct_loader_next(l, &batch)) > 0) {
        double v = 0;
        int rc = ct_item(loss_of(self, batch), &v);
        ct_value_free(batch);
        if (rc != 0) return NULL;
        sum += v;
        n++;
    }
    if (got < 0) return NULL;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_float(n ? sum / n : 0));
    return m;
}

static const ct_trial batch_trial = {
    .name = "determined_order", .init = init, .destroy = free, .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader, .train_batch = train_batch, .evaluate_batch = evaluate_batch,
};
static const ct_trial full_trial = {
    .name = "determined_order", .init = init, .destroy = free, .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader, .train_batch = train_batch, .evaluate_full_dataset = evaluate_full,
};

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--hparam") && !strcmp(argv[i + 1], "full=1")) return ct_main(argc, argv, &full_trial);
    return ct_main(argc, argv, &batch_trial);
}
