/* tests/optim/optim_parity.c — the C half of the optimizer parity test.
 *
 *     optim_parity CONFIG.json OUT.json
 *
 * test_optim_parity.py writes CONFIG (the runs: optimizer type, options,
 * groups, which gradients to skip, an optional state to resume from), this
 * program trains each run and writes its parameters and state_dict to OUT,
 * and the script runs the same in torch and compares. Parameters and
 * gradients come from the same libtorch generator on both sides:
 *
 *     torch.manual_seed(seed); p_k = torch.randn(shape_k)
 *     step t: torch.manual_seed(seed * 1000 + t); p_k.grad = torch.randn(shape_k) + 0.1 * p_k
 *
 * Runs with "model" train a small MLP instead (parameters W1 [4, 3], b1 [4],
 * W2 [2, 4], b2 [2]) through ct_optim_step_closure, Python's step(closure):
 *
 *     step t: torch.manual_seed(seed * 1000 + t); x = torch.randn(16, 3); y = torch.randn(16, 2)
 *     closure: zero_grad(); loss = mse_loss(linear(tanh(linear(x, W1, b1)), W2, b2), y); loss.backward()
 *
 * and write the loss each step returned ("losses").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

#include "json_value.h"

#define MAX_PARAMS 8

_Noreturn static void die(const char *what) {
    fprintf(stderr, "optim_parity: %s: %s\n", what, ct_last_error());
    exit(1);
}

static const char *str(const json_t *opts, const char *key, const char *def) {
    const json_t *j = json_object_get(opts, key);
    return j ? json_string_value(j) : def;
}

static double num(const json_t *opts, const char *key, double def) {
    const json_t *j = json_object_get(opts, key);
    return j ? (json_is_boolean(j) ? (double)json_is_true(j) : json_number_value(j)) : def;
}

/* Every key of opts must be one the optimizer type knows (catches typos in
 * the script's table). */
static void check_keys(const json_t *opts, const char *const *known) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)opts, key, v) {
        bool ok = false;
        for (const char *const *k = known; *k; k++) ok = ok || strcmp(*k, key) == 0;
        if (!ok) {
            fprintf(stderr, "optim_parity: unknown option %s\n", key);
            exit(1);
        }
    }
}

