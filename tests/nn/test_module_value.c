/* tests/nn/test_module_value.c — modules of any shape: forward over value
 * trees (ct_nn_module_value, ct_nn_call), as Python's
 * forward(*args, **kwargs).
 *
 *   - an attention block forward(x, *, memory=None, mask=None) returning
 *     (out, weights): the same values and gradients as the same
 *     expression written out with the module's weights;
 *   - a loss module returning a dict {"loss", "l1"}, and None passed and
 *     returned;
 *   - Sequential: a child's tuple handed to the next child as one argument;
 *     ct_nn_forward through a Sequential mixing tensor and value modules;
 *   - the state dict names the children's parameters as Python does;
 *   - autocast (bfloat16 on the CPU) reaches the layers inside ct_nn_call;
 *   - errors: a tuple where ct_nn_forward needs a tensor, a tensor module
 *     given two arguments or a keyword, args that is not a tuple, a module
 *     whose constructor failed (the first failure's message is kept), a
 *     forward that returns NULL without an error. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>

#include "ct_test.h"


/* ---- an attention block ------------------------------------------------------------- */

typedef struct {
    ct_module *q, *k, *v;
} Attention;

/* softmax(q(x) k(m)^T / sqrt(d) masked) v(m), and the weights. */
static ct_value *attention_forward(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    Attention *a = ct_nn_user(self);
    if (ct_value_len(args) != 1) {
        ct_set_error(CT_EINVAL, "Attention: forward(x, *, memory=None, mask=None) takes one positional argument");
        return NULL;
    }
    const ct_tensor *x = ct_value_get_tensor(ct_value_list_get(args, 0));
    const ct_value *mem = ct_value_dict_get(kwargs, "memory"), *mask = ct_value_dict_get(kwargs, "mask");
    const ct_tensor *m = mem && ct_value_kind_of(mem) == CT_VALUE_TENSOR ? ct_value_get_tensor(mem) : x;
    ct_tensor *scores = ct_div_scalar(ct_matmul(ct_nn_forward(a->q, x), ct_transpose(ct_nn_forward(a->k, m), -2, -1)),
                                      sqrt((double)ct_size(x, -1)));
    if (mask && ct_value_kind_of(mask) == CT_VALUE_TENSOR)
        scores = ct_masked_fill(scores, ct_value_get_tensor(mask), -INFINITY);
    ct_tensor *w = ct_softmax(scores, -1);
    ct_tensor *out = ct_matmul(w, ct_nn_forward(a->v, m));
    if (!out) return NULL;
    ct_value *r = ct_value_tuple();
    ct_value_list_append(r, ct_value_tensor(ct_alias(out)));
    ct_value_list_append(r, ct_value_tensor(ct_alias(w)));
    return r;
}

static ct_module *attention(int64_t d) {
    Attention *a = calloc(1, sizeof *a);
    ct_module *m = ct_nn_module_value("Attention", attention_forward, a, free);
    a->q = ct_nn_add_module(m, "q", ct_nn_linear(d, d, false));
    a->k = ct_nn_add_module(m, "k", ct_nn_linear(d, d, false));
    a->v = ct_nn_add_module(m, "v", ct_nn_linear(d, d, true));
    return m;
}

static ct_value *tuple1(ct_tensor *t) {
    ct_value *v = ct_value_tuple();
    ct_value_list_append(v, ct_value_tensor(t));
    return v;
}

