/* tests/ops/dispatch_dump.c — the C half of test_dispatch.py: every case of
 * dispatch_cases.json called by name through ctrial/ops.h, its inputs,
 * results and input gradients saved for Python to recompute.
 *
 *     dispatch_dump CASES.json OUT.pth
 *
 * A case is {"op": NAME, "args": [...], "kw": {...}, "grad": bool,
 * "error": TEXT}. Arguments, in JSON:
 *   1, -3            CT_I                 0.5, 2.0   CT_F
 *   true / false     CT_B                 null       CT_NONE
 *   "mean"           CT_S                 [1, 2]     CT_INTS
 *   [0.5, 2.0]       CT_FLOATS            [true]     CT_BOOLS
 *   {"randn": SHAPE} a tensor, also "rand", "pos" (rand + 0.5), "bool"
 *                    (rand > 0.5), {"randint": [LOW, HIGH, SHAPE]},
 *                    {"arange": N}, {"spd": N} (an N x N symmetric
 *                    positive definite matrix: A A^T + N I, A randn),
 *                    {"values": [1, 2.5, "nan", "inf", "-inf"]} (those
 *                    values; "shape": SHAPE to reshape them; bool when
 *                    every value is true/false, int64 when every value
 *                    is an integer, else float32); with
 *                    "dtype": "float64" etc. and "grad": false to leave
 *                    it out of the backward
 *   [{...}, null]    CT_TENSORS (null: a NULL entry, None in Tensor?[])
 *   {"dtype": "float64"}  CT_DTYPE          {"device": "cpu"}  CT_DEVICE
 * Inputs are drawn after ct_manual_seed(1000 + case index), in order; the
 * call runs after ct_manual_seed(7) (random operators draw the same
 * numbers as Python's after torch.manual_seed(7)).
 *
 * With "grad", the loss is the sum over the floating-point tensors the call
 * returned of (out * cos(arange(numel)).view(out's shape)).sum(), and its
 * gradients with respect to the floating-point inputs are saved.
 *
 * OUT.pth: {"NNN": {"inputs": [tensors in order of appearance, as drawn],
 * "after": [the same tensors after the call (an in-place operator's
 * changes)], "out": the result tree (ct_call_value), "grads": [gradient or
 * None per input], "error": the message when the call failed}}. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

#include "common/cases.h"

enum { MAX_ARGS = 32, MAX_INPUTS = 64, MAX_LIST = 16 };

typedef struct {
    ct_tensor *inputs[MAX_INPUTS];
    ct_tensor *drawn[MAX_INPUTS]; /* copies before the call */
    bool wants_grad[MAX_INPUTS];
    int n_inputs;
    /* storage the ct_arg lists point into */
    int64_t ints[MAX_ARGS][MAX_LIST];
    double floats[MAX_ARGS][MAX_LIST];
    bool bools[MAX_ARGS][MAX_LIST];
    const ct_tensor *tensors[MAX_ARGS][MAX_LIST];
    int used;
} arena;

static void die(const char *what) {
    fprintf(stderr, "dispatch_dump: %s: %s\n", what, ct_last_error());
    exit(1);
}

static ct_dtype dtype_named(const char *s) {
    static const struct {
        const char *name;
        ct_dtype d;
    } names[] = {{"float32", CT_F32}, {"float64", CT_F64}, {"float16", CT_F16}, {"bfloat16", CT_BF16},
                 {"int64", CT_I64},   {"int32", CT_I32},   {"uint8", CT_U8},    {"bool", CT_BOOL},
                 {"int8", CT_I8},     {"int16", CT_I16}};
    for (size_t i = 0; s && i < sizeof names / sizeof *names; i++)
        if (strcmp(s, names[i].name) == 0) return names[i].d;
    fprintf(stderr, "dispatch_dump: unknown dtype '%s'\n", s ? s : "(none)");
    exit(1);
}

static int shape_of(const json_t *j, int64_t *shape) {
    size_t i;
    json_t *d;
    json_array_foreach(j, i, d) shape[i] = json_integer_value(d);
    return (int)json_array_size(j);
}

static bool is_tensor_spec(const json_t *j) {
    return json_object_get(j, "randn") || json_object_get(j, "rand") || json_object_get(j, "pos") ||
           json_object_get(j, "bool") || json_object_get(j, "randint") || json_object_get(j, "arange") ||
           json_object_get(j, "spd") || json_object_get(j, "values");
}

/* {"values": [...], "shape": SHAPE}: numbers, booleans, "nan", "inf" or
 * "-inf". */
