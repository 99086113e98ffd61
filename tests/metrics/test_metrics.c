/* tests/metrics — module metrics (src/metrics/) and the value collectives
 * it sends metrics with (dist/value_wire.h), under mpirun -np 1/2/3 and as
 * a plain process. Rank r's inputs are derived from r, so every expected
 * value is written out in closed form:
 *   - value trees between ranks arrive bit for bit: ints stay ints, NaN and
 *     -inf stay, tuples, integer keys, tensors; a root that fails fails
 *     every rank with its own code and words; a gather is in rank order;
 *   - rule 1: AVG/SUM/MAX/MIN over batches, arrays element-wise, a metric
 *     missing from a batch named;
 *   - rule 2: training metrics are the mean over ranks; validation metrics
 *     combine with AVG weighted by batch counts, ranks without batches left
 *     out, and a NaN on one rank is NaN in the result (JSON, the encoding
 *     this replaced, turned it into null and the rank's value vanished);
 *   - rule 3: a custom reducer sees every rank's values round-robin;
 *     a class reducer (MetricReducer) reduces per rank, then on rank 0 over
 *     the ranks' partials in rank order; reducers report only in the
 *     workloads they are wrapped for; a named reducer returning a dict, an
 *     unnamed one returning anything else, and a failing per_slot_reduce
 *     are refused on every rank, naming the reducer;
 *   - full-dataset metrics are rank 0's on every rank, tensors included. */
#include <stdlib.h>

#include "ct_test.h"
#include "dist/value_wire.h"
#include "metrics/metrics.h"

static int R, P;

static double num(const ct_value *d, const char *key) {
    double x = NAN;
    ct_value_get_float(ct_value_dict_get(d, key), &x);
    return x;
}

static double item(const ct_value *list, size_t i) {
    double x = NAN;
    ct_value_get_float(ct_value_list_get(list, i), &x);
    return x;
}

static ct_value *dict2(const char *k1, ct_value *v1, const char *k2, ct_value *v2) {
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, k1, v1);
    if (k2) ct_value_dict_set(d, k2, v2);
    return d;
}

/* ---- value trees between ranks -------------------------------------------------- */

/* A tree of every kind, different on each rank. */
static ct_value *specimen(int r) {
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "rank", ct_value_int(r));
    ct_value_dict_set(d, "big", ct_value_int(INT64_MIN + r));
    ct_value_dict_set(d, "nan", ct_value_float(NAN));
    ct_value_dict_set(d, "ninf", ct_value_float(-INFINITY));
    ct_value_dict_set(d, "flag", ct_value_bool(r % 2 == 0));
    ct_value_dict_set(d, "name", ct_value_str(r ? "other" : "root"));
    ct_value *t = ct_value_tuple();
    ct_value_list_append(t, ct_value_none());
    ct_value_list_append(t, ct_value_float(0.1 * r));
    ct_value_dict_set(d, "tuple", t);
    ct_value *ik = ct_value_dict();
    ct_value_dict_set_int(ik, 3 + r, ct_value_str("three"));
    ct_value_dict_set(d, "int_keys", ik);
    double xs[3] = {r, -0.0, 1e-300};
    ct_value_dict_set(d, "tensor", ct_value_tensor(ct_from_data(xs, CT_SHAPE(3), CT_F64)));
    return d;
}

