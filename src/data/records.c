/* src/data/records.c — a dataset of fixed-size binary records read from a
 * file held open (data.h: ct_dataset_records).
 *
 * The file is opened and checked once and held open; worker threads read
 * records with pread(2) concurrently (the page cache does the rest). Not
 * mmap: a file truncated under a mapping kills the process with SIGBUS,
 * where a short read is an error naming the file. Values are taken as
 * stored: little-endian, which is the host order this reader supports; on
 * a big-endian host a record with multi-byte fields is refused rather than
 * silently misread.
 */
#define _POSIX_C_SOURCE 200809L

#include "ctrial/data.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "data/dataset.h"

typedef struct {
    ct_records_opts o;
    size_t field_bytes[CT_RECORD_MAX_FIELDS];
    size_t record_bytes;
    int64_t len;
    char *path;
    int fd;        /* held open: the file as it was checked */
    uint64_t size; /* its size then */
} records_ds;

static bool host_is_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static bool valid_dtype(ct_dtype d) { return (int)d >= (int)CT_F32 && (int)d <= (int)CT_I16; }

/* Checks the options and computes each field's and the record's size. */
static int check_opts(const ct_records_opts *o, const char *path, records_ds *ds) {
    const char *fn = "ct_dataset_records";
    if (o->num_fields < 1 || o->num_fields > CT_RECORD_MAX_FIELDS)
        return ct_set_error(CT_EINVAL, "%s: %s: num_fields is %d; must be 1..%d", fn, path,
                            o->num_fields, CT_RECORD_MAX_FIELDS);
    size_t total = 0;
    bool multibyte = false;
    for (int f = 0; f < o->num_fields; f++) {
        const ct_record_field *fd = &o->fields[f];
        if (!valid_dtype(fd->dtype))
            return ct_set_error(CT_EDTYPE, "%s: %s: field %d has an invalid dtype (%d)", fn, path, f,
                                (int)fd->dtype);
        if (fd->ndim < 0 || fd->ndim > 4)
            return ct_set_error(CT_EINVAL, "%s: %s: field %d has ndim %d; must be 0..4", fn, path, f,
                                fd->ndim);
        size_t bytes = ct_dtype_size(fd->dtype);
        multibyte |= bytes > 1;
        for (int i = 0; i < fd->ndim; i++) {
            int64_t s = fd->shape[i];
            if (s < 0)
                return ct_set_error(CT_EINVAL, "%s: %s: field %d has a negative size %" PRId64
                                    " in dim %d", fn, path, f, s, i);
            if (s > 0 && bytes > SIZE_MAX / (uint64_t)s)
                return ct_set_error(CT_EINVAL, "%s: %s: field %d is too large", fn, path, f);
            bytes *= (size_t)s;
        }
        if (bytes > SIZE_MAX - total)
            return ct_set_error(CT_EINVAL, "%s: %s: the record is too large", fn, path);
        ds->field_bytes[f] = bytes;
        total += bytes;
    }
    if (total == 0)
        return ct_set_error(CT_EINVAL, "%s: %s: the fields describe an empty (0-byte) record", fn,
                            path);
    if (multibyte && !host_is_little_endian())
        return ct_set_error(CT_ENOTSUP, "%s: %s: records are little-endian and this host is not",
                            fn, path);
    ds->record_bytes = total;
    return 0;
}

