/* src/search/searcher.c — single, random, grid and adaptive_asha behind one
 * interface (searcher.h), as Determined's random.go, grid.go and
 * tournament.go hand out operations before v0.38. */
#include "search/searcher.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mt19937.h"
#include "ctrial/error.h"

typedef struct {
    json_t *hparams; /* owned */
    uint32_t seed;
    char request_id[37];
    int bracket;
} trial_info;

struct cti_searcher {
    cti_searcher_opts o;
    const cti_hp_space *space;
    cti_mt19937 mt;
    int64_t next_id; /* ids from 1, shared by the brackets */
    int64_t total, created, closed;
    int64_t grid_len;
    /* adaptive_asha */
    cti_asha_plan plan;
    cti_rungs *brackets[CT_ASHA_MAX_BRACKETS];
    /* by id */
    trial_info *trials;
    int64_t cap_trials;
};

static int oom(void) { return ct_set_error(CT_ENOMEM, "search: out of memory"); }

cti_searcher_opts cti_searcher_defaults(void) {
    cti_searcher_opts o;
    memset(&o, 0, sizeof o);
    o.kind = CT_SEARCHER_SINGLE;
    o.max_trials = 1;
    o.max_concurrent_trials = 16;
    o.smaller_is_better = true;
    o.divisor = 4;
    o.max_rungs = 5;
    o.mode = CT_ASHA_STANDARD;
    return o;
}

bool cti_searcher_kind_is_asha(cti_searcher_kind k) {
    return k == CT_SEARCHER_ADAPTIVE_ASHA || k == CT_SEARCHER_ASYNC_HALVING;
}

const char *cti_searcher_kind_name(cti_searcher_kind k) {
    switch (k) {
    case CT_SEARCHER_SINGLE: return "single";
    case CT_SEARCHER_RANDOM: return "random";
    case CT_SEARCHER_GRID: return "grid";
    case CT_SEARCHER_ADAPTIVE_ASHA: return "adaptive_asha";
    case CT_SEARCHER_ASYNC_HALVING: return "async_halving";
    }
    return "?";
}

static trial_info *info(const cti_searcher *s, int64_t trial) {
    return trial >= 1 && trial < s->cap_trials && s->trials[trial].hparams ? &s->trials[trial] : NULL;
}

cti_searcher *cti_searcher_new(const cti_searcher_opts *o, const cti_hp_space *space) {
    cti_searcher *s = calloc(1, sizeof *s);
    if (!s) {
        oom();
        return NULL;
    }
    s->o = *o;
    s->space = space;
    s->next_id = 1;
    cti_mt19937_seed(&s->mt, o->seed);
    int rc = 0;
    switch (o->kind) {
    case CT_SEARCHER_SINGLE:
        s->o.max_trials = 1;
        s->o.max_concurrent_trials = 1;
        s->total = 1;
        break;
    case CT_SEARCHER_RANDOM: s->total = o->max_trials; break;
    case CT_SEARCHER_GRID:
        s->grid_len = s->total = cti_hp_space_grid_len(space);
        if (s->total < 1)
            rc = ct_set_error(CT_ECONFIG, "searcher 'grid': the hyperparameters have no point to try (no "
                                          "hyperparameter at all)");
        break;
    case CT_SEARCHER_ADAPTIVE_ASHA:
    case CT_SEARCHER_ASYNC_HALVING: {
        cti_asha_opts a = cti_asha_defaults();
        a.max_trials = o->max_trials;
        a.max_length = o->max_length;
        a.max_concurrent_trials = o->max_concurrent_trials;
        a.divisor = o->divisor;
        a.max_rungs = o->max_rungs;
        a.mode = o->mode;
        a.bracket_rungs = o->n_bracket_rungs ? o->bracket_rungs : NULL;
        a.n_bracket_rungs = o->n_bracket_rungs;
        if (o->kind == CT_SEARCHER_ASYNC_HALVING) {
            /* asha_stopping.go: one bracket of num_rungs; at once min(mc, T),
             * or, for mc 0, d^(num_rungs-1) clamped to [1, T] (enough for one
             * trial to reach the top rung). */
            a.bracket_rungs = &o->num_rungs;
            a.n_bracket_rungs = 1;
            a.max_rungs = o->num_rungs;
            if (o->max_concurrent_trials == 0) {
                double at = pow(o->divisor, o->num_rungs - 1);
                a.max_concurrent_trials = at < 1 ? 1 : at > (double)o->max_trials ? o->max_trials : (int64_t)at;
            }
        }
        rc = cti_asha_plan_make(&a, &s->plan);
        for (int b = 0; rc == 0 && b < s->plan.n; b++) {
            s->total += s->plan.b[b].max_trials;
            s->brackets[b] = cti_rungs_new(&s->plan.b[b], o->divisor, o->stop_once, o->smaller_is_better,
                                          &s->next_id);
            if (!s->brackets[b]) rc = CT_ENOMEM;
        }
        break;
    }
    }
    /* The trials created at the start: each holds its hyperparameters and
     * its record from then on. */
    int64_t at_once = 0;
    if (cti_searcher_kind_is_asha(o->kind))
        for (int b = 0; b < s->plan.n; b++) at_once += s->plan.b[b].initial;
    else
        at_once = s->o.max_concurrent_trials == 0 || s->o.max_concurrent_trials > s->total
                      ? s->total
                      : s->o.max_concurrent_trials;
    if (!rc && o->max_length > CT_SEARCH_MAX_LENGTH)
        rc = ct_set_error(CT_ECONFIG, "searcher.max_length is %lld, more than the %lld a search counts to",
                          (long long)o->max_length, (long long)CT_SEARCH_MAX_LENGTH);
    if (!rc && at_once > CT_SEARCH_MAX_AT_ONCE)
        rc = ct_set_error(CT_ECONFIG,
                          "searcher '%s': %lld trials would be created at the start (max_concurrent_trials %lld%s "
                          "of %lld), more than the %d ctrial creates at once: set searcher.max_concurrent_trials "
                          "to the trials to run side by side (Determined's default is 16); the others are created "
                          "as trials finish",
                          cti_searcher_kind_name(o->kind), (long long)at_once, (long long)o->max_concurrent_trials,
                          o->max_concurrent_trials == 0 ? ": no limit, all" : "", (long long)s->total,
                          CT_SEARCH_MAX_AT_ONCE);
    if (rc) {
        cti_searcher_free(s);
        return NULL;
    }
    return s;
}

