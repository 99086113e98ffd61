/* tests/amp/test_amp.c — amp.h on the CPU: autocast regions (dtype inside
 * and outside, nesting, per thread, errors) and GradScaler's rules (lazy
 * scale, inf/NaN skipping and backoff, growth every growth_interval finite
 * steps, one optimizer's inf not skipping another's step, stage errors,
 * fp16 gradients refused, fused optimizers, state_dict round trips and
 * refusals, the disabled pass-through). Numbers against PyTorch itself are
 * test_amp_parity.py's. */
#include <pthread.h>
#include <stdlib.h>

#include "ct_test.h"

/* ---- helpers ---------------------------------------------------------------- */

/* A leaf parameter holding `vals` (n floats). Caller-owned. */
static ct_tensor *param(int n, const float *vals) {
    ct_tensor *p = ct_keep(ct_from_data(vals, 1, (const int64_t[]){n}, CT_F32));
    ct_set_requires_grad(p, true);
    return p;
}

/* p.grad = vals. */
static void set_grad(ct_tensor *p, int n, const float *vals) {
    ct_scope *s = ct_scope_begin();
    CHECK_OK(ct_set_grad(p, ct_from_data(vals, 1, (const int64_t[]){n}, CT_F32)));
    ct_scope_end(s);
}

/* Copies t (float32, n elements) to out. */
static void read_f32(const ct_tensor *t, int n, float *out) {
    CHECK_OK(ct_read(t, out, (size_t)n * sizeof(float)));
}

static void read_grad(ct_tensor *p, int n, float *out) {
    ct_scope *s = ct_scope_begin();
    read_f32(ct_grad(p), n, out);
    ct_scope_end(s);
}

static ct_optim *sgd_over(int n, ct_tensor **params, double lr) {
    ct_sgd_opts o = ct_sgd_defaults();
    o.lr = lr;
    ct_optim *opt = ct_optim_sgd(NULL, &o);
    CHECK(opt != NULL);
    CHECK(ct_optim_add_param_group(opt, (size_t)n, params) == 0);
    return opt;
}

/* state_dict()["_growth_tracker"] and ["scale"]. */
static int64_t tracker_of(const ct_grad_scaler *s) {
    ct_value *sd = ct_grad_scaler_state_dict(s);
    int64_t t = -1;
    CHECK_OK(ct_value_get_int(ct_value_dict_get(sd, "_growth_tracker"), &t));
    ct_value_free(sd);
    return t;
}

/* One iteration: the scaled loss is irrelevant here (gradients are set by
 * hand), but scale() must have run once for the scaler to have a scale. */
static void touch_scale(ct_grad_scaler *s) {
    ct_scope *sc = ct_scope_begin();
    CHECK(ct_grad_scaler_scale(s, ct_scalar_tensor(1.0, NULL)) != NULL);
    ct_scope_end(sc);
}

/* ---- autocast --------------------------------------------------------------- */

static ct_dtype linear_out_dtype(ct_module *lin) {
    ct_scope *s = ct_scope_begin();
    ct_tensor *y = ct_nn_forward(lin, ct_ones(CT_SHAPE(2, 4), NULL));
    ct_dtype d = y ? ct_dtype_of(y) : CT_DTYPE_MAX_ENUM_;
    ct_scope_end(s);
    return d;
}

static void *other_thread(void *arg) {
    /* Autocast state is per thread: a region on the main thread is not seen
     * here, and exit has nothing to close on this thread. */
    bool *ok = arg;
    *ok = !ct_autocast_is_enabled(CT_CPU) && ct_autocast_exit() == CT_ESTATE;
    return NULL;
}

