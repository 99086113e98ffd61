/* src/pt2/treespec.c — torch.utils._pytree's treespec_dumps format (version
 * 1), which says how an exported program's flat inputs and outputs nest:
 *
 *     [1, {"type": "builtins.tuple", "context": "null", "children_spec": [
 *            {"type": "builtins.tuple", ...: the positional arguments},
 *            {"type": "builtins.dict", "context": "[\"scale\"]", ...: the keywords}]}]
 *
 * A leaf is {"type": null, "context": null, "children_spec": []}. A dict's
 * context is its keys, JSON-encoded in a string; a defaultdict's wraps
 * them in "dict_context". Types registered by a user's own code cannot be
 * rebuilt in C and are refused, naming them.
 */
#include "pt2/pt2.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 64 };

static int bad(const char *what, const char *msg, const char *type) {
    return ct_set_error(CT_EFORMAT, "%s: pytree spec: %s%s%s", what, msg, type ? " " : "", type ? type : "");
}

static char *str_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void spec_clear(cti_pt2_spec *s) {
    for (size_t i = 0; s->children && i < s->n; i++) spec_clear(&s->children[i]);
    for (size_t i = 0; s->keys && i < s->n; i++) free(s->keys[i]);
    free(s->children);
    free(s->keys);
    free(s->int_keys);
    free(s->type);
}

/* The keys of a dict node from its context. */
static int dict_keys(const char *what, const json_t *context, bool wrapped, cti_pt2_spec *s) {
    const char *text = json_string_value(context);
    if (!text) return bad(what, "a dict's context is not a string", NULL);
    json_t *keys = json_loads(text, 0, NULL);
    int rc = 0;
    if (wrapped && json_is_object(keys)) {
        json_t *inner = json_incref(json_object_get(keys, "dict_context"));
        json_decref(keys);
        keys = inner;
    }
    if (!json_is_array(keys) || json_array_size(keys) != s->n) {
        json_decref(keys);
        return bad(what, "a dict's context does not list one key per child", NULL);
    }
    s->keys = calloc(s->n + 1, sizeof *s->keys);
    s->int_keys = calloc(s->n + 1, sizeof *s->int_keys);
    if (!s->keys || !s->int_keys) rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", what);
    for (size_t i = 0; !rc && i < s->n; i++) {
        const json_t *k = json_array_get(keys, i);
        char num[32];
        if (json_is_string(k)) s->keys[i] = str_dup(json_string_value(k));
        else if (json_is_integer(k)) {
            snprintf(num, sizeof num, "%" PRId64, (int64_t)json_integer_value(k));
            s->keys[i] = str_dup(num);
            s->int_keys[i] = true;
        } else {
            rc = bad(what, "a dict key that is neither a string nor an int", NULL);
            break;
        }
        if (!s->keys[i]) rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", what);
    }
    json_decref(keys);
    return rc;
}

static int parse_node(const char *what, const json_t *v, cti_pt2_spec *s, int depth) {
    if (depth > MAX_DEPTH) return bad(what, "nested too deep", NULL);
    if (!json_is_object(v)) return bad(what, "a node is not an object", NULL);
    const json_t *type = json_object_get(v, "type"), *children = json_object_get(v, "children_spec");
    if (!json_is_array(children)) return bad(what, "a node has no children_spec list", NULL);
    if (json_is_null(type) || !type) {
        if (json_array_size(children)) return bad(what, "a leaf with children", NULL);
        s->kind = CT_PT2_SPEC_LEAF;
        s->nleaves = 1;
        return 0;
    }
    const char *t = json_string_value(type);
    if (!t) return bad(what, "a node's type is not a string", NULL);
    if (!(s->type = str_dup(t))) return ct_set_error(CT_ENOMEM, "%s: out of host memory", what);
    if (!strcmp(t, "builtins.tuple") || !strcmp(t, "collections.namedtuple")) s->kind = CT_PT2_SPEC_TUPLE;
    else if (!strcmp(t, "builtins.list")) s->kind = CT_PT2_SPEC_LIST;
    else if (!strcmp(t, "builtins.dict") || !strcmp(t, "collections.OrderedDict") ||
             !strcmp(t, "collections.defaultdict"))
        s->kind = CT_PT2_SPEC_DICT;
    else
        return ct_set_error(CT_ENOTSUP,
                            "%s: the inputs or outputs nest in a %s, a type registered with Python's pytree that C "
                            "cannot rebuild (tuples, lists, dicts and namedtuples can be)",
                            what, t);
    s->n = json_array_size(children);
    if (!(s->children = calloc(s->n + 1, sizeof *s->children)))
        return ct_set_error(CT_ENOMEM, "%s: out of host memory", what);
    if (s->kind == CT_PT2_SPEC_DICT &&
        dict_keys(what, json_object_get(v, "context"), !strcmp(t, "collections.defaultdict"), s))
        return ct_last_code();
    for (size_t i = 0; i < s->n; i++) {
        if (parse_node(what, json_array_get(children, i), &s->children[i], depth + 1)) return ct_last_code();
        s->nleaves += s->children[i].nleaves;
    }
    return 0;
}

cti_pt2_spec *cti_pt2_spec_parse(const char *text, const char *what) {
    json_error_t err;
    json_t *top = json_loads(text, 0, &err);
    if (!top) {
        ct_set_error(CT_EFORMAT, "%s: pytree spec: not valid JSON (%s)", what, err.text);
        return NULL;
    }
    cti_pt2_spec *s = calloc(1, sizeof *s);
    int rc = s ? 0 : ct_set_error(CT_ENOMEM, "%s: out of host memory", what);
    if (!rc && (!json_is_array(top) || json_array_size(top) != 2 || !json_is_integer(json_array_get(top, 0))))
        rc = bad(what, "expected [version, node]", NULL);
    if (!rc && json_integer_value(json_array_get(top, 0)) != 1)
        rc = ct_set_error(CT_ENOTSUP, "%s: pytree spec format %" PRId64 ", this reader knows format 1", what,
                          (int64_t)json_integer_value(json_array_get(top, 0)));
    if (!rc) rc = parse_node(what, json_array_get(top, 1), s, 0);
    json_decref(top);
    if (rc) {
        cti_pt2_spec_free(s);
        return NULL;
    }
    return s;
}

void cti_pt2_spec_free(cti_pt2_spec *s) {
    if (!s) return;
    spec_clear(s);
    free(s);
}
