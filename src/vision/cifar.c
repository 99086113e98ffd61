/* src/vision/cifar.c — CIFAR-10 and CIFAR-100 from the binary version of
 * each archive (vision.h: ct_dataset_cifar).
 *
 * A CIFAR-10 record is 1 label byte and 3072 image bytes (1024 red, 1024
 * green, 1024 blue, each plane 32 rows of 32), 10000 records per file;
 * CIFAR-100's is a coarse label byte, a fine label byte and the same 3072
 * bytes. Each file of the split is opened once and held open, its size
 * and every label byte checked at creation; the sample's image is its 3072
 * bytes as they stand, already [3, 32, 32], and its label the (fine) label
 * byte. Worker threads read records with pread(2) concurrently (not mmap:
 * a file truncated under a mapping kills the process with SIGBUS, where a
 * short read is an error naming the file).
 */
#define _POSIX_C_SOURCE 200809L

#include "ctrial/vision.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "data/dataset.h"

#define FN "ct_dataset_cifar"
#define IMAGE_BYTES 3072 /* 3 x 32 x 32 */
#define MAX_FILES 5

typedef struct {
    char *path;
    int fd;        /* held open: the file as it was checked */
    uint64_t size; /* its size then */
    int64_t first; /* the sample index of its first record */
    int64_t count; /* its records */
} cifar_file;

typedef struct {
    cifar_file f[MAX_FILES];
    int nfiles;
    size_t label_bytes; /* before the image: 1 (CIFAR-10) or 2 (coarse, fine) */
    int64_t len;
} cifar_ds;

static void cifar_free(void *self) {
    cifar_ds *ds = self;
    for (int i = 0; i < ds->nfiles; i++) {
        close(ds->f[i].fd);
        free(ds->f[i].path);
    }
    free(ds);
}

/* Record r's label bytes (at p) in range. */
static int check_label(const cifar_ds *ds, const unsigned char *p, int64_t r, const char *path) {
    size_t rec = ds->label_bytes + IMAGE_BYTES;
    if (ds->label_bytes == 1 && p[0] >= 10)
        return ct_set_error(CT_EFORMAT, FN ": %s: record %" PRId64 " (byte %" PRId64 ") has label %d; "
                                       "CIFAR-10's labels are 0..9", path, r, r * (int64_t)rec, p[0]);
    if (ds->label_bytes == 2 && (p[0] >= 20 || p[1] >= 100)) {
        bool coarse = p[0] >= 20;
        return ct_set_error(CT_EFORMAT, FN ": %s: record %" PRId64 " (byte %" PRId64 ") has %s label %d; "
                                       "CIFAR-100's %s labels are 0..%d",
                            path, r, r * (int64_t)rec + !coarse, coarse ? "coarse" : "fine",
                            coarse ? p[0] : p[1], coarse ? "coarse" : "fine", coarse ? 19 : 99);
    }
    return 0;
}

/* Every record's label bytes in range: CIFAR-10's label < 10; CIFAR-100's
 * coarse label < 20 and fine label < 100. */
static int check_labels(const cifar_ds *ds, const cifar_file *cf, const char *path) {
    enum { CHUNK = 256 }; /* records read at once */
    size_t rec = ds->label_bytes + IMAGE_BYTES;
    unsigned char *buf = malloc(CHUNK * rec);
    if (!buf) return ct_set_error(CT_ENOMEM, FN ": out of host memory");
    int rc = 0;
    for (int64_t r0 = 0; !rc && r0 < cf->count; r0 += CHUNK) {
        int64_t n = cf->count - r0 < CHUNK ? cf->count - r0 : CHUNK;
        rc = cti_read_at(cf->fd, buf, (size_t)n * rec, (uint64_t)r0 * rec, cf->size, FN, path);
        const unsigned char *p = buf;
        for (int64_t r = r0; !rc && r < r0 + n; r++, p += rec) rc = check_label(ds, p, r, path);
    }
    free(buf);
    return rc;
}

/* Opens dir/name as the next file and checks it: a whole, non-zero number
 * of records, every label in range. */
