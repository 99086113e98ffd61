/* src/search/space.c — Determined's hyperparameter space (space.h).
 *
 * The config's object is parsed once into a tree of nodes, names sorted at
 * every level. Sampling walks the tree drawing from the searcher's
 * generator (Determined's nprand, numpy's legacy MT19937: base/mt19937.h);
 * the grid is the tree's leaves, each an axis of points. */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "search/space.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/error.h"

typedef enum { HP_CONST, HP_INT, HP_DOUBLE, HP_LOG, HP_CATEGORICAL, HP_GROUP } hp_kind;

typedef struct hp_node {
    char *name;
    hp_kind kind;
    json_t *val;          /* const: the value; categorical: the array of values */
    int64_t ilo, ihi;     /* int */
    double lo, hi, base;  /* double, log */
    int64_t count;        /* grid points asked for; 0: none given */
    struct hp_node *kids; /* group: sorted by name */
    size_t n_kids;
} hp_node;

struct cti_hp_space {
    hp_node root;         /* a group */
    const hp_node **axes; /* the grid's axes: the leaves, depth first */
    size_t n_axes;
};

static void node_free(hp_node *n) {
    for (size_t i = 0; i < n->n_kids; i++) node_free(&n->kids[i]);
    free(n->kids);
    free(n->name);
    json_decref(n->val);
}

/* ---- parsing -------------------------------------------------------------------- */

#define PATH_LEN 512

static int bad(const char *path, const char *what) {
    return ct_set_error(CT_ECONFIG, "%s: %s", path, what);
}

/* path.key, cut short with "..." past PATH_LEN. */
static void join(char *out, const char *path, const char *key) {
    int n = snprintf(out, PATH_LEN, "%s.%s", path, key);
    if (n < 0 || n >= PATH_LEN) memcpy(out + PATH_LEN - 4, "...", 4);
}

/* Every key of j is one of `allowed` (NULL-terminated). */
static int only_keys(const json_t *j, const char *path, const char *const *allowed) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)j, k, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++) ok = strcmp(k, *a) == 0;
        if (!ok) {
            (void)v;
            return ct_set_error(CT_ECONFIG, "unknown key '%s.%s'", path, k);
        }
    }
    return 0;
}

/* count: absent or null (0), else an integer >= 1. */
static int parse_count(const json_t *j, const char *path, int64_t *count) {
    json_t *c = json_object_get(j, "count");
    *count = 0;
    if (!c || json_is_null(c)) return 0;
    if (!json_is_integer(c) || json_integer_value(c) < 1)
        return ct_set_error(CT_ECONFIG, "%s.count: must be an integer >= 1", path);
    *count = json_integer_value(c);
    return 0;
}

static int parse_range(hp_node *n, const json_t *j, const char *path) {
    json_t *lo = json_object_get(j, "minval"), *hi = json_object_get(j, "maxval");
    char sub[PATH_LEN];
    if (!lo || !hi) {
        join(sub, path, !lo ? "minval" : "maxval");
        return bad(sub, "is missing");
    }
    if (n->kind == HP_INT) {
        if (!json_is_integer(lo) || !json_is_integer(hi)) {
            join(sub, path, !json_is_integer(lo) ? "minval" : "maxval");
            return bad(sub, "must be an integer (type int)");
        }
        n->ilo = json_integer_value(lo);
        n->ihi = json_integer_value(hi);
        if (n->ilo >= n->ihi)
            return ct_set_error(CT_ECONFIG, "%s: minval (%" PRId64 ") must be less than maxval (%" PRId64 ")", path,
                                n->ilo, n->ihi);
        return 0;
    }
    if (!json_is_number(lo) || !json_is_number(hi)) {
        join(sub, path, !json_is_number(lo) ? "minval" : "maxval");
        return bad(sub, "must be a number");
    }
    n->lo = json_number_value(lo);
    n->hi = json_number_value(hi);
    if (!(n->lo < n->hi))
        return ct_set_error(CT_ECONFIG, "%s: minval (%g) must be less than maxval (%g)", path, n->lo, n->hi);
    if (n->kind == HP_LOG) {
        json_t *b = json_object_get(j, "base");
        join(sub, path, "base");
        if (!b) return bad(sub, "is missing (type log: values are base^x for x in [minval, maxval])");
        if (!json_is_number(b) || !(json_number_value(b) > 0)) return bad(sub, "must be a number > 0");
        n->base = json_number_value(b);
        /* base^x is monotone in x: both ends finite, every value is. (Determined
         * fails later, when it cannot write an infinite value.) */
        double end = !isfinite(pow(n->base, n->lo)) ? n->lo : n->hi;
        if (!isfinite(pow(n->base, n->lo)) || !isfinite(pow(n->base, n->hi)))
            return ct_set_error(CT_ECONFIG, "%s: base^x overflows a double at x = %g (%g^%g is larger than "
                                            "1.8e308): the values would be infinite",
                                path, end, n->base, end);
    }
    return 0;
}

