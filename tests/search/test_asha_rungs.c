/* ASHA's decisions (src/search/rungs.h) against Determined's op-based tests
 * (asha_test.go, asha_stopping_test.go, adaptive_asha_test.go and
 * tournament_test.go before v0.38): trials get predefined metrics in the
 * order they are created, a driver runs the operations first in, first out
 * (util_test.go's checkValueSimulation), and each trial's TRAIN lengths
 * must be the test's. A trial may exit early when it gets a given TRAIN. */
#include <stdlib.h>

#include "ct_test.h"
#include "search/rungs.h"

/* A short case leaves `exits` false. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct {
    const char *lengths; /* "1000 3000 9000": the TRAIN lengths it must get */
    double metric;
    bool exits;          /* exits early on its last TRAIN instead of reporting */
} tcase;

#define MAX_TRIALS 16

#include <string.h>

typedef struct {
    cti_search_op op;
    int bracket;
} queued;

/* Runs the brackets of plan p (every bracket one search, as Determined's
 * tournament routes each trial to the bracket that created it) over the
 * cases; true when every trial got exactly its lengths. */
static bool run(const cti_asha_plan *p, double divisor, bool stop_once, bool smaller, const tcase *cases, int n,
                const char *what) {
    int64_t next_id = 1;
    cti_rungs *b[CT_ASHA_MAX_BRACKETS];
    int case_of[256], got_n[MAX_TRIALS] = {0}, n_created = 0;
    int64_t got[MAX_TRIALS][8];
    bool exited[256] = {false}, ok = true;
    int closes[256] = {0};
    queued *q = malloc(4096 * sizeof *q);
    size_t head = 0, tail = 0;
    for (int i = 0; i < p->n; i++) {
        b[i] = cti_rungs_new(&p->b[i], divisor, stop_once, smaller, &next_id);
        cti_search_ops ops = {0};
        CHECK(cti_rungs_start(b[i], &ops) == 0);
        for (size_t k = 0; k < ops.n; k++) q[tail++] = (queued){ops.v[k], i};
        free(ops.v);
    }
    while (head < tail && ok) {
        queued x = q[head++];
        cti_rungs *r = b[x.bracket];
        cti_search_ops ops = {0};
        int64_t id = x.op.trial;
        if (x.op.kind == CT_SEARCH_CREATE) {
            if (n_created >= n) {
                ok = false;
                fprintf(stderr, "  %s: more trials created than the %d expected\n", what, n);
                break;
            }
            case_of[id] = n_created++;
            CHECK(cti_rungs_created(r, id) == 0);
        } else if (x.op.kind == CT_SEARCH_TRAIN) {
            if (exited[id]) continue;
            int c = case_of[id];
            got[c][got_n[c]++] = x.op.length;
            int expected = 0; /* how many TRAINs the case expects */
            for (const char *s = cases[c].lengths; *s; s++) expected += *s != ' ' && (s[1] == ' ' || !s[1]);
            if (cases[c].exits && got_n[c] == expected) {
                exited[id] = true;
                CHECK(cti_rungs_exited(r, id, &ops) == 0);
            } else {
                CHECK(cti_rungs_validated(r, id, cases[c].metric, &ops) == 0);
            }
        } else {
            closes[id]++;
            CHECK(cti_rungs_closed(r, id) == 0);
        }
        for (size_t k = 0; k < ops.n; k++) q[tail++] = (queued){ops.v[k], x.bracket};
        free(ops.v);
    }
    ok &= n_created == n;
    /* the search ends with every trial closed once, or exited (then never closed) */
    for (int64_t id = 1; id < next_id && ok; id++)
        if (closes[id] != (exited[id] ? 0 : 1)) {
            fprintf(stderr, "  %s: trial %d closed %d times\n", what, case_of[id] + 1, closes[id]);
            ok = false;
        }
    int64_t created = 0, closed = 0;
    for (int i = 0; i < p->n; i++) created += cti_rungs_created_count(b[i]), closed += cti_rungs_closed_count(b[i]);
    ok &= created == n && closed == n;
    for (int c = 0; c < n && ok; c++) {
        char line[128] = "";
        size_t at = 0;
        for (int k = 0; k < got_n[c]; k++) at += (size_t)snprintf(line + at, sizeof line - at, "%s%lld", k ? " " : "", (long long)got[c][k]);
        if (strcmp(line, cases[c].lengths) != 0) {
            fprintf(stderr, "  %s: trial %d got \"%s\", expected \"%s\"\n", what, c + 1, line, cases[c].lengths);
            ok = false;
        }
    }
    for (int i = 0; i < p->n; i++) cti_rungs_free(b[i]);
    free(q);
    return ok;
}

