/* tests/sched/test_sched_api.c — the LR scheduler C API beyond the numbers
 * (those are test_sched_parity.py's): Python's ValueError messages for bad
 * arguments, NULLs, step vs step_metric, group indices, refused loads that
 * change nothing (another kind's state, another group count, a bad value
 * deep inside a SequentialLR), C -> C round trips mid-way, OneCycleLR's
 * group keys and its end, SequentialLR's ownership, and that a successful
 * call leaves no error behind. */
#include <stdlib.h>

#include <ctrial/sched.h>

#include "ct_test.h"

#define MAXG 3

typedef struct {
    ct_optim *opt;
    ct_tensor *p[MAXG];
    size_t n;
} Opt;

/* SGD (momentum 0.9) or Adam/Adagrad with n groups, lrs 0.1, 0.05, ... */
static Opt make_opt(const char *type, size_t n) {
    Opt o = {0};
    ct_sgd_opts s = ct_sgd_defaults();
    s.momentum = 0.9;
    if (strcmp(type, "SGD") == 0) o.opt = ct_optim_sgd(NULL, &s);
    if (strcmp(type, "Adam") == 0) o.opt = ct_optim_adam(NULL, NULL);
    if (strcmp(type, "Adagrad") == 0) o.opt = ct_optim_adagrad(NULL, NULL);
    o.n = n;
    for (size_t g = 0; g < n; g++) {
        o.p[g] = ct_keep(ct_zeros(1, (int64_t[]){3}, NULL));
        ct_set_requires_grad(o.p[g], true);
        CHECK(ct_optim_add_param_group(o.opt, 1, &o.p[g]) == (int)g);
        CHECK_OK(ct_optim_set_lr(o.opt, g, 0.1 / (double)(g + 1)));
    }
    return o;
}

static void free_opt(Opt *o) {
    ct_optim_free(o->opt);
    for (size_t g = 0; g < o->n; g++) ct_tensor_free(o->p[g]);
}

static void expect_refused(ct_sched *s, int code, const char *msg) {
    CHECK(s == NULL);
    CHECK_ERR(code, msg);
    ct_sched_free(s);
}

static double exp_lambda(int64_t e, size_t g, void *ctx) { return pow(0.9, (double)e) * (ctx ? 2.0 : 1.0); }

/* ---- construction ------------------------------------------------------------- */

