/* The searchers behind one interface (src/search/searcher.h) against
 * Determined's own expectations: adaptive_asha as a tournament of brackets
 * (OLD TestAdaptiveASHASearchMethod and TestAdaptiveASHAStoppingSearchMethod:
 * 900 batches, 5 trials, standard, max_rungs 2, divisor 3), random's
 * concurrency and trial count, grid's order, and the identity Determined
 * gives a single trial (request id and trial seed from the experiment
 * seed). Driven first in, first out, as Determined's simulations are. */
#include <stdlib.h>
#include <string.h>

#include "ct_test.h"
#include "search/searcher.h"

#define MAX 32

typedef struct {
    char lengths[MAX][64]; /* "300 900": the TRAIN lengths each trial got */
    int creates, closes[MAX], trains;
    int max_in_flight;     /* trials created and not closed, at most */
} trace;

/* Runs s to its end; metric(trial) is what a trial reports at every TRAIN.
 * Returns false when the search does not end or a trial closes twice. */
static bool drive(cti_searcher *s, double (*metric)(int64_t), trace *t) {
    memset(t, 0, sizeof *t);
    cti_search_ops q = {0};
    if (cti_searcher_start(s, &q) != 0) return false;
    int in_flight = 0;
    for (size_t head = 0; head < q.n; head++) {
        cti_search_op op = q.v[head];
        if (op.trial < 1 || op.trial >= MAX) return false;
        int rc = 0;
        if (op.kind == CT_SEARCH_CREATE) {
            t->creates++;
            if (++in_flight > t->max_in_flight) t->max_in_flight = in_flight;
        } else if (op.kind == CT_SEARCH_TRAIN) {
            t->trains++;
            size_t n = strlen(t->lengths[op.trial]);
            snprintf(t->lengths[op.trial] + n, sizeof t->lengths[0] - n, "%s%lld", n ? " " : "", (long long)op.length);
            rc = cti_searcher_validated(s, op.trial, metric(op.trial), &q);
        } else {
            if (t->closes[op.trial]++) return false;
            in_flight--;
            rc = cti_searcher_closed(s, op.trial, &q);
        }
        if (rc != 0) return false;
    }
    free(q.v);
    return cti_searcher_done(s);
}

static double tenth(int64_t trial) { return 0.1 * (double)trial; }

static void check_lengths(const trace *t, const char *const *want, int n, const char *what) {
    for (int i = 1; i <= n; i++) {
        bool ok = strcmp(t->lengths[i], want[i - 1]) == 0;
        if (!ok) fprintf(stderr, "  %s: trial %d got '%s', want '%s'\n", what, i, t->lengths[i], want[i - 1]);
        CHECK(ok);
    }
}

static void adaptive(void) {
    json_t *none = json_object();
    cti_hp_space *space = cti_hp_space_new(none, "hyperparameters", false);
    json_decref(none);
    CHECK(space != NULL);
    cti_searcher_opts o = cti_searcher_defaults();
    o.kind = CT_SEARCHER_ADAPTIVE_ASHA;
    o.max_trials = 5;
    o.max_length = 900;
    o.max_rungs = 2;
    o.divisor = 3;
    trace t;
    /* promotion (stop_once false): smaller is better, metrics .1 .. .5 */
    cti_searcher *s = cti_searcher_new(&o, space);
    CHECK(s != NULL && cti_searcher_total(s) == 5);
    const cti_asha_plan *p = cti_searcher_plan(s);
    CHECK(p->n == 2 && p->b[0].max_trials == 3 && p->b[1].max_trials == 2 && p->b[0].units[0] == 300 &&
          p->b[0].units[1] == 900 && p->b[1].units[0] == 900);
    CHECK(drive(s, tenth, &t));
    check_lengths(&t, (const char *const[]){"300 900", "300", "300", "900", "900"}, 5, "promotion");
    CHECK(t.creates == 5 && cti_searcher_created(s) == 5);
    CHECK(cti_searcher_bracket(s, 1) == 0 && cti_searcher_bracket(s, 4) == 1);
    cti_searcher_free(s);
    /* early stopping, not smaller is better: .1 .. .5 each beats the last */
    o.stop_once = true;
    o.smaller_is_better = false;
    s = cti_searcher_new(&o, space);
    CHECK(drive(s, tenth, &t));
    check_lengths(&t, (const char *const[]){"300 900", "300 900", "300 900", "900", "900"}, 5, "stop_once");
    cti_searcher_free(s);
    cti_hp_space_free(space);
}

/* async_halving: adaptive_asha's one bracket of num_rungs (asha_stopping.go):
 * rung k of r at L / d^(r-1-k), every trial in it, started min(mc, T) at
 * once, or for mc 0 d^(r-1) clamped to [1, T]. */
