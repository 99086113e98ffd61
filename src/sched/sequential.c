/* src/sched/sequential.c — SequentialLR: one scheduler after another,
 * switching at the milestones.
 *
 * Its constructor undoes what the schedulers' own constructors did (each
 * one stepped the lrs once): the lrs go back to initial_lr, every
 * scheduler's last_epoch goes back by one, and only the first scheduler
 * takes its first step again. At a milestone the next scheduler starts
 * with _update_lr(0), its closed form at epoch 0. */
#include <stdlib.h>
#include <string.h>

#include "sched/scheduler.h"

typedef struct {
    ct_sched base; /* base_lrs unused: Python's never calls LRScheduler.__init__ */
    int n;
    ct_sched **scheds;   /* owned */
    int64_t *milestones; /* n - 1 */
} Sequential;

static const cti_sched_ops kSequential;

/* bisect.bisect_right (Python does not require sorted milestones). */
static int bisect_right(const int64_t *a, int n, int64_t x) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (x < a[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static int sequential_step(ct_sched *s) {
    Sequential *k = (Sequential *)s;
    s->last_epoch++;
    int idx = bisect_right(k->milestones, k->n - 1, s->last_epoch);
    ct_sched *next = k->scheds[idx];
    int rc;
    if (idx > 0 && k->milestones[idx - 1] == s->last_epoch) {
        rc = cti_sched_check_groups(next, "ct_sched_step");
        if (!rc) rc = cti_sched_update_lr(next, true, 0);
    } else {
        rc = ct_sched_step(next);
    }
    if (rc) return rc;
    memcpy(s->last_lr, next->last_lr, s->ngroups * sizeof *s->last_lr);
    return CT_OK;
}

/* ---- state dict ------------------------------------------------------------------ */

static void sequential_save(const ct_sched *s, cti_sdict *d) {
    const Sequential *k = (const Sequential *)s;
    ct_value *m = ct_value_list();
    for (int i = 0; m && i < k->n - 1; i++)
        if (ct_value_list_append(m, ct_value_int(k->milestones[i])) != 0) {
            ct_value_free(m);
            m = NULL;
        }
    cti_sdict_put(d, "_milestones", m);
    cti_sdict_int(d, "last_epoch", s->last_epoch);
    cti_sdict_floats(d, "_last_lr", s->last_lr, s->ngroups);
    ct_value *list = ct_value_list();
    for (int i = 0; list && i < k->n; i++) {
        cti_sdict sub = {ct_value_dict(), false};
        sub.bad = !sub.d;
        if (!sub.bad) k->scheds[i]->ops->save(k->scheds[i], &sub);
        if (sub.bad || ct_value_list_append(list, sub.d) != 0) {
            if (sub.bad) ct_value_free(sub.d);
            ct_value_free(list);
            list = NULL;
        }
    }
    cti_sdict_put(d, "_schedulers", list);
}

static int sequential_load(ct_sched *s, const ct_value *sd, bool apply) {
    static const char *const keys[] = {"_milestones", "last_epoch", "_last_lr", "_schedulers", NULL};
    Sequential *k = (Sequential *)s;
    cti_sreader r;
    cti_sreader_start(&r, s, sd, keys);
    const ct_value *m = cti_sread(&r, "_milestones");
    if (m && (ct_value_kind_of(m) != CT_VALUE_LIST || ct_value_len(m) != (size_t)(k->n - 1))) {
        cti_sreader_fail(&r, "has '_milestones' that is not a list of %d milestones", k->n - 1);
        r.code = CT_EINVAL;
    }
    for (int i = 0; !r.code && i < k->n - 1; i++)
        if (ct_value_get_int(ct_value_list_get(m, (size_t)i), NULL) != 0)
            cti_sreader_fail(&r, "has _milestones[%d] that is not an int", i);
    int64_t last_epoch = cti_sread_int(&r, "last_epoch");
    cti_sread_floats(&r, "_last_lr", s->ngroups, apply ? s->last_lr : NULL);
    const ct_value *subs = cti_sread(&r, "_schedulers");
    if (subs && (ct_value_kind_of(subs) != CT_VALUE_LIST || ct_value_len(subs) != (size_t)k->n)) {
        cti_sreader_fail(&r, "has '_schedulers' that is not a list of %d state dicts", k->n);
        r.code = CT_EINVAL;
    }
    int rc = cti_sreader_end(&r);
    for (int i = 0; !rc && i < k->n; i++)
        rc = k->scheds[i]->ops->load(k->scheds[i], ct_value_list_get(subs, (size_t)i), apply);
    if (rc || !apply) return rc;
    for (int i = 0; i < k->n - 1; i++) ct_value_get_int(ct_value_list_get(m, (size_t)i), &k->milestones[i]);
    s->last_epoch = last_epoch;
    return CT_OK;
}

static void sequential_destroy(ct_sched *s) {
    Sequential *k = (Sequential *)s;
    for (int i = 0; i < k->n; i++) ct_sched_free(k->scheds[i]);
    free(k->scheds);
    free(k->milestones);
}

static const cti_sched_ops kSequential = {"SequentialLR", NULL, NULL, sequential_step,
                                         sequential_save, sequential_load, sequential_destroy};

/* ---- construction ----------------------------------------------------------------- */

/* 0, or why the schedulers cannot be taken. */
static int check_scheds(ct_optim *opt, int n, ct_sched *const *scheds, const int64_t *milestones,
                        const char *fn) {
    if (!opt) return ct_set_error(CT_EINVAL, "%s: optimizer is NULL", fn);
    if (n < 1 || !scheds)
        return ct_set_error(CT_EINVAL, "%s: SequentialLR expects at least one scheduler, but got no scheduler.", fn);
    if (n > 1 && !milestones) return ct_set_error(CT_EINVAL, "%s: %d milestones expected, got NULL", fn, n - 1);
    for (int i = 0; i < n; i++) {
        const ct_sched *c = scheds[i];
        if (!c) {
            /* Most likely a constructor failed: keep its message. */
            if (ct_last_code() != CT_OK) return ct_last_code();
            return ct_set_error(CT_EINVAL, "%s: the scheduler at index %d is NULL", fn, i);
        }
        if (c->adopted) return ct_set_error(CT_EINVAL, "%s: the scheduler at index %d belongs to another SequentialLR", fn, i);
        for (int j = 0; j < i; j++)
            if (scheds[j] == c) return ct_set_error(CT_EINVAL, "%s: the scheduler at index %d is also at index %d", fn, i, j);
        if (strcmp(c->ops->name, "ReduceLROnPlateau") == 0)
            return ct_set_error(CT_EINVAL,
                                "%s: SequentialLR does not support `ReduceLROnPlateau` scheduler as it requires "
                                "additional kwargs to be specified when calling `step`, but got one at index %d "
                                "in the given schedulers sequence.",
                                fn, i);
        if (c->ops == &kSequential)
            return ct_set_error(CT_ENOTSUP, "%s: a SequentialLR inside a SequentialLR (index %d) is not supported", fn, i);
        if (c->opt == opt && c->ngroups != ct_optim_num_groups(opt))
            return ct_set_error(CT_ESTATE, "%s: the scheduler at index %d was made for %zu param groups, the "
                                "optimizer now has %zu", fn, i, c->ngroups, ct_optim_num_groups(opt));
        if (c->opt != opt)
            return ct_set_error(CT_EINVAL,
                                "%s: SequentialLR expects all schedulers to belong to the same optimizer, but got "
                                "scheduler %s at index %d has another optimizer, which is different from %s.",
                                fn, c->ops->name, i, ct_optim_type(opt));
    }
    return CT_OK;
}

ct_sched *ct_sched_sequential(ct_optim *opt, int n, ct_sched *const *scheds, const int64_t *milestones) {
    static const char *fn = "ct_sched_sequential";
    if (check_scheds(opt, n, scheds, milestones, fn) != 0) {
        /* Ownership was given: free what was given, except what another
         * SequentialLR owns or what appears twice. */
        for (int i = 0; scheds && i < n; i++) {
            bool twice = false;
            for (int j = 0; j < i; j++) twice = twice || scheds[j] == scheds[i];
            if (scheds[i] && !twice && !scheds[i]->adopted) ct_sched_free(scheds[i]);
        }
        return NULL;
    }
    Sequential *k = (Sequential *)cti_sched_alloc(sizeof *k, &kSequential, opt, false, fn);
    if (k) {
        k->scheds = malloc((size_t)n * sizeof *k->scheds);
        k->milestones = malloc((size_t)(n > 1 ? n - 1 : 1) * sizeof *k->milestones);
    }
    if (!k || !k->scheds || !k->milestones) {
        if (k) ct_set_error(CT_ENOMEM, "%s: out of memory", fn);
        if (k) k->n = 0;
        ct_sched_free(k ? &k->base : NULL);
        for (int i = 0; i < n; i++) ct_sched_free(scheds[i]);
        return NULL;
    }
    k->n = n;
    for (int i = 0; i < n; i++) {
        k->scheds[i] = scheds[i];
        scheds[i]->adopted = true;
    }
    if (n > 1) memcpy(k->milestones, milestones, (size_t)(n - 1) * sizeof *milestones);
    ct_sched *s = &k->base;
    s->last_epoch = 0; /* last_epoch + 1 */

    /* Back to the initial lrs, every scheduler one epoch back, and the first
     * one's first step again. */
    int rc = CT_OK;
    for (size_t g = 0; g < s->ngroups && !rc; g++) {
        double init;
        rc = ct_optim_get_option(opt, g, "initial_lr", &init);
        if (!rc) rc = ct_optim_set_lr(opt, g, init);
    }
    for (int i = 0; i < n; i++) k->scheds[i]->last_epoch -= 1;
    if (!rc) rc = cti_sched_initial_step(k->scheds[0]);
    if (rc) {
        ct_sched_free(s);
        return NULL;
    }
    memcpy(s->last_lr, k->scheds[0]->last_lr, s->ngroups * sizeof *s->last_lr);
    return s;
}
