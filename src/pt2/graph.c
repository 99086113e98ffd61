/* src/pt2/graph.c — an ExportedProgram's JSON (torch/_export/serde/
 * schema.py, schema 8) into a cti_pt2_program (pt2.h), with jansson.
 *
 * A graph is read in order: its inputs define slots, each node's inputs
 * must name slots already defined and its outputs define new ones, and the
 * graph's outputs name defined slots. So a program that parses is one the
 * interpreter can run without checking a name again. Higher-order
 * operators carry graphs of their own (torch.no_grad() blocks become
 * wrap_with_set_grad_enabled), whose names live in their own space.
 *
 * Messages name the file and the JSON path of what is wrong:
 *     "m.pt2: models/model.json: graph_module.graph.nodes[3] ('conv2d').
 *      inputs[0]: name 'x2' is used before any node defines it"
 */
#include "pt2/pt2.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 16, MAX_DIMS = 64 };

typedef struct {
    const char *what;   /* the file and entry */
    char path[1024];    /* the JSON path being read */
    int depth;          /* of nested graphs */
} reader;

/* Appends to the path; returns the previous length, for pop(). */
static size_t push(reader *r, const char *fmt, ...) {
    size_t len = strlen(r->path);
    va_list ap;
    va_start(ap, fmt);
    if (len < sizeof r->path) vsnprintf(r->path + len, sizeof r->path - len, fmt, ap);
    va_end(ap);
    return len;
}
static void pop(reader *r, size_t len) { r->path[len] = '\0'; }

static int bad(reader *r, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ct_set_error(CT_EFORMAT, "%s: %s: %s", r->what, r->path[0] ? r->path : "the top level", msg);
}

static int oom(reader *r) { return ct_set_error(CT_ENOMEM, "%s: out of host memory", r->what); }

static char *str_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---- small readers ------------------------------------------------------------------- */

/* The one key of a union object, and its value. */
static int union_of(reader *r, const json_t *v, const char **key, json_t **val) {
    if (!json_is_object(v) || json_object_size(v) != 1)
        return bad(r, "expected an object with exactly one key (a union of the schema)");
    void *it = json_object_iter((json_t *)v);
    *key = json_object_iter_key(it);
    *val = json_object_iter_value(it);
    return 0;
}

static int get_int(reader *r, const json_t *v, int64_t *out) {
    if (!json_is_integer(v)) return bad(r, "expected an integer");
    *out = json_integer_value(v);
    return 0;
}

static int get_float(reader *r, const json_t *v, double *out) {
    /* Python's json writes inf and nan as Infinity and NaN, which jansson
     * refuses as a whole file: such a constant never reaches this point. */
    if (!json_is_number(v)) return bad(r, "expected a number");
    *out = json_number_value(v);
    return 0;
}

static int get_bool(reader *r, const json_t *v, bool *out) {
    if (!json_is_boolean(v)) return bad(r, "expected true or false");
    *out = json_is_true(v);
    return 0;
}

static const char *get_str(reader *r, const json_t *v) {
    if (!json_is_string(v)) {
        bad(r, "expected a string");
        return NULL;
    }
    return json_string_value(v);
}

/* obj[key] as a string (NULL + error when missing or not one). */
static const char *field_str(reader *r, const json_t *obj, const char *key) {
    size_t at = push(r, ".%s", key);
    const char *s = json_is_object(obj) ? get_str(r, json_object_get(obj, key)) : NULL;
    if (!json_is_object(obj)) bad(r, "expected an object");
    if (s) pop(r, at);
    return s;
}

/* ---- dtypes ---------------------------------------------------------------------------- */

static const struct {
    int64_t code;
    const char *name;
    int dtype; /* ct_dtype, or -1 */
} scalar_types[] = {
    {1, "uint8", CT_U8},          {2, "int8", CT_I8},          {3, "int16", CT_I16},
    {4, "int32", CT_I32},         {5, "int64", CT_I64},        {6, "float16", CT_F16},
    {7, "float32", CT_F32},       {8, "float64", CT_F64},      {9, "complex32", -1},
    {10, "complex64", -1},        {11, "complex128", -1},      {12, "bool", CT_BOOL},
    {13, "bfloat16", CT_BF16},    {28, "uint16", CT_U16},      {29, "float8_e4m3fn", -1},
    {30, "float8_e5m2", -1},      {31, "float8_e4m3fnuz", -1}, {32, "float8_e5m2fnuz", -1},
};

bool cti_pt2_dtype(int64_t scalar_type, ct_dtype *out) {
    for (size_t i = 0; i < sizeof scalar_types / sizeof scalar_types[0]; i++)
        if (scalar_types[i].code == scalar_type && scalar_types[i].dtype >= 0) {
            *out = (ct_dtype)scalar_types[i].dtype;
            return true;
        }
    return false;
}

const char *cti_pt2_scalar_type_name(int64_t scalar_type) {
    for (size_t i = 0; i < sizeof scalar_types / sizeof scalar_types[0]; i++)
        if (scalar_types[i].code == scalar_type) return scalar_types[i].name;
    return "an unknown ScalarType";
}

/* ---- slots ----------------------------------------------------------------------------- */

typedef struct {
    cti_pt2_graph *g;
    json_t *index;          /* name -> slot number */
    const json_t *tensor_values; /* the graph's tensor_values, for the metas */
    size_t cap;
} slots;

static int parse_meta(reader *r, const json_t *v, cti_pt2_meta **out);

