/* tests/sched/sched_parity.c — the C half of the LR scheduler parity test.
 *
 *     sched_parity CONFIG.json OUT.json
 *
 * test_sched_parity.py writes CONFIG: runs, each an optimizer (type, one
 * lr per param group), a scheduler spec with Python's class name and
 * keyword arguments (SequentialLR nests specs), the number of steps, the
 * metrics for ReduceLROnPlateau, and Python's scheduler and optimizer state
 * dicts at step `resume_at`. For every run this program writes to OUT:
 *   lrs, moms       every group's lr and momentum (beta1 for Adam and its kin) after
 *                   construction and after each step
 *   state           the final scheduler state_dict
 *   state_at, optim_at   both state dicts at resume_at
 *   resumed_c       lrs/moms of a fresh optimizer + scheduler that loaded
 *                   state_at/optim_at (C -> C) and went on to the end
 *   resumed_py      the same from Python's state dicts (Python -> C)
 *
 * JSON has no inf (ReduceLROnPlateau's best and mode_worse): non-finite
 * floats travel as the dict {"float": "inf"}, on both sides. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>
#include <ctrial/sched.h>

#include "json_value.h"

_Noreturn static void die(const char *what) {
    fprintf(stderr, "sched_parity: %s: %s\n", what, ct_last_error());
    exit(1);
}

static double num(const json_t *o, const char *key, double def) {
    const json_t *j = json_object_get(o, key);
    return j ? (json_is_boolean(j) ? (double)json_is_true(j) : json_number_value(j)) : def;
}

static const char *str(const json_t *o, const char *key, const char *def) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : def;
}

/* ---- lambdas, the same formulas as the script's Python lambdas ------------- */

static double lambda_exp(int64_t epoch, size_t group, void *ctx) { return pow(0.95, (double)epoch); }

static double lambda_groups(int64_t epoch, size_t group, void *ctx) {
    if (group == 0) return pow(0.95, (double)epoch);
    return 1 / (1 + 0.1 * (double)epoch);
}

static double lambda_warmup(int64_t epoch, size_t group, void *ctx) {
    double f = (double)(epoch + 1) / 10;
    return f < 1.0 ? f : 1.0;
}

static ct_lr_lambda lambda_named(const char *name) {
    if (strcmp(name, "exp") == 0) return lambda_exp;
    if (strcmp(name, "groups") == 0) return lambda_groups;
    if (strcmp(name, "warmup") == 0) return lambda_warmup;
    fprintf(stderr, "sched_parity: unknown lambda %s\n", name);
    exit(1);
}

/* ---- building -------------------------------------------------------------------- */

typedef struct {
    ct_optim *opt;
    ct_sched *sched;
    ct_tensor *params[4];
    size_t ngroups;
    bool adam;
} Rig;

static ct_optim *make_optim(const json_t *spec, Rig *r) {
    const char *type = str(spec, "type", "SGD");
    ct_optim *o;
    if (strcmp(type, "SGD") == 0) {
        ct_sgd_opts s = ct_sgd_defaults();
        s.momentum = num(spec, "momentum", 0);
        o = ct_optim_sgd(NULL, &s);
    } else if (strcmp(type, "Adamax") == 0) { /* betas like Adam's: OneCycleLR cycles beta1 */
        ct_adamax_opts a = ct_adamax_defaults();
        o = ct_optim_adamax(NULL, &a);
        r->adam = true;
    } else if (strcmp(type, "NAdam") == 0) {
        ct_nadam_opts a = ct_nadam_defaults();
        o = ct_optim_nadam(NULL, &a);
        r->adam = true;
    } else if (strcmp(type, "RAdam") == 0) {
        ct_radam_opts a = ct_radam_defaults();
        o = ct_optim_radam(NULL, &a);
        r->adam = true;
    } else {
        ct_adam_opts a = ct_adam_defaults();
        o = ct_optim_adam(NULL, &a);
        r->adam = true;
    }
    if (!o) die("optimizer");
    const json_t *lrs = json_object_get(spec, "lrs");
    r->ngroups = json_array_size(lrs);
    for (size_t g = 0; g < r->ngroups; g++) {
        r->params[g] = ct_keep(ct_zeros(1, (int64_t[]){2}, NULL));
        ct_set_requires_grad(r->params[g], true);
        if (ct_optim_add_param_group(o, 1, &r->params[g]) < 0) die("add_param_group");
        if (ct_optim_set_lr(o, g, json_number_value(json_array_get(lrs, g))) != 0) die("set_lr");
    }
    return o;
}