static int parse_node(hp_node *n, const json_t *j, const char *path, bool grid);

static int by_name(const void *a, const void *b) {
    return strcmp(((const hp_node *)a)->name, ((const hp_node *)b)->name);
}

static int parse_group(hp_node *n, const json_t *j, const char *path, bool grid) {
    n->kind = HP_GROUP;
    size_t size = json_object_size(j);
    n->kids = size ? calloc(size, sizeof *n->kids) : NULL;
    if (size && !n->kids) return ct_set_error(CT_ENOMEM, "%s: out of memory", path);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)j, k, v) {
        hp_node *kid = &n->kids[n->n_kids++];
        kid->name = strdup(k);
        if (!kid->name) return ct_set_error(CT_ENOMEM, "%s: out of memory", path);
        char sub[PATH_LEN];
        join(sub, path, k);
        int rc = parse_node(kid, v, sub, grid);
        if (rc) return rc;
    }
    if (n->n_kids > 1) qsort(n->kids, n->n_kids, sizeof *n->kids, by_name);
    return 0;
}

static int parse_node(hp_node *n, const json_t *j, const char *path, bool grid) {
    if (!json_is_object(j)) { /* a plain value (a list too) is a const */
        n->kind = HP_CONST;
        n->val = json_deep_copy(j);
        return n->val ? 0 : ct_set_error(CT_ENOMEM, "%s: out of memory", path);
    }
    json_t *type = json_object_get(j, "type");
    if (!type) return parse_group(n, j, path, grid);
    static const char *const types[] = {"const", "int", "double", "log", "categorical"};
    const char *t = json_is_string(type) ? json_string_value(type) : "";
    int kind = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(t, types[i]) == 0) kind = i;
    if (kind < 0) {
        char sub[PATH_LEN];
        join(sub, path, "type");
        return bad(sub, "must be one of \"const\", \"int\", \"double\", \"log\", \"categorical\" (an object without "
                        "\"type\" is a nested group)");
    }
    n->kind = (hp_kind)kind;
    static const char *const const_keys[] = {"type", "val", NULL};
    static const char *const range_keys[] = {"type", "minval", "maxval", "count", NULL};
    static const char *const log_keys[] = {"type", "minval", "maxval", "base", "count", NULL};
    static const char *const cat_keys[] = {"type", "vals", NULL};
    int rc = only_keys(j, path, n->kind == HP_CONST         ? const_keys
                                : n->kind == HP_LOG         ? log_keys
                                : n->kind == HP_CATEGORICAL ? cat_keys
                                                            : range_keys);
    if (rc) return rc;
    char sub[PATH_LEN];
    switch (n->kind) {
    case HP_CONST: {
        json_t *val = json_object_get(j, "val");
        join(sub, path, "val");
        if (!val) return bad(sub, "is missing");
        n->val = json_deep_copy(val);
        return n->val ? 0 : ct_set_error(CT_ENOMEM, "%s: out of memory", path);
    }
    case HP_CATEGORICAL: {
        json_t *vals = json_object_get(j, "vals");
        join(sub, path, "vals");
        if (!vals) return bad(sub, "is missing");
        if (!json_is_array(vals)) return bad(sub, "must be a list of values");
        if (json_array_size(vals) == 0) return bad(sub, "is empty: a categorical needs at least one value");
        n->val = json_deep_copy(vals);
        return n->val ? 0 : ct_set_error(CT_ENOMEM, "%s: out of memory", path);
    }
    default:
        rc = parse_range(n, j, path);
        if (!rc) rc = parse_count(j, path, &n->count);
        if (!rc && grid && n->count == 0)
            rc = bad(path, "grid search is in use but count was not provided");
        return rc;
    }
}