static ct_tensor *from_values(const json_t *vals, const json_t *shape_j, const json_t *dt) {
    size_t n = json_array_size(vals), i;
    json_t *e;
    double *v = calloc(n ? n : 1, sizeof *v);
    bool all_int = true, all_bool = true;
    json_array_foreach(vals, i, e) {
        const char *s = json_string_value(e);
        all_int &= json_is_integer(e);
        all_bool &= json_is_boolean(e);
        if (json_is_number(e)) v[i] = json_number_value(e);
        else if (json_is_boolean(e)) v[i] = json_is_true(e);
        else if (s && !strcmp(s, "nan")) v[i] = NAN;
        else if (s && !strcmp(s, "inf")) v[i] = INFINITY;
        else if (s && !strcmp(s, "-inf")) v[i] = -INFINITY;
        else {
            fprintf(stderr, "dispatch_dump: cannot make a value of %s\n", json_dumps(e, JSON_ENCODE_ANY));
            exit(1);
        }
    }
    int64_t shape[8] = {(int64_t)n};
    int ndim = shape_j ? shape_of(shape_j, shape) : 1;
    ct_tensor *t = ct_from_data(v, ndim, shape, CT_F64);
    free(v);
    return ct_to_dtype(t, dt ? dtype_named(json_string_value(dt)) : all_bool ? CT_BOOL : all_int ? CT_I64 : CT_F32);
}

/* A A^T + n I for A = randn(n, n). */
static ct_tensor *spd(int64_t n, const ct_topts *o) {
    double *eye = calloc((size_t)(n * n), sizeof *eye);
    for (int64_t i = 0; i < n; i++) eye[i * n + i] = (double)n;
    ct_tensor *n_eye = ct_to_dtype(ct_from_data(eye, 2, (int64_t[]){n, n}, CT_F64), o->dtype);
    free(eye);
    ct_tensor *a = ct_randn(2, (int64_t[]){n, n}, o);
    return ct_add(ct_matmul(a, ct_t(a)), n_eye);
}

/* A tensor from its spec, kept in the arena's inputs. */
static ct_tensor *make_tensor(arena *a, const json_t *j) {
    int64_t shape[8];
    const json_t *dt = json_object_get(j, "dtype");
    ct_dtype dtype = dt ? dtype_named(json_string_value(dt)) : CT_F32;
    ct_topts o = {.dtype = dtype};
    ct_tensor *t = NULL;
    const json_t *s;
    if ((s = json_object_get(j, "randn"))) {
        int n = shape_of(s, shape);
        t = ct_randn(n, shape, &o);
    } else if ((s = json_object_get(j, "rand"))) {
        int n = shape_of(s, shape);
        t = ct_rand(n, shape, &o);
    } else if ((s = json_object_get(j, "pos"))) {
        int n = shape_of(s, shape);
        t = ct_add_scalar(ct_rand(n, shape, &o), 0.5);
    } else if ((s = json_object_get(j, "bool"))) {
        int n = shape_of(s, shape);
        t = ct_gt_scalar(ct_rand(n, shape, NULL), 0.5);
    } else if ((s = json_object_get(j, "randint"))) {
        int n = shape_of(json_array_get(s, 2), shape);
        o.dtype = dt ? dtype : CT_I64;
        t = ct_randint(json_integer_value(json_array_get(s, 0)), json_integer_value(json_array_get(s, 1)), n, shape,
                       &o);
    } else if ((s = json_object_get(j, "arange"))) {
        o.dtype = dt ? dtype : CT_I64;
        t = ct_arange(0, (double)json_integer_value(s), 1, &o);
    } else if ((s = json_object_get(j, "spd"))) {
        t = spd(json_integer_value(s), &o);
    } else if ((s = json_object_get(j, "values"))) {
        t = from_values(s, json_object_get(j, "shape"), dt);
    }
    if (!t) die("making an input");
    t = ct_keep(t);
    bool grad = ct_dtype_is_floating(ct_dtype_of(t)) && !json_is_false(json_object_get(j, "grad"));
    if (grad && ct_set_requires_grad(t, true) != 0) die("requires_grad");
    if (a->n_inputs == MAX_INPUTS) die("too many inputs");
    a->wants_grad[a->n_inputs] = grad;
    a->drawn[a->n_inputs] = ct_keep(ct_clone(ct_detach(t)));
    a->inputs[a->n_inputs++] = t;
    return t;
}