/* Defines `name` as a new slot of kind k. */
static int define(reader *r, slots *s, const char *name, cti_pt2_slot_kind k, int32_t *slot) {
    if (!name[0]) return bad(r, "a value has an empty name");
    if (json_object_get(s->index, name)) return bad(r, "name '%s' is defined twice", name);
    cti_pt2_graph *g = s->g;
    if (g->nslots == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        char **names = realloc(g->slot_names, cap * sizeof *names);
        if (names) g->slot_names = names;
        cti_pt2_slot_kind *kinds = realloc(g->slot_kinds, cap * sizeof *kinds);
        if (kinds) g->slot_kinds = kinds;
        cti_pt2_meta **metas = realloc(g->slot_meta, cap * sizeof *metas);
        if (metas) g->slot_meta = metas;
        if (!names || !kinds || !metas) return oom(r);
        s->cap = cap;
    }
    if (g->nslots >= INT32_MAX) return bad(r, "too many values");
    size_t i = g->nslots;
    g->slot_names[i] = str_dup(name);
    g->slot_kinds[i] = k;
    g->slot_meta[i] = NULL;
    if (!g->slot_names[i]) return oom(r);
    g->nslots++;
    if (json_object_set_new(s->index, name, json_integer((json_int_t)i))) return oom(r);
    if (k == CT_PT2_SLOT_TENSOR && s->tensor_values) {
        const json_t *m = json_object_get(s->tensor_values, name);
        if (m) {
            size_t at = push(r, " (tensor_values['%.100s'])", name);
            if (parse_meta(r, m, &g->slot_meta[i])) return ct_last_code();
            pop(r, at);
        }
    }
    *slot = (int32_t)i;
    return 0;
}

static const char *kind_name(cti_pt2_slot_kind k) {
    static const char *const names[] = {"a tensor", "a SymInt", "a SymFloat", "a SymBool"};
    return names[k];
}

/* The slot of a defined name, which must be of kind k (any sym kind for
 * `sym`). */
static int use(reader *r, slots *s, const char *name, int want, int32_t *slot) {
    const json_t *i = json_object_get(s->index, name);
    if (!i) return bad(r, "name '%s' is used before any node defines it", name);
    int32_t n = (int32_t)json_integer_value(i);
    cti_pt2_slot_kind k = s->g->slot_kinds[n];
    bool ok = want < 0 ? k != CT_PT2_SLOT_TENSOR : (int)k == want;
    if (!ok)
        return bad(r, "'%s' is %s where %s is expected", name, kind_name(k),
                   want < 0 ? "a symbolic scalar" : kind_name((cti_pt2_slot_kind)want));
    *slot = n;
    return 0;
}

/* ---- tensor metas ------------------------------------------------------------------------ */

/* A SymInt: {"as_int": n} or {"as_expr": {"expr_str": "Symbol('s77', ...)"}}. */
static int parse_dim(reader *r, const json_t *v, cti_pt2_dim *d) {
    const char *key;
    json_t *val;
    if (union_of(r, v, &key, &val)) return ct_last_code();
    if (!strcmp(key, "as_int")) {
        if (get_int(r, val, &d->size)) return ct_last_code();
        if (d->size < 0) return bad(r, "a negative size");
        return 0;
    }
    if (strcmp(key, "as_expr")) return bad(r, "unknown SymInt kind '%s'", key);
    d->size = -1;
    const char *e = field_str(r, val, "expr_str");
    if (!e) return ct_last_code();
    /* sympy's srepr of one symbol: Symbol('s77', positive=True, integer=True) */
    const char *open = "Symbol('";
    if (strncmp(e, open, strlen(open)) == 0) {
        const char *name = e + strlen(open), *end = strchr(name, '\'');
        if (end && end > name && !strchr(end + 1, '(')) {
            d->symbol = malloc((size_t)(end - name) + 1);
            if (!d->symbol) return oom(r);
            memcpy(d->symbol, name, (size_t)(end - name));
            d->symbol[end - name] = '\0';
        }
    } else if (strchr(e, '(') == NULL && strchr(e, ' ') == NULL && e[0]) {
        d->symbol = str_dup(e); /* older writers: the bare name "s0" */
        if (!d->symbol) return oom(r);
    }
    return 0;
}

static int parse_device(reader *r, const json_t *v, ct_device *out, bool *known) {
    const char *type = field_str(r, v, "type");
    if (!type) return ct_last_code();
    const json_t *index = json_object_get(v, "index");
    int64_t i = 0;
    if (index && !json_is_null(index)) {
        size_t at = push(r, ".index");
        if (get_int(r, index, &i)) return ct_last_code();
        if (i < 0 || i > 1 << 16) return bad(r, "device index %" PRId64 " is out of range", i);
        pop(r, at);
    }
    *known = true;
    if (!strcmp(type, "cpu")) *out = ct_cpu();
    else if (!strcmp(type, "cuda")) *out = ct_cuda((int)i);
    else *known = false; /* mps, meta, xpu...: the interpreter refuses it where it is used */
    return 0;
}

static void meta_free(cti_pt2_meta *m) {
    if (!m) return;
    for (int i = 0; m->dims && i < m->ndim; i++) free(m->dims[i].symbol);
    free(m->dims);
    free(m);
}

static int parse_meta(reader *r, const json_t *v, cti_pt2_meta **out) {
    if (!json_is_object(v)) return bad(r, "expected a TensorMeta object");
    cti_pt2_meta *m = calloc(1, sizeof *m);
    if (!m) return oom(r);
    int rc = 0;
    size_t at = push(r, ".dtype");
    if ((rc = get_int(r, json_object_get(v, "dtype"), &m->scalar_type))) goto out;
    m->dtype_known = cti_pt2_dtype(m->scalar_type, &m->dtype);
    pop(r, at);
    at = push(r, ".sizes");
    const json_t *sizes = json_object_get(v, "sizes");
    if (!json_is_array(sizes) || json_array_size(sizes) > MAX_DIMS) {
        rc = bad(r, "expected a list of at most %d sizes", MAX_DIMS);
        goto out;
    }
    m->ndim = (int)json_array_size(sizes);
    m->dims = calloc((size_t)m->ndim + 1, sizeof *m->dims);
    if (!m->dims) {
        rc = oom(r);
        goto out;
    }
    for (int i = 0; i < m->ndim; i++) {
        size_t at2 = push(r, "[%d]", i);
        if ((rc = parse_dim(r, json_array_get(sizes, (size_t)i), &m->dims[i]))) goto out;
        pop(r, at2);
    }
    pop(r, at);
    const json_t *dev = json_object_get(v, "device");
    bool known = true;
    at = push(r, ".device");
    if (dev && (rc = parse_device(r, dev, &m->device, &known))) goto out;
    pop(r, at);
    m->requires_grad = json_is_true(json_object_get(v, "requires_grad"));
out:
    if (rc) meta_free(m);
    else *out = m;
    return rc;
}

