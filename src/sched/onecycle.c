/* src/sched/onecycle.c — OneCycleLR: the lr goes from initial_lr up to
 * max_lr and down to min_lr in two (or three) phases while the momentum
 * (SGD, RMSprop) or beta1 (Adam, AdamW) goes the opposite way.
 *
 * As in Python, the phase end points live in the optimizer's param groups
 * (initial_lr, max_lr, min_lr, max_momentum, base_momentum) and get_lr()
 * reads them from there on every step, so an optimizer state dict saved by
 * either side carries them and resumes the same cycle. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/json_write.h"
#include "sched/scheduler.h"

/* The group keys a phase names, in the order OneCycleLR adds them. */
enum { K_INITIAL_LR, K_MAX_LR, K_MIN_LR, K_MAX_MOMENTUM, K_BASE_MOMENTUM, K_COUNT };
static const char *const kGroupKey[K_COUNT] = {"initial_lr", "max_lr", "min_lr", "max_momentum",
                                               "base_momentum"};
static const char *const kPhaseField[4] = {"start_lr", "end_lr", "start_momentum", "end_momentum"};

typedef struct {
    cti_pynum end_step; /* a float, except the last phase's int total_steps - 1 */
    int key[4];        /* start_lr, end_lr, start_momentum, end_momentum */
} Phase;

typedef struct {
    ct_sched base;
    int64_t total_steps;
    int nphases;
    Phase phase[3];
    bool linear; /* _anneal_func_type "linear" (else "cos") */
    bool cycle_momentum;
    bool use_beta1;
} OneCycle;