static void test_bad_arguments(void) {
    Opt o = make_opt("SGD", 2);
    expect_refused(ct_sched_exponential(NULL, 0.9), CT_EINVAL, "optimizer is NULL");
    expect_refused(ct_sched_step_lr(o.opt, 0, 0.1), CT_EINVAL, "step_size must not be 0");
    expect_refused(ct_sched_multistep(o.opt, 2, NULL, 0.1), CT_EINVAL, "milestones");
    expect_refused(ct_sched_cosine_annealing(o.opt, 0, 0), CT_EINVAL, "T_max must not be 0");
    expect_refused(ct_sched_cosine_warm_restarts(o.opt, 0, 1, 0), CT_EINVAL,
                   "Expected positive integer T_0, but got 0");
    expect_refused(ct_sched_cosine_warm_restarts(o.opt, 5, 0, 0), CT_EINVAL,
                   "Expected integer T_mult >= 1, but got 0");
    expect_refused(ct_sched_linear(o.opt, 0, 1, 5), CT_EINVAL,
                   "Starting multiplicative factor expected to be greater than 0 and less or equal to 1.");
    expect_refused(ct_sched_linear(o.opt, 1.5, 1, 5), CT_EINVAL, "Starting multiplicative factor");
    expect_refused(ct_sched_linear(o.opt, 0.5, 1.5, 5), CT_EINVAL,
                   "Ending multiplicative factor expected to be between 0 and 1.");
    expect_refused(ct_sched_constant(o.opt, 1.5, 5), CT_EINVAL,
                   "Constant multiplicative factor expected to be between 0 and 1.");
    expect_refused(ct_sched_constant(o.opt, -0.1, 5), CT_EINVAL, "Constant multiplicative factor");
    expect_refused(ct_sched_lambda(o.opt, NULL, NULL), CT_EINVAL, "lr_lambda is NULL");

    ct_onecycle_opts c = ct_onecycle_defaults();
    c.max_lr = 0.1;
    expect_refused(ct_sched_onecycle(o.opt, &c), CT_EINVAL, "Expected positive integer total_steps, but got 0");
    c.total_steps = 10;
    c.pct_start = 1.5;
    expect_refused(ct_sched_onecycle(o.opt, &c), CT_EINVAL, "Expected float between 0 and 1 pct_start, but got 1.5");
    c.pct_start = -1e-5;
    expect_refused(ct_sched_onecycle(o.opt, &c), CT_EINVAL, "but got -1e-05");
    c.pct_start = 1e16;
    expect_refused(ct_sched_onecycle(o.opt, &c), CT_EINVAL, "but got 1e+16");
    c.pct_start = 123.456;
    expect_refused(ct_sched_onecycle(o.opt, &c), CT_EINVAL, "but got 123.456");
    c.pct_start = 0.3;
    c.anneal_strategy = (ct_anneal)7;
    expect_refused(ct_sched_onecycle(o.opt, &c), CT_EINVAL, "anneal_strategy must be one of 'cos' or 'linear'");
    c.anneal_strategy = CT_ANNEAL_COS;
    c.max_lr = 0;
    expect_refused(ct_sched_onecycle(o.opt, &c), CT_EINVAL, "max_lr must be positive, but got 0.0");
    c.max_lr = 0.1;
    c.div_factor = 0;
    expect_refused(ct_sched_onecycle(o.opt, &c), CT_EINVAL, "float division by zero");
    expect_refused(ct_sched_onecycle(o.opt, NULL), CT_EINVAL, "NULL");

    ct_plateau_opts p = ct_plateau_defaults();
    p.factor = 1.0;
    expect_refused(ct_sched_reduce_on_plateau(o.opt, &p), CT_EINVAL, "Factor should be < 1.0.");
    expect_refused(ct_sched_reduce_on_plateau(o.opt, NULL), CT_EINVAL, "NULL");

    /* Nothing was changed by the refusals: no initial_lr, the lrs as set. */
    double v;
    CHECK(ct_optim_get_option(o.opt, 0, "initial_lr", &v) != 0);
    ct_clear_error();
    CHECK(ct_optim_get_lr(o.opt, 0) == 0.1);

    /* OneCycleLR needs momentum or betas, as Python's. */
    Opt a = make_opt("Adagrad", 1);
    c = ct_onecycle_defaults();
    c.max_lr = 0.1;
    c.total_steps = 10;
    expect_refused(ct_sched_onecycle(a.opt, &c), CT_EINVAL,
                   "optimizer must support momentum or beta1 with `cycle_momentum` option enabled");
    c.cycle_momentum = false;
    ct_sched *s = ct_sched_onecycle(a.opt, &c);
    CHECK(s != NULL);
    ct_sched_free(s);
    free_opt(&a);
    free_opt(&o);
}

static void test_defaults(void) {
    ct_onecycle_opts c = ct_onecycle_defaults();
    CHECK(c.pct_start == 0.3 && c.anneal_strategy == CT_ANNEAL_COS && c.cycle_momentum);
    CHECK(c.base_momentum == 0.85 && c.max_momentum == 0.95 && c.div_factor == 25 && c.final_div_factor == 1e4);
    CHECK(!c.three_phase && c.max_lr == 0 && c.total_steps == 0);
    ct_plateau_opts p = ct_plateau_defaults();
    CHECK(!p.maximize && p.factor == 0.1 && p.patience == 10 && p.threshold == 1e-4 && !p.threshold_abs);
    CHECK(p.cooldown == 0 && p.min_lr == 0 && p.eps == 1e-8);
}

/* ---- stepping ------------------------------------------------------------------ */

