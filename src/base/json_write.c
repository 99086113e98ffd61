/* src/base/json_write.c — JSON text with numbers as Python writes them (see
 * json_write.h).
 *
 * The shortest digits: for p = 1, 2, ... 17, printf's correctly rounded p
 * digits, read back by strtod. When they do not read back as x, one other
 * p-digit number still may: the next one on the other side of x, where the
 * doubles' spacing doubles at a power of two and the interval that reads
 * back as x reaches further on that side. No p-digit number beyond those
 * two can (each is farther from x than one of them on its side), so the
 * first p at which either reads back gives Python's digits (its dtoa's
 * mode 0), and the nearest of them, as printf rounds half to even as dtoa
 * does. Numbers are read back as "<digits>e<exponent>" and printf's
 * decimal point is skipped, whatever it is: no locale changes a digit.
 *
 * The writer walks the tree as jansson's do_dump does (dump.c, 2.14): the
 * same separators, indentation, key order, loop check and failures; it
 * hands strings and keys to jansson to escape. */
#include "base/json_write.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- repr(float) ----------------------------------------------------------- */

/* The decimal d.ddd x 10^exp10 of n digits, read as a double: strtod of
 * "<digits>e<exp10 - n + 1>". */
static double read_back(const char *digits, int n, int exp10) {
    char text[48];
    snprintf(text, sizeof text, "%.*se%d", n, digits, exp10 - n + 1);
    return strtod(text, NULL);
}

/* digits (n of them) one unit in the last place up (dir 1) or down (-1);
 * a carry out of 9...9 gives 10...0 and a borrow from 10...0 gives 9...9
 * one decade down, both still n digits. */
static void step(char *digits, int n, int *exp10, int dir) {
    int i = n - 1;
    if (dir > 0) {
        for (; i >= 0 && digits[i] == '9'; i--) digits[i] = '0';
        if (i >= 0) digits[i]++;
        else {
            digits[0] = '1';
            ++*exp10;
        }
    } else {
        for (; i >= 0 && digits[i] == '0'; i--) digits[i] = '9';
        digits[i]--; /* i >= 0: the first digit is never 0 */
        if (digits[0] == '0') {
            memset(digits, '9', (size_t)n);
            --*exp10;
        }
    }
}

/* The shortest digits of x > 0 (finite) that read back as x, without
 * trailing zeros, NUL-terminated; x = d.ddd x 10^exp10. */
static int shortest(double x, char digits[24], int *exp10) {
    int n = 0;
    for (int p = 1; p <= 17; p++) {
        char sci[48];
        snprintf(sci, sizeof sci, "%.*e", p - 1, x);
        const char *c = sci;
        for (n = 0; *c && *c != 'e'; c++)
            if (*c >= '0' && *c <= '9') digits[n++] = *c;
        *exp10 = atoi(c + 1);
        double back = read_back(digits, n, *exp10);
        if (back == x) break; /* at p = 17 at the latest */
        char other[24];
        int other_exp = *exp10;
        memcpy(other, digits, (size_t)n);
        step(other, n, &other_exp, back < x ? 1 : -1);
        if (read_back(other, n, other_exp) == x) {
            memcpy(digits, other, (size_t)n);
            *exp10 = other_exp;
            break;
        }
    }
    while (n > 1 && digits[n - 1] == '0') n--;
    digits[n] = '\0';
    return n;
}

const char *cti_float_repr(double x, char buf[CTI_FLOAT_REPR_LEN]) {
    if (isnan(x)) return strcpy(buf, "nan");
    if (isinf(x)) return strcpy(buf, x > 0 ? "inf" : "-inf");
    char *o = buf;
    if (signbit(x)) *o++ = '-';
    if (x == 0) {
        strcpy(o, "0.0");
        return buf;
    }
    char digits[24];
    int exp10;
    int n = shortest(fabs(x), digits, &exp10);
    if (exp10 < -4 || exp10 >= 16) { /* 1e-05, 1.5e+16 */
        *o++ = digits[0];
        if (n > 1) o += sprintf(o, ".%s", digits + 1);
        sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (exp10 < 0) { /* 0.003 */
        o += sprintf(o, "0.");
        for (int i = 1; i < -exp10; i++) *o++ = '0';
        strcpy(o, digits);
    } else if (n <= exp10 + 1) { /* 100.0 */
        o += sprintf(o, "%s", digits);
        for (int i = n; i <= exp10; i++) *o++ = '0';
        strcpy(o, ".0");
    } else { /* 12.5 */
        sprintf(o, "%.*s.%s", exp10 + 1, digits, digits + exp10 + 1);
    }
    return buf;
}

/* ---- the writer ------------------------------------------------------------ */

typedef struct {
    char *text;
    size_t len, cap;
    const json_t **parents; /* the containers being written, for jansson's loop check */
    size_t depth, parents_cap;
} out;

static int put(out *o, const char *s, size_t n) {
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (o->len + n + 1 > cap) cap *= 2;
        char *t = realloc(o->text, cap);
        if (!t) return -1;
        o->text = t;
        o->cap = cap;
    }
    memcpy(o->text + o->len, s, n);
    o->len += n;
    o->text[o->len] = '\0';
    return 0;
}

static int put_callback(const char *s, size_t n, void *data) { return put(data, s, n); }

