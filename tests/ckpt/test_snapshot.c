/* tests/ckpt/test_snapshot.c — a background checkpoint's snapshot
 * (src/fit/snapshot.c): the state copied into host memory of its own.
 *
 * Checked, on a state shaped like a checkpoint's (a model's tensors, an
 * optimizer's state entries under integer keys, numbers, strings, a list):
 *   - the snapshot equals the state bit for bit, structure and keys too
 *     (ct_value_equal), for a state of 9.6 MB (copied by two threads, one
 *     tensor cut between them) and one of a few bytes (by the caller alone);
 *   - every tensor is a copy of its own: no data pointer is shared, and
 *     changing the state afterwards leaves the snapshot as it was;
 *   - a strided tensor (a transpose, cloned with its strides), an empty one
 *     and bfloat16 are copied right; no copy requires grad, also where the
 *     source does (a parameter);
 *   - a tensor the caller says the state alone holds is shared, not
 *     copied (the same storage), and stays valid once the state is gone. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "ct_test.h"
#include "fit/snapshot.h"

/* A checkpoint-like state: `big` float32 elements of weight (plus smaller
 * tensors), an Adam-like entry of float64 of the same count. */
static ct_value *make_state(int64_t big) {
    ct_manual_seed(7);
    ct_value *state = ct_value_dict(), *model = ct_value_dict(), *optim = ct_value_dict(), *entries = ct_value_dict();
    ct_value *entry = ct_value_dict(), *misc = ct_value_list();
    ct_tensor *w = ct_randn(CT_SHAPE(big), NULL);
    ct_set_requires_grad(w, true);
    ct_value_dict_set(model, "fc.weight", ct_value_tensor(w));
    ct_value_dict_set(model, "fc.bias", ct_value_tensor(ct_randn(CT_SHAPE(5), NULL)));
    ct_value_dict_set(model, "fc.t", ct_value_tensor(ct_transpose(ct_randn(CT_SHAPE(7, 3), NULL), 0, 1)));
    ct_value_dict_set(model, "empty", ct_value_tensor(ct_zeros(CT_SHAPE(0, 4), NULL)));
    ct_value_dict_set(model, "half", ct_value_tensor(ct_randn(CT_SHAPE(33), &(ct_topts){.dtype = CT_BF16})));
    ct_value_dict_set(entry, "step", ct_value_int(7));
    ct_value_dict_set(entry, "exp_avg", ct_value_tensor(ct_randn(CT_SHAPE(big), &(ct_topts){.dtype = CT_F64})));
    ct_value_dict_set_int(entries, 0, entry);
    ct_value_dict_set(optim, "state", entries);
    ct_value_dict_set(optim, "lr", ct_value_float(0.001));
    ct_value_list_append(misc, ct_value_str("epoch"));
    ct_value_list_append(misc, ct_value_tensor(ct_arange(0, 10, 1, NULL)));
    ct_value_dict_set(state, "model", model);
    ct_value_dict_set(state, "optimizer", optim);
    ct_value_dict_set(state, "misc", misc);
    return state;
}

/* Every tensor leaf of v, in order, into out[] (up to cap); returns how many. */
static size_t leaves(const ct_value *v, ct_tensor **out, size_t n, size_t cap) {
    ct_value_kind k = ct_value_kind_of(v);
    if (k == CT_VALUE_TENSOR) {
        if (n < cap) out[n] = ct_value_get_tensor(v);
        return n + 1;
    }
    if (k == CT_VALUE_DICT)
        for (size_t i = 0; i < ct_value_len(v); i++) n = leaves(ct_value_dict_at(v, i, NULL, NULL), out, n, cap);
    if (k == CT_VALUE_LIST || k == CT_VALUE_TUPLE)
        for (size_t i = 0; i < ct_value_len(v); i++) n = leaves(ct_value_list_get(v, i), out, n, cap);
    return n;
}

static void check_snapshot(int64_t big, const char *what) {
    ct_value *state = make_state(big);
    CHECK(state != NULL);
    ct_value *snap = cti_snapshot(state, NULL);
    CHECK(snap != NULL);
    if (!snap) return;
    if (!ct_value_equal(state, snap)) fprintf(stderr, "%s: the snapshot differs from the state\n", what);
    CHECK(ct_value_equal(state, snap));
    ct_tensor *a[16], *b[16];
    size_t na = leaves(state, a, 0, 16), nb = leaves(snap, b, 0, 16);
    CHECK(na == 7 && nb == na);
    for (size_t i = 0; i < na && i < nb; i++) {
        ct_storage_info sa, sb;
        CHECK_OK(ct_storage_info_of(a[i], &sa));
        CHECK_OK(ct_storage_info_of(b[i], &sb));
        CHECK(ct_numel(a[i]) == 0 || sa.id != sb.id);
        CHECK(ct_is_contiguous(b[i]) == ct_is_contiguous(a[i])); /* a strided one is cloned as it is laid out */
        CHECK(!ct_requires_grad(b[i]));
    }
    /* The state changes (the next step): the snapshot does not. */
    ct_value *again = make_state(big);
    ct_guard *g = ct_no_grad();
    for (size_t i = 0; i < na; i++)
        if (ct_numel(a[i]) > 0) CHECK_OK(ct_fill_(a[i], 42.0));
    ct_guard_end(g);
    CHECK(!ct_value_equal(state, snap));
    CHECK(ct_value_equal(again, snap));
    ct_value_free(again);
    ct_value_free(snap);
    ct_value_free(state);
}

/* The caller's say: float64 tensors are the state's alone (as rank 0's
 * received optimizer state is, in its spill file). */
static bool is_f64(const ct_tensor *t) { return ct_dtype_of(t) == CT_F64; }

/* Shared where the caller says so: the same bytes, not a copy, and the
 * snapshot stays whole after the state is freed; the others copied. */
static void check_shared(void) {
    ct_value *state = make_state(1000), *want = make_state(1000);
    ct_value *snap = cti_snapshot(state, is_f64);
    CHECK(snap != NULL && ct_value_equal(state, snap));
    ct_tensor *a[16], *b[16];
    size_t na = leaves(state, a, 0, 16), nb = leaves(snap, b, 0, 16);
    CHECK(na == 7 && nb == na);
    int shared = 0;
    for (size_t i = 0; i < na && i < nb; i++) {
        ct_storage_info sa, sb;
        CHECK_OK(ct_storage_info_of(a[i], &sa));
        CHECK_OK(ct_storage_info_of(b[i], &sb));
        bool same = sa.id == sb.id;
        CHECK(ct_numel(a[i]) == 0 || same == is_f64(a[i]));
        shared += same && ct_numel(a[i]) > 0;
    }
    CHECK(shared == 1); /* exp_avg */
    ct_value_free(state);
    CHECK(ct_value_equal(want, snap));
    ct_value_free(snap);
    ct_value_free(want);
}

int main(void) {
    ct_set_num_threads(1);
    check_shared();
    /* 4 + 8 bytes x 800,000: 9.6 MB, the bytes' halves cut inside exp_avg */
    check_snapshot(800000, "9.6 MB, two threads");
    check_snapshot(3, "a few bytes, one thread");
    return ct_test_result("ckpt_snapshot");
}