static void test_autocast(void) {
    ct_manual_seed(0);
    ct_module *lin = ct_nn_linear(4, 3, true);
    CHECK(lin != NULL);

    CHECK(!ct_autocast_is_enabled(CT_CPU));
    CHECK(ct_autocast_dtype(CT_CPU) == CT_BF16); /* torch.get_autocast_dtype("cpu") */
    CHECK(ct_autocast_dtype(CT_CUDA) == CT_F16);
    CHECK(linear_out_dtype(lin) == CT_F32);

    CHECK_OK(ct_autocast_enter(CT_CPU, CT_BF16));
    CHECK(ct_autocast_is_enabled(CT_CPU));
    CHECK(!ct_autocast_is_enabled(CT_CUDA));
    CHECK(linear_out_dtype(lin) == CT_BF16);

    /* backward through an autocast forward: parameters and their gradients
     * stay float32 (the casts are differentiable). */
    {
        ct_scope *s = ct_scope_begin();
        ct_tensor *loss = ct_sum(ct_nn_forward(lin, ct_ones(CT_SHAPE(2, 4), NULL)));
        CHECK(loss && ct_dtype_of(loss) == CT_BF16);
        CHECK_OK(ct_backward(loss));
        ct_tensor *g = ct_grad(ct_nn_get(lin, "weight"));
        CHECK(g && ct_dtype_of(g) == CT_F32);
        ct_scope_end(s);
        ct_nn_zero_grad(lin, true);
    }

    /* nesting: an inner fp16 region, then back to the outer bf16 one. The
     * inner region multiplies tensors without grad: libtorch caches the casts
     * of parameters until the outermost region ends, keyed by parameter and
     * not by dtype, so lin's weight would come back bf16 here (PyTorch fails
     * the same way: "mat1 and mat2 must have the same dtype"). */
    CHECK_OK(ct_autocast_enter(CT_CPU, CT_F16));
    CHECK(ct_autocast_dtype(CT_CPU) == CT_F16);
    {
        ct_scope *s = ct_scope_begin();
        ct_tensor *y = ct_matmul(ct_ones(CT_SHAPE(2, 4), NULL), ct_ones(CT_SHAPE(4, 3), NULL));
        CHECK(y && ct_dtype_of(y) == CT_F16);
        ct_scope_end(s);
    }
    CHECK_OK(ct_autocast_exit());
    CHECK(ct_autocast_is_enabled(CT_CPU));
    CHECK(ct_autocast_dtype(CT_CPU) == CT_BF16);
    CHECK(linear_out_dtype(lin) == CT_BF16);

    bool thread_ok = false;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other_thread, &thread_ok) == 0);
    pthread_join(th, NULL);
    CHECK(thread_ok);

    CHECK_OK(ct_autocast_exit());
    CHECK(!ct_autocast_is_enabled(CT_CPU));
    CHECK(ct_autocast_dtype(CT_CPU) == CT_BF16);
    CHECK(linear_out_dtype(lin) == CT_F32);

    /* leaving the outermost region cleared that cache: an fp16 region now
     * casts lin's weight afresh */
    CHECK_OK(ct_autocast_enter(CT_CPU, CT_F16));
    CHECK(linear_out_dtype(lin) == CT_F16);
    CHECK_OK(ct_autocast_exit());

    /* errors leave the state as it was */
    CHECK(ct_autocast_exit() == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "no autocast region is open");
    CHECK(ct_autocast_enter(CT_CPU, CT_F32) == CT_EDTYPE);
    CHECK_ERR(CT_EDTYPE, "CPU autocast only supports bfloat16 and float16, got float32");
    CHECK(ct_autocast_enter(CT_CPU, CT_I64) == CT_EDTYPE);
    CHECK_ERR(CT_EDTYPE, "got int64");
    CHECK(ct_autocast_enter((ct_device_type)7, CT_BF16) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "unsupported autocast device type 7");
    CHECK(!ct_autocast_is_enabled(CT_CPU));
    CHECK(!ct_autocast_is_enabled((ct_device_type)7));
    CHECK(ct_autocast_exit() == CT_ESTATE); /* the failed enters opened nothing */
    ct_clear_error();

    if (ct_cuda_is_available()) {
        CHECK_OK(ct_autocast_enter(CT_CUDA, CT_F16));
        CHECK(ct_autocast_is_enabled(CT_CUDA));
        CHECK(!ct_autocast_is_enabled(CT_CPU));
        CHECK_OK(ct_autocast_exit());
        CHECK(!ct_autocast_is_enabled(CT_CUDA));
    } else {
        CHECK(ct_autocast_enter(CT_CUDA, CT_F16) == CT_EDEVICE);
        CHECK_ERR(CT_EDEVICE, "CUDA autocast requested but");
        CHECK(!ct_autocast_is_enabled(CT_CUDA));
    }
    ct_nn_free(lin);
}

/* ---- GradScaler: construction ------------------------------------------- */

