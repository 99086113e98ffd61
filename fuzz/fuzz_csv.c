/* libFuzzer target: the CSV parser (formats/csv.h) on arbitrary text. The
 * first two bytes pick the options, so one corpus covers them all:
 *   byte 0 bit 0     header line
 *          bit 1     '\t' instead of ','
 *          bits 2-3  label column: none, 0, 1, 2
 *          bits 4-6  features dtype: float32 float64 int64 int32 uint8 bool float16 bfloat16
 *          bit 7     delimiter 0 with the name "fuzz.tsv" (chosen by extension)
 *   byte 1 bit 0     finite_only
 *          bits 1-2  num_classes: 0 (unchecked), 1, 2, 3
 * A failed parse is a format or argument error; an empty parse is an error,
 * never an empty table. A table that parses must be what the options asked
 * for (labels exactly when there is a label column, and within
 * [0, num_classes) when that is set; integer values within the dtype's
 * range; with finite_only, no NaN or inf, float32's values finite as
 * float32 too), and tables of up to 64 rows are printed (doubles with
 * %.17g) and parsed again, giving the same table bit for bit: nothing is
 * lost or invented between text and numbers. Built by fuzz/CMakeLists.txt,
 * run by fuzz/run.sh. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ct_dtype dtypes[8] = {CT_F32, CT_F64, CT_I64, CT_I32,
                                   CT_U8,  CT_BOOL, CT_F16, CT_BF16};

/* Whether the parser keeps `d`'s values as int64, and their range. */
static int integral_range(ct_dtype d, int64_t *lo, int64_t *hi) {
    switch (d) {
    case CT_I64: *lo = INT64_MIN; *hi = INT64_MAX; return 1;
    case CT_I32: *lo = INT32_MIN; *hi = INT32_MAX; return 1;
    case CT_U8: *lo = 0; *hi = 255; return 1;
    case CT_BOOL: *lo = 0; *hi = 1; return 1;
    default: return 0;
    }
}

/* The table as text in o's layout (no header, the label in its column), then
 * parsed again: the same numbers bit for bit (NaNs as NaNs, whatever their
 * payload: "%.17g" prints them all as "nan"). */
static void round_trip(const cti_csv_table *t, const ct_csv_opts *o, char delim) {
    int64_t width = t->cols + (t->labels != NULL);
    size_t count = (size_t)(t->rows * t->cols);
    char *text = malloc((size_t)(t->rows * width) * 32 + 1);
    if (!text) abort();
    size_t at = 0;
    const double *reals = t->values;
    const int64_t *ints = t->values;
    for (int64_t r = 0; r < t->rows; r++) {
        for (int64_t c = 0, f = r * t->cols; c < width; c++) {
            char sep = c + 1 < width ? delim : '\n';
            if (t->labels && c == o->label_column)
                at += (size_t)sprintf(text + at, "%" PRId64 "%c", t->labels[r], sep);
            else if (t->values_dtype == CT_I64)
                at += (size_t)sprintf(text + at, "%" PRId64 "%c", ints[f++], sep);
            else
                at += (size_t)sprintf(text + at, "%.17g%c", reals[f++], sep);
        }
    }
    ct_csv_opts again_opts = *o;
    again_opts.header = false;
    again_opts.delimiter = delim;
    cti_csv_table again;
    if (cti_csv_table_parse(text, at, "again.csv", &again_opts, &again)) abort();
    if (again.rows != t->rows || again.cols != t->cols || again.values_dtype != t->values_dtype)
        abort();
    if (t->labels && memcmp(again.labels, t->labels, (size_t)t->rows * sizeof *t->labels) != 0)
        abort();
    const double *reals2 = again.values;
    for (size_t i = 0; i < count; i++) {
        if (t->values_dtype == CT_I64 ? ints[i] != ((const int64_t *)again.values)[i]
            : isnan(reals[i])         ? !isnan(reals2[i])
                                      : memcmp(&reals[i], &reals2[i], sizeof reals[i]) != 0)
            abort();
    }
    cti_csv_table_free(&again);
    free(text);
}

/* The options' own checks held: labels in [0, num_classes) when it is set,
 * and no non-finite feature with finite_only. */
static int checks_hold(const cti_csv_table *t, const ct_csv_opts *o) {
    for (int64_t r = 0; o->num_classes > 0 && r < t->rows; r++)
        if (t->labels[r] < 0 || t->labels[r] >= o->num_classes) return 0;
    if (!o->finite_only || t->values_dtype != CT_F64) return 1;
    const double *v = t->values;
    for (int64_t i = 0; i < t->rows * t->cols; i++)
        if (!isfinite(v[i]) || (t->dtype == CT_F32 && !isfinite((float)v[i]))) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    uint8_t sel = data[0], sel2 = data[1];
    ct_csv_opts o = {.header = sel & 1,
                     .delimiter = (sel & 2) ? '\t' : ',',
                     .label_column = ((sel >> 2) & 3) - 1,
                     .dtype = dtypes[(sel >> 4) & 7],
                     .finite_only = sel2 & 1,
                     .num_classes = (sel2 >> 1) & 3};
    const char *name = "fuzz.csv";
    if (sel & 0x80) {
        o.delimiter = 0;
        name = "fuzz.tsv";
    }
    cti_csv_table t;
    if (cti_csv_table_parse((const char *)data + 2, size - 2, name, &o, &t)) {
        int code = ct_last_code();
        if (code != CT_EFORMAT && code != CT_EINVAL) abort();
        if (t.values || t.labels || t.rows) abort(); /* a failed parse leaves nothing to free */
        ct_clear_error();
        return 0;
    }
    if (t.rows <= 0 || t.cols < 0) abort(); /* an empty parse is an error, never an empty table */
    if (t.dtype != o.dtype || (t.labels != NULL) != (o.label_column >= 0)) abort();
    if ((t.values == NULL) != (t.cols == 0)) abort();
    int64_t lo, hi;
    if (integral_range(o.dtype, &lo, &hi)) {
        if (t.values_dtype != CT_I64) abort();
        const int64_t *v = t.values;
        for (int64_t i = 0; i < t.rows * t.cols; i++)
            if (v[i] < lo || v[i] > hi) abort();
    } else if (t.values_dtype != CT_F64) {
        abort();
    }
    if (!checks_hold(&t, &o)) abort();
    if (t.rows <= 64) round_trip(&t, &o, o.delimiter ? o.delimiter : '\t'); /* 0: the name says .tsv */
    cti_csv_table_free(&t);
    return 0;
}
