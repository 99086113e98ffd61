/* tests/optim/test_optim_api.c — the optimizer C API beyond the numbers
 * (those are test_optim_parity.py's): hyperparameter validation with
 * Python's messages, NULL arguments, unknown option keys, parameter groups,
 * modules, zero_grad, closures (ct_optim_step_closure, LBFGS), state_dict
 * round trips C -> C, and load_state_dict refusing mismatches (a missing
 * state key among them) without changing anything. */
#include <stdlib.h>

#include "ct_test.h"

#define NP 3
static const int64_t kShapes[NP][2] = {{4, 3}, {5, 1}, {2, 3}};

static void make_params(ct_tensor **p, uint64_t seed) {
    ct_manual_seed(seed);
    for (int k = 0; k < NP; k++) {
        p[k] = ct_keep(ct_randn(2, kShapes[k], NULL));
        ct_set_requires_grad(p[k], true);
    }
}

/* Independent leaf copies (a plain clone would be a non-leaf in the graph). */
static void clone_params(ct_tensor **dst, ct_tensor *const *src) {
    ct_scope *s = ct_scope_begin();
    for (int k = 0; k < NP; k++) {
        dst[k] = ct_keep(ct_clone(ct_detach(src[k])));
        ct_set_requires_grad(dst[k], true);
    }
    ct_scope_end(s);
}

static void free_params(ct_tensor **p) {
    for (int k = 0; k < NP; k++) ct_tensor_free(p[k]);
}

/* Same gradients for the same (seed, step) on every call. */
static void set_grads(ct_tensor **p, int n, uint64_t seed) {
    ct_manual_seed(seed);
    ct_scope *s = ct_scope_begin();
    for (int k = 0; k < n; k++) CHECK_OK(ct_set_grad(p[k], ct_randn(2, kShapes[k], NULL)));
    ct_scope_end(s);
}

/* max |a - b|, for results computed by another route (no bitwise promise). */
static double max_diff(const ct_tensor *a, const ct_tensor *b) {
    double d = INFINITY;
    ct_scope *s = ct_scope_begin();
    if (ct_item(ct_max(ct_abs(ct_sub(a, b))), &d) != 0) d = INFINITY;
    ct_scope_end(s);
    return d;
}

static bool same_values(const ct_tensor *a, const ct_tensor *b) {
    ct_value *va = ct_value_tensor(ct_alias(a)), *vb = ct_value_tensor(ct_alias(b));
    bool eq = ct_value_equal(va, vb);
    ct_value_free(va);
    ct_value_free(vb);
    return eq;
}

/* ---- construction and validation ---------------------------------------- */

static void expect_refused(ct_optim *o, const char *msg) {
    CHECK(o == NULL);
    CHECK_ERR(CT_EINVAL, msg);
    ct_optim_free(o);
}

static void test_validation(void) {
    ct_sgd_opts s = ct_sgd_defaults();
    s.lr = -1;
    expect_refused(ct_optim_sgd(NULL, &s), "Invalid learning rate: -1.0");
    s.lr = -1e-5;
    expect_refused(ct_optim_sgd(NULL, &s), "Invalid learning rate: -1e-05");
    s.lr = -123.456;
    expect_refused(ct_optim_sgd(NULL, &s), "Invalid learning rate: -123.456");
    s.lr = -1e16;
    expect_refused(ct_optim_sgd(NULL, &s), "Invalid learning rate: -1e+16");
    s.lr = NAN;
    expect_refused(ct_optim_sgd(NULL, &s), "Invalid learning rate: nan");
    s = ct_sgd_defaults();
    s.momentum = -0.5;
    expect_refused(ct_optim_sgd(NULL, &s), "Invalid momentum value: -0.5");
    s = ct_sgd_defaults();
    s.weight_decay = -0.01;
    expect_refused(ct_optim_sgd(NULL, &s), "Invalid weight_decay value: -0.01");
    s = ct_sgd_defaults();
    s.nesterov = true;
    expect_refused(ct_optim_sgd(NULL, &s), "Nesterov momentum requires a momentum and zero dampening");
    s.momentum = 0.9;
    s.dampening = 0.1;
    expect_refused(ct_optim_sgd(NULL, &s), "Nesterov momentum requires");
    s.lr = -2; /* the value checks come first, as in Python */
    expect_refused(ct_optim_sgd(NULL, &s), "Invalid learning rate: -2.0");

    ct_adam_opts a = ct_adam_defaults();
    a.beta1 = 1.0;
    expect_refused(ct_optim_adam(NULL, &a), "Invalid beta parameter at index 0: 1.0");
    a = ct_adam_defaults();
    a.beta2 = -0.1;
    expect_refused(ct_optim_adam(NULL, &a), "Invalid beta parameter at index 1: -0.1");
    a = ct_adamw_defaults();
    a.eps = -1e-8;
    expect_refused(ct_optim_adamw(NULL, &a), "Invalid epsilon value: -1e-08");
    a = ct_adamw_defaults();
    a.weight_decay = -0.01;
    expect_refused(ct_optim_adamw(NULL, &a), "Invalid weight_decay value: -0.01");

    ct_rmsprop_opts r = ct_rmsprop_defaults();
    r.alpha = -1;
    expect_refused(ct_optim_rmsprop(NULL, &r), "Invalid alpha value: -1.0");
    r = ct_rmsprop_defaults();
    r.momentum = -1;
    expect_refused(ct_optim_rmsprop(NULL, &r), "Invalid momentum value: -1.0");

    ct_adagrad_opts g = ct_adagrad_defaults();
    g.lr_decay = -1;
    expect_refused(ct_optim_adagrad(NULL, &g), "Invalid lr_decay value: -1.0");
    g = ct_adagrad_defaults();
    g.initial_accumulator_value = -0.1;
    expect_refused(ct_optim_adagrad(NULL, &g), "Invalid initial_accumulator_value value: -0.1");

    ct_adadelta_opts dd = ct_adadelta_defaults();
    dd.lr = -1;
    expect_refused(ct_optim_adadelta(NULL, &dd), "Invalid learning rate: -1.0");
    dd = ct_adadelta_defaults();
    dd.rho = 1.5;
    expect_refused(ct_optim_adadelta(NULL, &dd), "Invalid rho value: 1.5");
    dd.rho = -0.1;
    expect_refused(ct_optim_adadelta(NULL, &dd), "Invalid rho value: -0.1");
    dd = ct_adadelta_defaults();
    dd.eps = -1e-6;
    expect_refused(ct_optim_adadelta(NULL, &dd), "Invalid epsilon value: -1e-06");
    dd = ct_adadelta_defaults();
    dd.rho = 1.0; /* rho may be 0 or 1 (Python: 0.0 <= rho <= 1.0) */
    ct_optim *ok = ct_optim_adadelta(NULL, &dd);
    CHECK(ok != NULL);
    ct_optim_free(ok);

    ct_adamax_opts mx = ct_adamax_defaults();
    mx.lr = -0.5;
    expect_refused(ct_optim_adamax(NULL, &mx), "Invalid learning rate: -0.5");
    mx = ct_adamax_defaults();
    mx.beta1 = 1.0; /* betas in [0, 1) */
    expect_refused(ct_optim_adamax(NULL, &mx), "Invalid beta parameter at index 0: 1.0");
    mx = ct_adamax_defaults();
    mx.beta2 = -0.5;
    expect_refused(ct_optim_adamax(NULL, &mx), "Invalid beta parameter at index 1: -0.5");

    ct_nadam_opts na = ct_nadam_defaults();
    na.beta2 = 1.0;
    expect_refused(ct_optim_nadam(NULL, &na), "Invalid beta parameter at index 1: 1.0");
    na = ct_nadam_defaults();
    na.momentum_decay = -0.004;
    expect_refused(ct_optim_nadam(NULL, &na), "Invalid momentum_decay value: -0.004");
    na.lr = -1; /* lr is checked first, as in Python */
    expect_refused(ct_optim_nadam(NULL, &na), "Invalid learning rate: -1.0");

    ct_radam_opts ra = ct_radam_defaults();
    ra.weight_decay = -1;
    expect_refused(ct_optim_radam(NULL, &ra), "Invalid weight_decay value: -1.0");
    ra = ct_radam_defaults();
    ra.beta1 = 1.5;
    expect_refused(ct_optim_radam(NULL, &ra), "Invalid beta parameter at index 0: 1.5");
    ra = ct_radam_defaults();
    ra.eps = -1;
    expect_refused(ct_optim_radam(NULL, &ra), "Invalid epsilon value: -1.0");

    ct_lbfgs_opts lb = ct_lbfgs_defaults();
    lb.lr = -1;
    expect_refused(ct_optim_lbfgs(NULL, &lb), "Invalid learning rate: -1.0");
    lb = ct_lbfgs_defaults();
    lb.max_iter = 0;
    expect_refused(ct_optim_lbfgs(NULL, &lb), "Invalid max_iter value: 0 (a whole number >= 1)");
    lb = ct_lbfgs_defaults();
    lb.history_size = -3;
    expect_refused(ct_optim_lbfgs(NULL, &lb), "Invalid history_size value: -3");
    lb = ct_lbfgs_defaults();
    lb.max_eval = -1;
    expect_refused(ct_optim_lbfgs(NULL, &lb), "Invalid max_eval value: -1");
    lb = ct_lbfgs_defaults();
    lb.line_search_fn = "backtracking";
    expect_refused(ct_optim_lbfgs(NULL, &lb), "only 'strong_wolfe' is supported");

    /* NULL opts mean the defaults. */
    ct_optim *o = ct_optim_adamw(NULL, NULL);
    CHECK(o && strcmp(ct_optim_type(o), "AdamW") == 0);
    CHECK(ct_optim_num_groups(o) == 0 && ct_optim_num_params(o) == 0);
    ct_optim_free(o);
    o = ct_optim_rmsprop(NULL, NULL);
    CHECK(o && strcmp(ct_optim_type(o), "RMSprop") == 0);
    ct_optim_free(o);
    o = ct_optim_adadelta(NULL, NULL);
    CHECK(o && strcmp(ct_optim_type(o), "Adadelta") == 0);
    ct_optim_free(o);
    o = ct_optim_adamax(NULL, NULL);
    CHECK(o && strcmp(ct_optim_type(o), "Adamax") == 0);
    ct_optim_free(o);
    o = ct_optim_nadam(NULL, NULL);
    CHECK(o && strcmp(ct_optim_type(o), "NAdam") == 0);
    ct_optim_free(o);
    o = ct_optim_radam(NULL, NULL);
    CHECK(o && strcmp(ct_optim_type(o), "RAdam") == 0);
    ct_optim_free(o);
    o = ct_optim_lbfgs(NULL, NULL);
    CHECK(o && strcmp(ct_optim_type(o), "LBFGS") == 0);
    ct_optim_free(o);
}

