/* src/pth/load.c — the engine of ct_pth_load (ckpt.h): torch.load(path,
 * weights_only=True, map_location="cpu") into a ct_value tree, with the
 * storages and tensors made by the caller's cti_pth_tensors (pth.h).
 *
 * 1. The zip directory is read (zip_read.c) and data.pkl, whose CRC is
 *    checked before a single opcode runs.
 * 2. The pickle runs (pickle_read.c). Each storage it names is allocated
 *    once (tensors->storage_new), the size of its entry, and every tensor
 *    is a view of one of them (tensors->view), so storages shared in the
 *    file are shared in memory. The bytes are not there yet.
 * 3. All entries are read in one pass, in file order, in chunks spread over
 *    a few threads: storages with pread straight into their memory,
 *    everything else through a small buffer, each chunk's CRC-32 computed
 *    right after it arrives (still in cache) and combined per entry with
 *    crc32_combine. Any mismatch fails the load naming the entry.
 *
 * The same code reads an archive held in memory (cti_pth_load_buffer_with),
 * which is what the fuzzer feeds. A mapped load (cti_pth_load_mapped_with)
 * makes each large storage in step 2 a copy-on-write mapping of its entry
 * instead (tensors->storage_wrap), which step 3 only checks the CRC of.
 */
#define _DEFAULT_SOURCE /* pread, posix_fadvise, madvise(MADV_HUGEPAGE) */
#include "pth/pth.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/files.h"

enum {
    CHUNK = 2 << 20,          /* bytes per read job: its CRC runs while it is in cache */
    SCRATCH = 1 << 20,        /* buffer of CRC-only reads */
    MAX_THREADS = 4,          /* readers, the calling thread included */
    PARALLEL_MIN = 4 << 20,   /* below this many bytes one thread reads */
    MAX_KEY = 256,
};

typedef struct {
    const cti_pth_entry *entry;
    void *handle;        /* the caller's storage of entry->size bytes: a reference owned by the load */
    unsigned char *data; /* its memory */
} storage;

typedef struct {
    const cti_pth_src *src;
    const cti_pth_tensors *tensors;
    bool map;      /* large storages mapped from the file (copy-on-write) */
    cti_pth_zip zip;
    storage *st;
    size_t nst, cap;
    size_t *slot;  /* per entry: index in st + 1, or 0 */
    bool *checked; /* per entry: its CRC was checked already */
} loader;

static int crc_mismatch(const cti_pth_src *src, const cti_pth_entry *e, uint32_t got) {
    return ct_set_error(CT_EFORMAT,
                        "%s: entry %s: its bytes have CRC-32 0x%08" PRIx32 " but the central directory says 0x%08"
                        PRIx32 ": the file is damaged",
                        src->name, e->name, got, e->crc);
}

/* A whole small entry into a new buffer, CRC checked. */
static int read_entry(loader *l, const cti_pth_entry *e, unsigned char **out) {
    unsigned char *b = malloc(e->size ? (size_t)e->size : 1);
    if (!b) return ct_set_error(CT_ENOMEM, "%s: out of host memory for entry %s", l->src->name, e->name);
    char what[96];
    snprintf(what, sizeof what, "entry %.80s", e->name);
    int rc = cti_pth_src_read(l->src, e->offset, b, (size_t)e->size, what);
    uint32_t crc = rc ? 0 : cti_crc32(0, b, (size_t)e->size);
    if (!rc && crc != e->crc) rc = crc_mismatch(l->src, e, crc);
    if (rc) {
        free(b);
        return rc;
    }
    l->checked[e - l->zip.entries] = true;
    *out = b;
    return 0;
}

/* byteorder, when present, must be this machine's. */
static int check_byteorder(loader *l) {
    const cti_pth_entry *e = cti_pth_zip_find(&l->zip, "byteorder");
    if (!e) return 0; /* files from before PyTorch 1.10 have none: native order */
    if (e->size > 16)
        return ct_set_error(CT_EFORMAT, "%s: entry %s holds %" PRIu64 " bytes, not \"little\" or \"big\"",
                            l->src->name, e->name, e->size);
    unsigned char *b;
    if (read_entry(l, e, &b)) return ct_last_code();
    const uint16_t probe = 1;
    const char *native = *(const unsigned char *)&probe ? "little" : "big";
    bool same = e->size == strlen(native) && memcmp(b, native, (size_t)e->size) == 0;
    int rc = same ? 0
                  : ct_set_error(CT_EFORMAT, "%s: entry %s says \"%.*s\": the storages are not in this machine's "
                                 "byte order (%s)",
                                 l->src->name, e->name, (int)e->size, (const char *)b, native);
    free(b);
    return rc;
}


