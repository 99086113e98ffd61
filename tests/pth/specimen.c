/* tests/pth/specimen.c — see specimen.h. Values are deterministic (no RNG)
 * so that failures reproduce. */
#include "specimen.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

/* A [rows, cols] tensor of `dtype` with distinct values (negative ones for
 * signed types, fractions for floating ones). New. */
static ct_tensor *filled(ct_dtype dtype, int64_t rows, int64_t cols) {
    ct_tensor *a = ct_arange(0, (double)(rows * cols), 1, &(ct_topts){.dtype = CT_F64});
    ct_tensor *b = ct_sub_scalar(a, (double)(rows * cols) / 2);
    ct_tensor *c = ct_dtype_is_floating(dtype) ? ct_mul_scalar(b, 0.375) : ct_alias(b);
    ct_tensor *d = dtype == CT_U8 ? ct_add_scalar(c, 100) : dtype == CT_BOOL ? ct_gt_scalar(c, 0) : ct_alias(c);
    ct_tensor *e = ct_to_dtype(d, dtype);
    ct_tensor *out = ct_reshape(e, 2, (const int64_t[]){rows, cols});
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_tensor_free(c);
    ct_tensor_free(d);
    ct_tensor_free(e);
    return out;
}

/* Appends to a list or tuple; returns it (NULL-safe, for chaining). */
static ct_value *add(ct_value *seq, ct_value *item) {
    if (seq && ct_value_list_append(seq, item) != 0) {
        ct_value_free(seq);
        return NULL;
    }
    return seq;
}

static ct_value *tuple_of(int n) {
    ct_value *t = ct_value_tuple();
    for (int i = 0; i < n; i++) t = add(t, ct_value_int(i + 1));
    return t;
}

static ct_value *scalars(ct_value *d) {
    static const int64_t ints[] = {0,          1,          255,           256,           65535,
                                   65536,      -1,         -128,          INT32_MAX,     INT32_MIN,
                                   (int64_t)INT32_MAX + 1, (int64_t)INT32_MIN - 1, (int64_t)1 << 40,
                                   -((int64_t)1 << 40), INT64_MAX, INT64_MIN};
    static const double floats[] = {0.0, -0.0, 1.5, -2.25e-300, 1e300, 0.1};
    ct_value_dict_set(d, "none", ct_value_none());
    ct_value_dict_set(d, "true", ct_value_bool(true));
    ct_value_dict_set(d, "false", ct_value_bool(false));
    ct_value *l = ct_value_list();
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) l = add(l, ct_value_int(ints[i]));
    ct_value_dict_set(d, "ints", l);
    ct_value *f = ct_value_tuple();
    for (size_t i = 0; i < sizeof floats / sizeof *floats; i++) f = add(f, ct_value_float(floats[i]));
    f = add(f, ct_value_float(INFINITY));
    f = add(f, ct_value_float(-INFINITY));
    f = add(f, ct_value_float(NAN));
    ct_value_dict_set(d, "floats", f);
    ct_value *s = ct_value_list();
    s = add(s, ct_value_str(""));
    s = add(s, ct_value_str("ascii"));
    s = add(s, ct_value_str("h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82"));
    s = add(s, ct_value_str("line\nbreak \"quoted\" back\\slash"));
    ct_value_dict_set(d, "strings", s);
    ct_value *t = ct_value_list();
    for (int n = 0; n <= 5; n++) t = add(t, tuple_of(n));
    ct_value_dict_set(d, "tuples", t);
    /* {"a": {"b": {"c": [1, [2, [3, (4, {"d": None})]]]}}} */
    ct_value *inner = ct_value_dict();
    ct_value_dict_set(inner, "d", ct_value_none());
    ct_value *l3 = add(add(ct_value_list(), ct_value_int(3)), add(add(ct_value_tuple(), ct_value_int(4)), inner));
    ct_value *l2 = add(add(ct_value_list(), ct_value_int(2)), l3);
    ct_value *l1 = add(add(ct_value_list(), ct_value_int(1)), l2);
    ct_value *c = ct_value_dict(), *b = ct_value_dict(), *a = ct_value_dict();
    ct_value_dict_set(c, "c", l1);
    ct_value_dict_set(b, "b", c);
    ct_value_dict_set(a, "a", b);
    ct_value_dict_set(d, "nested", a);
    ct_value_dict_set_int(d, 7, ct_value_str("int key"));
    ct_value_dict_set_int(d, -3, ct_value_str("negative int key"));
    ct_value_dict_set_int(d, (int64_t)1 << 40, ct_value_str("large int key"));
    ct_value_dict_set(d, "empty_list", ct_value_list());
    ct_value_dict_set(d, "empty_dict", ct_value_dict());
    /* Past pickle's batches of 1000: APPENDS / SETITEMS split. */
    ct_value *big = ct_value_list();
    for (int i = 0; i < 2501; i++) big = add(big, ct_value_int(i * 7 - 3000));
    ct_value_dict_set(d, "big_list", big);
    ct_value *bd = ct_value_dict();
    for (int i = 0; i < 1001; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        ct_value_dict_set(bd, k, ct_value_int(i));
    }
    ct_value_dict_set(d, "big_dict", bd);
    ct_value *one = ct_value_dict(); /* a single item: SETITEM, APPEND */
    ct_value_dict_set(one, "only", add(ct_value_list(), ct_value_int(1)));
    ct_value_dict_set(d, "single", one);
    return d;
}

