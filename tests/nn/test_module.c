/* test_module — module behaviour that needs no reference numbers: names and
 * dotted lookup, errors, caches, ownership (user_free exactly once, nothing
 * leaks), train/eval switching, dtype moves keeping identity, state-dict
 * round trips and refusals, zero_grad. Values against torch are checked by
 * the *_parity scripts. */
#include <math.h>
#include <stdlib.h>

#include "ct_test.h"

/* ---- a user module with a counter of user_free calls ------------------- */

static int g_frees = 0;

typedef struct {
    ct_module *fc1, *bn, *sub;
} Net;

static void count_free(void *p) {
    g_frees++;
    free(p);
}

static ct_tensor *net_forward(ct_module *self, const ct_tensor *x) {
    Net *n = ct_nn_user(self);
    ct_tensor *h = ct_relu(ct_nn_forward(n->bn, ct_nn_forward(n->fc1, x)));
    return ct_mul(ct_nn_forward(n->sub, h), ct_nn_get(self, "scale"));
}

/* Net: fc1 = Linear(4, 8); bn = BatchNorm1d(8); sub = Sequential(Linear(8, 8),
 * ReLU, Linear(8, 3)); then its own parameter `scale` [1], persistent buffer
 * `steps` and non-persistent buffer `tmp`. */
static ct_module *build_net(void) {
    Net *n = calloc(1, sizeof *n);
    ct_module *net = ct_nn_module("Net", net_forward, n, count_free);
    n->fc1 = ct_nn_add_module(net, "fc1", ct_nn_linear(4, 8, true));
    n->bn = ct_nn_add_module(net, "bn", ct_nn_batchnorm1d(8, NULL));
    ct_module *a = ct_nn_linear(8, 8, true);
    ct_module *r = ct_nn_relu();
    ct_module *b = ct_nn_linear(8, 3, true);
    n->sub = ct_nn_add_module(net, "sub", ct_nn_sequential(3, (ct_module *[]){a, r, b}));
    ct_nn_add_parameter(net, "scale", ct_ones(CT_SHAPE(1), NULL));
    ct_nn_add_buffer(net, "steps", ct_zeros(CT_SHAPE(1), &(ct_topts){.dtype = CT_I64}), true);
    ct_nn_add_buffer(net, "tmp", ct_zeros(CT_SHAPE(2), NULL), false);
    return net;
}

static bool tensors_equal(const ct_tensor *a, const ct_tensor *b) {
    ct_scope *s = ct_scope_begin();
    bool eq = false;
    ct_tensor *ne = ct_ne(a, b);
    double n = -1;
    if (ne && ct_item(ct_sum(ct_to_dtype(ne, CT_F64)), &n) == 0) eq = n == 0 && ct_numel(a) == ct_numel(b);
    ct_scope_end(s);
    return eq;
}