/* ---- arguments ----------------------------------------------------------------------------- */

static int parse_graph(reader *r, const json_t *v, cti_pt2_graph *g);
static void graph_free(cti_pt2_graph *g);

static int alloc_list(reader *r, cti_pt2_arg *a, size_t n) {
    a->n = n;
    a->slots = malloc((n ? n : 1) * sizeof *a->slots);
    if (!a->slots) return oom(r);
    for (size_t i = 0; i < n; i++) a->slots[i] = -1;
    return 0;
}

/* A list of {"name": ...} (TensorArgument) or, optional, of {"as_tensor":
 * {...}} | {"as_none": true}. */
static int tensor_list(reader *r, slots *s, const json_t *v, cti_pt2_arg *a, bool optional, bool defining) {
    if (!json_is_array(v)) return bad(r, "expected a list");
    if (alloc_list(r, a, json_array_size(v))) return ct_last_code();
    for (size_t i = 0; i < a->n; i++) {
        size_t at = push(r, "[%zu]", i);
        const json_t *e = json_array_get(v, i);
        if (optional) {
            const char *key;
            json_t *val;
            if (union_of(r, e, &key, &val)) return ct_last_code();
            if (!strcmp(key, "as_none")) {
                pop(r, at);
                continue;
            }
            if (strcmp(key, "as_tensor")) return bad(r, "expected as_tensor or as_none, got %s", key);
            e = val;
        }
        const char *name = field_str(r, e, "name");
        if (!name) return ct_last_code();
        int rc = defining ? define(r, s, name, CT_PT2_SLOT_TENSOR, &a->slots[i])
                          : use(r, s, name, CT_PT2_SLOT_TENSOR, &a->slots[i]);
        if (rc) return rc;
        pop(r, at);
    }
    return 0;
}

/* A list of constants of `kind` (INTS, FLOATS, BOOLS), each plain or, with
 * `sym`, a {"as_name": slot} | {"as_int"/"as_float"/"as_bool": constant}. */
static int scalar_list(reader *r, slots *s, const json_t *v, cti_pt2_arg *a, cti_pt2_arg_kind kind, bool sym) {
    if (!json_is_array(v)) return bad(r, "expected a list");
    a->kind = kind;
    size_t n = json_array_size(v);
    if (alloc_list(r, a, n)) return ct_last_code();
    size_t m = n ? n : 1;
    if (kind == CT_PT2_INTS && !(a->ints = calloc(m, sizeof *a->ints))) return oom(r);
    if (kind == CT_PT2_FLOATS && !(a->floats = calloc(m, sizeof *a->floats))) return oom(r);
    if (kind == CT_PT2_BOOLS && !(a->bools = calloc(m, sizeof *a->bools))) return oom(r);
    static const char *const const_key[] = {[CT_PT2_INTS] = "as_int", [CT_PT2_FLOATS] = "as_float",
                                            [CT_PT2_BOOLS] = "as_bool"};
    static const int slot_kind[] = {[CT_PT2_INTS] = CT_PT2_SLOT_INT, [CT_PT2_FLOATS] = CT_PT2_SLOT_FLOAT,
                                    [CT_PT2_BOOLS] = CT_PT2_SLOT_BOOL};
    for (size_t i = 0; i < n; i++) {
        size_t at = push(r, "[%zu]", i);
        const json_t *e = json_array_get(v, i);
        if (sym) {
            const char *key;
            json_t *val;
            if (union_of(r, e, &key, &val)) return ct_last_code();
            if (!strcmp(key, "as_name")) {
                const char *name = get_str(r, val);
                if (!name || use(r, s, name, slot_kind[kind], &a->slots[i])) return ct_last_code();
                pop(r, at);
                continue;
            }
            if (strcmp(key, const_key[kind])) return bad(r, "expected as_name or %s, got %s", const_key[kind], key);
            e = val;
        }
        int rc = kind == CT_PT2_INTS     ? get_int(r, e, &a->ints[i])
                 : kind == CT_PT2_FLOATS ? get_float(r, e, &a->floats[i])
                                         : get_bool(r, e, &a->bools[i]);
        if (rc) return rc;
        pop(r, at);
    }
    return 0;
}

/* {"as_name": n} or {"as_int": 3} (as_float, as_bool) for one SymInt
 * (SymFloat, SymBool) argument. */
static int sym_scalar(reader *r, slots *s, const json_t *v, cti_pt2_arg *a, cti_pt2_slot_kind k) {
    const char *key;
    json_t *val;
    if (union_of(r, v, &key, &val)) return ct_last_code();
    if (!strcmp(key, "as_name")) {
        const char *name = get_str(r, val);
        a->kind = CT_PT2_SYM;
        return name ? use(r, s, name, (int)k, &a->slot) : ct_last_code();
    }
    if (k == CT_PT2_SLOT_INT && !strcmp(key, "as_int")) return a->kind = CT_PT2_INT, get_int(r, val, &a->i);
    if (k == CT_PT2_SLOT_FLOAT && !strcmp(key, "as_float")) return a->kind = CT_PT2_FLOAT, get_float(r, val, &a->f);
    if (k == CT_PT2_SLOT_BOOL && !strcmp(key, "as_bool")) return a->kind = CT_PT2_BOOL, get_bool(r, val, &a->b);
    return bad(r, "unexpected key %s", key);
}

static const char *const memory_formats[] = {NULL, "contiguous_format", "channels_last", "channels_last_3d",
                                             "preserve_format"};

/* One Argument (schema.py's union). Kinds the interpreter cannot pass are
 * kept as CT_PT2_NONE with s = the union's key, refused where used. */