static void test_broadcast(void) {
    for (int root = 0; root < P; root++) {
        ct_value *mine = specimen(R);
        ct_value *got = cti_value_broadcast(mine, root);
        ct_value *want = specimen(root);
        CHECK(got && ct_value_equal(got, want));
        int64_t big = 0;
        CHECK(ct_value_get_int(ct_value_dict_get(got, "big"), &big) == 0 && big == INT64_MIN + root);
        CHECK(ct_value_kind_of(ct_value_dict_get(got, "rank")) == CT_VALUE_INT);
        CHECK(isnan(num(got, "nan")) && num(got, "ninf") == -INFINITY);
        CHECK(ct_value_kind_of(ct_value_dict_get(got, "tuple")) == CT_VALUE_TUPLE);
        ct_value_free(got);
        ct_value_free(want);
        ct_value_free(mine);
    }
    /* Root fails: every rank fails with root's code and message. */
    ct_value *mine = R == 0 ? NULL : specimen(R);
    if (R == 0) ct_set_error(CT_ETRIAL, "evaluate_full_dataset: boom");
    CHECK(cti_value_broadcast(mine, 0) == NULL);
    CHECK_ERR(CT_ETRIAL, "evaluate_full_dataset: boom");
    ct_value_free(mine);
    CHECK(cti_value_broadcast(NULL, P) == NULL);
    CHECK_ERR(CT_EINVAL, "root");
}

static void test_gather(void) {
    for (int root = 0; root < P; root += P > 1 ? P - 1 : 1) {
        ct_value *mine = specimen(R), *all = NULL;
        CHECK_OK(cti_value_gather(mine, root, &all));
        if (R == root) {
            CHECK(all && ct_value_len(all) == (size_t)P);
            for (int k = 0; all && k < P; k++) {
                ct_value *want = specimen(k);
                CHECK(ct_value_equal(ct_value_list_get(all, (size_t)k), want));
                ct_value_free(want);
            }
        } else {
            CHECK(all == NULL);
        }
        ct_value_free(all);
        ct_value_free(mine);
    }
    /* The last rank fails: every rank fails, that rank with its own words. */
    ct_value *mine = R == P - 1 ? NULL : specimen(R), *all = NULL;
    if (R == P - 1) ct_set_error(CT_ENOMEM, "out of host memory on purpose");
    int rc = cti_value_gather(mine, 0, &all);
    CHECK(rc != CT_OK && all == NULL);
    if (R == P - 1) CHECK_ERR(CT_ENOMEM, "on purpose");
    else CHECK_ERR(CT_EDIST, "rank");
    ct_value_free(mine);
}

/* ---- rule 1: over batches ---------------------------------------------------------- */

static void test_reduce_batches(void) {
    /* Batches b = 0, 1, 2: "loss" = b + 1 (a tensor), "acc" = [b, 10 b]. */
    ct_value *batches = ct_value_list();
    for (int b = 0; b < 3; b++) {
        ct_value *acc = ct_value_list();
        ct_value_list_append(acc, ct_value_float(b));
        ct_value_list_append(acc, ct_value_float(10 * b));
        double x = b + 1;
        ct_value_list_append(batches, dict2("loss", ct_value_tensor(ct_from_data(&x, CT_SHAPE(1), CT_F64)), "acc", acc));
    }
    struct {
        int kind;
        double loss, acc0, acc1;
    } cases[] = {{CT_REDUCER_AVG, 2, 1, 10}, {CT_REDUCER_SUM, 6, 3, 30}, {CT_REDUCER_MAX, 3, 2, 20},
                 {CT_REDUCER_MIN, 1, 0, 0}};
    for (size_t k = 0; k < 4; k++) {
        ct_value *spec = ct_value_int(cases[k].kind);
        ct_value *m = cti_metrics_reduce_batches(batches, spec, "validation");
        CHECK(m && num(m, "loss") == cases[k].loss);
        CHECK(m && item(ct_value_dict_get(m, "acc"), 0) == cases[k].acc0 &&
              item(ct_value_dict_get(m, "acc"), 1) == cases[k].acc1);
        ct_value_free(m);
        ct_value_free(spec);
    }
    /* A per-metric spec must name exactly the metrics. */
    ct_value *spec = dict2("loss", ct_value_int(CT_REDUCER_SUM), "f1", ct_value_int(CT_REDUCER_AVG));
    CHECK(cti_metrics_reduce_batches(batches, spec, "validation") == NULL);
    CHECK_ERR(CT_ETRIAL, "names metric 'f1' that evaluate_batch does not report");
    ct_value_free(spec);
    /* A batch without a metric the first one had. */
    ct_value_list_append(batches, dict2("loss", ct_value_float(1), NULL, NULL));
    CHECK(cti_metrics_reduce_batches(batches, NULL, "training") == NULL);
    CHECK_ERR(CT_ETRIAL, "training batch 3 did not report metric 'acc'");
    ct_value_free(batches);
}

