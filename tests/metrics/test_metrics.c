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
        ct_value *got = ct_value_broadcast(mine, root);
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
    CHECK(ct_value_broadcast(mine, 0) == NULL);
    CHECK_ERR(CT_ETRIAL, "evaluate_full_dataset: boom");
    ct_value_free(mine);
    CHECK(ct_value_broadcast(NULL, P) == NULL);
    CHECK_ERR(CT_EINVAL, "root");
}

static void test_gather(void) {
    for (int root = 0; root < P; root += P > 1 ? P - 1 : 1) {
        ct_value *mine = specimen(R), *all = NULL;
        CHECK_OK(ct_value_gather(mine, root, &all));
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
    int rc = ct_value_gather(mine, 0, &all);
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
        ct_value *m = ct_metrics_reduce_batches(batches, spec, "validation");
        CHECK(m && num(m, "loss") == cases[k].loss);
        CHECK(m && item(ct_value_dict_get(m, "acc"), 0) == cases[k].acc0 &&
              item(ct_value_dict_get(m, "acc"), 1) == cases[k].acc1);
        ct_value_free(m);
        ct_value_free(spec);
    }
    /* A per-metric spec must name exactly the metrics. */
    ct_value *spec = dict2("loss", ct_value_int(CT_REDUCER_SUM), "f1", ct_value_int(CT_REDUCER_AVG));
    CHECK(ct_metrics_reduce_batches(batches, spec, "validation") == NULL);
    CHECK_ERR(CT_ETRIAL, "names metric 'f1' that evaluate_batch does not report");
    ct_value_free(spec);
    /* A batch without a metric the first one had. */
    ct_value_list_append(batches, dict2("loss", ct_value_float(1), NULL, NULL));
    CHECK(ct_metrics_reduce_batches(batches, NULL, "training") == NULL);
    CHECK_ERR(CT_ETRIAL, "training batch 3 did not report metric 'acc'");
    ct_value_free(batches);
}

/* ---- rule 2: across ranks ------------------------------------------------------------ */

static void test_training_mean(void) {
    /* Rank r's batches: loss r and r + 2 (mean r + 1), "steps" = 4 (an int). */
    ct_value *batches = ct_value_list();
    ct_value_list_append(batches, dict2("loss", ct_value_float(R), "steps", ct_value_int(4)));
    ct_value_list_append(batches, dict2("loss", ct_value_float(R + 2), "steps", ct_value_int(4)));
    ct_value *m = ct_metrics_training(batches, NULL, 0);
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
    ct_value *m = ct_metrics_validation(batches, spec, NULL, 0);
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
    m = ct_metrics_validation(batches, spec, NULL, 0);
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
    ct_reducer *r = ct_reducer_new("order", seen, NULL);
    /* Rank r's batches are global batches r, r + P (round-robin sharding). */
    CHECK_OK(ct_reducer_update(r, ct_value_int(R)));
    CHECK_OK(ct_reducer_update(r, ct_value_int(R + P)));
    ct_value *batches = ct_value_list();
    ct_value_list_append(batches, dict2("loss", ct_value_float(1), NULL, NULL));
    ct_value *m = ct_metrics_training(batches, &r, 1);
    const ct_value *order = ct_value_dict_get(m, "order");
    CHECK(order && ct_value_len(order) == (size_t)(2 * P));
    for (int i = 0; order && i < 2 * P; i++) {
        int64_t x = -1;
        ct_value_get_int(ct_value_list_get(order, (size_t)i), &x);
        CHECK(x == i);
    }
    ct_value_free(m);
    /* After a reset the reducer reports nothing. */
    ct_reducers_reset(&r, 1);
    m = ct_metrics_training(batches, &r, 1);
    CHECK(m && !ct_value_dict_get(m, "order"));
    ct_value_free(m);
    ct_value_free(batches);
    ct_reducer_free(r);
}

static void test_full_dataset(void) {
    ct_value *mine = NULL;
    if (R == 0) {
        double xs[2] = {0.5, NAN};
        mine = dict2("acc", ct_value_tensor(ct_from_data(xs, CT_SHAPE(2), CT_F64)), "n", ct_value_int(297));
    }
    ct_value *m = ct_metrics_full_dataset(mine, NULL, 0);
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
    test_full_dataset();
    char name[64];
    snprintf(name, sizeof name, "metrics (rank %d of %d)", R, P);
    int rc = ct_test_result(name);
    ct_dist_finalize();
    return rc;
}
