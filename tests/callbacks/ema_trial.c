/* tests/callbacks/ema_trial.c — the weight average (ct_ctx_add_ema) on
 * Linear(4, 8) -> BatchNorm1d(8) -> ReLU -> Linear(8, 1), SGD lr 0.05
 * momentum 0.9, MSE, on 48 training records x[i, j] = sin(0.37 (4 i + j)),
 * y[i] = cos(0.5 i) (16 validation records likewise from i = 48). The
 * average's options come from the hyperparameters decay, every, start,
 * use_buffers and validate (1/0). test_ema.py runs the same in Lightning. */
#include <math.h>
#include <stdlib.h>

#include <ctrial/ctrial.h>

typedef struct {
    ct_module *model;
    ct_optim *opt;
} Trial;

static void *init(ct_context *ctx) {
    Trial *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    ct_module *layers[4] = {ct_nn_linear(4, 8, true), ct_nn_batchnorm1d(8, NULL), ct_nn_relu(),
                            ct_nn_linear(8, 1, true)};
    t->model = ct_ctx_wrap_model(ctx, ct_nn_sequential(4, layers));
    ct_sgd_opts so = ct_sgd_defaults();
    so.lr = 0.05;
    so.momentum = 0.9;
    t->opt = t->model ? ct_ctx_wrap_optimizer(ctx, ct_optim_sgd(t->model, &so)) : NULL;
    ct_ema_opts o = ct_ema_defaults();
    o.decay = ct_ctx_hparam_double(ctx, "decay", 0.999);
    o.update_every_n_steps = ct_ctx_hparam_int(ctx, "every", 1);
    o.update_starting_at_step = ct_ctx_hparam_int(ctx, "start", 0);
    o.use_buffers = ct_ctx_hparam_int(ctx, "use_buffers", 1) != 0;
    o.validate_with_average = ct_ctx_hparam_int(ctx, "validate", 1) != 0;
    if (!t->opt || ct_ctx_add_ema(ctx, t->model, &o) != 0) {
        free(t);
        return NULL;
    }
    return t;
}

static ct_loader *loader(ct_context *ctx, int64_t first, int64_t n) {
    float x[64 * 4], y[64];
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < 4; j++) x[i * 4 + j] = sinf(0.37f * (float)((first + i) * 4 + j));
        y[i] = cosf(0.5f * (float)(first + i));
    }
    ct_tensor *tx = ct_from_data(x, CT_SHAPE(n, 4), CT_F32), *ty = ct_from_data(y, CT_SHAPE(n, 1), CT_F32);
    ct_dataset *ds = ct_dataset_tensors(2, (ct_tensor *[]){tx, ty});
    ct_tensor_free(tx);
    ct_tensor_free(ty);
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    return ct_loader_new(ds, &o);
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return loader(ctx, 0, 48); }
static ct_loader *val_loader(void *self, ct_context *ctx) { return loader(ctx, 48, 16); }

static ct_tensor *loss_of(Trial *t, const ct_value *batch) {
    return ct_mse_loss(ct_nn_forward(t->model, ct_batch_at(batch, 0)), ct_batch_at(batch, 1), CT_REDUCE_MEAN);
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

static const ct_trial trial = {
    .name = "ema", .init = init, .destroy = free, .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader, .train_batch = train_batch, .evaluate_batch = evaluate_batch,
};

int main(int argc, char **argv) { return ct_main(argc, argv, &trial); }
