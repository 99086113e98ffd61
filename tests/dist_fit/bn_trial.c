/* tests/dist_fit/bn_trial.c — a model with BatchNorm trained on ranks whose
 * shards differ in scale, so that each rank's running statistics would
 * differ (test_bn.py runs it under mpirun -np 2):
 *
 *     Sequential(Linear(4, 8), BatchNorm1d(8), ReLU(), Linear(8, 1)), MSE, SGD
 *
 * Record i of the training set is x_j = sin(0.37 i + 1.3 j), times 3 and
 * plus 2 for odd i; y = sum_j (j + 1) x_j. Sharded round-robin over two
 * ranks, rank 0 gets the small records and rank 1 the large ones. The
 * validation set (32 records, cos instead of sin, both scales) is written
 * to OUT/val.pth for the test to evaluate the checkpoint in Python. Run
 * through ct_main: bn_trial --output OUT [flags]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <ctrial/ctrial.h>

typedef struct {
    ct_module *net;
    ct_optim *opt;
} Trial;

static void *init(ct_context *ctx) {
    Trial *t = calloc(1, sizeof *t);
    t->net = ct_ctx_wrap_model(ctx, ct_nn_sequential(4, (ct_module *[]){ct_nn_linear(4, 8, true),
                                                                          ct_nn_batchnorm1d(8, NULL), ct_nn_relu(),
                                                                          ct_nn_linear(8, 1, true)}));
    ct_sgd_opts o = ct_sgd_defaults();
    o.lr = 0.05;
    t->opt = ct_ctx_wrap_optimizer(ctx, ct_optim_sgd(t->net, &o));
    return t->net && t->opt ? t : NULL;
}

/* n records: (x [n, 4], y [n, 1]) as described above, from sin or cos. */
static ct_dataset *records(int64_t n, bool validation) {
    float *x = malloc(sizeof(float) * (size_t)n * 4), *y = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        y[i] = 0;
        for (int j = 0; j < 4; j++) {
            double a = 0.37 * (double)i + 1.3 * j;
            double v = (validation ? cos(a) : sin(a)) * (i % 2 ? 3.0 : 1.0) + (i % 2 ? 2.0 : 0.0);
            x[i * 4 + j] = (float)v;
            y[i] += (float)(j + 1) * x[i * 4 + j];
        }
    }
    ct_tensor *ts[2] = {ct_from_data(x, 2, (int64_t[]){n, 4}, CT_F32), ct_from_data(y, 2, (int64_t[]){n, 1}, CT_F32)};
    free(x);
    free(y);
    ct_dataset *d = ct_dataset_tensors(2, ts);
    ct_tensor_free(ts[0]);
    ct_tensor_free(ts[1]);
    return d;
}

static ct_loader *loader(ct_context *ctx, bool validation) {
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    return ct_loader_new(records(validation ? 32 : 64, validation), &o);
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return loader(ctx, false); }

/* The validation loader; rank 0 also writes the validation set to
 * OUT/val.pth, as the tuple (x [32, 4], y [32, 1]). */
static ct_loader *val_loader(void *self, ct_context *ctx) {
    if (ct_ctx_rank(ctx) == 0) {
        ct_dataset *d = records(32, true);
        int64_t all[32];
        for (int64_t i = 0; i < 32; i++) all[i] = i;
        ct_value *batch = ct_dataset_get_batch(d, all, 32);
        char path[4200];
        snprintf(path, sizeof path, "%s/val.pth", ct_ctx_tensorboard_path(ctx));
        int rc = batch ? ct_pth_save(path, batch, NULL, NULL) : -1;
        ct_value_free(batch);
        ct_dataset_free(d);
        if (rc != 0) return NULL;
    }
    return loader(ctx, true);
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch, int64_t idx) {
    Trial *t = self;
    ct_tensor *loss = ct_mse_loss(ct_nn_forward(t->net, ct_batch_at(batch, 0)), ct_batch_at(batch, 1), CT_REDUCE_MEAN);
    if (ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL)) return NULL;
    return ct_value_tensor(ct_keep(loss));
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t idx) {
    Trial *t = self;
    ct_value *m = ct_value_dict();
    ct_tensor *loss = ct_mse_loss(ct_nn_forward(t->net, ct_batch_at(batch, 0)), ct_batch_at(batch, 1), CT_REDUCE_MEAN);
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(ct_keep(loss)));
    return m;
}

static const ct_trial trial = {
    .name = "bn", .init = init, .destroy = free,
    .build_training_data_loader = train_loader, .build_validation_data_loader = val_loader,
    .train_batch = train_batch, .evaluate_batch = evaluate_batch,
};

int main(int argc, char **argv) { return ct_main(argc, argv, &trial); }
