/* src/sched/plateau.c — ReduceLROnPlateau: multiplies the lr by `factor`
 * when a metric has not improved for more than `patience` steps.
 *
 * It is not an LRScheduler underneath (Python's does not call
 * LRScheduler.__init__): no initial_lr, no base_lrs, no first step, and its
 * state dict is its own fields only. It is stepped with a metric. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/scheduler.h"

typedef struct {
    ct_sched base; /* base_lrs unused; last_epoch starts at 0 */
    double factor;
    bool default_none;      /* default_min_lr is None (a per-group list was given) */
    cti_pynum default_min_lr;
    cti_pynum *min_lrs;      /* n_min: one per group when made */
    size_t n_min;
    int64_t patience, cooldown;
    double eps;
    bool maximize;          /* mode "max" */
    double threshold;
    bool threshold_abs;     /* threshold_mode "abs" */
    double best;
    int64_t cooldown_counter, num_bad_epochs;
} Plateau;

static double mode_worse(const Plateau *k) { return k->maximize ? -INFINITY : INFINITY; }

static bool is_better(const Plateau *k, double a, double best) {
    if (!k->maximize && !k->threshold_abs) return a < best * (1.0 - k->threshold);
    if (!k->maximize) return a < best - k->threshold;
    if (!k->threshold_abs) return a > best * (k->threshold + 1.0);
    return a > best + k->threshold;
}

/* Python's _last_lr covers every group of the optimizer, also groups added
 * after the scheduler was made: grow the per-group arrays to match. */
static int sync_groups(Plateau *k) {
    size_t n = ct_optim_num_groups(k->base.opt);
    if (n <= k->base.ngroups) return CT_OK;
    double *last = realloc(k->base.last_lr, n * sizeof *last);
    if (last) k->base.last_lr = last;
    double *next = realloc(k->base.next_lr, n * sizeof *next);
    if (next) k->base.next_lr = next;
    if (!last || !next) return ct_set_error(CT_ENOMEM, "ct_sched_step_metric: out of memory");
    k->base.ngroups = n;
    return CT_OK;
}

static int reduce_lr(Plateau *k) {
    ct_sched *s = &k->base;
    /* Groups added since: the scalar min_lr covers them, a list cannot. */
    size_t n = ct_optim_num_groups(s->opt);
    if (n != k->n_min) {
        if (k->default_none)
            return ct_set_error(CT_ESTATE,
                                "ct_sched_step_metric: The number of param groups in the `optimizer` (%zu) "
                                "differs from when `ReduceLROnPlateau` was initialized (%zu), usually due to a "
                                "new param group being added to the optimizer. Please modify the `min_lrs` "
                                "field to match the length of the `optimizer` param groups.",
                                n, k->n_min);
        cti_pynum *m = realloc(k->min_lrs, (n ? n : 1) * sizeof *m);
        if (!m) return ct_set_error(CT_ENOMEM, "ct_sched_step_metric: out of memory");
        for (size_t g = 0; g < n; g++) m[g] = k->default_min_lr;
        k->min_lrs = m;
        k->n_min = n;
    }
    for (size_t g = 0; g < n; g++) {
        double old_lr = ct_optim_get_lr(s->opt, g);
        double new_lr = old_lr * k->factor;
        if (k->min_lrs[g].v > new_lr) new_lr = k->min_lrs[g].v; /* max(old_lr * factor, min_lr) */
        if (old_lr - new_lr > k->eps) {
            int rc = ct_optim_set_lr(s->opt, g, new_lr);
            if (rc) return rc;
        }
    }
    return CT_OK;
}

static const cti_sched_ops kPlateau;

int ct_sched_step_metric(ct_sched *s, double metric) {
    if (!s) return ct_set_error(CT_EINVAL, "ct_sched_step_metric: scheduler is NULL");
    if (s->ops != &kPlateau)
        return ct_set_error(CT_ENOTSUP, "ct_sched_step_metric: %s is stepped without a metric (ct_sched_step)",
                            s->ops->name);
    Plateau *k = (Plateau *)s;
    s->last_epoch = s->last_epoch + 1;
    if (is_better(k, metric, k->best)) {
        k->best = metric;
        k->num_bad_epochs = 0;
    } else {
        k->num_bad_epochs++;
    }
    if (k->cooldown_counter > 0) {
        k->cooldown_counter--;
        k->num_bad_epochs = 0; /* bad epochs in cooldown do not count */
    }
    if (k->num_bad_epochs > k->patience) {
        int rc = reduce_lr(k);
        if (rc) return rc;
        k->cooldown_counter = k->cooldown;
        k->num_bad_epochs = 0;
    }
    int rc = sync_groups(k);
    return rc ? rc : cti_sched_read_lrs(s, s->last_lr, "ct_sched_step_metric");
}