/* A large storage is filled from the file at once: on 2 MiB pages (where
 * the kernel offers them on request) it takes 512 times fewer page faults,
 * which is most of the difference between copying a fresh buffer and
 * copying a reused one. Only the 2 MiB-aligned inside of the buffer. */
static void huge_pages(void *p, uint64_t n) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t start = ((uintptr_t)p + huge - 1) & ~(huge - 1), end = ((uintptr_t)p + (uintptr_t)n) & ~(huge - 1);
    if (p && n >= 2 * huge && end > start) madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

/* A mapping of part of the file: what munmap needs. */
typedef struct {
    void *base;
    size_t len;
} mapping;

static void unmap(void *data, void *ctx) {
    mapping *m = ctx;
    (void)data;
    munmap(m->base, m->len);
    free(m);
}

/* Entry e's bytes mapped copy-on-write, as a NEW storage
 * (tensors->storage_wrap); NULL, with no error set, where the file cannot
 * be mapped (a file system without mmap, no address space or memory
 * left): the caller reads it instead, which says what is wrong if that
 * fails too. */
static void *mapped_storage(loader *l, const cti_pth_entry *e) {
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), from = e->offset / page * page;
    mapping *m = malloc(sizeof *m);
    if (!m) return NULL;
    m->len = (size_t)(e->offset + e->size - from);
    m->base = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE, l->src->fd, (off_t)from);
    if (m->base == MAP_FAILED) {
        free(m);
        return NULL;
    }
    void *handle = l->tensors->storage_wrap((unsigned char *)m->base + (e->offset - from), e->size, unmap, m);
    if (!handle) {
        unmap(NULL, m);
        ct_clear_error();
    }
    return handle;
}

/* The unpickler's storage callback: the storage that will hold entry
 * data/<key>, created at its first use. */
static void *resolve(void *ctx, const char *key, ct_dtype dtype, int64_t numel) {
    loader *l = ctx;
    if (strlen(key) > MAX_KEY) {
        ct_set_error(CT_EFORMAT, "a storage key of %zu bytes", strlen(key));
        return NULL;
    }
    char record[MAX_KEY + 8];
    snprintf(record, sizeof record, "data/%s", key);
    const cti_pth_entry *e = cti_pth_zip_find(&l->zip, record);
    if (!e) {
        ct_set_error(CT_EFORMAT, "storage '%s' has no entry %s/%s", key, l->zip.prefix, record);
        return NULL;
    }
    uint64_t esize = ct_dtype_size(dtype);
    if ((uint64_t)numel > UINT64_MAX / esize || (uint64_t)numel * esize != e->size) {
        ct_set_error(CT_EFORMAT, "entry %s holds %" PRIu64 " bytes, but the pickle says %" PRId64
                     " %s values (%s%" PRIu64 " bytes)",
                     e->name, e->size, numel, ct_dtype_name(dtype),
                     (uint64_t)numel > UINT64_MAX / esize ? "more than " : "",
                     (uint64_t)numel > UINT64_MAX / esize ? UINT64_MAX : (uint64_t)numel * esize);
        return NULL;
    }
    size_t at = (size_t)(e - l->zip.entries);
    if (l->slot[at]) return l->st[l->slot[at] - 1].handle;
    if (l->nst == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        storage *p = realloc(l->st, cap * sizeof *p);
        if (!p) {
            ct_set_error(CT_ENOMEM, "out of host memory");
            return NULL;
        }
        l->st = p;
        l->cap = cap;
    }
    unsigned char *data = NULL;
    void *handle = NULL;
    if (l->map && l->src->fd >= 0 && e->size >= CTI_PTH_MAP_MIN && e->offset + e->size <= l->src->size)
        handle = mapped_storage(l, e); /* data stays NULL: step 3 checks its CRC only */
    if (!handle && (handle = l->tensors->storage_new(e->size, &data))) huge_pages(data, e->size);
    if (!handle) return NULL;
    l->st[l->nst] = (storage){e, handle, data};
    l->slot[at] = ++l->nst;
    return handle;
}