static int add_file(cifar_ds *ds, const char *dir, const char *name, const char *kind) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return ct_set_error(CT_EINVAL, FN ": the directory name is too long (%zu bytes)", strlen(dir));
    int fd = cti_open_regular(path, FN);
    if (fd < 0) { /* say which files the split needs */
        char msg[4608];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        return ct_set_error(fd, "%s (the binary version of %s: %s)", msg, kind,
                            ds->label_bytes == 1 ? "cifar-10-batches-bin holds data_batch_1.bin .. "
                                                   "data_batch_5.bin and test_batch.bin"
                                                 : "cifar-100-binary holds train.bin and test.bin");
    }
    size_t rec = ds->label_bytes + IMAGE_BYTES;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) rc = ct_set_error(CT_EIO, FN ": %s: cannot stat (%s)", path, strerror(errno));
    else if ((uint64_t)st.st_size > SIZE_MAX) rc = ct_set_error(CT_ENOMEM, FN ": %s: too large to map", path);
    size_t size = rc ? 0 : (size_t)st.st_size;
    if (!rc && size == 0)
        rc = ct_set_error(CT_EFORMAT, FN ": %s: is empty (0 bytes): no %zu-byte %s record", path, rec, kind);
    else if (!rc && size % rec != 0)
        rc = ct_set_error(CT_EFORMAT, FN ": %s: holds %zu bytes, not a whole number of %zu-byte %s records "
                                     "(%zu records and %zu bytes over)", path, size, rec, kind, size / rec,
                          size % rec);
    cifar_file *cf = &ds->f[ds->nfiles];
    char *copy = rc ? NULL : strdup(path);
    if (!rc && !copy) rc = ct_set_error(CT_ENOMEM, FN ": out of host memory");
    if (rc) {
        close(fd);
        return rc;
    }
    *cf = (cifar_file){.path = copy, .fd = fd, .size = size, .first = ds->len, .count = (int64_t)(size / rec)};
    ds->nfiles++; /* cifar_free closes it from now on */
    ds->len += cf->count;
    return check_labels(ds, cf, path);
}

static int64_t cifar_len(void *self) { return ((cifar_ds *)self)->len; }

/* The file holding record i. */
static const cifar_file *file_of(const cifar_ds *ds, int64_t i) {
    int k = 0;
    while (k + 1 < ds->nfiles && ds->f[k + 1].first <= i) k++;
    return &ds->f[k];
}

/* (image uint8 [lead..., 3, 32, 32], label int64 [lead...]) of the n
 * records at indices: batch adds the leading dim n, else n is 1. */
static ct_value *samples(const cifar_ds *ds, const int64_t *indices, int64_t n, bool batch) {
    int64_t shape[4] = {n, 3, 32, 32};
    int lead = batch ? 1 : 0;
    ct_tensor *img = ct_empty(3 + lead, shape + 1 - lead, &(ct_topts){.dtype = CT_U8});
    ct_tensor *lab = img ? ct_empty(lead, shape, &(ct_topts){.dtype = CT_I64}) : NULL;
    unsigned char *pi = lab ? ct_data_ptr(img) : NULL;
    int64_t *pl = pi ? ct_data_ptr(lab) : NULL;
    size_t rec = ds->label_bytes + IMAGE_BYTES;
    unsigned char r[2 + IMAGE_BYTES];
    int rc = pl ? 0 : -1;
    for (int64_t b = 0; !rc && b < n; b++) {
        const cifar_file *cf = file_of(ds, indices[b]);
        rc = cti_read_at(cf->fd, r, rec, (uint64_t)(indices[b] - cf->first) * rec, cf->size, FN, cf->path);
        if (rc) break;
        pl[b] = r[ds->label_bytes - 1]; /* CIFAR-100: the fine label, after the coarse one */
        memcpy(pi + (size_t)b * IMAGE_BYTES, r + ds->label_bytes, IMAGE_BYTES);
    }
    if (rc) {
        ct_tensor_free(img);
        ct_tensor_free(lab);
        return NULL;
    }
    return cti_ds_pack(2, (ct_tensor *[]){img, lab});
}

static ct_value *cifar_get(void *self, int64_t index) { return samples(self, &index, 1, false); }

static ct_value *cifar_get_batch(void *self, const int64_t *indices, int64_t n) {
    return samples(self, indices, n, true);
}

ct_dataset *ct_dataset_cifar(const char *dir, ct_cifar_kind kind, bool train) {
    if (!dir || (kind != CT_CIFAR10 && kind != CT_CIFAR100)) {
        ct_set_error(CT_EINVAL, FN ": %s (kind %d)",
                     !dir ? "dir is NULL" : "kind must be CT_CIFAR10 (10) or CT_CIFAR100 (100)", (int)kind);
        return NULL;
    }
    static const char *const c10_train[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                            "data_batch_4.bin", "data_batch_5.bin"};
    static const char *const c10_test[] = {"test_batch.bin"};
    static const char *const c100_train[] = {"train.bin"};
    static const char *const c100_test[] = {"test.bin"};
    bool c10 = kind == CT_CIFAR10;
    const char *const *names = c10 ? (train ? c10_train : c10_test) : (train ? c100_train : c100_test);
    int n = c10 && train ? MAX_FILES : 1;
    cifar_ds *ds = calloc(1, sizeof *ds);
    if (!ds) {
        ct_set_error(CT_ENOMEM, FN ": out of host memory");
        return NULL;
    }
    ds->label_bytes = c10 ? 1 : 2;
    int rc = 0;
    for (int i = 0; !rc && i < n; i++) rc = add_file(ds, dir, names[i], c10 ? "CIFAR-10" : "CIFAR-100");
    static const ct_dataset_vtable vt = {cifar_len, cifar_get, cifar_get_batch, cifar_free};
    ct_dataset *d = rc ? NULL : ct_dataset_new(&vt, ds);
    if (!d) cifar_free(ds);
    return d;
}
