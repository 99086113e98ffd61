/* Writes the event file that test_tb_read.py reads back with TensorBoard's
 * own readers. Usage: tb_write LOGDIR SUFFIX; prints the file's path.
 *
 * The values are quotients of small integers and the wall times binary
 * fractions, so Python recomputes them bit for bit; the edge cases (float
 * rounding and overflow, signed zeros, NaN, extreme steps, wall_time "now",
 * long and non-ASCII tags) are listed here and there alike. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "ctrial/error.h"
#include "formats/tbevents.h"

static const char *const tags[4] = {"training/loss", "training/lr", "validation/accuracy",
                                    "validation/loss"};

static double value_of(int t, int64_t step) {
    return (double)((step * 37 + t * 11) % 101 - 50) / 7.0;
}

static double wall_of(int t, int64_t step) {
    return 1700000000.0 + (double)step * 0.25 + t * 0.0625;
}

static int fail(const char *what) {
    fprintf(stderr, "tb_write: %s: %s: %s\n", what, ct_strerror(ct_last_code()), ct_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tb_write LOGDIR SUFFIX\n");
        return 2;
    }
    cti_tb_writer *w = cti_tb_open(argv[1], argv[2]);
    if (!w) return fail("open");

    /* A training loop: training scalars every report, validation every
     * other one, a flush after each. 300 scalars. */
    for (int64_t s = 0; s < 100; s++) {
        int64_t step = s * 10;
        for (int t = 0; t < 4; t++) {
            if (t >= 2 && s % 2 == 1) continue;
            if (cti_tb_add_scalar(w, tags[t], value_of(t, step), step, wall_of(t, step)))
                return fail(tags[t]);
        }
        if (s % 10 == 9 && cti_tb_flush(w)) return fail("flush");
    }

    const double values[] = {0.1,     -0.0,     0.0,     INFINITY,  -INFINITY, NAN,
                             1e-45,   3e-39,    FLT_MAX, -FLT_MAX,  0x1p128 - 0x1p103,
                             -(0x1p128 - 0x1p103),        0x1p128 - 0x1p103 - 0x1p75,
                             1e300,   -1e300,   1e-300,  16777217.0, 1.0 / 3.0};
    for (int i = 0; i < (int)(sizeof values / sizeof values[0]); i++)
        if (cti_tb_add_scalar(w, "edge/value", values[i], i, 1700001000.0 + i))
            return fail("edge/value");

    const int64_t steps[] = {-1, -5, INT64_MIN, INT64_MAX, 1, 0, 127, 128, INT64_C(1) << 31};
    for (int i = 0; i < (int)(sizeof steps / sizeof steps[0]); i++)
        if (cti_tb_add_scalar(w, "edge/step", i, steps[i], 1700002000.0 + i))
            return fail("edge/step");

    /* wall_time <= 0: now. */
    if (cti_tb_add_scalar(w, "clock/now", 1.0, 1, 0.0) ||
        cti_tb_add_scalar(w, "clock/now", 2.0, 2, -3.0))
        return fail("clock/now");

    char long_tag[1001] = "long/";
    for (int i = 5; i < 1000; i++) long_tag[i] = (char)('a' + i % 26);
    long_tag[1000] = '\0';
    if (cti_tb_add_scalar(w, long_tag, 42.0, 5, 1700003000.0) ||
        cti_tb_add_scalar(w, "validation/größe €", -42.5, 6, 1700003001.0))
        return fail("tags");

    printf("%s\n", cti_tb_path(w));
    if (cti_tb_flush(w)) return fail("final flush");
    cti_tb_close(w);
    return 0;
}
