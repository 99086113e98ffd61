/* src/sched/sched.c — LRScheduler, the part every scheduler shares: construction
 * (initial_lr, base_lrs, the first step), step(), _update_lr(), and the
 * public calls that dispatch to a kind's operations.
 *
 * The kinds live in basic.c (the chainable one-formula schedulers),
 * onecycle.c, plateau.c and sequential.c; the helpers that write and check
 * Python's state dicts in state_dict.c.
 *
 * Every formula is written in the order Python evaluates it: with ISO C's
 * default of no floating-point contraction (-std=c11) and the same libm,
 * the lrs are Python's to the last bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/scheduler.h"

/* ---- Python's arithmetic ------------------------------------------------ */

int64_t cti_py_floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

int cti_py_div(double a, double b, double *out, const char *fn) {
    if (b == 0) return ct_set_error(CT_EINVAL, "%s: float division by zero", fn);
    *out = a / b;
    return CT_OK;
}

/* ---- construction ---------------------------------------------------------- */

ct_sched *cti_sched_alloc(size_t size, const cti_sched_ops *ops, ct_optim *opt, bool with_base,
                         const char *fn) {
    if (!opt) {
        ct_set_error(CT_EINVAL, "%s: optimizer is NULL", fn);
        return NULL;
    }
    ct_sched *s = calloc(1, size);
    size_t n = ct_optim_num_groups(opt);
    size_t bytes = (n ? n : 1) * sizeof(double);
    if (s) {
        s->last_lr = calloc(1, bytes);
        s->next_lr = calloc(1, bytes);
        s->base_lrs = with_base ? calloc(1, bytes) : NULL;
    }
    if (!s || !s->last_lr || !s->next_lr || (with_base && !s->base_lrs)) {
        if (s) {
            free(s->last_lr);
            free(s->next_lr);
            free(s->base_lrs);
        }
        free(s);
        ct_set_error(CT_ENOMEM, "%s: out of memory", fn);
        return NULL;
    }
    s->ops = ops;
    s->opt = opt;
    s->ngroups = n;
    s->last_epoch = -1;
    return s;
}

bool cti_sched_has_option(const ct_optim *o, size_t g, const char *key, double *out) {
    /* A missing key is an answer here, not a failure: keep the caller's
     * last error as it was. */
    int code = ct_last_code();
    char *saved = NULL;
    if (code != CT_OK) {
        size_t n = strlen(ct_last_error()) + 1;
        saved = malloc(n);
        if (saved) memcpy(saved, ct_last_error(), n);
    }
    bool has = ct_optim_get_option(o, g, key, out) == CT_OK;
    if (!has) {
        if (code == CT_OK)
            ct_clear_error();
        else
            ct_set_error(code, "%s", saved ? saved : "");
    }
    free(saved);
    return has;
}

ct_sched *cti_sched_init(ct_sched *s, const char *fn) {
    for (size_t g = 0; g < s->ngroups; g++) {
        /* group.setdefault("initial_lr", group["lr"]): a scheduler made
         * after another one keeps the first one's initial_lr. */
        double init;
        if (!cti_sched_has_option(s->opt, g, "initial_lr", &init)) {
            init = ct_optim_get_lr(s->opt, g);
            if (ct_optim_set_option(s->opt, g, "initial_lr", init) != 0) goto fail;
        }
        s->base_lrs[g] = init;
    }
    s->last_epoch = -1;
    if (cti_sched_initial_step(s) == 0) return s;
fail:
    ct_sched_free(s);
    return NULL;
}

int cti_sched_initial_step(ct_sched *s) {
    s->step_count = 0;
    s->is_initial = true;
    int rc = ct_sched_step(s);
    s->is_initial = false;
    return rc;
}

/* ---- stepping ---------------------------------------------------------------- */

int cti_sched_check_groups(const ct_sched *s, const char *fn) {
    size_t n = ct_optim_num_groups(s->opt);
    if (n == s->ngroups) return CT_OK;
    return ct_set_error(CT_ESTATE,
                        "%s: the optimizer has %zu param groups, the %s was made for %zu "
                        "(a group added since needs a new scheduler)",
                        fn, n, s->ops->name, s->ngroups);
}