static ct_optim *make_optim(const char *type, const json_t *opts) {
    const json_t *betas = json_object_get(opts, "betas");
    if (strcmp(type, "SGD") == 0) {
        check_keys(opts, (const char *const[]){"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", NULL});
        ct_sgd_opts o = ct_sgd_defaults();
        o.lr = num(opts, "lr", o.lr);
        o.momentum = num(opts, "momentum", o.momentum);
        o.dampening = num(opts, "dampening", o.dampening);
        o.weight_decay = num(opts, "weight_decay", o.weight_decay);
        o.nesterov = num(opts, "nesterov", o.nesterov) != 0;
        o.maximize = num(opts, "maximize", o.maximize) != 0;
        return ct_optim_sgd(NULL, &o);
    }
    if (strcmp(type, "Adam") == 0 || strcmp(type, "AdamW") == 0) {
        check_keys(opts, (const char *const[]){"lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", NULL});
        bool w = strcmp(type, "AdamW") == 0;
        ct_adam_opts o = w ? ct_adamw_defaults() : ct_adam_defaults();
        o.lr = num(opts, "lr", o.lr);
        if (betas) {
            o.beta1 = json_number_value(json_array_get(betas, 0));
            o.beta2 = json_number_value(json_array_get(betas, 1));
        }
        o.eps = num(opts, "eps", o.eps);
        o.weight_decay = num(opts, "weight_decay", o.weight_decay);
        o.amsgrad = num(opts, "amsgrad", o.amsgrad) != 0;
        o.maximize = num(opts, "maximize", o.maximize) != 0;
        return w ? ct_optim_adamw(NULL, &o) : ct_optim_adam(NULL, &o);
    }
    if (strcmp(type, "RMSprop") == 0) {
        check_keys(opts, (const char *const[]){"lr", "alpha", "eps", "weight_decay", "momentum", "centered", "maximize", NULL});
        ct_rmsprop_opts o = ct_rmsprop_defaults();
        o.lr = num(opts, "lr", o.lr);
        o.alpha = num(opts, "alpha", o.alpha);
        o.eps = num(opts, "eps", o.eps);
        o.weight_decay = num(opts, "weight_decay", o.weight_decay);
        o.momentum = num(opts, "momentum", o.momentum);
        o.centered = num(opts, "centered", o.centered) != 0;
        o.maximize = num(opts, "maximize", o.maximize) != 0;
        return ct_optim_rmsprop(NULL, &o);
    }
    if (strcmp(type, "Adagrad") == 0) {
        check_keys(opts, (const char *const[]){"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps", "maximize", NULL});
        ct_adagrad_opts o = ct_adagrad_defaults();
        o.lr = num(opts, "lr", o.lr);
        o.lr_decay = num(opts, "lr_decay", o.lr_decay);
        o.weight_decay = num(opts, "weight_decay", o.weight_decay);
        o.initial_accumulator_value = num(opts, "initial_accumulator_value", o.initial_accumulator_value);
        o.eps = num(opts, "eps", o.eps);
        o.maximize = num(opts, "maximize", o.maximize) != 0;
        return ct_optim_adagrad(NULL, &o);
    }
    if (strcmp(type, "Adadelta") == 0) {
        check_keys(opts, (const char *const[]){"lr", "rho", "eps", "weight_decay", "maximize", NULL});
        ct_adadelta_opts o = ct_adadelta_defaults();
        o.lr = num(opts, "lr", o.lr);
        o.rho = num(opts, "rho", o.rho);
        o.eps = num(opts, "eps", o.eps);
        o.weight_decay = num(opts, "weight_decay", o.weight_decay);
        o.maximize = num(opts, "maximize", o.maximize) != 0;
        return ct_optim_adadelta(NULL, &o);
    }
    if (strcmp(type, "Adamax") == 0) {
        check_keys(opts, (const char *const[]){"lr", "betas", "eps", "weight_decay", "maximize", NULL});
        ct_adamax_opts o = ct_adamax_defaults();
        o.lr = num(opts, "lr", o.lr);
        if (betas) {
            o.beta1 = json_number_value(json_array_get(betas, 0));
            o.beta2 = json_number_value(json_array_get(betas, 1));
        }
        o.eps = num(opts, "eps", o.eps);
        o.weight_decay = num(opts, "weight_decay", o.weight_decay);
        o.maximize = num(opts, "maximize", o.maximize) != 0;
        return ct_optim_adamax(NULL, &o);
    }
    if (strcmp(type, "NAdam") == 0) {
        check_keys(opts, (const char *const[]){"lr", "betas", "eps", "weight_decay", "momentum_decay",
                                               "decoupled_weight_decay", "maximize", NULL});
        ct_nadam_opts o = ct_nadam_defaults();
        o.lr = num(opts, "lr", o.lr);
        if (betas) {
            o.beta1 = json_number_value(json_array_get(betas, 0));
            o.beta2 = json_number_value(json_array_get(betas, 1));
        }
        o.eps = num(opts, "eps", o.eps);
        o.weight_decay = num(opts, "weight_decay", o.weight_decay);
        o.momentum_decay = num(opts, "momentum_decay", o.momentum_decay);
        o.decoupled_weight_decay = num(opts, "decoupled_weight_decay", o.decoupled_weight_decay) != 0;
        o.maximize = num(opts, "maximize", o.maximize) != 0;
        return ct_optim_nadam(NULL, &o);
    }
    if (strcmp(type, "RAdam") == 0) {
        check_keys(opts, (const char *const[]){"lr", "betas", "eps", "weight_decay", "decoupled_weight_decay",
                                               "maximize", NULL});
        ct_radam_opts o = ct_radam_defaults();
        o.lr = num(opts, "lr", o.lr);
        if (betas) {
            o.beta1 = json_number_value(json_array_get(betas, 0));
            o.beta2 = json_number_value(json_array_get(betas, 1));
        }
        o.eps = num(opts, "eps", o.eps);
        o.weight_decay = num(opts, "weight_decay", o.weight_decay);
        o.decoupled_weight_decay = num(opts, "decoupled_weight_decay", o.decoupled_weight_decay) != 0;
        o.maximize = num(opts, "maximize", o.maximize) != 0;
        return ct_optim_radam(NULL, &o);
    }
    if (strcmp(type, "LBFGS") == 0) {
        check_keys(opts, (const char *const[]){"lr", "max_iter", "max_eval", "tolerance_grad", "tolerance_change",
                                               "history_size", "line_search_fn", NULL});
        ct_lbfgs_opts o = ct_lbfgs_defaults();
        o.lr = num(opts, "lr", o.lr);
        o.max_iter = (int64_t)num(opts, "max_iter", (double)o.max_iter);
        o.max_eval = (int64_t)num(opts, "max_eval", (double)o.max_eval);
        o.tolerance_grad = num(opts, "tolerance_grad", o.tolerance_grad);
        o.tolerance_change = num(opts, "tolerance_change", o.tolerance_change);
        o.history_size = (int64_t)num(opts, "history_size", (double)o.history_size);
        o.line_search_fn = str(opts, "line_search_fn", o.line_search_fn);
        return ct_optim_lbfgs(NULL, &o);
    }
    fprintf(stderr, "optim_parity: unknown optimizer %s\n", type);
    exit(1);
}

