/* tests/json_write/test_json_write.c — cti_json_dumps (src/base/json_write.c)
 * against jansson's json_dumps on the same documents under every flag the
 * library passes and the others it takes: the same text but for the reals,
 * each of which is the same double as jansson's and written as
 * cti_float_repr writes it; what jansson reads back is the same tree, bit
 * for bit; where jansson fails (a loop, a string that is not UTF-8, a
 * scalar without JSON_ENCODE_ANY), so does the writer. Python's side of the
 * reals is test_repr.py. Pure C: links base only. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "base/json_write.h"
#include "ct_test.h"

/* ---- random documents ------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint64_t next64(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Du;
}

/* Reals of every kind: random bits, short decimals, integral values,
 * zeros, the extremes. */
static double random_real(void) {
    static const double special[] = {0.0, -0.0, 0.003, 0.1, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5,
                                     5e-324, DBL_MAX, DBL_MIN, 123456789012345680.0, 1.0, 100.0, -2.5};
    uint64_t r = next64();
    switch (r % 5) {
    case 0: {
        double d;
        uint64_t bits = next64();
        memcpy(&d, &bits, sizeof d);
        return isfinite(d) ? d : 0.5;
    }
    case 1: {
        char text[48];
        snprintf(text, sizeof text, "%llde%d", (long long)(next64() % 1000000) - 500000, (int)(next64() % 40) - 25);
        return strtod(text, NULL);
    }
    case 2: return (double)((int64_t)(next64() % 2000001) - 1000000);
    default: return special[(r >> 8) % (sizeof special / sizeof *special)];
    }
}

/* Keys and strings that exercise escaping: quotes, backslashes, slashes,
 * control characters, non-ASCII (two, three and four bytes), empty. */
static const char *const strings[] = {
    "lr", "loss", "", "a/b", "q\"uote", "back\\slash", "tab\there", "new\nline", "ctl\x01", "\xc3\xa9t\xc3\xa9",
    "\xe2\x82\xac", "\xf0\x9f\x98\x80", "Zebra", "zebra", "10", "2", "group", "metrics",
};
#define N_STRINGS (sizeof strings / sizeof *strings)

static json_t *random_tree(int depth) {
    int kind = (int)(next64() % (depth > 3 ? 7 : 9));
    switch (kind) {
    case 0: return json_null();
    case 1: return json_boolean(next64() & 1);
    case 2: {
        static const json_int_t ints[] = {0, 1, -1, 42, INT64_MAX, INT64_MIN, 1000000};
        return json_integer(ints[next64() % 7]);
    }
    case 3: return json_string(strings[next64() % N_STRINGS]);
    case 4:
    case 5:
    case 6: return json_real(random_real());
    case 7: {
        json_t *a = json_array();
        int n = (int)(next64() % 5);
        for (int i = 0; i < n; i++) json_array_append_new(a, random_tree(depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        int n = (int)(next64() % 6);
        for (int i = 0; i < n; i++) json_object_set_new(o, strings[next64() % N_STRINGS], random_tree(depth + 1));
        return o;
    }
    }
}

/* ---- comparing -------------------------------------------------------------- */

/* mine is theirs but for the reals: outside strings, each number of mine is
 * jansson's integer as it is, or the same double as jansson's real, written
 * as cti_float_repr writes it. */
static bool same_but_reals(const char *mine, const char *theirs) {
    const char *a = mine, *b = theirs;
    bool in_string = false;
    while (*a && *b) {
        if (!in_string && (*a == '-' || (*a >= '0' && *a <= '9'))) {
            size_t na = strspn(a, "0123456789+-.eE"), nb = strspn(b, "0123456789+-.eE");
            bool real_a = strcspn(a, ".eE") < na, real_b = strcspn(b, ".eE") < nb;
            if (nb == 0 || real_a != real_b) return false;
            if (!real_b && (na != nb || memcmp(a, b, na) != 0)) return false;
            if (real_b) {
                double x = strtod(a, NULL), y = strtod(b, NULL);
                char repr[CTI_FLOAT_REPR_LEN];
                cti_float_repr(y, repr);
                if (memcmp(&x, &y, sizeof x) != 0 || strlen(repr) != na || memcmp(repr, a, na) != 0) return false;
            }
            a += na;
            b += nb;
            continue;
        }
        if (*a != *b) return false;
        if (in_string && *a == '\\') {
            a++;
            b++;
            if (!*a || *a != *b) return false;
        } else if (*a == '"') {
            in_string = !in_string;
        }
        a++;
        b++;
    }
    return *a == *b;
}

/* The same tree, reals bit for bit (json_equal takes -0.0 for 0.0). */
static bool same_tree(const json_t *x, const json_t *y) {
    if (!x || !y || json_typeof(x) != json_typeof(y)) return false;
    switch (json_typeof(x)) {
    case JSON_REAL: {
        double a = json_real_value(x), b = json_real_value(y);
        return memcmp(&a, &b, sizeof a) == 0;
    }
    case JSON_ARRAY:
        if (json_array_size(x) != json_array_size(y)) return false;
        for (size_t i = 0; i < json_array_size(x); i++)
            if (!same_tree(json_array_get(x, i), json_array_get(y, i))) return false;
        return true;
    case JSON_OBJECT: {
        if (json_object_size(x) != json_object_size(y)) return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)x, k, v) if (!same_tree(v, json_object_get(y, k))) return false;
        return true;
    }
    default: return json_equal(x, y);
    }
}