static void async_halving(void) {
    json_t *none = json_object();
    cti_hp_space *space = cti_hp_space_new(none, "hyperparameters", false);
    json_decref(none);
    cti_searcher_opts o = cti_searcher_defaults();
    o.kind = CT_SEARCHER_ASYNC_HALVING;
    o.max_trials = 5;
    o.max_length = 900;
    o.num_rungs = 3;
    o.divisor = 3;
    o.stop_once = true;
    o.max_concurrent_trials = 2;
    CHECK(strcmp(cti_searcher_kind_name(o.kind), "async_halving") == 0 && cti_searcher_kind_is_asha(o.kind));
    cti_searcher *s = cti_searcher_new(&o, space);
    const cti_asha_plan *p = s ? cti_searcher_plan(s) : NULL;
    CHECK(p && p->n == 1 && p->b[0].rungs == 3 && p->b[0].max_trials == 5 && p->b[0].initial == 2 &&
          p->b[0].units[0] == 100 && p->b[0].units[1] == 300 && p->b[0].units[2] == 900);
    CHECK(s && cti_searcher_total(s) == 5);
    /* early stopping, smaller is better: .1 .. .5 get worse, so after the
     * first trial each stops at its first rung */
    trace t;
    CHECK(s && drive(s, tenth, &t));
    check_lengths(&t, (const char *const[]){"100 300 900", "100", "100", "100", "100"}, 5, "async_halving");
    cti_searcher_free(s);
    o.max_concurrent_trials = 0; /* 3^2 = 9, clamped to the 5 trials */
    s = cti_searcher_new(&o, space);
    p = s ? cti_searcher_plan(s) : NULL;
    CHECK(p && p->b[0].initial == 5);
    cti_searcher_free(s);
    o.num_rungs = 1; /* 3^0 = 1 at once */
    s = cti_searcher_new(&o, space);
    p = s ? cti_searcher_plan(s) : NULL;
    CHECK(p && p->b[0].initial == 1 && p->b[0].units[0] == 900);
    cti_searcher_free(s);
    cti_hp_space_free(space);
}

static void random_and_single(void) {
    json_t *hps = json_pack("{s{sssfsf}}", "lr", "type", "double", "minval", 0.0, "maxval", 1.0);
    cti_hp_space *space = cti_hp_space_new(hps, "hyperparameters", false);
    cti_searcher_opts o = cti_searcher_defaults();
    o.kind = CT_SEARCHER_RANDOM;
    o.max_trials = 5;
    o.max_concurrent_trials = 2;
    o.max_length = 10;
    trace t;
    cti_searcher *s = cti_searcher_new(&o, space);
    cti_search_ops q = {0};
    CHECK(cti_searcher_start(s, &q) == 0);
    CHECK(q.n == 6 && q.v[0].kind == CT_SEARCH_CREATE && q.v[1].kind == CT_SEARCH_TRAIN && q.v[1].length == 10 &&
          q.v[2].kind == CT_SEARCH_CLOSE && q.v[3].trial == 2); /* max_concurrent_trials at first */
    free(q.v);
    cti_searcher_free(s);
    s = cti_searcher_new(&o, space);
    CHECK(drive(s, tenth, &t));
    CHECK(t.creates == 5 && t.trains == 5 && t.max_in_flight <= 2);
    /* numpy's RandomState(0): the first trial's draw, then its identity */
    CHECK(json_real_value(json_object_get(cti_searcher_hparams(s, 1), "lr")) == 0.5488135039273248);
    cti_searcher_free(s);
    o.max_concurrent_trials = 0; /* no limit: all at once */
    s = cti_searcher_new(&o, space);
    q = (cti_search_ops){0};
    CHECK(cti_searcher_start(s, &q) == 0 && q.n == 15);
    free(q.v);
    cti_searcher_free(s);
    cti_hp_space_free(space);
    json_decref(hps);

    /* single, seed 0, nothing sampled: Determined's first Create */
    json_t *none = json_object();
    space = cti_hp_space_new(none, "hyperparameters", false);
    o = cti_searcher_defaults();
    o.max_length = 3;
    s = cti_searcher_new(&o, space);
    CHECK(drive(s, tenth, &t) && t.creates == 1);
    CHECK(strcmp(cti_searcher_request_id(s, 1), "ac0a7f8c-2faa-4497-b5a6-16b7c0cc21d8") == 0);
    CHECK(cti_searcher_trial_seed(s, 1) == 441365315u);
    CHECK(cti_searcher_hparams(s, 2) == NULL && cti_searcher_trial_seed(s, 2) == 0);
    cti_searcher_free(s);
    o.seed = 42;
    s = cti_searcher_new(&o, space);
    CHECK(drive(s, tenth, &t));
    CHECK(strcmp(cti_searcher_request_id(s, 1), "66dce15f-b33d-4acb-9c03-62f30e95f52e") == 0 &&
          cti_searcher_trial_seed(s, 1) == 996406378u);
    cti_searcher_free(s);
    /* a grid of no hyperparameter has no point: refused */
    o.kind = CT_SEARCHER_GRID;
    cti_hp_space *grid = cti_hp_space_new(none, "hyperparameters", true);
    CHECK(cti_searcher_new(&o, grid) == NULL && ct_last_code() == CT_ECONFIG);
    cti_hp_space_free(grid);
    cti_hp_space_free(space);
    json_decref(none);
}

