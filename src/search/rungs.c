/* src/search/rungs.c — one adaptive ASHA bracket's search (rungs.h),
 * step for step as Determined's asha.go (promotion) and asha_stopping.go
 * (stop_once) before v0.38. */
#include "search/rungs.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/error.h"

#define EXITED DBL_MAX /* an early exit's result: the worst there is */

typedef struct {
    double metric;
    int64_t trial;
    bool promoted;
} result;

typedef struct {
    int64_t units;
    result *results; /* sorted, best (smallest) first */
    size_t n, cap;
    int64_t outstanding; /* trials due to report here */
} rung;

typedef struct {
    int rung;
    bool mine, exited, closed;
} trial_state;

struct cti_rungs {
    int n_rungs;
    rung rungs[CT_ASHA_MAX_RUNGS];
    int64_t max_trials, initial;
    double divisor;
    bool stop_once, smaller_is_better;
    int64_t *next_id;
    trial_state *trials; /* by id; ids of other brackets are not mine */
    int64_t cap_trials;
    int64_t created, closed;
};

static int oom(void) { return ct_set_error(CT_ENOMEM, "search: out of memory"); }

int cti_search_ops_push(cti_search_ops *out, cti_search_op_kind kind, int64_t trial, int64_t length) {
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 16;
        cti_search_op *v = realloc(out->v, cap * sizeof *v);
        if (!v) return oom();
        out->v = v;
        out->cap = cap;
    }
    out->v[out->n++] = (cti_search_op){kind, trial, length};
    return 0;
}

static trial_state *state_of(cti_rungs *r, int64_t trial) {
    if (trial < 1) return NULL;
    if (trial >= r->cap_trials) {
        int64_t cap = r->cap_trials ? 2 * r->cap_trials : 64;
        while (cap <= trial) cap *= 2;
        trial_state *t = realloc(r->trials, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        memset(t + r->cap_trials, 0, (size_t)(cap - r->cap_trials) * sizeof *t);
        r->trials = t;
        r->cap_trials = cap;
    }
    return &r->trials[trial];
}

cti_rungs *cti_rungs_new(const cti_asha_bracket *b, double divisor, bool stop_once, bool smaller_is_better,
                       int64_t *next_id) {
    cti_rungs *r = calloc(1, sizeof *r);
    if (!r) {
        oom();
        return NULL;
    }
    r->n_rungs = b->rungs;
    for (int k = 0; k < b->rungs; k++) r->rungs[k].units = b->units[k];
    r->max_trials = b->max_trials;
    r->initial = b->initial;
    r->divisor = divisor;
    r->stop_once = stop_once;
    r->smaller_is_better = smaller_is_better;
    r->next_id = next_id;
    return r;
}

void cti_rungs_free(cti_rungs *r) {
    if (!r) return;
    for (int k = 0; k < r->n_rungs; k++) free(r->rungs[k].results);
    free(r->trials);
    free(r);
}

/* CREATE + TRAIN to the first rung, the trial registered as this bracket's. */
static int create(cti_rungs *r, cti_search_ops *out) {
    int64_t id = (*r->next_id)++;
    trial_state *t = state_of(r, id);
    if (!t) return oom();
    *t = (trial_state){.mine = true};
    r->created++;
    int rc = cti_search_ops_push(out, CT_SEARCH_CREATE, id, 0);
    return rc ? rc : cti_search_ops_push(out, CT_SEARCH_TRAIN, id, r->rungs[0].units);
}

int cti_rungs_start(cti_rungs *r, cti_search_ops *out) {
    for (int64_t i = 0; i < r->initial; i++) {
        int rc = create(r, out);
        if (rc) return rc;
    }
    return 0;
}

static trial_state *mine(cti_rungs *r, int64_t trial) {
    trial_state *t = trial >= 1 && trial < r->cap_trials ? &r->trials[trial] : NULL;
    if (!t || !t->mine) {
        ct_set_error(CT_EINVAL, "search: trial %lld is not one of this bracket's", (long long)trial);
        return NULL;
    }
    return t;
}

int cti_rungs_created(cti_rungs *r, int64_t trial) {
    trial_state *t = mine(r, trial);
    if (!t) return CT_EINVAL;
    r->rungs[0].outstanding++;
    t->rung = 0;
    return 0;
}

/* Inserts {metric, trial, promoted} before the first result that is
 * greater (after_equal: ties go after the earlier results) or greater or
 * equal (ties go before them). Returns its index, or -1 out of memory. */
static ptrdiff_t insert(rung *g, double metric, int64_t trial, bool after_equal, bool promoted) {
    size_t i = 0;
    while (i < g->n && (after_equal ? g->results[i].metric <= metric : g->results[i].metric < metric)) i++;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        result *v = realloc(g->results, cap * sizeof *v);
        if (!v) return -1;
        g->results = v;
        g->cap = cap;
    }
    memmove(g->results + i + 1, g->results + i, (g->n - i) * sizeof *g->results);
    g->results[i] = (result){metric, trial, promoted};
    g->n++;
    return (ptrdiff_t)i;
}

