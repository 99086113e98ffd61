/* src/sched/basic.c — the schedulers with one formula each: StepLR,
 * MultiStepLR, ExponentialLR, CosineAnnealingLR, CosineAnnealingWarmRestarts,
 * LinearLR, ConstantLR and LambdaLR.
 *
 * get_lr() is Python's chainable form (it scales the optimizer's current lr),
 * closed_form() Python's _get_closed_form_lr(), which only SequentialLR's
 * milestone step uses. Each expression keeps Python's operand order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/scheduler.h"

/* The current lrs, unchanged (Python: _param_groups_val_list(opt, "lr")). */
static int keep_lrs(ct_sched *s, double *out) { return cti_sched_read_lrs(s, out, "ct_sched_step"); }

/* The current lrs, each times f. */
static int scale_lrs(ct_sched *s, double f, double *out) {
    int rc = keep_lrs(s, out);
    for (size_t g = 0; !rc && g < s->ngroups; g++) out[g] = out[g] * f;
    return rc;
}

/* ---- StepLR ------------------------------------------------------------------ */

typedef struct {
    ct_sched base;
    int64_t step_size;
    double gamma;
} StepLR;

static int steplr_get_lr(ct_sched *s, double *out) {
    StepLR *k = (StepLR *)s;
    if (s->last_epoch == 0 || s->last_epoch % k->step_size != 0) return keep_lrs(s, out);
    return scale_lrs(s, k->gamma, out);
}

static int steplr_closed_form(ct_sched *s, double *out) {
    StepLR *k = (StepLR *)s;
    double f = pow(k->gamma, (double)cti_py_floordiv(s->last_epoch, k->step_size));
    for (size_t g = 0; g < s->ngroups; g++) out[g] = s->base_lrs[g] * f;
    return CT_OK;
}

static void steplr_save(const ct_sched *s, cti_sdict *d) {
    const StepLR *k = (const StepLR *)s;
    cti_sdict_int(d, "step_size", k->step_size);
    cti_sdict_float(d, "gamma", k->gamma);
    cti_sched_save_base(s, d);
}

static int steplr_load(ct_sched *s, const ct_value *sd, bool apply) {
    static const char *const keys[] = {"step_size", "gamma", CT_SCHED_BASE_KEYS, NULL};
    StepLR *k = (StepLR *)s;
    cti_sreader r;
    cti_sreader_start(&r, s, sd, keys);
    int64_t step_size = cti_sread_int(&r, "step_size");
    double gamma = cti_sread_factor(&r, "gamma", 0, INFINITY);
    if (!r.code && step_size == 0) cti_sreader_fail(&r, "has step_size 0");
    cti_sched_load_base(s, &r, apply);
    if (apply && !r.code) {
        k->step_size = step_size;
        k->gamma = gamma;
    }
    return cti_sreader_end(&r);
}

static const cti_sched_ops kStepLR = {"StepLR", steplr_get_lr, steplr_closed_form, NULL,
                                     steplr_save, steplr_load, NULL};

ct_sched *ct_sched_step_lr(ct_optim *opt, int64_t step_size, double gamma) {
    /* Python takes 0 and fails with ZeroDivisionError at the first step. */
    if (step_size == 0) {
        ct_set_error(CT_EINVAL, "%s: step_size must not be 0", __func__);
        return NULL;
    }
    StepLR *k = (StepLR *)cti_sched_alloc(sizeof *k, &kStepLR, opt, true, __func__);
    if (!k) return NULL;
    k->step_size = step_size;
    k->gamma = gamma;
    return cti_sched_init(&k->base, __func__);
}

/* ---- MultiStepLR ------------------------------------------------------------- */

/* milestones is a collections.Counter: each distinct milestone (in order of
 * first appearance) with how often it was given. */
typedef struct {
    ct_sched base;
    size_t n;
    int64_t *milestone, *count;
    double gamma;
} MultiStepLR;

