/* tests/amp/amp_parity.c — the C half of test_amp_parity.py.
 *
 *     amp_parity IN.pth OUT.pth
 *
 * IN (written by the script with torch.save) holds the initial weights of
 * an MLP nn.Sequential(Linear, ReLU, Linear) ("model"), the batches ("x"
 * float32 [STEPS, B, IN], "y" int64 [STEPS, B]), a list of runs ("runs":
 * name, optimizer, lr, scaler options, the steps where an inf or a NaN is
 * written into a gradient, whether to unscale and clip) and a GradScaler
 * state_dict written by Python ("py_scaler_state"). Every run trains the
 * model from the same weights on the CPU, the PyTorch AMP recipe line by
 * line:
 *
 *     with torch.autocast("cpu", torch.bfloat16): loss = cross_entropy(model(x), y)
 *     scaler.scale(loss).backward()
 *     [inject inf/NaN]  [scaler.unscale_(opt); clip_grad_norm_(params, 1.0)]
 *     scaler.step(opt); scaler.update()
 *
 * OUT (ct_pth_save) has, per run: the losses, the scale and growth tracker
 * after each update, whether each step ran, the final model, optimizer and
 * scaler state_dicts; plus the state_dict of a fresh scaler per run, and
 * "py_scaler_state" as loaded and written back by ctrial.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

_Noreturn static void die(const char *what) {
    fprintf(stderr, "amp_parity: %s: %s\n", what, ct_last_error());
    exit(1);
}

static const ct_value *get(const ct_value *d, const char *key) {
    const ct_value *v = ct_value_dict_get(d, key);
    if (!v) {
        fprintf(stderr, "amp_parity: input has no key '%s'\n", key);
        exit(1);
    }
    return v;
}

static double num(const ct_value *d, const char *key) {
    double x;
    if (ct_value_get_float(get(d, key), &x) != 0) die(key);
    return x;
}

static bool flag(const ct_value *d, const char *key) {
    bool b;
    if (ct_value_get_bool(get(d, key), &b) != 0) die(key);
    return b;
}

static bool listed(const ct_value *list, int64_t step) {
    for (size_t i = 0; i < ct_value_len(list); i++) {
        int64_t v;
        if (ct_value_get_int(ct_value_list_get(list, i), &v) == 0 && v == step) return true;
    }
    return false;
}

/* model[idx].grad.view(-1)[elem] = value, as the script writes it. */
static void poison(ct_module *model, const char *name, int64_t elem, float value) {
    ct_scope *s = ct_scope_begin();
    ct_tensor *g = ct_grad(ct_nn_get(model, name));
    float *data = g ? ct_data_ptr(g) : NULL;
    if (!data) die(name);
    data[elem] = value;
    ct_scope_end(s);
}

static ct_module *make_model(const ct_value *weights, int64_t in, int64_t hidden, int64_t out) {
    ct_module *layers[3] = {ct_nn_linear(in, hidden, true), ct_nn_relu(), ct_nn_linear(hidden, out, true)};
    ct_module *m = ct_nn_sequential(3, layers);
    if (!m || ct_nn_load_state_dict(m, weights, true) != 0) die("model");
    return m;
}

static ct_optim *make_optim(const ct_value *run, ct_module *model) {
    const char *kind = ct_value_get_str(get(run, "optim"));
    ct_optim *opt = NULL;
    if (strcmp(kind, "SGD") == 0) {
        ct_sgd_opts o = ct_sgd_defaults();
        o.lr = num(run, "lr");
        o.momentum = num(run, "momentum");
        opt = ct_optim_sgd(model, &o);
    } else if (strcmp(kind, "Adam") == 0 || strcmp(kind, "AdamW") == 0) {
        ct_adam_opts o = strcmp(kind, "Adam") == 0 ? ct_adam_defaults() : ct_adamw_defaults();
        o.lr = num(run, "lr");
        opt = strcmp(kind, "Adam") == 0 ? ct_optim_adam(model, &o) : ct_optim_adamw(model, &o);
    } else {
        fprintf(stderr, "amp_parity: unknown optimizer %s\n", kind);
        exit(1);
    }
    if (!opt) die("optimizer");
    if (flag(run, "fused") && ct_optim_set_option(opt, 0, "fused", 1) != 0) die("fused");
    return opt;
}

static ct_grad_scaler_opts scaler_opts(const ct_value *run) {
    ct_grad_scaler_opts o = ct_grad_scaler_defaults();
    o.init_scale = num(run, "init_scale");
    o.growth_factor = num(run, "growth_factor");
    o.backoff_factor = num(run, "backoff_factor");
    o.growth_interval = (int64_t)num(run, "growth_interval");
    return o;
}

