/* src/config/yaml.c — a YAML experiment config read into the JSON tree the
 * config loader walks (yaml.h), from libyaml's parser events.
 *
 * Scalars are resolved by the YAML 1.2 core schema, as Determined's CLI
 * reads configs (ruamel.yaml's safe loader): null (~, null, empty), true /
 * false, integers (decimal, 0o octal, 0x hex), floats (1.5, .5, 1e-4,
 * .inf, .nan), anything else a string; a quoted scalar is always a string
 * and an explicit !!str, !!int, !!float, !!bool or !!null tag is obeyed.
 * An alias is a copy of its anchor's value; the values made and the bytes
 * of their text, aliases expanded, are counted, so that a few lines of
 * nested aliases cannot take the memory ("billion laughs", also of large
 * strings: a 1 MiB anchor aliased 100,000 times is refused before it is
 * copied once). Keys are strings (a scalar key keeps its
 * text), and a key given twice is an error, as JSON_REJECT_DUPLICATES
 * makes it for JSON. JSON cannot hold .inf or .nan: refused. */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "config/yaml.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "ctrial/error.h"

#define MAX_DEPTH 64
#define MAX_NODES 1000000 /* made, aliases expanded: far beyond any config */
#define MAX_BYTES ((size_t)64 << 20) /* of scalars' text, aliases expanded: likewise */
#define NOT_A_KEY "a key must be a plain value (a string), not a list or a mapping"

/* An anchor and what it names, with the values it expands to. */
typedef struct {
    char *name;
    json_t *value; /* NULL while the anchored node is being read */
    size_t size;   /* values in it */
    size_t bytes;  /* its scalars' text */
} anchor;

/* A mapping or sequence being read; a mapping's key waiting for its value. */
typedef struct {
    json_t *node;
    char *key;
    int anchor; /* index in anchors, or -1 */
    size_t made_before, bytes_before;
} open_node;

typedef struct {
    yaml_parser_t parser;
    const char *label;
    size_t made, bytes;
    anchor *anchors;
    size_t n_anchors, cap_anchors;
    open_node stack[MAX_DEPTH + 1];
    int depth;
    json_t *root;
    int docs;
} conv;

static int fail_at(const conv *c, yaml_mark_t m, const char *what) {
    return ct_set_error(CT_ECONFIG, "%s:%zu:%zu: %s", c->label, m.line + 1, m.column + 1, what);
}

static bool is_one_of(const char *s, const char *const *words) {
    for (; *words; words++)
        if (strcmp(s, *words) == 0) return true;
    return false;
}

/* [-+]? then digits of `base` (at least one), nothing after. */
static bool parse_int(const char *s, int base, json_int_t *out) {
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, base);
    if (end == s || *end || errno) return false;
    *out = (json_int_t)v;
    return true;
}

static bool all_of(const char *s, const char *set) { return *s && strspn(s, set) == strlen(s); }

/* The YAML 1.2 core schema's int: [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+. */
static bool core_int(const char *s, json_int_t *out) {
    if (strncmp(s, "0o", 2) == 0) return all_of(s + 2, "01234567") && parse_int(s + 2, 8, out);
    if (strncmp(s, "0x", 2) == 0) return all_of(s + 2, "0123456789abcdefABCDEF") && parse_int(s + 2, 16, out);
    const char *d = s + (*s == '-' || *s == '+');
    return all_of(d, "0123456789") && parse_int(s, 10, out);
}

/* The core schema's float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool core_float(const char *s) {
    const char *p = s + (*s == '-' || *s == '+');
    size_t whole = strspn(p, "0123456789");
    p += whole;
    size_t frac = 0;
    if (*p == '.') {
        p++;
        frac = strspn(p, "0123456789");
        p += frac;
    }
    if (whole == 0 && frac == 0) return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        p += *p == '-' || *p == '+';
        size_t exp = strspn(p, "0123456789");
        if (exp == 0) return false;
        p += exp;
    }
    return *p == '\0';
}

/* A scalar's value: a plain one (not quoted, no tag) resolved by the core
 * schema; a quoted one, or one tagged !!str, a string; another yaml.org
 * tag (!!int, !!float, ...) resolved as if plain. */