/* Every flag the library passes (COMPACT; INDENT(2); ENCODE_ANY; the
 * no-ops) and the rest cti_json_dumps takes. */
static const size_t flag_sets[] = {
    JSON_COMPACT,
    JSON_INDENT(2),
    JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17),
    JSON_ENCODE_ANY | JSON_COMPACT,
    0,
    JSON_INDENT(4) | JSON_SORT_KEYS,
    JSON_INDENT(1) | JSON_COMPACT,
    JSON_SORT_KEYS | JSON_ENSURE_ASCII | JSON_ESCAPE_SLASH | JSON_ENCODE_ANY,
    JSON_INDENT(31) | JSON_ENSURE_ASCII,
    JSON_EMBED | JSON_COMPACT,
    JSON_EMBED | JSON_INDENT(2),
};
#define N_FLAG_SETS (sizeof flag_sets / sizeof *flag_sets)

static int n_compared = 0;

/* doc under every flag set: as jansson writes it but for the reals, read
 * back the same; NULL exactly where jansson's is. */
static void compare(const json_t *doc, const char *what) {
    for (size_t f = 0; f < N_FLAG_SETS; f++) {
        size_t flags = flag_sets[f];
        char *mine = cti_json_dumps(doc, flags);
        char *theirs = json_dumps(doc, flags & ~(size_t)JSON_REAL_PRECISION(31));
        n_compared++;
        CHECK(!mine == !theirs);
        if (!mine != !theirs) fprintf(stderr, "%s, flags 0x%zx: %s vs jansson's %s\n", what, flags, mine, theirs);
        if (mine && theirs) {
            bool same = same_but_reals(mine, theirs);
            CHECK(same);
            if (!same) fprintf(stderr, "%s, flags 0x%zx:\n%s\nvs jansson's\n%s\n", what, flags, mine, theirs);
            if (!(flags & JSON_EMBED)) {
                json_t *back = json_loads(mine, JSON_DECODE_ANY, NULL);
                bool equal = same_tree(doc, back);
                CHECK(equal);
                if (!equal) fprintf(stderr, "%s, flags 0x%zx: %s reads back otherwise\n", what, flags, mine);
                json_decref(back);
            }
        }
        free(mine);
        free(theirs);
    }
}

/* ---- the documents ------------------------------------------------------------ */