static int parse_arg(reader *r, slots *s, const json_t *v, cti_pt2_arg *a) {
    const char *key;
    json_t *val;
    a->slot = -1;
    if (union_of(r, v, &key, &val)) return ct_last_code();
    size_t at = push(r, ".%s", key);
    int rc = 0;
    if (!strcmp(key, "as_none")) a->kind = CT_PT2_NONE;
    else if (!strcmp(key, "as_tensor")) {
        const char *name = field_str(r, val, "name");
        a->kind = CT_PT2_TENSOR;
        rc = name ? use(r, s, name, CT_PT2_SLOT_TENSOR, &a->slot) : ct_last_code();
    } else if (!strcmp(key, "as_optional_tensor")) {
        const char *k2;
        json_t *v2;
        if (!(rc = union_of(r, val, &k2, &v2))) {
            if (!strcmp(k2, "as_none")) a->kind = CT_PT2_NONE;
            else if (!strcmp(k2, "as_tensor")) {
                const char *name = field_str(r, v2, "name");
                a->kind = CT_PT2_TENSOR;
                rc = name ? use(r, s, name, CT_PT2_SLOT_TENSOR, &a->slot) : ct_last_code();
            } else rc = bad(r, "expected as_tensor or as_none, got %s", k2);
        }
    } else if (!strcmp(key, "as_tensors")) {
        a->kind = CT_PT2_TENSORS;
        rc = tensor_list(r, s, val, a, false, false);
    } else if (!strcmp(key, "as_optional_tensors")) {
        a->kind = CT_PT2_OPT_TENSORS;
        rc = tensor_list(r, s, val, a, true, false);
    } else if (!strcmp(key, "as_int")) a->kind = CT_PT2_INT, rc = get_int(r, val, &a->i);
    else if (!strcmp(key, "as_float")) a->kind = CT_PT2_FLOAT, rc = get_float(r, val, &a->f);
    else if (!strcmp(key, "as_bool")) a->kind = CT_PT2_BOOL, rc = get_bool(r, val, &a->b);
    else if (!strcmp(key, "as_string")) {
        const char *str = get_str(r, val);
        a->kind = CT_PT2_STR;
        rc = !str ? ct_last_code() : !(a->s = str_dup(str)) ? oom(r) : 0;
    } else if (!strcmp(key, "as_ints")) rc = scalar_list(r, s, val, a, CT_PT2_INTS, false);
    else if (!strcmp(key, "as_floats")) rc = scalar_list(r, s, val, a, CT_PT2_FLOATS, false);
    else if (!strcmp(key, "as_bools")) rc = scalar_list(r, s, val, a, CT_PT2_BOOLS, false);
    else if (!strcmp(key, "as_sym_ints")) rc = scalar_list(r, s, val, a, CT_PT2_INTS, true);
    else if (!strcmp(key, "as_sym_floats")) rc = scalar_list(r, s, val, a, CT_PT2_FLOATS, true);
    else if (!strcmp(key, "as_sym_bools")) rc = scalar_list(r, s, val, a, CT_PT2_BOOLS, true);
    else if (!strcmp(key, "as_sym_int")) rc = sym_scalar(r, s, val, a, CT_PT2_SLOT_INT);
    else if (!strcmp(key, "as_sym_float")) rc = sym_scalar(r, s, val, a, CT_PT2_SLOT_FLOAT);
    else if (!strcmp(key, "as_sym_bool")) rc = sym_scalar(r, s, val, a, CT_PT2_SLOT_BOOL);
    else if (!strcmp(key, "as_scalar_type")) {
        a->kind = CT_PT2_DTYPE;
        if (!(rc = get_int(r, val, &a->i)) && !cti_pt2_dtype(a->i, &a->dtype)) {
            a->kind = CT_PT2_NONE; /* refused where used, naming the dtype */
            a->s = str_dup(cti_pt2_scalar_type_name(a->i));
            if (!a->s) rc = oom(r);
        }
    } else if (!strcmp(key, "as_memory_format")) {
        a->kind = CT_PT2_MEMORY_FORMAT;
        if (!(rc = get_int(r, val, &a->i)) && (a->i < 1 || a->i > 4)) rc = bad(r, "unknown memory format %" PRId64, a->i);
        else if (!rc && !(a->s = str_dup(memory_formats[a->i]))) rc = oom(r);
    } else if (!strcmp(key, "as_layout")) {
        a->kind = CT_PT2_LAYOUT;
        rc = get_int(r, val, &a->i);
    } else if (!strcmp(key, "as_device")) {
        bool known = false;
        a->kind = CT_PT2_DEVICE;
        if (!(rc = parse_device(r, val, &a->device, &known)) && !known) {
            a->kind = CT_PT2_NONE;
            a->s = str_dup("as_device (a device other than cpu and cuda)");
            if (!a->s) rc = oom(r);
        }
    } else if (!strcmp(key, "as_graph")) {
        if (r->depth >= MAX_DEPTH) rc = bad(r, "graphs nested more than %d deep", MAX_DEPTH);
        else if (!(a->graph = calloc(1, sizeof *a->graph))) rc = oom(r);
        else {
            a->kind = CT_PT2_GRAPH;
            r->depth++;
            size_t at2 = push(r, ".graph");
            rc = parse_graph(r, json_object_get(val, "graph"), a->graph);
            if (!rc) pop(r, at2);
            r->depth--;
        }
    } else {
        /* as_strings, as_custom_obj, as_operator, as_complex, as_nested_tensors,
         * as_int_lists, as_string_to_argument: no operator a model trains with
         * takes them from C; kept by name so that the node using one is named */
        a->kind = CT_PT2_NONE;
        if (!(a->s = str_dup(key))) rc = oom(r);
    }
    if (!rc) pop(r, at);
    return rc;
}