static int multistep_get_lr(ct_sched *s, double *out) {
    MultiStepLR *k = (MultiStepLR *)s;
    for (size_t i = 0; i < k->n; i++)
        if (k->milestone[i] == s->last_epoch) return scale_lrs(s, pow(k->gamma, (double)k->count[i]), out);
    return keep_lrs(s, out);
}

static int multistep_closed_form(ct_sched *s, double *out) {
    MultiStepLR *k = (MultiStepLR *)s;
    /* bisect_right(sorted(milestones.elements()), last_epoch) */
    int64_t passed = 0;
    for (size_t i = 0; i < k->n; i++)
        if (k->milestone[i] <= s->last_epoch) passed += k->count[i];
    double f = pow(k->gamma, (double)passed);
    for (size_t g = 0; g < s->ngroups; g++) out[g] = s->base_lrs[g] * f;
    return CT_OK;
}

static void multistep_save(const ct_sched *s, cti_sdict *d) {
    const MultiStepLR *k = (const MultiStepLR *)s;
    ct_value *m = ct_value_dict();
    for (size_t i = 0; m && i < k->n; i++)
        if (ct_value_dict_set_int(m, k->milestone[i], ct_value_int(k->count[i])) != 0) {
            ct_value_free(m);
            m = NULL;
        }
    cti_sdict_put(d, "milestones", m);
    cti_sdict_float(d, "gamma", k->gamma);
    cti_sched_save_base(s, d);
}

static int multistep_load(ct_sched *s, const ct_value *sd, bool apply) {
    static const char *const keys[] = {"milestones", "gamma", CT_SCHED_BASE_KEYS, NULL};
    MultiStepLR *k = (MultiStepLR *)s;
    cti_sreader r;
    cti_sreader_start(&r, s, sd, keys);
    const ct_value *m = cti_sread(&r, "milestones");
    size_t n = ct_value_len(m);
    if (m && ct_value_kind_of(m) != CT_VALUE_DICT) cti_sreader_fail(&r, "has 'milestones' that is not a dict");
    for (size_t i = 0; !r.code && i < n; i++) {
        const char *skey = NULL;
        int64_t count;
        const ct_value *v = ct_value_dict_at(m, i, &skey, NULL);
        if (skey || ct_value_get_int(v, &count) != 0)
            cti_sreader_fail(&r, "has 'milestones' that is not a dict of int counts by int epoch");
    }
    double gamma = cti_sread_factor(&r, "gamma", 0, INFINITY);
    cti_sched_load_base(s, &r, apply);
    if (r.code || !apply) return cti_sreader_end(&r);
    int64_t *milestone = malloc((n ? n : 1) * sizeof *milestone);
    int64_t *count = malloc((n ? n : 1) * sizeof *count);
    if (!milestone || !count) {
        free(milestone);
        free(count);
        return ct_set_error(CT_ENOMEM, "ct_sched_load_state_dict: out of memory");
    }
    for (size_t i = 0; i < n; i++) ct_value_get_int(ct_value_dict_at(m, i, NULL, &milestone[i]), &count[i]);
    free(k->milestone);
    free(k->count);
    k->milestone = milestone;
    k->count = count;
    k->n = n;
    k->gamma = gamma;
    return CT_OK;
}

static void multistep_destroy(ct_sched *s) {
    MultiStepLR *k = (MultiStepLR *)s;
    free(k->milestone);
    free(k->count);
}

static const cti_sched_ops kMultiStepLR = {"MultiStepLR", multistep_get_lr, multistep_closed_form, NULL,
                                          multistep_save, multistep_load, multistep_destroy};