static json_t *scalar(conv *c, const yaml_event_t *e) {
    const char *s = (const char *)e->data.scalar.value, *tag = (const char *)e->data.scalar.tag;
    bool resolve = tag ? strcmp(tag, YAML_STR_TAG) != 0 && strncmp(tag, "tag:yaml.org,2002:", 18) == 0
                       : e->data.scalar.plain_implicit;
    if (!resolve) return json_string(s);
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL}, *const falses[] = {"false", "False", "FALSE", NULL};
    static const char *const infs[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF",
                                       ".nan", ".NaN", ".NAN", NULL};
    json_int_t i;
    if (is_one_of(s, nulls)) return json_null();
    if (is_one_of(s, trues)) return json_true();
    if (is_one_of(s, falses)) return json_false();
    if (core_int(s, &i)) return json_integer(i);
    if (core_float(s)) {
        double v = strtod(s, NULL);
        if (isinf(v)) {
            fail_at(c, e->start_mark, "a number too large for a double");
            return NULL;
        }
        return json_real(v);
    }
    if (is_one_of(s, infs)) {
        fail_at(c, e->start_mark, "infinity and NaN have no JSON form; a config cannot hold them");
        return NULL;
    }
    return json_string(s);
}

/* Registers an anchor (value NULL until its node is complete). Its index,
 * or -1 + error. */
static int add_anchor(conv *c, const unsigned char *name) {
    if (c->n_anchors == c->cap_anchors) {
        size_t cap = c->cap_anchors ? 2 * c->cap_anchors : 8;
        anchor *a = realloc(c->anchors, cap * sizeof *a);
        if (!a) return ct_set_error(CT_ENOMEM, "%s: out of memory", c->label), -1;
        c->anchors = a;
        c->cap_anchors = cap;
    }
    char *copy = strdup((const char *)name);
    if (!copy) return ct_set_error(CT_ENOMEM, "%s: out of memory", c->label), -1;
    c->anchors[c->n_anchors] = (anchor){copy, NULL, 0, 0};
    return (int)c->n_anchors++;
}

/* The latest anchor of that name (YAML lets a later one shadow it). */
static anchor *find_anchor(conv *c, const unsigned char *name) {
    for (size_t i = c->n_anchors; i-- > 0;)
        if (strcmp(c->anchors[i].name, (const char *)name) == 0) return &c->anchors[i];
    return NULL;
}

/* Puts a complete value (taken) where it belongs: the root, the open
 * sequence, or the open mapping's pending key (a scalar with no pending
 * key becomes the key). */
static int place(conv *c, json_t *v, yaml_mark_t m, bool is_scalar, const char *text) {
    if (c->depth == 0) {
        c->root = v;
        return 0;
    }
    open_node *top = &c->stack[c->depth - 1];
    if (json_is_array(top->node)) {
        if (json_array_append_new(top->node, v) != 0) return ct_set_error(CT_ENOMEM, "%s: out of memory", c->label);
        return 0;
    }
    if (!top->key) { /* a key: its text, whatever it would resolve to */
        json_decref(v);
        if (!is_scalar) return fail_at(c, m, NOT_A_KEY);
        if (json_object_get(top->node, text)) {
            char what[300];
            snprintf(what, sizeof what, "duplicate key '%.200s'", text);
            return fail_at(c, m, what);
        }
        top->key = strdup(text);
        return top->key ? 0 : ct_set_error(CT_ENOMEM, "%s: out of memory", c->label);
    }
    int rc = json_object_set_new(top->node, top->key, v) == 0 ? 0 : ct_set_error(CT_ENOMEM, "%s: out of memory", c->label);
    free(top->key);
    top->key = NULL;
    return rc;
}

/* The next value read is a key: the innermost open node is a mapping with
 * no key waiting for its value. */
static bool awaiting_key(const conv *c) {
    return c->depth > 0 && json_is_object(c->stack[c->depth - 1].node) && !c->stack[c->depth - 1].key;
}

/* One more value made (n of them, of `bytes` bytes of text, for an
 * alias's expansion), counted before anything is copied. */
static int count(conv *c, size_t n, size_t bytes, yaml_mark_t m) {
    c->made += n;
    c->bytes = bytes > MAX_BYTES - c->bytes ? MAX_BYTES + 1 : c->bytes + bytes;
    if (c->made > MAX_NODES) return fail_at(c, m, "more than a million values once aliases are expanded");
    return c->bytes > MAX_BYTES ? fail_at(c, m, "more than 64 MiB of text once aliases are expanded") : 0;
}