static void test_step_kinds(void) {
    Opt o = make_opt("SGD", 2);
    ct_clear_error();
    ct_sched *s = ct_sched_step_lr(o.opt, 2, 0.5);
    CHECK(s && ct_last_code() == CT_OK); /* the initial_lr probe leaves no error */
    CHECK(strcmp(ct_sched_type(s), "StepLR") == 0);
    CHECK(ct_sched_last_epoch(s) == 0);
    CHECK(ct_sched_step_metric(s, 1.0) == CT_ENOTSUP);
    CHECK_ERR(CT_ENOTSUP, "StepLR is stepped without a metric");
    CHECK(ct_sched_last_epoch(s) == 0);
    CHECK(isnan(ct_sched_get_last_lr(s, 2)));
    CHECK_ERR(CT_EINDEX, "group 2 out of range (2 groups)");
    CHECK_OK(ct_sched_step(s));
    CHECK_OK(ct_sched_step(s));
    CHECK(ct_sched_get_last_lr(s, 0) == 0.05 && ct_sched_get_last_lr(s, 1) == 0.025);
    double init;
    CHECK_OK(ct_optim_get_option(o.opt, 1, "initial_lr", &init));
    CHECK(init == 0.05);
    ct_sched_free(s);

    ct_plateau_opts po = ct_plateau_defaults();
    po.patience = 0;
    s = ct_sched_reduce_on_plateau(o.opt, &po);
    CHECK(strcmp(ct_sched_type(s), "ReduceLROnPlateau") == 0);
    CHECK(ct_sched_step(s) == CT_ENOTSUP);
    CHECK_ERR(CT_ENOTSUP, "ReduceLROnPlateau is stepped with a metric");
    CHECK(ct_sched_last_epoch(s) == 0);
    CHECK_OK(ct_sched_step_metric(s, 1.0));
    CHECK_OK(ct_sched_step_metric(s, 2.0)); /* worse, patience 0: reduce */
    CHECK_NEAR(ct_optim_get_lr(o.opt, 0), 0.005, 1e-18);
    CHECK(ct_sched_get_last_lr(s, 0) == ct_optim_get_lr(o.opt, 0));
    ct_sched_free(s);

    /* NULLs */
    CHECK(ct_sched_step(NULL) == CT_EINVAL);
    ct_clear_error();
    CHECK(ct_sched_step_metric(NULL, 0) == CT_EINVAL);
    ct_clear_error();
    CHECK(ct_sched_type(NULL) == NULL);
    CHECK(isnan(ct_sched_get_last_lr(NULL, 0)));
    CHECK(ct_sched_state_dict(NULL) == NULL);
    CHECK(ct_sched_load_state_dict(NULL, NULL) == CT_EINVAL);
    ct_clear_error();
    ct_sched_free(NULL);
    free_opt(&o);
}

static void test_onecycle(void) {
    Opt o = make_opt("SGD", 2);
    ct_onecycle_opts c = ct_onecycle_defaults();
    c.max_lr = 0.5;
    c.total_steps = 10;
    ct_sched *s = ct_sched_onecycle(o.opt, &c);
    CHECK(s != NULL);
    double v;
    const char *keys[] = {"initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum"};
    const double want[] = {0.02, 0.5, 2e-06, 0.95, 0.85};
    for (int i = 0; i < 5; i++) {
        CHECK_OK(ct_optim_get_option(o.opt, 1, keys[i], &v));
        CHECK(v == want[i]);
    }
    CHECK_OK(ct_optim_get_option(o.opt, 0, "momentum", &v));
    CHECK(v == 0.95);
    for (int i = 0; i < 9; i++) CHECK_OK(ct_sched_step(s));
    CHECK_NEAR(ct_sched_get_last_lr(s, 0), 2e-06, 1e-18); /* the end of the last phase */
    CHECK_OK(ct_sched_step(s)); /* step total_steps is allowed (and goes past the end), as in Python */
    CHECK(ct_sched_step(s) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "Tried to step 11 times. The specified number of total steps is 10");
    ct_sched_free(s);

    /* A linear anneal extrapolated to step total_steps would go below 0
     * (Python stores that); here it stops at 0. */
    c.anneal_strategy = CT_ANNEAL_LINEAR;
    s = ct_sched_onecycle(o.opt, &c);
    for (int i = 0; i < 9; i++) CHECK_OK(ct_sched_step(s));
    CHECK_NEAR(ct_sched_get_last_lr(s, 1), 2e-06, 1e-15);
    CHECK_OK(ct_sched_step(s));
    CHECK(ct_sched_get_last_lr(s, 1) == 0.0 && ct_optim_get_lr(o.opt, 1) == 0.0);
    ct_sched_free(s);
    free_opt(&o);
}