/* ---- reading every entry, in parallel ------------------------------------------------------- */

typedef struct {
    const cti_pth_entry *entry;
    unsigned char *dst; /* the entry's first byte in memory; NULL: check the CRC only */
    uint64_t pos, len;  /* the range within the entry */
    uint32_t crc;
    int error;          /* 0, an errno, or -1 when the file ended early */
} job;

typedef struct {
    const cti_pth_src *src;
    job *jobs;
    size_t n;
    atomic_size_t next;
    atomic_bool stop;
} pool;

/* n bytes at off into dst, without touching the (thread-local) ct error:
 * 0, an errno, or -1 at an early end. */
static int raw_read(const cti_pth_src *src, uint64_t off, unsigned char *dst, size_t n) {
    if (src->fd < 0) {
        memcpy(dst, src->mem + off, n);
        return 0;
    }
    while (n > 0) {
        ssize_t got = pread(src->fd, dst, n, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return errno ? errno : EIO;
        if (got == 0) return -1;
        dst += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return 0;
}

static int run_job(const cti_pth_src *src, job *j, unsigned char **scratch) {
    uint64_t off = j->entry->offset + j->pos;
    if (j->dst) {
        j->error = raw_read(src, off, j->dst + j->pos, (size_t)j->len);
        if (!j->error) j->crc = cti_crc32(0, j->dst + j->pos, (size_t)j->len);
        return j->error;
    }
    if (!*scratch && !(*scratch = malloc(SCRATCH))) return j->error = ENOMEM;
    uint32_t crc = 0;
    for (uint64_t at = 0; at < j->len && !j->error; at += SCRATCH) {
        size_t k = j->len - at < SCRATCH ? (size_t)(j->len - at) : SCRATCH;
        j->error = raw_read(src, off + at, *scratch, k);
        if (!j->error) crc = cti_crc32(crc, *scratch, k);
    }
    j->crc = crc;
    return j->error;
}

static void *worker(void *arg) {
    pool *p = arg;
    unsigned char *scratch = NULL;
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n || atomic_load(&p->stop)) break;
        if (run_job(p->src, &p->jobs[i], &scratch)) atomic_store(&p->stop, true);
    }
    free(scratch);
    return NULL;
}

/* Runs the jobs on up to MAX_THREADS threads (the caller's included). */
static void run_pool(pool *p, uint64_t total) {
    pthread_t helpers[MAX_THREADS - 1];
    int nhelp = 0;
    if (p->src->fd >= 0 && total >= PARALLEL_MIN && p->n > 1) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int want = (int)(cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : cpus) - 1;
        if ((size_t)want > p->n - 1) want = (int)(p->n - 1);
        while (nhelp < want && pthread_create(&helpers[nhelp], NULL, worker, p) == 0) nhelp++;
    }
    worker(p);
    for (int i = 0; i < nhelp; i++) pthread_join(helpers[i], NULL);
}

/* Reads every entry not checked yet; storages land in their memory. */
static int read_all(loader *l) {
    size_t njobs = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < l->zip.n; i++) {
        const cti_pth_entry *e = &l->zip.entries[i];
        if (l->checked[i]) continue;
        if (e->size == 0 && e->crc != 0) return crc_mismatch(l->src, e, 0);
        njobs += (size_t)((e->size + CHUNK - 1) / CHUNK);
        total += e->size;
    }
    job *jobs = calloc(njobs ? njobs : 1, sizeof *jobs);
    if (!jobs) return ct_set_error(CT_ENOMEM, "%s: out of host memory", l->src->name);
    size_t n = 0;
    for (size_t i = 0; i < l->zip.n; i++) {
        const cti_pth_entry *e = &l->zip.entries[i];
        if (l->checked[i]) continue;
        unsigned char *dst = l->slot[i] ? l->st[l->slot[i] - 1].data : NULL;
        for (uint64_t pos = 0; pos < e->size; pos += CHUNK)
            jobs[n++] = (job){.entry = e, .dst = dst, .pos = pos, .len = e->size - pos < CHUNK ? e->size - pos : CHUNK};
    }
    pool p = {.src = l->src, .jobs = jobs, .n = n};
    atomic_init(&p.next, 0);
    atomic_init(&p.stop, false);
    run_pool(&p, total);
    int rc = 0;
    /* Errors first (in file order), then each entry's CRC from its chunks. */
    for (size_t k = 0; !rc && k < n; k++) {
        const job *j = &jobs[k];
        if (j->error == -1)
            rc = ct_set_error(CT_EFORMAT, "%s: entry %s: the file ended while reading it (it shrank?)", l->src->name,
                              j->entry->name);
        else if (j->error)
            rc = ct_set_error(j->error == ENOMEM ? CT_ENOMEM : CT_EIO, "%s: reading entry %s failed (%s)",
                              l->src->name, j->entry->name, strerror(j->error));
    }
    for (size_t k = 0; !rc && k < n;) {
        const cti_pth_entry *e = jobs[k].entry;
        uint32_t crc = 0;
        for (; k < n && jobs[k].entry == e; k++) crc = cti_crc32_combine(crc, jobs[k].crc, jobs[k].len);
        if (crc != e->crc) rc = crc_mismatch(l->src, e, crc);
    }
    free(jobs);
    return rc;
}