ct_sched *ct_sched_multistep(ct_optim *opt, int n, const int64_t *milestones, double gamma) {
    if (n < 0 || (n > 0 && !milestones)) {
        ct_set_error(CT_EINVAL, "%s: %d milestones%s", __func__, n, milestones ? "" : " and milestones is NULL");
        return NULL;
    }
    MultiStepLR *k = (MultiStepLR *)cti_sched_alloc(sizeof *k, &kMultiStepLR, opt, true, __func__);
    if (!k) return NULL;
    k->milestone = malloc((size_t)(n ? n : 1) * sizeof *k->milestone);
    k->count = malloc((size_t)(n ? n : 1) * sizeof *k->count);
    if (!k->milestone || !k->count) {
        ct_sched_free(&k->base);
        ct_set_error(CT_ENOMEM, "%s: out of memory", __func__);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        size_t j = 0;
        while (j < k->n && k->milestone[j] != milestones[i]) j++;
        if (j == k->n) {
            k->milestone[k->n] = milestones[i];
            k->count[k->n++] = 0;
        }
        k->count[j]++;
    }
    k->gamma = gamma;
    return cti_sched_init(&k->base, __func__);
}

/* ---- ExponentialLR ------------------------------------------------------------ */

typedef struct {
    ct_sched base;
    double gamma;
} ExponentialLR;

static int exponential_get_lr(ct_sched *s, double *out) {
    /* The constructor's step keeps the lr (a resumed scheduler must not move
     * one step ahead of itself). */
    if (s->is_initial) return keep_lrs(s, out);
    return scale_lrs(s, ((ExponentialLR *)s)->gamma, out);
}

static int exponential_closed_form(ct_sched *s, double *out) {
    double f = pow(((ExponentialLR *)s)->gamma, (double)s->last_epoch);
    for (size_t g = 0; g < s->ngroups; g++) out[g] = s->base_lrs[g] * f;
    return CT_OK;
}

static void exponential_save(const ct_sched *s, cti_sdict *d) {
    cti_sdict_float(d, "gamma", ((const ExponentialLR *)s)->gamma);
    cti_sched_save_base(s, d);
}

static int exponential_load(ct_sched *s, const ct_value *sd, bool apply) {
    static const char *const keys[] = {"gamma", CT_SCHED_BASE_KEYS, NULL};
    cti_sreader r;
    cti_sreader_start(&r, s, sd, keys);
    double gamma = cti_sread_factor(&r, "gamma", 0, INFINITY);
    cti_sched_load_base(s, &r, apply);
    if (apply && !r.code) ((ExponentialLR *)s)->gamma = gamma;
    return cti_sreader_end(&r);
}

static const cti_sched_ops kExponentialLR = {"ExponentialLR", exponential_get_lr, exponential_closed_form,
                                            NULL, exponential_save, exponential_load, NULL};

ct_sched *ct_sched_exponential(ct_optim *opt, double gamma) {
    ExponentialLR *k = (ExponentialLR *)cti_sched_alloc(sizeof *k, &kExponentialLR, opt, true, __func__);
    if (!k) return NULL;
    k->gamma = gamma;
    return cti_sched_init(&k->base, __func__);
}

/* ---- CosineAnnealingLR ----------------------------------------------------------- */

typedef struct {
    ct_sched base;
    int64_t t_max;
    double eta_min;
} CosineLR;

static int cosine_get_lr(ct_sched *s, double *out) {
    CosineLR *k = (CosineLR *)s;
    const int64_t e = s->last_epoch, T = k->t_max;
    const double eta = k->eta_min;
    if (s->is_initial) return keep_lrs(s, out);
    if (s->step_count == 1 && e > 0) {
        for (size_t g = 0; g < s->ngroups; g++)
            out[g] = eta + (s->base_lrs[g] - eta) * (1 + cos((double)e * CT_PI / (double)T)) / 2;
        return CT_OK;
    }
    int rc = keep_lrs(s, out);
    if (rc) return rc;
    /* Divisibility: C's % and Python's agree on when the remainder is 0. */
    if ((e - 1 - T) % (2 * T) == 0) {
        for (size_t g = 0; g < s->ngroups; g++)
            out[g] = out[g] + (s->base_lrs[g] - eta) * (1 - cos(CT_PI / (double)T)) / 2;
        return CT_OK;
    }
    double ratio;
    rc = cti_py_div(1 + cos(CT_PI * (double)e / (double)T), 1 + cos(CT_PI * (double)(e - 1) / (double)T),
                   &ratio, "ct_sched_step");
    for (size_t g = 0; !rc && g < s->ngroups; g++) out[g] = ratio * (out[g] - eta) + eta;
    return rc;
}