static void fixed_documents(void) {
    /* a metrics.jsonl line as report.c builds it */
    json_t *line = json_pack("{s:s, s:I, s:f, s:{s:f, s:f, s:f, s:[f, f]}, s:f, s:{}}", "group", "training",
                             "batches", (json_int_t)20, "epochs", 0.3125, "metrics", "loss", 0.1 + 0.2, "lr", 0.003,
                             "lr-SGD-1/pg2", 1e-05, "acc", 1.0, 2.5e-7, "time", 1747000000.123456, "timings");
    compare(line, "a metrics line");
    char *text = cti_json_dumps(line, JSON_COMPACT);
    CHECK(text && strstr(text, "\"lr\":0.003,") && strstr(text, "\"loss\":0.30000000000000004,") &&
          strstr(text, "\"lr-SGD-1/pg2\":1e-05,") && strstr(text, "[1.0,2.5e-07]") &&
          strstr(text, "\"epochs\":0.3125,"));
    free(text);
    json_decref(line);

    /* empty containers, nested, and scalars at the top */
    json_t *empties = json_pack("{s:[], s:{}, s:[[], {}, [[]]], s:{s:{}}}", "a", "b", "c", "d", "e");
    compare(empties, "empty containers");
    json_decref(empties);
    json_t *scalars[] = {json_real(0.003), json_real(-0.0), json_integer(-7), json_string("x/\"y\""), json_null(),
                         json_true(), json_array(), json_object()};
    for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++) {
        compare(scalars[i], "a top-level value");
        json_decref(scalars[i]);
    }
    CHECK(cti_json_dumps(NULL, JSON_ENCODE_ANY) == NULL);

    /* a string that is not UTF-8 (made without jansson's check): refused */
    json_t *bad = json_pack("[o]", json_stringn_nocheck("\xff\xfe", 2));
    compare(bad, "a string that is not UTF-8");
    CHECK(cti_json_dumps(bad, JSON_COMPACT) == NULL);
    json_decref(bad);

    /* a loop: refused, as jansson refuses it */
    json_t *a = json_array(), *b = json_object();
    json_array_append(a, b);
    json_object_set(b, "a", a);
    CHECK(cti_json_dumps(a, JSON_COMPACT) == NULL && json_dumps(a, JSON_COMPACT) == NULL);
    json_object_clear(b);
    json_decref(b);
    /* the same object twice, not a loop: written twice */
    json_t *twice = json_pack("{s:o, s:O}", "x", a, "y", a);
    compare(twice, "one array under two keys");
    json_decref(twice);
}

/* ---- cti_float_repr's layout ---------------------------------------------------- */

/* Python's own repr of these (test_repr.py compares thousands more with
 * Python itself). */
static void layout(void) {
    static const struct {
        double x;
        const char *repr;
    } cases[] = {
        {0.003, "0.003"},
        {0.1, "0.1"},
        {1.0 / 3, "0.3333333333333333"},
        {1e16, "1e+16"},
        {1e15, "1000000000000000.0"},
        {9999999999999998.0, "9999999999999998.0"},
        {1.5e16, "1.5e+16"},
        {1e-4, "0.0001"},
        {1e-5, "1e-05"},
        {-1.5e-7, "-1.5e-07"},
        {5e-324, "5e-324"},
        {DBL_MAX, "1.7976931348623157e+308"},
        {-0.0, "-0.0"},
        {0.0, "0.0"},
        {123456789012345680.0, "1.2345678901234568e+17"},
        {1.0, "1.0"},
        {100.0, "100.0"},
        {1000000.0, "1000000.0"},
        {-42.0, "-42.0"},
        {12.5, "12.5"},
        {1e22, "1e+22"},
        {1e23, "1e+23"},
        {0x1p-1017, "7.120236347223045e-307"}, /* printf's rounded 16 digits miss; their neighbour reads back */
        {NAN, "nan"},
        {INFINITY, "inf"},
        {-INFINITY, "-inf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[CTI_FLOAT_REPR_LEN];
        cti_float_repr(cases[i].x, buf);
        bool ok = strcmp(buf, cases[i].repr) == 0;
        CHECK(ok);
        if (!ok) fprintf(stderr, "cti_float_repr: %s, Python's repr: %s\n", buf, cases[i].repr);
    }
}

int main(void) {
    layout();
    fixed_documents();
    for (int i = 0; i < 400; i++) {
        json_t *doc = random_tree(0);
        char what[64];
        snprintf(what, sizeof what, "random document %d", i);
        compare(doc, what);
        json_decref(doc);
    }
    printf("%d documents and flag sets compared with jansson's\n", n_compared);
    return ct_test_result("json_write_jansson");
}
