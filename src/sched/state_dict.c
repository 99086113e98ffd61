/* src/sched/state_dict.c — writing and checking schedulers' state dicts.
 *
 * Writing appends entries to a dict in Python's __dict__ order and keeps
 * going after an allocation failure (reported once at the end), so each
 * kind's save reads as the list of its fields. Reading checks the key set
 * first (a state dict of another kind has other keys) and then each
 * value's type, recording only the first problem. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/scheduler.h"

/* ---- writing ----------------------------------------------------------------- */

void cti_sdict_put(cti_sdict *b, const char *key, ct_value *v) {
    if (b->bad || !v) {
        ct_value_free(v);
        b->bad = true;
        return;
    }
    if (ct_value_dict_set(b->d, key, v) != 0) b->bad = true;
}

void cti_sdict_int(cti_sdict *b, const char *key, int64_t v) { cti_sdict_put(b, key, ct_value_int(v)); }
void cti_sdict_float(cti_sdict *b, const char *key, double v) { cti_sdict_put(b, key, ct_value_float(v)); }
void cti_sdict_bool(cti_sdict *b, const char *key, bool v) { cti_sdict_put(b, key, ct_value_bool(v)); }
void cti_sdict_str(cti_sdict *b, const char *key, const char *v) { cti_sdict_put(b, key, ct_value_str(v)); }

ct_value *cti_pynum_value(cti_pynum v) {
    return v.is_int ? ct_value_int((int64_t)v.v) : ct_value_float(v.v);
}

void cti_sdict_num(cti_sdict *b, const char *key, cti_pynum v) { cti_sdict_put(b, key, cti_pynum_value(v)); }

void cti_sdict_floats(cti_sdict *b, const char *key, const double *v, size_t n) {
    ct_value *list = ct_value_list();
    for (size_t i = 0; list && i < n; i++) {
        if (ct_value_list_append(list, ct_value_float(v[i])) != 0) {
            ct_value_free(list);
            list = NULL;
        }
    }
    cti_sdict_put(b, key, list);
}

void cti_sched_save_base(const ct_sched *s, cti_sdict *d) {
    cti_sdict_floats(d, "base_lrs", s->base_lrs, s->ngroups);
    cti_sdict_int(d, "last_epoch", s->last_epoch);
    cti_sdict_int(d, "_step_count", s->step_count);
    cti_sdict_bool(d, "_is_initial", s->is_initial);
    /* Only true inside step() (it silences a warning about get_lr). */
    cti_sdict_bool(d, "_get_lr_called_within_step", false);
    cti_sdict_floats(d, "_last_lr", s->last_lr, s->ngroups);
}

/* ---- reading ------------------------------------------------------------------- */

/* Keys that torch added over time: a state dict without them is still one. */
static bool optional_key(const char *k) {
    return strcmp(k, "_is_initial") == 0 || strcmp(k, "_get_lr_called_within_step") == 0;
}

void cti_sreader_fail(cti_sreader *r, const char *fmt, ...) {
    if (r->code) return;
    r->code = CT_EFORMAT;
    int n = snprintf(r->msg, sizeof r->msg, "ct_sched_load_state_dict: %s state_dict ",
                     r->s->ops->name);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof r->msg) vsnprintf(r->msg + n, sizeof r->msg - (size_t)n, fmt, ap);
    va_end(ap);
}

void cti_sreader_start(cti_sreader *r, const ct_sched *s, const ct_value *sd,
                      const char *const *keys) {
    r->sd = sd;
    r->s = s;
    r->code = CT_OK;
    r->msg[0] = '\0';
    if (ct_value_kind_of(sd) != CT_VALUE_DICT) {
        cti_sreader_fail(r, "is a %s, not a dict", ct_value_kind_name(ct_value_kind_of(sd)));
        return;
    }
    for (size_t i = 0; i < ct_value_len(sd); i++) {
        const char *k = NULL;
        ct_value_dict_at(sd, i, &k, NULL);
        if (!k) {
            cti_sreader_fail(r, "has a non-string key");
            return;
        }
        bool known = false;
        for (const char *const *e = keys; *e && !known; e++) known = strcmp(*e, k) == 0;
        if (!known) {
            cti_sreader_fail(r, "has an unexpected key '%s' (not a %s's state?)", k, s->ops->name);
            return;
        }
    }
    for (const char *const *e = keys; *e; e++)
        if (!ct_value_dict_get(sd, *e) && !optional_key(*e)) {
            cti_sreader_fail(r, "has no '%s' (not a %s's state?)", *e, s->ops->name);
            return;
        }
}

int cti_sreader_end(cti_sreader *r) {
    if (r->code) ct_set_error(r->code, "%s", r->msg);
    return r->code;
}