static ct_value *tensors(ct_value *d) {
    static const ct_dtype dtypes[] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_I64,
                                      CT_I32, CT_I16, CT_I8,  CT_U8,   CT_BOOL};
    ct_value *all = ct_value_dict();
    for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
        ct_value_dict_set(all, ct_dtype_name(dtypes[i]), ct_value_tensor(filled(dtypes[i], 2, 3)));
    ct_value_dict_set(d, "dtypes", all);

    /* Views of one [4, 6] storage, and one of an int64 storage. */
    ct_tensor *base = filled(CT_F32, 4, 6);
    ct_value *v = ct_value_dict();
    ct_value_dict_set(v, "base", ct_value_tensor(ct_alias(base)));
    ct_value_dict_set(v, "transposed", ct_value_tensor(ct_t(base)));
    ct_value_dict_set(v, "row", ct_value_tensor(ct_select(base, 0, 2)));
    ct_value_dict_set(v, "column", ct_value_tensor(ct_select(base, 1, 3)));
    ct_tensor *rows = ct_slice(base, 0, 1, 4, 2);
    ct_value_dict_set(v, "strided", ct_value_tensor(ct_slice(rows, 1, 1, 6, 2)));
    ct_tensor_free(rows);
    ct_value_dict_set(v, "narrow", ct_value_tensor(ct_narrow(base, 1, 2, 3)));
    ct_tensor *last_row = ct_select(base, 0, 3);
    ct_tensor *r1 = ct_unsqueeze(last_row, 0);
    ct_value_dict_set(v, "expanded", ct_value_tensor(ct_expand(r1, CT_SHAPE(5, 6))));
    ct_tensor_free(r1);
    ct_tensor_free(last_row);
    ct_tensor_free(base);
    ct_tensor *ibase = filled(CT_I64, 3, 5);
    ct_value_dict_set(v, "int_narrow", ct_value_tensor(ct_narrow(ibase, 0, 1, 2)));
    ct_tensor_free(ibase);
    ct_value_dict_set(d, "views", v);

    /* A tuple of two tensors on one storage, and the same tensor twice. */
    ct_tensor *x = filled(CT_F64, 3, 3);
    ct_value *shared = ct_value_tuple();
    shared = add(shared, ct_value_tensor(ct_alias(x)));
    shared = add(shared, ct_value_tensor(ct_select(x, 0, 1)));
    shared = add(shared, ct_value_tensor(ct_alias(x)));
    ct_tensor_free(x);
    ct_value_dict_set(d, "shared", shared);

    ct_value *odd = ct_value_dict();
    ct_value_dict_set(odd, "empty", ct_value_tensor(ct_zeros(CT_SHAPE(0, 5), NULL)));
    ct_value_dict_set(odd, "empty_int", ct_value_tensor(ct_zeros(CT_SHAPE(0), &(ct_topts){.dtype = CT_I64})));
    ct_value_dict_set(odd, "scalar", ct_value_tensor(ct_scalar_tensor(-2.5, NULL)));
    ct_value_dict_set(odd, "scalar_int", ct_value_tensor(ct_scalar_tensor(42, &(ct_topts){.dtype = CT_I64})));
    ct_value_dict_set(odd, "scalar_bool", ct_value_tensor(ct_scalar_tensor(1, &(ct_topts){.dtype = CT_BOOL})));
    ct_value_dict_set(odd, "requires_grad",
                      ct_value_tensor(ct_full(CT_SHAPE(2, 2), 0.5, &(ct_topts){.requires_grad = true})));
    ct_tensor *flat = filled(CT_I16, 1, 24);
    ct_value_dict_set(odd, "five_dims", ct_value_tensor(ct_reshape(flat, CT_SHAPE(1, 2, 3, 2, 2))));
    ct_tensor_free(flat);
    ct_value_dict_set(d, "odd", odd);
    return d;
}

ct_value *pth_specimen(void) {
    ct_value *d = ct_value_dict();
    if (!d) return NULL;
    return tensors(scalars(d));
}

ct_value *pth_small(void) {
    ct_value *d = ct_value_dict();
    ct_tensor *w = filled(CT_F32, 2, 3);
    ct_value_dict_set(d, "w", ct_value_tensor(ct_alias(w)));
    ct_value_dict_set(d, "wt", ct_value_tensor(ct_t(w)));
    ct_value_dict_set(d, "step", ct_value_int(3));
    ct_value_dict_set(d, "name", ct_value_str("small"));
    ct_tensor_free(w);
    return d;
}