static int plateau_step(ct_sched *s) {
    return ct_set_error(CT_ENOTSUP, "ct_sched_step: ReduceLROnPlateau is stepped with a metric "
                                    "(ct_sched_step_metric)");
}

/* ---- state dict ------------------------------------------------------------------ */

static void plateau_save(const ct_sched *s, cti_sdict *d) {
    const Plateau *k = (const Plateau *)s;
    cti_sdict_float(d, "factor", k->factor);
    cti_sdict_put(d, "default_min_lr", k->default_none ? ct_value_none() : cti_pynum_value(k->default_min_lr));
    ct_value *m = ct_value_list();
    for (size_t g = 0; m && g < k->n_min; g++)
        if (ct_value_list_append(m, cti_pynum_value(k->min_lrs[g])) != 0) {
            ct_value_free(m);
            m = NULL;
        }
    cti_sdict_put(d, "min_lrs", m);
    cti_sdict_int(d, "patience", k->patience);
    cti_sdict_int(d, "cooldown", k->cooldown);
    cti_sdict_float(d, "eps", k->eps);
    cti_sdict_int(d, "last_epoch", s->last_epoch);
    cti_sdict_floats(d, "_last_lr", s->last_lr, s->ngroups);
    cti_sdict_float(d, "mode_worse", mode_worse(k));
    cti_sdict_str(d, "mode", k->maximize ? "max" : "min");
    cti_sdict_float(d, "threshold", k->threshold);
    cti_sdict_str(d, "threshold_mode", k->threshold_abs ? "abs" : "rel");
    cti_sdict_float(d, "best", k->best);
    cti_sdict_int(d, "cooldown_counter", k->cooldown_counter);
    cti_sdict_int(d, "num_bad_epochs", k->num_bad_epochs);
}

/* min_lrs: a list of numbers, one per group unless a scalar default_min_lr
 * stands in for groups added since (out may be NULL: check only). */
static size_t load_min_lrs(cti_sreader *r, size_t ngroups, bool default_none, cti_pynum *out) {
    const ct_value *m = cti_sread(r, "min_lrs");
    if (!m) return 0;
    size_t n = ct_value_len(m);
    if (ct_value_kind_of(m) != CT_VALUE_LIST || (default_none && n != ngroups)) {
        cti_sreader_fail(r, "has 'min_lrs' that is not a list of %zu numbers (one per param group)", ngroups);
        r->code = CT_EINVAL;
        return 0;
    }
    for (size_t g = 0; g < n; g++) {
        const ct_value *v = ct_value_list_get(m, g);
        cti_pynum x = {0, ct_value_kind_of(v) == CT_VALUE_INT};
        if (ct_value_get_float(v, &x.v) != 0) {
            cti_sreader_fail(r, "has min_lrs[%zu] that is not a number", g);
            return 0;
        }
        if (out) out[g] = x;
    }
    return n;
}