/* The leaves, depth first: every node that is not a group, and every
 * nested group without members (an axis of one value, {}). */
static size_t collect(const hp_node *n, bool top, const hp_node **out, size_t at) {
    if (n->kind != HP_GROUP || (n->n_kids == 0 && !top)) {
        if (out) out[at] = n;
        return at + 1;
    }
    for (size_t i = 0; i < n->n_kids; i++) at = collect(&n->kids[i], false, out, at);
    return at;
}

cti_hp_space *cti_hp_space_new(const json_t *hps, const char *path, bool grid) {
    if (!path) path = "hyperparameters";
    if (!json_is_object(hps)) {
        ct_set_error(CT_ECONFIG, "%s: must be an object of hyperparameters", path);
        return NULL;
    }
    cti_hp_space *s = calloc(1, sizeof *s);
    if (!s) {
        ct_set_error(CT_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    int rc = parse_group(&s->root, hps, path, grid);
    if (!rc) {
        s->n_axes = collect(&s->root, true, NULL, 0);
        s->axes = s->n_axes ? calloc(s->n_axes, sizeof *s->axes) : NULL;
        if (s->n_axes && !s->axes) rc = ct_set_error(CT_ENOMEM, "%s: out of memory", path);
        else collect(&s->root, true, s->axes, 0);
    }
    if (rc) {
        cti_hp_space_free(s);
        return NULL;
    }
    return s;
}

void cti_hp_space_free(cti_hp_space *s) {
    if (!s) return;
    node_free(&s->root);
    free(s->axes);
    free(s);
}

/* ---- sampling ------------------------------------------------------------------- */

double cti_hp_unit(cti_mt19937 *mt) {
    uint32_t a = cti_mt19937_next32(mt) >> 5, b = cti_mt19937_next32(mt) >> 6;
    return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

static json_t *sample(const hp_node *n, cti_mt19937 *mt) {
    switch (n->kind) {
    case HP_CONST: return json_deep_copy(n->val);
    case HP_INT: /* minval + Intn(maxval - minval + 1) */
        return json_integer((json_int_t)((uint64_t)n->ilo + cti_mt19937_interval(mt, (uint64_t)n->ihi - (uint64_t)n->ilo)));
    case HP_DOUBLE: return json_real(n->lo + (n->hi - n->lo) * cti_hp_unit(mt));
    case HP_LOG: return json_real(pow(n->base, n->lo + (n->hi - n->lo) * cti_hp_unit(mt)));
    case HP_CATEGORICAL:
        return json_deep_copy(json_array_get(n->val, (size_t)cti_mt19937_interval(mt, json_array_size(n->val) - 1)));
    case HP_GROUP: {
        json_t *o = json_object();
        for (size_t i = 0; o && i < n->n_kids; i++)
            if (json_object_set_new(o, n->kids[i].name, sample(&n->kids[i], mt)) != 0) {
                json_decref(o);
                o = NULL;
            }
        return o;
    }
    }
    return NULL;
}

json_t *cti_hp_space_sample(const cti_hp_space *s, cti_mt19937 *mt) {
    json_t *o = sample(&s->root, mt);
    if (!o) ct_set_error(CT_ENOMEM, "sampling hyperparameters: out of memory");
    return o;
}

/* ---- the grid ------------------------------------------------------------------- */

static int64_t axis_len(const hp_node *n) {
    switch (n->kind) {
    case HP_INT: {
        uint64_t span = (uint64_t)n->ihi - (uint64_t)n->ilo; /* >= 1 */
        return span < (uint64_t)n->count - 1 ? (int64_t)span + 1 : n->count;
    }
    case HP_DOUBLE:
    case HP_LOG: return n->count;
    case HP_CATEGORICAL: return (int64_t)json_array_size(n->val);
    default: return 1; /* const, empty group */
    }
}

/* Point i of an int axis of count points: the middle one when count is 1,
 * else Determined's
 * round(minval + i * (maxval - minval) / (count - 1)), in double as its Go
 * code computes it where that is exact (the ends within 2^53, the product
 * within int64); beyond (a range wider than 2^63 / count, where Go's
 * product wraps and points repeat, or ends a double cannot tell from their
 * neighbours) in long double, which holds every int64 exactly. Kept within
 * [minval, maxval]. */
static int64_t int_point(const hp_node *n, int64_t i, int64_t count) {
    uint64_t span = (uint64_t)n->ihi - (uint64_t)n->ilo;
    const int64_t exact = (int64_t)1 << 53; /* every integer up to it is a double */
    bool small = n->ilo >= -exact && n->ihi <= exact;
    long double x;
    if (count == 1)
        x = small ? round(((double)n->ilo + (double)n->ihi) / 2.0)
                  : roundl(((long double)n->ilo + (long double)n->ihi) / 2.0L);
    else if (small && (i == 0 || span <= (uint64_t)INT64_MAX / (uint64_t)i))
        x = round((double)n->ilo + (double)((int64_t)span * i) / (double)(count - 1));
    else
        x = roundl((long double)n->ilo + (long double)i * (long double)span / (long double)(count - 1));
    if (x < (long double)n->ilo) return n->ilo;
    if (x > (long double)n->ihi) return n->ihi;
    return (int64_t)x;
}

/* Point i of the axis n (i < axis_len). */
static json_t *axis_point(const hp_node *n, int64_t i) {
    int64_t count = axis_len(n);
    switch (n->kind) {
    case HP_INT:
        return json_integer((json_int_t)int_point(n, i, count));
    case HP_DOUBLE:
    case HP_LOG: {
        double x = count == 1 ? (n->lo + n->hi) / 2.0 : n->lo + (double)i * (n->hi - n->lo) / (double)(count - 1);
        return json_real(n->kind == HP_LOG ? pow(n->base, x) : x);
    }
    case HP_CATEGORICAL: return json_deep_copy(json_array_get(n->val, (size_t)i));
    case HP_CONST: return json_deep_copy(n->val);
    case HP_GROUP: return json_object(); /* an empty nested group */
    }
    return NULL;
}

int64_t cti_hp_space_grid_len(const cti_hp_space *s) {
    if (s->n_axes == 0) return 0;
    int64_t total = 1;
    for (size_t a = 0; a < s->n_axes; a++) {
        int64_t len = axis_len(s->axes[a]);
        if (total > INT64_MAX / len) return INT64_MAX; /* more points than can be trained */
        total *= len;
    }
    return total;
}

/* Builds the object of node n from the chosen index of each axis. */
static json_t *fill(const hp_node *n, bool top, const int64_t *pick, size_t *axis) {
    if (n->kind != HP_GROUP || (n->n_kids == 0 && !top)) return axis_point(n, pick[(*axis)++]);
    json_t *o = json_object();
    for (size_t i = 0; o && i < n->n_kids; i++)
        if (json_object_set_new(o, n->kids[i].name, fill(&n->kids[i], false, pick, axis)) != 0) {
            json_decref(o);
            o = NULL;
        }
    return o;
}

json_t *cti_hp_space_grid_point(const cti_hp_space *s, int64_t k) {
    int64_t len = cti_hp_space_grid_len(s);
    if (k < 0 || k >= len) {
        ct_set_error(CT_EINDEX, "grid point %" PRId64 " is out of range [0, %" PRId64 ")", k, len);
        return NULL;
    }
    int64_t *pick = calloc(s->n_axes, sizeof *pick);
    if (!pick) {
        ct_set_error(CT_ENOMEM, "grid point: out of memory");
        return NULL;
    }
    for (size_t a = s->n_axes; a-- > 0;) { /* the last axis varies fastest */
        int64_t n = axis_len(s->axes[a]);
        pick[a] = k % n;
        k /= n;
    }
    size_t axis = 0;
    json_t *o = fill(&s->root, true, pick, &axis);
    free(pick);
    if (!o) ct_set_error(CT_ENOMEM, "grid point: out of memory");
    return o;
}
