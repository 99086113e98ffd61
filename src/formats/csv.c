/* src/formats/csv.c — CSV/TSV text of numbers into a table (see csv.h).
 *
 * One pass over the lines: each row is checked for its number of columns,
 * then each field is trimmed into a NUL-terminated scratch copy (strtod and
 * strtoll need one) and parsed into a growing array of values, and of labels.
 * Messages name the text, line and column ("train.csv:7:3: 'x' is not a
 * number"); data/csv.c passes them on unchanged, and tests/datasets checks
 * their texts. Every message about a value goes through bad_value, so they
 * all read alike.
 */
#define _POSIX_C_SOURCE 200809L /* newlocale, uselocale, strcasecmp */

#include "formats/csv.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ctrial/error.h"

typedef struct {
    const char *name;
    char delim;
    int label_column;
    int64_t num_classes; /* > 0: labels must be in [0, num_classes) */
    bool finite_only;  /* refuse features that are, or narrow to, NaN or +-inf */
    bool int_features; /* features parsed as integers (integer or bool dtype) */
    ct_dtype dtype;
    int64_t line;      /* 1-based number of the line being parsed */
    int64_t ncols;     /* columns per row; -1 before the first row */
    int64_t ncols_line;
    int64_t rows;
    /* features: doubles, or int64 when int_features */
    void *vals;
    size_t nvals, vcap;
    int64_t *labels;
    size_t lcap;
    char *scratch; /* one NUL-terminated field */
    size_t scap;
} csv_parser;

static bool is_int_dtype(ct_dtype d) {
    return d == CT_I64 || d == CT_I32 || d == CT_I16 || d == CT_I8 || d == CT_U8 || d == CT_BOOL;
}

/* Range of an integer dtype's values. */
static void int_range(ct_dtype d, int64_t *lo, int64_t *hi) {
    switch (d) {
    case CT_BOOL: *lo = 0; *hi = 1; break;
    case CT_U8: *lo = 0; *hi = 255; break;
    case CT_I8: *lo = -128; *hi = 127; break;
    case CT_I16: *lo = -32768; *hi = 32767; break;
    case CT_I32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    default: *lo = INT64_MIN; *hi = INT64_MAX; break;
    }
}

static int grow(void **p, size_t *cap, size_t need, size_t size, const char *name) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / size)
            return ct_set_error(CT_ENOMEM, "%s: too large to hold in memory", name);
        ncap *= 2;
    }
    void *q = realloc(*p, ncap * size);
    if (!q) return ct_set_error(CT_ENOMEM, "%s: out of host memory", name);
    *p = q;
    *cap = ncap;
    return 0;
}

static bool is_blank(char c, char delim) { return c == ' ' || (c == '\t' && delim != '\t'); }

/* ---- one value ------------------------------------------------------------ */

/* "name:line:col: 'cell' what": the cell's text (cut at 40 characters),
 * then what is wrong with it, formatted from fmt. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int bad_value(const csv_parser *p, int64_t col, const char *fmt, ...) {
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ct_set_error(CT_EFORMAT, "%s:%" PRId64 ":%" PRId64 ": '%.40s%s' %s", p->name, p->line,
                        col + 1, p->scratch, strlen(p->scratch) > 40 ? "..." : "", what);
}

static int out_of_range(const csv_parser *p, int64_t col) {
    return bad_value(p, col, "is out of range for %s", ct_dtype_name(p->dtype));
}

/* Leaves errno as strtod left it: ERANGE tells an overflowing "1e999" from
 * a spelled "inf". */
static int parse_double(const csv_parser *p, int64_t col, double *out) {
    char *end;
    errno = 0;
    *out = strtod(p->scratch, &end);
    if (end == p->scratch || *end) return bad_value(p, col, "is not a number");
    return 0;
}

/* Whether libtorch, narrowing the finite double v to the floating dtype d,
 * makes it +-inf. It rounds the double to float (to nearest, ties to even),
 * and float16 and bfloat16 from that float, so a value overflows from half
 * an ulp above the dtype's largest finite value, as reached through float
 * (double rounding included: checked against torch 2.11's .to()). */
static bool narrows_to_inf(ct_dtype d, double v) {
    if (d == CT_F64) return false;
    if (fabs(v) >= 0x1.ffffffp127) return true; /* FLT_MAX + half an ulp */
    float f = fabsf((float)v);
    return (d == CT_F16 && f >= 65520.0f) || (d == CT_BF16 && f >= 0x1.ffp127f);
}