/* A string, escaped by jansson under the caller's flags. */
static int put_string(out *o, const char *s, size_t n, size_t flags) {
    json_t *str = json_stringn_nocheck(s, n);
    if (!str) return -1;
    int rc = json_dump_callback(str, put_callback, o, (flags & (JSON_ENSURE_ASCII | JSON_ESCAPE_SLASH)) | JSON_ENCODE_ANY);
    json_decref(str);
    return rc;
}

/* jansson's dump_indent: a newline and depth * n spaces under JSON_INDENT(n),
 * else one space where `space` asks for it unless JSON_COMPACT. */
static int put_indent(out *o, size_t flags, size_t depth, bool space) {
    size_t n = flags & JSON_MAX_INDENT;
    if (n > 0) {
        if (put(o, "\n", 1)) return -1;
        for (size_t i = 0; i < depth * n; i++)
            if (put(o, " ", 1)) return -1;
        return 0;
    }
    return space && !(flags & JSON_COMPACT) ? put(o, " ", 1) : 0;
}

typedef struct {
    const char *key;
    const json_t *value;
} member;

/* jansson's compare_keys, for keys without a NUL inside (all of ctrial's;
 * jansson before 2.14 knew no other). */
static int compare_keys(const void *a, const void *b) {
    return strcmp(((const member *)a)->key, ((const member *)b)->key);
}

static int put_value(out *o, const json_t *j, size_t flags, size_t depth);

/* An object's members from depth + 1, in jansson's order (insertion) or
 * sorted by key. */
static int put_members(out *o, const json_t *j, size_t flags, size_t depth) {
    size_t n = json_object_size(j);
    member *m = malloc(n * sizeof *m);
    if (!m) return -1;
    size_t i = 0;
    for (void *it = json_object_iter((json_t *)j); it && i < n; it = json_object_iter_next((json_t *)j, it), i++)
        m[i] = (member){json_object_iter_key(it), json_object_iter_value(it)};
    if (flags & JSON_SORT_KEYS) qsort(m, i, sizeof *m, compare_keys);
    const char *separator = flags & JSON_COMPACT ? ":" : ": ";
    int rc = 0;
    for (size_t k = 0; k < i && !rc; k++)
        rc = put_string(o, m[k].key, strlen(m[k].key), flags) || put(o, separator, strlen(separator)) ||
             put_value(o, m[k].value, flags, depth + 1) ||
             (k + 1 < i ? put(o, ",", 1) || put_indent(o, flags, depth + 1, true) : put_indent(o, flags, depth, false));
    free(m);
    return rc ? -1 : 0;
}

static int put_container(out *o, const json_t *j, size_t flags, size_t depth, bool embed) {
    for (size_t i = 0; i < o->depth; i++)
        if (o->parents[i] == j) return -1; /* a loop: jansson refuses it */
    if (o->depth == o->parents_cap) {
        size_t cap = o->parents_cap ? 2 * o->parents_cap : 16;
        const json_t **p = realloc(o->parents, cap * sizeof *p);
        if (!p) return -1;
        o->parents = p;
        o->parents_cap = cap;
    }
    o->parents[o->depth++] = j;
    bool object = json_is_object(j);
    size_t n = object ? json_object_size(j) : json_array_size(j);
    int rc = embed ? 0 : put(o, object ? "{" : "[", 1);
    if (!rc && n > 0) {
        rc = put_indent(o, flags, depth + 1, false);
        if (!rc && object) rc = put_members(o, j, flags, depth);
        for (size_t i = 0; !rc && !object && i < n; i++)
            rc = put_value(o, json_array_get(j, i), flags, depth + 1) ||
                 (i + 1 < n ? put(o, ",", 1) || put_indent(o, flags, depth + 1, true) : put_indent(o, flags, depth, false));
    }
    if (!rc && !embed) rc = put(o, object ? "}" : "]", 1);
    o->depth--;
    return rc ? -1 : 0;
}

static int put_value(out *o, const json_t *j, size_t flags, size_t depth) {
    bool embed = flags & JSON_EMBED;
    flags &= ~(size_t)JSON_EMBED; /* the outermost brackets only */
    char num[64];
    switch (j ? json_typeof(j) : JSON_NULL) {
    case JSON_NULL: return j ? put(o, "null", 4) : -1;
    case JSON_TRUE: return put(o, "true", 4);
    case JSON_FALSE: return put(o, "false", 5);
    case JSON_INTEGER: {
        int len = snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(j));
        return len > 0 && (size_t)len < sizeof num ? put(o, num, (size_t)len) : -1;
    }
    case JSON_REAL: {
        double d = json_real_value(j);
        if (!isfinite(d)) return -1; /* json_real never holds one */
        cti_float_repr(d, num);
        return put(o, num, strlen(num));
    }
    case JSON_STRING: return put_string(o, json_string_value(j), json_string_length(j), flags);
    case JSON_ARRAY:
    case JSON_OBJECT: return put_container(o, j, flags, depth, embed);
    }
    return -1;
}

char *cti_json_dumps(const json_t *j, size_t flags) {
    if (!(flags & JSON_ENCODE_ANY) && !json_is_array(j) && !json_is_object(j)) return NULL;
    out o = {0};
    int rc = put_value(&o, j, flags, 0);
    if (!rc && !o.text) rc = put(&o, "", 0); /* "" (JSON_EMBED of an empty container) */
    free(o.parents);
    if (rc) {
        free(o.text);
        return NULL;
    }
    return o.text;
}