/* One model step's batch and what the closure needs. */
typedef struct {
    ct_optim *opt;
    ct_tensor **params;
    ct_tensor *x, *y;
} Batch;

static ct_tensor *closure(void *user) {
    Batch *b = user;
    if (ct_optim_zero_grad(b->opt, true) != 0) return NULL;
    ct_tensor *h = ct_tanh(ct_linear(b->x, b->params[0], b->params[1]));
    ct_tensor *loss = ct_mse_loss(ct_linear(h, b->params[2], b->params[3]), b->y, CT_REDUCE_MEAN);
    return loss && ct_backward(loss) == 0 ? loss : NULL;
}

static bool skipped(const json_t *skip, size_t k, int t) {
    for (size_t i = 0; i < json_array_size(skip); i++) {
        const json_t *p = json_array_get(skip, i);
        if ((size_t)json_integer_value(json_array_get(p, 0)) == k && json_integer_value(json_array_get(p, 1)) == t)
            return true;
    }
    return false;
}

static void one_step(ct_optim *o, ct_tensor **params, size_t n, const json_t *run, int t, json_t *losses) {
    const json_t *changes = json_object_get(run, "lr_changes");
    for (size_t i = 0; i < json_array_size(changes); i++) {
        const json_t *c = json_array_get(changes, i); /* [step, group, lr] */
        if (json_integer_value(json_array_get(c, 0)) == t &&
            ct_optim_set_lr(o, (size_t)json_integer_value(json_array_get(c, 1)),
                            json_number_value(json_array_get(c, 2))) != 0)
            die("set_lr");
    }
    ct_manual_seed((uint64_t)json_integer_value(json_object_get(run, "seed")) * 1000 + (uint64_t)t);
    if (json_object_get(run, "model")) {
        ct_scope *s = ct_scope_begin();
        Batch b = {o, params, NULL, NULL};
        b.x = ct_randn(CT_SHAPE(16, 3), NULL); /* x first, then y: the generator's order */
        b.y = ct_randn(CT_SHAPE(16, 2), NULL);
        double loss = 0;
        if (!b.x || !b.y || ct_optim_step_closure(o, closure, &b, &loss) != 0) die("step_closure");
        json_array_append_new(losses, real_to_json(loss));
        ct_scope_end(s);
        return;
    }
    if (ct_optim_zero_grad(o, true) != 0) die("zero_grad");
    ct_scope *s = ct_scope_begin();
    for (size_t k = 0; k < n; k++) {
        if (skipped(json_object_get(run, "skip"), k, t)) continue;
        int64_t shape[8];
        int nd = ct_shape(params[k], shape, 8);
        ct_tensor *g = ct_add(ct_randn(nd, shape, NULL), ct_mul_scalar(ct_detach(params[k]), 0.1));
        if (!g || ct_set_grad(params[k], g) != 0) die("gradient");
    }
    ct_scope_end(s);
    if (ct_optim_step(o) != 0) die("step");
}

/* Replaces parameter values and optimizer state with a saved point. */
static void resume(ct_optim *o, ct_tensor **params, size_t n, const char *path) {
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j) {
        fprintf(stderr, "optim_parity: %s: %s\n", path, err.text);
        exit(1);
    }
    const json_t *saved = json_object_get(j, "params");
    ct_guard *ng = ct_no_grad();
    for (size_t k = 0; k < n; k++) {
        ct_tensor *t = tensor_from_json(json_array_get(saved, k));
        if (!t || ct_copy_(params[k], t) != 0) die("resume params");
        ct_tensor_free(t);
    }
    ct_guard_end(ng);
    ct_value *sd = value_from_json(json_object_get(j, "state_dict"));
    if (!sd || ct_optim_load_state_dict(o, sd) != 0) die("load_state_dict");
    ct_value_free(sd);
    json_decref(j);
}