int cti_sched_read_lrs(const ct_sched *s, double *out, const char *fn) {
    for (size_t g = 0; g < s->ngroups; g++) {
        out[g] = ct_optim_get_lr(s->opt, g);
        if (isnan(out[g]) && ct_last_code() != CT_OK) return ct_last_code();
    }
    return CT_OK;
}

int cti_sched_apply_lrs(ct_sched *s, const double *lrs, const char *fn) {
    for (size_t g = 0; g < s->ngroups; g++) {
        int rc = ct_optim_set_lr(s->opt, g, lrs[g]);
        if (rc) return rc;
    }
    return cti_sched_read_lrs(s, s->last_lr, fn);
}

int cti_sched_update_lr(ct_sched *s, bool has_epoch, int64_t epoch) {
    int rc;
    if (!has_epoch) {
        s->last_epoch++;
        rc = s->ops->get_lr(s, s->next_lr);
    } else {
        s->last_epoch = epoch;
        rc = s->ops->closed_form ? s->ops->closed_form(s, s->next_lr) : s->ops->get_lr(s, s->next_lr);
    }
    if (rc) return rc;
    return cti_sched_apply_lrs(s, s->next_lr, "ct_sched_step");
}

int cti_sched_base_step(ct_sched *s) {
    int rc = cti_sched_check_groups(s, "ct_sched_step");
    if (rc) return rc;
    s->step_count++;
    return cti_sched_update_lr(s, false, 0);
}

/* ---- the public calls ---------------------------------------------------------- */

int ct_sched_step(ct_sched *s) {
    if (!s) return ct_set_error(CT_EINVAL, "ct_sched_step: scheduler is NULL");
    return s->ops->step ? s->ops->step(s) : cti_sched_base_step(s);
}

const char *ct_sched_type(const ct_sched *s) {
    if (!s) {
        ct_set_error(CT_EINVAL, "ct_sched_type: scheduler is NULL");
        return NULL;
    }
    return s->ops->name;
}

double ct_sched_get_last_lr(const ct_sched *s, size_t group) {
    if (!s) {
        ct_set_error(CT_EINVAL, "ct_sched_get_last_lr: scheduler is NULL");
        return NAN;
    }
    if (group >= s->ngroups) {
        ct_set_error(CT_EINDEX, "ct_sched_get_last_lr: group %zu out of range (%zu groups)", group,
                     s->ngroups);
        return NAN;
    }
    return s->last_lr[group];
}

int64_t ct_sched_last_epoch(const ct_sched *s) {
    if (!s) {
        ct_set_error(CT_EINVAL, "ct_sched_last_epoch: scheduler is NULL");
        return 0;
    }
    return s->last_epoch;
}

ct_value *ct_sched_state_dict(const ct_sched *s) {
    if (!s) {
        ct_set_error(CT_EINVAL, "ct_sched_state_dict: scheduler is NULL");
        return NULL;
    }
    cti_sdict b = {ct_value_dict(), false};
    b.bad = b.d == NULL;
    s->ops->save(s, &b);
    if (b.bad) {
        ct_value_free(b.d);
        if (ct_last_code() == CT_OK) ct_set_error(CT_ENOMEM, "ct_sched_state_dict: out of memory");
        return NULL;
    }
    return b.d;
}

int ct_sched_load_state_dict(ct_sched *s, const ct_value *sd) {
    if (!s || !sd) return ct_set_error(CT_EINVAL, "ct_sched_load_state_dict: scheduler or state_dict is NULL");
    /* Everything is checked before anything changes. */
    int rc = s->ops->load(s, sd, false);
    return rc ? rc : s->ops->load(s, sd, true);
}

void ct_sched_free(ct_sched *s) {
    if (!s) return;
    if (s->ops->destroy) s->ops->destroy(s);
    free(s->base_lrs);
    free(s->last_lr);
    free(s->next_lr);
    free(s);
}
