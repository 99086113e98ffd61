/* ct_dataset_shards: every bad input is a named error (the file or the
 * pattern in the message), never a crash; the vocabulary check is lazy and
 * reaches the loader as an error naming the file and the token's offset;
 * ct_shard_write's refusals; and sharding across ranks is the loader's:
 * rank r of n gets the items k with k % n == r, in both window modes; a
 * shard rewritten in place while in use (llm.c's writer opens it "wb") is
 * CT_EIO naming it, never SIGBUS, and one renamed over it is not seen; a
 * hundred shards open under a soft limit of 40 open files. The bad files
 * are written here byte by byte. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ct_test.h"

static char dir[256];

static const char *path_of(const char *name) {
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

/* A shard file: header (magic, version, count as given) then `bytes` of
 * tokens taken from `toks` (whatever their width). */
static const char *shard_file(const char *name, int32_t magic, int32_t version, int32_t count, const void *toks,
                              size_t bytes) {
    const char *p = path_of(name);
    int32_t h[256] = {magic, version, count};
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(h, 1, sizeof h, f) != sizeof h || (bytes && fwrite(toks, 1, bytes, f) != bytes)) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(2);
    }
    fclose(f);
    return p;
}

static ct_dataset *open1(const char *path, int64_t T) {
    ct_shards_opts o = ct_shards_defaults();
    o.block_size = T;
    return ct_dataset_shards(&path, 1, &o);
}

/* The call returned NULL with `code` and a message naming `path` and
 * holding `needle`. */
#define CHECK_REFUSED(call, code, path, needle)                                 \
    do {                                                                        \
        ct_dataset *d_ = (call);                                                \
        CHECK(d_ == NULL);                                                      \
        ct_dataset_free(d_);                                                    \
        CHECK(strstr(ct_last_error(), (path)) != NULL);                         \
        CHECK_ERR(code, needle);                                                \
    } while (0)

static void test_headers(void) {
    uint16_t t16[32];
    for (int i = 0; i < 32; i++) t16[i] = (uint16_t)(i * 1000);
    uint32_t t32[32];
    for (int i = 0; i < 32; i++) t32[i] = 70000u + (uint32_t)i;
    const char *p;

    p = shard_file("ok.bin", 20240520, 1, 32, t16, sizeof t16);
    ct_dataset *d = open1(p, 8);
    CHECK(d && ct_dataset_len(d) == 24);
    ct_dataset_free(d);

    p = shard_file("magic.bin", 20240521, 1, 32, t16, sizeof t16);
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "bad magic 20240521");
    p = shard_file("eval.bin", 20240522, 1, 32, t16, sizeof t16);
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "eval file");
    p = shard_file("version.bin", 20240520, 2, 32, t16, sizeof t16);
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "unsupported version 2 for magic 20240520 (expected 1)");
    p = shard_file("version32.bin", 20240801, 1, 32, t32, sizeof t32);
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "unsupported version 1 for magic 20240801 (expected 7)");
    /* The header lies about the size: more tokens than the file holds, fewer,
     * an odd byte over, negative. */
    p = shard_file("more.bin", 20240520, 1, 33, t16, sizeof t16);
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "the header says 33 tokens (66 bytes after the header) but the file "
                                              "holds 64 bytes after it (truncated)");
    p = shard_file("fewer.bin", 20240520, 1, 31, t16, sizeof t16);
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "holds 64 bytes after it (trailing bytes)");
    p = shard_file("odd.bin", 20240520, 1, 31, t16, 63);
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "trailing bytes");
    p = shard_file("huge.bin", 20240520, 1, INT32_MAX, t16, sizeof t16);
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "truncated");
    p = shard_file("u32_as_u16.bin", 20240801, 7, 32, t16, sizeof t16); /* 2 bytes a token: half */
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "truncated");
    p = shard_file("negative.bin", 20240520, 1, -5, t16, sizeof t16);
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "negative");
    /* Shorter than the header: empty, and cut inside it. */
    p = shard_file("cut.bin", 20240520, 1, 0, NULL, 0);
    CHECK_OK(truncate(p, 100));
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "holds 100 bytes, fewer than the 1024-byte header");
    CHECK_OK(truncate(p, 0));
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "holds 0 bytes");
    /* Too short for one window: T tokens need T + 1. */
    p = shard_file("short.bin", 20240520, 1, 8, t16, 16);
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, p, "8 tokens, too few for one window of block_size 8");
    d = open1(p, 7);
    CHECK(d && ct_dataset_len(d) == 1);
    ct_dataset_free(d);
    p = shard_file("zero.bin", 20240520, 1, 0, NULL, 0);
    CHECK_REFUSED(open1(p, 1), CT_EFORMAT, p, "0 tokens, too few");

    /* Not files: missing, a directory, an empty pattern. */
    p = path_of("missing.bin");
    CHECK_REFUSED(open1(p, 8), CT_EIO, p, "cannot open");
    p = path_of("a_dir");
    CHECK_OK(mkdir(p, 0777));
    CHECK_REFUSED(open1(p, 8), CT_EIO, p, "not a regular file");
    p = path_of("nothing_*.bin");
    CHECK_REFUSED(open1(p, 8), CT_EIO, p, "no file matches the pattern");
    /* A pattern matching a bad file among good ones names the bad one. */
    shard_file("mix_0.bin", 20240520, 1, 32, t16, sizeof t16);
    const char *bad = shard_file("mix_1.bin", 20240520, 1, 40, t16, sizeof t16);
    p = path_of("mix_*.bin");
    CHECK_REFUSED(open1(p, 8), CT_EFORMAT, bad, "truncated");
}

