/* src/data/shards.c — llm.c's tokenised .bin shards as a dataset of token
 * windows (data.h: ct_dataset_shards, ct_shard_write).
 *
 * A shard is a 256 x int32 little-endian header (magic, version, number of
 * tokens, then zeros) and the tokens: magic 20240520 / version 1 with
 * uint16 tokens (GPT-2's), or magic 20240801 / version 7 with uint32 tokens
 * (Llama 3's), as karpathy/llm.c's dev/data/data_common.py writes them.
 * Each shard is opened once and held open, after its header and size were
 * checked against each other; the loader's workers read windows with
 * pread(2) (the page cache does the rest) straight into the batch. Not
 * mmap: a shard truncated under a mapping (llm.c's writer reopens it "wb")
 * kills the process with SIGBUS, where a short read is an error naming the
 * shard. Windows
 * live inside one shard (llm.c's loader never crosses a shard's end): the
 * items are shard 0's windows, then shard 1's, and so on.
 */
#define _POSIX_C_SOURCE 200809L

#include "ctrial/data.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "data/dataset.h"

#define FN "ct_dataset_shards"
#define HEADER_INTS 256
#define HEADER_BYTES (HEADER_INTS * 4)
#define MAGIC_U16 20240520 /* llm.c's GPT-2 shards: version 1, uint16 tokens */
#define MAGIC_U32 20240801 /* llm.c's Llama 3 shards: version 7, uint32 tokens */
#define MAGIC_EVAL 20240522 /* llm.c's eval files (HellaSwag, MMLU): not token shards */

typedef struct {
    char *path;
    int fd;          /* held open: the file as it was checked, whatever is renamed over its path */
    uint64_t size;   /* its size then, in bytes */
    int token_bytes; /* 2 or 4 */
    int64_t num_tokens;
    int64_t first; /* the item index of this shard's first window */
    int64_t count; /* its windows */
} shard;

typedef struct {
    shard *s;
    int n, cap;
    int64_t block, stride, vocab, len;
} shards_ds;

static bool host_is_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static int32_t le32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

static void shards_free(void *self) {
    shards_ds *ds = self;
    if (!ds) return;
    for (int i = 0; i < ds->n; i++) {
        if (ds->s[i].fd >= 0) close(ds->s[i].fd);
        free(ds->s[i].path);
    }
    free(ds->s);
    free(ds);
}

/* Checks a shard's header against its size, maps it and counts its
 * windows. The shard's path is already set. */
static int open_shard(shards_ds *ds, shard *sh) {
    const char *path = sh->path;
    int fd = cti_open_regular(path, FN);
    if (fd < 0) return fd;
    struct stat st;
    unsigned char h[HEADER_BYTES];
    int rc = 0;
    if (fstat(fd, &st) != 0) rc = ct_set_error(CT_EIO, FN ": %s: cannot stat (%s)", path, strerror(errno));
    else if ((uint64_t)st.st_size > SIZE_MAX) rc = ct_set_error(CT_ENOMEM, FN ": %s: too large to map", path);
    uint64_t size = rc ? 0 : (uint64_t)st.st_size;
    if (!rc && size < HEADER_BYTES)
        rc = ct_set_error(CT_EFORMAT, FN ": %s: holds %" PRIu64 " bytes, fewer than the %d-byte header of an llm.c "
                                     "token shard", path, size, HEADER_BYTES);
    if (!rc) {
        ssize_t got = pread(fd, h, sizeof h, 0);
        if (got != (ssize_t)sizeof h)
            rc = ct_set_error(CT_EIO, FN ": %s: cannot read the header (%s)", path,
                              got < 0 ? strerror(errno) : "short read");
    }
    int32_t magic = rc ? 0 : le32(h), version = rc ? 0 : le32(h + 4), ntok = rc ? 0 : le32(h + 8);
    if (!rc && magic == MAGIC_EVAL)
        rc = ct_set_error(CT_EFORMAT, FN ": %s: magic %d is llm.c's eval file (HellaSwag, MMLU), not a token shard",
                          path, (int)magic);
    else if (!rc && magic != MAGIC_U16 && magic != MAGIC_U32)
        rc = ct_set_error(CT_EFORMAT, FN ": %s: bad magic %d (0x%08" PRIx32 "): llm.c's token shards start with %d "
                                     "(uint16 tokens) or %d (uint32 tokens)",
                          path, (int)magic, (uint32_t)magic, MAGIC_U16, MAGIC_U32);
    else if (!rc && version != (magic == MAGIC_U16 ? 1 : 7))
        rc = ct_set_error(CT_EFORMAT, FN ": %s: unsupported version %d for magic %d (expected %d)", path,
                          (int)version, (int)magic, magic == MAGIC_U16 ? 1 : 7);
    else if (!rc && ntok < 0)
        rc = ct_set_error(CT_EFORMAT, FN ": %s: the header's token count is negative (%d)", path, (int)ntok);
    int width = magic == MAGIC_U32 ? 4 : 2;
    uint64_t want = HEADER_BYTES + (uint64_t)ntok * (uint64_t)width;
    if (!rc && size != want)
        rc = ct_set_error(CT_EFORMAT, FN ": %s: the header says %d tokens (%" PRIu64 " bytes after the header) but "
                                     "the file holds %" PRIu64 " bytes after it (%s)",
                          path, (int)ntok, want - HEADER_BYTES, size - HEADER_BYTES,
                          size < want ? "truncated" : "trailing bytes");
    else if (!rc && ntok < ds->block + 1)
        rc = ct_set_error(CT_EFORMAT, FN ": %s: %d tokens, too few for one window of block_size %" PRId64
                                     " and its target (%" PRId64 " tokens)",
                          path, (int)ntok, ds->block, ds->block + 1);
    else if (!rc && width > 1 && !host_is_little_endian())
        rc = ct_set_error(CT_ENOTSUP, FN ": %s: tokens are little-endian and this host is not", path);
    if (rc) {
        close(fd);
        return rc;
    }
    sh->fd = fd;
    sh->size = size;
    sh->token_bytes = width;
    sh->num_tokens = ntok;
    sh->count = (ntok - ds->block - 1) / ds->stride + 1;
    return 0;
}