static json_t *params_json(ct_tensor **params, size_t n) {
    json_t *a = json_array();
    for (size_t k = 0; k < n; k++) json_array_append_new(a, tensor_to_json(params[k]));
    return a;
}

static json_t *run_one(const json_t *shapes, const json_t *run, int default_steps) {
    if (json_object_get(run, "shapes")) shapes = json_object_get(run, "shapes");
    size_t n = json_array_size(shapes);
    if (n > MAX_PARAMS) exit(2);
    ct_tensor *params[MAX_PARAMS];
    ct_manual_seed((uint64_t)json_integer_value(json_object_get(run, "seed")));
    for (size_t k = 0; k < n; k++) {
        const json_t *s = json_array_get(shapes, k);
        int64_t shape[8];
        int nd = (int)json_array_size(s);
        for (int d = 0; d < nd; d++) shape[d] = json_integer_value(json_array_get(s, d));
        params[k] = ct_keep(ct_randn(nd, shape, NULL));
        if (!params[k] || ct_set_requires_grad(params[k], true) != 0) die("params");
    }
    json_t *out = json_object();
    json_object_set_new(out, "initial_params", params_json(params, n));

    ct_optim *o = make_optim(json_string_value(json_object_get(run, "type")), json_object_get(run, "opts"));
    if (!o) die("optimizer");
    const json_t *groups = json_object_get(run, "groups");
    for (size_t g = 0; g < json_array_size(groups); g++) {
        const json_t *ids = json_array_get(groups, g);
        ct_tensor *members[MAX_PARAMS];
        for (size_t i = 0; i < json_array_size(ids); i++) members[i] = params[json_integer_value(json_array_get(ids, i))];
        if (ct_optim_add_param_group(o, json_array_size(ids), members) != (int)g) die("add_param_group");
    }
    const json_t *options = json_object_get(run, "options");
    for (size_t i = 0; i < json_array_size(options); i++) {
        const json_t *opt = json_array_get(options, i); /* [group, key, value] */
        const json_t *v = json_array_get(opt, 2);
        double x = json_is_null(v) ? -1 : json_is_boolean(v) ? json_is_true(v) : json_number_value(v);
        if (ct_optim_set_option(o, (size_t)json_integer_value(json_array_get(opt, 0)),
                                json_string_value(json_array_get(opt, 1)), x) != 0)
            die("set_option");
    }

    int start = 0, steps = default_steps;
    const json_t *load = json_object_get(run, "load");
    if (load) {
        resume(o, params, n, json_string_value(load));
        start = (int)json_integer_value(json_object_get(run, "start"));
    }
    if (json_object_get(run, "steps")) steps = (int)json_integer_value(json_object_get(run, "steps"));
    json_t *losses = json_array();
    for (int t = start; t < steps; t++) one_step(o, params, n, run, t, losses);

    json_object_set_new(out, "losses", losses);
    json_object_set_new(out, "params", params_json(params, n));
    ct_value *sd = ct_optim_state_dict(o);
    json_t *sdj = sd ? value_to_json(sd) : NULL;
    if (!sdj) die("state_dict");
    json_object_set_new(out, "state_dict", sdj);
    ct_value_free(sd);
    ct_optim_free(o);
    for (size_t k = 0; k < n; k++) ct_tensor_free(params[k]);
    return out;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: optim_parity CONFIG.json OUT.json\n");
        return 2;
    }
    json_error_t err;
    json_t *cfg = json_load_file(argv[1], 0, &err);
    if (!cfg) {
        fprintf(stderr, "optim_parity: %s: %s\n", argv[1], err.text);
        return 1;
    }
    const json_t *shapes = json_object_get(cfg, "shapes");
    if (json_array_size(shapes) > MAX_PARAMS) return 2;
    int steps = (int)json_integer_value(json_object_get(cfg, "steps"));
    json_t *out = json_object();
    const json_t *runs = json_object_get(cfg, "runs");
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const json_t *run = json_array_get(runs, i);
        json_object_set_new(out, json_string_value(json_object_get(run, "name")), run_one(shapes, run, steps));
    }
    if (json_dump_file(out, argv[2], JSON_COMPACT) != 0) {
        fprintf(stderr, "optim_parity: cannot write %s\n", argv[2]);
        return 1;
    }
    json_decref(out);
    json_decref(cfg);
    return 0;
}