static ct_sched *make_sched(ct_optim *opt, const json_t *spec) {
    const char *type = str(spec, "type", "");
    if (strcmp(type, "StepLR") == 0)
        return ct_sched_step_lr(opt, (int64_t)num(spec, "step_size", 0), num(spec, "gamma", 0.1));
    if (strcmp(type, "MultiStepLR") == 0) {
        const json_t *m = json_object_get(spec, "milestones");
        int64_t ms[16];
        for (size_t i = 0; i < json_array_size(m); i++) ms[i] = json_integer_value(json_array_get(m, i));
        return ct_sched_multistep(opt, (int)json_array_size(m), ms, num(spec, "gamma", 0.1));
    }
    if (strcmp(type, "ExponentialLR") == 0) return ct_sched_exponential(opt, num(spec, "gamma", 0));
    if (strcmp(type, "CosineAnnealingLR") == 0)
        return ct_sched_cosine_annealing(opt, (int64_t)num(spec, "T_max", 0), num(spec, "eta_min", 0));
    if (strcmp(type, "CosineAnnealingWarmRestarts") == 0)
        return ct_sched_cosine_warm_restarts(opt, (int64_t)num(spec, "T_0", 0), (int64_t)num(spec, "T_mult", 1),
                                             num(spec, "eta_min", 0));
    if (strcmp(type, "LinearLR") == 0)
        return ct_sched_linear(opt, num(spec, "start_factor", 1.0 / 3), num(spec, "end_factor", 1.0),
                               (int64_t)num(spec, "total_iters", 5));
    if (strcmp(type, "ConstantLR") == 0)
        return ct_sched_constant(opt, num(spec, "factor", 1.0 / 3), (int64_t)num(spec, "total_iters", 5));
    if (strcmp(type, "LambdaLR") == 0) return ct_sched_lambda(opt, lambda_named(str(spec, "lr_lambda", "")), NULL);
    if (strcmp(type, "OneCycleLR") == 0) {
        ct_onecycle_opts o = ct_onecycle_defaults();
        o.max_lr = num(spec, "max_lr", 0);
        o.total_steps = (int64_t)num(spec, "total_steps", 0);
        o.pct_start = num(spec, "pct_start", o.pct_start);
        o.anneal_strategy = strcmp(str(spec, "anneal_strategy", "cos"), "linear") == 0 ? CT_ANNEAL_LINEAR : CT_ANNEAL_COS;
        o.cycle_momentum = num(spec, "cycle_momentum", o.cycle_momentum) != 0;
        o.base_momentum = num(spec, "base_momentum", o.base_momentum);
        o.max_momentum = num(spec, "max_momentum", o.max_momentum);
        o.div_factor = num(spec, "div_factor", o.div_factor);
        o.final_div_factor = num(spec, "final_div_factor", o.final_div_factor);
        o.three_phase = num(spec, "three_phase", o.three_phase) != 0;
        return ct_sched_onecycle(opt, &o);
    }
    if (strcmp(type, "ReduceLROnPlateau") == 0) {
        ct_plateau_opts o = ct_plateau_defaults();
        o.maximize = strcmp(str(spec, "mode", "min"), "max") == 0;
        o.factor = num(spec, "factor", o.factor);
        o.patience = (int64_t)num(spec, "patience", (double)o.patience);
        o.threshold = num(spec, "threshold", o.threshold);
        o.threshold_abs = strcmp(str(spec, "threshold_mode", "rel"), "abs") == 0;
        o.cooldown = (int64_t)num(spec, "cooldown", 0);
        o.min_lr = num(spec, "min_lr", 0);
        o.eps = num(spec, "eps", o.eps);
        return ct_sched_reduce_on_plateau(opt, &o);
    }
    if (strcmp(type, "SequentialLR") == 0) {
        const json_t *subs = json_object_get(spec, "schedulers"), *m = json_object_get(spec, "milestones");
        ct_sched *s[8];
        int64_t ms[8];
        int n = (int)json_array_size(subs);
        for (int i = 0; i < n; i++) s[i] = make_sched(opt, json_array_get(subs, (size_t)i));
        for (size_t i = 0; i < json_array_size(m); i++) ms[i] = json_integer_value(json_array_get(m, i));
        return ct_sched_sequential(opt, n, s, ms);
    }
    fprintf(stderr, "sched_parity: unknown scheduler %s\n", type);
    exit(1);
}