static void grid(void) {
    /* TestGrid: "1" int 0..20 count 3, "2" int 0..10 count 3 */
    json_t *hps = json_pack("{s{sssisisi}s{sssisisi}}", "1", "type", "int", "minval", 0, "maxval", 20, "count", 3, "2",
                            "type", "int", "minval", 0, "maxval", 10, "count", 3);
    cti_hp_space *space = cti_hp_space_new(hps, "hyperparameters", true);
    cti_searcher_opts o = cti_searcher_defaults();
    o.kind = CT_SEARCHER_GRID;
    o.max_length = 1;
    cti_searcher *s = cti_searcher_new(&o, space);
    trace t;
    CHECK(s && cti_searcher_total(s) == 9 && drive(s, tenth, &t) && t.creates == 9);
    /* created from the last point: (20,10), (20,5), ... (0,0) */
    static const int want[9][2] = {{20, 10}, {20, 5}, {20, 0}, {10, 10}, {10, 5}, {10, 0}, {0, 10}, {0, 5}, {0, 0}};
    for (int i = 0; i < 9; i++) {
        const json_t *h = cti_searcher_hparams(s, i + 1);
        CHECK(json_integer_value(json_object_get(h, "1")) == want[i][0] &&
              json_integer_value(json_object_get(h, "2")) == want[i][1]);
    }
    cti_searcher_free(s);
    cti_hp_space_free(space);
    json_decref(hps);
}

/* max_concurrent_trials 0 creates every trial at the start, as in
 * Determined: past CT_SEARCH_MAX_AT_ONCE of them the search is refused
 * (CT_ECONFIG, exit 2 from ct_main) before anything is created, where
 * Determined would hold them all (a grid of 10^12 points, 2^31 - 1 random
 * trials: gigabytes before any trial trains). Within the bound, and with a
 * limit, nothing changes: the bound is on trials created at once, not on
 * the search's total. */
static void too_many_at_once(void) {
    json_t *hps = json_pack("{s{sssisisi}s{sssisisi}}", "a", "type", "int", "minval", 0, "maxval", 1000000000, "count",
                            1000000, "b", "type", "int", "minval", 0, "maxval", 1000000000, "count", 1000000);
    cti_hp_space *space = cti_hp_space_new(hps, "hyperparameters", true);
    cti_searcher_opts o = cti_searcher_defaults();
    o.kind = CT_SEARCHER_GRID;
    o.max_length = 1;
    o.max_concurrent_trials = 0;
    CHECK(cti_searcher_new(&o, space) == NULL);
    CHECK_ERR(CT_ECONFIG, "searcher 'grid': 1000000000000 trials would be created at the start "
                          "(max_concurrent_trials 0: no limit, all of 1000000000000), more than the 100000");
    o.max_concurrent_trials = 16; /* the grid's 10^12 points, 16 at a time */
    cti_searcher *s = cti_searcher_new(&o, space);
    cti_search_ops q = {0};
    CHECK(s && cti_searcher_total(s) == 1000000000000 && cti_searcher_start(s, &q) == 0 && cti_searcher_created(s) == 16);
    free(q.v);
    cti_searcher_free(s);

    o.kind = CT_SEARCHER_RANDOM;
    o.max_trials = 2147483647;
    o.max_concurrent_trials = 0;
    CHECK(cti_searcher_new(&o, space) == NULL);
    CHECK_ERR(CT_ECONFIG, "searcher 'random': 2147483647 trials would be created at the start");
    o.max_concurrent_trials = 100001;
    CHECK(cti_searcher_new(&o, space) == NULL);
    CHECK_ERR(CT_ECONFIG, "(max_concurrent_trials 100001 of 2147483647)");
    o.max_trials = 100000; /* at the bound: as Determined, all at the start */
    o.max_concurrent_trials = 0;
    s = cti_searcher_new(&o, space);
    q = (cti_search_ops){0};
    CHECK(s && cti_searcher_start(s, &q) == 0 && cti_searcher_created(s) == 100000);
    free(q.v);
    cti_searcher_free(s);

    o.kind = CT_SEARCHER_ADAPTIVE_ASHA;
    o.max_length = 900;
    o.max_trials = 1000000;
    o.max_concurrent_trials = 0;
    CHECK(cti_searcher_new(&o, space) == NULL);
    CHECK_ERR(CT_ECONFIG, "searcher 'adaptive_asha':");
    cti_hp_space_free(space);
    json_decref(hps);
}

int main(void) {
    too_many_at_once();
    adaptive();
    async_halving();
    random_and_single();
    grid();
    return ct_test_result("search_searcher");
}