static void test_attention(void) {
    ct_scope *s = ct_scope_begin();
    ct_manual_seed(3);
    ct_module *att = attention(8);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 5, 8), NULL), *mem = ct_randn(CT_SHAPE(2, 7, 8), NULL);
    ct_tensor *mask = ct_gt_scalar(ct_rand(CT_SHAPE(2, 5, 7), NULL), 0.8);
    ct_value *args = tuple1(ct_alias(x)), *kw = ct_value_dict();
    ct_value_dict_set(kw, "memory", ct_value_tensor(ct_alias(mem)));
    ct_value_dict_set(kw, "mask", ct_value_tensor(ct_alias(mask)));
    ct_value *y = ct_nn_call(att, args, kw);
    CHECK(y && ct_value_kind_of(y) == CT_VALUE_TUPLE && ct_value_len(y) == 2);
    ct_tensor *out = ct_value_get_tensor(ct_value_list_get(y, 0)), *w = ct_value_get_tensor(ct_value_list_get(y, 1));
    CHECK(ct_size(out, 0) == 2 && ct_size(out, 1) == 5 && ct_size(out, 2) == 8);
    CHECK(ct_size(w, 2) == 7);
    CHECK_OK(ct_backward(ct_add(ct_sum(ct_mul(out, out)), ct_sum(w))));
    ct_tensor *gq = ct_clone(ct_grad(ct_nn_get(att, "q.weight"))), *gv = ct_clone(ct_grad(ct_nn_get(att, "v.bias")));

    /* The same expression written out with the module's own weights. */
    CHECK_OK(ct_nn_zero_grad(att, true));
    ct_tensor *q = ct_linear(x, ct_nn_get(att, "q.weight"), NULL), *k = ct_linear(mem, ct_nn_get(att, "k.weight"), NULL);
    ct_tensor *v = ct_linear(mem, ct_nn_get(att, "v.weight"), ct_nn_get(att, "v.bias"));
    ct_tensor *w2 = ct_softmax(ct_masked_fill(ct_div_scalar(ct_matmul(q, ct_transpose(k, -2, -1)), sqrt(8.0)), mask,
                                              -INFINITY), -1);
    ct_tensor *out2 = ct_matmul(w2, v);
    CHECK(ct_test_same(out, out2) && ct_test_same(w, w2));
    CHECK_OK(ct_backward(ct_add(ct_sum(ct_mul(out2, out2)), ct_sum(w2))));
    CHECK(ct_test_same(gq, ct_grad(ct_nn_get(att, "q.weight"))) && ct_test_same(gv, ct_grad(ct_nn_get(att, "v.bias"))));
    double norm;
    CHECK_OK(ct_item(ct_sum(ct_abs(gq)), &norm));
    CHECK(norm > 0);

    /* Without keywords: memory defaults to x (self-attention). */
    ct_value *y2 = ct_nn_call(att, args, NULL);
    CHECK(y2 && ct_size(ct_value_get_tensor(ct_value_list_get(y2, 1)), 2) == 5);

    /* The state dict: the children's names, as nn.Module's. */
    ct_value *sd = ct_nn_state_dict(att);
    CHECK(ct_value_len(sd) == 4 && ct_value_dict_get(sd, "q.weight") && ct_value_dict_get(sd, "k.weight") &&
          ct_value_dict_get(sd, "v.weight") && ct_value_dict_get(sd, "v.bias"));

    /* ct_nn_forward needs a tensor back. */
    CHECK(ct_nn_forward(att, x) == NULL && ct_last_code() == CT_EINVAL);
    CHECK(strstr(ct_last_error(), "returned a tuple, not a tensor: use ct_nn_call") != NULL);
    ct_clear_error();

    ct_value_free(sd);
    ct_value_free(y2);
    ct_value_free(y);
    ct_value_free(args);
    ct_value_free(kw);
    ct_nn_free(att);
    ct_scope_end(s);
}

/* ---- dicts, None, Sequential -------------------------------------------------------- */

/* forward(pred, target, weight=None) -> {"loss": mse, "l1": l1 or None}. */
static ct_value *losses_forward(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    const ct_tensor *p = ct_value_get_tensor(ct_value_list_get(args, 0)), *t = ct_value_get_tensor(ct_value_list_get(args, 1));
    const ct_value *weight = ct_value_dict_get(kwargs, "weight");
    ct_tensor *mse = ct_mse_loss(p, t, CT_REDUCE_MEAN);
    if (!mse) return NULL;
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "loss", ct_value_tensor(ct_alias(mse)));
    bool with_l1 = weight && ct_value_kind_of(weight) != CT_VALUE_NONE;
    ct_value_dict_set(d, "l1", with_l1 ? ct_value_tensor(ct_alias(ct_l1_loss(p, t, CT_REDUCE_MEAN))) : ct_value_none());
    return d;
}