static void test_scaler_new(void) {
    ct_grad_scaler_opts d = ct_grad_scaler_defaults();
    CHECK(d.init_scale == 65536.0 && d.growth_factor == 2.0 && d.backoff_factor == 0.5 &&
          d.growth_interval == 2000 && d.enabled);

    ct_grad_scaler *s = ct_grad_scaler_new(ct_cpu(), NULL);
    CHECK(s && ct_grad_scaler_is_enabled(s));
    CHECK(ct_grad_scaler_get_scale(s) == 65536.0);
    ct_grad_scaler_free(s);
    ct_grad_scaler_free(NULL);

    ct_grad_scaler_opts o = ct_grad_scaler_defaults();
    o.growth_factor = 1.0;
    CHECK(ct_grad_scaler_new(ct_cpu(), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "The growth factor must be > 1.0");
    o = ct_grad_scaler_defaults();
    o.backoff_factor = 1.0;
    CHECK(ct_grad_scaler_new(ct_cpu(), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "The backoff factor must be < 1.0");
    o.backoff_factor = NAN;
    CHECK(ct_grad_scaler_new(ct_cpu(), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "The backoff factor must be < 1.0");
    /* disabled: nothing is checked, as in PyTorch */
    o.enabled = false;
    o.growth_factor = 0.5;
    s = ct_grad_scaler_new(ct_cpu(), &o);
    CHECK(s && !ct_grad_scaler_is_enabled(s));
    ct_grad_scaler_free(s);

    CHECK(ct_grad_scaler_new((ct_device){(ct_device_type)5, 0}, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "unsupported device type 5");
    if (!ct_cuda_is_available()) {
        CHECK(ct_grad_scaler_new(ct_cuda(0), NULL) == NULL);
        CHECK_ERR(CT_EDEVICE, "cuda:0");
        o = ct_grad_scaler_defaults();
        o.enabled = false;
        s = ct_grad_scaler_new(ct_cuda(0), &o); /* a disabled scaler needs no GPU */
        CHECK(s != NULL);
        ct_grad_scaler_free(s);
    }

    /* NULL arguments */
    CHECK(ct_grad_scaler_unscale(NULL, NULL) == CT_EINVAL);
    CHECK(ct_grad_scaler_step(NULL, NULL, NULL) == CT_EINVAL);
    CHECK(ct_grad_scaler_update(NULL) == CT_EINVAL);
    CHECK(isnan(ct_grad_scaler_get_scale(NULL)));
    CHECK(ct_grad_scaler_state_dict(NULL) == NULL);
    ct_clear_error();
}

/* ---- GradScaler: the rules ------------------------------------------------ */

static void test_scaler_rules(void) {
    ct_grad_scaler_opts o = ct_grad_scaler_defaults();
    o.init_scale = 8.0;
    o.growth_interval = 3;
    ct_grad_scaler *s = ct_grad_scaler_new(ct_cpu(), &o);
    ct_tensor *p = param(3, (const float[]){1, 1, 1});
    ct_optim *opt = sgd_over(1, &p, 0.5);
    float v[3];
    bool stepped = true;

    /* before any scale(): PyTorch's "_scale is None" assertions */
    CHECK(ct_grad_scaler_unscale(s, opt) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "ct_grad_scaler_scale(loss)");
    CHECK(ct_grad_scaler_step(s, opt, &stepped) == CT_ESTATE && !stepped);
    ct_clear_error();
    CHECK(ct_grad_scaler_update(s) == CT_ESTATE);
    ct_clear_error();
    CHECK(tracker_of(s) == 0);

    /* scale(): loss * 8 */
    {
        ct_scope *sc = ct_scope_begin();
        ct_tensor *loss = ct_scalar_tensor(1.5, NULL);
        ct_tensor *scaled = ct_grad_scaler_scale(s, loss);
        double x = 0;
        CHECK(scaled && ct_item(scaled, &x) == 0 && x == 12.0);
        CHECK(ct_dtype_of(scaled) == CT_F32);
        CHECK(ct_scope_size(sc) == 2); /* scope-owned, like an op result */
        CHECK(ct_grad_scaler_scale(s, NULL) == NULL); /* NULL propagates */
        ct_scope_end(sc);
        ct_clear_error();
    }

    /* a finite step: gradients unscaled (8, 16, 24) / 8, SGD steps */
    set_grad(p, 3, (const float[]){8, 16, 24});
    CHECK_OK(ct_grad_scaler_step(s, opt, &stepped));
    CHECK(stepped);
    read_grad(p, 3, v);
    CHECK(v[0] == 1 && v[1] == 2 && v[2] == 3);
    read_f32(p, 3, v);
    CHECK(v[0] == 0.5f && v[1] == 0.0f && v[2] == -0.5f);
    CHECK(ct_grad_scaler_step(s, opt, NULL) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "step() has already been called since the last update()");
    CHECK(ct_grad_scaler_unscale(s, opt) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "unscale_() is being called after step()");
    CHECK_OK(ct_grad_scaler_update(s));
    CHECK(ct_grad_scaler_get_scale(s) == 8.0);
    CHECK(tracker_of(s) == 1);
    /* update() with no optimizer seen since the last one */
    CHECK(ct_grad_scaler_update(s) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "No inf checks were recorded prior to update.");

    /* inf: the step is skipped, the scale backs off, the tracker resets */
    set_grad(p, 3, (const float[]){8, INFINITY, 8});
    CHECK_OK(ct_grad_scaler_step(s, opt, &stepped));
    CHECK(!stepped);
    read_f32(p, 3, v);
    CHECK(v[0] == 0.5f && v[1] == 0.0f && v[2] == -0.5f);
    CHECK_OK(ct_grad_scaler_update(s));
    CHECK(ct_grad_scaler_get_scale(s) == 4.0);
    CHECK(tracker_of(s) == 0);

    /* NaN likewise, found by an explicit unscale; unscale twice is refused */
    set_grad(p, 3, (const float[]){NAN, 4, 4});
    CHECK_OK(ct_grad_scaler_unscale(s, opt));
    CHECK(ct_grad_scaler_unscale(s, opt) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "unscale_() has already been called on this optimizer since the last update()");
    CHECK_OK(ct_grad_scaler_step(s, opt, &stepped));
    CHECK(!stepped);
    CHECK_OK(ct_grad_scaler_update(s));
    CHECK(ct_grad_scaler_get_scale(s) == 2.0);
    CHECK(tracker_of(s) == 0);

    /* growth_interval (3) finite iterations in a row: x2, tracker back to 0.
     * Explicit unscale + step unscales exactly once. */
    for (int it = 0; it < 3; it++) {
        set_grad(p, 3, (const float[]){2, 4, 6});
        if (it == 1) CHECK_OK(ct_grad_scaler_unscale(s, opt));
        CHECK_OK(ct_grad_scaler_step(s, opt, &stepped));
        CHECK(stepped);
        read_grad(p, 3, v);
        CHECK(v[0] == 1 && v[1] == 2 && v[2] == 3);
        CHECK_OK(ct_grad_scaler_update(s));
        CHECK(ct_grad_scaler_get_scale(s) == (it < 2 ? 2.0 : 4.0));
        CHECK(tracker_of(s) == (it < 2 ? it + 1 : 0));
    }
    read_f32(p, 3, v); /* 0.5 - 3 * 0.5 * 1, 0 - 3 * 0.5 * 2, -0.5 - 3 * 0.5 * 3 */
    CHECK(v[0] == -1.0f && v[1] == -3.0f && v[2] == -5.0f);

    /* an optimizer without any gradient records no inf check */
    ct_tensor *q = param(2, (const float[]){0, 0});
    ct_optim *opt_q = sgd_over(1, &q, 0.1);
    CHECK(ct_grad_scaler_step(s, opt_q, NULL) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "No inf checks were recorded for this optimizer.");

    /* float16 gradients are refused by unscale (PyTorch's ValueError), and
     * nothing was recorded: a later step with fp32 gradients works */
    {
        ct_scope *sc = ct_scope_begin();
        ct_tensor *q16 = ct_keep(ct_to_dtype(ct_detach(q), CT_F16));
        ct_set_requires_grad(q16, true);
        ct_optim *opt16 = sgd_over(1, &q16, 0.1);
        CHECK_OK(ct_set_grad(q16, ct_ones(CT_SHAPE(2), &(ct_topts){.dtype = CT_F16})));
        CHECK(ct_grad_scaler_unscale(s, opt16) == CT_EDTYPE);
        CHECK_ERR(CT_EDTYPE, "Attempting to unscale FP16 gradients");
        CHECK(ct_grad_scaler_step(s, opt16, NULL) == CT_EDTYPE);
        CHECK_ERR(CT_EDTYPE, "Attempting to unscale FP16 gradients");
        ct_optim_free(opt16);
        ct_tensor_free(q16);
        ct_scope_end(sc);
    }
    CHECK(ct_grad_scaler_update(s) == CT_ESTATE); /* still nothing recorded */
    ct_clear_error();

    ct_optim_free(opt_q);
    ct_tensor_free(q);
    ct_optim_free(opt);
    ct_tensor_free(p);
    ct_grad_scaler_free(s);
}

/* Two optimizers, an inf in the second's gradients only: PyTorch skips only
 * that optimizer's step (each step looks at its own found_inf), and update()
 * backs off because one of them found an inf. */
static void test_two_optimizers(void) {
    ct_grad_scaler_opts o = ct_grad_scaler_defaults();
    o.init_scale = 16.0;
    ct_grad_scaler *s = ct_grad_scaler_new(ct_cpu(), &o);
    ct_tensor *a = param(2, (const float[]){1, 1});
    ct_tensor *b = param(2, (const float[]){1, 1});
    ct_optim *oa = sgd_over(1, &a, 1.0), *ob = sgd_over(1, &b, 1.0);
    touch_scale(s);
    float v[2];
    bool sa = false, sb = true;

    set_grad(a, 2, (const float[]){16, 32});
    set_grad(b, 2, (const float[]){16, -INFINITY});
    CHECK_OK(ct_grad_scaler_step(s, oa, &sa));
    CHECK_OK(ct_grad_scaler_step(s, ob, &sb));
    CHECK(sa && !sb);
    read_f32(a, 2, v);
    CHECK(v[0] == 0.0f && v[1] == -1.0f);
    read_f32(b, 2, v);
    CHECK(v[0] == 1.0f && v[1] == 1.0f);
    CHECK_OK(ct_grad_scaler_update(s));
    CHECK(ct_grad_scaler_get_scale(s) == 8.0);
    CHECK(tracker_of(s) == 0);

    /* both finite: both step, the tracker counts one iteration */
    set_grad(a, 2, (const float[]){8, 8});
    set_grad(b, 2, (const float[]){8, 8});
    CHECK_OK(ct_grad_scaler_step(s, oa, &sa));
    CHECK_OK(ct_grad_scaler_step(s, ob, &sb));
    CHECK(sa && sb);
    CHECK_OK(ct_grad_scaler_update(s));
    CHECK(ct_grad_scaler_get_scale(s) == 8.0);
    CHECK(tracker_of(s) == 1);

    /* an inf seen by unscale alone (that optimizer never steps) still backs
     * off: update() reads every optimizer recorded since the last update */
    set_grad(a, 2, (const float[]){8, 8});
    set_grad(b, 2, (const float[]){NAN, 8});
    CHECK_OK(ct_grad_scaler_step(s, oa, &sa));
    CHECK_OK(ct_grad_scaler_unscale(s, ob));
    CHECK(sa);
    CHECK_OK(ct_grad_scaler_update(s));
    CHECK(ct_grad_scaler_get_scale(s) == 4.0);

    ct_optim_free(oa);
    ct_optim_free(ob);
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_grad_scaler_free(s);
}

/* Fused Adam (all groups fused=1): PyTorch hands the scale and the inf flag
 * to the kernel instead of unscaling. A skipped step leaves the parameters
 * and the step count alone; a finite one equals plain Adam on the unscaled
 * gradients (the scale is a power of two: dividing is exact). */
static void test_fused(void) {
    ct_grad_scaler_opts o = ct_grad_scaler_defaults();
    o.init_scale = 1024.0;
    ct_grad_scaler *s = ct_grad_scaler_new(ct_cpu(), &o);
    const float init[3] = {0.5f, -1.0f, 2.0f};
    ct_tensor *p = param(3, init), *r = param(3, init);
    ct_adam_opts ao = ct_adam_defaults();
    ao.lr = 0.1;
    ct_optim *fused = ct_optim_adam(NULL, &ao), *ref = ct_optim_adam(NULL, &ao);
    CHECK(ct_optim_add_param_group(fused, 1, &p) == 0 && ct_optim_add_param_group(ref, 1, &r) == 0);
    CHECK_OK(ct_optim_set_option(fused, 0, "fused", 1));
    touch_scale(s);
    bool stepped = true;
    float v[3], w[3];

    /* first iteration: inf -> skipped; the state exists, its step is 0 */
    set_grad(p, 3, (const float[]){1024, INFINITY, 0});
    CHECK_OK(ct_grad_scaler_step(s, fused, &stepped));
    CHECK(!stepped);
    read_f32(p, 3, v);
    CHECK(v[0] == init[0] && v[1] == init[1] && v[2] == init[2]);
    {
        ct_value *sd = ct_optim_state_dict(fused);
        ct_value *entry = ct_value_dict_get_int(ct_value_dict_get(sd, "state"), 0);
        double step = -1;
        CHECK(entry != NULL);
        if (entry) CHECK_OK(ct_item(ct_value_get_tensor(ct_value_dict_get(entry, "step")), &step));
        CHECK(step == 0.0);
        ct_value_free(sd);
        ct_clear_error();
    }
    CHECK_OK(ct_grad_scaler_update(s));
    CHECK(ct_grad_scaler_get_scale(s) == 512.0);

    /* finite: the kernel unscales; same as Adam on the true gradients */
    const float g[3] = {0.25f, -2.0f, 1.0f};
    set_grad(p, 3, (const float[]){g[0] * 512, g[1] * 512, g[2] * 512});
    set_grad(r, 3, g);
    CHECK_OK(ct_grad_scaler_step(s, fused, &stepped));
    CHECK(stepped);
    CHECK_OK(ct_optim_step(ref));
    read_f32(p, 3, v);
    read_f32(r, 3, w);
    for (int i = 0; i < 3; i++) CHECK_NEAR(v[i], w[i], 1e-6);
    CHECK(v[0] != init[0]);
    CHECK_OK(ct_grad_scaler_update(s));

    /* explicit unscale first: the kernel gets no scale, only the inf flag */
    set_grad(p, 3, (const float[]){g[0] * 512, g[1] * 512, g[2] * 512});
    set_grad(r, 3, g);
    CHECK_OK(ct_grad_scaler_unscale(s, fused));
    read_grad(p, 3, v);
    CHECK(v[0] == g[0] && v[1] == g[1] && v[2] == g[2]);
    CHECK_OK(ct_grad_scaler_step(s, fused, &stepped));
    CHECK(stepped);
    CHECK_OK(ct_optim_step(ref));
    read_f32(p, 3, v);
    read_f32(r, 3, w);
    for (int i = 0; i < 3; i++) CHECK_NEAR(v[i], w[i], 1e-6);
    CHECK_OK(ct_grad_scaler_update(s));
    CHECK(ct_grad_scaler_get_scale(s) == 512.0);
    CHECK(tracker_of(s) == 2);

    ct_optim_free(fused);
    ct_optim_free(ref);
    ct_tensor_free(p);
    ct_tensor_free(r);
    ct_grad_scaler_free(s);
}

/* ---- state dicts ---------------------------------------------------------- */

static ct_value *scaler_dict(double scale, double gf, double bf, int64_t gi, int64_t tracker) {
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "scale", ct_value_float(scale));
    ct_value_dict_set(d, "growth_factor", ct_value_float(gf));
    ct_value_dict_set(d, "backoff_factor", ct_value_float(bf));
    ct_value_dict_set(d, "growth_interval", ct_value_int(gi));
    ct_value_dict_set(d, "_growth_tracker", ct_value_int(tracker));
    return d;
}

static void test_state_dict(void) {
    ct_grad_scaler_opts o = ct_grad_scaler_defaults();
    o.init_scale = 32.0;
    o.growth_factor = 4.0;
    o.backoff_factor = 0.25;
    o.growth_interval = 5;
    ct_grad_scaler *s = ct_grad_scaler_new(ct_cpu(), &o);

    /* before first use: the init values, with Python's key order and types */
    ct_value *sd = ct_grad_scaler_state_dict(s);
    ct_value *want = scaler_dict(32.0, 4.0, 0.25, 5, 0);
    CHECK(ct_value_equal(sd, want));
    const char *k0 = NULL;
    ct_value_dict_at(sd, 0, &k0, NULL);
    CHECK(k0 && strcmp(k0, "scale") == 0);
    CHECK(ct_value_kind_of(ct_value_dict_get(sd, "scale")) == CT_VALUE_FLOAT);
    CHECK(ct_value_kind_of(ct_value_dict_get(sd, "growth_interval")) == CT_VALUE_INT);
    ct_value_free(sd);
    ct_value_free(want);

    /* after a few iterations */
    ct_tensor *p = param(2, (const float[]){0, 0});
    ct_optim *opt = sgd_over(1, &p, 0.1);
    touch_scale(s);
    for (int it = 0; it < 3; it++) {
        set_grad(p, 2, (const float[]){1, it == 0 ? INFINITY : 1});
        CHECK_OK(ct_grad_scaler_step(s, opt, NULL));
        CHECK_OK(ct_grad_scaler_update(s));
    }
    sd = ct_grad_scaler_state_dict(s);
    want = scaler_dict(8.0, 4.0, 0.25, 5, 2);
    CHECK(ct_value_equal(sd, want));
    ct_value_free(want);

    /* round trip into a fresh scaler with other options, before its first
     * use (Python: _init_scale/_init_growth_tracker) */
    ct_grad_scaler *t = ct_grad_scaler_new(ct_cpu(), NULL);
    CHECK_OK(ct_grad_scaler_load_state_dict(t, sd));
    ct_value *sd2 = ct_grad_scaler_state_dict(t);
    CHECK(ct_value_equal(sd, sd2));
    ct_value_free(sd2);
    CHECK(ct_grad_scaler_get_scale(t) == 8.0);
    /* and the lazily made tensors start from the loaded values: two more
     * finite iterations reach growth_interval 5 -> x4 */
    touch_scale(t);
    for (int it = 0; it < 3; it++) {
        set_grad(p, 2, (const float[]){1, 1});
        CHECK_OK(ct_grad_scaler_step(t, opt, NULL));
        CHECK_OK(ct_grad_scaler_update(t));
    }
    CHECK(ct_grad_scaler_get_scale(t) == 32.0);
    CHECK(tracker_of(t) == 0);
    /* loading into a scaler in use fills its tensors */
    CHECK_OK(ct_grad_scaler_load_state_dict(t, sd));
    CHECK(ct_grad_scaler_get_scale(t) == 8.0);
    CHECK(tracker_of(t) == 2);

    /* refusals name the key and change nothing */
    ct_value *bad = scaler_dict(1.0, 2.0, 0.5, 7, 1);
    ct_value *missing = ct_value_dict();
    for (size_t i = 0; i < ct_value_len(bad); i++) {
        const char *key = NULL;
        ct_value *v = ct_value_dict_at(bad, i, &key, NULL);
        if (strcmp(key, "growth_interval") != 0) ct_value_dict_set(missing, key, ct_value_copy(v, false));
    }
    CHECK(ct_grad_scaler_load_state_dict(t, missing) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "state dict has no key 'growth_interval'");
    ct_value_dict_set(bad, "_growth_tracker", ct_value_float(1.0));
    CHECK(ct_grad_scaler_load_state_dict(t, bad) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "'_growth_tracker' must be an int, got float");
    ct_value_dict_set(bad, "_growth_tracker", ct_value_int(1));
    ct_value_dict_set(bad, "scale", ct_value_str("big"));
    CHECK(ct_grad_scaler_load_state_dict(t, bad) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "'scale' must be a float, got str");
    ct_value *empty = ct_value_dict();
    CHECK(ct_grad_scaler_load_state_dict(t, empty) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "The source state dict is empty");
    ct_value *lst = ct_value_list();
    CHECK(ct_grad_scaler_load_state_dict(t, lst) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "must be a dict, got list");
    sd2 = ct_grad_scaler_state_dict(t);
    CHECK(ct_value_equal(sd, sd2)); /* unchanged by the refusals */
    ct_value_free(sd2);
    /* an int scale is accepted (Python's float()) */
    ct_value_dict_set(bad, "scale", ct_value_int(64));
    CHECK_OK(ct_grad_scaler_load_state_dict(t, bad));
    CHECK(ct_grad_scaler_get_scale(t) == 64.0);
    CHECK(tracker_of(t) == 1);

    ct_value_free(lst);
    ct_value_free(empty);
    ct_value_free(missing);
    ct_value_free(bad);
    ct_value_free(sd);
    ct_optim_free(opt);
    ct_tensor_free(p);
    ct_grad_scaler_free(t);
    ct_grad_scaler_free(s);
}

/* ---- disabled: a pass-through --------------------------------------------- */

static void test_disabled(void) {
    ct_grad_scaler_opts o = ct_grad_scaler_defaults();
    o.enabled = false;
    ct_grad_scaler *s = ct_grad_scaler_new(ct_cpu(), &o);
    ct_tensor *p = param(2, (const float[]){1, 1});
    ct_optim *opt = sgd_over(1, &p, 1.0);
    float v[2];
    bool stepped = false;

    ct_scope *sc = ct_scope_begin();
    ct_tensor *loss = ct_scalar_tensor(3.0, NULL);
    ct_tensor *out = ct_grad_scaler_scale(s, loss);
    double x = 0;
    CHECK(out && out != loss && ct_item(out, &x) == 0 && x == 3.0);
    ct_storage_info a, b;
    CHECK(ct_storage_info_of(out, &a) == 0 && ct_storage_info_of(loss, &b) == 0 && a.id == b.id);
    ct_scope_end(sc);

    set_grad(p, 2, (const float[]){2, INFINITY});
    CHECK_OK(ct_grad_scaler_unscale(s, opt));
    CHECK_OK(ct_grad_scaler_unscale(s, opt)); /* no stage checks either */
    read_grad(p, 2, v);
    CHECK(v[0] == 2); /* untouched */
    CHECK_OK(ct_grad_scaler_step(s, opt, &stepped));
    CHECK(stepped);
    read_f32(p, 2, v);
    CHECK(v[0] == -1.0f && isinf(v[1])); /* stepped with the inf */
    CHECK_OK(ct_grad_scaler_update(s));
    CHECK(ct_grad_scaler_get_scale(s) == 1.0);

    ct_value *sd = ct_grad_scaler_state_dict(s);
    CHECK(ct_value_kind_of(sd) == CT_VALUE_DICT && ct_value_len(sd) == 0);
    ct_value *full = scaler_dict(2.0, 2.0, 0.5, 10, 3);
    CHECK_OK(ct_grad_scaler_load_state_dict(s, full)); /* no-op */
    CHECK_OK(ct_grad_scaler_load_state_dict(s, sd));   /* even an empty one */
    CHECK(ct_grad_scaler_get_scale(s) == 1.0);
    ct_value_free(full);
    ct_value_free(sd);

    ct_optim_free(opt);
    ct_tensor_free(p);
    ct_grad_scaler_free(s);
}

/* Gradients split across processes (ct_set_grad_reduce): the flag goes
 * through the reduce function, whose answer decides. A "process" that saw
 * an inf skips the step here although this one's gradients are finite, and
 * the scale backs off; a reduce that fails fails the step, saying so. */
static int calls;
static int other_saw_inf(ct_tensor *t, bool max, void *ctx) {
    calls++;
    CHECK(max && ct_device_of(t).type == CT_CPU && ct_numel(t) == 1);
    return ct_fill_(t, 1.0);
}
static int reduce_fails(ct_tensor *t, bool max, void *ctx) {
    return ct_set_error(CT_EDIST, "rank 1 failed");
}

static void test_split(void) {
    ct_grad_scaler_opts o = ct_grad_scaler_defaults();
    o.init_scale = 16.0;
    ct_grad_scaler *s = ct_grad_scaler_new(ct_cpu(), &o);
    ct_tensor *a = param(2, (const float[]){1, 1});
    ct_optim *oa = sgd_over(1, &a, 1.0);
    touch_scale(s);
    float v[2];
    bool sa = true;
    set_grad(a, 2, (const float[]){16, 32});
    ct_set_grad_reduce(other_saw_inf, NULL);
    CHECK_OK(ct_grad_scaler_step(s, oa, &sa));
    CHECK(!sa && calls == 1);
    read_f32(a, 2, v);
    CHECK(v[0] == 1.0f && v[1] == 1.0f);
    CHECK_OK(ct_grad_scaler_update(s));
    CHECK(ct_grad_scaler_get_scale(s) == 8.0);
    /* no gradient at all: the flag still goes through (every process calls) */
    ct_zero_grad(a, true);
    CHECK_OK(ct_grad_scaler_unscale(s, oa));
    CHECK(calls == 2);
    CHECK_OK(ct_grad_scaler_update(s));
    set_grad(a, 2, (const float[]){16, 32});
    ct_set_grad_reduce(reduce_fails, NULL);
    CHECK(ct_grad_scaler_step(s, oa, &sa) == CT_EDIST);
    CHECK_ERR(CT_EDIST, "combining with the other processes: rank 1 failed");
    ct_set_grad_reduce(NULL, NULL);
    ct_optim_free(oa);
    ct_tensor_free(a);
    ct_grad_scaler_free(s);
}

int main(void) {
    ct_set_num_threads(1);
    size_t live = ct_tensor_live_count();
    test_autocast();
    test_scaler_new();
    test_scaler_rules();
    test_two_optimizers();
    test_split();
    test_fused();
    test_state_dict();
    test_disabled();
    CHECK(ct_tensor_live_count() == live); /* nothing leaked a handle */
    return ct_test_result("test_amp");
}