static void test_null_args(void) {
    double x = 0;
    CHECK(ct_optim_step(NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(ct_optim_zero_grad(NULL, true) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(ct_optim_add_param_group(NULL, 0, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(ct_optim_state_dict(NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(ct_optim_load_state_dict(NULL, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(ct_optim_param(NULL, 0) == NULL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(ct_optim_get_option(NULL, 0, "lr", &x) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(isnan(ct_optim_get_lr(NULL, 0)));
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(ct_optim_num_groups(NULL) == 0);
    CHECK(ct_optim_num_params(NULL) == 0);
    ct_optim_free(NULL);

    ct_tensor *p[NP];
    make_params(p, 1);
    ct_optim *o = ct_optim_sgd(NULL, NULL);
    CHECK(ct_optim_add_param_group(o, 2, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "params is NULL");
    ct_clear_error();
    CHECK(ct_optim_add_param_group(o, 2, (ct_tensor *[]){p[0], NULL}) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "params[1]");
    CHECK(ct_optim_num_groups(o) == 0 && ct_optim_num_params(o) == 0);
    CHECK_OK(ct_optim_add_param_group(o, 1, p));
    CHECK(ct_optim_load_state_dict(o, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(ct_optim_get_option(o, 0, NULL, &x) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(ct_optim_get_option(o, 0, "lr", NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(ct_optim_set_option(o, 0, NULL, 1) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    ct_optim_free(o);
    free_params(p);
}

/* ---- options ----------------------------------------------------------- */

static void test_options(void) {
    ct_tensor *p[NP];
    make_params(p, 2);
    ct_optim *o = ct_optim_adam(NULL, NULL);
    CHECK(ct_optim_add_param_group(o, NP, p) == 0);
    double x = 0;

    CHECK_OK(ct_optim_get_option(o, 0, "beta1", &x));
    CHECK(x == 0.9);
    CHECK_OK(ct_optim_get_option(o, 0, "beta2", &x));
    CHECK(x == 0.999);
    CHECK_OK(ct_optim_get_option(o, 0, "amsgrad", &x));
    CHECK(x == 0);
    CHECK_OK(ct_optim_get_option(o, 0, "foreach", &x));
    CHECK(x == -1); /* None */
    CHECK_OK(ct_optim_set_option(o, 0, "fused", 1));
    CHECK_OK(ct_optim_get_option(o, 0, "fused", &x));
    CHECK(x == 1);
    CHECK_OK(ct_optim_set_lr(o, 0, 0.25));
    CHECK(ct_optim_get_lr(o, 0) == 0.25);

    /* Unknown keys and values out of range. */
    CHECK(ct_optim_set_option(o, 0, "momentum", 0.9) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "Adam has no option 'momentum'");
    CHECK(ct_optim_get_option(o, 0, "nesterov", &x) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "Adam has no option 'nesterov'");
    CHECK(ct_optim_get_option(o, 0, "betas", &x) == CT_EINVAL); /* use beta1/beta2 */
    CHECK_ERR(CT_EINVAL, "beta1 beta2");
    CHECK(ct_optim_set_option(o, 1, "lr", 0.1) == CT_EINDEX);
    CHECK_ERR(CT_EINDEX, "group 1 out of range");
    CHECK(ct_optim_set_lr(o, 0, -0.5) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "Invalid learning rate: -0.5");
    CHECK(ct_optim_get_lr(o, 0) == 0.25);
    CHECK(ct_optim_set_option(o, 0, "beta2", 1.0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "Invalid beta parameter at index 1: 1.0");
    CHECK(ct_optim_set_option(o, 0, "amsgrad", 2) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "'amsgrad' is a bool");
    CHECK(ct_optim_set_option(o, 0, "foreach", 1) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "`fused` and `foreach` cannot be `True` together.");
    CHECK(ct_optim_set_option(o, 0, "capturable", 1) == CT_ENOTSUP);
    CHECK_ERR(CT_ENOTSUP, "capturable=True");
    CHECK(ct_optim_set_option(o, 0, "differentiable", 1) == CT_ENOTSUP);
    CHECK_ERR(CT_ENOTSUP, "differentiable=True");

    /* initial_lr (for LR schedulers) is kept after Python's keys, before params. */
    CHECK(ct_optim_get_option(o, 0, "initial_lr", &x) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "no option 'initial_lr'");
    CHECK_OK(ct_optim_set_option(o, 0, "initial_lr", 0.25));
    CHECK_OK(ct_optim_get_option(o, 0, "initial_lr", &x));
    CHECK(x == 0.25);
    ct_value *sd = ct_optim_state_dict(o);
    ct_value *g = ct_value_list_get(ct_value_dict_get(sd, "param_groups"), 0);
    size_t n = ct_value_len(g);
    const char *k1 = NULL, *k2 = NULL, *k3 = NULL;
    ct_value_dict_at(g, n - 3, &k1, NULL);
    ct_value_dict_at(g, n - 2, &k2, NULL);
    ct_value_dict_at(g, n - 1, &k3, NULL);
    CHECK(k1 && strcmp(k1, "decoupled_weight_decay") == 0);
    CHECK(k2 && strcmp(k2, "initial_lr") == 0);
    CHECK(k3 && strcmp(k3, "params") == 0);
    ct_value_free(sd);

    ct_optim_free(o);
    free_params(p);
}

/* The options of the optimizers added with issue 18: their keys, Python's
 * checks on set, and how param_groups writes them. */
static void test_options_more(void) {
    ct_tensor *p[NP];
    make_params(p, 2);
    double x = 0;

    ct_optim *o = ct_optim_adadelta(NULL, NULL);
    CHECK(ct_optim_add_param_group(o, NP, p) == 0);
    CHECK_OK(ct_optim_get_option(o, 0, "rho", &x));
    CHECK(x == 0.9);
    CHECK_OK(ct_optim_get_option(o, 0, "foreach", &x));
    CHECK(x == -1);
    CHECK(ct_optim_set_option(o, 0, "rho", 1.1) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "Invalid rho value: 1.1");
    CHECK(ct_optim_get_option(o, 0, "fused", &x) == CT_EINVAL); /* Python's Adadelta has no fused */
    CHECK_ERR(CT_EINVAL, "Adadelta has no option 'fused'");
    CHECK(ct_optim_set_option(o, 0, "capturable", 1) == CT_ENOTSUP);
    CHECK_ERR(CT_ENOTSUP, "capturable=True");
    ct_optim_free(o);

    o = ct_optim_adamax(NULL, NULL);
    CHECK(ct_optim_add_param_group(o, NP, p) == 0);
    CHECK_OK(ct_optim_set_option(o, 0, "beta1", 0.5));
    CHECK_OK(ct_optim_get_option(o, 0, "beta1", &x));
    CHECK(x == 0.5);
    CHECK(ct_optim_set_option(o, 0, "beta2", 1.0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "Invalid beta parameter at index 1: 1.0");
    CHECK(ct_optim_get_option(o, 0, "betas", &x) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "beta1 beta2");
    ct_optim_free(o);

    o = ct_optim_nadam(NULL, NULL);
    CHECK(ct_optim_add_param_group(o, NP, p) == 0);
    CHECK_OK(ct_optim_get_option(o, 0, "momentum_decay", &x));
    CHECK(x == 4e-3);
    CHECK_OK(ct_optim_get_option(o, 0, "decoupled_weight_decay", &x));
    CHECK(x == 0);
    CHECK_OK(ct_optim_set_option(o, 0, "decoupled_weight_decay", 1));
    CHECK(ct_optim_set_option(o, 0, "momentum_decay", -1) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "Invalid momentum_decay value: -1.0");
    /* Python's key order; weight_decay is the int 0. */
    ct_value *sd = ct_optim_state_dict(o);
    ct_value *g = ct_value_list_get(ct_value_dict_get(sd, "param_groups"), 0);
    const char *want[] = {"lr", "betas", "eps", "weight_decay", "momentum_decay", "decoupled_weight_decay",
                          "maximize", "foreach", "capturable", "differentiable", "params"};
    CHECK(ct_value_len(g) == sizeof want / sizeof *want);
    for (size_t i = 0; i < ct_value_len(g) && i < sizeof want / sizeof *want; i++) {
        const char *k = NULL;
        ct_value_dict_at(g, i, &k, NULL);
        CHECK(k && strcmp(k, want[i]) == 0);
    }
    CHECK(ct_value_kind_of(ct_value_dict_get(g, "weight_decay")) == CT_VALUE_INT);
    bool b = false;
    CHECK_OK(ct_value_get_bool(ct_value_dict_get(g, "decoupled_weight_decay"), &b));
    CHECK(b);
    ct_value_free(sd);
    ct_optim_free(o);

    o = ct_optim_radam(NULL, NULL);
    CHECK(ct_optim_add_param_group(o, NP, p) == 0);
    CHECK_OK(ct_optim_get_option(o, 0, "decoupled_weight_decay", &x));
    CHECK(x == 0);
    CHECK(ct_optim_set_option(o, 0, "momentum_decay", 0.1) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "RAdam has no option 'momentum_decay'");
    ct_optim_free(o);

    /* LBFGS: one group; max_eval None is max_iter * 5 // 4; line_search_fn
     * reads 0 (None) or 1 ("strong_wolfe"); lr is Python's int 1. */
    ct_lbfgs_opts lo = ct_lbfgs_defaults();
    lo.max_iter = 7;
    o = ct_optim_lbfgs(NULL, &lo);
    CHECK(ct_optim_add_param_group(o, 2, p) == 0);
    CHECK(ct_optim_add_param_group(o, 1, p + 2) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "LBFGS doesn't support per-parameter options (parameter groups)");
    CHECK(ct_optim_num_groups(o) == 1 && ct_optim_num_params(o) == 2);
    CHECK_OK(ct_optim_get_option(o, 0, "max_eval", &x));
    CHECK(x == 8);
    CHECK_OK(ct_optim_get_option(o, 0, "line_search_fn", &x));
    CHECK(x == 0);
    sd = ct_optim_state_dict(o);
    g = ct_value_list_get(ct_value_dict_get(sd, "param_groups"), 0);
    int64_t iv = 0;
    CHECK(ct_value_get_int(ct_value_dict_get(g, "lr"), &iv) == 0 && iv == 1);
    CHECK(ct_value_get_int(ct_value_dict_get(g, "max_eval"), &iv) == 0 && iv == 8);
    CHECK(ct_value_kind_of(ct_value_dict_get(g, "line_search_fn")) == CT_VALUE_NONE);
    CHECK(ct_value_len(ct_value_dict_get(sd, "state")) == 0);
    ct_value_free(sd);
    CHECK_OK(ct_optim_set_option(o, 0, "line_search_fn", 1));
    CHECK(ct_optim_set_option(o, 0, "line_search_fn", 2) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "'line_search_fn' is None or 'strong_wolfe'");
    CHECK(ct_optim_set_option(o, 0, "max_iter", 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "Invalid max_iter value: 0");
    CHECK(ct_optim_set_option(o, 0, "history_size", 2.5) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "Invalid history_size value: 2.5");
    CHECK_OK(ct_optim_set_lr(o, 0, 0.5));
    sd = ct_optim_state_dict(o);
    g = ct_value_list_get(ct_value_dict_get(sd, "param_groups"), 0);
    CHECK(ct_value_get_str(ct_value_dict_get(g, "line_search_fn")) &&
          strcmp(ct_value_get_str(ct_value_dict_get(g, "line_search_fn")), "strong_wolfe") == 0);
    CHECK(ct_value_kind_of(ct_value_dict_get(g, "lr")) == CT_VALUE_FLOAT);
    ct_value_free(sd);
    ct_optim_free(o);
    free_params(p);
}

/* ---- parameter groups, modules, stepping -------------------------------- */

static void test_groups(void) {
    ct_tensor *p[NP];
    make_params(p, 3);
    ct_optim *o = ct_optim_sgd(NULL, NULL);
    CHECK(ct_optim_add_param_group(o, 2, (ct_tensor *[]){p[0], p[0]}) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "appears twice");
    CHECK(ct_optim_add_param_group(o, 1, p) == 0);
    CHECK(ct_optim_add_param_group(o, 2, (ct_tensor *[]){p[1], p[0]}) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "some parameters appear in more than one parameter group");
    ct_tensor *alias = ct_alias(p[0]); /* another handle, same tensor */
    CHECK(ct_optim_add_param_group(o, 1, &alias) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "more than one parameter group");
    ct_tensor_free(alias);
    ct_tensor *nonleaf = ct_mul_scalar(p[1], 2.0);
    CHECK(ct_optim_add_param_group(o, 1, &nonleaf) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "can't optimize a non-leaf Tensor");
    ct_tensor_free(nonleaf);
    CHECK(ct_optim_add_param_group(o, 2, p + 1) == 1);
    CHECK(ct_optim_num_groups(o) == 2 && ct_optim_num_params(o) == 3);

    /* ct_optim_param is the parameter itself: a step shows through it. */
    ct_tensor *h = ct_optim_param(o, 2);
    CHECK(h != p[2] && same_values(h, p[2]));
    CHECK(ct_optim_param(o, 3) == NULL);
    CHECK_ERR(CT_EINDEX, "parameter 3 out of range");

    /* Only parameters with a gradient move; SGD without momentum keeps no state. */
    ct_tensor *before0 = ct_keep(ct_clone(p[0])), *before2 = ct_keep(ct_clone(p[2]));
    set_grads(p, 2, 30); /* p[0], p[1] */
    CHECK_OK(ct_optim_step(o));
    CHECK(same_values(p[2], before2));
    CHECK(!same_values(p[0], before0));
    ct_scope *s = ct_scope_begin();
    ct_tensor *want = ct_sub(before0, ct_mul_scalar(ct_grad(p[0]), 1e-3)); /* p - lr * g */
    CHECK_NEAR(max_diff(p[0], want), 0, 1e-6);
    ct_scope_end(s);
    ct_value *sd = ct_optim_state_dict(o);
    CHECK(ct_value_len(ct_value_dict_get(sd, "state")) == 0);
    ct_value_free(sd);

    /* zero_grad: to zero, then to None. */
    CHECK_OK(ct_optim_zero_grad(o, false));
    CHECK(ct_has_grad(p[0]));
    double sum = -1;
    s = ct_scope_begin();
    CHECK_OK(ct_item(ct_sum(ct_abs(ct_grad(p[0]))), &sum));
    ct_scope_end(s);
    CHECK(sum == 0);
    CHECK_OK(ct_optim_zero_grad(o, true));
    CHECK(!ct_has_grad(p[0]) && !ct_has_grad(p[1]));
    CHECK_OK(ct_optim_step(o)); /* nothing has a gradient: nothing moves */

    ct_tensor_free(before0);
    ct_tensor_free(before2);
    ct_optim_free(o);
    free_params(p);
}

/* ct_optim_set_stepped: the parameters left out keep their values and get
 * no state, the others step exactly as in an optimizer of their own; NULL
 * steps all again; LBFGS refuses. */
static void test_stepped(void) {
    ct_tensor *p[NP], *q[NP];
    make_params(p, 5);
    clone_params(q, p);
    ct_adam_opts ao = ct_adam_defaults();
    ct_optim *o = ct_optim_adam(NULL, &ao), *ref = ct_optim_adam(NULL, &ao);
    CHECK(ct_optim_add_param_group(o, NP, p) == 0);
    CHECK(ct_optim_add_param_group(ref, 2, (ct_tensor *[]){q[0], q[2]}) == 0); /* p[1] left out */
    bool stepped[NP] = {true, false, true};
    CHECK_OK(ct_optim_set_stepped(o, stepped));
    ct_tensor *before1 = ct_keep(ct_clone(p[1]));
    for (int k = 0; k < 3; k++) {
        set_grads(p, NP, 40 + (uint64_t)k);
        set_grads(q, NP, 40 + (uint64_t)k);
        CHECK_OK(ct_optim_step(o));
        CHECK_OK(ct_optim_step(ref));
    }
    CHECK(same_values(p[1], before1));
    CHECK(same_values(p[0], q[0]) && same_values(p[2], q[2]));
    ct_value *sd = ct_optim_state_dict(o);
    const ct_value *st = ct_value_dict_get(sd, "state");
    CHECK(ct_value_len(st) == 2 && ct_value_dict_get_int(st, 0) && !ct_value_dict_get_int(st, 1) &&
          ct_value_dict_get_int(st, 2));
    ct_value_free(sd);
    /* Every parameter again: p[1] gets its first state and moves. */
    CHECK_OK(ct_optim_set_stepped(o, NULL));
    CHECK_OK(ct_optim_step(o));
    CHECK(!same_values(p[1], before1));
    sd = ct_optim_state_dict(o);
    CHECK(ct_value_len(ct_value_dict_get(sd, "state")) == 3);
    ct_value_free(sd);
    CHECK(ct_optim_set_stepped(NULL, stepped) == CT_EINVAL);
    ct_optim *lb = ct_optim_lbfgs(NULL, NULL);
    CHECK(ct_optim_add_param_group(lb, 1, q) == 0);
    CHECK(ct_optim_set_stepped(lb, stepped) == CT_ENOTSUP);
    CHECK_ERR(CT_ENOTSUP, "LBFGS keeps one state for all its parameters");
    CHECK_OK(ct_optim_set_stepped(lb, NULL));
    ct_optim_free(lb);
    ct_tensor_free(before1);
    ct_optim_free(o);
    ct_optim_free(ref);
    free_params(p);
    free_params(q);
}

static void test_module(void) {
    ct_manual_seed(4);
    ct_module *net = ct_nn_linear(4, 3, true);
    ct_sgd_opts so = ct_sgd_defaults();
    so.lr = 0.5;
    ct_optim *o = ct_optim_sgd(net, &so);
    CHECK(o && ct_optim_num_groups(o) == 1 && ct_optim_num_params(o) == 2);
    ct_tensor *w = ct_nn_get(net, "weight");
    CHECK(same_values(ct_optim_param(o, 0), w));
    ct_tensor *w0 = ct_keep(ct_clone(w));
    ct_scope *s = ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(2, 4), NULL);
    CHECK_OK(ct_backward(ct_sum(ct_nn_forward(net, x))));
    ct_tensor *want = ct_sub(w0, ct_mul_scalar(ct_grad(w), 0.5));
    CHECK_OK(ct_optim_step(o));
    CHECK(!same_values(w, ct_optim_param(o, 1)));
    CHECK_NEAR(max_diff(w, want), 0, 1e-6); /* the module's own parameter moved */
    ct_scope_end(s);
    ct_tensor_free(w0);
    ct_optim_free(o);
    ct_nn_free(net);

    ct_module *relu = ct_nn_relu();
    CHECK(ct_optim_adam(relu, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "optimizer got an empty parameter list");
    ct_nn_free(relu);
}

/* ---- closures: ct_optim_step_closure ------------------------------------- */

/* sum_k sum((p_k - 0.5)^2 + 0.1 p_k^4) over the first n parameters, with
 * the ways a closure can go wrong. */
typedef struct {
    ct_optim *opt;
    ct_tensor **p;
    int n, calls;
    enum { GOOD, FAIL, NULL_NO_ERROR, NOT_SCALAR } mode;
} Quad;

static ct_tensor *quad_closure(void *user) {
    Quad *q = user;
    q->calls++;
    if (q->mode == FAIL) {
        ct_set_error(CT_ESHAPE, "my closure broke");
        return NULL;
    }
    if (q->mode == NULL_NO_ERROR) {
        ct_clear_error();
        return NULL;
    }
    if (ct_optim_zero_grad(q->opt, true) != 0) return NULL;
    ct_tensor *loss = NULL;
    for (int k = 0; k < q->n; k++) {
        ct_tensor *term = ct_sum(ct_add(ct_square(ct_sub_scalar(q->p[k], 0.5)),
                                        ct_mul_scalar(ct_pow_scalar(q->p[k], 4), 0.1)));
        loss = loss ? ct_add(loss, term) : term;
    }
    if (!loss || ct_backward(loss) != 0) return NULL;
    return q->mode == NOT_SCALAR ? ct_mul_scalar(q->p[0], 1.0) : loss;
}

static double quad_value(ct_tensor **p, int n) {
    double v = 0;
    ct_scope *s = ct_scope_begin();
    ct_guard *ng = ct_no_grad();
    ct_tensor *loss = NULL;
    for (int k = 0; k < n; k++) {
        ct_tensor *term = ct_sum(ct_add(ct_square(ct_sub_scalar(p[k], 0.5)), ct_mul_scalar(ct_pow_scalar(p[k], 4), 0.1)));
        loss = loss ? ct_add(loss, term) : term;
    }
    if (ct_item(loss, &v) != 0) v = NAN;
    ct_guard_end(ng);
    ct_scope_end(s);
    return v;
}

static void test_closures(void) {
    ct_tensor *p[NP];
    make_params(p, 7);
    double loss = -1;

    /* Any optimizer: the closure once (with grad on, though the caller has
     * it off), then the step; the loss returned is the closure's. */
    ct_sgd_opts so = ct_sgd_defaults();
    so.lr = 0.1;
    ct_optim *o = ct_optim_sgd(NULL, &so);
    CHECK(ct_optim_add_param_group(o, NP, p) == 0);
    Quad q = {o, p, NP, 0, GOOD};
    const double before = quad_value(p, NP);
    size_t live = ct_tensor_live_count();
    ct_guard *ng = ct_no_grad();
    CHECK_OK(ct_optim_step_closure(o, quad_closure, &q, &loss));
    ct_guard_end(ng);
    CHECK(ct_tensor_live_count() == live); /* what the closure made is gone */
    CHECK(q.calls == 1);
    CHECK(loss == before);
    CHECK(quad_value(p, NP) < before);
    CHECK_OK(ct_optim_step_closure(o, quad_closure, &q, NULL)); /* loss may be NULL */

    CHECK(ct_optim_step_closure(o, NULL, &q, &loss) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "closure is NULL");
    CHECK(ct_optim_step_closure(NULL, quad_closure, &q, &loss) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "optimizer is NULL");
    q.mode = FAIL; /* the closure's code and message */
    CHECK(ct_optim_step_closure(o, quad_closure, &q, &loss) == CT_ESHAPE);
    CHECK_ERR(CT_ESHAPE, "the closure failed: my closure broke");
    q.mode = NULL_NO_ERROR;
    CHECK(ct_optim_step_closure(o, quad_closure, &q, &loss) == CT_ETRIAL);
    CHECK_ERR(CT_ETRIAL, "the closure returned NULL");
    q.mode = NOT_SCALAR;
    CHECK(ct_optim_step_closure(o, quad_closure, &q, &loss) == CT_ESHAPE);
    CHECK_ERR(CT_ESHAPE, "the closure's loss must be one value, got [4, 3] float32");
    ct_optim_free(o);

    /* LBFGS needs one; with a line search a few steps reach the minimum
     * (p = 0.5 minimises nothing here: 2(p - .5) + .4 p^3 = 0 near 0.4). */
    ct_lbfgs_opts lo = ct_lbfgs_defaults();
    lo.line_search_fn = "strong_wolfe";
    o = ct_optim_lbfgs(NULL, &lo);
    CHECK(ct_optim_add_param_group(o, NP, p) == 0);
    CHECK(ct_optim_step(o) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "call ct_optim_step_closure");
    q = (Quad){o, p, NP, 0, GOOD};
    const double start = quad_value(p, NP);
    CHECK_OK(ct_optim_step_closure(o, quad_closure, &q, &loss));
    CHECK(loss == start); /* Python returns orig_loss */
    CHECK(q.calls > 2 && q.calls <= 25); /* max_eval = 25 */
    for (int i = 0; i < 3; i++) CHECK_OK(ct_optim_step_closure(o, quad_closure, &q, &loss));
    CHECK(quad_value(p, NP) < 0.03 * start);
    ct_value *sd = ct_optim_state_dict(o);
    ct_value *st = ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0);
    const char *keys[] = {"func_evals", "n_iter", "al", "d", "t", "old_dirs", "old_stps", "ro", "H_diag",
                          "prev_flat_grad", "prev_loss"};
    CHECK(st && ct_value_len(st) == sizeof keys / sizeof *keys);
    for (size_t i = 0; st && i < ct_value_len(st) && i < sizeof keys / sizeof *keys; i++) {
        const char *k = NULL;
        ct_value_dict_at(st, i, &k, NULL);
        CHECK(k && strcmp(k, keys[i]) == 0);
    }
    int64_t evals = 0;
    CHECK(ct_value_get_int(ct_value_dict_get(st, "func_evals"), &evals) == 0 && evals == q.calls);
    ct_value_free(sd);
    q.mode = FAIL;
    CHECK(ct_optim_step_closure(o, quad_closure, &q, &loss) == CT_ESHAPE);
    CHECK_ERR(CT_ESHAPE, "my closure broke");
    ct_optim_free(o);
    free_params(p);
}

/* ---- state_dict round trips and refused loads ---------------------------- */

typedef ct_optim *(*factory)(void);

static ct_optim *f_sgd(void) {
    ct_sgd_opts o = ct_sgd_defaults();
    o.lr = 0.1, o.momentum = 0.9, o.nesterov = true;
    return ct_optim_sgd(NULL, &o);
}
static ct_optim *f_adam(void) {
    ct_adam_opts o = ct_adam_defaults();
    o.amsgrad = true;
    return ct_optim_adam(NULL, &o);
}
static ct_optim *f_adamw(void) { return ct_optim_adamw(NULL, NULL); }
static ct_optim *f_rmsprop(void) {
    ct_rmsprop_opts o = ct_rmsprop_defaults();
    o.centered = true, o.momentum = 0.5;
    return ct_optim_rmsprop(NULL, &o);
}
static ct_optim *f_adagrad(void) {
    ct_adagrad_opts o = ct_adagrad_defaults();
    o.initial_accumulator_value = 0.1, o.lr_decay = 0.01;
    return ct_optim_adagrad(NULL, &o);
}
static ct_optim *f_adadelta(void) {
    ct_adadelta_opts o = ct_adadelta_defaults();
    o.weight_decay = 0.01;
    return ct_optim_adadelta(NULL, &o);
}
static ct_optim *f_adamax(void) { return ct_optim_adamax(NULL, NULL); }
static ct_optim *f_nadam(void) {
    ct_nadam_opts o = ct_nadam_defaults();
    o.weight_decay = 0.01, o.decoupled_weight_decay = true;
    return ct_optim_nadam(NULL, &o);
}
static ct_optim *f_radam(void) {
    ct_radam_opts o = ct_radam_defaults();
    o.maximize = true;
    return ct_optim_radam(NULL, &o);
}

/* Two groups: {p0, p1} and {p2}, the second with its own lr. */
static ct_optim *build(factory f, ct_tensor **p) {
    ct_optim *o = f();
    CHECK(ct_optim_add_param_group(o, 2, p) == 0);
    CHECK(ct_optim_add_param_group(o, 1, p + 2) == 1);
    CHECK_OK(ct_optim_set_lr(o, 1, 0.05));
    return o;
}

static void train(ct_optim *o, ct_tensor **p, int from, int to) {
    for (int t = from; t < to; t++) {
        set_grads(p, NP, 1000 + (uint64_t)t);
        CHECK_OK(ct_optim_step(o));
    }
}

static void test_round_trip(factory f) {
    ct_tensor *pa[NP], *pb[NP];
    make_params(pa, 5);
    ct_optim *a = build(f, pa);
    train(a, pa, 0, 5);

    /* A fresh optimizer over copies of the parameters takes A's state... */
    clone_params(pb, pa);
    ct_optim *b = build(f, pb);
    CHECK_OK(ct_optim_set_lr(b, 1, 0.7)); /* overwritten by the load */
    ct_value *sd = ct_optim_state_dict(a);
    CHECK_OK(ct_optim_load_state_dict(b, sd));
    ct_value *sdb = ct_optim_state_dict(b);
    CHECK(ct_value_equal(sd, sdb));
    CHECK(ct_optim_get_lr(b, 1) == 0.05);
    ct_value_free(sdb);
    ct_value_free(sd); /* b holds copies, not the loaded tensors */

    /* ...and both continue identically, bit for bit. */
    train(a, pa, 5, 10);
    train(b, pb, 5, 10);
    for (int k = 0; k < NP; k++) CHECK(same_values(pa[k], pb[k]));
    sd = ct_optim_state_dict(a);
    sdb = ct_optim_state_dict(b);
    CHECK(ct_value_equal(sd, sdb));
    ct_value_free(sd);
    ct_value_free(sdb);

    ct_optim_free(a);
    ct_optim_free(b);
    free_params(pa);
    free_params(pb);
}

/* LBFGS's state (lists, ints, floats and tensors) survives the trip too. */
static void test_round_trip_lbfgs(const char *line_search) {
    ct_tensor *pa[NP], *pb[NP];
    make_params(pa, 8);
    clone_params(pb, pa);
    ct_lbfgs_opts lo = ct_lbfgs_defaults();
    lo.line_search_fn = line_search;
    lo.max_iter = 4, lo.history_size = 3;
    ct_optim *a = ct_optim_lbfgs(NULL, &lo), *b = ct_optim_lbfgs(NULL, &lo);
    CHECK(ct_optim_add_param_group(a, NP, pa) == 0 && ct_optim_add_param_group(b, NP, pb) == 0);
    Quad qa = {a, pa, NP, 0, GOOD}, qb = {b, pb, NP, 0, GOOD};
    for (int t = 0; t < 3; t++) CHECK_OK(ct_optim_step_closure(a, quad_closure, &qa, NULL));
    ct_value *sd = ct_optim_state_dict(a);
    CHECK_OK(ct_optim_load_state_dict(b, sd));
    ct_value *sdb = ct_optim_state_dict(b);
    CHECK(ct_value_equal(sd, sdb));
    ct_value_free(sd);
    ct_value_free(sdb);
    ct_guard *ng = ct_no_grad(); /* b's parameters where a's are */
    for (int k = 0; k < NP; k++) CHECK_OK(ct_copy_(pb[k], pa[k]));
    ct_guard_end(ng);
    double la = 0, lb = 1;
    for (int t = 0; t < 2; t++) {
        CHECK_OK(ct_optim_step_closure(a, quad_closure, &qa, &la));
        CHECK_OK(ct_optim_step_closure(b, quad_closure, &qb, &lb));
        CHECK(la == lb);
    }
    for (int k = 0; k < NP; k++) CHECK(same_values(pa[k], pb[k]));
    sd = ct_optim_state_dict(a);
    sdb = ct_optim_state_dict(b);
    CHECK(ct_value_equal(sd, sdb));
    ct_value_free(sd);
    ct_value_free(sdb);
    ct_optim_free(a);
    ct_optim_free(b);
    free_params(pa);
    free_params(pb);
}

/* load_state_dict(bad) fails with `code` and `needle` and leaves o as it was. */
static void expect_load_refused(ct_optim *o, const ct_value *bad, int code, const char *needle) {
    ct_value *tmp = ct_optim_state_dict(o);
    ct_value *before = ct_value_copy(tmp, true); /* a snapshot, not shared storage */
    ct_value_free(tmp);
    double lr0 = ct_optim_get_lr(o, 0);
    CHECK(ct_optim_load_state_dict(o, bad) == code);
    CHECK_ERR(code, needle);
    ct_value *after = ct_optim_state_dict(o);
    CHECK(ct_value_equal(before, after));
    CHECK(ct_optim_get_lr(o, 0) == lr0);
    ct_value_free(before);
    ct_value_free(after);
}

static ct_value *group0(ct_value *sd) { return ct_value_list_get(ct_value_dict_get(sd, "param_groups"), 0); }

/* A copy of dict without `key`. */
static ct_value *dict_without(const ct_value *d, const char *key) {
    ct_value *out = ct_value_dict();
    for (size_t i = 0; i < ct_value_len(d); i++) {
        const char *k = NULL;
        int64_t ik = 0;
        const ct_value *v = ct_value_dict_at(d, i, &k, &ik);
        if (k && strcmp(k, key) == 0) continue;
        if (k) ct_value_dict_set(out, k, ct_value_copy(v, false));
        else ct_value_dict_set_int(out, ik, ct_value_copy(v, false));
    }
    return out;
}

/* o's state dict with `key` taken out of state[entry]. */
static ct_value *sd_without(ct_optim *o, int64_t entry, const char *key) {
    ct_value *sd = ct_optim_state_dict(o);
    ct_value *state = ct_value_dict_get(sd, "state");
    ct_value_dict_set_int(state, entry, dict_without(ct_value_dict_get_int(state, entry), key));
    return sd;
}

/* The state every new type keeps for each stepped parameter: a state dict
 * without one of its keys is refused at load (Python fails at the next step). */
static void test_refused_loads_more(void) {
    static const struct {
        factory f;
        const char *drop, *needle;
    } cases[] = {
        {f_adadelta, "acc_delta",
         "state[1] has no 'acc_delta' (Adadelta keeps step, square_avg and acc_delta for each parameter it has stepped)"},
        {f_adadelta, "step", "state[1] has no 'step'"},
        {f_adamax, "exp_inf", "state[1] has no 'exp_inf' (Adamax keeps step, exp_avg and exp_inf"},
        {f_nadam, "mu_product", "state[1] has no 'mu_product' (NAdam keeps step, mu_product, exp_avg and exp_avg_sq"},
        {f_radam, "exp_avg_sq", "state[1] has no 'exp_avg_sq' (RAdam keeps step, exp_avg and exp_avg_sq"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ct_tensor *p[NP];
        make_params(p, 9);
        ct_optim *o = build(cases[c].f, p);
        train(o, p, 0, 2);
        ct_value *sd = sd_without(o, 1, cases[c].drop);
        expect_load_refused(o, sd, CT_EFORMAT, cases[c].needle);
        ct_value_free(sd);
        ct_optim_free(o);
        free_params(p);
    }

    /* NAdam's mu_product from an older checkpoint, a plain number, loads as
     * a float32 scalar; an Adamax state dict is not a NAdam one. */
    ct_tensor *p[NP];
    make_params(p, 10);
    ct_optim *o = build(f_nadam, p);
    train(o, p, 0, 2);
    ct_value *sd = ct_optim_state_dict(o);
    ct_value *good = ct_value_copy(sd, true);
    ct_value_dict_set(ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0), "mu_product", ct_value_float(0.5));
    CHECK_OK(ct_optim_load_state_dict(o, sd));
    ct_value_free(sd);
    sd = ct_optim_state_dict(o);
    ct_tensor *mu = ct_value_get_tensor(ct_value_dict_get(ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0),
                                                          "mu_product"));
    double muv = 0;
    CHECK(mu && ct_ndim(mu) == 0 && ct_dtype_of(mu) == CT_F32 && ct_item(mu, &muv) == 0 && muv == 0.5);
    ct_value_free(sd);
    ct_optim *mx = build(f_adamax, p);
    train(mx, p, 0, 1);
    sd = ct_optim_state_dict(mx);
    expect_load_refused(o, sd, CT_EFORMAT, "param_groups[0] has no 'momentum_decay' (not a NAdam state dict?)");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    ct_value_dict_set(ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0), "exp_inf",
                      ct_value_tensor(ct_zeros(CT_SHAPE(4, 3), NULL)));
    expect_load_refused(o, sd, CT_EFORMAT, "state[0] has the key 'exp_inf', which NAdam does not use");
    ct_value_free(sd);
    ct_value_free(good);
    ct_optim_free(mx);
    ct_optim_free(o);

    /* LBFGS: its one state, checked key by key. */
    ct_lbfgs_opts lo = ct_lbfgs_defaults();
    lo.max_iter = 3;
    o = ct_optim_lbfgs(NULL, &lo);
    CHECK(ct_optim_add_param_group(o, NP, p) == 0);
    Quad q = {o, p, NP, 0, GOOD};
    for (int t = 0; t < 2; t++) CHECK_OK(ct_optim_step_closure(o, quad_closure, &q, NULL));
    good = ct_optim_state_dict(o);
    static const char *const required[] = {"func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro",
                                           "H_diag", "prev_flat_grad", "prev_loss"};
    for (size_t i = 0; i < sizeof required / sizeof *required; i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "state[0] has no '%s' (LBFGS keeps", required[i]);
        sd = sd_without(o, 0, required[i]);
        expect_load_refused(o, sd, CT_EFORMAT, needle);
        ct_value_free(sd);
    }
    sd = sd_without(o, 0, "al"); /* made when first needed: may be absent */
    CHECK_OK(ct_optim_load_state_dict(o, sd));
    ct_value_free(sd);
    CHECK_OK(ct_optim_load_state_dict(o, good));
    ct_value *st = ct_value_dict_get_int(ct_value_dict_get(good, "state"), 0);

    sd = ct_value_copy(good, false);
    ct_value *sst = ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0);
    ct_value_dict_set(sst, "d", ct_value_tensor(ct_zeros(CT_SHAPE(3), NULL)));
    expect_load_refused(o, sd, CT_ESHAPE, "state[0]['d'] has shape [3] but the parameters have 23 elements");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    sst = ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0);
    ct_value_dict_set(sst, "t", ct_value_str("one"));
    expect_load_refused(o, sd, CT_EFORMAT, "state[0]['t'] must be a number or a one-element tensor, got str");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    sst = ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0);
    ct_value_list_append(ct_value_dict_get(sst, "ro"), ct_value_tensor(ct_ones(CT_SHAPE(1), NULL)));
    expect_load_refused(o, sd, CT_EFORMAT, "old_dirs, old_stps and ro must have the same length");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    sst = ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0);
    ct_value_dict_set(sst, "n_iter", ct_value_float(2));
    expect_load_refused(o, sd, CT_EFORMAT, "state[0]['n_iter'] must be an int, got float");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    sst = ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0);
    ct_value_dict_set(sst, "momentum_buffer", ct_value_none());
    expect_load_refused(o, sd, CT_EFORMAT, "state[0] has the key 'momentum_buffer', which LBFGS does not use");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    ct_value *moved = ct_value_copy(st, false); /* LBFGS reads only its first parameter's state */
    ct_value_dict_set_int(ct_value_dict_get(sd, "state"), 0, ct_value_dict());
    ct_value_dict_set_int(ct_value_dict_get(sd, "state"), 1, moved);
    expect_load_refused(o, sd, CT_EFORMAT, "state[1] is not LBFGS's");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    ct_value_dict_set(group0(sd), "line_search_fn", ct_value_str("backtracking"));
    expect_load_refused(o, sd, CT_EINVAL, "param_groups[0]['line_search_fn'] is 'backtracking': only 'strong_wolfe'");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    ct_value_dict_set(group0(sd), "max_iter", ct_value_float(3));
    expect_load_refused(o, sd, CT_EFORMAT, "param_groups[0]['max_iter'] must be an int, got float");
    ct_value_free(sd);
    ct_value_free(good);
    ct_optim_free(o);
    free_params(p);
}

static void test_refused_loads(void) {
    ct_tensor *p[NP];
    make_params(p, 6);
    ct_optim *o = build(f_adam, p);
    train(o, p, 0, 3);

    /* A one-group Adam over the same three shapes. */
    ct_tensor *q[NP];
    clone_params(q, p);
    ct_optim *one = f_adam();
    ct_optim_add_param_group(one, NP, q);
    train(one, q, 0, 2);
    ct_value *sd1 = ct_optim_state_dict(one);
    ct_value_dict_set(group0(sd1), "lr", ct_value_float(0.5)); /* would show if applied */
    expect_load_refused(o, sd1, CT_EINVAL, "different number of parameter groups (1, the optimizer has 2)");
    ct_value_free(sd1);

    /* Two groups, but of sizes 1 and 2 instead of 2 and 1. */
    ct_optim *other = f_adam();
    ct_optim_add_param_group(other, 1, q);
    ct_optim_add_param_group(other, 2, q + 1);
    ct_value *sd2 = ct_optim_state_dict(other);
    expect_load_refused(o, sd2, CT_EINVAL, "param_groups[0] has 1 parameters, the optimizer's has 2");
    ct_value_free(sd2);

    /* A state tensor of the wrong shape (everything else fine). */
    ct_value *sd = ct_optim_state_dict(o);
    ct_value *good = ct_value_copy(sd, true);
    ct_value_dict_set(group0(sd), "lr", ct_value_float(0.5));
    ct_value *s1 = ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 1);
    ct_value_dict_set(s1, "exp_avg_sq", ct_value_tensor(ct_zeros(CT_SHAPE(7), NULL)));
    expect_load_refused(o, sd, CT_ESHAPE, "state[1]['exp_avg_sq'] has shape [7] but its parameter has [5, 1]");
    ct_value_free(sd);

    /* A value the constructor refuses (Python loads it; ctrial's set_option,
     * which the LR schedulers call, would refuse it at their first step). */
    sd = ct_value_copy(good, false);
    ct_value_dict_set(group0(sd), "lr", ct_value_float(-2.0782102291411025e+153));
    expect_load_refused(o, sd, CT_EINVAL, "param_groups[0]['lr']: Invalid learning rate: -2.0782102291411025e+153");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    ct_value_dict_set(group0(sd), "eps", ct_value_float(NAN));
    expect_load_refused(o, sd, CT_EINVAL, "param_groups[0]['eps']: Invalid epsilon value: nan");
    ct_value_free(sd);

    /* A key Adam does not use, a state for no parameter, a missing part. */
    sd = ct_value_copy(good, false);
    ct_value_dict_set(ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0), "bogus",
                      ct_value_tensor(ct_zeros(CT_SHAPE(4, 3), NULL)));
    expect_load_refused(o, sd, CT_EFORMAT, "state[0] has the key 'bogus', which Adam does not use");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    ct_value_dict_set_int(ct_value_dict_get(sd, "state"), 9, ct_value_dict());
    expect_load_refused(o, sd, CT_EFORMAT, "state[9] belongs to no parameter");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    ct_value_dict_set(sd, "state", ct_value_list());
    expect_load_refused(o, sd, CT_EFORMAT, "no 'state' dict");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    ct_value_dict_set(group0(sd), "capturable", ct_value_bool(true));
    expect_load_refused(o, sd, CT_ENOTSUP, "param_groups[0] has capturable=True");
    ct_value_free(sd);
    sd = ct_value_copy(good, false);
    ct_value_dict_set(group0(sd), "betas", ct_value_float(0.9));
    expect_load_refused(o, sd, CT_EFORMAT, "param_groups[0]['betas'] must be a pair of numbers");
    ct_value_free(sd);

    /* An Adam state dict is not an SGD one. */
    ct_optim *sgd = build(f_sgd, q);
    expect_load_refused(sgd, good, CT_EFORMAT, "param_groups[0] has no 'momentum'");
    ct_optim_free(sgd);

    /* Loading casts as Python does: state to the parameter's dtype; "step"
     * to a float32 scalar, also from an older checkpoint's plain number. */
    sd = ct_value_copy(good, true);
    ct_value *st0 = ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0);
    ct_tensor *avg = ct_value_get_tensor(ct_value_dict_get(st0, "exp_avg"));
    ct_value_dict_set(st0, "exp_avg", ct_value_tensor(ct_to_dtype(avg, CT_F64)));
    ct_value_dict_set(st0, "step", ct_value_int(3));
    CHECK_OK(ct_optim_load_state_dict(o, sd));
    ct_value *now = ct_optim_state_dict(o);
    ct_value *now0 = ct_value_dict_get_int(ct_value_dict_get(now, "state"), 0);
    ct_tensor *step = ct_value_get_tensor(ct_value_dict_get(now0, "step"));
    double stepv = 0;
    CHECK(step && ct_dtype_of(step) == CT_F32 && ct_ndim(step) == 0);
    CHECK_OK(ct_item(step, &stepv));
    CHECK(stepv == 3);
    ct_value *g0 = ct_value_dict_get_int(ct_value_dict_get(good, "state"), 0);
    CHECK(ct_value_equal(ct_value_dict_get(now0, "exp_avg"), ct_value_dict_get(g0, "exp_avg")));
    ct_value_free(now);
    ct_value_free(sd);

    /* The untouched copy still loads. */
    CHECK_OK(ct_optim_load_state_dict(o, good));
    ct_value_free(good);

    ct_optim_free(o);
    ct_optim_free(one);
    ct_optim_free(other);
    free_params(p);
    free_params(q);
}

int main(void) {
    size_t live = ct_tensor_live_count();
    test_validation();
    test_null_args();
    test_options();
    test_groups();
    test_stepped();
    test_module();
    test_options_more();
    test_closures();
    factory fs[] = {f_sgd, f_adam, f_adamw, f_rmsprop, f_adagrad, f_adadelta, f_adamax, f_nadam, f_radam};
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++) test_round_trip(fs[i]);
    test_round_trip_lbfgs(NULL);
    test_round_trip_lbfgs("strong_wolfe");
    test_refused_loads();
    test_refused_loads_more();
    CHECK(ct_tensor_live_count() == live); /* optimizers and state dicts freed their handles */
    return ct_test_result("test_optim_api");
}