/* async_halving: one bracket of n rungs, L units, T trials, divisor 3, mc 16 */
static cti_asha_plan halving(int rungs, int64_t length, int64_t trials, int brackets) {
    cti_asha_opts o = cti_asha_defaults();
    o.max_trials = trials * brackets;
    o.max_length = length;
    o.divisor = 3;
    o.max_concurrent_trials = 16 * brackets;
    int br[4] = {rungs, rungs, rungs, rungs};
    o.bracket_rungs = br;
    o.n_bracket_rungs = brackets;
    cti_asha_plan p;
    CHECK(cti_asha_plan_make(&o, &p) == 0);
    return p;
}

static void test_promotion(void) {
    cti_asha_plan p = halving(3, 9000, 12, 1);
    tcase smaller[12] = {{"1000 3000 9000", .01}, {"1000 3000", .02}, {"1000 3000", .03}, {"1000 3000", .04}};
    for (int i = 4; i < 12; i++) smaller[i] = (tcase){"1000", (i + 1) / 100.0};
    CHECK(run(&p, 3, false, true, smaller, 12, "promotion, smaller is better"));
    tcase exit3[12];
    memcpy(exit3, smaller, sizeof exit3);
    exit3[2].exits = true; /* trial 3 exits during its 3000 */
    CHECK(run(&p, 3, false, true, exit3, 12, "promotion, an early exit"));
    tcase larger[12] = {{"1000 3000 9000", .12}, {"1000 3000", .11}, {"1000 3000", .10}, {"1000 3000", .09}};
    for (int i = 4; i < 12; i++) larger[i] = (tcase){"1000", (12 - i) / 100.0};
    CHECK(run(&p, 3, false, false, larger, 12, "promotion, larger is better"));
    /* trial 1 is promoted when trial 3's exit makes int(3/3) = 1 */
    tcase async[12] = {{"1000 3000", .10}, {"1000", .11}, {"1000", .12, true}, {"1000 3000 9000", .01},
                       {"1000 3000", .02}, {"1000 3000", .03}, {"1000 3000", .04}};
    for (int i = 7; i < 12; i++) async[i] = (tcase){"1000", (i - 2) / 100.0};
    CHECK(run(&p, 3, false, true, async, 12, "promotion, async promotions"));
    cti_asha_plan one = halving(1, 9000, 4, 1);
    tcase single[4] = {{"9000", .05}, {"9000", .06}, {"9000", .07}, {"9000", .08}};
    CHECK(run(&one, 3, false, true, single, 4, "promotion, one rung"));
    /* TestTournamentSearchMethod: two brackets of 3 trials */
    cti_asha_plan two = halving(3, 9000, 3, 2);
    tcase tour[6] = {{"1000 3000", .1}, {"1000", .2}, {"1000", .3}, {"1000", .3}, {"1000", .2}, {"1000 3000", .1}};
    CHECK(run(&two, 3, false, true, tour, 6, "promotion, tournament"));
}