/* A node's output (or a graph input): defines the names it holds. */
static int parse_out(reader *r, slots *s, const json_t *v, cti_pt2_arg *a) {
    const char *key;
    json_t *val;
    a->slot = -1;
    if (union_of(r, v, &key, &val)) return ct_last_code();
    size_t at = push(r, ".%s", key);
    int rc = 0;
    if (!strcmp(key, "as_tensor")) {
        const char *name = field_str(r, val, "name");
        a->kind = CT_PT2_TENSOR;
        rc = name ? define(r, s, name, CT_PT2_SLOT_TENSOR, &a->slot) : ct_last_code();
    } else if (!strcmp(key, "as_tensors")) {
        a->kind = CT_PT2_TENSORS;
        rc = tensor_list(r, s, val, a, false, true);
    } else if (!strcmp(key, "as_optional_tensors")) {
        a->kind = CT_PT2_OPT_TENSORS;
        rc = tensor_list(r, s, val, a, true, true);
    } else if (!strcmp(key, "as_sym_int") || !strcmp(key, "as_sym_float") || !strcmp(key, "as_sym_bool")) {
        cti_pt2_slot_kind k = key[7] == 'i' ? CT_PT2_SLOT_INT : key[7] == 'f' ? CT_PT2_SLOT_FLOAT : CT_PT2_SLOT_BOOL;
        const char *k2;
        json_t *v2;
        if (!(rc = union_of(r, val, &k2, &v2))) {
            if (!strcmp(k2, "as_name")) {
                const char *name = get_str(r, v2);
                a->kind = CT_PT2_SYM;
                rc = name ? define(r, s, name, k, &a->slot) : ct_last_code();
            } else {
                pop(r, at); /* a constant where a value could be: an input specialized to it */
                return parse_arg(r, s, v, a);
            }
        }
    } else if (!strcmp(key, "as_none")) a->kind = CT_PT2_NONE;
    else {
        pop(r, at);
        return parse_arg(r, s, v, a); /* a graph input specialized to a constant ("scale": 2.0) */
    }
    if (!rc) pop(r, at);
    return rc;
}

/* ---- nodes and graphs --------------------------------------------------------------------- */

/* "torch.ops.aten.conv2d.default" -> "aten::conv2d.default"; NULL for a
 * higher-order operator or a Python one. */
static char *op_name(const char *target) {
    const char *pre = "torch.ops.";
    if (strncmp(target, pre, strlen(pre))) return NULL;
    const char *ns = target + strlen(pre), *dot = strchr(ns, '.');
    if (!dot || dot == ns || !strncmp(ns, "higher_order.", 13)) return NULL;
    size_t nlen = (size_t)(dot - ns), rest = strlen(dot + 1);
    if (!rest || !strchr(dot + 1, '.')) return NULL; /* the overload is always named */
    char *out = malloc(nlen + 2 + rest + 1);
    if (!out) return NULL;
    memcpy(out, ns, nlen);
    memcpy(out + nlen, "::", 2);
    memcpy(out + nlen + 2, dot + 1, rest + 1);
    return out;
}

/* The first frame of the stack trace, 'File "m.py", line 10, in forward\n
 * x = self.conv(x)', as '"m.py", line 10: x = self.conv(x)'. */
static char *source_of(const json_t *metadata) {
    const char *st = json_string_value(json_object_get(metadata, "stack_trace"));
    if (!st || strncmp(st, "File ", 5)) return NULL;
    const char *head = st + 5, *nl = strchr(head, '\n'), *in = strstr(head, ", in ");
    if (!nl || !in || in > nl) return NULL;
    const char *code = nl + 1, *end = strchr(code, '\n');
    while (*code == ' ') code++;
    size_t hlen = (size_t)(in - head), clen = end ? (size_t)(end - code) : strlen(code);
    if (hlen > 300) hlen = 300;
    if (clen > 200) clen = 200;
    char *out = malloc(hlen + clen + 3);
    if (!out) return NULL;
    memcpy(out, head, hlen);
    memcpy(out + hlen, ": ", 2);
    memcpy(out + hlen + 2, code, clen);
    out[hlen + 2 + clen] = '\0';
    return out;
}

static int parse_node(reader *r, slots *s, const json_t *v, cti_pt2_node *node) {
    if (!json_is_object(v)) return bad(r, "expected a node object");
    const char *target = field_str(r, v, "target");
    if (!target) return ct_last_code();
    const char *name = json_string_value(json_object_get(v, "name"));
    if (name) push(r, " ('%.100s')", name);
    if (!(node->target = str_dup(target)) || (name && !(node->name = str_dup(name)))) return oom(r);
    node->op = op_name(target);
    if (!strncmp(target, "torch.ops.", 10) && !strstr(target, "higher_order.") && !node->op)
        return bad(r, "target '%s' is not torch.ops.<namespace>.<name>.<overload>", target);
    node->source = source_of(json_object_get(v, "metadata"));
    const json_t *in = json_object_get(v, "inputs"), *out = json_object_get(v, "outputs");
    if (!json_is_array(in) || !json_is_array(out)) return bad(r, "expected lists 'inputs' and 'outputs'");
    node->nin = json_array_size(in);
    node->nout = json_array_size(out);
    node->in = calloc(node->nin + 1, sizeof *node->in);
    node->out = calloc(node->nout + 1, sizeof *node->out);
    if (!node->in || !node->out) return oom(r);
    for (size_t i = 0; i < node->nin; i++) {
        size_t at = push(r, ".inputs[%zu]", i);
        const json_t *na = json_array_get(in, i);
        const char *an = field_str(r, na, "name");
        if (!an) return ct_last_code();
        if (!(node->in[i].name = str_dup(an))) return oom(r);
        const json_t *kind = json_object_get(na, "kind");
        node->in[i].keyword = json_is_integer(kind) && json_integer_value(kind) == 2;
        size_t at2 = push(r, ".arg");
        if (parse_arg(r, s, json_object_get(na, "arg"), &node->in[i])) return ct_last_code();
        pop(r, at2);
        pop(r, at);
    }
    for (size_t i = 0; i < node->nout; i++) {
        size_t at = push(r, ".outputs[%zu]", i);
        if (parse_out(r, s, json_array_get(out, i), &node->out[i])) return ct_last_code();
        cti_pt2_arg_kind k = node->out[i].kind;
        if (k != CT_PT2_TENSOR && k != CT_PT2_TENSORS && k != CT_PT2_OPT_TENSORS && k != CT_PT2_SYM &&
            k != CT_PT2_NONE)
            return bad(r, "a node's output must be a value, not a constant");
        pop(r, at);
    }
    return 0;
}

