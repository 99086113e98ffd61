/* libFuzzer target: the fixed-size records reader (ct_dataset_records,
 * module data: an mmap'd file of packed fields, CIFAR's binary format
 * among others) over the release build's shim. The input's first bytes
 * are the options, the rest is the file:
 *
 *   u8 header_bytes % 16, u8 num_fields % 4 (0 is refused: 1..3 otherwise),
 *   per field: u8 dtype % 12 (10 and 11 are not dtypes), u8 ndim % 6
 *   (5 is refused), ndim x u8 size % 8
 *
 * Beyond "no crash, no leak, no undefined behaviour", it checks that
 *  - bad options are CT_EINVAL or CT_EDTYPE, a file that is not a header
 *    plus whole records is CT_EFORMAT, each naming the file;
 *  - otherwise the dataset holds (size - header) / record bytes records,
 *    and record i's fields, read one at a time (ct_dataset_get) or as a
 *    batch (ct_dataset_get_batch, indices from the input), are the file's
 *    bytes at header + i x record bytes, with the fields' dtypes and
 *    shapes.
 * Built by fuzz/CMakeLists.txt when the shim is given, run by fuzz/run.sh. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctrial/ctrial.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Takes one option byte (0 past the end). */
static unsigned take(const uint8_t **p, const uint8_t *end) { return *p < end ? *(*p)++ : 0; }

/* Leaf f of a record or batch (a tuple of fields, or the tensor itself). */
static const ct_tensor *field(const ct_value *v, int f, int num_fields) {
    const ct_value *leaf = num_fields == 1 ? v : ct_value_list_get(v, (size_t)f);
    const ct_tensor *t = leaf ? ct_value_get_tensor(leaf) : NULL;
    if (!t) abort();
    return t;
}

/* The tensor holds `bytes` bytes equal to `want`, with the field's dtype
 * and shape after `lead` leading dims of size 1 (a batch of one). */
static void check_field(const ct_tensor *t, const ct_record_field *fd, int lead, const uint8_t *want, size_t bytes) {
    if (ct_dtype_of(t) != fd->dtype || ct_ndim(t) != fd->ndim + lead) abort();
    for (int d = 0; d < lead; d++)
        if (ct_size(t, d) != 1) abort();
    for (int d = 0; d < fd->ndim; d++)
        if (ct_size(t, d + lead) != fd->shape[d]) abort();
    if ((size_t)ct_numel(t) * ct_dtype_size(fd->dtype) != bytes) abort();
    if (bytes && memcmp(ct_data_ptr(t), want, bytes) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *p = data, *end = data + size;
    ct_records_opts o = {.header_bytes = take(&p, end) % 16, .num_fields = (int)(take(&p, end) % 4)};
    size_t field_bytes[CT_RECORD_MAX_FIELDS] = {0}, record_bytes = 0;
    for (int f = 0; f < o.num_fields; f++) {
        ct_record_field *fd = &o.fields[f];
        fd->dtype = (ct_dtype)(take(&p, end) % 12);
        fd->ndim = (int)(take(&p, end) % 6);
        field_bytes[f] = fd->dtype <= CT_I16 ? ct_dtype_size(fd->dtype) : 0;
        for (int d = 0; d < fd->ndim && d < 4; d++) field_bytes[f] *= fd->shape[d] = take(&p, end) % 8;
        record_bytes += field_bytes[f];
    }
    const uint8_t *file = p;
    size_t file_size = (size_t)(end - p);

    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_records_%ld.bin", (long)getpid());
    FILE *fp = fopen(path, "wb");
    if (!fp || (file_size && fwrite(file, 1, file_size, fp) != file_size) || fclose(fp) != 0) abort();
    ct_dataset *ds = ct_dataset_records(path, &o);
    unlink(path);
    bool bad_opts = o.num_fields < 1 || record_bytes == 0;
    for (int f = 0; f < o.num_fields; f++) bad_opts |= o.fields[f].dtype > CT_I16 || o.fields[f].ndim > 4;
    if (!ds) {
        int code = ct_last_code();
        if (!strstr(ct_last_error(), path)) abort();
        if (bad_opts ? code != CT_EINVAL && code != CT_EDTYPE : code != CT_EFORMAT) abort();
        if (!bad_opts && file_size >= o.header_bytes && (file_size - o.header_bytes) % record_bytes == 0) abort();
        ct_clear_error();
        return 0;
    }
    if (bad_opts) abort();
    int64_t n = ct_dataset_len(ds);
    if (file_size < o.header_bytes || (size_t)n != (file_size - o.header_bytes) / record_bytes) abort();

    /* Records 0, n - 1 and one the options' bytes pick, alone and as a batch. */
    int64_t picks[3] = {0, n - 1, n ? (int64_t)(data[0] * 7919u % (uint64_t)n) : 0};
    for (int k = 0; k < 3 && n > 0; k++) {
        int64_t i = picks[k];
        ct_value *one = ct_dataset_get(ds, i), *batch = ct_dataset_get_batch(ds, &i, 1);
        if (!one || !batch) abort();
        const uint8_t *at = file + o.header_bytes + (size_t)i * record_bytes;
        for (int f = 0; f < o.num_fields; f++) {
            check_field(field(one, f, o.num_fields), &o.fields[f], 0, at, field_bytes[f]);
            check_field(field(batch, f, o.num_fields), &o.fields[f], 1, at, field_bytes[f]);
            at += field_bytes[f];
        }
        ct_value_free(one);
        ct_value_free(batch);
    }
    ct_dataset_free(ds);
    return 0;
}