static void test_groups_added(void) {
    Opt o = make_opt("SGD", 1);
    ct_sched *s = ct_sched_exponential(o.opt, 0.9);
    ct_tensor *extra = ct_keep(ct_zeros(1, (int64_t[]){3}, NULL));
    ct_set_requires_grad(extra, true);
    CHECK(ct_optim_add_param_group(o.opt, 1, &extra) == 1);
    CHECK(ct_sched_step(s) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "the optimizer has 2 param groups, the ExponentialLR was made for 1");
    ct_sched_free(s);

    /* ReduceLROnPlateau follows new groups, as Python's (its scalar min_lr
     * covers them). */
    ct_optim *opt2 = ct_optim_sgd(NULL, NULL);
    CHECK(ct_optim_add_param_group(opt2, 1, &o.p[0]) == 0);
    ct_plateau_opts po = ct_plateau_defaults();
    po.patience = 0;
    s = ct_sched_reduce_on_plateau(opt2, &po);
    CHECK(ct_optim_add_param_group(opt2, 1, &extra) == 1);
    CHECK_OK(ct_sched_step_metric(s, 1));
    CHECK(ct_sched_get_last_lr(s, 1) == 1e-3);
    CHECK_OK(ct_sched_step_metric(s, 2));
    CHECK_NEAR(ct_sched_get_last_lr(s, 1), 1e-4, 1e-19);
    ct_value *sd = ct_sched_state_dict(s);
    CHECK(ct_value_len(ct_value_dict_get(sd, "min_lrs")) == 2);
    ct_value_free(sd);
    ct_sched_free(s);
    ct_optim_free(opt2);
    ct_tensor_free(extra);
    free_opt(&o);
}

/* ---- SequentialLR ----------------------------------------------------------------- */