static int cosine_closed_form(ct_sched *s, double *out) {
    CosineLR *k = (CosineLR *)s;
    const double eta = k->eta_min;
    for (size_t g = 0; g < s->ngroups; g++)
        out[g] = eta + (s->base_lrs[g] - eta) * (1 + cos(CT_PI * (double)s->last_epoch / (double)k->t_max)) / 2;
    return CT_OK;
}

static void cosine_save(const ct_sched *s, cti_sdict *d) {
    const CosineLR *k = (const CosineLR *)s;
    cti_sdict_int(d, "T_max", k->t_max);
    cti_sdict_float(d, "eta_min", k->eta_min);
    cti_sched_save_base(s, d);
}

static int cosine_load(ct_sched *s, const ct_value *sd, bool apply) {
    static const char *const keys[] = {"T_max", "eta_min", CT_SCHED_BASE_KEYS, NULL};
    CosineLR *k = (CosineLR *)s;
    cti_sreader r;
    cti_sreader_start(&r, s, sd, keys);
    int64_t t_max = cti_sread_int(&r, "T_max");
    double eta_min = cti_sread_float(&r, "eta_min");
    if (!r.code && t_max == 0) cti_sreader_fail(&r, "has T_max 0");
    cti_sched_load_base(s, &r, apply);
    if (apply && !r.code) {
        k->t_max = t_max;
        k->eta_min = eta_min;
    }
    return cti_sreader_end(&r);
}

static const cti_sched_ops kCosineLR = {"CosineAnnealingLR", cosine_get_lr, cosine_closed_form, NULL,
                                       cosine_save, cosine_load, NULL};

ct_sched *ct_sched_cosine_annealing(ct_optim *opt, int64_t t_max, double eta_min) {
    /* Python takes 0 and fails with ZeroDivisionError at the first step. */
    if (t_max == 0) {
        ct_set_error(CT_EINVAL, "%s: T_max must not be 0", __func__);
        return NULL;
    }
    CosineLR *k = (CosineLR *)cti_sched_alloc(sizeof *k, &kCosineLR, opt, true, __func__);
    if (!k) return NULL;
    k->t_max = t_max;
    k->eta_min = eta_min;
    return cti_sched_init(&k->base, __func__);
}

/* ---- CosineAnnealingWarmRestarts ---------------------------------------------------- */

/* T_cur is an int unless a Python step(epoch) made it a float; it keeps its
 * type through a load. */
typedef struct {
    ct_sched base;
    int64_t t_0, t_i, t_mult;
    double eta_min;
    cti_pynum t_cur;
} WarmRestarts;

static int warm_get_lr(ct_sched *s, double *out) {
    WarmRestarts *k = (WarmRestarts *)s;
    const double eta = k->eta_min;
    for (size_t g = 0; g < s->ngroups; g++)
        out[g] = eta + (s->base_lrs[g] - eta) * (1 + cos(CT_PI * k->t_cur.v / (double)k->t_i)) / 2;
    return CT_OK;
}

/* Its own step(): T_cur counts up and wraps at T_i, which then grows by
 * T_mult. _step_count is never incremented (Python's override skips it). */
static int warm_step(ct_sched *s) {
    WarmRestarts *k = (WarmRestarts *)s;
    int rc = cti_sched_check_groups(s, "ct_sched_step");
    if (rc) return rc;
    int64_t epoch;
    if (s->last_epoch < 0) { /* step(epoch=0): the constructor's */
        epoch = 0;
        k->t_i = k->t_0;
        k->t_cur = (cti_pynum){0, true};
    } else {
        epoch = s->last_epoch + 1;
        k->t_cur.v = k->t_cur.v + 1;
        if (k->t_cur.v >= (double)k->t_i) {
            /* Python's % of positive numbers: fmod. */
            k->t_cur.v = fmod(k->t_cur.v, (double)k->t_i);
            k->t_i = k->t_i * k->t_mult;
        }
    }
    s->last_epoch = epoch;
    rc = warm_get_lr(s, s->next_lr);
    return rc ? rc : cti_sched_apply_lrs(s, s->next_lr, "ct_sched_step");
}