/* A floating feature. With finite_only, whatever would put NaN or +-inf in
 * the tensor is refused: the spellings strtod takes ("nan", "-inf",
 * "infinity"), a number beyond double ("1e999") and one beyond the dtype
 * once narrowed ("1e39" for float32). Underflow to 0 is no error. */
static int parse_real(const csv_parser *p, int64_t col, double *out) {
    if (parse_double(p, col, out)) return ct_last_code();
    if (!p->finite_only) return 0;
    if (isnan(*out) || (isinf(*out) && errno != ERANGE)) return bad_value(p, col, "is not finite");
    if (isinf(*out) || narrows_to_inf(p->dtype, *out)) return out_of_range(p, col);
    return 0;
}

/* An integer written as one ("7", "-3") or as an integral number ("7.0",
 * "1e3"), in [lo, hi]. */
static int parse_int(const csv_parser *p, int64_t col, int64_t lo, int64_t hi, const char *what,
                     int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(p->scratch, &end, 10);
    if (end == p->scratch || *end || errno) {
        double d;
        if (parse_double(p, col, &d)) return ct_last_code();
        if (d != floor(d)) return bad_value(p, col, "%s", what);
        /* 2^63 is exactly representable; anything at or beyond it is not an int64. */
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
            return bad_value(p, col, "is out of range");
        v = (long long)d;
    }
    if (v < lo || v > hi) return out_of_range(p, col);
    *out = v;
    return 0;
}

/* Copies field [s, e) into the scratch buffer, blanks trimmed. */
static int take_field(csv_parser *p, const char *s, const char *e, int64_t col) {
    while (s < e && is_blank(*s, p->delim)) s++;
    while (e > s && is_blank(e[-1], p->delim)) e--;
    size_t n = (size_t)(e - s);
    if (grow((void **)&p->scratch, &p->scap, n + 1, 1, p->name)) return ct_last_code();
    memcpy(p->scratch, s, n);
    p->scratch[n] = '\0';
    if (n == 0)
        return ct_set_error(CT_EFORMAT, "%s:%" PRId64 ":%" PRId64 ": empty value", p->name, p->line,
                            col + 1);
    /* strtod would stop at a NUL byte and take "1<NUL>x" for 1. */
    if (memchr(s, '\0', n))
        return ct_set_error(CT_EFORMAT, "%s:%" PRId64 ":%" PRId64 ": holds a NUL byte", p->name,
                            p->line, col + 1);
    return 0;
}

/* A label. Without num_classes any int64 passes, negative ones included:
 * cross_entropy takes -100 (its ignore_index) for "no label". With it, the
 * labels the loss would refuse batches later are refused here, by line. */
static int store_label(csv_parser *p, int64_t col) {
    int64_t v;
    if (parse_int(p, col, INT64_MIN, INT64_MAX, "is not an integer label", &v))
        return ct_last_code();
    if (p->num_classes > 0 && (v < 0 || v >= p->num_classes))
        return bad_value(p, col, "is out of range [0, %" PRId64 ") for num_classes %" PRId64,
                         p->num_classes, p->num_classes);
    p->labels[p->rows] = v;
    return 0;
}

static int store_value(csv_parser *p, int64_t col) {
    if (col == p->label_column) return store_label(p, col);
    if (grow(&p->vals, &p->vcap, p->nvals + 1, 8, p->name)) return ct_last_code();
    if (p->int_features) {
        int64_t lo, hi, v;
        int_range(p->dtype, &lo, &hi);
        if (parse_int(p, col, lo, hi, "is not an integer", &v)) return ct_last_code();
        ((int64_t *)p->vals)[p->nvals++] = v;
    } else {
        double v;
        if (parse_real(p, col, &v)) return ct_last_code();
        ((double *)p->vals)[p->nvals++] = v;
    }
    return 0;
}

/* ---- rows --------------------------------------------------------------------- */

static int64_t count_fields(const char *s, const char *e, char delim) {
    int64_t n = 1;
    for (; s < e; s++) n += *s == delim;
    return n;
}