static int on_event(conv *c, const yaml_event_t *e) {
    yaml_mark_t m = e->start_mark;
    switch (e->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++c->docs > 1) return ct_set_error(CT_ECONFIG, "%s: more than one YAML document ('---'); a config is one", c->label);
        return 0;
    case YAML_SCALAR_EVENT: {
        int rc = count(c, 1, e->data.scalar.length, m);
        bool is_key = awaiting_key(c);
        json_t *v = rc ? NULL : is_key ? json_null() : scalar(c, e);
        if (!v) return rc ? rc : ct_last_code() != CT_OK ? ct_last_code() : ct_set_error(CT_ENOMEM, "%s: out of memory", c->label);
        if (e->data.scalar.anchor) {
            int a = add_anchor(c, e->data.scalar.anchor);
            if (a < 0) {
                json_decref(v);
                return ct_last_code();
            }
            c->anchors[a].value = is_key ? json_string((const char *)e->data.scalar.value) : json_incref(v);
            c->anchors[a].size = 1;
            c->anchors[a].bytes = e->data.scalar.length;
        }
        return place(c, v, m, true, (const char *)e->data.scalar.value);
    }
    case YAML_ALIAS_EVENT: {
        anchor *a = find_anchor(c, e->data.alias.anchor);
        if (!a) return fail_at(c, m, "an alias to an anchor not defined before it");
        if (!a->value) return fail_at(c, m, "an alias inside its own anchor (a loop)");
        int rc = count(c, a->size, a->bytes, m);
        bool is_key = awaiting_key(c);
        if (!rc && is_key && !json_is_string(a->value)) return fail_at(c, m, NOT_A_KEY);
        return rc ? rc : place(c, json_deep_copy(a->value), m, is_key, is_key ? json_string_value(a->value) : NULL);
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        if (c->depth == MAX_DEPTH) return fail_at(c, m, "nested more than 64 deep");
        if (awaiting_key(c)) return fail_at(c, m, NOT_A_KEY);
        int rc = count(c, 1, 0, m);
        if (rc) return rc;
        const unsigned char *name = e->type == YAML_SEQUENCE_START_EVENT ? e->data.sequence_start.anchor
                                                                         : e->data.mapping_start.anchor;
        int a = name ? add_anchor(c, name) : -1;
        if (name && a < 0) return ct_last_code();
        json_t *node = e->type == YAML_SEQUENCE_START_EVENT ? json_array() : json_object();
        if (!node) return ct_set_error(CT_ENOMEM, "%s: out of memory", c->label);
        c->stack[c->depth++] = (open_node){node, NULL, a, c->made, c->bytes};
        return 0;
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: {
        open_node top = c->stack[--c->depth];
        free(top.key);
        if (top.anchor >= 0) {
            c->anchors[top.anchor].value = json_incref(top.node);
            c->anchors[top.anchor].size = c->made - top.made_before + 1;
            c->anchors[top.anchor].bytes = c->bytes - top.bytes_before;
        }
        return place(c, top.node, m, false, NULL);
    }
    default: return 0;
    }
}

json_t *cti_yaml_to_json(const char *text, size_t len, const char *label) {
    conv *c = calloc(1, sizeof *c);
    if (!c || !yaml_parser_initialize(&c->parser)) {
        free(c);
        ct_set_error(CT_ENOMEM, "%s: out of memory", label);
        return NULL;
    }
    c->label = label;
    yaml_parser_set_input_string(&c->parser, (const unsigned char *)text, len);
    ct_clear_error();
    int rc = 0;
    for (bool done = false; !done && !rc;) {
        yaml_event_t e;
        if (!yaml_parser_parse(&c->parser, &e)) {
            rc = ct_set_error(CT_ECONFIG, "%s:%zu:%zu: %s%s%s", label, c->parser.problem_mark.line + 1,
                              c->parser.problem_mark.column + 1, c->parser.problem ? c->parser.problem : "not YAML",
                              c->parser.context ? " " : "", c->parser.context ? c->parser.context : "");
            break;
        }
        done = e.type == YAML_STREAM_END_EVENT;
        rc = on_event(c, &e);
        yaml_event_delete(&e);
    }
    while (c->depth > 0) { /* what a failure left open */
        open_node *top = &c->stack[--c->depth];
        free(top->key);
        json_decref(top->node);
    }
    json_t *out = rc ? NULL : c->root;
    if (rc) json_decref(c->root);
    else if (!out) rc = ct_set_error(CT_ECONFIG, "%s: empty (no YAML document in it)", label);
    else if (!json_is_object(out)) {
        rc = ct_set_error(CT_ECONFIG, "%s:1:1: the config must be a mapping of keys (name:, hyperparameters:, searcher:, ...)", label);
        json_decref(out);
        out = NULL;
    }
    for (size_t i = 0; i < c->n_anchors; i++) {
        free(c->anchors[i].name);
        json_decref(c->anchors[i].value);
    }
    free(c->anchors);
    yaml_parser_delete(&c->parser);
    free(c);
    return out;
}
