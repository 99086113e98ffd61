/* shards_dump MODE BLOCK OUT ENTRY... — ct_dataset_shards over the entries
 * (files or glob patterns) with MODE random|sequential and BLOCK tokens,
 * written to OUT for test_shards_parity.py: int64 len, then every item's x
 * and y (int64 [BLOCK] each) as ct_dataset_get_batch gives them (batches of
 * 7 indices, the last one short), then the same from ct_dataset_get, one
 * item at a time. It checks the dtypes and shapes itself (exit 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

static int fail(const char *what) {
    fprintf(stderr, "shards_dump: %s: %s\n", what, ct_last_error());
    return 1;
}

/* t is int64 of shape [lead..., T]; writes its data. */
static int put(FILE *f, const ct_tensor *t, int64_t lead, int64_t T) {
    if (!t || ct_dtype_of(t) != CT_I64) return 1;
    if (lead ? ct_ndim(t) != 2 || ct_size(t, 0) != lead || ct_size(t, 1) != T : ct_ndim(t) != 1 || ct_size(t, 0) != T)
        return 1;
    size_t n = (size_t)ct_numel(t);
    return fwrite(ct_data_ptr(t), sizeof(int64_t), n, f) != n;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: shards_dump random|sequential BLOCK OUT ENTRY...\n");
        return 2;
    }
    ct_shards_opts o = ct_shards_defaults();
    o.windows = strcmp(argv[1], "sequential") == 0 ? CT_WINDOWS_SEQUENTIAL : CT_WINDOWS_RANDOM;
    o.block_size = atoll(argv[2]);
    ct_dataset *d = ct_dataset_shards((const char *const *)argv + 4, argc - 4, &o);
    if (!d) return fail("ct_dataset_shards");
    FILE *f = fopen(argv[3], "wb");
    int64_t n = ct_dataset_len(d), T = o.block_size;
    if (!f || fwrite(&n, sizeof n, 1, f) != 1) return fail("write");
    int64_t idx[7];
    for (int64_t at = 0; at < n; at += 7) {
        int64_t k = n - at < 7 ? n - at : 7;
        for (int64_t j = 0; j < k; j++) idx[j] = at + j;
        ct_value *b = ct_dataset_get_batch(d, idx, k);
        if (!b || ct_value_len(b) != 2) return fail("get_batch");
        for (size_t leaf = 0; leaf < 2; leaf++)
            if (put(f, ct_batch_at(b, leaf), k, T)) return fail("a batch's tensor");
        ct_value_free(b);
    }
    for (int64_t i = 0; i < n; i++) {
        ct_value *s = ct_dataset_get(d, i);
        if (!s || ct_value_len(s) != 2) return fail("get");
        for (size_t leaf = 0; leaf < 2; leaf++)
            if (put(f, ct_batch_at(s, leaf), 0, T)) return fail("a sample's tensor");
        ct_value_free(s);
    }
    ct_dataset_free(d);
    return fclose(f) != 0;
}
