/* adaptive ASHA's plan (src/search/asha.h) against Determined: the expected
 * brackets, trials, concurrency and rung lengths of its Go tests
 * (adaptive_asha_test.go, asha_stopping_test.go, simulate_test.go) and
 * examples worked out from its formulas (T trials, L units, divisor d). */
#include "ct_test.h"
#include "search/asha.h"

/* A short row leaves the rest 0: initial or units not checked. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct {
    int rungs;
    int64_t trials, concurrent, initial;
    int64_t units[8];
} want_bracket;

static bool plan_is(const cti_asha_opts *o, int n, const want_bracket *want, const char *what) {
    cti_asha_plan p;
    bool ok = cti_asha_plan_make(o, &p) == 0 && p.n == n;
    for (int i = 0; ok && i < n; i++) {
        const cti_asha_bracket *b = &p.b[i];
        ok = b->rungs == want[i].rungs && b->max_trials == want[i].trials && b->max_concurrent == want[i].concurrent &&
             (want[i].initial == 0 || b->initial == want[i].initial);
        for (int k = 0; ok && want[i].units[0] && k < b->rungs; k++) ok = b->units[k] == want[i].units[k];
    }
    if (!ok) {
        fprintf(stderr, "  %s: got %d brackets:", what, p.n);
        for (int i = 0; i < p.n; i++)
            fprintf(stderr, " (%d rungs, %lld trials, mc %lld, first rung %lld)", p.b[i].rungs,
                    (long long)p.b[i].max_trials, (long long)p.b[i].max_concurrent, (long long)p.b[i].units[0]);
        fprintf(stderr, "\n");
    }
    return ok;
}

static cti_asha_opts opts(int64_t trials, int64_t length, double d) {
    cti_asha_opts o = cti_asha_defaults();
    o.max_trials = trials;
    o.max_length = length;
    o.divisor = d;
    return o;
}

static void test_examples(void) {
    /* (a) T 16, L 1000, d 4, standard: brackets [3, 2] */
    cti_asha_opts o = opts(16, 1000, 4);
    CHECK(plan_is(&o, 2, (want_bracket[]){{3, 12, 8, 8, {62, 250, 1000}}, {2, 4, 8, 4, {250, 1000}}}, "a"));
    o.mode = CT_ASHA_AGGRESSIVE; /* (b1) */
    CHECK(plan_is(&o, 1, (want_bracket[]){{3, 16, 16, 16, {62, 250, 1000}}}, "b1"));
    o.mode = CT_ASHA_CONSERVATIVE; /* (b2) */
    CHECK(plan_is(&o, 3, (want_bracket[]){{3, 12, 6, 6, {62, 250, 1000}}, {2, 3, 5, 3, {250, 1000}}, {1, 1, 5, 1, {1000}}},
                  "b2"));
    o = opts(16, 1000, 3); /* (c) */
    o.max_rungs = 3;
    CHECK(plan_is(&o, 2, (want_bracket[]){{3, 11, 8, 8, {111, 333, 1000}}, {2, 5, 8, 5, {333, 1000}}}, "c"));
    o.mode = CT_ASHA_CONSERVATIVE; /* (c') */
    CHECK(plan_is(&o, 3, (want_bracket[]){{3, 10, 6}, {2, 4, 5}, {1, 2, 5}}, "c'"));
    o = opts(16, 1000, 4); /* (d) bracket_rungs [1, 3]: sorted, mode and max_rungs ignored */
    o.bracket_rungs = (int[]){1, 3};
    o.n_bracket_rungs = 2;
    CHECK(plan_is(&o, 2, (want_bracket[]){{3, 14, 8, 8, {62, 250, 1000}}, {1, 2, 8, 2, {1000}}}, "d"));
    o = opts(100, 6400, 4); /* (d2), and getBracketMaxTrials(100, 4, [4,3,2]) = [70, 22, 8] */
    o.bracket_rungs = (int[]){2, 4, 3};
    o.n_bracket_rungs = 3;
    o.max_concurrent_trials = 10;
    CHECK(plan_is(&o, 3,
                  (want_bracket[]){{4, 70, 4, 4, {100, 400, 1600, 6400}}, {3, 22, 3, 3, {400, 1600, 6400}},
                                   {2, 8, 3, 3, {1600, 6400}}},
                  "d2"));
    o = opts(500, 1000, 4); /* (g): five rungs, the first 1000 / 256 = 3 */
    CHECK(plan_is(&o, 3, (want_bracket[]){{5, 354, 6, 6, {3, 15, 62, 250, 1000}}, {4, 110, 5}, {3, 36, 5}}, "g"));
    o = opts(16, 937, 4); /* (e) the MNIST adaptive.yaml */
    CHECK(plan_is(&o, 2, (want_bracket[]){{3, 12, 8, 8, {58, 234, 937}}, {2, 4, 8, 4, {234, 937}}}, "e"));
    o = opts(16, 1000, 4); /* (f) max_concurrent_trials 0: max(t_last, int(d)) */
    o.max_concurrent_trials = 0;
    CHECK(plan_is(&o, 2, (want_bracket[]){{3, 12, 4, 4}, {2, 4, 4, 4}}, "f"));
}