static double anneal(const OneCycle *k, double start, double end, double pct) {
    if (k->linear) return (end - start) * pct + start;
    double cos_out = cos(CT_PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
}

static int group_key(const ct_sched *s, size_t g, int key, double *out) {
    if (ct_optim_get_option(s->opt, g, kGroupKey[key], out) == CT_OK) return CT_OK;
    return ct_set_error(CT_ESTATE, "ct_sched_step: OneCycleLR: param group %zu has no '%s' (an optimizer state "
                                   "dict saved without its scheduler was loaded?)",
                        g, kGroupKey[key]);
}

static int onecycle_get_lr(ct_sched *s, double *out) {
    OneCycle *k = (OneCycle *)s;
    const int64_t step_num = s->last_epoch;
    if (step_num > k->total_steps)
        return ct_set_error(CT_EINVAL, "ct_sched_step: Tried to step %lld times. The specified number of total "
                                       "steps is %lld",
                            (long long)step_num, (long long)k->total_steps);
    for (size_t g = 0; g < s->ngroups; g++) {
        double start_step = 0.0, lr = 0, momentum = 0;
        for (int i = 0; i < k->nphases; i++) {
            const Phase *p = &k->phase[i];
            double end_step = p->end_step.v;
            if ((double)step_num <= end_step || i == k->nphases - 1) {
                double pct, v[4];
                int rc = cti_py_div((double)step_num - start_step, end_step - start_step, &pct, "ct_sched_step");
                for (int j = 0; j < 4 && !rc; j++)
                    if (j < 2 || k->cycle_momentum) rc = group_key(s, g, p->key[j], &v[j]);
                if (rc) return rc;
                lr = anneal(k, v[0], v[1], pct);
                if (k->cycle_momentum) momentum = anneal(k, v[2], v[3], pct);
                break;
            }
            start_step = end_step;
        }
        /* Step total_steps is allowed and extrapolates past the last phase;
         * a linear anneal then goes below 0, which Python stores but an
         * optimizer here refuses. That lr trains nothing in a loop of
         * total_steps batches, so it stops at 0 instead of failing the
         * loop's last step. */
        out[g] = lr < 0 ? 0.0 : lr;
        if (k->cycle_momentum) {
            int rc = ct_optim_set_option(s->opt, g, k->use_beta1 ? "beta1" : "momentum", momentum);
            if (rc) return rc;
        }
    }
    return CT_OK;
}

/* ---- state dict -------------------------------------------------------------- */

static void onecycle_save(const ct_sched *s, cti_sdict *d) {
    const OneCycle *k = (const OneCycle *)s;
    cti_sdict_int(d, "total_steps", k->total_steps);
    ct_value *phases = ct_value_list();
    for (int i = 0; phases && i < k->nphases; i++) {
        cti_sdict p = {ct_value_dict(), false};
        p.bad = !p.d;
        cti_sdict_num(&p, "end_step", k->phase[i].end_step);
        for (int j = 0; j < 4; j++) cti_sdict_str(&p, kPhaseField[j], kGroupKey[k->phase[i].key[j]]);
        if (p.bad || ct_value_list_append(phases, p.d) != 0) {
            if (p.bad) ct_value_free(p.d);
            ct_value_free(phases);
            phases = NULL;
        }
    }
    cti_sdict_put(d, "_schedule_phases", phases);
    cti_sdict_str(d, "_anneal_func_type", k->linear ? "linear" : "cos");
    cti_sdict_bool(d, "cycle_momentum", k->cycle_momentum);
    if (k->cycle_momentum) cti_sdict_bool(d, "use_beta1", k->use_beta1);
    cti_sched_save_base(s, d);
}

static int key_index(const char *name) {
    for (int i = 0; i < K_COUNT; i++)
        if (strcmp(kGroupKey[i], name) == 0) return i;
    return -1;
}

/* _schedule_phases: a list of 1 to 3 dicts, each naming group keys. */
static void load_phases(cti_sreader *r, Phase *out, int *n) {
    const ct_value *list = cti_sread(r, "_schedule_phases");
    if (!list) return;
    if (ct_value_kind_of(list) != CT_VALUE_LIST || ct_value_len(list) < 1 || ct_value_len(list) > 3) {
        cti_sreader_fail(r, "has '_schedule_phases' that is not a list of 1 to 3 phases");
        return;
    }
    *n = (int)ct_value_len(list);
    for (int i = 0; i < *n && !r->code; i++) {
        const ct_value *p = ct_value_list_get(list, i);
        const ct_value *end = ct_value_dict_get(p, "end_step");
        if (ct_value_kind_of(p) != CT_VALUE_DICT || ct_value_len(p) != 5 || !end ||
            ct_value_get_float(end, &out[i].end_step.v) != 0) {
            cti_sreader_fail(r, "has _schedule_phases[%d] that is not a phase dict", i);
            return;
        }
        out[i].end_step.is_int = ct_value_kind_of(end) == CT_VALUE_INT;
        for (int j = 0; j < 4; j++) {
            const char *name = ct_value_get_str(ct_value_dict_get(p, kPhaseField[j]));
            out[i].key[j] = name ? key_index(name) : -1;
            if (out[i].key[j] < 0) {
                cti_sreader_fail(r, "has _schedule_phases[%d]['%s'] that names no OneCycleLR group key", i,
                                kPhaseField[j]);
                return;
            }
        }
    }
}

static int onecycle_load(ct_sched *s, const ct_value *sd, bool apply) {
    static const char *const with_beta[] = {"total_steps", "_schedule_phases", "_anneal_func_type",
                                            "cycle_momentum", "use_beta1", CT_SCHED_BASE_KEYS, NULL};
    static const char *const without_beta[] = {"total_steps", "_schedule_phases", "_anneal_func_type",
                                               "cycle_momentum", CT_SCHED_BASE_KEYS, NULL};
    OneCycle *k = (OneCycle *)s;
    /* use_beta1 exists only when cycle_momentum is on. */
    bool cycle = false;
    ct_value_get_bool(ct_value_dict_get(sd, "cycle_momentum"), &cycle);
    cti_sreader r;
    cti_sreader_start(&r, s, sd, cycle ? with_beta : without_beta);
    int64_t total_steps = cti_sread_int(&r, "total_steps");
    Phase phase[3];
    int nphases = 0;
    load_phases(&r, phase, &nphases);
    const char *anneal = cti_sread_str(&r, "_anneal_func_type");
    if (!r.code && strcmp(anneal, "cos") != 0 && strcmp(anneal, "linear") != 0)
        cti_sreader_fail(&r, "has Unknown _anneal_func_type: %s", anneal);
    cti_sread_bool(&r, "cycle_momentum");
    bool use_beta1 = cycle && cti_sread_bool(&r, "use_beta1");
    cti_sched_load_base(s, &r, apply);
    if (apply && !r.code) {
        k->total_steps = total_steps;
        k->nphases = nphases;
        memcpy(k->phase, phase, sizeof phase);
        k->linear = strcmp(anneal, "linear") == 0;
        k->cycle_momentum = cycle;
        k->use_beta1 = use_beta1;
    }
    return cti_sreader_end(&r);
}

static const cti_sched_ops kOneCycle = {"OneCycleLR", onecycle_get_lr, NULL, NULL,
                                       onecycle_save, onecycle_load, NULL};

/* ---- construction ----------------------------------------------------------------- */

ct_onecycle_opts ct_onecycle_defaults(void) {
    ct_onecycle_opts o = {0};
    o.pct_start = 0.3;
    o.anneal_strategy = CT_ANNEAL_COS;
    o.cycle_momentum = true;
    o.base_momentum = 0.85;
    o.max_momentum = 0.95;
    o.div_factor = 25;
    o.final_div_factor = 1e4;
    return o;
}

static void make_phases(OneCycle *k, double pct_start, bool three_phase) {
    const double T = (double)k->total_steps;
    const cti_pynum last = {(double)(k->total_steps - 1), true};
    if (three_phase) {
        k->nphases = 3;
        k->phase[0] = (Phase){{pct_start * T - 1, false}, {K_INITIAL_LR, K_MAX_LR, K_MAX_MOMENTUM, K_BASE_MOMENTUM}};
        k->phase[1] = (Phase){{2 * pct_start * T - 2, false}, {K_MAX_LR, K_INITIAL_LR, K_BASE_MOMENTUM, K_MAX_MOMENTUM}};
        k->phase[2] = (Phase){last, {K_INITIAL_LR, K_MIN_LR, K_MAX_MOMENTUM, K_MAX_MOMENTUM}};
    } else {
        k->nphases = 2;
        k->phase[0] = (Phase){{pct_start * T - 1, false}, {K_INITIAL_LR, K_MAX_LR, K_MAX_MOMENTUM, K_BASE_MOMENTUM}};
        k->phase[1] = (Phase){last, {K_MAX_LR, K_MIN_LR, K_BASE_MOMENTUM, K_MAX_MOMENTUM}};
    }
}

/* Writes OneCycleLR's keys into every param group (Python assigns them to
 * the group dicts). The optimizer's set_option only creates initial_lr, so
 * the keys go in through its own state dict: replaced in place where they
 * exist, appended in Python's order where they do not. */
static int put_group_keys(ct_optim *opt, const double *vals, int nkeys) {
    ct_value *sd = ct_optim_state_dict(opt);
    if (!sd) return ct_last_code();
    ct_value *groups = ct_value_dict_get(sd, "param_groups");
    int rc = CT_OK;
    for (size_t g = 0; g < ct_value_len(groups) && !rc; g++)
        for (int i = 0; i < nkeys && !rc; i++)
            rc = ct_value_dict_set(ct_value_list_get(groups, g), kGroupKey[i], ct_value_float(vals[i]));
    if (!rc) rc = ct_optim_load_state_dict(opt, sd);
    ct_value_free(sd);
    return rc;
}

ct_sched *ct_sched_onecycle(ct_optim *opt, const ct_onecycle_opts *o) {
    static const char *fn = "ct_sched_onecycle";
    char buf[CTI_FLOAT_REPR_LEN];
    if (!opt || !o) {
        ct_set_error(CT_EINVAL, "%s: optimizer or options are NULL", fn);
        return NULL;
    }
    if (o->total_steps <= 0) {
        ct_set_error(CT_EINVAL, "%s: Expected positive integer total_steps, but got %lld", fn,
                     (long long)o->total_steps);
        return NULL;
    }
    if (o->pct_start < 0 || o->pct_start > 1) {
        ct_set_error(CT_EINVAL, "%s: Expected float between 0 and 1 pct_start, but got %s", fn,
                     cti_float_repr(o->pct_start, buf));
        return NULL;
    }
    if (o->anneal_strategy != CT_ANNEAL_COS && o->anneal_strategy != CT_ANNEAL_LINEAR) {
        ct_set_error(CT_EINVAL, "%s: anneal_strategy must be one of 'cos' or 'linear', instead got %d", fn,
                     (int)o->anneal_strategy);
        return NULL;
    }
    if (!(o->max_lr > 0)) {
        ct_set_error(CT_EINVAL, "%s: max_lr must be positive, but got %s", fn, cti_float_repr(o->max_lr, buf));
        return NULL;
    }
    /* Python: "momentum" or "betas" in optimizer.defaults. */
    const char *type = ct_optim_type(opt);
    bool betas = strcmp(type, "Adam") == 0 || strcmp(type, "AdamW") == 0 || strcmp(type, "Adamax") == 0 ||
                 strcmp(type, "NAdam") == 0 || strcmp(type, "RAdam") == 0;
    bool momentum = strcmp(type, "SGD") == 0 || strcmp(type, "RMSprop") == 0;
    if (o->cycle_momentum && !betas && !momentum) {
        ct_set_error(CT_EINVAL, "%s: optimizer must support momentum or beta1 with `cycle_momentum` option enabled",
                     fn);
        return NULL;
    }
    double vals[K_COUNT] = {0, o->max_lr, 0, o->max_momentum, o->base_momentum};
    if (cti_py_div(o->max_lr, o->div_factor, &vals[K_INITIAL_LR], fn) ||
        cti_py_div(vals[K_INITIAL_LR], o->final_div_factor, &vals[K_MIN_LR], fn))
        return NULL;

    OneCycle *k = (OneCycle *)cti_sched_alloc(sizeof *k, &kOneCycle, opt, true, fn);
    if (!k) return NULL;
    k->total_steps = o->total_steps;
    make_phases(k, o->pct_start, o->three_phase);
    k->linear = o->anneal_strategy == CT_ANNEAL_LINEAR;
    k->cycle_momentum = o->cycle_momentum;
    k->use_beta1 = betas;
    int rc = put_group_keys(opt, vals, o->cycle_momentum ? K_COUNT : K_MIN_LR + 1);
    for (size_t g = 0; !rc && o->cycle_momentum && g < k->base.ngroups; g++)
        rc = ct_optim_set_option(opt, g, betas ? "beta1" : "momentum", o->max_momentum);
    if (rc) {
        ct_sched_free(&k->base);
        return NULL;
    }
    return cti_sched_init(&k->base, fn);
}