/* ---- rule 2: across ranks ------------------------------------------------------------ */

static void test_training_mean(void) {
    /* Rank r's batches: loss r and r + 2 (mean r + 1), "steps" = 4 (an int). */
    ct_value *batches = ct_value_list();
    ct_value_list_append(batches, dict2("loss", ct_value_float(R), "steps", ct_value_int(4)));
    ct_value_list_append(batches, dict2("loss", ct_value_float(R + 2), "steps", ct_value_int(4)));
    ct_value *m = cti_metrics_training(batches, NULL, 0);
    /* The mean over ranks of r + 1: (P + 1) / 2. */
    CHECK(m && num(m, "loss") == (P + 1) / 2.0 && num(m, "steps") == 4);
    ct_value_free(m);
    ct_value_free(batches);
}

static void test_validation_weighted(void) {
    /* Rank r evaluates r + 1 batches, each with "loss" = 10 r and "err" = r
     * (MAX); rank 1 (when there are 3 ranks) evaluates none. */
    bool empty = P == 3 && R == 1;
    ct_value *batches = ct_value_list();
    for (int b = 0; !empty && b <= R; b++)
        ct_value_list_append(batches, dict2("loss", ct_value_float(10.0 * R), "err", ct_value_float(R)));
    ct_value *spec = dict2("loss", ct_value_int(CT_REDUCER_AVG), "err", ct_value_int(CT_REDUCER_MAX));
    ct_value *m = cti_metrics_validation(batches, spec, NULL, 0);
    double num_sum = 0, den = 0, max = 0;
    for (int r = 0; r < P; r++) {
        if (P == 3 && r == 1) continue;
        num_sum += (r + 1) * 10.0 * r;
        den += r + 1;
        max = r;
    }
    CHECK(m && num(m, "loss") == num_sum / den && num(m, "err") == max);
    ct_value_free(m);

    /* A NaN on the last rank reaches the result. */
    ct_value_free(batches);
    batches = ct_value_list();
    ct_value_list_append(batches, dict2("loss", ct_value_float(R == P - 1 ? NAN : 1.0), "err", ct_value_float(0)));
    m = cti_metrics_validation(batches, spec, NULL, 0);
    CHECK(m && isnan(num(m, "loss")));
    ct_value_free(m);
    ct_value_free(spec);
    ct_value_free(batches);
}

/* ---- rule 3 and evaluate_full_dataset ---------------------------------------------------- */

/* A reducer that lists what it saw, in order. */
static ct_value *seen(ct_value *const *values, size_t n, void *ctx) {
    ct_value *l = ct_value_list();
    for (size_t i = 0; i < n; i++) ct_value_list_append(l, ct_value_copy(values[i], false));
    return l;
}

static void test_custom_reducer(void) {
    ct_reducer *r = cti_reducer_new("order", seen, NULL, true, true);
    /* Rank r's batches are global batches r, r + P (round-robin sharding). */
    CHECK_OK(ct_reducer_update(r, ct_value_int(R)));
    CHECK_OK(ct_reducer_update(r, ct_value_int(R + P)));
    ct_value *batches = ct_value_list();
    ct_value_list_append(batches, dict2("loss", ct_value_float(1), NULL, NULL));
    ct_value *m = cti_metrics_training(batches, &r, 1);
    const ct_value *order = ct_value_dict_get(m, "order");
    CHECK(order && ct_value_len(order) == (size_t)(2 * P));
    for (int i = 0; order && i < 2 * P; i++) {
        int64_t x = -1;
        ct_value_get_int(ct_value_list_get(order, (size_t)i), &x);
        CHECK(x == i);
    }
    ct_value_free(m);
    /* After a reset the reducer reports nothing. */
    cti_reducers_reset(&r, 1);
    m = cti_metrics_training(batches, &r, 1);
    CHECK(m && !ct_value_dict_get(m, "order"));
    ct_value_free(m);
    ct_value_free(batches);
    cti_reducer_free(r);
}