static int parse_graph(reader *r, const json_t *v, cti_pt2_graph *g) {
    if (!json_is_object(v)) return bad(r, "expected a graph object");
    slots s = {g, json_object(), json_object_get(v, "tensor_values"), 0};
    if (!s.index) return oom(r);
    if (s.tensor_values && !json_is_object(s.tensor_values)) s.tensor_values = NULL;
    int rc = 0;
    const json_t *inputs = json_object_get(v, "inputs"), *nodes = json_object_get(v, "nodes"),
                 *outputs = json_object_get(v, "outputs");
    if (!json_is_array(inputs) || !json_is_array(nodes) || !json_is_array(outputs)) {
        rc = bad(r, "expected lists 'inputs', 'nodes' and 'outputs'");
        goto out;
    }
    g->ninputs = json_array_size(inputs);
    g->nnodes = json_array_size(nodes);
    g->noutputs = json_array_size(outputs);
    g->inputs = calloc(g->ninputs + 1, sizeof *g->inputs);
    g->nodes = calloc(g->nnodes + 1, sizeof *g->nodes);
    g->outputs = calloc(g->noutputs + 1, sizeof *g->outputs);
    if (!g->inputs || !g->nodes || !g->outputs) {
        rc = oom(r);
        goto out;
    }
    for (size_t i = 0; !rc && i < g->ninputs; i++) {
        size_t at = push(r, ".inputs[%zu]", i);
        if (!(rc = parse_out(r, &s, json_array_get(inputs, i), &g->inputs[i]))) pop(r, at);
    }
    for (size_t i = 0; !rc && i < g->nnodes; i++) {
        size_t at = push(r, ".nodes[%zu]", i);
        if (!(rc = parse_node(r, &s, json_array_get(nodes, i), &g->nodes[i]))) pop(r, at);
    }
    for (size_t i = 0; !rc && i < g->noutputs; i++) {
        size_t at = push(r, ".outputs[%zu]", i);
        if (!(rc = parse_arg(r, &s, json_array_get(outputs, i), &g->outputs[i]))) pop(r, at);
    }
out:
    json_decref(s.index);
    return rc;
}

static void arg_free(cti_pt2_arg *a) {
    free(a->name);
    free(a->s);
    free(a->slots);
    free(a->ints);
    free(a->floats);
    free(a->bools);
    if (a->graph) {
        graph_free(a->graph);
        free(a->graph);
    }
}

static void graph_free(cti_pt2_graph *g) {
    for (size_t i = 0; g->slot_names && i < g->nslots; i++) {
        free(g->slot_names[i]);
        meta_free(g->slot_meta[i]);
    }
    free(g->slot_names);
    free(g->slot_kinds);
    free(g->slot_meta);
    for (size_t i = 0; g->inputs && i < g->ninputs; i++) arg_free(&g->inputs[i]);
    for (size_t i = 0; g->outputs && i < g->noutputs; i++) arg_free(&g->outputs[i]);
    for (size_t i = 0; g->nodes && i < g->nnodes; i++) {
        cti_pt2_node *n = &g->nodes[i];
        free(n->name);
        free(n->target);
        free(n->op);
        free(n->source);
        for (size_t j = 0; n->in && j < n->nin; j++) arg_free(&n->in[j]);
        for (size_t j = 0; n->out && j < n->nout; j++) arg_free(&n->out[j]);
        free(n->in);
        free(n->out);
    }
    free(g->inputs);
    free(g->outputs);
    free(g->nodes);
    memset(g, 0, sizeof *g);
}

/* ---- the signature ------------------------------------------------------------------------- */

/* The graph input's name (tensor or symbol), or NULL for a constant input. */
static const char *input_name(const cti_pt2_graph *g, size_t i) {
    const cti_pt2_arg *a = &g->inputs[i];
    return a->slot >= 0 ? g->slot_names[a->slot] : NULL;
}

static int parse_in_spec(reader *r, const cti_pt2_graph *g, size_t i, const json_t *v, cti_pt2_in_spec *sp) {
    const char *key;
    json_t *val;
    if (union_of(r, v, &key, &val)) return ct_last_code();
    size_t at = push(r, ".%s", key);
    static const struct {
        const char *key, *target;
        cti_pt2_in_kind kind;
    } kinds[] = {{"parameter", "parameter_name", CT_PT2_IN_PARAMETER},
                 {"buffer", "buffer_name", CT_PT2_IN_BUFFER},
                 {"tensor_constant", "tensor_constant_name", CT_PT2_IN_CONSTANT_TENSOR},
                 {"custom_obj", "custom_obj_name", CT_PT2_IN_CUSTOM_OBJ},
                 {"token", NULL, CT_PT2_IN_TOKEN}};
    if (!strcmp(key, "user_input")) {
        sp->kind = CT_PT2_IN_USER;
        const char *name = input_name(g, i);
        if (!(sp->target = str_dup(name ? name : ""))) return oom(r);
        pop(r, at);
        return 0;
    }
    if (!strcmp(key, "constant_input")) {
        sp->kind = CT_PT2_IN_CONSTANT_INPUT;
        const char *name = field_str(r, val, "name");
        if (!name) return ct_last_code();
        if (!(sp->target = str_dup(name))) return oom(r);
        pop(r, at);
        return 0;
    }
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (strcmp(key, kinds[k].key)) continue;
        sp->kind = kinds[k].kind;
        const json_t *arg = json_object_get(val, "arg");
        const char *name = arg ? json_string_value(json_object_get(arg, "name")) : NULL;
        const char *want = input_name(g, i);
        if (!name || !want || strcmp(name, want))
            return bad(r, "names graph input '%s', but graph input %zu is '%s'", name ? name : "?", i,
                       want ? want : "a constant");
        const char *target = kinds[k].target ? field_str(r, val, kinds[k].target) : "";
        if (!target) return ct_last_code();
        if (!(sp->target = str_dup(target))) return oom(r);
        if (sp->kind == CT_PT2_IN_BUFFER) {
            const json_t *p = json_object_get(val, "persistent");
            sp->persistent = !p || json_is_true(p);
        }
        if ((sp->kind == CT_PT2_IN_PARAMETER || sp->kind == CT_PT2_IN_BUFFER ||
             sp->kind == CT_PT2_IN_CONSTANT_TENSOR) &&
            (!target[0] || g->slot_kinds[g->inputs[i].slot] != CT_PT2_SLOT_TENSOR))
            return bad(r, "a parameter, buffer or constant must be a named tensor");
        pop(r, at);
        return 0;
    }
    return bad(r, "unknown input kind '%s'", key);
}

