/* Determined's hyperparameter space (src/search/space.h): parsing and every
 * refusal naming its key; random draws equal to Determined's (its nprand,
 * numpy's legacy MT19937, with the same seed and draw order) on the MNIST
 * adaptive.yaml's hyperparameters; the grid's points and order as
 * Determined's grid tests give them. The expected values come from
 * Determined's Go tests (nprand_test.go, grid_test.go) and from a
 * line-by-line model of its sampling code. */
#include <math.h>
#include <string.h>

#include "ct_test.h"
#include "search/space.h"

static json_t *parse(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j) fprintf(stderr, "bad test JSON: %s\n", e.text);
    return j;
}

static cti_hp_space *space_of(const char *text, bool grid) {
    json_t *j = parse(text);
    cti_hp_space *s = j ? cti_hp_space_new(j, "hyperparameters", grid) : NULL;
    json_decref(j);
    return s;
}

/* Determined's trial creation after sampling: a request id (4 draws) and
 * the trial seed (one draw, 31 bits). */
static uint32_t create_draws(cti_mt19937 *mt) {
    for (int i = 0; i < 4; i++) cti_mt19937_next32(mt);
    return cti_mt19937_next32(mt) & 0x7fffffffu;
}

static double num(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

static void test_generator(void) {
    cti_mt19937 mt;
    cti_mt19937_seed(&mt, 42); /* nprand_test.go: Intn(10) x 10 */
    const uint64_t want[10] = {6, 3, 7, 4, 6, 9, 2, 6, 7, 4};
    for (int i = 0; i < 10; i++) CHECK(cti_mt19937_interval(&mt, 9) == want[i]);
    cti_mt19937_seed(&mt, 1); /* Uniform(0, 1) */
    CHECK(cti_hp_unit(&mt) == 0.417022004702574);
    CHECK(cti_hp_unit(&mt) == 0.7203244934421581);
    CHECK(cti_hp_unit(&mt) == 0.00011437481734488664);
    /* searcher single, seed 0: the first trial's seed */
    cti_mt19937_seed(&mt, 0);
    CHECK(create_draws(&mt) == 441365315u);
}

/* examples/tutorials/mnist_pytorch/adaptive.yaml's hyperparameters, seed 42 */
static void test_sample_mnist(void) {
    cti_hp_space *s = space_of("{\"global_batch_size\": 64,"
                              " \"learning_rate\": {\"type\": \"double\", \"minval\": 0.0001, \"maxval\": 1.0},"
                              " \"n_filters1\": {\"type\": \"int\", \"minval\": 8, \"maxval\": 64},"
                              " \"n_filters2\": {\"type\": \"int\", \"minval\": 8, \"maxval\": 72},"
                              " \"dropout1\": {\"type\": \"double\", \"minval\": 0.2, \"maxval\": 0.8},"
                              " \"dropout2\": {\"type\": \"double\", \"minval\": 0.2, \"maxval\": 0.8}}",
                              false);
    CHECK(s != NULL);
    if (!s) return;
    cti_mt19937 mt;
    cti_mt19937_seed(&mt, 42);
    const double want[3][5] = {{0.42472407130841755, 0.7704285838459497, 0.7320207424172239, 28, 31},
                               {0.6994655844802531, 0.3274034664069657, 0.1819067847103799, 28, 40},
                               {0.21383745502484947, 0.5148647961550336, 0.3999209856180839, 35, 67}};
    const uint32_t seeds[3] = {953477463u, 1855189739u, 1224821422u};
    for (int t = 0; t < 3; t++) {
        json_t *hp = cti_hp_space_sample(s, &mt);
        CHECK(hp && json_object_size(hp) == 6);
        CHECK(num(hp, "dropout1") == want[t][0] && num(hp, "dropout2") == want[t][1]);
        CHECK(num(hp, "learning_rate") == want[t][2]);
        CHECK(json_is_integer(json_object_get(hp, "n_filters1")) && num(hp, "n_filters1") == want[t][3]);
        CHECK(num(hp, "n_filters2") == want[t][4]);
        CHECK(json_integer_value(json_object_get(hp, "global_batch_size")) == 64);
        CHECK(create_draws(&mt) == seeds[t]);
        json_decref(hp);
    }
    cti_hp_space_free(s);
}

/* log, categorical, int and const together, seed 7 */
static void test_sample_kinds(void) {
    cti_hp_space *s = space_of("{\"global_batch_size\": 64, \"wd\": {\"type\": \"const\", \"val\": 0.0005},"
                              " \"lr\": {\"type\": \"log\", \"minval\": -4, \"maxval\": -1, \"base\": 10},"
                              " \"opt\": {\"type\": \"categorical\", \"vals\": [\"sgd\", \"adam\", \"rmsprop\"]},"
                              " \"layers\": {\"type\": \"int\", \"minval\": 1, \"maxval\": 3}}",
                              false);
    CHECK(s != NULL);
    if (!s) return;
    cti_mt19937 mt;
    cti_mt19937_seed(&mt, 7);
    const int64_t layers[2] = {1, 3};
    const double lr[2] = {0.021865347140571707, 0.0018118265994408744};
    const uint32_t seeds[2] = {372560217u, 1304549247u};
    for (int t = 0; t < 2; t++) {
        json_t *hp = cti_hp_space_sample(s, &mt);
        CHECK(json_integer_value(json_object_get(hp, "layers")) == layers[t]);
        CHECK(fabs(num(hp, "lr") / lr[t] - 1) < 1e-14);
        CHECK(strcmp(json_string_value(json_object_get(hp, "opt")), "sgd") == 0);
        CHECK(num(hp, "wd") == 0.0005);
        CHECK(create_draws(&mt) == seeds[t]);
        json_decref(hp);
    }
    cti_hp_space_free(s);
    /* nested groups come back as objects; a list is a const */
    s = space_of("{\"model\": {\"width\": {\"type\": \"int\", \"minval\": 4, \"maxval\": 8}, \"act\": \"relu\"},"
                 " \"sizes\": [1, 2, 3]}",
                 false);
    CHECK(s != NULL);
    cti_mt19937_seed(&mt, 3);
    json_t *hp = s ? cti_hp_space_sample(s, &mt) : NULL;
    json_t *model = json_object_get(hp, "model");
    CHECK(json_is_object(model) && json_object_size(model) == 2);
    int64_t w = json_integer_value(json_object_get(model, "width"));
    CHECK(w >= 4 && w <= 8);
    CHECK(json_array_size(json_object_get(hp, "sizes")) == 3);
    json_decref(hp);
    cti_hp_space_free(s);
}

/* The points of one int/double/log axis (a one-hyperparameter grid). */
static bool axis_is(const char *spec, const double *want, int64_t n) {
    char text[256];
    snprintf(text, sizeof text, "{\"x\": %s}", spec);
    cti_hp_space *s = space_of(text, true);
    bool ok = s && cti_hp_space_grid_len(s) == n;
    for (int64_t i = 0; ok && i < n; i++) {
        json_t *p = cti_hp_space_grid_point(s, i);
        double v = num(p, "x");
        ok = want[i] == 0 ? v == 0 : fabs(v / want[i] - 1) < 1e-15;
        json_decref(p);
    }
    if (!ok) fprintf(stderr, "  axis %s\n", spec);
    cti_hp_space_free(s);
    return ok;
}

static void test_grid_axes(void) {
    CHECK(axis_is("{\"type\": \"int\", \"minval\": 0, \"maxval\": 20, \"count\": 3}", (double[]){0, 10, 20}, 3));
    CHECK(axis_is("{\"type\": \"int\", \"minval\": 0, \"maxval\": 4, \"count\": 5}", (double[]){0, 1, 2, 3, 4}, 5));
    CHECK(axis_is("{\"type\": \"int\", \"minval\": -4, \"maxval\": -2, \"count\": 3}", (double[]){-4, -3, -2}, 3));
    CHECK(axis_is("{\"type\": \"int\", \"minval\": 0, \"maxval\": 10, \"count\": 7}",
                  (double[]){0, 2, 3, 5, 7, 8, 10}, 7));
    CHECK(axis_is("{\"type\": \"int\", \"minval\": 0, \"maxval\": 10, \"count\": 4}", (double[]){0, 3, 7, 10}, 4));
    CHECK(axis_is("{\"type\": \"int\", \"minval\": 0, \"maxval\": 3, \"count\": 100}", (double[]){0, 1, 2, 3}, 4));
    CHECK(axis_is("{\"type\": \"int\", \"minval\": 1, \"maxval\": 2, \"count\": 1}", (double[]){2}, 1));
    CHECK(axis_is("{\"type\": \"int\", \"minval\": -3, \"maxval\": 0, \"count\": 1}", (double[]){-2}, 1));
    CHECK(axis_is("{\"type\": \"double\", \"minval\": -1, \"maxval\": 1, \"count\": 5}",
                  (double[]){-1, -0.5, 0, 0.5, 1}, 5));
    CHECK(axis_is("{\"type\": \"double\", \"minval\": 0.1, \"maxval\": 0.5, \"count\": 3}",
                  (double[]){0.1, 0.30000000000000004, 0.5}, 3));
    CHECK(axis_is("{\"type\": \"double\", \"minval\": 13, \"maxval\": 17, \"count\": 1}", (double[]){15}, 1));
    CHECK(axis_is("{\"type\": \"log\", \"minval\": -5, \"maxval\": -3, \"base\": 10, \"count\": 3}",
                  (double[]){1e-05, 0.0001, 0.001}, 3));
    CHECK(axis_is("{\"type\": \"log\", \"minval\": -4, \"maxval\": -2, \"base\": 10, \"count\": 1}",
                  (double[]){0.001}, 1));
    CHECK(axis_is("{\"type\": \"log\", \"minval\": 0, \"maxval\": 4, \"base\": 2, \"count\": 3}",
                  (double[]){1, 4, 16}, 3));
}

/* The points of a one-hyperparameter int grid, as int64 (past 2^53 a double
 * would not tell them apart). */
static bool int_axis_is(const char *spec, const int64_t *want, int64_t n) {
    char text[256];
    snprintf(text, sizeof text, "{\"x\": %s}", spec);
    cti_hp_space *s = space_of(text, true);
    bool ok = s && cti_hp_space_grid_len(s) == n;
    for (int64_t i = 0; ok && i < n; i++) {
        json_t *p = cti_hp_space_grid_point(s, i);
        ok = p && json_is_integer(json_object_get(p, "x")) && json_integer_value(json_object_get(p, "x")) == want[i];
        if (!ok && p) fprintf(stderr, "  point %lld: %lld\n", (long long)i, (long long)json_integer_value(json_object_get(p, "x")));
        json_decref(p);
    }
    if (!ok) fprintf(stderr, "  axis %s\n", spec);
    cti_hp_space_free(s);
    return ok;
}

/* Ranges wider than 2^63 / count: Determined's i * (maxval - minval) wraps
 * in Go (three equal points over the whole int64 range); here it does not. */
static void test_grid_wide_ints(void) {
    CHECK(int_axis_is("{\"type\": \"int\", \"minval\": -9223372036854775808, \"maxval\": 9223372036854775807, "
                      "\"count\": 3}",
                      (int64_t[]){INT64_MIN, -1, INT64_MAX}, 3)); /* -0.5 rounds away from zero, as Go's */
    CHECK(int_axis_is("{\"type\": \"int\", \"minval\": 0, \"maxval\": 9223372036854775807, \"count\": 5}",
                      (int64_t[]){0, 2305843009213693952, 4611686018427387904, 6917529027641081855, INT64_MAX}, 5));
    CHECK(int_axis_is("{\"type\": \"int\", \"minval\": 9223372036854775806, \"maxval\": 9223372036854775807, "
                      "\"count\": 1}",
                      (int64_t[]){INT64_MAX}, 1));
    CHECK(int_axis_is("{\"type\": \"int\", \"minval\": -9223372036854775808, \"maxval\": -9223372036854775807, "
                      "\"count\": 2}",
                      (int64_t[]){INT64_MIN, INT64_MIN + 1}, 2));
}

static void test_grid_order(void) {
    /* grid_test.go TestGrid: the first axis slowest */
    cti_hp_space *s = space_of("{\"2\": {\"type\": \"int\", \"minval\": 0, \"maxval\": 10, \"count\": 3},"
                              " \"1\": {\"type\": \"int\", \"minval\": 0, \"maxval\": 20, \"count\": 3}}",
                              true);
    CHECK(s && cti_hp_space_grid_len(s) == 9);
    const int want[9][2] = {{0, 0}, {0, 5}, {0, 10}, {10, 0}, {10, 5}, {10, 10}, {20, 0}, {20, 5}, {20, 10}};
    for (int k = 0; s && k < 9; k++) {
        json_t *p = cti_hp_space_grid_point(s, k);
        CHECK(num(p, "1") == want[k][0] && num(p, "2") == want[k][1]);
        json_decref(p);
    }
    CHECK(s && !cti_hp_space_grid_point(s, 9));
    CHECK_ERR(CT_EINDEX, "grid point 9 is out of range [0, 9)");
    cti_hp_space_free(s);
    /* nested groups, categorical and const; an empty group is one point, {} */
    s = space_of("{\"opt\": {\"type\": \"categorical\", \"vals\": [\"sgd\", \"adam\"]}, \"c\": 5,"
                 " \"net\": {\"depth\": {\"type\": \"int\", \"minval\": 1, \"maxval\": 3, \"count\": 3}, \"e\": {}}}",
                 true);
    CHECK(s && cti_hp_space_grid_len(s) == 6);
    json_t *p = s ? cti_hp_space_grid_point(s, 4) : NULL; /* axes c(1) net.depth(3) net.e(1) opt(2): depth 3, adam? */
    json_t *net = json_object_get(p, "net");
    CHECK(num(p, "c") == 5 && num(net, "depth") == 3 && json_is_object(json_object_get(net, "e")));
    CHECK(strcmp(json_string_value(json_object_get(p, "opt")), "sgd") == 0);
    json_decref(p);
    cti_hp_space_free(s);
    /* no hyperparameters: no grid point */
    s = space_of("{}", true);
    CHECK(s && cti_hp_space_grid_len(s) == 0);
    cti_hp_space_free(s);
}

static void refused(const char *text, bool grid, const char *needle) {
    CHECK(space_of(text, grid) == NULL);
    CHECK_ERR(CT_ECONFIG, needle);
}

static void test_errors(void) {
    refused("{\"lr\": {\"type\": \"double\", \"minval\": 0.5, \"maxval\": 0.1}}", false,
            "hyperparameters.lr: minval (0.5) must be less than maxval (0.1)");
    refused("{\"n\": {\"type\": \"int\", \"minval\": 3, \"maxval\": 3}}", false,
            "hyperparameters.n: minval (3) must be less than maxval (3)");
    refused("{\"n\": {\"type\": \"int\", \"minval\": 1.5, \"maxval\": 3}}", false,
            "hyperparameters.n.minval: must be an integer (type int)");
    refused("{\"a\": {\"b\": {\"type\": \"log\", \"minval\": -3, \"maxval\": -1, \"base\": 0}}}", false,
            "hyperparameters.a.b.base: must be a number > 0");
    refused("{\"lr\": {\"type\": \"log\", \"minval\": -3, \"maxval\": -1}}", false, "hyperparameters.lr.base: is missing");
    /* 10^x is infinite past x = 308.25: refused when the space is read (Determined fails later, writing it) */
    refused("{\"lr\": {\"type\": \"log\", \"minval\": 300, \"maxval\": 400, \"base\": 10}}", false,
            "hyperparameters.lr: base^x overflows a double at x = 400 (10^400 is larger than 1.8e308)");
    refused("{\"lr\": {\"type\": \"log\", \"minval\": -400, \"maxval\": 1, \"base\": 0.1}}", false,
            "hyperparameters.lr: base^x overflows a double at x = -400");
    refused("{\"opt\": {\"type\": \"categorical\", \"vals\": []}}", false,
            "hyperparameters.opt.vals: is empty: a categorical needs at least one value");
    refused("{\"lr\": {\"type\": \"double\", \"minval\": 0, \"maxval\": 1}}", true,
            "hyperparameters.lr: grid search is in use but count was not provided");
    refused("{\"lr\": {\"type\": \"double\", \"minval\": 0, \"maxval\": 1, \"count\": 0}}", false,
            "hyperparameters.lr.count: must be an integer >= 1");
    refused("{\"lr\": {\"type\": \"uniform\", \"minval\": 0, \"maxval\": 1}}", false, "hyperparameters.lr.type: must be one of");
    refused("{\"lr\": {\"type\": \"double\", \"minval\": 0, \"maxval\": 1, \"step\": 2}}", false,
            "unknown key 'hyperparameters.lr.step'");
    refused("{\"c\": {\"type\": \"const\"}}", false, "hyperparameters.c.val: is missing");
    refused("[1, 2]", false, "hyperparameters: must be an object of hyperparameters");
}

int main(void) {
    test_grid_wide_ints();
    test_generator();
    test_sample_mnist();
    test_sample_kinds();
    test_grid_axes();
    test_grid_order();
    test_errors();
    return ct_test_result("search_space");
}