static Rig rig_new(const json_t *run) {
    Rig r = {0};
    r.opt = make_optim(json_object_get(run, "optim"), &r);
    r.sched = make_sched(r.opt, json_object_get(run, "sched"));
    if (!r.sched) die("scheduler");
    return r;
}

static void rig_free(Rig *r) {
    ct_sched_free(r->sched);
    ct_optim_free(r->opt);
    for (size_t g = 0; g < r->ngroups; g++) ct_tensor_free(r->params[g]);
}

/* ---- non-finite floats through JSON --------------------------------------------- */

/* A new copy of v where every non-finite float is {"float": repr} (encode)
 * or the reverse (decode). */
static ct_value *map_floats(const ct_value *v, bool encode) {
    ct_value_kind k = ct_value_kind_of(v);
    double d;
    if (encode && k == CT_VALUE_FLOAT && ct_value_get_float(v, &d) == 0 && !isfinite(d)) {
        ct_value *t = ct_value_dict();
        ct_value_dict_set(t, "float", ct_value_str(isnan(d) ? "nan" : d > 0 ? "inf" : "-inf"));
        return t;
    }
    if (!encode && k == CT_VALUE_DICT && ct_value_len(v) == 1 && ct_value_dict_get(v, "float")) {
        const char *s = ct_value_get_str(ct_value_dict_get(v, "float"));
        return ct_value_float(strcmp(s, "nan") == 0 ? NAN : strcmp(s, "inf") == 0 ? INFINITY : -INFINITY);
    }
    if (k == CT_VALUE_LIST || k == CT_VALUE_TUPLE) {
        ct_value *out = k == CT_VALUE_LIST ? ct_value_list() : ct_value_tuple();
        for (size_t i = 0; i < ct_value_len(v); i++) ct_value_list_append(out, map_floats(ct_value_list_get(v, i), encode));
        return out;
    }
    if (k == CT_VALUE_DICT) {
        ct_value *out = ct_value_dict();
        for (size_t i = 0; i < ct_value_len(v); i++) {
            const char *sk = NULL;
            int64_t ik = 0;
            const ct_value *item = ct_value_dict_at(v, i, &sk, &ik);
            if (sk)
                ct_value_dict_set(out, sk, map_floats(item, encode));
            else
                ct_value_dict_set_int(out, ik, map_floats(item, encode));
        }
        return out;
    }
    return ct_value_copy(v, false);
}

static json_t *to_json(const ct_value *v) {
    ct_value *m = map_floats(v, true);
    json_t *j = value_to_json(m);
    ct_value_free(m);
    if (!j) die("value_to_json");
    return j;
}

static ct_value *from_json(const json_t *j) {
    ct_value *raw = value_from_json(j);
    if (!raw) die("value_from_json");
    ct_value *v = map_floats(raw, false);
    ct_value_free(raw);
    return v;
}

/* ---- running ------------------------------------------------------------------------- */

static json_t *groups_now(const Rig *r, bool momentum) {
    json_t *a = json_array();
    for (size_t g = 0; g < r->ngroups; g++) {
        double v;
        if (!momentum) {
            v = ct_optim_get_lr(r->opt, g);
        } else if (ct_optim_get_option(r->opt, g, r->adam ? "beta1" : "momentum", &v) != 0) {
            die("get_option");
        }
        json_array_append_new(a, json_real(v));
    }
    return a;
}

