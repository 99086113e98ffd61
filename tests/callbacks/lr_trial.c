/* tests/callbacks/lr_trial.c — the learning-rate monitor
 * (ct_ctx_add_lr_monitor) on three optimizers as Lightning names them: an
 * SGD over a Linear(1,1)'s weight (lr 0.1, StepLR every 2 batches, gamma
 * 0.5), a second SGD with two parameter groups (lr 0.01, the second group
 * set to 0.02), and an Adam (lr 0.001); OneVar's data. test_lr_monitor.py
 * reads the training lines. */
#include <stdlib.h>

#include "onevar.h"

typedef struct {
    ct_module *a, *b, *c;
    ct_optim *oa, *ob, *oc;
} Trial;

static ct_optim *sgd(ct_module *m, double lr) {
    ct_sgd_opts o = ct_sgd_defaults();
    o.lr = lr;
    return ct_optim_sgd(m, &o);
}

static void *init(ct_context *ctx) {
    Trial *t = calloc(1, sizeof *t);
    if (!t || ct_ctx_add_lr_monitor(ctx) != 0) return NULL;
    t->a = ct_ctx_wrap_model(ctx, ct_nn_linear(1, 1, false));
    t->b = ct_ctx_wrap_model(ctx, ct_nn_linear(1, 1, true));
    t->c = ct_ctx_wrap_model(ctx, ct_nn_linear(1, 1, false));
    if (!t->a || !t->b || !t->c) return NULL;
    t->oa = ct_ctx_wrap_optimizer(ctx, sgd(t->a, 0.1));
    ct_optim *two = sgd(NULL, 0.01);
    ct_tensor *w = ct_nn_param_at(t->b, 0, NULL), *bias = ct_nn_param_at(t->b, 1, NULL);
    if (!two || ct_optim_add_param_group(two, 1, &w) < 0 || ct_optim_add_param_group(two, 1, &bias) < 0 ||
        ct_optim_set_lr(two, 1, 0.02) != 0)
        return NULL;
    t->ob = ct_ctx_wrap_optimizer(ctx, two);
    ct_adam_opts ao = ct_adam_defaults();
    ao.lr = 0.001;
    t->oc = ct_ctx_wrap_optimizer(ctx, ct_optim_adam(t->c, &ao));
    if (!t->oa || !t->ob || !t->oc) return NULL;
    if (!ct_ctx_wrap_lr_scheduler(ctx, ct_sched_step_lr(t->oa, 2, 0.5), CT_STEP_EVERY_BATCH, 1)) return NULL;
    return t;
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch, int64_t idx) {
    Trial *t = self;
    ct_tensor *x = ct_batch_at(batch, 0), *y = ct_batch_at(batch, 1);
    ct_tensor *d = ct_sub(ct_add(ct_add(ct_nn_forward(t->a, x), ct_nn_forward(t->b, x)), ct_nn_forward(t->c, x)), y);
    ct_tensor *loss = ct_mean(ct_mul(d, d));
    if (ct_ctx_backward(ctx, loss) != 0) return NULL;
    ct_optim *opts[3] = {t->oa, t->ob, t->oc};
    for (int i = 0; i < 3; i++)
        if (ct_ctx_step_optimizer(ctx, opts[i], NULL, NULL) != 0) return NULL;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "loss", ct_value_tensor(ct_keep(loss)));
    return m;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t idx) {
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_float(0));
    return m;
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, 64); }
static ct_loader *val_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, 4); }

static const ct_trial trial = {
    .name = "lr", .init = init, .destroy = free, .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader, .train_batch = train_batch, .evaluate_batch = evaluate_batch,
};

int main(int argc, char **argv) { return ct_main(argc, argv, &trial); }