static ct_value *train(const ct_value *in, const ct_value *run) {
    const ct_tensor *x = ct_value_get_tensor(get(in, "x"));
    const ct_tensor *y = ct_value_get_tensor(get(in, "y"));
    const int64_t steps = ct_size(x, 0);
    ct_tensor *w1 = ct_value_get_tensor(get(get(in, "model"), "0.weight"));
    ct_tensor *w2 = ct_value_get_tensor(get(get(in, "model"), "2.weight"));
    ct_module *model = make_model(get(in, "model"), ct_size(w1, 1), ct_size(w1, 0), ct_size(w2, 0));
    ct_optim *opt = make_optim(run, model);
    ct_grad_scaler_opts so = scaler_opts(run);
    ct_grad_scaler *scaler = ct_grad_scaler_new(ct_cpu(), &so);
    if (!scaler) die("scaler");
    const ct_value *inf_steps = get(run, "inf_steps"), *nan_steps = get(run, "nan_steps");
    const bool clip = flag(run, "unscale_clip");
    size_t nparams = 0;
    ct_tensor *const *params = ct_nn_parameters(model, &nparams);

    ct_value *losses = ct_value_list(), *scales = ct_value_list(), *stepped_list = ct_value_list(),
             *trackers = ct_value_list();
    for (int64_t t = 0; t < steps; t++) {
        ct_scope *s = ct_scope_begin();
        if (ct_optim_zero_grad(opt, true) != 0) die("zero_grad");
        if (ct_autocast_enter(CT_CPU, CT_BF16) != 0) die("autocast_enter");
        ct_tensor *loss = ct_cross_entropy(ct_nn_forward(model, ct_select(x, 0, t)), ct_select(y, 0, t));
        if (ct_autocast_exit() != 0) die("autocast_exit");
        if (!loss || ct_backward(ct_grad_scaler_scale(scaler, loss)) != 0) die("forward/backward");
        if (listed(inf_steps, t)) poison(model, "0.weight", 0, INFINITY);
        if (listed(nan_steps, t)) poison(model, "2.bias", 1, NAN);
        if (clip) {
            if (ct_grad_scaler_unscale(scaler, opt) != 0) die("unscale");
            if (ct_clip_grad_norm(nparams, params, 1.0, 2.0, NULL) != 0) die("clip");
        }
        bool stepped = false;
        if (ct_grad_scaler_step(scaler, opt, &stepped) != 0) die("step");
        if (ct_grad_scaler_update(scaler) != 0) die("update");
        ct_value *sd = ct_grad_scaler_state_dict(scaler);
        int64_t tracker = -1;
        if (!sd || ct_value_get_int(ct_value_dict_get(sd, "_growth_tracker"), &tracker) != 0) die("tracker");
        ct_value_free(sd);
        ct_value_list_append(losses, ct_value_tensor(ct_clone(loss)));
        ct_value_list_append(scales, ct_value_float(ct_grad_scaler_get_scale(scaler)));
        ct_value_list_append(stepped_list, ct_value_bool(stepped));
        ct_value_list_append(trackers, ct_value_int(tracker));
        ct_scope_end(s);
    }

    ct_value *out = ct_value_dict();
    ct_value_dict_set(out, "losses", losses);
    ct_value_dict_set(out, "scales", scales);
    ct_value_dict_set(out, "stepped", stepped_list);
    ct_value_dict_set(out, "trackers", trackers);
    /* the tensors keep their storage alive after the model and optimizer go */
    ct_value_dict_set(out, "model", ct_nn_state_dict(model));
    ct_value_dict_set(out, "optim", ct_optim_state_dict(opt));
    ct_value_dict_set(out, "scaler", ct_grad_scaler_state_dict(scaler));
    ct_grad_scaler_free(scaler);
    ct_optim_free(opt);
    ct_nn_free(model);
    return out;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: amp_parity IN.pth OUT.pth\n");
        return 2;
    }
    ct_set_num_threads(1);
    ct_value *in = NULL;
    if (ct_pth_load(argv[1], &in) != 0) die(argv[1]);
    const ct_value *runs = get(in, "runs");
    ct_value *out = ct_value_dict(), *results = ct_value_dict(), *fresh = ct_value_dict();
    for (size_t i = 0; i < ct_value_len(runs); i++) {
        const ct_value *run = ct_value_list_get(runs, i);
        const char *name = ct_value_get_str(get(run, "name"));
        ct_value_dict_set(results, name, train(in, run));
        ct_grad_scaler_opts so = scaler_opts(run);
        ct_grad_scaler *s = ct_grad_scaler_new(ct_cpu(), &so);
        if (!s) die("fresh scaler");
        ct_value_dict_set(fresh, name, ct_grad_scaler_state_dict(s));
        ct_grad_scaler_free(s);
    }
    ct_value_dict_set(out, "runs", results);
    ct_value_dict_set(out, "fresh", fresh);

    /* Python's state_dict into a ctrial scaler, and back out */
    ct_grad_scaler *s = ct_grad_scaler_new(ct_cpu(), NULL);
    if (!s || ct_grad_scaler_load_state_dict(s, get(in, "py_scaler_state")) != 0) die("py_scaler_state");
    ct_value_dict_set(out, "py_scaler_state", ct_grad_scaler_state_dict(s));
    ct_grad_scaler_free(s);

    if (ct_pth_save(argv[2], out, NULL, NULL) != 0) die(argv[2]);
    ct_value_free(out);
    ct_value_free(in);
    return 0;
}