/* ---- the whole load ------------------------------------------------------------------------- */

static int load(const cti_pth_src *src, const cti_pth_tensors *tensors, bool map, ct_value **out) {
    loader l = {.src = src, .tensors = tensors, .map = map && tensors->storage_wrap};
    if (cti_pth_zip_open(src, &l.zip)) return ct_last_code();
    l.slot = calloc(l.zip.n, sizeof *l.slot);
    l.checked = calloc(l.zip.n, sizeof *l.checked);
    int rc = l.slot && l.checked ? 0 : ct_set_error(CT_ENOMEM, "%s: out of host memory", src->name);
    const cti_pth_entry *pe = rc ? NULL : cti_pth_zip_find(&l.zip, "data.pkl");
    if (!rc && !pe)
        rc = ct_set_error(CT_EFORMAT, "%s: no entry %s/data.pkl: not a file written by torch.save", src->name,
                          l.zip.prefix);
    unsigned char *pkl = NULL;
    if (!rc) rc = read_entry(&l, pe, &pkl);
    if (!rc) rc = check_byteorder(&l);
    ct_value *v = NULL;
    if (!rc) {
        cti_pth_unpickle_env env = {
            .storage = resolve, .ctx = &l, .tensors = tensors, .file = src->name, .entry = pe->name};
        rc = cti_pth_unpickle(pkl, (size_t)pe->size, &env, &v);
    }
    free(pkl);
    if (!rc) rc = read_all(&l);
    for (size_t i = 0; i < l.nst; i++) tensors->storage_release(l.st[i].handle); /* the views keep them */
    free(l.st);
    free(l.slot);
    free(l.checked);
    cti_pth_zip_free(&l.zip);
    if (rc) {
        ct_value_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

static int load_file(const char *path, const cti_pth_tensors *tensors, bool map, ct_value **out) {
    if (!out) return ct_set_error(CT_EINVAL, "ct_pth_load: out is NULL");
    *out = NULL;
    if (!path) return ct_set_error(CT_EINVAL, "ct_pth_load: path is NULL");
    /* A regular file only, refused before it is opened for reading: a FIFO
     * would block open(2) and a device never ends. */
    int fd = cti_open_regular(path, "ct_pth_load");
    if (fd < 0) return fd;
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) != 0) rc = ct_set_error(CT_EIO, "ct_pth_load: %s: cannot stat (%s)", path, strerror(errno));
    if (!rc) {
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        cti_pth_src src = {.name = path, .fd = fd, .size = (uint64_t)sb.st_size};
        rc = load(&src, tensors, map, out);
    }
    close(fd); /* the mappings keep the file */
    return rc;
}

int cti_pth_load_with(const char *path, const cti_pth_tensors *tensors, ct_value **out) {
    return load_file(path, tensors, false, out);
}

int cti_pth_load_mapped_with(const char *path, const cti_pth_tensors *tensors, ct_value **out) {
    return load_file(path, tensors, true, out);
}

int cti_pth_load_buffer_with(const void *data, size_t size, const char *name, const cti_pth_tensors *tensors,
                            ct_value **out) {
    if (!out) return ct_set_error(CT_EINVAL, "cti_pth_load_buffer: out is NULL");
    *out = NULL;
    if (!data && size) return ct_set_error(CT_EINVAL, "cti_pth_load_buffer: data is NULL");
    cti_pth_src src = {.name = name ? name : "<buffer>", .fd = -1, .mem = data, .size = size};
    return load(&src, tensors, false, out);
}