/* ---- rule 3: class reducers (MetricReducer), for_training / for_validation --------- */

/* Rank r's accuracy state: correct = r, total = r + 2 (as if from its
 * batches). per_slot_reduce gives (rank, correct, total); cross_slot_reduce
 * checks the ranks' order and returns sum(correct) / sum(total) — or, with
 * `shape`, a dict (named: refused) or a bare number (unnamed: refused). */
typedef struct {
    double correct, total;
    int resets, per_slot_calls, cross_calls, freed;
    size_t cross_n;     /* n that cross_slot_reduce got */
    bool in_order;      /* partials arrived in rank order */
    int shape;          /* 0: a float; 1: {"correct": .., "total": ..}; 2: a float for an unnamed wrap */
    bool fail_per_slot; /* per_slot_reduce fails on the last rank */
} Acc;

static void acc_reset(void *self) {
    Acc *a = self;
    a->correct = a->total = 0;
    a->resets++;
}

static ct_value *acc_per_slot(void *self) {
    Acc *a = self;
    a->per_slot_calls++;
    if (a->fail_per_slot && R == P - 1) {
        ct_set_error(CT_EIO, "disk on fire");
        return NULL;
    }
    ct_value *t = ct_value_tuple();
    ct_value_list_append(t, ct_value_int(R));
    ct_value_list_append(t, ct_value_float(a->correct));
    ct_value_list_append(t, ct_value_float(a->total));
    return t;
}

static ct_value *acc_cross_slot(void *self, ct_value *const *per_slot, size_t n) {
    Acc *a = self;
    a->cross_calls++;
    a->cross_n = n;
    a->in_order = true;
    double c = 0, t = 0;
    for (size_t k = 0; k < n; k++) {
        int64_t rank = -1;
        ct_value_get_int(ct_value_list_get(per_slot[k], 0), &rank);
        if (rank != (int64_t)k || ct_value_kind_of(per_slot[k]) != CT_VALUE_TUPLE) a->in_order = false;
        c += item(per_slot[k], 1);
        t += item(per_slot[k], 2);
    }
    if (a->shape == 1) return dict2("correct", ct_value_float(c), "total", ct_value_float(t));
    return ct_value_float(c / t);
}

static void acc_free(void *self) { ((Acc *)self)->freed++; }

static const ct_metric_reducer_ops acc_ops = {acc_reset, acc_per_slot, acc_cross_slot, acc_free};

/* Fills a's state as rank R's batches would. */
static void acc_feed(Acc *a) {
    a->correct += R;
    a->total += R + 2;
}

/* The numbers every rank expects: sum over ranks of r and of r + 2. */
static double sum_correct(void) { return P * (P - 1) / 2.0; }
static double sum_total(void) { return sum_correct() + 2.0 * P; }

static ct_value *one_batch(void) {
    ct_value *batches = ct_value_list();
    ct_value_list_append(batches, dict2("loss", ct_value_float(1), NULL, NULL));
    return batches;
}