static void test_sequential(void) {
    Opt o = make_opt("SGD", 2), other = make_opt("SGD", 2);
    expect_refused(ct_sched_sequential(o.opt, 0, NULL, NULL), CT_EINVAL,
                   "SequentialLR expects at least one scheduler, but got no scheduler.");
    /* Refused ones are freed (ASan checks it). */
    ct_plateau_opts po = ct_plateau_defaults();
    ct_sched *a = ct_sched_linear(o.opt, 0.5, 1, 3), *p = ct_sched_reduce_on_plateau(o.opt, &po);
    expect_refused(ct_sched_sequential(o.opt, 2, (ct_sched *[]){a, p}, (int64_t[]){3}), CT_EINVAL,
                   "SequentialLR does not support `ReduceLROnPlateau` scheduler as it requires additional "
                   "kwargs to be specified when calling `step`, but got one at index 1 in the given "
                   "schedulers sequence.");
    a = ct_sched_linear(o.opt, 0.5, 1, 3);
    ct_sched *b = ct_sched_exponential(other.opt, 0.9);
    expect_refused(ct_sched_sequential(o.opt, 2, (ct_sched *[]){a, b}, (int64_t[]){3}), CT_EINVAL,
                   "SequentialLR expects all schedulers to belong to the same optimizer, but got scheduler "
                   "ExponentialLR at index 1");
    a = ct_sched_linear(o.opt, 0.5, 1, 3);
    expect_refused(ct_sched_sequential(o.opt, 2, (ct_sched *[]){a, ct_sched_constant(o.opt, 2.0, 1)},
                                       (int64_t[]){3}),
                   CT_EINVAL, "Constant multiplicative factor"); /* the failed constructor's message */
    a = ct_sched_linear(o.opt, 0.5, 1, 3);
    expect_refused(ct_sched_sequential(o.opt, 2, (ct_sched *[]){a, a}, (int64_t[]){3}), CT_EINVAL,
                   "is also at index 0");
    a = ct_sched_linear(o.opt, 0.5, 1, 3);
    b = ct_sched_exponential(o.opt, 0.9);
    ct_sched *seq = ct_sched_sequential(o.opt, 2, (ct_sched *[]){a, b}, (int64_t[]){3});
    CHECK(seq != NULL);
    CHECK(strcmp(ct_sched_type(seq), "SequentialLR") == 0);
    ct_sched *c = ct_sched_exponential(o.opt, 0.5);
    expect_refused(ct_sched_sequential(o.opt, 2, (ct_sched *[]){c, a}, (int64_t[]){3}), CT_EINVAL,
                   "belongs to another SequentialLR");
    for (int i = 0; i < 6; i++) CHECK_OK(ct_sched_step(seq));
    CHECK(ct_sched_last_epoch(seq) == 6);
    CHECK(ct_sched_last_epoch(a) == 2 && ct_sched_last_epoch(b) == 3);
    CHECK(ct_sched_get_last_lr(seq, 0) == ct_optim_get_lr(o.opt, 0));
    ct_sched_free(seq); /* frees a and b */

    /* Not nested (refused, and both given are freed). */
    c = ct_sched_exponential(o.opt, 0.5);
    seq = ct_sched_sequential(o.opt, 1, (ct_sched *[]){ct_sched_exponential(o.opt, 0.9)}, NULL);
    CHECK(seq != NULL);
    expect_refused(ct_sched_sequential(o.opt, 2, (ct_sched *[]){c, seq}, (int64_t[]){3}), CT_ENOTSUP,
                   "a SequentialLR inside a SequentialLR");
    free_opt(&o);
    free_opt(&other);
}

/* ---- state dicts ------------------------------------------------------------------- */

/* load(sd) is refused with `code` and `msg`, and s's state is as before. */
static void expect_load_refused(ct_sched *s, const ct_value *sd, int code, const char *msg) {
    ct_value *before = ct_sched_state_dict(s);
    CHECK(ct_sched_load_state_dict(s, sd) == code);
    CHECK_ERR(code, msg);
    ct_value *after = ct_sched_state_dict(s);
    CHECK(ct_value_equal(before, after));
    ct_value_free(before);
    ct_value_free(after);
}