static int parse_out_spec(reader *r, const json_t *v, cti_pt2_out_spec *sp) {
    const char *key;
    json_t *val;
    if (union_of(r, v, &key, &val)) return ct_last_code();
    static const struct {
        const char *key, *target;
        cti_pt2_out_kind kind;
    } kinds[] = {{"user_output", NULL, CT_PT2_OUT_USER},
                 {"loss_output", NULL, CT_PT2_OUT_LOSS},
                 {"buffer_mutation", "buffer_name", CT_PT2_OUT_BUFFER_MUTATION},
                 {"parameter_mutation", "parameter_name", CT_PT2_OUT_PARAMETER_MUTATION},
                 {"user_input_mutation", "user_input_name", CT_PT2_OUT_USER_INPUT_MUTATION},
                 {"gradient_to_parameter", "parameter_name", CT_PT2_OUT_GRADIENT},
                 {"gradient_to_user_input", "user_input_name", CT_PT2_OUT_GRADIENT},
                 {"token", NULL, CT_PT2_OUT_TOKEN}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (strcmp(key, kinds[k].key)) continue;
        size_t at = push(r, ".%s", key);
        sp->kind = kinds[k].kind;
        const char *target = kinds[k].target ? field_str(r, val, kinds[k].target) : "";
        if (!target) return ct_last_code();
        if (!(sp->target = str_dup(target))) return oom(r);
        pop(r, at);
        return 0;
    }
    return bad(r, "unknown output kind '%s'", key);
}

static int parse_signature(reader *r, const json_t *gm, cti_pt2_program *p) {
    size_t at = push(r, ".signature");
    const json_t *sig = json_object_get(gm, "signature");
    const json_t *ins = json_object_get(sig, "input_specs"), *outs = json_object_get(sig, "output_specs");
    if (!json_is_array(ins) || !json_is_array(outs)) return bad(r, "expected lists input_specs and output_specs");
    const cti_pt2_graph *g = &p->graph;
    if (json_array_size(ins) != g->ninputs || json_array_size(outs) != g->noutputs)
        return bad(r, "%zu input specs and %zu output specs for a graph of %zu inputs and %zu outputs",
                   json_array_size(ins), json_array_size(outs), g->ninputs, g->noutputs);
    p->in_specs = calloc(g->ninputs + 1, sizeof *p->in_specs);
    p->out_specs = calloc(g->noutputs + 1, sizeof *p->out_specs);
    if (!p->in_specs || !p->out_specs) return oom(r);
    for (size_t i = 0; i < g->ninputs; i++) {
        size_t at2 = push(r, ".input_specs[%zu]", i);
        if (parse_in_spec(r, g, i, json_array_get(ins, i), &p->in_specs[i])) return ct_last_code();
        pop(r, at2);
    }
    for (size_t i = 0; i < g->noutputs; i++) {
        size_t at2 = push(r, ".output_specs[%zu]", i);
        if (parse_out_spec(r, json_array_get(outs, i), &p->out_specs[i])) return ct_last_code();
        cti_pt2_out_kind k = p->out_specs[i].kind;
        if (k != CT_PT2_OUT_USER && k != CT_PT2_OUT_LOSS && g->outputs[i].kind != CT_PT2_TENSOR)
            return bad(r, "a mutation's output must be a tensor");
        pop(r, at2);
    }
    pop(r, at);
    return 0;
}

/* module_call_graph: the submodules' names in order, and the root's
 * signature: the pytree specs and argument names. */
static int parse_call_signature(reader *r, cti_pt2_program *p, const json_t *sig, size_t i);

static int parse_call_graph(reader *r, const json_t *gm, cti_pt2_program *p) {
    const json_t *mcg = json_object_get(gm, "module_call_graph");
    if (!json_is_array(mcg)) return 0;
    p->modules = calloc(json_array_size(mcg) + 1, sizeof *p->modules);
    if (!p->modules) return oom(r);
    for (size_t i = 0; i < json_array_size(mcg); i++) {
        const json_t *e = json_array_get(mcg, i);
        const char *fqn = json_string_value(json_object_get(e, "fqn"));
        if (!fqn) return bad(r, "module_call_graph[%zu] has no fqn", i);
        if (fqn[0]) {
            if (!(p->modules[p->nmodules] = str_dup(fqn))) return oom(r);
            p->nmodules++;
            continue;
        }
        const json_t *sig = json_object_get(e, "signature");
        if (json_is_object(sig) && parse_call_signature(r, p, sig, i)) return ct_last_code();
    }
    return 0;
}

static int parse_call_signature(reader *r, cti_pt2_program *p, const json_t *sig, size_t i) {
    size_t at = push(r, ".module_call_graph[%zu].signature", i);
    const char *in = json_string_value(json_object_get(sig, "in_spec"));
    const char *out = json_string_value(json_object_get(sig, "out_spec"));
    char what[1200];
    snprintf(what, sizeof what, "%s: %s", r->what, r->path);
    if (p->in_spec || p->out_spec) return bad(r, "a second signature of the root module");
    if (in && !(p->in_spec = cti_pt2_spec_parse(in, what))) return ct_last_code();
    if (out && !(p->out_spec = cti_pt2_spec_parse(out, what))) return ct_last_code();
    const json_t *names = json_object_get(sig, "forward_arg_names");
    if (json_is_array(names)) {
        p->arg_names = calloc(json_array_size(names) + 1, sizeof *p->arg_names);
        if (!p->arg_names) return oom(r);
        for (size_t k = 0; k < json_array_size(names); k++) {
            const char *n = json_string_value(json_array_get(names, k));
            if (!n) return bad(r, "forward_arg_names[%zu] is not a string", k);
            if (!(p->arg_names[k] = str_dup(n))) return oom(r);
            p->narg_names = k + 1;
        }
    }
    pop(r, at);
    return 0;
}