/* rung.promotionsAsync: the trials that this result promotes (at most
 * one: the newcomer, or the one that moves into the top part). */
static int promotions(cti_rungs *r, rung *g, int64_t trial, double metric, int64_t *promoted) {
    size_t old_num = (size_t)((double)g->n / r->divisor), num = (size_t)((double)(g->n + 1) / r->divisor);
    size_t idx = 0;
    while (idx < g->n && g->results[idx].metric <= metric) idx++;
    bool now = idx < num;
    if (insert(g, metric, trial, true, now) < 0) return oom();
    *promoted = 0;
    if (now) *promoted = trial;
    else if (num != old_num && !g->results[old_num].promoted) {
        g->results[old_num].promoted = true;
        *promoted = g->results[old_num].trial;
    }
    return 0;
}

/* closeOutRungs: from the bottom rung up to the first with a trial still
 * due, every result not promoted is closed. */
static int close_out(cti_rungs *r, cti_search_ops *out) {
    for (int k = 0; k < r->n_rungs && r->rungs[k].outstanding == 0; k++)
        for (size_t i = 0; i < r->rungs[k].n; i++) {
            const result *x = &r->rungs[k].results[i];
            trial_state *t = &r->trials[x->trial];
            if (x->promoted || t->closed) continue;
            t->closed = true; /* an early exit is already closed */
            int rc = cti_search_ops_push(out, CT_SEARCH_CLOSE, x->trial, 0);
            if (rc) return rc;
        }
    return 0;
}

/* promoteAsync */
static int report(cti_rungs *r, int64_t trial, double metric, cti_search_ops *out) {
    trial_state *t = &r->trials[trial];
    int k = t->rung;
    rung *g = &r->rungs[k];
    g->outstanding--;
    bool trained = false;
    int rc = 0;
    if (k == r->n_rungs - 1) { /* the top rung: done */
        if (insert(g, metric, trial, true, false) < 0) return oom();
        if (!t->exited) {
            t->closed = true;
            rc = cti_search_ops_push(out, CT_SEARCH_CLOSE, trial, 0);
        }
    } else if (!r->stop_once) {
        int64_t p = 0;
        rc = promotions(r, g, trial, metric, &p);
        if (!rc && p) {
            trial_state *pt = &r->trials[p];
            pt->rung = k + 1;
            r->rungs[k + 1].outstanding++;
            if (pt->exited) return report(r, p, EXITED, out); /* as if it ran and got the worst */
            rc = cti_search_ops_push(out, CT_SEARCH_TRAIN, p, r->rungs[k + 1].units);
            trained = true;
        }
    } else { /* continueTraining */
        size_t num = (size_t)((double)(g->n + 1) / r->divisor);
        if (num < 1) num = 1;
        ptrdiff_t idx = insert(g, metric, trial, false, false);
        if (idx < 0) return oom();
        bool go_on = (size_t)idx < num;
        g->results[idx].promoted = go_on;
        if (!t->exited) {
            if (go_on) {
                t->rung = k + 1;
                r->rungs[k + 1].outstanding++;
                rc = cti_search_ops_push(out, CT_SEARCH_TRAIN, trial, r->rungs[k + 1].units);
                trained = true;
            } else {
                t->closed = true;
                rc = cti_search_ops_push(out, CT_SEARCH_CLOSE, trial, 0);
            }
        }
    }
    if (!rc && !trained && r->created < r->max_trials) rc = create(r, out);
    if (!rc && !r->stop_once && (int64_t)r->rungs[0].n == r->max_trials) rc = close_out(r, out);
    return rc;
}

int cti_rungs_validated(cti_rungs *r, int64_t trial, double metric, cti_search_ops *out) {
    trial_state *t = mine(r, trial);
    if (!t) return CT_EINVAL;
    return report(r, trial, r->smaller_is_better ? metric : -metric, out);
}

int cti_rungs_exited(cti_rungs *r, int64_t trial, cti_search_ops *out) {
    trial_state *t = mine(r, trial);
    if (!t) return CT_EINVAL;
    if (t->exited) return 0; /* reported once */
    t->exited = true;
    t->closed = true;
    r->closed++;
    return report(r, trial, EXITED, out);
}

int cti_rungs_closed(cti_rungs *r, int64_t trial) {
    trial_state *t = mine(r, trial);
    if (!t) return CT_EINVAL;
    if (!t->exited) r->closed++;
    return 0;
}

int64_t cti_rungs_created_count(const cti_rungs *r) { return r->created; }
int64_t cti_rungs_closed_count(const cti_rungs *r) { return r->closed; }