static void test_refused_loads(void) {
    Opt o = make_opt("SGD", 2), one = make_opt("SGD", 1);
    ct_sched *step = ct_sched_step_lr(o.opt, 3, 0.5), *expo = ct_sched_exponential(o.opt, 0.9);
    ct_sched *step1 = ct_sched_step_lr(one.opt, 3, 0.5);
    for (int i = 0; i < 4; i++) CHECK_OK(ct_sched_step(step));
    ct_value *sd_step = ct_sched_state_dict(step), *sd_expo = ct_sched_state_dict(expo);
    ct_value *sd_step1 = ct_sched_state_dict(step1);

    expect_load_refused(expo, sd_step, CT_EFORMAT, "ExponentialLR state_dict has an unexpected key 'step_size'");
    expect_load_refused(step, sd_expo, CT_EFORMAT, "StepLR state_dict has no 'step_size'");
    expect_load_refused(step, sd_step1, CT_EINVAL, "StepLR state_dict has 1 base_lrs for 2 param groups");
    /* a base lr that every lr the scheduler sets would scale: refused at the
     * load, not at the first step (set_lr refuses what it makes) */
    ct_value *bad = ct_value_copy(sd_step, false);
    ct_value *lrs = ct_value_list();
    ct_value_list_append(lrs, ct_value_float(0.1));
    ct_value_list_append(lrs, ct_value_float(-2e153));
    ct_value_dict_set(bad, "base_lrs", lrs);
    expect_load_refused(step, bad, CT_EINVAL, "StepLR state_dict has base_lrs[1] = -2e+153: Invalid learning rate");
    ct_value_free(bad);
    /* a gamma that would make every lr negative (the fuzzer's resumed
     * checkpoint): refused at the load, naming it */
    bad = ct_value_copy(sd_step, false);
    ct_value_dict_set(bad, "gamma", ct_value_float(-4.0));
    expect_load_refused(step, bad, CT_EINVAL, "StepLR state_dict has gamma -4, outside [0, inf]");
    ct_value_free(bad);
    bad = ct_value_copy(sd_step, false);
    ct_value_dict_set(bad, "last_epoch", ct_value_float(3.0));
    expect_load_refused(step, bad, CT_EFORMAT, "has 'last_epoch' of type float, not int");
    ct_value_free(bad);
    ct_value *list = ct_value_list();
    expect_load_refused(step, list, CT_EFORMAT, "is a list, not a dict");
    ct_value_free(list);

    /* A state of its own kind loads and round-trips. */
    CHECK_OK(ct_sched_load_state_dict(step1, sd_step1));
    ct_value *again = ct_sched_state_dict(step1);
    CHECK(ct_value_equal(again, sd_step1));
    ct_value_free(again);

    /* ReduceLROnPlateau checks its modes as Python's _init_is_better. */
    ct_plateau_opts po = ct_plateau_defaults();
    ct_sched *pl = ct_sched_reduce_on_plateau(o.opt, &po);
    ct_value *sd_pl = ct_sched_state_dict(pl);
    ct_value_dict_set(sd_pl, "mode", ct_value_str("sideways"));
    expect_load_refused(pl, sd_pl, CT_EFORMAT, "mode sideways, which is unknown!");
    ct_value_free(sd_pl);
    ct_sched_free(pl);

    /* A bad state for the second scheduler of a SequentialLR: the first
     * one, checked before, is not changed either. */
    ct_sched *a = ct_sched_linear(o.opt, 0.5, 1, 3), *b = ct_sched_cosine_annealing(o.opt, 10, 0);
    ct_sched *seq = ct_sched_sequential(o.opt, 2, (ct_sched *[]){a, b}, (int64_t[]){3});
    for (int i = 0; i < 5; i++) CHECK_OK(ct_sched_step(seq));
    ct_value *sd_seq = ct_sched_state_dict(seq);
    ct_value *subs = ct_value_dict_get(sd_seq, "_schedulers");
    ct_value_dict_set(ct_value_list_get(subs, 0), "last_epoch", ct_value_int(1));
    ct_value_dict_set(ct_value_list_get(subs, 1), "T_max", ct_value_str("ten"));
    ct_value *sd_a = ct_sched_state_dict(a);
    expect_load_refused(seq, sd_seq, CT_EFORMAT, "CosineAnnealingLR state_dict has 'T_max' of type str, not int");
    ct_value *sd_a2 = ct_sched_state_dict(a);
    CHECK(ct_value_equal(sd_a, sd_a2));
    ct_value_free(sd_a);
    ct_value_free(sd_a2);
    ct_value_dict_set(sd_seq, "_milestones", ct_value_list());
    expect_load_refused(seq, sd_seq, CT_EINVAL, "'_milestones' that is not a list of 1 milestones");
    ct_value_free(sd_seq);
    ct_sched_free(seq);

    ct_value_free(sd_step);
    ct_value_free(sd_expo);
    ct_value_free(sd_step1);
    ct_sched_free(step);
    ct_sched_free(expo);
    ct_sched_free(step1);
    free_opt(&o);
    free_opt(&one);
}