static int parse_ranges(reader *r, const json_t *top, cti_pt2_program *p) {
    const json_t *rc = json_object_get(top, "range_constraints");
    if (!json_is_object(rc)) return 0;
    p->ranges = calloc(json_object_size(rc) + 1, sizeof *p->ranges);
    if (!p->ranges) return oom(r);
    const char *sym;
    json_t *v;
    json_object_foreach((json_t *)rc, sym, v) {
        size_t at = push(r, ".range_constraints['%.100s']", sym);
        cti_pt2_range *x = &p->ranges[p->nranges];
        x->min = 0;
        x->max = INT64_MAX;
        const json_t *lo = json_object_get(v, "min_val"), *hi = json_object_get(v, "max_val");
        if ((lo && !json_is_null(lo) && get_int(r, lo, &x->min)) || (hi && !json_is_null(hi) && get_int(r, hi, &x->max)))
            return ct_last_code();
        if (!(x->symbol = str_dup(sym))) return oom(r);
        p->nranges++;
        pop(r, at);
    }
    return 0;
}

cti_pt2_program *cti_pt2_program_parse(const char *json, size_t n, const char *name, const char *what) {
    reader r = {what, "", 0};
    json_error_t err;
    json_t *top = json_loadb(json, n, JSON_REJECT_DUPLICATES, &err);
    if (!top) {
        ct_set_error(CT_EFORMAT, "%s: not valid JSON (line %d, column %d: %s)", what, err.line, err.column, err.text);
        return NULL;
    }
    cti_pt2_program *p = calloc(1, sizeof *p);
    int rc = p ? 0 : oom(&r);
    if (!rc && !(p->name = str_dup(name))) rc = oom(&r);
    if (!rc && !json_is_object(top)) rc = bad(&r, "expected an ExportedProgram object");
    if (!rc) {
        const json_t *sv = json_object_get(top, "schema_version");
        size_t at = push(&r, "schema_version");
        int64_t major = 0, minor = 0;
        if (!json_is_object(sv) || get_int(&r, json_object_get(sv, "major"), &major) ||
            get_int(&r, json_object_get(sv, "minor"), &minor))
            rc = ct_last_code() ? ct_last_code() : bad(&r, "missing");
        else if (major != CT_PT2_SCHEMA_MAJOR)
            rc = ct_set_error(CT_ENOTSUP,
                              "%s: written with export schema %" PRId64 ".%" PRId64
                              ", which this reader does not know (it reads schema %d, torch 2.11's): export the "
                              "model again with torch 2.11",
                              what, major, minor, CT_PT2_SCHEMA_MAJOR);
        p->schema_major = (int)major;
        p->schema_minor = (int)minor;
        pop(&r, at);
    }
    const json_t *gm = json_object_get(top, "graph_module");
    if (!rc) {
        const json_t *ver = json_object_get(top, "verifiers");
        for (size_t i = 0; json_is_array(ver) && i < json_array_size(ver); i++) {
            const char *s = json_string_value(json_array_get(ver, i));
            if (s && !strcmp(s, "TRAINING")) p->training_ir = true;
        }
        push(&r, "graph_module.graph");
        rc = parse_graph(&r, json_object_get(gm, "graph"), &p->graph);
        if (!rc) pop(&r, 0);
    }
    if (!rc) {
        push(&r, "graph_module");
        rc = parse_signature(&r, gm, p);
        if (!rc) rc = parse_call_graph(&r, gm, p);
        if (!rc) pop(&r, 0);
    }
    if (!rc) rc = parse_ranges(&r, top, p);
    json_decref(top);
    if (rc) {
        cti_pt2_program_free(p);
        return NULL;
    }
    return p;
}

void cti_pt2_program_free(cti_pt2_program *p) {
    if (!p) return;
    for (size_t i = 0; p->in_specs && i < p->graph.ninputs; i++) free(p->in_specs[i].target);
    free(p->in_specs);
    for (size_t i = 0; p->out_specs && i < p->graph.noutputs; i++) free(p->out_specs[i].target);
    free(p->out_specs);
    graph_free(&p->graph);
    cti_pt2_spec_free(p->in_spec);
    cti_pt2_spec_free(p->out_spec);
    for (size_t i = 0; i < p->narg_names; i++) free(p->arg_names[i]);
    free(p->arg_names);
    for (size_t i = 0; i < p->nmodules; i++) free(p->modules[i]);
    free(p->modules);
    for (size_t i = 0; i < p->nranges; i++) free(p->ranges[i].symbol);
    free(p->ranges);
    free(p->name);
    free(p);
}

/* ---- text for messages --------------------------------------------------------------------- */

const char *cti_pt2_node_text(const cti_pt2_node *node, char *buf, size_t len) {
    snprintf(buf, len, "node '%s' (%s)%s%s", node->name ? node->name : "?", node->op ? node->op : node->target,
             node->source ? " from " : "", node->source ? node->source : "");
    return buf;
}

const char *cti_pt2_meta_text(const cti_pt2_meta *m, char *buf, size_t len) {
    size_t at = (size_t)snprintf(buf, len, "%s[", cti_pt2_scalar_type_name(m->scalar_type));
    for (int i = 0; i < m->ndim && at < len; i++) {
        const cti_pt2_dim *d = &m->dims[i];
        if (d->size >= 0) at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, i ? ", " : "", d->size);
        else at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", d->symbol ? d->symbol : "?");
    }
    if (at < len) snprintf(buf + at, len - at, "]");
    return buf;
}