static void test_class_reducer(void) {
    Acc named = {0}, unnamed = {.shape = 1};
    ct_reducer *rs[2] = {cti_reducer_new_class("acc", &acc_ops, &named, true, true),
                         cti_reducer_new_class(NULL, &acc_ops, &unnamed, true, true)};
    CHECK(rs[0] && rs[1]);
    cti_reducers_reset(rs, 2);
    CHECK(named.resets == 1 && unnamed.resets == 1);
    acc_feed(&named);
    acc_feed(&unnamed);
    ct_value *batches = one_batch();
    ct_value *m = cti_metrics_training(batches, rs, 2);
    CHECK(m != NULL);
    /* P = 1: 0 / 2; P = 2: 1 / 5; P = 3: 3 / 9. */
    CHECK(num(m, "acc") == sum_correct() / sum_total());
    CHECK(num(m, "correct") == sum_correct() && num(m, "total") == sum_total());
    CHECK(num(m, "loss") == 1);
    ct_value_free(m);
    /* per_slot_reduce on every rank; cross_slot_reduce on rank 0 only, over
     * every rank's partial in rank order. */
    CHECK(named.per_slot_calls == 1 && unnamed.per_slot_calls == 1);
    CHECK(named.cross_calls == (R == 0) && unnamed.cross_calls == (R == 0));
    if (R == 0) CHECK(named.cross_n == (size_t)P && named.in_order && unnamed.in_order);

    /* Validation too, after a reset: a class reducer always reports (here
     * an empty state: 0 / 0 is NaN on every rank, a full dataset's too). */
    cti_reducers_reset(rs, 2);
    CHECK(named.correct == 0 && named.resets == 2);
    ct_value *spec = ct_value_int(CT_REDUCER_SUM);
    m = cti_metrics_validation(batches, spec, rs, 1);
    CHECK(m && ct_value_dict_get(m, "acc") && isnan(num(m, "acc")) && num(m, "loss") == P);
    ct_value_free(m);
    ct_value_free(spec);
    acc_feed(&named);
    ct_value *full = R == 0 ? dict2("n", ct_value_int(7), NULL, NULL) : NULL;
    m = cti_metrics_full_dataset(full, rs, 1);
    CHECK(m && num(m, "acc") == sum_correct() / sum_total() && num(m, "n") == 7);
    ct_value_free(m);
    ct_value_free(full);

    /* A class reducer is not fed with ct_reducer_update. */
    CHECK(ct_reducer_update(rs[0], ct_value_int(1)) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "reducer 'acc' is a metric reducer");
    /* reset, per_slot_reduce and cross_slot_reduce are required; on failure
     * free is never called. */
    ct_metric_reducer_ops no_cross = acc_ops;
    no_cross.cross_slot_reduce = NULL;
    CHECK(cti_reducer_new_class("x", &no_cross, &named, true, true) == NULL);
    CHECK_ERR(CT_EINVAL, "ops->cross_slot_reduce");
    CHECK(named.freed == 0);
    /* Freeing the reducer frees self. */
    cti_reducer_free(rs[0]);
    cti_reducer_free(rs[1]);
    CHECK(named.freed == 1 && unnamed.freed == 1);
    ct_value_free(batches);
}

/* A function reducer that counts what it got (both workloads tell apart). */
static ct_value *count_values(ct_value *const *values, size_t n, void *ctx) { return ct_value_int((int64_t)n); }