const ct_value *cti_sread(cti_sreader *r, const char *key) {
    if (r->code) return NULL;
    return ct_value_dict_get(r->sd, key);
}

static const char *kind_name(const ct_value *v) { return ct_value_kind_name(ct_value_kind_of(v)); }

int64_t cti_sread_int(cti_sreader *r, const char *key) {
    const ct_value *v = cti_sread(r, key);
    int64_t out = 0;
    if (v && ct_value_get_int(v, &out) != 0) cti_sreader_fail(r, "has '%s' of type %s, not int", key, kind_name(v));
    return out;
}

double cti_sread_float(cti_sreader *r, const char *key) {
    const ct_value *v = cti_sread(r, key);
    double out = 0;
    if (v && ct_value_get_float(v, &out) != 0)
        cti_sreader_fail(r, "has '%s' of type %s, not a number", key, kind_name(v));
    return out;
}

double cti_sread_factor(cti_sreader *r, const char *key, double lo, double hi) {
    double x = cti_sread_float(r, key);
    if (!r->code && !(x >= lo && x <= hi)) {
        cti_sreader_fail(r, "has %s %g, outside [%g, %g]: the learning rates it makes would be invalid", key, x, lo,
                        hi);
        r->code = CT_EINVAL;
    }
    return x;
}

bool cti_sread_bool(cti_sreader *r, const char *key) {
    const ct_value *v = cti_sread(r, key);
    bool out = false;
    if (v && ct_value_get_bool(v, &out) != 0) cti_sreader_fail(r, "has '%s' of type %s, not bool", key, kind_name(v));
    return out;
}

cti_pynum cti_sread_num(cti_sreader *r, const char *key) {
    const ct_value *v = cti_sread(r, key);
    cti_pynum out = {0, false};
    if (v) {
        out.is_int = ct_value_kind_of(v) == CT_VALUE_INT;
        if (ct_value_get_float(v, &out.v) != 0)
            cti_sreader_fail(r, "has '%s' of type %s, not a number", key, kind_name(v));
    }
    return out;
}

const char *cti_sread_str(cti_sreader *r, const char *key) {
    const ct_value *v = cti_sread(r, key);
    const char *s = v ? ct_value_get_str(v) : NULL;
    if (v && !s) cti_sreader_fail(r, "has '%s' of type %s, not str", key, kind_name(v));
    return s ? s : "";
}

void cti_sread_floats(cti_sreader *r, const char *key, size_t n, double *out) {
    const ct_value *v = cti_sread(r, key);
    if (!v) return;
    if (ct_value_kind_of(v) != CT_VALUE_LIST) {
        cti_sreader_fail(r, "has '%s' of type %s, not list", key, kind_name(v));
        return;
    }
    if (ct_value_len(v) != n) {
        cti_sreader_fail(r, "has %zu %s for %zu param groups", ct_value_len(v), key, n);
        r->code = CT_EINVAL;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        double x;
        if (ct_value_get_float(ct_value_list_get(v, i), &x) != 0) {
            cti_sreader_fail(r, "has %s[%zu] of type %s, not a number", key, i,
                            kind_name(ct_value_list_get(v, i)));
            return;
        }
        if (out) out[i] = x;
    }
}

void cti_sched_load_base(ct_sched *s, cti_sreader *r, bool apply) {
    /* base_lrs scale every lr the scheduler sets: one that is negative or
     * NaN would fail the first step (set_lr refuses it, as the optimizer's
     * constructor does) instead of the load */
    double *base = calloc(s->ngroups ? s->ngroups : 1, sizeof *base);
    if (!base && !r->code) {
        cti_sreader_fail(r, "cannot be read: out of memory");
        r->code = CT_ENOMEM;
    }
    cti_sread_floats(r, "base_lrs", s->ngroups, base);
    for (size_t g = 0; base && !r->code && g < s->ngroups; g++)
        if (!(base[g] >= 0)) {
            cti_sreader_fail(r, "has base_lrs[%zu] = %g: Invalid learning rate", g, base[g]);
            r->code = CT_EINVAL;
        }
    if (apply && base && !r->code) memcpy(s->base_lrs, base, s->ngroups * sizeof *base);
    free(base);
    int64_t last_epoch = cti_sread_int(r, "last_epoch");
    int64_t step_count = cti_sread_int(r, "_step_count");
    bool is_initial = cti_sread_bool(r, "_is_initial");
    cti_sread_bool(r, "_get_lr_called_within_step");
    cti_sread_floats(r, "_last_lr", s->ngroups, apply ? s->last_lr : NULL);
    if (apply && !r->code) {
        s->last_epoch = last_epoch;
        s->step_count = step_count;
        s->is_initial = is_initial;
    }
}
