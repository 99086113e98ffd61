/* cifar_dump DIR 10|100 train|test SEED OUT — ct_dataset_cifar over DIR,
 * written to OUT for test_cifar_parity.py: int64 len, then
 *   1. every sample from ct_dataset_get, in order: its image (uint8
 *      [3, 32, 32], 3072 bytes) and its label (int64);
 *   2. every sample from ct_dataset_get_batch in batches of 7 indices taken
 *      from the end backwards (n-1, n-2, ...; the last batch short): each
 *      batch's images [k, 3, 32, 32], then its labels int64 [k];
 *   3. one pass of a ct_loader (batch_size 5, shuffle with SEED,
 *      num_workers 2): each batch's images, then its labels.
 * It checks dtypes and shapes itself, and that every get_batch batch is
 * ct_value_equal to ct_collate of the same get() samples (exit 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>
#include <ctrial/vision.h>

static int fail(const char *what) {
    fprintf(stderr, "cifar_dump: %s: %s\n", what, ct_last_error());
    return 1;
}

/* Writes t's data after checking it is `dtype` of shape [k, shape...] (lead
 * true) or [shape...]. */
static int put(FILE *f, const ct_tensor *t, ct_dtype dtype, bool lead, int64_t k, int nd, const int64_t *shape) {
    if (!t || ct_dtype_of(t) != dtype || ct_ndim(t) != nd + lead || (lead && ct_size(t, 0) != k)) return 1;
    for (int i = 0; i < nd; i++)
        if (ct_size(t, i + lead) != shape[i]) return 1;
    size_t n = (size_t)ct_numel(t) * ct_dtype_size(dtype);
    return fwrite(ct_data_ptr(t), 1, n, f) != n;
}

static const int64_t IMG[3] = {3, 32, 32};

/* A sample or a batch of k: the tuple (images, labels). */
static int put_pair(FILE *f, const ct_value *v, bool lead, int64_t k) {
    if (!v || ct_value_kind_of(v) != CT_VALUE_TUPLE || ct_value_len(v) != 2) return 1;
    return put(f, ct_batch_at(v, 0), CT_U8, lead, k, 3, IMG) || put(f, ct_batch_at(v, 1), CT_I64, lead, k, 0, NULL);
}

/* get_batch equals collating the same indices' get() samples. */
static bool batch_is_collate(ct_dataset *d, const ct_value *batch, const int64_t *idx, int64_t k) {
    ct_value *s[7] = {0};
    bool ok = true;
    for (int64_t j = 0; j < k; j++) ok &= (s[j] = ct_dataset_get(d, idx[j])) != NULL;
    ct_value *c = ok ? ct_collate(s, k) : NULL;
    ok = c && ct_value_equal(c, batch);
    ct_value_free(c);
    for (int64_t j = 0; j < k; j++) ct_value_free(s[j]);
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: cifar_dump DIR 10|100 train|test SEED OUT\n");
        return 2;
    }
    ct_dataset *d = ct_dataset_cifar(argv[1], (ct_cifar_kind)atoi(argv[2]), strcmp(argv[3], "train") == 0);
    if (!d) return fail("ct_dataset_cifar");
    FILE *f = fopen(argv[5], "wb");
    int64_t n = ct_dataset_len(d);
    if (!f || fwrite(&n, sizeof n, 1, f) != 1) return fail("write");
    for (int64_t i = 0; i < n; i++) {
        ct_value *s = ct_dataset_get(d, i);
        if (put_pair(f, s, false, 0)) return fail("a sample");
        ct_value_free(s);
    }
    int64_t idx[7];
    for (int64_t at = 0; at < n; at += 7) {
        int64_t k = n - at < 7 ? n - at : 7;
        for (int64_t j = 0; j < k; j++) idx[j] = n - 1 - (at + j);
        ct_value *b = ct_dataset_get_batch(d, idx, k);
        if (put_pair(f, b, true, k)) return fail("a get_batch batch");
        if (!batch_is_collate(d, b, idx, k)) return fail("get_batch differs from ct_collate of get()s");
        ct_value_free(b);
    }
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = 5;
    o.shuffle = true;
    o.seed = strtoull(argv[4], NULL, 10);
    o.num_workers = 2;
    ct_loader *l = ct_loader_new(ct_dataset_ref(d), &o);
    if (!l) return fail("ct_loader_new");
    ct_value *b;
    int rc;
    for (int64_t at = 0; (rc = ct_loader_next(l, &b)) == 1; at += 5) {
        if (put_pair(f, b, true, n - at < 5 ? n - at : 5)) return fail("a loader batch");
        ct_value_free(b);
    }
    if (rc != 0) return fail("ct_loader_next");
    ct_loader_free(l);
    ct_dataset_free(d);
    return fclose(f) != 0;
}