static void warm_save(const ct_sched *s, cti_sdict *d) {
    const WarmRestarts *k = (const WarmRestarts *)s;
    cti_sdict_int(d, "T_0", k->t_0);
    cti_sdict_int(d, "T_i", k->t_i);
    cti_sdict_int(d, "T_mult", k->t_mult);
    cti_sdict_float(d, "eta_min", k->eta_min);
    cti_sdict_num(d, "T_cur", k->t_cur);
    cti_sched_save_base(s, d);
}

static int warm_load(ct_sched *s, const ct_value *sd, bool apply) {
    static const char *const keys[] = {"T_0", "T_i", "T_mult", "eta_min", "T_cur", CT_SCHED_BASE_KEYS, NULL};
    WarmRestarts *k = (WarmRestarts *)s;
    cti_sreader r;
    cti_sreader_start(&r, s, sd, keys);
    int64_t t_0 = cti_sread_int(&r, "T_0"), t_i = cti_sread_int(&r, "T_i");
    int64_t t_mult = cti_sread_int(&r, "T_mult");
    double eta_min = cti_sread_float(&r, "eta_min");
    cti_pynum t_cur = cti_sread_num(&r, "T_cur");
    if (!r.code && (t_0 <= 0 || t_i <= 0 || t_mult < 1))
        cti_sreader_fail(&r, "has T_0 %lld, T_i %lld, T_mult %lld (positive, positive, >= 1 expected)",
                        (long long)t_0, (long long)t_i, (long long)t_mult);
    cti_sched_load_base(s, &r, apply);
    if (apply && !r.code) {
        k->t_0 = t_0;
        k->t_i = t_i;
        k->t_mult = t_mult;
        k->eta_min = eta_min;
        k->t_cur = t_cur;
    }
    return cti_sreader_end(&r);
}

static const cti_sched_ops kWarmRestarts = {"CosineAnnealingWarmRestarts", warm_get_lr, NULL, warm_step,
                                           warm_save, warm_load, NULL};

ct_sched *ct_sched_cosine_warm_restarts(ct_optim *opt, int64_t t_0, int64_t t_mult, double eta_min) {
    if (t_0 <= 0) {
        ct_set_error(CT_EINVAL, "%s: Expected positive integer T_0, but got %lld", __func__, (long long)t_0);
        return NULL;
    }
    if (t_mult < 1) {
        ct_set_error(CT_EINVAL, "%s: Expected integer T_mult >= 1, but got %lld", __func__, (long long)t_mult);
        return NULL;
    }
    WarmRestarts *k = (WarmRestarts *)cti_sched_alloc(sizeof *k, &kWarmRestarts, opt, true, __func__);
    if (!k) return NULL;
    k->t_0 = k->t_i = t_0;
    k->t_mult = t_mult;
    k->eta_min = eta_min;
    k->t_cur = (cti_pynum){-1, true}; /* last_epoch */
    return cti_sched_init(&k->base, __func__);
}

/* ---- LinearLR ------------------------------------------------------------------------- */

typedef struct {
    ct_sched base;
    double start, end;
    int64_t total_iters;
} LinearLR;

static int linear_get_lr(ct_sched *s, double *out) {
    LinearLR *k = (LinearLR *)s;
    const int64_t e = s->last_epoch;
    if (e == 0) return scale_lrs(s, k->start, out);
    if (s->is_initial || e > k->total_iters) return keep_lrs(s, out);
    double step;
    int rc = cti_py_div(k->end - k->start,
                       (double)k->total_iters * k->start + (double)(e - 1) * (k->end - k->start), &step,
                       "ct_sched_step");
    return rc ? rc : scale_lrs(s, 1.0 + step, out);
}