/* forward((a, b)) -> a + b: takes what the attention block returns. */
static ct_value *sum_pair_forward(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    const ct_value *pair = ct_value_list_get(args, 0);
    if (!pair || ct_value_kind_of(pair) != CT_VALUE_TUPLE) {
        ct_set_error(CT_EINVAL, "SumPair: expected a tuple");
        return NULL;
    }
    ct_tensor *a = ct_value_get_tensor(ct_value_list_get(pair, 0)), *b = ct_value_get_tensor(ct_value_list_get(pair, 1));
    ct_tensor *r = ct_add(ct_sum(a), ct_sum(b));
    return r ? ct_value_tensor(ct_alias(r)) : NULL;
}

/* forward(x) -> 2x as a value: a value module ct_nn_forward can use. */
static ct_value *twice_forward(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    ct_tensor *r = ct_mul_scalar(ct_value_get_tensor(ct_value_list_get(args, 0)), 2);
    return r ? ct_value_tensor(ct_alias(r)) : NULL;
}

static ct_value *null_forward(ct_module *self, const ct_value *args, const ct_value *kwargs) { return NULL; }

static void test_shapes(void) {
    ct_scope *s = ct_scope_begin();
    ct_manual_seed(4);
    ct_module *losses = ct_nn_module_value("Losses", losses_forward, NULL, NULL);
    ct_tensor *p = ct_randn(CT_SHAPE(4, 3), NULL), *t = ct_randn(CT_SHAPE(4, 3), NULL);
    ct_value *args = ct_value_tuple();
    ct_value_list_append(args, ct_value_tensor(ct_alias(p)));
    ct_value_list_append(args, ct_value_tensor(ct_alias(t)));
    ct_value *d = ct_nn_call(losses, args, NULL);
    CHECK(d && ct_value_kind_of(d) == CT_VALUE_DICT && ct_value_len(d) == 2);
    CHECK(ct_value_kind_of(ct_value_dict_get(d, "l1")) == CT_VALUE_NONE);
    CHECK(ct_test_same(ct_value_get_tensor(ct_value_dict_get(d, "loss")), ct_mse_loss(p, t, CT_REDUCE_MEAN)));
    ct_value *kw = ct_value_dict();
    ct_value_dict_set(kw, "weight", ct_value_float(0.5));
    ct_value *d2 = ct_nn_call(losses, args, kw);
    CHECK(d2 && ct_test_same(ct_value_get_tensor(ct_value_dict_get(d2, "l1")), ct_l1_loss(p, t, CT_REDUCE_MEAN)));

    /* Sequential: Attention's (out, weights) goes to SumPair as one argument. */
    ct_module *seq = ct_nn_sequential(2, (ct_module *[]){attention(3), ct_nn_module_value("SumPair", sum_pair_forward,
                                                                                         NULL, NULL)});
    ct_value *one = tuple1(ct_alias(p));
    ct_value *r = ct_nn_call(seq, one, NULL);
    ct_value *att_out = ct_nn_call(ct_nn_child(seq, "0"), one, NULL);
    CHECK(r && ct_value_kind_of(r) == CT_VALUE_TENSOR && att_out);
    CHECK(ct_test_same(ct_value_get_tensor(r), ct_add(ct_sum(ct_value_get_tensor(ct_value_list_get(att_out, 0))),
                                                  ct_sum(ct_value_get_tensor(ct_value_list_get(att_out, 1))))));
    CHECK(ct_nn_get(seq, "0.q.weight") != NULL);

    /* ct_nn_forward through tensor and value modules alike. */
    ct_module *mixed = ct_nn_sequential(2, (ct_module *[]){ct_nn_linear(3, 2, true), ct_nn_module_value(
                                                                                        "Twice", twice_forward, NULL, NULL)});
    ct_tensor *y = ct_nn_forward(mixed, p);
    CHECK(y && ct_test_same(y, ct_mul_scalar(ct_nn_forward(ct_nn_child(mixed, "0"), p), 2)));
    ct_value *yv = ct_nn_call(mixed, one, NULL);
    CHECK(yv && ct_test_same(ct_value_get_tensor(yv), y));

    /* Errors. */
    CHECK(ct_nn_call(ct_nn_child(mixed, "0"), args, NULL) == NULL && ct_last_code() == CT_EINVAL &&
          strstr(ct_last_error(), "takes one tensor and no keyword arguments") != NULL);
    ct_clear_error();
    CHECK(ct_nn_call(ct_nn_child(mixed, "0"), one, kw) == NULL && ct_last_code() == CT_EINVAL);
    ct_clear_error();
    CHECK(ct_nn_call(losses, kw, NULL) == NULL && strstr(ct_last_error(), "args is a dict, not a tuple or list"));
    ct_clear_error();
    /* A failed constructor earlier in the chain: its message is kept. */
    CHECK(ct_nn_call(ct_nn_sequential(1, (ct_module *[]){ct_nn_linear(-1, 2, true)}), one, NULL) == NULL &&
          strstr(ct_last_error(), "ct_nn_linear") != NULL);
    ct_clear_error();
    ct_module *nul = ct_nn_module_value("Null", null_forward, NULL, NULL);
    CHECK(ct_nn_call(nul, one, NULL) == NULL && ct_last_code() == CT_ETRIAL &&
          strstr(ct_last_error(), "returned NULL without setting an error") != NULL);
    ct_clear_error();

    ct_value_free(yv);
    ct_value_free(r);
    ct_value_free(att_out);
    ct_value_free(one);
    ct_value_free(d);
    ct_value_free(d2);
    ct_value_free(kw);
    ct_value_free(args);
    ct_nn_free(nul);
    ct_nn_free(mixed);
    ct_nn_free(seq);
    ct_nn_free(losses);
    ct_scope_end(s);
}