void cti_searcher_free(cti_searcher *s) {
    if (!s) return;
    for (int b = 0; b < s->plan.n; b++) cti_rungs_free(s->brackets[b]);
    for (int64_t i = 0; i < s->cap_trials; i++) json_decref(s->trials[i].hparams);
    free(s->trials);
    free(s);
}

/* ---- trials ------------------------------------------------------------------ */

/* Determined's NewCreate after sampling: a request id (16 bytes from 4
 * draws, little-endian, made a UUIDv4) and the trial seed (one draw,
 * Int64n(1 << 31)). */
static void identity(cti_searcher *s, trial_info *t) {
    uint8_t u[16];
    for (int i = 0; i < 4; i++) {
        uint32_t w = cti_mt19937_next32(&s->mt);
        for (int j = 0; j < 4; j++) u[4 * i + j] = (uint8_t)(w >> (8 * j));
    }
    u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);
    u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
    char *p = t->request_id;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
        p += sprintf(p, "%02x", u[i]);
    }
    t->seed = cti_mt19937_next32(&s->mt) & 0x7fffffffu;
}

/* A CREATE's trial: its hyperparameters (sampled, or the grid's next point
 * from the end) and identity, in the order the CREATEs come out. */
static int register_trial(cti_searcher *s, int64_t id, int bracket) {
    if (id >= s->cap_trials) {
        int64_t cap = s->cap_trials ? 2 * s->cap_trials : 64;
        while (cap <= id) cap *= 2;
        trial_info *v = realloc(s->trials, (size_t)cap * sizeof *v);
        if (!v) return oom();
        memset(v + s->cap_trials, 0, (size_t)(cap - s->cap_trials) * sizeof *v);
        s->trials = v;
        s->cap_trials = cap;
    }
    trial_info *t = &s->trials[id];
    t->hparams = s->o.kind == CT_SEARCHER_GRID ? cti_hp_space_grid_point(s->space, s->grid_len - id)
                                               : cti_hp_space_sample(s->space, &s->mt);
    if (!t->hparams) return ct_last_code() ? ct_last_code() : oom();
    t->bracket = bracket;
    identity(s, t);
    s->created++;
    return 0;
}

/* Registers the CREATEs among out->v[from..] (bracket b's operations). */
static int register_creates(cti_searcher *s, const cti_search_ops *out, size_t from, int bracket) {
    for (size_t i = from; i < out->n; i++) {
        if (out->v[i].kind != CT_SEARCH_CREATE) continue;
        int rc = register_trial(s, out->v[i].trial, bracket);
        if (!rc && cti_searcher_kind_is_asha(s->o.kind)) rc = cti_rungs_created(s->brackets[bracket], out->v[i].trial);
        if (rc) return rc;
    }
    return 0;
}

