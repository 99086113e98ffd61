/* tests/onevar.h — Determined's OneVar fixture, shared by the loop's tests
 * (tests/loop/ and tests/dist_fit/semantics_trial.c): records x = 1, y = 1,
 * a bias-free Linear(1,1) starting at w = 0, SGD lr 0.001, MSE. Each batch
 * moves w <- w + 0.002 (1 - w) and reports loss = (1 - w)^2 from before the
 * step, so after k steps 1 - w = 0.998^k. */
#ifndef CT_TEST_ONEVAR_H
#define CT_TEST_ONEVAR_H

#include <stdlib.h>

#include <ctrial/ctrial.h>

/* Linear(1, 1, bias=False) with its weight set to 0 (NEW module). */
static inline ct_module *onevar_model(void) {
    ct_module *lin = ct_nn_linear(1, 1, false);
    ct_guard *g = ct_no_grad();
    ct_zero_(ct_nn_get(lin, "weight"));
    ct_guard_end(g);
    return lin;
}

/* SGD(lr=0.001) over the model (NEW optimizer; NULL model: NULL). */
static inline ct_optim *onevar_sgd(ct_module *lin) {
    ct_sgd_opts o = ct_sgd_defaults();
    o.lr = 0.001;
    return lin ? ct_optim_sgd(lin, &o) : NULL;
}

/* `records` records (x = 1, y = 1) in batches of the context's per-slot
 * batch size (NEW loader). */
static inline ct_loader *onevar_loader(ct_context *ctx, int64_t records) {
    ct_tensor *x = ct_ones(CT_SHAPE(records, 1), NULL), *y = ct_ones(CT_SHAPE(records, 1), NULL);
    ct_dataset *ds = ct_dataset_tensors(2, (ct_tensor *[]){x, y});
    ct_tensor_free(x);
    ct_tensor_free(y);
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    return ct_loader_new(ds, &o);
}

/* MSE of the model on a batch (x, y, ...). */
static inline ct_tensor *onevar_mse(ct_module *lin, const ct_value *batch) {
    return ct_mse_loss(ct_nn_forward(lin, ct_batch_at(batch, 0)), ct_batch_at(batch, 1), CT_REDUCE_MEAN);
}

/* The OneVar trial that most of the loop's tests run, in parts a test's
 * own functions call around its counters, sleeps or checks: the state
 * (init wraps the model and SGD), a training step (backward and the
 * optimizer step on the MSE; returns it) and an evaluation step
 * ({"validation_loss": MSE}). */
typedef struct {
    ct_module *model;
    ct_optim *opt;
} onevar_parts;

/* NEW onevar_parts with both wrapped, or NULL + error. */
static inline onevar_parts *onevar_parts_init(ct_context *ctx) {
    onevar_parts *t = (onevar_parts *)calloc(1, sizeof *t);
    if (!t) return NULL;
    t->model = ct_ctx_wrap_model(ctx, onevar_model());
    t->opt = t->model ? ct_ctx_wrap_optimizer(ctx, onevar_sgd(t->model)) : NULL;
    if (!t->opt) {
        free(t);
        return NULL;
    }
    return t;
}

/* NEW loss value, or NULL + error. */
static inline ct_value *onevar_parts_train(onevar_parts *t, ct_context *ctx, const ct_value *batch) {
    ct_tensor *loss = onevar_mse(t->model, batch);
    if (!loss || ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL)) return NULL;
    return ct_value_tensor(ct_alias(loss));
}

/* NEW {"validation_loss": MSE}. */
static inline ct_value *onevar_parts_eval(onevar_parts *t, const ct_value *batch) {
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(ct_alias(onevar_mse(t->model, batch))));
    return m;
}

#endif