static void test_names(void) {
    ct_module *net = build_net();
    CHECK(net != NULL);
    static const char *params[] = {"scale",     "fc1.weight",  "fc1.bias",    "bn.weight",  "bn.bias",
                                   "sub.0.weight", "sub.0.bias", "sub.2.weight", "sub.2.bias"};
    CHECK(ct_nn_num_params(net) == 9);
    for (size_t i = 0; i < 9; ++i) {
        const char *name = NULL;
        ct_tensor *p = ct_nn_param_at(net, i, &name);
        CHECK(p && name && strcmp(name, params[i]) == 0);
        CHECK(ct_nn_get(net, params[i]) == p);
        CHECK(ct_requires_grad(p) && ct_is_leaf(p));
    }
    static const char *state[] = {"scale", "steps", "fc1.weight", "fc1.bias", "bn.weight", "bn.bias",
                                  "bn.running_mean", "bn.running_var", "bn.num_batches_tracked",
                                  "sub.0.weight", "sub.0.bias", "sub.2.weight", "sub.2.bias"};
    CHECK(ct_nn_state_size(net) == 13);
    for (size_t i = 0; i < 13; ++i) {
        const char *name = NULL;
        CHECK(ct_nn_state_at(net, i, &name) != NULL && name && strcmp(name, state[i]) == 0);
    }
    CHECK(ct_nn_get(net, "tmp") != NULL); /* non-persistent: reachable, not in the state */
    CHECK(ct_nn_num_param_elements(net) == 1 + 4 * 8 + 8 + 8 + 8 + 8 * 8 + 8 + 8 * 3 + 3);
    CHECK(strcmp(ct_nn_type(net), "Net") == 0);
    CHECK(strcmp(ct_nn_type(ct_nn_child(net, "sub")), "Sequential") == 0);
    CHECK(strcmp(ct_nn_type(ct_nn_child(net, "sub.1")), "ReLU") == 0);
    CHECK(ct_nn_child(net, "") == net);
    CHECK(ct_nn_get(ct_nn_child(net, "sub"), "2.bias") == ct_nn_get(net, "sub.2.bias"));
    CHECK(ct_dtype_of(ct_nn_get(net, "bn.num_batches_tracked")) == CT_I64);

    /* lookups that fail name what is missing */
    CHECK(ct_nn_get(net, "fc3.weight") == NULL);
    CHECK_ERR(CT_EINVAL, "'fc3'");
    CHECK(ct_nn_get(net, "fc1.weigth") == NULL);
    CHECK_ERR(CT_EINVAL, "'weigth'");
    CHECK(ct_nn_child(net, "sub.5") == NULL);
    CHECK_ERR(CT_EINVAL, "'5'");
    CHECK(ct_nn_param_at(net, 9, NULL) == NULL);
    CHECK_ERR(CT_EINDEX, "out of range");
    CHECK(ct_nn_state_at(net, 13, NULL) == NULL);
    CHECK_ERR(CT_EINDEX, "out of range");

    /* registration rules (each failing call frees the tensor it was given) */
    size_t live = ct_tensor_live_count();
    CHECK(ct_nn_add_parameter(net, "a.b", ct_ones(CT_SHAPE(1), NULL)) == NULL);
    CHECK_ERR(CT_EINVAL, "\".\"");
    CHECK(ct_nn_add_parameter(net, "fc1", ct_ones(CT_SHAPE(1), NULL)) == NULL);
    CHECK_ERR(CT_EINVAL, "'fc1' already exists");
    CHECK(ct_nn_add_buffer(net, "scale", ct_ones(CT_SHAPE(1), NULL), true) == NULL);
    CHECK_ERR(CT_EINVAL, "'scale' already exists");
    CHECK(ct_nn_add_parameter(net, "", ct_ones(CT_SHAPE(1), NULL)) == NULL);
    CHECK_ERR(CT_EINVAL, "empty");
    CHECK(ct_nn_add_parameter(net, "idx", ct_ones(CT_SHAPE(1), &(ct_topts){.dtype = CT_I64})) == NULL);
    CHECK_ERR(CT_EDTYPE, "idx");
    CHECK(ct_tensor_live_count() == live);
    /* a handle the tree already owns is refused and stays alive */
    ct_tensor *scale = ct_nn_get(net, "scale");
    CHECK(ct_nn_add_buffer(net, "again", scale, true) == NULL);
    CHECK_ERR(CT_EINVAL, "already registered");
    CHECK(ct_is_defined(scale) && ct_nn_get(net, "scale") == scale);
    /* NULL from a failed op propagates and keeps the first error */
    CHECK(ct_nn_add_parameter(net, "w", ct_relu(NULL)) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_relu");

    g_frees = 0;
    ct_nn_free(net);
    CHECK(g_frees == 1);
}

/* Tied weights: one tensor under two names is one parameter, two state entries. */
static void test_tied(void) {
    ct_module *m = ct_nn_module("Tied", NULL, NULL, NULL);
    ct_tensor *w = ct_nn_add_parameter(m, "w", ct_randn(CT_SHAPE(3, 2), NULL));
    CHECK(ct_nn_add_parameter(m, "w_tied", ct_alias(w)) != NULL);
    CHECK(ct_nn_num_params(m) == 1);
    CHECK(ct_nn_state_size(m) == 2);
    ct_nn_free(m);
}

/* The parameter cache follows changes below the queried module, and a
 * child's cache survives changes of its parent. */
static void test_cache(void) {
    ct_module *net = build_net();
    ct_module *sub = ct_nn_child(net, "sub");
    ct_module *first = ct_nn_child(net, "sub.0");
    size_t n_net = 0, n_sub = 0, n_first = 0;
    ct_tensor *const *ps = ct_nn_parameters(net, &n_net);
    CHECK(ps != NULL && n_net == 9);
    CHECK(ct_nn_parameters(sub, &n_sub) != NULL && n_sub == 4);
    ct_tensor *const *pf = ct_nn_parameters(first, &n_first);
    CHECK(n_first == 2);

    CHECK(ct_nn_sequential_append(sub, ct_nn_linear(3, 2, true)) != NULL);
    ps = ct_nn_parameters(net, &n_net);
    CHECK(n_net == 11);
    const char *name = NULL;
    CHECK(ps[10] == ct_nn_param_at(net, 10, &name) && strcmp(name, "sub.3.bias") == 0);
    CHECK(ct_nn_parameters(sub, &n_sub) != NULL && n_sub == 6);
    CHECK(ct_nn_parameters(first, &n_first) == pf && n_first == 2);

    /* a change in the parent: the child's listing and names are unchanged */
    CHECK(ct_nn_add_parameter(net, "late", ct_zeros(CT_SHAPE(2), NULL)) != NULL);
    CHECK(ct_nn_num_params(net) == 12);
    CHECK(ct_nn_param_at(sub, 0, &name) != NULL && strcmp(name, "0.weight") == 0);
    CHECK(ct_nn_num_params(sub) == 6);

    size_t n_empty = 99;
    ct_module *relu = ct_nn_relu();
    CHECK(ct_nn_parameters(relu, &n_empty) != NULL && n_empty == 0);
    ct_nn_free(relu);
    ct_nn_free(net);
}

/* ---- ownership --------------------------------------------------------- */

static ct_tensor *null_forward(ct_module *self, const ct_tensor *x) { return NULL; }
static ct_tensor *identity_forward(ct_module *self, const ct_tensor *x) { return (ct_tensor *)x; }

static ct_module *counted(const char *type, ct_forward_fn f) {
    return ct_nn_module(type, f, malloc(16), count_free);
}

static void test_ownership(void) {
    size_t live = ct_tensor_live_count();
    g_frees = 0;

    /* a whole tree of user modules: each user_free once */
    ct_module *root = counted("Root", NULL);
    ct_module *mid = ct_nn_add_module(root, "mid", counted("Mid", NULL));
    ct_nn_add_module(mid, "leaf", counted("Leaf", identity_forward));
    ct_nn_add_parameter(mid, "w", ct_randn(CT_SHAPE(4), NULL));
    ct_nn_add_module(root, "fc", ct_nn_linear(3, 3, true));
    CHECK(ct_tensor_live_count() == live + 3);

    /* a child cannot be freed on its own, nor given to a second parent */
    ct_nn_free(mid);
    CHECK_ERR(CT_ESTATE, "mid");
    ct_module *other = counted("Other", NULL);
    CHECK(ct_nn_add_module(other, "stolen", mid) == NULL);
    CHECK_ERR(CT_EINVAL, "already has a parent");
    CHECK(ct_nn_add_module(mid, "cycle", root) == NULL);
    CHECK_ERR(CT_EINVAL, "cycle");
    CHECK(g_frees == 0);

    /* a failed add frees the child it was given (exactly once) */
    CHECK(ct_nn_add_module(other, "bad.name", counted("Lost", NULL)) == NULL);
    CHECK_ERR(CT_EINVAL, "\".\"");
    CHECK(g_frees == 1);
    CHECK(ct_nn_add_module(NULL, "x", counted("Orphan", NULL)) == NULL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(g_frees == 2);

    /* Sequential with a failed constructor: NULL, that error, the rest freed */
    ct_module *ok1 = counted("A", NULL);
    ct_module *bad = ct_nn_linear(-1, 3, true);
    ct_module *ok2 = counted("B", NULL);
    CHECK(ct_nn_sequential(3, (ct_module *[]){ok1, bad, ok2}) == NULL);
    CHECK_ERR(CT_EINVAL, "in_features");
    CHECK(g_frees == 4);

    /* forward contracts */
    ct_tensor *x = ct_randn(CT_SHAPE(2, 3), NULL);
    ct_module *nul = counted("Nul", null_forward);
    CHECK(ct_nn_forward(nul, x) == NULL);
    CHECK_ERR(CT_ETRIAL, "Nul");
    CHECK(ct_nn_forward(other, x) == NULL);
    CHECK_ERR(CT_ENOTSUP, "Other");
    ct_tensor *y = ct_nn_forward(ct_nn_child(root, "mid.leaf"), x);
    CHECK(y != NULL && y != x && tensors_equal(x, y)); /* identity gets a new handle */
    ct_tensor_free(y);
    CHECK(ct_nn_forward(ct_nn_child(root, "fc"), ct_relu(NULL)) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_relu"); /* the first error is kept */
    ct_tensor *wrong = ct_randn(CT_SHAPE(2, 5), NULL);
    CHECK(ct_nn_forward(ct_nn_child(root, "fc"), wrong) == NULL);
    CHECK_ERR(CT_ESHAPE, "'fc' Linear(in_features=3"); /* names the module */
    ct_tensor_free(wrong);
    ct_tensor_free(x);

    ct_nn_free(nul);
    ct_nn_free(other);
    ct_nn_free(root);
    CHECK(g_frees == 4 + 1 + 1 + 3);
    CHECK(ct_tensor_live_count() == live);
}

/* ---- train / eval --------------------------------------------------------- */

static void test_train_eval(void) {
    ct_module *net = build_net();
    CHECK(ct_nn_is_training(net) && ct_nn_is_training(ct_nn_child(net, "sub.1")));
    ct_tensor *x = ct_randn(CT_SHAPE(5, 4), NULL);
    ct_tensor *nbt = ct_nn_get(net, "bn.num_batches_tracked");
    ct_tensor *rm = ct_nn_get(net, "bn.running_mean");
    int64_t count = -1;

    ct_scope *s = ct_scope_begin();
    CHECK(ct_nn_forward(net, x) != NULL);
    CHECK(ct_item_int(nbt, &count) == 0 && count == 1);
    ct_tensor *rm_before = ct_clone(rm);

    ct_nn_train(net, false);
    CHECK(!ct_nn_is_training(net) && !ct_nn_is_training(ct_nn_child(net, "bn")));
    CHECK(ct_nn_forward(net, x) != NULL);
    CHECK(ct_item_int(nbt, &count) == 0 && count == 1); /* eval: statistics untouched */
    CHECK(tensors_equal(rm, rm_before));

    /* one sample per channel: fine in eval (running stats), an error in training */
    ct_tensor *one = ct_randn(CT_SHAPE(1, 4), NULL);
    CHECK(ct_nn_forward(net, one) != NULL);
    ct_nn_train(net, true);
    CHECK(ct_nn_forward(net, one) == NULL);
    CHECK_ERR(CT_ESHAPE, "more than 1 value per channel");
    ct_tensor *img = ct_randn(CT_SHAPE(2, 8, 3, 3), NULL);
    CHECK(ct_nn_forward(ct_nn_child(net, "bn"), img) == NULL);
    CHECK_ERR(CT_ESHAPE, "expected 2D or 3D input (got 4D input)");

    /* Dropout: identity in eval, all zeros with p = 1 in training */
    ct_module *drop = ct_nn_dropout(1.0);
    ct_tensor *dy = ct_nn_forward(drop, x);
    CHECK(dy && tensors_equal(dy, ct_zeros_like(x)));
    ct_nn_train(drop, false);
    dy = ct_nn_forward(drop, x);
    CHECK(dy && tensors_equal(dy, x));
    ct_nn_free(drop);
    CHECK(ct_nn_dropout(1.5) == NULL);
    CHECK_ERR(CT_EINVAL, "between 0 and 1");
    ct_scope_end(s);

    ct_tensor_free(x);
    ct_nn_free(net);
}

/* ---- dtype / device moves ---------------------------------------------- */

static void test_to(void) {
    ct_module *net = build_net();
    ct_scope *s = ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(5, 4), NULL);
    CHECK(ct_backward(ct_sum(ct_nn_forward(net, x))) == 0);
    size_t n = 0;
    ct_tensor *const *ps = ct_nn_parameters(net, &n);
    ct_tensor *saved[9];
    for (size_t i = 0; i < n && i < 9; ++i) saved[i] = ps[i];
    ct_tensor *w32 = ct_clone(ct_nn_get(net, "fc1.weight"));

    CHECK_OK(ct_nn_to_dtype(net, CT_F64));
    ps = ct_nn_parameters(net, &n);
    for (size_t i = 0; i < n && i < 9; ++i) {
        CHECK(ps[i] == saved[i]); /* identity kept: optimizers still hold them */
        CHECK(ct_dtype_of(ps[i]) == CT_F64);
        CHECK(ct_requires_grad(ps[i]) && ct_is_leaf(ps[i]));
        ct_tensor *g = ct_grad(ps[i]);
        CHECK(g && ct_dtype_of(g) == CT_F64);
    }
    CHECK(ct_dtype_of(ct_nn_get(net, "bn.running_var")) == CT_F64);
    CHECK(ct_dtype_of(ct_nn_get(net, "bn.num_batches_tracked")) == CT_I64);
    CHECK(ct_dtype_of(ct_nn_get(net, "steps")) == CT_I64);
    CHECK(tensors_equal(ct_to_dtype(w32, CT_F64), ct_nn_get(net, "fc1.weight")));
    /* float64 forward and backward work after the move */
    CHECK(ct_backward(ct_sum(ct_nn_forward(net, ct_to_dtype(x, CT_F64)))) == 0);

    CHECK(ct_nn_to_dtype(net, CT_I64) == CT_EDTYPE);
    CHECK_ERR(CT_EDTYPE, "floating point");
    CHECK_OK(ct_nn_to_device(net, ct_cpu()));
    if (!ct_cuda_is_available()) {
        CHECK(ct_nn_to_device(net, ct_cuda(0)) == CT_EDEVICE);
        ct_clear_error();
    } else {
        CHECK_OK(ct_nn_to_device(net, ct_cuda(0)));
        CHECK(ct_device_of(ct_nn_get(net, "fc1.weight")).type == CT_CUDA);
        CHECK(ct_nn_parameters(net, &n)[0] == saved[0]);
        CHECK_OK(ct_nn_to_device(net, ct_cpu()));
    }
    CHECK(ct_dtype_of(ct_nn_get(net, "fc1.weight")) == CT_F64);
    ct_scope_end(s);
    ct_nn_free(net);
}

/* ---- state dicts ------------------------------------------------------------ */

/* A copy of sd with `drop` left out, `replace` given `with` (stolen), and an
 * extra key `add` (may be NULL). */
static ct_value *edited(const ct_value *sd, const char *drop, const char *replace, ct_value *with,
                        const char *add) {
    ct_value *out = ct_value_dict();
    for (size_t i = 0; i < ct_value_len(sd); ++i) {
        const char *key = NULL;
        int64_t ik = 0;
        ct_value *v = ct_value_dict_at(sd, i, &key, &ik);
        if (drop && strcmp(key, drop) == 0) continue;
        if (replace && strcmp(key, replace) == 0) {
            ct_value_dict_set(out, key, with);
            continue;
        }
        /* different values, same shapes: a partial load would show */
        ct_tensor *t = ct_value_get_tensor(v);
        ct_value_dict_set(out, key, ct_value_tensor(ct_keep(ct_add_scalar(t, 1.0))));
    }
    if (add) ct_value_dict_set(out, add, ct_value_tensor(ct_keep(ct_zeros(CT_SHAPE(2), NULL))));
    return out;
}

static void test_state_dict(void) {
    ct_manual_seed(1);
    ct_module *net = build_net();
    ct_value *sd = ct_nn_state_dict(net);
    CHECK(sd && ct_value_kind_of(sd) == CT_VALUE_DICT && ct_value_len(sd) == 13);
    for (size_t i = 0; i < ct_value_len(sd); ++i) {
        const char *key = NULL, *name = NULL;
        int64_t ik;
        ct_value *v = ct_value_dict_at(sd, i, &key, &ik);
        ct_tensor *t = ct_nn_state_at(net, i, &name);
        CHECK(key && name && strcmp(key, name) == 0);
        CHECK(!ct_requires_grad(ct_value_get_tensor(v)));
        CHECK(tensors_equal(ct_value_get_tensor(v), t));
    }
    ct_value *snapshot = ct_value_copy(sd, true);

    /* shares storage: a change in the module shows in the dict */
    ct_guard *g = ct_no_grad();
    CHECK_OK(ct_fill_(ct_nn_get(net, "fc1.bias"), 7.0));
    ct_guard_end(g);
    CHECK(tensors_equal(ct_value_get_tensor(ct_value_dict_get(sd, "fc1.bias")), ct_nn_get(net, "fc1.bias")));
    CHECK(!ct_value_equal(sd, snapshot));

    /* round trip into another instance */
    ct_manual_seed(2);
    ct_module *other = build_net();
    CHECK_OK(ct_nn_load_state_dict(other, snapshot, true));
    ct_value *back = ct_nn_state_dict(other);
    CHECK(ct_value_equal(back, snapshot));
    ct_value_free(back);
    CHECK(ct_requires_grad(ct_nn_get(other, "fc1.weight")) && ct_is_leaf(ct_nn_get(other, "fc1.weight")));

    /* refusals name the keys and change nothing */
    ct_value *wrong = edited(snapshot, NULL, "fc1.weight", ct_value_tensor(ct_zeros(CT_SHAPE(3, 3), NULL)), NULL);
    CHECK(ct_nn_load_state_dict(other, wrong, true) == CT_ESHAPE);
    CHECK_ERR(CT_ESHAPE, "size mismatch for fc1.weight: copying a param with shape torch.Size([3, 3]) "
                         "from checkpoint, the shape in current model is torch.Size([8, 4])");
    CHECK(ct_nn_load_state_dict(other, wrong, false) == CT_ESHAPE); /* shapes matter without strict too */
    ct_clear_error();
    ct_value_free(wrong);

    ct_value *missing = edited(snapshot, "bn.running_var", NULL, NULL, NULL);
    CHECK(ct_nn_load_state_dict(other, missing, true) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "Missing key(s) in state_dict: \"bn.running_var\"");
    ct_value *unexpected = edited(snapshot, NULL, NULL, NULL, "extra.weight");
    CHECK(ct_nn_load_state_dict(other, unexpected, true) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "Unexpected key(s) in state_dict: \"extra.weight\"");
    ct_value *both = edited(snapshot, "sub.2.bias", NULL, NULL, "tmp");
    CHECK(ct_nn_load_state_dict(other, both, true) == CT_EFORMAT);
    const char *msg = ct_last_error();
    CHECK(strstr(msg, "Error(s) in loading state_dict for Net") && strstr(msg, "\"sub.2.bias\"") &&
          strstr(msg, "Unexpected key(s) in state_dict: \"tmp\""));
    ct_clear_error();
    ct_value *notensor = edited(snapshot, NULL, "scale", ct_value_float(1.0), NULL);
    CHECK(ct_nn_load_state_dict(other, notensor, true) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "\"scale\"");
    ct_value *list = ct_value_list();
    CHECK(ct_nn_load_state_dict(other, list, true) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "dict");

    back = ct_nn_state_dict(other);
    CHECK(ct_value_equal(back, snapshot)); /* nothing was changed by the refusals */
    ct_value_free(back);

    /* without strict, missing and unexpected keys are fine */
    CHECK_OK(ct_nn_load_state_dict(other, missing, false));
    CHECK_OK(ct_nn_load_state_dict(other, unexpected, false));
    CHECK(tensors_equal(ct_nn_get(other, "bn.running_var"),
                        ct_value_get_tensor(ct_value_dict_get(unexpected, "bn.running_var"))));

    ct_value_free(list);
    ct_value_free(notensor);
    ct_value_free(both);
    ct_value_free(unexpected);
    ct_value_free(missing);
    ct_value_free(snapshot);
    ct_value_free(sd);
    ct_nn_free(other);
    ct_nn_free(net);
}

static void test_zero_grad_and_clip(void) {
    ct_module *lin = ct_nn_linear(3, 2, true);
    ct_scope *s = ct_scope_begin();
    CHECK(ct_backward(ct_sum(ct_nn_forward(lin, ct_randn(CT_SHAPE(4, 3), NULL)))) == 0);
    ct_tensor *w = ct_nn_get(lin, "weight");
    CHECK(ct_has_grad(w));
    CHECK_OK(ct_nn_zero_grad(lin, false));
    CHECK(ct_has_grad(w) && tensors_equal(ct_grad(w), ct_zeros_like(w)));
    CHECK_OK(ct_nn_zero_grad(lin, true));
    CHECK(!ct_has_grad(w));

    /* no gradients at all: total norm 0, nothing to do */
    size_t n = 0;
    ct_tensor *const *ps = ct_nn_parameters(lin, &n);
    double total = -1;
    CHECK_OK(ct_clip_grad_norm(n, ps, 1.0, 2.0, &total));
    CHECK(total == 0);
    CHECK(ct_clip_grad_norm(2, (ct_tensor *[]){w, NULL}, 1.0, 2.0, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "params[1] is NULL");
    CHECK(ct_clip_grad_value(1, NULL, 1.0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    ct_scope_end(s);
    ct_nn_free(lin);
}

/* Gradients split across processes (ct_set_grad_reduce): the part of the
 * norm goes through the reduce function. Here a second "process" holds the
 * same part: the 2-norm grows by sqrt(2), the inf-norm not, and a process
 * without gradients still calls it once. */
static int reduce_calls;
static int twice(ct_tensor *t, bool max, void *ctx) {
    reduce_calls++;
    CHECK(ct_device_of(t).type == CT_CPU && ct_dtype_of(t) == CT_F32 && ct_numel(t) == 1);
    return max ? CT_OK : ct_mul_scalar_(t, 2.0);
}

static void test_clip_split(void) {
    ct_scope *s = ct_scope_begin();
    ct_tensor *w = ct_zeros(CT_SHAPE(2), &(ct_topts){.requires_grad = true});
    CHECK_OK(ct_set_grad(w, ct_from_data((const float[]){3, 4}, 1, (const int64_t[]){2}, CT_F32)));
    double total = 0, v = 0;
    ct_set_grad_reduce(twice, NULL);
    CHECK_OK(ct_clip_grad_norm(1, &w, 1e9, 2.0, &total));
    CHECK(fabs(total - 5.0 * sqrt(2.0)) < 1e-5 && reduce_calls == 1);
    CHECK_OK(ct_clip_grad_norm(1, &w, 1e9, INFINITY, &total));
    CHECK(fabs(total - 4.0) < 1e-6 && reduce_calls == 2);
    /* clipped by the whole norm: max_norm / (5 sqrt 2) */
    CHECK_OK(ct_clip_grad_norm(1, &w, 1.0, 2.0, NULL));
    CHECK_OK(ct_item(ct_sum(ct_grad(w)), &v));
    CHECK(fabs(v - 7.0 / (5.0 * sqrt(2.0))) < 1e-5);
    ct_zero_grad(w, true);
    CHECK_OK(ct_clip_grad_norm(1, &w, 1.0, 2.0, &total));
    CHECK(total == 0 && reduce_calls == 4);
    ct_set_grad_reduce(NULL, NULL);
    CHECK_OK(ct_clip_grad_norm(1, &w, 1.0, 2.0, &total));
    CHECK(reduce_calls == 4);
    ct_scope_end(s);
}

int main(void) {
    size_t live = ct_tensor_live_count();
    test_names();
    test_tied();
    test_cache();
    test_ownership();
    test_train_eval();
    test_to();
    test_state_dict();
    test_zero_grad_and_clip();
    test_clip_split();
    CHECK(ct_tensor_live_count() == live); /* every handle came back */
    return ct_test_result("test_module");
}
