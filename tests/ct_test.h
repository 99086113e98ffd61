/* tests/ct_test.h — the few macros the C tests share. Each CHECK records a
 * failure with its line and goes on; a test's main returns ct_test_result(). */
#ifndef CT_TEST_H
#define CT_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

static int ct_test_failures = 0;
static int ct_test_checks = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        ct_test_checks++;                                                            \
        if (!(cond)) {                                                               \
            ct_test_failures++;                                                      \
            fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__,  \
                    __LINE__, #cond, ct_last_error());                               \
        }                                                                            \
    } while (0)

#define CHECK_OK(expr) CHECK((expr) == 0)

#define CHECK_NEAR(a, b, tol)                                                        \
    do {                                                                             \
        double ct_a_ = (a), ct_b_ = (b);                                             \
        ct_test_checks++;                                                            \
        if (!(fabs(ct_a_ - ct_b_) <= (tol))) {                                       \
            ct_test_failures++;                                                      \
            fprintf(stderr, "%s:%d: %s = %.17g, expected %.17g (tol %g)\n", __FILE__, \
                    __LINE__, #a, ct_a_, ct_b_, (double)(tol));                      \
        }                                                                            \
    } while (0)

/* The call failed with `code` and a message containing `needle`. */
#define CHECK_ERR(code, needle)                                                      \
    do {                                                                             \
        ct_test_checks++;                                                            \
        if (ct_last_code() != (code) || !strstr(ct_last_error(), (needle))) {       \
            ct_test_failures++;                                                      \
            fprintf(stderr, "%s:%d: expected %s with \"%s\", got %s: \"%s\"\n",      \
                    __FILE__, __LINE__, ct_strerror(code), (needle),                 \
                    ct_strerror(ct_last_code()), ct_last_error());                   \
        }                                                                            \
        ct_clear_error();                                                            \
    } while (0)

/* The first 64 KiB of a file, NUL-terminated (NEW; "" when missing):
 * what a test reads back of a log or of captured output. */
static inline char *ct_test_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf = (char *)calloc(1, 1 << 16);
    if (f && buf) {
        size_t n = fread(buf, 1, (1 << 16) - 1, f);
        buf[n] = '\0';
    }
    if (f) fclose(f);
    return buf;
}

/* a and b hold the same dtype, shape and bits (NaN equal to itself). */
static inline bool ct_test_same(const ct_tensor *a, const ct_tensor *b) {
    if (!a || !b) return false;
    ct_value *x = ct_value_tensor(ct_alias(a)), *y = ct_value_tensor(ct_alias(b));
    bool eq = ct_value_equal(x, y);
    ct_value_free(x);
    ct_value_free(y);
    return eq;
}

static inline int ct_test_result(const char *name) {
    printf("%s: %d checks, %d failed\n", name, ct_test_checks, ct_test_failures);
    return ct_test_failures ? 1 : 0;
}

/* A test that runs under mpirun (and as one process): ct_dist_init, with
 * this rank and the number of ranks into *rank and *size; false (said on
 * stderr) when it fails. */
static inline bool ct_test_dist_init(int *rank, int *size) {
    if (ct_dist_init() != 0) {
        fprintf(stderr, "ct_dist_init: %s\n", ct_last_error());
        return false;
    }
    *rank = ct_dist_rank();
    *size = ct_dist_size();
    return true;
}

/* Its end: every rank prints its result as "name (rank R of P)", then
 * learns whether any rank failed before any leaves; finalizes. Returns
 * main's exit status, the same on every rank. */
static inline int ct_test_dist_result(const char *name) {
    char full[128];
    snprintf(full, sizeof full, "%s (rank %d of %d)", name, ct_dist_rank(), ct_dist_size());
    int64_t failed = ct_test_result(full);
    ct_dist_allreduce_i64(&failed, 1, CT_DIST_MAX);
    ct_dist_finalize();
    return failed ? 1 : 0;
}

#endif
