/* src/formats/csv.h — CSV/TSV text of numbers parsed into a table, in pure
 * C. Internal to ctrial: data/csv.c makes ct_csv_parse's datasets from the
 * table, and fuzz/fuzz_csv.c fuzzes it without libtorch.
 *
 *     cti_csv_table t;
 *     if (cti_csv_table_parse(text, len, "train.csv", &opts, &t)) return ct_last_code();
 *     ... t.rows x t.cols values, t.labels ...
 *     cti_csv_table_free(&t);
 *
 * The options are data.h's ct_csv_opts, and the text is what data.h says a
 * CSV file is: numbers as strtod reads them in the "C" locale ("1e-3",
 * "inf", "nan", hex floats), blanks around them allowed, empty fields not;
 * lines ending in "\n" or "\r\n"; blank lines skipped; a UTF-8 byte order
 * mark ignored; the header line, when there is one, skipped unread; every
 * row with the same number of columns. The options' checks are made here
 * too: finite_only (no feature that is, or narrows to, NaN or +-inf) and
 * num_classes (labels in [0, num_classes)).
 *
 * Values stay wide: integer and bool dtypes as int64 (checked against the
 * dtype's range), the floating dtypes as double, which the caller narrows
 * (to float16 or bfloat16 too, whose rounding is libtorch's business, not
 * this parser's).
 *
 * Threads: the parse switches only the calling thread to the C locale
 * (uselocale) and back, never the process's (setlocale); any thread may
 * parse at any time.
 */
#ifndef CTRIAL_FORMATS_CSV_H
#define CTRIAL_FORMATS_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "ctrial/data.h" /* ct_csv_opts */

/* A parsed file: rows x cols feature values, row-major, and a label per row
 * when the options name a label column. */
typedef struct {
    int64_t rows;          /* >= 1: text without data rows is an error */
    int64_t cols;          /* the rows' columns less the label column; may be 0 */
    ct_dtype dtype;        /* the features' dtype the options asked for */
    ct_dtype values_dtype; /* CT_I64 for integer and bool dtypes, else CT_F64 */
    void *values;          /* rows * cols of values_dtype; NULL when cols is 0 */
    int64_t *labels;       /* rows labels, or NULL without a label column */
} cti_csv_table;

/* Parses text[0, len) (NULL only when len is 0) with the options `o` (not
 * NULL; a delimiter of 0 is chosen by `name`'s extension: '\t' for .tsv and
 * .tsv.gz, else ','). `name` (not NULL) names the text in messages, with
 * the line and column of a bad value. Returns 0 with *out filled (its
 * buffers are NEW: free them with cti_csv_table_free), or an error with *out
 * zeroed: CT_EINVAL (bad delimiter, label_column or num_classes, a label
 * column beyond the first row), CT_EDTYPE (o->dtype is no dtype),
 * CT_EFORMAT (a value that is no number or out of the dtype's range, a
 * non-finite feature with finite_only, a label outside [0, num_classes), an
 * empty value, a NUL byte, a row of another length, no data rows) or
 * CT_ENOMEM. Borrows text, name and o. */
int cti_csv_table_parse(const char *text, size_t len, const char *name, const ct_csv_opts *o,
                       cti_csv_table *out);

/* Frees the table's buffers and zeroes it. Accepts NULL and a zeroed table. */
void cti_csv_table_free(cti_csv_table *t);

#endif
