/* tests/value/test_value.c — ct_value: construction, ownership (steal also
 * on failure), dict order / replace / int keys, deep copy, equality, and the
 * errors for the wrong kind. Run under the ASan build to catch leaks and
 * double frees. */
#include <stdlib.h>

#include "ct_test.h"

static ct_tensor *vec(const float *data, int64_t n) {
    return ct_from_data(data, 1, (const int64_t[]){n}, CT_F32);
}

static void test_scalars(void) {
    ct_value *v = ct_value_float(0.25);
    double d = 0;
    int64_t i = 0;
    bool b = false;
    CHECK(ct_value_kind_of(v) == CT_VALUE_FLOAT);
    CHECK_OK(ct_value_get_float(v, &d));
    CHECK(d == 0.25);
    CHECK(ct_value_get_int(v, &i) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "expected int, got float");
    ct_value_free(v);

    v = ct_value_int(-7);
    CHECK_OK(ct_value_get_int(v, &i));
    CHECK(i == -7);
    CHECK_OK(ct_value_get_float(v, &d)); /* int converts to float */
    CHECK(d == -7.0);
    CHECK(ct_value_get_bool(v, &b) == CT_EFORMAT); /* int does not convert to bool */
    CHECK_ERR(CT_EFORMAT, "expected bool, got int");
    ct_value_free(v);

    v = ct_value_bool(true);
    CHECK_OK(ct_value_get_bool(v, &b));
    CHECK(b);
    CHECK(ct_value_get_float(v, &d) == CT_EFORMAT); /* bool does not convert */
    CHECK_ERR(CT_EFORMAT, "expected float, got bool");
    ct_value_free(v);

    char buf[8] = "abc";
    v = ct_value_str(buf);
    buf[0] = 'X'; /* the value holds its own copy */
    CHECK(strcmp(ct_value_get_str(v), "abc") == 0);
    CHECK(ct_value_get_tensor(v) == NULL);
    CHECK_ERR(CT_EFORMAT, "expected tensor, got str");
    ct_value_free(v);

    v = ct_value_none();
    CHECK(ct_value_kind_of(v) == CT_VALUE_NONE);
    CHECK(ct_value_get_str(v) == NULL);
    CHECK_ERR(CT_EFORMAT, "expected str, got none");
    CHECK(ct_value_len(v) == 0);
    ct_value_free(v);

    CHECK(strcmp(ct_value_kind_name(CT_VALUE_DICT), "dict") == 0);
    CHECK(strcmp(ct_value_kind_name(CT_VALUE_TUPLE), "tuple") == 0);
    CHECK(ct_value_str(NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "NULL");
    ct_value_free(NULL); /* accepted */
}

static void test_tensor_ownership(void) {
    size_t live = ct_tensor_live_count();
    ct_scope *s = ct_scope_begin();
    ct_tensor *t = vec((const float[]){1, 2, 3}, 3);
    CHECK(ct_scope_size(s) == 1);
    ct_value *v = ct_value_tensor(t);
    CHECK(ct_scope_size(s) == 0); /* moved out of the scope: the value owns it */
    ct_scope_end(s);
    CHECK(ct_is_defined(ct_value_get_tensor(v)));
    CHECK(ct_numel(ct_value_get_tensor(v)) == 3);
    CHECK(ct_tensor_live_count() == live + 1);
    ct_value_free(v);
    CHECK(ct_tensor_live_count() == live);

    /* NULL tensor: no value, and the earlier failure is kept. */
    ct_clear_error();
    CHECK(ct_value_tensor(NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "NULL");
}

static void test_lists(void) {
    ct_value *l = ct_value_list();
    CHECK_OK(ct_value_list_append(l, ct_value_int(1)));
    CHECK_OK(ct_value_list_append(l, ct_value_str("two")));
    CHECK(ct_value_len(l) == 2);
    int64_t i = 0;
    CHECK_OK(ct_value_get_int(ct_value_list_get(l, 0), &i));
    CHECK(i == 1);
    CHECK(strcmp(ct_value_get_str(ct_value_list_get(l, 1)), "two") == 0);
    CHECK(ct_value_list_get(l, 2) == NULL);
    CHECK_ERR(CT_EINDEX, "out of range");

    /* Appending to a non-list fails and frees the stolen item (ASan checks). */
    ct_value *d = ct_value_dict();
    CHECK(ct_value_list_append(d, ct_value_str("leaked?")) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "expected list or tuple, got dict");
    CHECK(ct_value_list_get(d, 0) == NULL);
    CHECK_ERR(CT_EFORMAT, "got dict");
    CHECK(ct_value_list_append(l, l) == CT_EINVAL); /* would own itself */
    CHECK_ERR(CT_EINVAL, "itself");
    CHECK(ct_value_len(l) == 2);
    ct_clear_error();
    CHECK(ct_value_list_append(l, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "item is NULL");

    /* Tuples use the same calls. */
    ct_value *t = ct_value_tuple();
    for (int k = 0; k < 100; k++) CHECK_OK(ct_value_list_append(t, ct_value_int(k)));
    CHECK(ct_value_len(t) == 100);
    CHECK_OK(ct_value_get_int(ct_value_list_get(t, 99), &i));
    CHECK(i == 99);

    ct_value_free(d);
    ct_value_free(l);
    ct_value_free(t);
}

static void test_dicts(void) {
    ct_value *d = ct_value_dict();
    CHECK_OK(ct_value_dict_set(d, "lr", ct_value_float(0.1)));
    CHECK_OK(ct_value_dict_set(d, "momentum", ct_value_float(0.9)));
    CHECK_OK(ct_value_dict_set(d, "nesterov", ct_value_bool(false)));
    CHECK(ct_value_len(d) == 3);

    /* Replace keeps the key's position, like Python's dict. */
    CHECK_OK(ct_value_dict_set(d, "lr", ct_value_str("replaced")));
    CHECK(ct_value_len(d) == 3);
    const char *sk = NULL;
    int64_t ik = -1;
    ct_value *first = ct_value_dict_at(d, 0, &sk, &ik);
    CHECK(sk && strcmp(sk, "lr") == 0);
    CHECK(strcmp(ct_value_get_str(first), "replaced") == 0);
    ct_value_dict_at(d, 2, &sk, NULL);
    CHECK(sk && strcmp(sk, "nesterov") == 0);
    CHECK(ct_value_dict_at(d, 3, &sk, &ik) == NULL);
    CHECK_ERR(CT_EINDEX, "out of range");

    double m = 0;
    CHECK_OK(ct_value_get_float(ct_value_dict_get(d, "momentum"), &m));
    CHECK(m == 0.9);
    ct_clear_error();
    CHECK(ct_value_dict_get(d, "absent") == NULL);
    CHECK(ct_last_code() == CT_OK); /* a missing key is not an error */

    /* Integer keys live beside string keys; "0" and 0 differ. */
    ct_value *state = ct_value_dict();
    CHECK_OK(ct_value_dict_set_int(state, 3, ct_value_str("three")));
    CHECK_OK(ct_value_dict_set_int(state, 0, ct_value_str("zero")));
    CHECK_OK(ct_value_dict_set(state, "0", ct_value_str("string zero")));
    CHECK_OK(ct_value_dict_set_int(state, 3, ct_value_str("THREE")));
    CHECK(ct_value_len(state) == 3);
    CHECK(strcmp(ct_value_get_str(ct_value_dict_get_int(state, 0)), "zero") == 0);
    CHECK(strcmp(ct_value_get_str(ct_value_dict_get(state, "0")), "string zero") == 0);
    ct_value *v = ct_value_dict_at(state, 0, &sk, &ik);
    CHECK(sk == NULL && ik == 3); /* insertion order: 3 came first */
    CHECK(strcmp(ct_value_get_str(v), "THREE") == 0);
    ct_value_dict_at(state, 2, &sk, &ik);
    CHECK(sk && strcmp(sk, "0") == 0);
    CHECK(ct_value_dict_get_int(state, 7) == NULL);

    /* Wrong kind and NULL key: fail, and the stolen item is freed. */
    ct_value *l = ct_value_list();
    CHECK(ct_value_dict_set(l, "k", ct_value_int(1)) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "expected dict, got list");
    CHECK(ct_value_dict_set_int(l, 1, ct_value_int(1)) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "expected dict, got list");
    CHECK(ct_value_dict_set(d, NULL, ct_value_int(1)) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "key is NULL");
    CHECK(ct_value_dict_get(l, "k") == NULL);
    CHECK_ERR(CT_EFORMAT, "expected dict");
    CHECK(ct_value_dict_set(d, "self", d) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "itself");

    /* A tree: the outer dict frees everything below it. */
    CHECK_OK(ct_value_dict_set(d, "state", state));
    CHECK_OK(ct_value_dict_set(d, "list", l));
    ct_value_free(d);
}

static ct_value *sample_tree(void) {
    ct_value *sd = ct_value_dict();
    ct_value *state = ct_value_dict();
    ct_value *s0 = ct_value_dict();
    ct_value_dict_set(s0, "step", ct_value_tensor(ct_scalar_tensor(3, NULL)));
    ct_value_dict_set(s0, "exp_avg", ct_value_tensor(vec((const float[]){1, -2, 0.5f}, 3)));
    ct_value_dict_set_int(state, 0, s0);
    ct_value_dict_set(sd, "state", state);
    ct_value *g = ct_value_dict();
    ct_value_dict_set(g, "lr", ct_value_float(1e-3));
    ct_value *betas = ct_value_tuple();
    ct_value_list_append(betas, ct_value_float(0.9));
    ct_value_list_append(betas, ct_value_float(0.999));
    ct_value_dict_set(g, "betas", betas);
    ct_value_dict_set(g, "weight_decay", ct_value_int(0));
    ct_value_dict_set(g, "foreach", ct_value_none());
    ct_value_dict_set(g, "name", ct_value_str("g0"));
    ct_value *params = ct_value_list();
    ct_value_list_append(params, ct_value_int(0));
    ct_value_dict_set(g, "params", params);
    ct_value *groups = ct_value_list();
    ct_value_list_append(groups, g);
    ct_value_dict_set(sd, "param_groups", groups);
    return sd;
}

static ct_value *path(ct_value *sd, const char *a, int64_t b, const char *c) {
    return ct_value_dict_get(ct_value_dict_get_int(ct_value_dict_get(sd, a), b), c);
}

static void test_copy_and_equal(void) {
    ct_value *a = sample_tree(), *b = sample_tree();
    CHECK(ct_value_equal(a, b));
    CHECK(ct_value_equal(a, a));
    CHECK(!ct_value_equal(a, NULL));
    CHECK(ct_value_equal(NULL, NULL));

    /* Shared copy: the same storage; cloned copy: its own. */
    ct_value *shared = ct_value_copy(a, false), *cloned = ct_value_copy(a, true);
    CHECK(ct_value_equal(a, shared));
    CHECK(ct_value_equal(a, cloned));
    ct_tensor *orig = ct_value_get_tensor(path(a, "state", 0, "exp_avg"));
    CHECK_OK(ct_mul_scalar_(orig, 2.0));
    CHECK(ct_value_equal(a, shared));
    CHECK(!ct_value_equal(a, cloned));
    CHECK(!ct_value_equal(a, b));
    CHECK_OK(ct_mul_scalar_(orig, 0.5));
    CHECK(ct_value_equal(a, b));

    /* Each kind of difference is seen. */
    ct_value *g = ct_value_list_get(ct_value_dict_get(b, "param_groups"), 0);
    ct_value_dict_set(g, "lr", ct_value_float(2e-3)); /* value */
    CHECK(!ct_value_equal(a, b));
    ct_value_dict_set(g, "lr", ct_value_float(1e-3));
    CHECK(ct_value_equal(a, b));
    ct_value_dict_set(g, "weight_decay", ct_value_float(0.0)); /* int vs float */
    CHECK(!ct_value_equal(a, b));
    ct_value_dict_set(g, "weight_decay", ct_value_int(0));
    CHECK(ct_value_equal(a, b));
    ct_value *betas = ct_value_list(); /* tuple vs list */
    ct_value_list_append(betas, ct_value_float(0.9));
    ct_value_list_append(betas, ct_value_float(0.999));
    ct_value_dict_set(g, "betas", betas);
    CHECK(!ct_value_equal(a, b));
    ct_value_free(b);

    /* Key order matters. */
    ct_value *x = ct_value_dict(), *y = ct_value_dict();
    ct_value_dict_set(x, "a", ct_value_int(1));
    ct_value_dict_set(x, "b", ct_value_int(2));
    ct_value_dict_set(y, "b", ct_value_int(2));
    ct_value_dict_set(y, "a", ct_value_int(1));
    CHECK(!ct_value_equal(x, y));
    ct_value_free(x);
    ct_value_free(y);

    /* Tensors: dtype, shape and bits. */
    ct_value *t1 = ct_value_tensor(vec((const float[]){1, 2, 3, 4}, 4));
    ct_value *t2 = ct_value_tensor(ct_reshape(ct_value_get_tensor(t1), CT_SHAPE(2, 2)));
    ct_value *t3 = ct_value_tensor(ct_to_dtype(ct_value_get_tensor(t1), CT_F64));
    ct_value *t4 = ct_value_tensor(vec((const float[]){1, 2, 3, 4}, 4));
    ct_value *t5 = ct_value_tensor(vec((const float[]){1, 2, 3, -0.0f}, 4));
    CHECK(!ct_value_equal(t1, t2));
    CHECK(!ct_value_equal(t1, t3));
    CHECK(ct_value_equal(t1, t4));
    CHECK(!ct_value_equal(t1, t5));
    ct_value_free(t1);
    ct_value_free(t2);
    ct_value_free(t3);
    ct_value_free(t4);
    ct_value_free(t5);

    ct_value_free(a);
    ct_value_free(shared);
    ct_value_free(cloned);
}

int main(void) {
    size_t live = ct_tensor_live_count();
    test_scalars();
    test_tensor_ownership();
    test_lists();
    test_dicts();
    test_copy_and_equal();
    CHECK(ct_tensor_live_count() == live); /* every tensor leaf was freed */
    return ct_test_result("test_value");
}