static int linear_closed_form(ct_sched *s, double *out) {
    LinearLR *k = (LinearLR *)s;
    int64_t done = k->total_iters < s->last_epoch ? k->total_iters : s->last_epoch;
    double frac;
    int rc = cti_py_div((k->end - k->start) * (double)done, (double)k->total_iters, &frac, "ct_sched_step");
    for (size_t g = 0; !rc && g < s->ngroups; g++) out[g] = s->base_lrs[g] * (k->start + frac);
    return rc;
}

static void linear_save(const ct_sched *s, cti_sdict *d) {
    const LinearLR *k = (const LinearLR *)s;
    cti_sdict_float(d, "start_factor", k->start);
    cti_sdict_float(d, "end_factor", k->end);
    cti_sdict_int(d, "total_iters", k->total_iters);
    cti_sched_save_base(s, d);
}

static int linear_load(ct_sched *s, const ct_value *sd, bool apply) {
    static const char *const keys[] = {"start_factor", "end_factor", "total_iters", CT_SCHED_BASE_KEYS, NULL};
    LinearLR *k = (LinearLR *)s;
    cti_sreader r;
    cti_sreader_start(&r, s, sd, keys);
    double start = cti_sread_factor(&r, "start_factor", 0, 1), end = cti_sread_factor(&r, "end_factor", 0, 1);
    int64_t total_iters = cti_sread_int(&r, "total_iters");
    cti_sched_load_base(s, &r, apply);
    if (apply && !r.code) {
        k->start = start;
        k->end = end;
        k->total_iters = total_iters;
    }
    return cti_sreader_end(&r);
}

static const cti_sched_ops kLinearLR = {"LinearLR", linear_get_lr, linear_closed_form, NULL,
                                       linear_save, linear_load, NULL};

ct_sched *ct_sched_linear(ct_optim *opt, double start_factor, double end_factor, int64_t total_iters) {
    if (start_factor > 1.0 || start_factor <= 0) {
        ct_set_error(CT_EINVAL,
                     "%s: Starting multiplicative factor expected to be greater than 0 and less or equal to 1.",
                     __func__);
        return NULL;
    }
    if (end_factor > 1.0 || end_factor < 0) {
        ct_set_error(CT_EINVAL, "%s: Ending multiplicative factor expected to be between 0 and 1.", __func__);
        return NULL;
    }
    LinearLR *k = (LinearLR *)cti_sched_alloc(sizeof *k, &kLinearLR, opt, true, __func__);
    if (!k) return NULL;
    k->start = start_factor;
    k->end = end_factor;
    k->total_iters = total_iters;
    return cti_sched_init(&k->base, __func__);
}

/* ---- ConstantLR ------------------------------------------------------------------------ */

typedef struct {
    ct_sched base;
    double factor;
    int64_t total_iters;
} ConstantLR;

static int constant_get_lr(ct_sched *s, double *out) {
    ConstantLR *k = (ConstantLR *)s;
    if (s->last_epoch == 0) return scale_lrs(s, k->factor, out);
    if (s->last_epoch != k->total_iters) return keep_lrs(s, out);
    double undo;
    int rc = cti_py_div(1.0, k->factor, &undo, "ct_sched_step");
    return rc ? rc : scale_lrs(s, undo, out);
}

static int constant_closed_form(ct_sched *s, double *out) {
    ConstantLR *k = (ConstantLR *)s;
    double f = k->factor + (double)(s->last_epoch >= k->total_iters) * (1 - k->factor);
    for (size_t g = 0; g < s->ngroups; g++) out[g] = s->base_lrs[g] * f;
    return CT_OK;
}

static void constant_save(const ct_sched *s, cti_sdict *d) {
    const ConstantLR *k = (const ConstantLR *)s;
    cti_sdict_float(d, "factor", k->factor);
    cti_sdict_int(d, "total_iters", k->total_iters);
    cti_sched_save_base(s, d);
}

