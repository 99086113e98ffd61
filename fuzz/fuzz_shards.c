/* libFuzzer target: the token shard reader (ct_dataset_shards, module
 * data: llm.c's .bin files, read with pread) over the release build's shim. The
 * input's first byte is the options, the rest is the file:
 *
 *   u8: block_size = 1 + (b & 15), sequential windows when b & 16,
 *       vocab_size = 0 (unchecked) or, when b & 32, 1 + (b >> 6) * 300
 *
 * Beyond "no crash, no leak, no undefined behaviour", it checks that
 *  - a refused file is CT_EFORMAT naming the file, and only a file whose
 *    header is not llm.c's (magic 20240520 / version 1 / uint16, or
 *    20240801 / version 7 / uint32), whose token count disagrees with its
 *    size, or that is too short for one window;
 *  - otherwise the dataset holds the windows of its mode, and every window
 *    (x, y), read one at a time and as one batch, is the file's tokens at
 *    its offset: it reads within the file. With a vocabulary size, a
 *    window is refused (CT_EFORMAT naming the file) exactly when one of its
 *    T + 1 tokens is not below it.
 * Built by fuzz/CMakeLists.txt when the shim is given, run by fuzz/run.sh. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctrial/ctrial.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int32_t le32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* Token k of the file (little-endian, `w` bytes). */
static int64_t token(const uint8_t *toks, int w, int64_t k) {
    const uint8_t *p = toks + k * w;
    return w == 2 ? (int64_t)(p[0] | p[1] << 8) : (int64_t)(uint32_t)le32(p);
}

/* x and y (int64, [lead..., T], lead 0 or 1) hold the window at o; `row`
 * picks it in a batch of windows. */
static void check_window(const ct_value *v, int lead, int64_t rows, int64_t row, const uint8_t *toks, int w,
                         int64_t o, int64_t T) {
    for (size_t leaf = 0; leaf < 2; leaf++) {
        const ct_tensor *t = ct_batch_at(v, leaf);
        if (!t || ct_dtype_of(t) != CT_I64 || ct_ndim(t) != 1 + lead || ct_size(t, lead) != T) abort();
        if (lead && ct_size(t, 0) != rows) abort();
        const int64_t *p = (const int64_t *)ct_data_ptr(t) + row * T;
        for (int64_t j = 0; j < T; j++)
            if (p[j] != token(toks, w, o + (int64_t)leaf + j)) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t opt = data[0];
    ct_shards_opts o = ct_shards_defaults();
    o.block_size = 1 + (opt & 15);
    o.windows = opt & 16 ? CT_WINDOWS_SEQUENTIAL : CT_WINDOWS_RANDOM;
    o.vocab_size = opt & 32 ? 1 + (opt >> 6) * 300 : 0;
    const uint8_t *file = data + 1;
    size_t file_size = size - 1;

    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_shards_%ld.bin", (long)getpid());
    FILE *fp = fopen(path, "wb");
    if (!fp || (file_size && fwrite(file, 1, file_size, fp) != file_size) || fclose(fp) != 0) abort();
    const char *paths[1] = {path};
    ct_dataset *ds = ct_dataset_shards(paths, 1, &o);
    unlink(path); /* the dataset holds the file open */

    /* What the file should be read as. */
    int32_t magic = file_size >= 12 ? le32(file) : 0, version = file_size >= 12 ? le32(file + 4) : 0,
            ntok = file_size >= 12 ? le32(file + 8) : 0;
    int w = magic == 20240520 && version == 1 ? 2 : magic == 20240801 && version == 7 ? 4 : 0;
    bool good = file_size >= 1024 && w && ntok >= 0 && (uint64_t)file_size == 1024 + (uint64_t)ntok * (uint64_t)w &&
                ntok >= o.block_size + 1;
    if (!ds) {
        if (good || ct_last_code() != CT_EFORMAT || !strstr(ct_last_error(), path)) abort();
        ct_clear_error();
        return 0;
    }
    if (!good) abort();
    const uint8_t *toks = file + 1024;
    int64_t T = o.block_size, stride = opt & 16 ? T : 1, n = ct_dataset_len(ds);
    if (n != (ntok - T - 1) / stride + 1) abort();
    /* Which windows the vocabulary refuses. */
    bool any_refused = false;
    bool *refused = calloc((size_t)n, sizeof *refused);
    int64_t *all = malloc((size_t)n * sizeof *all);
    if (!refused || !all) abort();
    for (int64_t i = 0; i < n; i++) {
        all[i] = i;
        for (int64_t j = 0; o.vocab_size > 0 && j <= T; j++) refused[i] |= token(toks, w, i * stride + j) >= o.vocab_size;
        any_refused |= refused[i];
    }
    /* Every window in one batch (refused as a whole when one is refused),
     * then some one at a time and as batches of one: the first 32 and the
     * last. */
    ct_value *batch = ct_dataset_get_batch(ds, all, n);
    if (any_refused ? batch != NULL : batch == NULL) abort();
    for (int64_t i = 0; batch && i < n; i++) check_window(batch, 1, n, i, toks, w, i * stride, T);
    ct_value_free(batch);
    if (any_refused && (ct_last_code() != CT_EFORMAT || !strstr(ct_last_error(), path))) abort();
    ct_clear_error();
    for (int64_t i = 0; i < n; i = i == 31 && n > 33 ? n - 1 : i + 1) {
        ct_value *one = ct_dataset_get(ds, i), *b1 = ct_dataset_get_batch(ds, &i, 1);
        if (refused[i]) {
            if (one || b1 || ct_last_code() != CT_EFORMAT || !strstr(ct_last_error(), path)) abort();
            ct_clear_error();
            continue;
        }
        if (!one || !b1) abort();
        check_window(one, 0, 1, 0, toks, w, i * stride, T);
        check_window(b1, 1, 1, 0, toks, w, i * stride, T);
        ct_value_free(one);
        ct_value_free(b1);
    }
    free(refused);
    free(all);
    ct_dataset_free(ds);
    return 0;
}