/* Makes the scheduler under test on opt. */
typedef ct_sched *(*maker)(ct_optim *opt);

static ct_sched *make_cosine(ct_optim *opt) { return ct_sched_cosine_annealing(opt, 7, 0.001); }
static ct_sched *make_warm(ct_optim *opt) { return ct_sched_cosine_warm_restarts(opt, 3, 2, 0); }
static ct_sched *make_multistep(ct_optim *opt) {
    return ct_sched_multistep(opt, 4, (int64_t[]){3, 8, 8, 15}, 0.5);
}
static ct_sched *make_lambda(ct_optim *opt) { return ct_sched_lambda(opt, exp_lambda, NULL); }
static ct_sched *make_onecycle(ct_optim *opt) {
    ct_onecycle_opts c = ct_onecycle_defaults();
    c.max_lr = 0.3;
    c.total_steps = 40;
    c.three_phase = true;
    return ct_sched_onecycle(opt, &c);
}
static ct_sched *make_plateau(ct_optim *opt) {
    ct_plateau_opts p = ct_plateau_defaults();
    p.patience = 1;
    p.cooldown = 1;
    return ct_sched_reduce_on_plateau(opt, &p);
}
static ct_sched *make_sequential(ct_optim *opt) {
    ct_sched *a = ct_sched_linear(opt, 0.2, 1, 4), *b = ct_sched_step_lr(opt, 3, 0.7);
    ct_sched *c = ct_sched_constant(opt, 0.5, 2);
    return ct_sched_sequential(opt, 3, (ct_sched *[]){a, b, c}, (int64_t[]){4, 12});
}

static int step_any(ct_sched *s, int t) {
    if (strcmp(ct_sched_type(s), "ReduceLROnPlateau") == 0) return ct_sched_step_metric(s, 1.0 / (1 + t / 5));
    return ct_sched_step(s);
}

/* A scheduler restored at step 13 goes on exactly as the one that ran. */
static void round_trip(const char *type, maker make) {
    Opt a = make_opt(type, 2), b = make_opt(type, 2);
    ct_sched *sa = make(a.opt), *sb = make(b.opt);
    CHECK(sa && sb);
    ct_value *sd = NULL, *osd = NULL;
    for (int t = 1; t <= 13; t++) CHECK_OK(step_any(sa, t));
    sd = ct_sched_state_dict(sa);
    osd = ct_optim_state_dict(a.opt);
    CHECK_OK(ct_optim_load_state_dict(b.opt, osd));
    CHECK_OK(ct_sched_load_state_dict(sb, sd));
    for (int t = 14; t <= 40; t++) {
        CHECK_OK(step_any(sa, t));
        CHECK_OK(step_any(sb, t));
        for (size_t g = 0; g < 2; g++) {
            CHECK(ct_optim_get_lr(a.opt, g) == ct_optim_get_lr(b.opt, g));
            CHECK(ct_sched_get_last_lr(sa, g) == ct_sched_get_last_lr(sb, g));
        }
    }
    ct_value *ea = ct_sched_state_dict(sa), *eb = ct_sched_state_dict(sb);
    CHECK(ct_value_equal(ea, eb));
    ct_value_free(ea);
    ct_value_free(eb);
    ct_value_free(sd);
    ct_value_free(osd);
    ct_sched_free(sa);
    ct_sched_free(sb);
    free_opt(&a);
    free_opt(&b);
}

static void test_round_trips(void) {
    round_trip("SGD", make_cosine);
    round_trip("SGD", make_warm);
    round_trip("SGD", make_multistep);
    round_trip("SGD", make_lambda);
    round_trip("SGD", make_onecycle);
    round_trip("Adam", make_onecycle);
    round_trip("SGD", make_plateau);
    round_trip("SGD", make_sequential);
}

int main(void) {
    test_bad_arguments();
    test_defaults();
    test_step_kinds();
    test_onecycle();
    test_groups_added();
    test_sequential();
    test_refused_loads();
    test_round_trips();
    return ct_test_result("sched_api");
}