static void test_stopping(void) {
    cti_asha_plan p = halving(3, 9000, 12, 1);
    tcase smaller[12] = {{"1000 3000 9000", .01}};
    for (int i = 1; i < 12; i++) smaller[i] = (tcase){"1000", (i + 1) / 100.0};
    CHECK(run(&p, 3, true, true, smaller, 12, "stop_once, smaller is better"));
    tcase rr[12], larger[12], rr_larger[12];
    static const char *const rr_larger_lens[12] = {"1000 3000 9000", "1000 3000 9000", "1000 3000 9000",
                                                   "1000 3000 9000", "1000", "1000", "1000 3000", "1000 3000 9000",
                                                   "1000", "1000", "1000 3000", "1000 3000 9000"};
    for (int i = 0; i < 12; i++) {
        double m = (i % 4 + 1) / 100.0;
        rr[i] = (tcase){i % 4 == 0 ? "1000 3000 9000" : "1000", m};
        larger[i] = (tcase){"1000 3000 9000", (i + 1) / 100.0};
        rr_larger[i] = (tcase){rr_larger_lens[i], m};
    }
    CHECK(run(&p, 3, true, true, rr, 12, "stop_once, round robin"));
    CHECK(run(&p, 3, true, false, larger, 12, "stop_once, larger is better"));
    CHECK(run(&p, 3, true, false, rr_larger, 12, "stop_once, larger, round robin"));
    tcase exit5[12];
    memcpy(exit5, rr, sizeof exit5);
    exit5[4] = (tcase){"1000 3000", .01, true}; /* trial 5 exits during its 3000 */
    CHECK(run(&p, 3, true, true, exit5, 12, "stop_once, an early exit"));
    cti_asha_plan one = halving(1, 9000, 4, 1);
    tcase single[4] = {{"9000", .05}, {"9000", .06}, {"9000", .07}, {"9000", .08}};
    CHECK(run(&one, 3, true, true, single, 4, "stop_once, one rung"));
}

/* adaptive: T 5, 900 batches, standard, max_rungs 2, d 3: brackets [2, 1] */
static void test_adaptive(void) {
    cti_asha_opts o = cti_asha_defaults();
    o.max_trials = 5;
    o.max_length = 900;
    o.divisor = 3;
    o.max_rungs = 2;
    cti_asha_plan p;
    CHECK(cti_asha_plan_make(&o, &p) == 0 && p.n == 2);
    tcase promo[5] = {{"300 900", .1}, {"300", .2}, {"300", .3}, {"900", .4}, {"900", .5}};
    CHECK(run(&p, 3, false, true, promo, 5, "adaptive, promotion"));
    promo[1].exits = true;
    CHECK(run(&p, 3, false, true, promo, 5, "adaptive, promotion, an early exit"));
    tcase larger[5] = {{"300 900", .5}, {"300", .4}, {"300", .3}, {"900", .2}, {"900", .1}};
    CHECK(run(&p, 3, false, false, larger, 5, "adaptive, promotion, larger"));
    tcase stop[5] = {{"300 900", .1}, {"300", .2}, {"300", .3}, {"900", .4}, {"900", .5}};
    CHECK(run(&p, 3, true, true, stop, 5, "adaptive, stop_once"));
    tcase stop_larger[5] = {{"300 900", .1}, {"300 900", .2}, {"300 900", .3}, {"900", .4}, {"900", .5}};
    CHECK(run(&p, 3, true, false, stop_larger, 5, "adaptive, stop_once, larger"));
    stop_larger[1] = (tcase){"300", .2, true};
    CHECK(run(&p, 3, true, false, stop_larger, 5, "adaptive, stop_once, larger, an early exit"));
}

/* The trace that tells the two rules apart: 2 rungs [250, 1000], d 4, T 4;
 * rung 0 results 0.5, 0.4, 0.6, 0.3. */
static void test_rules_differ(void) {
    cti_asha_opts o = cti_asha_defaults();
    o.max_trials = 4;
    o.max_length = 1000;
    o.bracket_rungs = (int[]){2};
    o.n_bracket_rungs = 1;
    cti_asha_plan p;
    CHECK(cti_asha_plan_make(&o, &p) == 0);
    tcase stop[4] = {{"250 1000", .5}, {"250 1000", .4}, {"250", .6}, {"250 1000", .3}};
    CHECK(run(&p, 4, true, true, stop, 4, "stop_once: three go on"));
    tcase promo[4] = {{"250", .5}, {"250", .4}, {"250", .6}, {"250 1000", .3}};
    CHECK(run(&p, 4, false, true, promo, 4, "promotion: one goes on"));
}

static void test_errors(void) {
    cti_asha_plan p = halving(2, 100, 2, 1);
    int64_t next = 1;
    cti_rungs *r = cti_rungs_new(&p.b[0], 3, false, true, &next);
    cti_search_ops ops = {0};
    CHECK(cti_rungs_validated(r, 7, 0.1, &ops) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "search: trial 7 is not one of this bracket's");
    free(ops.v);
    cti_rungs_free(r);
}

int main(void) {
    test_promotion();
    test_stopping();
    test_adaptive();
    test_rules_differ();
    test_errors();
    return ct_test_result("search_asha_rungs");
}