/* Autocast reaches the layers a value forward calls: under bfloat16 on the
 * CPU the attention's Linear layers, and so its output, are bfloat16. */
static void test_autocast(void) {
    ct_scope *s = ct_scope_begin();
    ct_module *att = attention(4);
    ct_value *args = tuple1(ct_randn(CT_SHAPE(2, 3, 4), NULL));
    CHECK_OK(ct_autocast_enter(CT_CPU, CT_BF16));
    ct_value *y = ct_nn_call(att, args, NULL);
    CHECK_OK(ct_autocast_exit());
    CHECK(y && ct_dtype_of(ct_value_get_tensor(ct_value_list_get(y, 0))) == CT_BF16);
    ct_value *y32 = ct_nn_call(att, args, NULL);
    CHECK(y32 && ct_dtype_of(ct_value_get_tensor(ct_value_list_get(y32, 0))) == CT_F32);
    ct_value_free(y);
    ct_value_free(y32);
    ct_value_free(args);
    ct_nn_free(att);
    ct_scope_end(s);
}

/* ---- a trial whose model is a value module ------------------------------------------ */

typedef struct {
    ct_module *model;
    ct_optim *opt;
    ct_tensor *x, *y;
} Trial;

static ct_dtype g_seen = CT_F32; /* the dtype of the attention's output in train_batch */

static void trial_destroy(void *self) {
    Trial *t = self;
    ct_tensor_free(t->x);
    ct_tensor_free(t->y);
    free(t);
}

static void *trial_init(ct_context *ctx) {
    Trial *t = calloc(1, sizeof *t);
    t->x = ct_keep(ct_randn(CT_SHAPE(16, 3, 4), NULL));
    t->y = ct_keep(ct_randn(CT_SHAPE(16, 3, 4), NULL));
    ct_amp_opts amp = ct_amp_defaults();
    amp.dtype = CT_BF16;
    if (ct_ctx_use_amp(ctx, &amp) != 0) goto fail;
    t->model = ct_ctx_wrap_model(ctx, attention(4));
    ct_adam_opts o = ct_adam_defaults();
    t->opt = t->model ? ct_ctx_wrap_optimizer(ctx, ct_optim_adam(t->model, &o)) : NULL;
    if (!t->opt) goto fail;
    return t;
fail:
    trial_destroy(t);
    return NULL;
}