static int parse_row(csv_parser *p, const char *s, const char *e) {
    int64_t n = count_fields(s, e, p->delim);
    if (p->ncols < 0) {
        if (p->label_column >= n)
            return ct_set_error(CT_EINVAL,
                                "%s:%" PRId64 ": label_column %d is out of range: the row has %" PRId64
                                " columns",
                                p->name, p->line, p->label_column, n);
        p->ncols = n;
        p->ncols_line = p->line;
    } else if (n != p->ncols) {
        return ct_set_error(CT_EFORMAT,
                            "%s:%" PRId64 ": %" PRId64 " columns, but line %" PRId64 " has %" PRId64,
                            p->name, p->line, n, p->ncols_line, p->ncols);
    }
    if (p->label_column >= 0 &&
        grow((void **)&p->labels, &p->lcap, (size_t)p->rows + 1, sizeof(int64_t), p->name))
        return ct_last_code();
    int64_t col = 0;
    for (const char *f = s;; col++) {
        const char *fe = memchr(f, p->delim, (size_t)(e - f));
        if (!fe) fe = e;
        if (take_field(p, f, fe, col) || store_value(p, col)) return ct_last_code();
        if (fe == e) break;
        f = fe + 1;
    }
    p->rows++;
    return 0;
}

static bool blank_line(const char *s, const char *e, char delim) {
    for (; s < e; s++)
        if (!is_blank(*s, delim)) return false;
    return true;
}

static int parse_lines(csv_parser *p, const char *text, size_t len, bool header) {
    const char *s = text, *end = text + len;
    if (len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3; /* UTF-8 BOM */
    for (p->line = 1; s < end; p->line++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *e = nl ? nl : end;
        const char *next = nl ? nl + 1 : end;
        if (e > s && e[-1] == '\r') e--;
        if (!blank_line(s, e, p->delim)) {
            if (header) header = false;
            else if (parse_row(p, s, e)) return ct_last_code();
        }
        s = next;
    }
    if (p->rows == 0)
        return ct_set_error(CT_EFORMAT, "%s: no data rows%s", p->name,
                            len == 0 ? " (empty)" : "");
    return 0;
}

/* ---- options and the table ---------------------------------------------------- */

static bool ends_with_ci(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

static int check_opts(const ct_csv_opts *o, const char *name, char *delim) {
    *delim = o->delimiter;
    if (*delim == 0) *delim = ends_with_ci(name, ".tsv") || ends_with_ci(name, ".tsv.gz") ? '\t' : ',';
    if (*delim != ',' && *delim != '\t')
        return ct_set_error(CT_EINVAL, "%s: delimiter must be ',' or '\\t' (or 0: by extension), not 0x%02X",
                            name, (unsigned char)*delim);
    if (o->label_column < -1)
        return ct_set_error(CT_EINVAL, "%s: label_column is %d; must be a column or -1", name,
                            o->label_column);
    if ((int)o->dtype < (int)CT_F32 || (int)o->dtype > (int)CT_I16)
        return ct_set_error(CT_EDTYPE, "%s: dtype %d is not a dtype", name, (int)o->dtype);
    if (o->num_classes < 0)
        return ct_set_error(CT_EINVAL, "%s: num_classes is %" PRId64 "; must be > 0, or 0: unchecked",
                            name, o->num_classes);
    /* A class count with nothing to check is a mistake in the options. */
    if (o->num_classes > 0 && o->label_column < 0)
        return ct_set_error(CT_EINVAL,
                            "%s: num_classes is %" PRId64 ", but label_column is -1: no labels to check",
                            name, o->num_classes);
    return 0;
}

int cti_csv_table_parse(const char *text, size_t len, const char *name, const ct_csv_opts *o,
                       cti_csv_table *out) {
    *out = (cti_csv_table){0};
    csv_parser p = {.name = name, .label_column = o->label_column, .num_classes = o->num_classes,
                    .finite_only = o->finite_only, .dtype = o->dtype,
                    .int_features = is_int_dtype(o->dtype), .ncols = -1};
    if (check_opts(o, name, &p.delim)) return ct_last_code();
    locale_t c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (!c_locale)
        return ct_set_error(CT_ENOMEM, "%s: cannot create the C locale for parsing numbers", name);
    locale_t previous = uselocale(c_locale);
    int rc = parse_lines(&p, text ? text : "", len, o->header);
    uselocale(previous);
    freelocale(c_locale);
    free(p.scratch);
    if (rc) {
        free(p.vals);
        free(p.labels);
        return rc;
    }
    *out = (cti_csv_table){.rows = p.rows, .cols = p.ncols - (p.label_column >= 0),
                          .dtype = p.dtype, .values_dtype = p.int_features ? CT_I64 : CT_F64,
                          .values = p.vals, .labels = p.labels};
    return 0;
}

void cti_csv_table_free(cti_csv_table *t) {
    if (!t) return;
    free(t->values);
    free(t->labels);
    *t = (cti_csv_table){0};
}
