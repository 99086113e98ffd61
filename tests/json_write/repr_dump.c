/* tests/json_write/repr_dump.c — what test_repr.py compares with Python:
 *
 *   repr_dump DIR
 *
 * DIR/reprs.txt: one line per double, "<its 16 hex digits> <cti_float_repr>":
 * the edge cases, every power of two with its neighbours on either side
 * (where the shortest digits are not printf's rounding), random bit
 * patterns and random decimal-looking values (few digits, any exponent),
 * integers. DIR/<name>.json: documents as cti_json_dumps writes them with
 * the library's two layouts (compact: metrics.jsonl and experiment.jsonl;
 * indent 2: metadata.json), and DIR/<name>.bits the hex digits of their
 * reals in document order. Pure C: links base only. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/json_write.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Du;

static uint64_t next64(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Du;
}

static uint64_t bits_of(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static void line(FILE *f, double x) {
    char buf[CTI_FLOAT_REPR_LEN];
    fprintf(f, "%016llx %s\n", (unsigned long long)bits_of(x), cti_float_repr(x, buf));
}

/* A short decimal: 1 to 17 random digits times a power of ten, as strtod
 * reads it (the values people write: 0.003, 2.5e-07, 1234.5). */
static double random_decimal(void) {
    char text[64];
    int n = 1 + (int)(next64() % 17);
    int at = 0;
    if (next64() & 1) text[at++] = '-';
    for (int i = 0; i < n; i++) text[at++] = (char)('0' + (i == 0 ? 1 + next64() % 9 : next64() % 10));
    snprintf(text + at, sizeof text - (size_t)at, "e%d", (int)(next64() % 640) - 330);
    return strtod(text, NULL);
}

static int write_reprs(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/reprs.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    static const double edges[] = {0.003, 0.1, 0.2, 0.30000000000000004, 1.0 / 3, 2.0 / 3, 1e16, 1e15,
                                   9999999999999998.0, 1e-4, 1e-5, 0.00011, 9.999999999999999e-05, 5e-324, 1e-323,
                                   DBL_MIN, 0x1.fffffffffffffp-1023, DBL_MAX, DBL_EPSILON, -0.0, 0.0,
                                   123456789012345680.0, 1.5e16, 1e22, 1e23, 9007199254740992.0, 9007199254740994.0,
                                   1.0, -1.0, 2.0, 100.0, 1000000.0, 12345.678, 1747000000.123456, NAN, INFINITY,
                                   -INFINITY};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) line(f, edges[i]);
    for (int e = -1074; e <= 1023; e++) { /* powers of two and their neighbours */
        double p = ldexp(1.0, e);
        line(f, p);
        line(f, -nextafter(p, 0));
        if (e < 1023) line(f, nextafter(p, INFINITY));
    }
    for (int e = -330; e <= 310; e++) /* powers of ten and one below them */
        for (int m = 1; m <= 9; m += 4) {
            char text[32];
            snprintf(text, sizeof text, "%de%d", m, e);
            double x = strtod(text, NULL);
            if (x != 0 && isfinite(x)) {
                line(f, x);
                line(f, nextafter(x, 0));
            }
        }
    for (int64_t k = -1000; k <= 1000; k += 7) line(f, (double)k);
    for (int i = 0; i < 20000; i++) { /* random bit patterns */
        uint64_t u = next64();
        double x;
        memcpy(&x, &u, sizeof x);
        if (isfinite(x)) line(f, x);
    }
    for (int i = 0; i < 20000; i++) line(f, random_decimal());
    for (int i = 0; i < 2000; i++) line(f, (double)(next64() % 1000000) / pow(10, (double)(next64() % 8)));
    return fclose(f) != 0;
}

/* DIR/NAME.json as cti_json_dumps writes doc with flags, DIR/NAME.bits its
 * reals in document order. */
static void bits_of_reals(FILE *f, const json_t *j) {
    if (json_is_real(j)) fprintf(f, "%016llx\n", (unsigned long long)bits_of(json_real_value(j)));
    for (size_t i = 0; json_is_array(j) && i < json_array_size(j); i++) bits_of_reals(f, json_array_get(j, i));
    const char *k;
    json_t *v;
    if (json_is_object(j)) json_object_foreach((json_t *)j, k, v) bits_of_reals(f, v);
}

static int write_doc(const char *dir, const char *name, json_t *doc, size_t flags) {
    char path[4200];
    char *text = cti_json_dumps(doc, flags);
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    FILE *f = text ? fopen(path, "w") : NULL;
    int rc = !f || fputs(text, f) < 0;
    if (f) rc |= fclose(f) != 0;
    free(text);
    snprintf(path, sizeof path, "%s/%s.bits", dir, name);
    f = fopen(path, "w");
    if (f) bits_of_reals(f, doc);
    rc |= !f || fclose(f) != 0;
    json_decref(doc);
    return rc;
}

static int write_docs(const char *dir) {
    int rc = 0;
    /* a metrics.jsonl line, as report.c builds one */
    rc |= write_doc(dir, "metrics_line_compact",
                    json_pack("{s:s, s:I, s:f, s:{s:f, s:f, s:f, s:[f, f, f], s:n}, s:f, s:{s:f, s:f}}", "group",
                              "training", "batches", (json_int_t)20, "epochs", 0.3125, "metrics", "loss", 0.1 + 0.2, "lr",
                              0.003, "lr-SGD-1/pg2", 1e-05, "per_class", 1.0, -0.0, 1e16, "nan_metric", "time",
                              1747000000.123456, "timings", "wall_s", 0.012345678, "data_s", 1e-7),
                    JSON_COMPACT);
    /* a metadata.json, nested, with strings Python and jansson escape alike */
    rc |= write_doc(dir, "metadata_indent2",
                    json_pack("{s:i, s:s, s:{s:f, s:f, s:{s:f, s:[]}, s:s}, s:{}, s:[{s:f}, b, n], s:s}",
                              "steps_completed", 40, "framework", "ctrial \"C\"/path\\x \xc3\xa9\x01", "hparams", "lr",
                              0.003, "momentum", 0.9, "nested", "wd", 5e-4, "empty", "name", "tab\tnew\nline",
                              "validation_metrics", "list", "v", 123456789012345680.0, 1, "metadata_crc32", "00000000"),
                    JSON_INDENT(2));
    /* many reals in both layouts */
    for (int layout = 0; layout < 2; layout++) {
        json_t *doc = json_object(), *arr = json_array();
        for (int i = 0; i < 3000; i++) {
            uint64_t u = next64();
            double x;
            memcpy(&x, &u, sizeof x);
            double d = i % 2 ? random_decimal() : x;
            json_array_append_new(arr, json_real(isfinite(d) ? d : 1.0));
        }
        json_object_set_new(doc, "reals", arr);
        for (int i = 0; i < 200; i++) {
            char key[16];
            snprintf(key, sizeof key, "k%d", i);
            double d = random_decimal();
            json_object_set_new(doc, key, json_real(isfinite(d) ? d : -1.0));
        }
        rc |= write_doc(dir, layout ? "reals_indent2" : "reals_compact", doc, layout ? JSON_INDENT(2) : JSON_COMPACT);
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: repr_dump DIR\n");
        return 2;
    }
    int rc = write_reprs(argv[1]) || write_docs(argv[1]);
    if (rc) fprintf(stderr, "repr_dump: cannot write into %s\n", argv[1]);
    return rc;
}