static void test_determined_tests(void) {
    /* getBracketMaxTrials */
    cti_asha_opts o = opts(20, 1000, 3);
    o.bracket_rungs = (int[]){3, 2, 1};
    o.n_bracket_rungs = 3;
    CHECK(plan_is(&o, 3, (want_bracket[]){{3, 12, 6}, {2, 5, 5}, {1, 3, 5}}, "(20,3,[3,2,1])"));
    o = opts(50, 1000, 3);
    o.bracket_rungs = (int[]){4, 3};
    o.n_bracket_rungs = 2;
    CHECK(plan_is(&o, 2, (want_bracket[]){{4, 35, 8}, {3, 15, 8}}, "(50,3,[4,3])"));
    o = opts(50, 1000, 4);
    o.bracket_rungs = (int[]){3, 2};
    o.n_bracket_rungs = 2;
    CHECK(plan_is(&o, 2, (want_bracket[]){{3, 37, 8}, {2, 13, 8}}, "(50,4,[3,2])"));
    /* TestMakeBrackets */
    o = opts(10, 100, 4);
    o.max_concurrent_trials = 2;
    CHECK(plan_is(&o, 2, (want_bracket[]){{2, 7, 1}, {1, 3, 1}}, "TestMakeBrackets standard"));
    o = opts(10, 1000, 3);
    o.mode = CT_ASHA_CONSERVATIVE;
    o.max_concurrent_trials = 5;
    CHECK(plan_is(&o, 3, (want_bracket[]){{3, 7, 2}, {2, 2, 2}, {1, 1, 1}}, "TestMakeBrackets conservative"));
    /* TestSimulateASHA; TestMakeRungs (3 rungs, 900, d 3) */
    o = opts(10, 900, 3);
    o.max_rungs = 10;
    o.max_concurrent_trials = 5;
    CHECK(plan_is(&o, 2, (want_bracket[]){{3, 7, 3, 3, {100, 300, 900}}, {2, 3, 2, 2, {300, 900}}}, "TestSimulateASHA"));
    /* TestMakeRungs (4 rungs, 10, d 2) = [1, 2, 5, 10] */
    o = opts(10, 10, 2);
    o.bracket_rungs = (int[]){4};
    o.n_bracket_rungs = 1;
    CHECK(plan_is(&o, 1, (want_bracket[]){{4, 10, 16, 10, {1, 2, 5, 10}}}, "TestMakeRungs"));
}

static void test_go_log(void) {
    /* Go's log(243) / log(3) is 5 exactly, libm's 4.999999999999999:
     * Determined's m is 6 there, and 11 at 59049 */
    CHECK(cti_go_log(243) / cti_go_log(3) == 5.0);
    cti_asha_opts o = opts(243, 243, 3);
    o.max_rungs = 32;
    o.mode = CT_ASHA_AGGRESSIVE;
    CHECK(plan_is(&o, 1, (want_bracket[]){{6, 243, 16, 16, {1, 3, 9, 27, 81, 243}}}, "d 3, 243"));
    o = opts(59049, 59049, 3);
    o.max_rungs = 32;
    o.mode = CT_ASHA_AGGRESSIVE;
    CHECK(plan_is(&o, 1, (want_bracket[]){{11, 59049, 16, 16}}, "d 3, 59049"));
    CHECK(cti_go_log(1) == 0 && cti_go_log(0) == -INFINITY && isnan(cti_go_log(-1)));
    CHECK(fabs(cti_go_log(1000) - 6.907755278982137) < 1e-15);
    /* one trial: one bracket of one rung, trained to L */
    o = opts(1, 1000, 4);
    CHECK(plan_is(&o, 1, (want_bracket[]){{1, 1, 16, 1, {1000}}}, "T 1"));
}

static void refused(cti_asha_opts o, const char *needle) {
    cti_asha_plan p;
    CHECK(cti_asha_plan_make(&o, &p) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, needle);
}

static void test_errors(void) {
    cti_asha_opts o = opts(16, 1000, 4);
    o.max_trials = 0;
    refused(o, "searcher.max_trials: must be >= 1, got 0");
    o = opts(16, 0, 4);
    refused(o, "searcher.max_length: must be >= 1, got 0");
    o = opts(16, 1000, 1);
    refused(o, "searcher.divisor: must be > 1, got 1");
    o = opts(16, 1000, 4);
    o.max_rungs = 0;
    refused(o, "searcher.max_rungs: must be >= 1, got 0");
    o = opts(16, 1000, 4);
    o.bracket_rungs = (int[]){3, 0};
    o.n_bracket_rungs = 2;
    refused(o, "searcher.bracket_rungs[1]: a bracket has 1 to 32 rungs, got 0");
    o = opts(16, 1000, 4);
    o.max_concurrent_trials = -1;
    refused(o, "searcher.max_concurrent_trials: must be >= 0, got -1");
}

int main(void) {
    test_examples();
    test_determined_tests();
    test_go_log();
    test_errors();
    return ct_test_result("search_asha_plan");
}