static void test_options(void) {
    uint16_t t16[32] = {0};
    const char *p = shard_file("opts.bin", 20240520, 1, 32, t16, sizeof t16);
    ct_shards_opts o = ct_shards_defaults();
    CHECK(ct_dataset_shards(&p, 1, &o) == NULL); /* block_size is required */
    CHECK_ERR(CT_EINVAL, "block_size");
    o.block_size = 4;
    o.vocab_size = -1;
    CHECK(ct_dataset_shards(&p, 1, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "vocab_size");
    o.vocab_size = 0;
    o.windows = (ct_window_mode)7;
    CHECK(ct_dataset_shards(&p, 1, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "windows");
    o.windows = CT_WINDOWS_SEQUENTIAL;
    CHECK(ct_dataset_shards(&p, 0, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "at least one path");
    CHECK(ct_dataset_shards(NULL, 1, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "at least one path");
    CHECK(ct_dataset_shards(&p, 1, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "NULL");
    const char *two[2] = {p, NULL};
    CHECK(ct_dataset_shards(two, 2, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "path 1 is NULL");
    ct_dataset *d = ct_dataset_shards(&p, 1, &o); /* (32 - 1) / 4 */
    CHECK(d && ct_dataset_len(d) == 7);
    ct_dataset_free(d);
}

static void test_write(void) {
    uint32_t toks[5] = {1, 2, 65535, 4, 5};
    const char *p = path_of("w16.bin");
    CHECK_OK(ct_shard_write(p, toks, 5, 2));
    struct stat st;
    CHECK(stat(p, &st) == 0 && st.st_size == 1024 + 10);
    ct_dataset *d = open1(p, 4);
    ct_value *s = d ? ct_dataset_get(d, 0) : NULL;
    int64_t *x = s ? ct_data_ptr(ct_batch_at(s, 0)) : NULL, *y = s ? ct_data_ptr(ct_batch_at(s, 1)) : NULL;
    CHECK(x && y && x[0] == 1 && x[2] == 65535 && x[3] == 4 && y[0] == 2 && y[3] == 5);
    ct_value_free(s);
    ct_dataset_free(d);
    toks[1] = 65536;
    CHECK(ct_shard_write(p, toks, 5, 2) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "token 1 is 65536, too large for uint16");
    CHECK(access(p, F_OK) == 0); /* refused before writing: the old file stays */
    CHECK_OK(ct_shard_write(p, toks, 5, 4));
    CHECK(stat(p, &st) == 0 && st.st_size == 1024 + 20);
    d = open1(p, 4);
    s = d ? ct_dataset_get(d, 0) : NULL;
    x = s ? ct_data_ptr(ct_batch_at(s, 0)) : NULL;
    CHECK(x && x[1] == 65536);
    ct_value_free(s);
    ct_dataset_free(d);
    CHECK(ct_shard_write(p, toks, 5, 3) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "token_bytes is 3");
    CHECK(ct_shard_write(p, toks, -1, 2) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "-1 tokens");
    CHECK(ct_shard_write(path_of("no_dir/x.bin"), toks, 5, 4) == CT_EIO);
    CHECK_ERR(CT_EIO, "no_dir/x.bin");
    /* A write that fails at the end (here the rename: the path is a
     * directory) leaves what was at the path, and no temporary file. */
    const char *busy = path_of("busy.bin");
    CHECK(mkdir(busy, 0700) == 0);
    CHECK_OK(ct_shard_write(path_of("busy.bin/kept.bin"), toks, 5, 4));
    CHECK(ct_shard_write(busy, toks, 5, 4) == CT_EIO);
    CHECK_ERR(CT_EIO, "busy.bin");
    CHECK(stat(path_of("busy.bin/kept.bin"), &st) == 0 && st.st_size == 1024 + 20);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", busy, (long)getpid());
    CHECK(access(tmp, F_OK) != 0);
}

/* Token 1000 at offset 21 of a vocabulary of 1000: windows that hold it
 * fail naming the file and the offset, the others read; a loader reports
 * it as its batch's error. */
static void test_vocab(void) {
    uint16_t t16[40];
    for (int i = 0; i < 40; i++) t16[i] = (uint16_t)(i * 20);
    t16[21] = 1000;
    const char *p = shard_file("vocab.bin", 20240520, 1, 40, t16, sizeof t16);
    ct_shards_opts o = ct_shards_defaults();
    o.block_size = 8;
    o.vocab_size = 1000;
    ct_dataset *d = ct_dataset_shards(&p, 1, &o);
    CHECK(d && ct_dataset_len(d) == 32);
    ct_value *s = d ? ct_dataset_get(d, 12) : NULL; /* tokens 12..20 */
    CHECK(s != NULL);
    ct_value_free(s);
    s = d ? ct_dataset_get(d, 13) : NULL; /* tokens 13..21: y holds it */
    CHECK(s == NULL);
    CHECK(strstr(ct_last_error(), p) != NULL);
    CHECK_ERR(CT_EFORMAT, "token 1000 at token offset 21 (byte 1066) is not below vocab_size 1000");
    int64_t idx[2] = {0, 20}; /* tokens 20..28 */
    s = d ? ct_dataset_get_batch(d, idx, 2) : NULL;
    CHECK(s == NULL);
    CHECK_ERR(CT_EFORMAT, "token offset 21");
    ct_dataset_free(d);
    o.vocab_size = 1001;
    d = ct_dataset_shards(&p, 1, &o);
    s = d ? ct_dataset_get(d, 13) : NULL;
    CHECK(s != NULL);
    ct_value_free(s);
    ct_dataset_free(d);

    o.vocab_size = 1000;
    o.windows = CT_WINDOWS_SEQUENTIAL; /* windows at 0, 8, 16 (holds 21), 24 */
    ct_loader_opts lo = ct_loader_defaults();
    lo.batch_size = 1;
    ct_loader *l = ct_loader_new(ct_dataset_shards(&p, 1, &o), &lo);
    ct_value *b = NULL;
    CHECK(l && ct_loader_next(l, &b) == 1);
    ct_value_free(b);
    CHECK(l && ct_loader_next(l, &b) == 1);
    ct_value_free(b);
    CHECK(l && ct_loader_next(l, &b) < 0);
    CHECK(strstr(ct_last_error(), p) != NULL);
    CHECK_ERR(CT_EFORMAT, "token offset 21");
    ct_loader_free(l);
}

/* Rank r of n over the loader gets items k % n == r: the first token of
 * each x (token values = their offsets) tells which item it is. */
static void test_ranks(void) {
    uint32_t toks[100];
    for (int i = 0; i < 100; i++) toks[i] = (uint32_t)i;
    CHECK_OK(ct_shard_write(path_of("rank_0.bin"), toks, 60, 2));
    CHECK_OK(ct_shard_write(path_of("rank_1.bin"), toks + 60, 40, 2));
    const char *pat = path_of("rank_*.bin");
    for (int mode = 0; mode < 2; mode++) {
        ct_shards_opts o = ct_shards_defaults();
        o.block_size = 5;
        o.windows = mode ? CT_WINDOWS_SEQUENTIAL : CT_WINDOWS_RANDOM;
        /* the items' first tokens: shard 0 then shard 1, none crossing 60 */
        int64_t first[100], n = 0, stride = mode ? 5 : 1;
        for (int64_t s = 0; s + 5 + 1 <= 60; s += stride) first[n++] = s;
        for (int64_t s = 60; s + 5 + 1 <= 100; s += stride) first[n++] = s;
        for (int world = 1; world <= 3; world++) {
            int64_t seen = 0;
            for (int rank = 0; rank < world; rank++) {
                ct_loader_opts lo = ct_loader_defaults();
                lo.batch_size = 3;
                lo.rank = rank;
                lo.world_size = world;
                ct_loader *l = ct_loader_new(ct_dataset_shards(&pat, 1, &o), &lo);
                CHECK(l && ct_loader_num_samples(l) == n);
                ct_value *b = NULL;
                int64_t k = rank;
                while (l && ct_loader_next(l, &b) == 1) {
                    const ct_tensor *x = ct_batch_at(b, 0);
                    const int64_t *px = ct_data_ptr(x);
                    for (int64_t j = 0; j < ct_size(x, 0); j++, k += world, seen++)
                        CHECK(k < n && px[j * 5] == first[k] && px[j * 5 + 4] == first[k] + 4);
                    ct_value_free(b);
                }
                ct_loader_free(l);
            }
            CHECK(seen == n);
        }
    }
}

/* The first token of window i of a loaded sample. */
static int64_t first_token(ct_dataset *d, int64_t i) {
    ct_value *s = ct_dataset_get(d, i);
    int64_t v = s ? ((const int64_t *)ct_data_ptr(ct_batch_at(s, 0)))[0] : -1;
    ct_value_free(s);
    return v;
}

static void test_rewritten(void) {
    uint32_t toks[4000];
    for (int i = 0; i < 4000; i++) toks[i] = (uint32_t)(i % 60000);
    const char *p = path_of("live.bin");
    CHECK_OK(ct_shard_write(p, toks, 4000, 2));
    ct_dataset *d = open1(p, 16);
    CHECK(d && first_token(d, 3000) == 3000);

    /* replaced by a rename (ct_shard_write's way, and a careful writer's):
     * the dataset keeps reading the file it checked */
    for (int i = 0; i < 4000; i++) toks[i] = 7;
    CHECK_OK(ct_shard_write(p, toks, 4000, 2));
    CHECK(d && first_token(d, 3000) == 3000);
    ct_dataset_free(d);

    /* rewritten in place, as llm.c's write_datafile does ("wb"): the loader
     * fails with CT_EIO naming the shard */
    d = open1(p, 16);
    ct_loader_opts lo = ct_loader_defaults();
    lo.batch_size = 4;
    lo.num_workers = 2;
    ct_loader *l = ct_loader_new(ct_dataset_ref(d), &lo);
    ct_value *b = NULL;
    CHECK(l && ct_loader_next(l, &b) == 1);
    ct_value_free(b);
    FILE *f = fopen(p, "wb"); /* truncated; the new header comes first */
    int32_t h[256] = {20240520, 1, 4000};
    CHECK(f && fwrite(h, 1, sizeof h, f) == sizeof h && fflush(f) == 0);
    int rc = 1;
    for (int k = 0; l && k < 1000 && (rc = ct_loader_next(l, &b)) == 1; k++) ct_value_free(b);
    CHECK(rc < 0);
    CHECK(strstr(ct_last_error(), p) != NULL);
    CHECK_ERR(CT_EIO, "the file changed while in use: it held 9024 bytes when opened and holds "); /* 0 or 1024 */
    ct_loader_free(l);
    CHECK(first_token(d, 0) == -1);
    CHECK_ERR(CT_EIO, "too few for bytes 1024..1058");
    if (f) fclose(f);
    ct_dataset_free(d);
}

/* Each shard is held open: a hundred of them under a soft limit of 40 open
 * files (the soft limit is raised to the hard one); under a hard limit of
 * 40, an error that says why. Last: the hard limit cannot be raised back. */
static void test_many_shards(void) {
    uint32_t toks[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int i = 0; i < 100; i++) {
        char name[64];
        snprintf(name, sizeof name, "many_%03d.bin", i);
        CHECK_OK(ct_shard_write(path_of(name), toks, 8, 2));
    }
    const char *pat = path_of("many_*.bin");
    struct rlimit rl, was;
    CHECK(getrlimit(RLIMIT_NOFILE, &was) == 0);
    rl = was;
    rl.rlim_cur = 40;
    if (was.rlim_max < 200 || setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr, "skipped: the hard limit on open files (%llu) is too low to test\n",
                (unsigned long long)was.rlim_max);
        return;
    }
    ct_dataset *d = open1(pat, 4);
    CHECK(d && ct_dataset_len(d) == 400);
    CHECK(d && first_token(d, 399) == 4);
    ct_dataset_free(d);
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == was.rlim_max);
    rl.rlim_cur = rl.rlim_max = 40;
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    CHECK_REFUSED(open1(pat, 4), CT_EIO, "many_0", "RLIMIT_NOFILE 40, hard limit 40");
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ct_shards_XXXXXX");
    if (!mkdtemp(dir)) return 2;
    test_headers();
    test_options();
    test_write();
    test_vocab();
    test_ranks();
    test_rewritten();
    test_many_shards();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ct_test_result("shards");
}