/* random / grid / single: CREATE, TRAIN to max_length, CLOSE. */
static int create_whole(cti_searcher *s, cti_search_ops *out) {
    size_t from = out->n;
    int64_t id = s->next_id++;
    int rc = cti_search_ops_push(out, CT_SEARCH_CREATE, id, 0);
    if (!rc) rc = cti_search_ops_push(out, CT_SEARCH_TRAIN, id, s->o.max_length);
    if (!rc) rc = cti_search_ops_push(out, CT_SEARCH_CLOSE, id, 0);
    return rc ? rc : register_creates(s, out, from, 0);
}

/* ---- operations -------------------------------------------------------------- */

int cti_searcher_start(cti_searcher *s, cti_search_ops *out) {
    if (cti_searcher_kind_is_asha(s->o.kind)) {
        for (int b = 0; b < s->plan.n; b++) {
            size_t from = out->n;
            int rc = cti_rungs_start(s->brackets[b], out);
            if (!rc) rc = register_creates(s, out, from, b);
            if (rc) return rc;
        }
        return 0;
    }
    int64_t n = s->o.max_concurrent_trials == 0 || s->o.max_concurrent_trials > s->total ? s->total
                                                                                        : s->o.max_concurrent_trials;
    for (int64_t i = 0; i < n; i++) {
        int rc = create_whole(s, out);
        if (rc) return rc;
    }
    return 0;
}

static trial_info *known(const cti_searcher *s, int64_t trial) {
    trial_info *t = info(s, trial);
    if (!t) ct_set_error(CT_EINVAL, "search: trial %lld was not created", (long long)trial);
    return t;
}

int cti_searcher_validated(cti_searcher *s, int64_t trial, double metric, cti_search_ops *out) {
    trial_info *t = known(s, trial);
    if (!t) return CT_EINVAL;
    if (!cti_searcher_kind_is_asha(s->o.kind)) return 0; /* its CLOSE is already out */
    if (isnan(metric)) metric = s->o.smaller_is_better ? INFINITY : -INFINITY;
    size_t from = out->n;
    int rc = cti_rungs_validated(s->brackets[t->bracket], trial, metric, out);
    return rc ? rc : register_creates(s, out, from, t->bracket);
}

/* random, grid: one more trial when one leaves, until all are created. */
static int replace(cti_searcher *s, cti_search_ops *out) {
    return s->created < s->total ? create_whole(s, out) : 0;
}

int cti_searcher_exited(cti_searcher *s, int64_t trial, cti_search_ops *out) {
    trial_info *t = known(s, trial);
    if (!t) return CT_EINVAL;
    s->closed++;
    if (!cti_searcher_kind_is_asha(s->o.kind)) return replace(s, out);
    size_t from = out->n;
    int rc = cti_rungs_exited(s->brackets[t->bracket], trial, out);
    return rc ? rc : register_creates(s, out, from, t->bracket);
}

int cti_searcher_closed(cti_searcher *s, int64_t trial, cti_search_ops *out) {
    trial_info *t = known(s, trial);
    if (!t) return CT_EINVAL;
    s->closed++;
    if (!cti_searcher_kind_is_asha(s->o.kind)) return replace(s, out);
    return cti_rungs_closed(s->brackets[t->bracket], trial);
}

bool cti_searcher_done(const cti_searcher *s) { return s->created == s->total && s->closed == s->created; }
int64_t cti_searcher_created(const cti_searcher *s) { return s->created; }
int64_t cti_searcher_total(const cti_searcher *s) { return s->total; }

const json_t *cti_searcher_hparams(const cti_searcher *s, int64_t trial) {
    const trial_info *t = info(s, trial);
    return t ? t->hparams : NULL;
}

uint32_t cti_searcher_trial_seed(const cti_searcher *s, int64_t trial) {
    const trial_info *t = info(s, trial);
    return t ? t->seed : 0;
}

const char *cti_searcher_request_id(const cti_searcher *s, int64_t trial) {
    const trial_info *t = info(s, trial);
    return t ? t->request_id : NULL;
}

int cti_searcher_bracket(const cti_searcher *s, int64_t trial) {
    const trial_info *t = info(s, trial);
    return t ? t->bracket : -1;
}

const cti_asha_plan *cti_searcher_plan(const cti_searcher *s) {
    return cti_searcher_kind_is_asha(s->o.kind) ? &s->plan : NULL;
}