/* Each shard holds a file descriptor, and the usual soft limit of 1024
 * open files is less than a large corpus's shards (FineWeb's 100B tokens
 * are 1001 of them): when an open fails, the soft limit is raised to the
 * hard one, as Go's runtime raises it at start, and the open tried again.
 * True when it was raised. */
static bool raise_open_files_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == rl.rlim_max) return false;
    rl.rlim_cur = rl.rlim_max;
    return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

/* Appends a shard for `path` (copied). */
static int add_path(shards_ds *ds, const char *path) {
    if (ds->n == ds->cap) {
        int cap = ds->cap ? 2 * ds->cap : 8;
        shard *s = cap > 0 ? realloc(ds->s, (size_t)cap * sizeof *s) : NULL;
        if (!s) return ct_set_error(CT_ENOMEM, FN ": out of host memory for %d shards", ds->n + 1);
        ds->s = s;
        ds->cap = cap;
    }
    shard *sh = &ds->s[ds->n];
    *sh = (shard){.path = strdup(path), .fd = -1};
    if (!sh->path) return ct_set_error(CT_ENOMEM, FN ": out of host memory");
    ds->n++;
    int rc = open_shard(ds, sh);
    if (rc && strstr(ct_last_error(), strerror(EMFILE)) && raise_open_files_limit()) rc = open_shard(ds, sh);
    struct rlimit rl;
    if (rc && strstr(ct_last_error(), strerror(EMFILE)) && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        char msg[1024]; /* say why so many are open */
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        ct_set_error(rc, "%s (each shard is held open: %d so far; RLIMIT_NOFILE %llu, hard limit %llu)", msg, ds->n,
                     (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
    }
    return rc;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A path, or a pattern (any of * ? [) expanded by glob(3) and sorted by
 * strcmp, llm.c's order whatever the locale. A pattern matching nothing is
 * an error; so is one matching a directory (refused by the file check). */
static int add_entry(shards_ds *ds, const char *entry) {
    if (!strpbrk(entry, "*?[")) return add_path(ds, entry);
    glob_t g;
    int grc = glob(entry, GLOB_NOSORT, NULL, &g);
    if (grc == GLOB_NOMATCH || (grc == 0 && g.gl_pathc == 0)) {
        if (grc == 0) globfree(&g);
        return ct_set_error(CT_EIO, FN ": no file matches the pattern '%s'", entry);
    }
    if (grc != 0)
        return ct_set_error(grc == GLOB_NOSPACE ? CT_ENOMEM : CT_EIO, FN ": cannot expand the pattern '%s'", entry);
    qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, by_name);
    int rc = 0;
    for (size_t i = 0; !rc && i < g.gl_pathc; i++) rc = add_path(ds, g.gl_pathv[i]);
    globfree(&g);
    return rc;
}

static int64_t shards_len(void *self) { return ((shards_ds *)self)->len; }

/* The shard holding item i (0 <= i < len): the last with first <= i. */
static const shard *shard_of(const shards_ds *ds, int64_t i) {
    int lo = 0, hi = ds->n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (ds->s[mid].first <= i) lo = mid;
        else hi = mid - 1;
    }
    return &ds->s[lo];
}

/* Item i's window: x = tokens[o : o+T] into px, y = tokens[o+1 : o+T+1]
 * into py (int64 each), o = (i - first) * stride within its shard. The
 * T + 1 tokens are read into py (8 T bytes hold them) and widened from
 * there. With a vocabulary size, a token >= it is CT_EFORMAT naming the
 * file and the token's offset in it. */
static int fill_window(const shards_ds *ds, int64_t i, int64_t *restrict px, int64_t *restrict py) {
    const shard *sh = shard_of(ds, i);
    int64_t o = (i - sh->first) * ds->stride, T = ds->block;
    size_t w = (size_t)sh->token_bytes;
    int rc = cti_read_at(sh->fd, py, (size_t)(T + 1) * w, HEADER_BYTES + (uint64_t)o * w, sh->size, FN, sh->path);
    if (rc) return rc;
    int64_t last;
    if (w == 2) { /* plain widening copies: vectorised */
        const uint16_t *src = (const uint16_t *)(const void *)py;
        for (int64_t j = 0; j < T; j++) px[j] = src[j];
        last = src[T];
    } else {
        const uint32_t *src = (const uint32_t *)(const void *)py;
        for (int64_t j = 0; j < T; j++) px[j] = src[j];
        last = src[T];
    }
    memcpy(py, px + 1, (size_t)(T - 1) * sizeof *py);
    py[T - 1] = last;
    if (ds->vocab <= 0) return 0;
    int64_t top = py[T - 1];
    for (int64_t j = 0; j < T; j++) top = px[j] > top ? px[j] : top;
    if (top >= ds->vocab) { /* find the first one */
        int64_t at = 0;
        while (at < T && px[at] < ds->vocab) at++;
        return ct_set_error(CT_EFORMAT, FN ": %s: token %" PRId64 " at token offset %" PRId64 " (byte %" PRId64
                                        ") is not below vocab_size %" PRId64 " (window %" PRId64 ")",
                            sh->path, at < T ? px[at] : py[T - 1], o + at,
                            HEADER_BYTES + (o + at) * sh->token_bytes, ds->vocab, i);
    }
    return 0;
}

/* (x, y), each [lead..., T] int64, read straight into the tensors. */
static ct_value *windows(shards_ds *ds, const int64_t *indices, int64_t n, bool batch) {
    int64_t shape[2] = {n, ds->block};
    int nd = batch ? 2 : 1;
    const int64_t *sh = batch ? shape : shape + 1;
    ct_tensor *x = ct_empty(nd, sh, &(ct_topts){.dtype = CT_I64});
    ct_tensor *y = x ? ct_empty(nd, sh, &(ct_topts){.dtype = CT_I64}) : NULL;
    int64_t *px = y ? ct_data_ptr(x) : NULL, *py = px ? ct_data_ptr(y) : NULL;
    int rc = py ? 0 : -1;
    for (int64_t b = 0; !rc && b < n; b++) rc = fill_window(ds, indices[b], px + b * ds->block, py + b * ds->block);
    if (rc) {
        ct_tensor_free(x);
        ct_tensor_free(y);
        return NULL;
    }
    return cti_ds_pack(2, (ct_tensor *[]){x, y});
}

static ct_value *shards_get(void *self, int64_t index) { return windows(self, &index, 1, false); }

static ct_value *shards_get_batch(void *self, const int64_t *indices, int64_t n) {
    return windows(self, indices, n, true);
}

ct_shards_opts ct_shards_defaults(void) {
    return (ct_shards_opts){.block_size = 0, .windows = CT_WINDOWS_RANDOM, .vocab_size = 0};
}

ct_dataset *ct_dataset_shards(const char *const *paths, int n, const ct_shards_opts *o) {
    if (!paths || n < 1 || !o) {
        ct_set_error(CT_EINVAL, FN ": %s", !o ? "options are NULL" : "needs at least one path or pattern");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!paths[i]) {
            ct_set_error(CT_EINVAL, FN ": path %d is NULL", i);
            return NULL;
        }
    if (o->block_size < 1 || o->block_size > INT32_MAX || o->vocab_size < 0 ||
        (o->windows != CT_WINDOWS_RANDOM && o->windows != CT_WINDOWS_SEQUENTIAL)) {
        ct_set_error(CT_EINVAL, FN ": %s (block_size %" PRId64 ", vocab_size %" PRId64 ", windows %d)",
                     o->block_size < 1 || o->block_size > INT32_MAX ? "block_size must be 1..2^31-1"
                     : o->vocab_size < 0                              ? "vocab_size must be >= 0 (0: unchecked)"
                                                                      : "windows must be CT_WINDOWS_RANDOM or "
                                                                        "CT_WINDOWS_SEQUENTIAL",
                     o->block_size, o->vocab_size, (int)o->windows);
        return NULL;
    }
    shards_ds *ds = calloc(1, sizeof *ds);
    if (!ds) {
        ct_set_error(CT_ENOMEM, FN ": out of host memory");
        return NULL;
    }
    ds->block = o->block_size;
    ds->stride = o->windows == CT_WINDOWS_SEQUENTIAL ? o->block_size : 1;
    ds->vocab = o->vocab_size;
    int rc = 0;
    for (int i = 0; !rc && i < n; i++) rc = add_entry(ds, paths[i]);
    for (int i = 0; !rc && i < ds->n; i++) {
        ds->s[i].first = ds->len;
        ds->len += ds->s[i].count;
    }
    static const ct_dataset_vtable vt = {shards_len, shards_get, shards_get_batch, shards_free};
    ct_dataset *d = rc ? NULL : ct_dataset_new(&vt, ds);
    if (!d) shards_free(ds);
    return d;
}

int ct_shard_write(const char *path, const uint32_t *tokens, int64_t n, int token_bytes) {
    const char *fn = "ct_shard_write";
    if (!path || (!tokens && n > 0))
        return ct_set_error(CT_EINVAL, "%s: %s is NULL", fn, !path ? "path" : "tokens");
    if (token_bytes != 2 && token_bytes != 4)
        return ct_set_error(CT_EINVAL, "%s: %s: token_bytes is %d; must be 2 (uint16, magic %d) or 4 (uint32, "
                                       "magic %d)", fn, path, token_bytes, MAGIC_U16, MAGIC_U32);
    if (n < 0 || n > INT32_MAX)
        return ct_set_error(CT_EINVAL, "%s: %s: %" PRId64 " tokens; a shard holds 0..2^31-1 (llm.c's limit)",
                            fn, path, n);
    for (int64_t i = 0; token_bytes == 2 && i < n; i++)
        if (tokens[i] > UINT16_MAX)
            return ct_set_error(CT_EINVAL, "%s: %s: token %" PRId64 " is %" PRIu32 ", too large for uint16 tokens "
                                           "(use token_bytes 4)", fn, path, i, tokens[i]);
    unsigned char h[HEADER_BYTES] = {0};
    int32_t head[3] = {token_bytes == 2 ? MAGIC_U16 : MAGIC_U32, token_bytes == 2 ? 1 : 7, (int32_t)n};
    for (int k = 0; k < 3; k++)
        for (int b = 0; b < 4; b++) h[4 * k + b] = (unsigned char)((uint32_t)head[k] >> (8 * b));
    /* Written beside the path and renamed over it once complete: a failed
     * write leaves whatever was at the path as it was. */
    size_t len = strlen(path);
    char *tmp = malloc(len + 32);
    if (!tmp) return ct_set_error(CT_ENOMEM, "%s: out of memory", fn);
    snprintf(tmp, len + 32, "%s.tmp-%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int rc = ct_set_error(CT_EIO, "%s: cannot create %s (%s)", fn, tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    bool ok = fwrite(h, 1, sizeof h, f) == sizeof h;
    unsigned char buf[1 << 16];
    size_t fill = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        for (int b = 0; b < token_bytes; b++) buf[fill++] = (unsigned char)(tokens[i] >> (8 * b));
        if (fill == sizeof buf || i == n - 1) {
            ok = fwrite(buf, 1, fill, f) == fill;
            fill = 0;
        }
    }
    int err = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        err = errno;
    }
    int rc = ok ? 0 : ct_set_error(CT_EIO, "%s: writing %s failed (%s)", fn, path, strerror(err));
    if (!ok) remove(tmp);
    free(tmp);
    return rc;
}