/* out, _ = model(x); loss = mse(out, y) */
static ct_value *step(Trial *t, const ct_value *batch, ct_dtype *seen) {
    ct_value *args = tuple1(ct_alias(ct_batch_at(batch, 0)));
    ct_value *y = ct_nn_call(t->model, args, NULL);
    ct_value_free(args);
    if (!y) return NULL;
    ct_tensor *out = ct_value_get_tensor(ct_value_list_get(y, 0));
    if (seen) *seen = ct_dtype_of(out);
    ct_tensor *loss = ct_mse_loss(ct_to_dtype(out, CT_F32), ct_batch_at(batch, 1), CT_REDUCE_MEAN);
    ct_value_free(y);
    if (!loss) return NULL;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "loss", ct_value_tensor(ct_alias(loss)));
    return m;
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    Trial *t = self;
    ct_value *m = step(t, batch, &g_seen);
    if (!m || ct_ctx_backward(ctx, ct_value_get_tensor(ct_value_dict_get(m, "loss"))) != 0 ||
        ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL) != 0) {
        ct_value_free(m);
        return NULL;
    }
    return m;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    ct_value *m = step(self, batch, NULL);
    if (!m) return NULL;
    ct_value *v = ct_value_dict();
    ct_value_dict_set(v, "validation_loss", ct_value_copy(ct_value_dict_get(m, "loss"), false));
    ct_value_free(m);
    return v;
}

static ct_loader *loader(void *self, ct_context *ctx) {
    Trial *t = self;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    return ct_loader_new(ct_dataset_tensors(2, (ct_tensor *[]){t->x, t->y}), &o);
}

static const ct_trial value_trial = {
    .name = "value_module_trial",
    .init = trial_init,
    .destroy = trial_destroy,
    .build_training_data_loader = loader,
    .build_validation_data_loader = loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
};

/* ct_fit trains it with bf16 autocast and checkpoints it; the checkpoint
 * loads back into the same trial with the trained weights, named as
 * Python names them. */
static void test_fit(void) {
    char out[64], ckpt[4200];
    snprintf(out, sizeof out, "/tmp/nn_module_value_%d", (int)getpid());
    ct_fit_opts o = ct_fit_defaults();
    o.max_length = ct_batches(3);
    o.global_batch_size = 4;
    o.num_threads = 1;
    o.quiet = true;
    o.tensorboard = false;
    o.output_dir = out;
    o.overwrite = true;
    CHECK_OK(ct_fit(&value_trial, &o));
    char dir[128];
    snprintf(dir, sizeof dir, "%s/checkpoints", out);
    CHECK_OK(ct_ckpt_latest(dir, ckpt, sizeof ckpt));
    ct_context *ctx = NULL;
    CHECK_OK(ct_load_trial_from_checkpoint(ckpt, &value_trial, NULL, NULL, &ctx));
    ct_module *m = ctx ? ct_ctx_model(ctx, 0) : NULL;
    CHECK(m && ct_nn_get(m, "q.weight") && ct_nn_get(m, "v.bias"));
    ct_value *state = NULL;
    char pth[4300];
    snprintf(pth, sizeof pth, "%s/state_dict.pth", ckpt);
    CHECK_OK(ct_pth_load(pth, &state));
    ct_value *now = m ? ct_nn_state_dict(m) : NULL;
    const ct_value *saved = state ? ct_value_list_get(ct_value_dict_get(state, "models_state_dict"), 0) : NULL;
    CHECK(saved && now && ct_value_equal(saved, now));
    CHECK(g_seen == CT_BF16); /* autocast reached the layers inside ct_nn_call */
    ct_value_free(now);
    ct_value_free(state);
    ct_ctx_free(ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", out);
    CHECK(system(cmd) == 0);
}

int main(void) {
    test_attention();
    test_shapes();
    test_autocast();
    test_fit();
    CHECK(ct_tensor_live_count() == 0);
    return ct_test_result("nn_module_value");
}