static void test_for_workloads(void) {
    /* "t" (function) is for training only, "v" (function) and "acc" (class)
     * for validation only, "both" (class, unnamed) for both. */
    Acc acc = {0}, both = {.shape = 1};
    ct_reducer *rs[4] = {
        cti_reducer_new("t", count_values, NULL, true, false),
        cti_reducer_new("v", count_values, NULL, false, true),
        cti_reducer_new_class("acc", &acc_ops, &acc, false, true),
        cti_reducer_new_class(NULL, &acc_ops, &both, true, true),
    };
    ct_value *batches = one_batch();
    /* Every reducer resets, whatever it is for (Determined's reset_reducers). */
    cti_reducers_reset(rs, 4);
    CHECK(acc.resets == 1 && both.resets == 1);
    for (int k = 0; k < 2; k++) CHECK_OK(ct_reducer_update(rs[k], ct_value_int(R)));
    CHECK_OK(ct_reducer_update(rs[0], ct_value_int(R)));
    acc_feed(&acc);
    acc_feed(&both);
    ct_value *m = cti_metrics_training(batches, rs, 4);
    /* Training: "t" (two values per rank) and the unnamed one; nothing of "v" or
     * "acc", whose per_slot_reduce did not even run. */
    int64_t n = -1;
    CHECK(m && ct_value_get_int(ct_value_dict_get(m, "t"), &n) == 0 && n == 2 * P);
    CHECK(m && !ct_value_dict_get(m, "v") && !ct_value_dict_get(m, "acc"));
    CHECK(m && num(m, "correct") == sum_correct() && num(m, "total") == sum_total());
    CHECK(acc.per_slot_calls == 0 && both.per_slot_calls == 1);
    CHECK(ct_value_len(m) == 4); /* loss, t, correct, total */
    ct_value_free(m);
    /* Validation (no reset in between: the same state): "v" and "acc" and
     * the unnamed one, not "t". */
    m = cti_metrics_validation(batches, NULL, rs, 4);
    CHECK(m && ct_value_get_int(ct_value_dict_get(m, "v"), &n) == 0 && n == P);
    CHECK(m && !ct_value_dict_get(m, "t"));
    CHECK(m && num(m, "acc") == sum_correct() / sum_total());
    CHECK(m && num(m, "correct") == sum_correct() && num(m, "total") == sum_total());
    CHECK(acc.per_slot_calls == 1 && both.per_slot_calls == 2);
    ct_value_free(m);
    /* A full-dataset validation is a validation. */
    ct_value *full = R == 0 ? dict2("n", ct_value_int(1), NULL, NULL) : NULL;
    m = cti_metrics_full_dataset(full, rs, 4);
    CHECK(m && ct_value_dict_get(m, "v") && ct_value_dict_get(m, "acc") && !ct_value_dict_get(m, "t"));
    ct_value_free(m);
    ct_value_free(full);
    /* A reducer for neither workload never reports (and is still reset). */
    Acc never = {0};
    ct_reducer *rn = cti_reducer_new_class("never", &acc_ops, &never, false, false);
    cti_reducers_reset(&rn, 1);
    m = cti_metrics_training(batches, &rn, 1);
    CHECK(m && ct_value_len(m) == 1 && never.per_slot_calls == 0 && never.resets == 1);
    ct_value_free(m);
    cti_reducer_free(rn);
    for (int k = 0; k < 4; k++) cti_reducer_free(rs[k]);
    CHECK(acc.freed == 1 && both.freed == 1 && never.freed == 1);
    ct_value_free(batches);
}

/* A function reducer returning {"my_metric": n}. */
static ct_value *dict_fn(ct_value *const *values, size_t n, void *ctx) {
    return dict2("my_metric", ct_value_int((int64_t)n), NULL, NULL);
}

/* Every rank fails alike, with rank 0's words. */
static void expect_refused(ct_reducer *r, const char *needle1, const char *needle2) {
    ct_value *batches = one_batch();
    ct_value *m = cti_metrics_training(batches, &r, 1);
    CHECK(m == NULL);
    CHECK(strstr(ct_last_error(), needle2) != NULL);
    CHECK_ERR(CT_ETRIAL, needle1);
    ct_value_free(m);
    ct_value_free(batches);
}