static int constant_load(ct_sched *s, const ct_value *sd, bool apply) {
    static const char *const keys[] = {"factor", "total_iters", CT_SCHED_BASE_KEYS, NULL};
    ConstantLR *k = (ConstantLR *)s;
    cti_sreader r;
    cti_sreader_start(&r, s, sd, keys);
    double factor = cti_sread_factor(&r, "factor", 0, 1);
    int64_t total_iters = cti_sread_int(&r, "total_iters");
    cti_sched_load_base(s, &r, apply);
    if (apply && !r.code) {
        k->factor = factor;
        k->total_iters = total_iters;
    }
    return cti_sreader_end(&r);
}

static const cti_sched_ops kConstantLR = {"ConstantLR", constant_get_lr, constant_closed_form, NULL,
                                         constant_save, constant_load, NULL};

ct_sched *ct_sched_constant(ct_optim *opt, double factor, int64_t total_iters) {
    if (factor > 1.0 || factor < 0) {
        ct_set_error(CT_EINVAL, "%s: Constant multiplicative factor expected to be between 0 and 1.", __func__);
        return NULL;
    }
    ConstantLR *k = (ConstantLR *)cti_sched_alloc(sizeof *k, &kConstantLR, opt, true, __func__);
    if (!k) return NULL;
    k->factor = factor;
    k->total_iters = total_iters;
    return cti_sched_init(&k->base, __func__);
}

/* ---- LambdaLR ------------------------------------------------------------------------------ */

typedef struct {
    ct_sched base;
    ct_lr_lambda fn;
    void *ctx;
} LambdaLR;

static int lambda_get_lr(ct_sched *s, double *out) {
    LambdaLR *k = (LambdaLR *)s;
    for (size_t g = 0; g < s->ngroups; g++) out[g] = s->base_lrs[g] * k->fn(s->last_epoch, g, k->ctx);
    return CT_OK;
}

static void lambda_save(const ct_sched *s, cti_sdict *d) {
    cti_sched_save_base(s, d);
    /* Python saves a callable object's __dict__ and None for a function; a
     * C callback is the latter. */
    ct_value *fns = ct_value_list();
    for (size_t g = 0; fns && g < s->ngroups; g++)
        if (ct_value_list_append(fns, ct_value_none()) != 0) {
            ct_value_free(fns);
            fns = NULL;
        }
    cti_sdict_put(d, "lr_lambdas", fns);
}

static int lambda_load(ct_sched *s, const ct_value *sd, bool apply) {
    static const char *const keys[] = {CT_SCHED_BASE_KEYS, "lr_lambdas", NULL};
    cti_sreader r;
    cti_sreader_start(&r, s, sd, keys);
    cti_sched_load_base(s, &r, apply);
    /* Entries other than None would be a callable object's attributes: a C
     * callback has none to restore. */
    const ct_value *fns = cti_sread(&r, "lr_lambdas");
    if (fns && (ct_value_kind_of(fns) != CT_VALUE_LIST || ct_value_len(fns) != s->ngroups)) {
        cti_sreader_fail(&r, "has 'lr_lambdas' that is not a list of %zu entries", s->ngroups);
        r.code = CT_EINVAL;
    }
    return cti_sreader_end(&r);
}

static const cti_sched_ops kLambdaLR = {"LambdaLR", lambda_get_lr, NULL, NULL, lambda_save, lambda_load, NULL};

ct_sched *ct_sched_lambda(ct_optim *opt, ct_lr_lambda fn, void *ctx) {
    if (!fn) {
        ct_set_error(CT_EINVAL, "%s: lr_lambda is NULL", __func__);
        return NULL;
    }
    LambdaLR *k = (LambdaLR *)cti_sched_alloc(sizeof *k, &kLambdaLR, opt, true, __func__);
    if (!k) return NULL;
    k->fn = fn;
    k->ctx = ctx;
    return cti_sched_init(&k->base, __func__);
}