static ct_arg make_arg(arena *a, const json_t *j) {
    if (json_is_integer(j)) return CT_I(json_integer_value(j));
    if (json_is_real(j)) return CT_F(json_real_value(j));
    if (json_is_boolean(j)) return CT_B(json_is_true(j));
    if (json_is_null(j)) return CT_NONE;
    if (json_is_string(j)) return CT_S(json_string_value(j));
    if (json_is_object(j)) {
        if (is_tensor_spec(j)) return CT_T(make_tensor(a, j));
        if (json_object_get(j, "dtype")) return CT_DTYPE(dtype_named(json_string_value(json_object_get(j, "dtype"))));
        if (json_object_get(j, "device")) {
            ct_device d;
            if (ct_device_parse(json_string_value(json_object_get(j, "device")), &d) != 0) die("device");
            return CT_DEVICE(d);
        }
    }
    if (json_is_array(j)) {
        int k = a->used++;
        size_t n = json_array_size(j), i;
        json_t *e;
        if (k >= MAX_ARGS || n > MAX_LIST) die("too many list arguments");
        const json_t *first = json_array_get(j, 0);
        if (n && (json_is_object(first) || json_is_null(first))) {
            json_array_foreach(j, i, e) a->tensors[k][i] = json_is_null(e) ? NULL : make_tensor(a, e);
            return ct_arg_tensors(n, a->tensors[k]);
        }
        if (n && json_is_real(first)) {
            json_array_foreach(j, i, e) a->floats[k][i] = json_number_value(e);
            return ct_arg_floats(n, a->floats[k]);
        }
        if (n && json_is_boolean(first)) {
            json_array_foreach(j, i, e) a->bools[k][i] = json_is_true(e);
            return ct_arg_bools(n, a->bools[k]);
        }
        json_array_foreach(j, i, e) a->ints[k][i] = json_integer_value(e);
        return ct_arg_ints(n, a->ints[k]);
    }
    fprintf(stderr, "dispatch_dump: cannot pass %s\n", json_dumps(j, JSON_ENCODE_ANY));
    exit(1);
}

/* Adds (out * cos(arange(numel)).view_as(out)).sum() for every floating
 * tensor in v to *loss. */
static void add_loss(const ct_value *v, ct_tensor **loss) {
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_TENSOR: {
        ct_tensor *t = ct_value_get_tensor(v);
        if (!ct_dtype_is_floating(ct_dtype_of(t)) || !ct_requires_grad(t)) return;
        int64_t shape[16];
        int n = ct_shape(t, shape, 16);
        ct_tensor *w = ct_reshape(ct_cos(ct_arange(0, (double)ct_numel(t), 1, &(ct_topts){.dtype = ct_dtype_of(t)})),
                                  n, shape);
        ct_tensor *term = ct_sum(ct_mul(t, w));
        *loss = *loss ? ct_add(*loss, term) : term;
        return;
    }
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
        for (size_t i = 0; i < ct_value_len(v); i++) add_loss(ct_value_list_get(v, i), loss);
        return;
    default: return;
    }
}

int main(int argc, char **argv) {
    json_t *cases = ct_test_load_cases(argc, argv);
    if (!cases) return 2;
    ct_set_num_threads(1);
    ct_value *all = ct_value_dict();
    size_t ci;
    json_t *c;
    json_array_foreach(cases, ci, c) {
        ct_scope *scope = ct_scope_begin();
        arena *a = calloc(1, sizeof *a);
        ct_arg args[MAX_ARGS];
        size_t nargs = 0;
        ct_manual_seed(1000 + ci);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(c, "args"), i, e) args[nargs++] = make_arg(a, e);
        const char *key;
        json_object_foreach(json_object_get(c, "kw"), key, e) args[nargs++] = ct_arg_kw(key, make_arg(a, e));
        ct_manual_seed(7);
        ct_value *out = ct_call_value(json_string_value(json_object_get(c, "op")), nargs, args);
        ct_value *rec = ct_value_dict(), *inputs = ct_value_list(), *after = ct_value_list(),
                 *grads = ct_value_list();
        if (!out) {
            ct_value_dict_set(rec, "error", ct_value_str(ct_last_error()));
            ct_clear_error();
        } else {
            if (json_is_true(json_object_get(c, "grad"))) {
                ct_tensor *loss = NULL;
                add_loss(out, &loss);
                if (!loss || ct_backward(loss) != 0) die(json_string_value(json_object_get(c, "op")));
            }
            ct_value_dict_set(rec, "out", out);
        }
        for (int k = 0; k < a->n_inputs; k++) {
            ct_value_list_append(inputs, ct_value_tensor(a->drawn[k]));
            ct_value_list_append(after, ct_value_tensor(ct_detach(a->inputs[k])));
            ct_tensor *g = a->wants_grad[k] ? ct_grad(a->inputs[k]) : NULL;
            ct_value_list_append(grads, g ? ct_value_tensor(g) : ct_value_none());
            if (!g) ct_clear_error();
            ct_tensor_free(a->inputs[k]);
        }
        ct_value_dict_set(rec, "inputs", inputs);
        ct_value_dict_set(rec, "after", after);
        ct_value_dict_set(rec, "grads", grads);
        char name[24];
        snprintf(name, sizeof name, "%03zu", ci);
        ct_value_dict_set(all, name, rec);
        free(a);
        ct_scope_end(scope);
    }
    return ct_test_save_results(argv[2], all, cases);
}