typedef struct {
    json_t *lrs, *moms;
} Trace;

static void record(Trace *t, const Rig *r) {
    json_array_append_new(t->lrs, groups_now(r, false));
    json_array_append_new(t->moms, groups_now(r, true));
}

static void step(Rig *r, const json_t *run, int64_t t) {
    const json_t *metrics = json_object_get(run, "metrics");
    int rc = metrics ? ct_sched_step_metric(r->sched, json_number_value(json_array_get(metrics, (size_t)t - 1)))
                     : ct_sched_step(r->sched);
    if (rc) die("step");
    /* get_last_lr() agrees with the optimizer after every step. */
    for (size_t g = 0; g < r->ngroups; g++)
        if (ct_sched_get_last_lr(r->sched, g) != ct_optim_get_lr(r->opt, g)) die("get_last_lr differs from the lr");
}

/* A fresh rig loads (optim, sched) and runs steps from+1 .. steps. */
static json_t *resume(const json_t *run, const ct_value *optim_sd, const ct_value *sched_sd, int64_t from,
                      int64_t steps) {
    Rig r = rig_new(run);
    if (ct_optim_load_state_dict(r.opt, optim_sd) != 0) die("optimizer load_state_dict");
    if (ct_sched_load_state_dict(r.sched, sched_sd) != 0) die("scheduler load_state_dict");
    if (ct_sched_last_epoch(r.sched) != from) die("last_epoch after load");
    Trace t = {json_array(), json_array()};
    for (int64_t i = from + 1; i <= steps; i++) {
        step(&r, run, i);
        record(&t, &r);
    }
    rig_free(&r);
    return json_pack("{s:o, s:o}", "lrs", t.lrs, "moms", t.moms);
}

static json_t *run_one(const json_t *run) {
    const int64_t steps = json_integer_value(json_object_get(run, "steps"));
    const int64_t at = json_integer_value(json_object_get(run, "resume_at"));
    Rig r = rig_new(run);
    Trace t = {json_array(), json_array()};
    ct_value *state_at = NULL, *optim_at = NULL;
    record(&t, &r);
    for (int64_t i = 1; i <= steps; i++) {
        step(&r, run, i);
        record(&t, &r);
        if (i == at) {
            state_at = ct_sched_state_dict(r.sched);
            optim_at = ct_optim_state_dict(r.opt);
            if (!state_at || !optim_at) die("state_dict");
        }
    }
    ct_value *state = ct_sched_state_dict(r.sched);
    if (!state) die("state_dict");
    json_t *out = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o}", "name", json_string_value(json_object_get(run, "name")),
                            "lrs", t.lrs, "moms", t.moms, "state", to_json(state), "state_at", to_json(state_at),
                            "optim_at", to_json(optim_at));
    json_object_set_new(out, "resumed_c", resume(run, optim_at, state_at, at, steps));
    ct_value *py_state = from_json(json_object_get(run, "py_state"));
    ct_value *py_optim = from_json(json_object_get(run, "py_optim"));
    json_object_set_new(out, "resumed_py", resume(run, py_optim, py_state, at, steps));
    ct_value_free(py_state);
    ct_value_free(py_optim);
    ct_value_free(state);
    ct_value_free(state_at);
    ct_value_free(optim_at);
    rig_free(&r);
    return out;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: sched_parity CONFIG.json OUT.json\n");
        return 2;
    }
    json_error_t err;
    json_t *cfg = json_load_file(argv[1], 0, &err);
    if (!cfg) {
        fprintf(stderr, "sched_parity: %s: %s\n", argv[1], err.text);
        return 1;
    }
    json_t *out = json_array();
    size_t i;
    json_t *run;
    json_array_foreach(cfg, i, run) json_array_append_new(out, run_one(run));
    if (json_dump_file(out, argv[2], JSON_COMPACT) != 0) die("writing the output");
    json_decref(out);
    json_decref(cfg);
    return 0;
}