static int plateau_load(ct_sched *s, const ct_value *sd, bool apply) {
    static const char *const keys[] = {"factor", "default_min_lr", "min_lrs", "patience", "cooldown",
                                       "eps", "last_epoch", "_last_lr", "mode_worse", "mode",
                                       "threshold", "threshold_mode", "best", "cooldown_counter",
                                       "num_bad_epochs", NULL};
    Plateau *k = (Plateau *)s;
    cti_sreader r;
    cti_sreader_start(&r, s, sd, keys);
    Plateau v = *k;
    v.factor = cti_sread_float(&r, "factor");
    const ct_value *dflt = cti_sread(&r, "default_min_lr");
    v.default_none = dflt && ct_value_kind_of(dflt) == CT_VALUE_NONE;
    if (!v.default_none) v.default_min_lr = cti_sread_num(&r, "default_min_lr");
    v.n_min = load_min_lrs(&r, s->ngroups, v.default_none, NULL);
    v.patience = cti_sread_int(&r, "patience");
    v.cooldown = cti_sread_int(&r, "cooldown");
    v.eps = cti_sread_float(&r, "eps");
    v.base.last_epoch = cti_sread_int(&r, "last_epoch");
    cti_sread_floats(&r, "_last_lr", s->ngroups, NULL);
    cti_sread_float(&r, "mode_worse"); /* recomputed from mode, as Python's _init_is_better does */
    const char *mode = cti_sread_str(&r, "mode");
    v.threshold = cti_sread_float(&r, "threshold");
    const char *tmode = cti_sread_str(&r, "threshold_mode");
    v.best = cti_sread_float(&r, "best");
    v.cooldown_counter = cti_sread_int(&r, "cooldown_counter");
    v.num_bad_epochs = cti_sread_int(&r, "num_bad_epochs");
    if (!r.code && strcmp(mode, "min") != 0 && strcmp(mode, "max") != 0)
        cti_sreader_fail(&r, "has mode %s, which is unknown!", mode);
    if (!r.code && strcmp(tmode, "rel") != 0 && strcmp(tmode, "abs") != 0)
        cti_sreader_fail(&r, "has threshold mode %s, which is unknown!", tmode);
    if (r.code || !apply) return cti_sreader_end(&r);
    v.min_lrs = malloc((v.n_min ? v.n_min : 1) * sizeof *v.min_lrs);
    if (!v.min_lrs) return ct_set_error(CT_ENOMEM, "ct_sched_load_state_dict: out of memory");
    load_min_lrs(&r, s->ngroups, v.default_none, v.min_lrs);
    cti_sread_floats(&r, "_last_lr", s->ngroups, s->last_lr);
    v.maximize = strcmp(mode, "max") == 0;
    v.threshold_abs = strcmp(tmode, "abs") == 0;
    free(k->min_lrs);
    *k = v;
    return CT_OK;
}

static void plateau_destroy(ct_sched *s) { free(((Plateau *)s)->min_lrs); }

static const cti_sched_ops kPlateau = {"ReduceLROnPlateau", NULL, NULL, plateau_step,
                                      plateau_save, plateau_load, plateau_destroy};

/* ---- construction ------------------------------------------------------------------- */

ct_plateau_opts ct_plateau_defaults(void) {
    ct_plateau_opts o = {0};
    o.factor = 0.1;
    o.patience = 10;
    o.threshold = 1e-4;
    o.eps = 1e-8;
    return o;
}

ct_sched *ct_sched_reduce_on_plateau(ct_optim *opt, const ct_plateau_opts *o) {
    static const char *fn = "ct_sched_reduce_on_plateau";
    if (!o) {
        ct_set_error(CT_EINVAL, "%s: options are NULL", fn);
        return NULL;
    }
    if (o->factor >= 1.0) {
        ct_set_error(CT_EINVAL, "%s: Factor should be < 1.0.", fn);
        return NULL;
    }
    Plateau *k = (Plateau *)cti_sched_alloc(sizeof *k, &kPlateau, opt, false, fn);
    if (!k) return NULL;
    ct_sched *s = &k->base;
    k->min_lrs = malloc((s->ngroups ? s->ngroups : 1) * sizeof *k->min_lrs);
    if (!k->min_lrs) {
        ct_sched_free(s);
        ct_set_error(CT_ENOMEM, "%s: out of memory", fn);
        return NULL;
    }
    k->factor = o->factor;
    /* Python's default min_lr is the int 0: keep that type in state dicts. */
    k->default_min_lr = (cti_pynum){o->min_lr, o->min_lr == 0 && !signbit(o->min_lr)};
    for (size_t g = 0; g < s->ngroups; g++) k->min_lrs[g] = k->default_min_lr;
    k->n_min = s->ngroups;
    k->patience = o->patience;
    k->cooldown = o->cooldown;
    k->eps = o->eps;
    s->last_epoch = 0;
    if (cti_sched_read_lrs(s, s->last_lr, fn) != 0) {
        ct_sched_free(s);
        return NULL;
    }
    k->maximize = o->maximize;
    k->threshold = o->threshold;
    k->threshold_abs = o->threshold_abs;
    k->best = mode_worse(k);
    return s;
}