static void test_refusals(void) {
    /* Named function reducer returning a dict (once reported nested). */
    ct_reducer *r = cti_reducer_new("my_metric", dict_fn, NULL, true, true);
    CHECK_OK(ct_reducer_update(r, ct_value_int(1)));
    expect_refused(r, "reducer 'my_metric': the reduce function returned a dict", "wrapped with a name");
    cti_reducer_free(r);
    /* The same function unnamed is fine. */
    r = cti_reducer_new(NULL, dict_fn, NULL, true, true);
    CHECK_OK(ct_reducer_update(r, ct_value_int(1)));
    ct_value *batches = one_batch();
    ct_value *m = cti_metrics_training(batches, &r, 1);
    CHECK(m && num(m, "my_metric") == P);
    ct_value_free(m);
    cti_reducer_free(r);
    /* An unnamed function reducer returning a number. */
    r = cti_reducer_new(NULL, count_values, NULL, true, true);
    CHECK_OK(ct_reducer_update(r, ct_value_int(1)));
    expect_refused(r, "an unnamed reducer: the reduce function returned a value of kind int, not a dict", "wrapped with name NULL");
    cti_reducer_free(r);
    /* Class reducers: a named one returning a dict, an unnamed one a float. */
    Acc a = {.shape = 1}, b = {0};
    r = cti_reducer_new_class("acc", &acc_ops, &a, true, true);
    expect_refused(r, "reducer 'acc': cross_slot_reduce returned a dict", "wrapped with a name");
    cti_reducer_free(r);
    r = cti_reducer_new_class(NULL, &acc_ops, &b, true, true);
    expect_refused(r, "an unnamed reducer: cross_slot_reduce returned a value of kind float", "wrapped with name NULL");
    cti_reducer_free(r);
    /* per_slot_reduce fails on the last rank: every rank fails; that rank
     * names the reducer and its error, rank 0 never runs cross_slot_reduce. */
    Acc c = {.fail_per_slot = true};
    r = cti_reducer_new_class("acc", &acc_ops, &c, true, true);
    m = cti_metrics_training(batches, &r, 1);
    CHECK(m == NULL && c.cross_calls == 0);
    if (R == P - 1) CHECK_ERR(CT_EIO, "reducer 'acc': per_slot_reduce failed: disk on fire");
    else CHECK(ct_last_code() != CT_OK);
    cti_reducer_free(r);
    /* A validation whose own metrics fail keeps its error past the
     * reducers (which still run their collectives). */
    Acc d = {0};
    r = cti_reducer_new_class("acc", &acc_ops, &d, true, true);
    ct_value *spec = dict2("loss", ct_value_int(CT_REDUCER_SUM), "f1", ct_value_int(CT_REDUCER_AVG));
    m = cti_metrics_validation(batches, spec, &r, 1);
    CHECK(m == NULL && d.per_slot_calls == 1);
    CHECK_ERR(CT_ETRIAL, "names metric 'f1' that evaluate_batch does not report");
    ct_value_free(spec);
    cti_reducer_free(r);
    ct_value_free(batches);
}

static void test_full_dataset(void) {
    ct_value *mine = NULL;
    if (R == 0) {
        double xs[2] = {0.5, NAN};
        mine = dict2("acc", ct_value_tensor(ct_from_data(xs, CT_SHAPE(2), CT_F64)), "n", ct_value_int(297));
    }
    ct_value *m = cti_metrics_full_dataset(mine, NULL, 0);
    CHECK(m && ct_value_kind_of(ct_value_dict_get(m, "acc")) == CT_VALUE_TENSOR);
    CHECK(m && ct_value_kind_of(ct_value_dict_get(m, "n")) == CT_VALUE_INT);
    double got[2] = {0, 0};
    CHECK(m && ct_read(ct_value_get_tensor(ct_value_dict_get(m, "acc")), got, sizeof got) == 0 && got[0] == 0.5 &&
          isnan(got[1]));
    ct_value_free(m);
    ct_value_free(mine);
}

int main(void) {
    CHECK_OK(ct_dist_init());
    R = ct_dist_rank();
    P = ct_dist_size();
    test_broadcast();
    test_gather();
    test_reduce_batches();
    test_training_mean();
    test_validation_weighted();
    test_custom_reducer();
    test_class_reducer();
    test_for_workloads();
    test_refusals();
    test_full_dataset();
    char name[64];
    snprintf(name, sizeof name, "metrics (rank %d of %d)", R, P);
    int rc = ct_test_result(name);
    ct_dist_finalize();
    return rc;
}