/* Opens the file and checks that it holds a whole number of records. */
static int open_file(const char *path, records_ds *ds) {
    const char *fn = "ct_dataset_records";
    int fd = cti_open_regular(path, fn); /* a FIFO would block open(2) */
    if (fd < 0) return fd;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = ct_set_error(CT_EIO, "%s: %s: cannot stat (%s)", fn, path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = ct_set_error(CT_EIO, "%s: %s: not a regular file", fn, path);
    else if ((uint64_t)st.st_size > SIZE_MAX)
        rc = ct_set_error(CT_ENOMEM, "%s: %s: too large to map", fn, path);
    size_t size = rc ? 0 : (size_t)st.st_size, header = ds->o.header_bytes;
    if (!rc && size < header)
        rc = ct_set_error(CT_EFORMAT, "%s: %s: holds %zu bytes, fewer than its %zu-byte header", fn,
                          path, size, header);
    else if (!rc && (size - header) % ds->record_bytes != 0)
        rc = ct_set_error(CT_EFORMAT,
                          "%s: %s: the %zu bytes after the %zu-byte header are not a whole number "
                          "of %zu-byte records (%zu records and %zu bytes over)",
                          fn, path, size - header, header, ds->record_bytes,
                          (size - header) / ds->record_bytes, (size - header) % ds->record_bytes);
    if (!rc && !(ds->path = strdup(path))) rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
    if (rc) {
        close(fd);
        return rc;
    }
    ds->fd = fd;
    ds->size = size;
    ds->len = (int64_t)((size - header) / ds->record_bytes);
    return 0;
}

static int64_t records_len(void *self) { return ((records_ds *)self)->len; }

/* Record i, whole, into buf (record_bytes). */
static int read_record(const records_ds *ds, int64_t i, unsigned char *buf) {
    uint64_t at = ds->o.header_bytes + (uint64_t)i * ds->record_bytes;
    return cti_read_at(ds->fd, buf, ds->record_bytes, at, ds->size, "ct_dataset_records", ds->path);
}

/* One [n, shape...] tensor per field (n = 0: the fields' own shapes, a
 * single record), filled from the records read one by one: no per-sample
 * tensors, no stacking. */
static ct_value *read_records(records_ds *ds, const int64_t *indices, int64_t n, bool batch) {
    int nf = ds->o.num_fields;
    ct_tensor *leaves[CT_RECORD_MAX_FIELDS] = {0};
    unsigned char *dst[CT_RECORD_MAX_FIELDS] = {0};
    unsigned char *record = malloc(ds->record_bytes ? ds->record_bytes : 1);
    bool ok = record != NULL;
    if (!ok) ct_set_error(CT_ENOMEM, "ct_dataset_records: out of host memory for a %zu-byte record",
                          ds->record_bytes);
    for (int f = 0; ok && f < nf; f++) {
        const ct_record_field *fd = &ds->o.fields[f];
        int64_t shape[5] = {n};
        memcpy(shape + 1, fd->shape, (size_t)fd->ndim * sizeof shape[0]);
        leaves[f] = batch ? ct_empty(fd->ndim + 1, shape, &(ct_topts){.dtype = fd->dtype})
                          : ct_empty(fd->ndim, fd->shape, &(ct_topts){.dtype = fd->dtype});
        dst[f] = leaves[f] && ds->field_bytes[f] ? ct_data_ptr(leaves[f]) : NULL;
        ok = leaves[f] && (dst[f] || !ds->field_bytes[f]);
    }
    for (int64_t i = 0; ok && i < (batch ? n : 1); i++) {
        ok = read_record(ds, indices[i], record) == 0;
        size_t off = 0;
        for (int f = 0; ok && f < nf; f++) {
            if (ds->field_bytes[f]) memcpy(dst[f] + (size_t)i * ds->field_bytes[f], record + off, ds->field_bytes[f]);
            off += ds->field_bytes[f];
        }
    }
    free(record);
    if (!ok) {
        for (int f = 0; f < nf; f++) ct_tensor_free(leaves[f]);
        return NULL;
    }
    return cti_ds_pack(nf, leaves);
}

static ct_value *records_get(void *self, int64_t index) { return read_records(self, &index, 1, false); }

static ct_value *records_get_batch(void *self, const int64_t *indices, int64_t n) {
    return read_records(self, indices, n, true);
}

static void records_free(void *self) {
    records_ds *ds = self;
    if (ds->fd >= 0) close(ds->fd);
    free(ds->path);
    free(ds);
}

ct_dataset *ct_dataset_records(const char *path, const ct_records_opts *o) {
    if (!path || !o) {
        ct_set_error(CT_EINVAL, "ct_dataset_records: %s is NULL", !path ? "path" : "options");
        return NULL;
    }
    records_ds *ds = calloc(1, sizeof *ds);
    if (!ds) {
        ct_set_error(CT_ENOMEM, "ct_dataset_records: out of host memory");
        return NULL;
    }
    ds->o = *o;
    ds->fd = -1;
    if (check_opts(o, path, ds) || open_file(path, ds)) {
        records_free(ds);
        return NULL;
    }
    static const ct_dataset_vtable vt = {records_len, records_get, records_get_batch, records_free};
    ct_dataset *d = ct_dataset_new(&vt, ds);
    if (!d) records_free(ds);
    return d;
}
