/* Every bad input of the file datasets fails with the right code and a
 * message naming the file and what is wrong: IDX (parse and read, plain and
 * gzip), MNIST, records, CSV. The bad files are written here, byte by byte. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "ct_test.h"

static char dir[256];

/* Writes len bytes to DIR/name; returns the path (one of a few rotating
 * buffers, so two paths can be live at once). */
static const char *file_with(const char *name, const void *data, size_t len) {
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(2);
    }
    fclose(f);
    return p;
}

static const char *text_file(const char *name, const char *text) {
    return file_with(name, text, strlen(text));
}

static const char *gz_file(const char *name, const void *data, size_t len) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    gzFile f = gzopen(p, "wb");
    if (!f || gzwrite(f, data, (unsigned)len) != (int)len || gzclose(f) != Z_OK) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(2);
    }
    return p;
}

/* ---- IDX ------------------------------------------------------------------ */

/* An IDX header: magic with `code` and dims, big-endian. Returns its size. */
static size_t idx_header(unsigned char *buf, unsigned char code, int ndim, const uint32_t *dims) {
    buf[0] = buf[1] = 0;
    buf[2] = code;
    buf[3] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++)
        for (int b = 0; b < 4; b++) buf[4 + 4 * i + b] = (unsigned char)(dims[i] >> (24 - 8 * b));
    return 4 + 4 * (size_t)ndim;
}

static void test_idx_parse(void) {
    unsigned char buf[256] = {0};
    CHECK(ct_idx_parse(buf, 0, "e.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "e.idx: empty file");
    CHECK(ct_idx_parse(buf, 3, "s.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "s.idx: only 3 bytes");

    const unsigned char magic[4] = {0x12, 0x34, 0x08, 0x01};
    CHECK(ct_idx_parse(magic, 4, "m.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "m.idx: wrong magic 0x12340801; expected 0x0000TTNN");
    const unsigned char gzip_magic[4] = {0x1F, 0x8B, 0x08, 0x00}; /* a .gz given to parse */
    CHECK(ct_idx_parse(gzip_magic, 4, "g.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "wrong magic 0x1F8B0800");

    const uint32_t d10[1] = {10};
    size_t h = idx_header(buf, 0x0A, 1, d10);
    CHECK(ct_idx_parse(buf, h + 10, "t.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "t.idx: unknown type code 0x0A");
    h = idx_header(buf, 0x07, 1, d10);
    CHECK(ct_idx_parse(buf, h + 10, "t.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "unknown type code 0x07");

    h = idx_header(buf, 0x08, 0, NULL);
    CHECK(ct_idx_parse(buf, h, "z.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "z.idx: magic 0x00000800 gives 0 dimensions; supported are 1 to 8");
    const uint32_t ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    h = idx_header(buf, 0x08, 9, ones);
    CHECK(ct_idx_parse(buf, h + 1, "n.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "gives 9 dimensions");

    const uint32_t d3[3] = {2, 2, 2};
    idx_header(buf, 0x08, 3, d3);
    CHECK(ct_idx_parse(buf, 4 + 8, "h.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "h.idx: header ends early: 3 dimensions need 16 header bytes, the file has 12");

    h = idx_header(buf, 0x08, 1, d10);
    CHECK(ct_idx_parse(buf, h + 5, "tr.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "tr.idx: truncated: holds 5 bytes of data, its header promises 10");
    CHECK(ct_idx_parse(buf, h, "nodata.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "truncated: holds 0 bytes of data, its header promises 10");
    const uint32_t d2[1] = {2};
    h = idx_header(buf, 0x0B, 1, d2);
    CHECK(ct_idx_parse(buf, h + 6, "tb.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "tb.idx: trailing bytes: holds 6 bytes of data, its header promises 4");

    /* Huge dims: refused before anything is allocated. */
    const uint32_t big[8] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu,
                             0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
    h = idx_header(buf, 0x0E, 8, big);
    CHECK(ct_idx_parse(buf, h + 16, "big.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "big.idx: dimensions [4294967295, 4294967295, 4294967295, 4294967295, "
                          "4294967295, 4294967295, 4294967295, 4294967295] are too large for a "
                          "tensor: their product overflows 64 bits");
    const uint32_t big2[2] = {0x7FFFFFFFu, 0xFFFFFFFFu}; /* fits int64, not the file */
    h = idx_header(buf, 0x08, 2, big2);
    CHECK(ct_idx_parse(buf, h + 16, "big2.idx") == NULL);
    char want[160];
    snprintf(want, sizeof want, "truncated: holds 16 bytes of data, its header promises %llu",
             (unsigned long long)big2[0] * big2[1]);
    CHECK_ERR(CT_EFORMAT, want);
    const uint32_t wrap[2] = {0x80000000u, 0x40000000u}; /* 2^61 float64s wrap to 2^64 = 0 */
    h = idx_header(buf, 0x0E, 2, wrap);
    CHECK(ct_idx_parse(buf, h, "wrap.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "wrap.idx: truncated: holds 0 bytes of data, its header promises more "
                          "than 2^64 ([2147483648, 1073741824] of 8-byte float64)");
    /* A zero dim beside dims whose product overflows int64 strides. */
    const uint32_t zbig[4] = {0, 0xFFFFFFFFu, 0xFFFFFFFFu, 2};
    h = idx_header(buf, 0x08, 4, zbig);
    CHECK(ct_idx_parse(buf, h, "zbig.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "zbig.idx: dimensions [0, 4294967295, 4294967295, 2] are too large");

    /* A zero dim holds nothing, whatever the other dims say. */
    const uint32_t zero[3] = {0x7FFFFFFFu, 0, 0xFFFFFFFFu};
    h = idx_header(buf, 0x0D, 3, zero);
    ct_tensor *t = ct_idx_parse(buf, h, "zero.idx");
    CHECK(t && ct_numel(t) == 0 && ct_size(t, 0) == 0x7FFFFFFFll && ct_dtype_of(t) == CT_F32);
    ct_tensor_free(t);
    CHECK(ct_idx_parse(buf, h + 1, "zero.idx") == NULL);
    CHECK_ERR(CT_EFORMAT, "trailing bytes: holds 1 bytes of data, its header promises 0");

    CHECK(ct_idx_parse(NULL, 4, "x") == NULL);
    CHECK_ERR(CT_EINVAL, "data is NULL");
    CHECK(ct_idx_parse(buf, 0, NULL) == NULL);
    CHECK_ERR(CT_EFORMAT, "empty file");
}

static void test_idx_read(void) {
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no-such-file.idx", dir);
    CHECK(ct_idx_read(missing) == NULL);
    CHECK_ERR(CT_EIO, "no-such-file.idx: cannot open (No such file or directory)");
    CHECK(ct_idx_read(dir) == NULL); /* refused before it is read (base/files.c) */
    CHECK_ERR(CT_EIO, ": not a regular file (a directory)");
    CHECK(ct_idx_read(NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "path is NULL");
    CHECK(ct_idx_read(file_with("empty.idx", "", 0)) == NULL);
    CHECK_ERR(CT_EFORMAT, "empty.idx: empty file");

    unsigned char buf[64];
    const uint32_t d10[1] = {10};
    size_t h = idx_header(buf, 0x08, 1, d10);
    for (int i = 0; i < 10; i++) buf[h + (size_t)i] = (unsigned char)(3 * i);
    CHECK(ct_idx_read(file_with("short.idx", buf, h + 4)) == NULL);
    CHECK_ERR(CT_EFORMAT, "short.idx: truncated: holds 4 bytes of data, its header promises 10");
    CHECK(ct_idx_read(gz_file("short.idx.gz", buf, h + 4)) == NULL);
    CHECK_ERR(CT_EFORMAT, "short.idx.gz: truncated: holds 4 bytes");

    /* A damaged gzip stream: cut short, and garbage after a gzip header. */
    const char *gz = gz_file("whole.idx.gz", buf, h + 10);
    FILE *f = fopen(gz, "rb");
    unsigned char z[256];
    size_t zn = fread(z, 1, sizeof z, f);
    fclose(f);
    ct_tensor *t = ct_idx_read(gz);
    uint8_t got[10] = {0};
    CHECK(t && ct_read(t, got, 10) == 0 && got[9] == 27);
    ct_tensor_free(t);
    CHECK(ct_idx_read(file_with("cut.idx.gz", z, zn - 12)) == NULL);
    CHECK_ERR(CT_EFORMAT, "cut.idx.gz: gzip data ends early");
    for (size_t i = 10; i < zn; i++) z[i] = 0xFF;
    CHECK(ct_idx_read(file_with("garbage.idx.gz", z, zn)) == NULL);
    CHECK_ERR(CT_EFORMAT, "garbage.idx.gz: damaged gzip data");
}

/* ---- MNIST ------------------------------------------------------------------ */

static void test_mnist(void) {
    unsigned char img[64], lab[64], f32[64];
    const uint32_t d3[3] = {3, 2, 2}, d2[1] = {2}, d3l[1] = {3};
    size_t hi = idx_header(img, 0x08, 3, d3);
    memset(img + hi, 200, 12);
    size_t hl = idx_header(lab, 0x08, 1, d2);
    memset(lab + hl, 1, 2);
    const char *images = file_with("img3", img, hi + 12);
    const char *labels2 = file_with("lab2", lab, hl + 2);
    CHECK(ct_dataset_mnist(images, labels2) == NULL);
    CHECK_ERR(CT_EFORMAT, "img3 holds 3 images but");
    CHECK(ct_dataset_mnist(labels2, images) == NULL);
    CHECK_ERR(CT_EFORMAT, "lab2 holds [2] uint8 cpu; MNIST images are uint8 [N, H, W]");
    size_t hf = idx_header(f32, 0x0D, 1, d3l);
    memset(f32 + hf, 0, 12);
    CHECK(ct_dataset_mnist(images, file_with("labf", f32, hf + 12)) == NULL);
    CHECK_ERR(CT_EFORMAT, "labf holds [3] float32 cpu; MNIST labels are integers [N]");
    char missing[600];
    snprintf(missing, sizeof missing, "%s/missing-labels", dir);
    CHECK(ct_dataset_mnist(images, missing) == NULL);
    CHECK_ERR(CT_EIO, "missing-labels: cannot open");
    CHECK(ct_dataset_mnist(NULL, missing) == NULL);
    CHECK_ERR(CT_EINVAL, "images_path is NULL");

    /* A good pair; samples are copies: changing one leaves the dataset be. */
    hl = idx_header(lab, 0x08, 1, d3l);
    lab[hl] = 7, lab[hl + 1] = 8, lab[hl + 2] = 9;
    images = file_with("img3", img, hi + 12);
    ct_dataset *d = ct_dataset_mnist(images, file_with("lab3", lab, hl + 3));
    CHECK(d && ct_dataset_len(d) == 3);
    ct_value *s = ct_dataset_get(d, 1);
    ct_tensor *x = ct_batch_at(s, 0);
    CHECK_OK(ct_fill_(x, -1));
    ct_value *again = ct_dataset_get(d, 1);
    ct_value *copy = ct_value_copy(again, true);
    CHECK(!ct_value_equal(s, again) && ct_value_equal(again, copy));
    int64_t label = 0;
    CHECK(ct_item_int(ct_batch_at(again, 1), &label) == 0 && label == 8);
    CHECK(ct_dataset_get(d, 3) == NULL);
    CHECK_ERR(CT_EINDEX, "index 3 out of range for a dataset of length 3");
    ct_value_free(s);
    ct_value_free(again);
    ct_value_free(copy);
    ct_dataset_free(d);
}

/* ---- records ------------------------------------------------------------------ */

static ct_records_opts one_field(ct_dtype dtype, int ndim, int64_t s0) {
    ct_records_opts o = {0};
    o.num_fields = 1;
    o.fields[0].dtype = dtype;
    o.fields[0].ndim = ndim;
    o.fields[0].shape[0] = s0;
    return o;
}

static void test_records(void) {
    const char *ten = file_with("ten.bin", "0123456789", 10);
    ct_records_opts o = one_field(CT_U8, 1, 3);
    CHECK(ct_dataset_records(ten, &o) == NULL);
    CHECK_ERR(CT_EFORMAT,
              "ten.bin: the 10 bytes after the 0-byte header are not a whole number of 3-byte "
              "records (3 records and 1 bytes over)");
    o.header_bytes = 12;
    CHECK(ct_dataset_records(ten, &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "ten.bin: holds 10 bytes, fewer than its 12-byte header");
    o = one_field(CT_I16, 1, 2); /* 4-byte records after a 2-byte header: 2 of them */
    o.header_bytes = 2;
    ct_dataset *d = ct_dataset_records(ten, &o);
    CHECK(d && ct_dataset_len(d) == 2);
    CHECK(ct_dataset_get(d, 2) == NULL);
    CHECK_ERR(CT_EINDEX, "index 2 out of range for a dataset of length 2");
    ct_value *s = ct_dataset_get(d, 1);
    int16_t v[2] = {0, 0};
    CHECK(s && ct_read(ct_batch_tensor(s), v, sizeof v) == 0 && v[0] == ('6' | '7' << 8));
    ct_value_free(s);
    /* the file cut short while the dataset holds it (rewritten in place):
     * CT_EIO naming it, not SIGBUS; record 0 still reads */
    CHECK(truncate(ten, 6) == 0);
    CHECK(ct_dataset_get(d, 1) == NULL);
    CHECK_ERR(CT_EIO, "ten.bin: the file changed while in use: it held 10 bytes when opened and holds 6 now, too "
                      "few for bytes 6..10");
    CHECK(ct_dataset_get_batch(d, (const int64_t[]){0, 1}, 2) == NULL);
    CHECK_ERR(CT_EIO, "ten.bin: the file changed while in use");
    s = ct_dataset_get(d, 0);
    CHECK(s && ct_read(ct_batch_tensor(s), v, sizeof v) == 0 && v[0] == ('2' | '3' << 8));
    ct_value_free(s);
    ct_dataset_free(d);
    ten = file_with("ten.bin", "0123456789", 10);

    o = one_field(CT_U8, 0, 0);
    o.num_fields = 0;
    CHECK(ct_dataset_records(ten, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "num_fields is 0; must be 1..8");
    o.num_fields = 9;
    CHECK(ct_dataset_records(ten, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "num_fields is 9");
    o = one_field(CT_U8, 5, 1);
    CHECK(ct_dataset_records(ten, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "field 0 has ndim 5; must be 0..4");
    o = one_field(CT_U8, -1, 1);
    CHECK(ct_dataset_records(ten, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "ndim -1");
    o = one_field(CT_U8, 1, -2);
    CHECK(ct_dataset_records(ten, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "field 0 has a negative size -2 in dim 0");
    o = one_field((ct_dtype)42, 1, 1);
    CHECK(ct_dataset_records(ten, &o) == NULL);
    CHECK_ERR(CT_EDTYPE, "field 0 has an invalid dtype (42)");
    o = one_field(CT_F32, 1, 0);
    CHECK(ct_dataset_records(ten, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "empty (0-byte) record");
    o = one_field(CT_F64, 4, INT64_MAX / 2);
    o.fields[0].shape[1] = o.fields[0].shape[2] = o.fields[0].shape[3] = 1 << 20;
    CHECK(ct_dataset_records(ten, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "field 0 is too large");

    o = one_field(CT_U8, 0, 0);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/none.bin", dir);
    CHECK(ct_dataset_records(missing, &o) == NULL);
    CHECK_ERR(CT_EIO, "none.bin: cannot open (No such file or directory)");
    CHECK(ct_dataset_records(dir, &o) == NULL);
    CHECK_ERR(CT_EIO, "not a regular file");
    CHECK(ct_dataset_records(ten, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "options is NULL");
}

/* ---- CSV ------------------------------------------------------------------------ */

static ct_csv_opts csv(bool header, int label) {
    ct_csv_opts o = ct_csv_defaults();
    o.header = header;
    o.label_column = label;
    return o;
}

static void test_csv(void) {
    ct_csv_opts o = csv(false, -1);
    CHECK(o.delimiter == 0 && !o.header && o.label_column == -1 && o.dtype == CT_F32);
    CHECK(!o.finite_only && o.num_classes == 0);
    CHECK(ct_dataset_csv(text_file("ragged.csv", "1,2,3\n4,5,6\n7,8\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "ragged.csv:3: 2 columns, but line 1 has 3");
    CHECK(ct_dataset_csv(text_file("long.csv", "1,2\n4,5,6\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "long.csv:2: 3 columns, but line 1 has 2");
    CHECK(ct_dataset_csv(text_file("nan.csv", "1,2\n3,abc\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "nan.csv:2:2: 'abc' is not a number");
    CHECK(ct_dataset_csv(text_file("num.csv", "1,2\n3,4x\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "num.csv:2:2: '4x' is not a number");
    CHECK(ct_dataset_csv(text_file("comma.csv", "1,2\n3,4,\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "comma.csv:2: 3 columns");
    CHECK(ct_dataset_csv(text_file("gap.csv", "1,,2\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "gap.csv:1:2: empty value");
    CHECK(ct_dataset_csv(text_file("semi.csv", "1;2\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "semi.csv:1:1: '1;2' is not a number");
    CHECK(ct_dataset_csv(text_file("empty.csv", ""), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "empty.csv: no data rows (empty)");
    CHECK(ct_dataset_csv(text_file("blank.csv", "\n  \r\n\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "blank.csv: no data rows");
    o = csv(true, -1);
    CHECK(ct_dataset_csv(text_file("head.csv", "a,b\r\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "head.csv: no data rows");
    /* Line numbers count the header, blank lines and CRLF lines. */
    CHECK(ct_dataset_csv(text_file("lines.csv", "x,y\r\n\r\n1,2\r\n3,4e\r\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "lines.csv:4:2: '4e' is not a number");

    o = csv(false, 1);
    CHECK(ct_dataset_csv(text_file("lab.csv", "1,2\n3,4.5\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "lab.csv:2:2: '4.5' is not an integer label");
    CHECK(ct_dataset_csv(text_file("lab2.csv", "1,1e30\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "lab2.csv:1:2: '1e30' is out of range");
    CHECK(ct_dataset_csv(text_file("lab3.csv", "1,nan\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "'nan' is not an integer label");
    CHECK(ct_dataset_csv(text_file("lab4.csv", "1,cat\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "lab4.csv:1:2: 'cat' is not a number");
    o = csv(false, 2);
    CHECK(ct_dataset_csv(text_file("labcol.csv", "1,2\n"), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "labcol.csv:1: label_column 2 is out of range: the row has 2 columns");
    o = csv(false, -2);
    CHECK(ct_dataset_csv(text_file("ok.csv", "1,2\n"), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "label_column is -2");
    o = csv(false, -1);
    o.delimiter = ';';
    CHECK(ct_dataset_csv(text_file("ok.csv", "1,2\n"), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "delimiter must be ',' or '\\t'");
    o = csv(false, -1);
    o.dtype = (ct_dtype)77;
    CHECK(ct_dataset_csv(text_file("ok.csv", "1,2\n"), &o) == NULL);
    CHECK_ERR(CT_EDTYPE, "dtype 77 is not a dtype");
    o.dtype = CT_U8;
    CHECK(ct_dataset_csv(text_file("u8.csv", "1,256\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "u8.csv:1:2: '256' is out of range for uint8");
    o.dtype = CT_I32;
    CHECK(ct_dataset_csv(text_file("i32.csv", "1,2.5\n"), &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "i32.csv:1:2: '2.5' is not an integer");
    o = csv(false, -1);
    CHECK(ct_csv_parse("1,2\n3,4\0x\n", 10, "nul.csv", &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "nul.csv:2:2: holds a NUL byte");
    CHECK(ct_csv_parse(NULL, 3, "x", &o) == NULL);
    CHECK_ERR(CT_EINVAL, "text is NULL");
    char missing[600];
    snprintf(missing, sizeof missing, "%s/none.csv", dir);
    CHECK(ct_dataset_csv(missing, &o) == NULL);
    CHECK_ERR(CT_EIO, "none.csv: cannot open");

    /* The buffer is not NUL-terminated: parsing stops at len. */
    ct_dataset *d = ct_csv_parse("1,2\n3,4\n5,6", 7, "cut.csv", NULL);
    CHECK(d && ct_dataset_len(d) == 2);
    ct_value *s = ct_dataset_get(d, 1);
    float v[2] = {0, 0};
    CHECK(s && ct_read(ct_batch_tensor(s), v, sizeof v) == 0 && v[0] == 3 && v[1] == 4);
    ct_value_free(s);
    ct_dataset_free(d);
}

/* Feature `col` of sample `row` (the tuple's first element with a label
 * column), widened by ct_item; false when any step fails. */
static bool csv_feature(ct_dataset *d, int64_t row, int64_t col, double *out) {
    ct_value *s = ct_dataset_get(d, row);
    ct_tensor *f = NULL;
    if (s) f = ct_value_kind_of(s) == CT_VALUE_TENSOR ? ct_batch_tensor(s) : ct_batch_at(s, 0);
    ct_tensor *x = f ? ct_select(f, 0, col) : NULL;
    bool ok = x && ct_item(x, out) == 0;
    ct_tensor_free(x);
    ct_value_free(s);
    return ok;
}

static bool csv_label(ct_dataset *d, int64_t row, int64_t *out) {
    ct_value *s = ct_dataset_get(d, row);
    ct_tensor *y = s ? ct_batch_at(s, 1) : NULL;
    bool ok = y && ct_item_int(y, out) == 0;
    ct_value_free(s);
    return ok;
}

/* The same text through both entry points, ct_csv_parse on the buffer and
 * ct_dataset_csv on a file of that name: NULL and the same error, or two
 * datasets; returns the file's, after checking the buffer's is as long. */
static ct_dataset *csv_both(const char *name, const char *text, const ct_csv_opts *o) {
    ct_dataset *from_text = ct_csv_parse(text, strlen(text), name, o);
    char text_error[512];
    snprintf(text_error, sizeof text_error, "%s", ct_last_error());
    int text_code = ct_last_code();
    ct_clear_error();
    ct_dataset *from_file = ct_dataset_csv(text_file(name, text), o);
    CHECK((from_text == NULL) == (from_file == NULL));
    if (from_file) {
        CHECK(from_text && ct_dataset_len(from_text) == ct_dataset_len(from_file));
    } else {
        /* The file's message names its path, which ends with the buffer's name. */
        CHECK(text_code == ct_last_code() && strstr(ct_last_error(), text_error) != NULL);
    }
    ct_dataset_free(from_text);
    return from_file;
}

/* finite_only: each spelling strtod takes for NaN or +-inf, and numbers
 * beyond double, are refused naming the file, line, column and cell; without
 * it they are read as NaN and +-inf. */
static void test_csv_finite(void) {
    static const struct {
        const char *cell;
        double value; /* read without finite_only */
        const char *why;
    } cells[] = {
        {"nan", NAN, "is not finite"},           {"NaN", NAN, "is not finite"},
        {"-nan", NAN, "is not finite"},          {"nan(0x7)", NAN, "is not finite"},
        {"inf", INFINITY, "is not finite"},      {"+Inf", INFINITY, "is not finite"},
        {"-inf", -INFINITY, "is not finite"},    {"infinity", INFINITY, "is not finite"},
        {"-INFINITY", -INFINITY, "is not finite"}, {" inf ", INFINITY, "is not finite"},
        {"1e999", INFINITY, "is out of range for float64"},
        {"-1e999", -INFINITY, "is out of range for float64"},
        {"0x1p2000", INFINITY, "is out of range for float64"},
    };
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
        char text[64], want[128];
        /* Line 3, column 1: the blank line counts. */
        snprintf(text, sizeof text, "1,2\n\n%s,4\n", cells[i].cell);
        ct_csv_opts o = csv(false, -1);
        o.dtype = CT_F64;
        ct_dataset *d = csv_both("finite.csv", text, &o);
        double v = 0;
        CHECK(d && csv_feature(d, 1, 0, &v));
        CHECK(isnan(cells[i].value) ? isnan(v) : v == cells[i].value);
        ct_dataset_free(d);

        o.finite_only = true;
        CHECK(csv_both("finite.csv", text, &o) == NULL);
        const char *trimmed = cells[i].cell[0] == ' ' ? "inf" : cells[i].cell;
        snprintf(want, sizeof want, "finite.csv:3:1: '%s' %s", trimmed, cells[i].why);
        CHECK_ERR(CT_EFORMAT, want);
    }
    /* Finite cells, an underflow to 0 among them, pass. */
    ct_csv_opts o = csv(false, -1);
    o.finite_only = true;
    o.dtype = CT_F64;
    ct_dataset *d = csv_both("fine.csv", "1e-400,-2.5,1e308\n", &o);
    double v[3] = {1, 0, 0};
    CHECK(d && csv_feature(d, 0, 0, &v[0]) && csv_feature(d, 0, 1, &v[1]) &&
          csv_feature(d, 0, 2, &v[2]));
    CHECK(v[0] == 0 && v[1] == -2.5 && v[2] == 1e308);
    ct_dataset_free(d);
    /* Labels and integer dtypes never hold NaN: finite_only changes nothing. */
    o = csv(false, 1);
    o.finite_only = true;
    CHECK(csv_both("labnan.csv", "1,nan\n", &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "labnan.csv:1:2: 'nan' is not an integer label");
    o = csv(false, -1);
    o.finite_only = true;
    o.dtype = CT_I32;
    CHECK(csv_both("intinf.csv", "1,inf\n", &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "intinf.csv:1:2: 'inf' is out of range");
}

/* Narrowing: a finite double that the dtype's tensor would hold as +-inf is
 * refused with finite_only, and only such a value: each cell is read
 * without the option too, and the tensor holds inf exactly when the option
 * refuses it. Float16 and bfloat16 go through float (double rounding). */
static void test_csv_narrowing(void) {
    static const struct {
        ct_dtype dtype;
        const char *cell;
        bool refused;
    } cells[] = {
        {CT_F32, "3.4028234663852886e38", false}, /* FLT_MAX */
        {CT_F32, "3.4028235677973362e38", false}, /* just below FLT_MAX + half an ulp */
        {CT_F32, "3.4028235677973366e38", true},  /* the tie, to even: inf */
        {CT_F32, "1e39", true},
        {CT_F32, "-1e39", true},
        {CT_F32, "1e999", true}, /* beyond double too: the same message */
        {CT_F16, "65504", false},
        {CT_F16, "65519.99", false},
        {CT_F16, "65519.999999046326", true}, /* float rounds it to 65520 */
        {CT_F16, "65520", true},
        {CT_F16, "-65520", true},
        {CT_BF16, "3.3895313892515355e38", false}, /* bfloat16's largest */
        {CT_BF16, "0x1.fefffcp127", false},
        {CT_BF16, "0x1.feffffffffp127", true}, /* float rounds it to the tie */
        {CT_BF16, "0x1.ffp127", true},
        {CT_F64, "1e39", false},
        {CT_F64, "-1.7976931348623157e308", false},
    };
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
        char text[64], want[128];
        snprintf(text, sizeof text, "0,1\n2,%s\n", cells[i].cell);
        ct_csv_opts o = csv(false, -1);
        o.dtype = cells[i].dtype;
        ct_dataset *d = csv_both("narrow.csv", text, &o);
        double v = 0;
        CHECK(d && csv_feature(d, 1, 1, &v) && (isinf(v) != 0) == cells[i].refused);
        if (cells[i].refused) CHECK((v < 0) == (cells[i].cell[0] == '-'));
        ct_dataset_free(d);

        o.finite_only = true;
        d = csv_both("narrow.csv", text, &o);
        if (cells[i].refused) {
            CHECK(d == NULL);
            snprintf(want, sizeof want, "narrow.csv:2:2: '%s' is out of range for %s",
                     cells[i].cell, ct_dtype_name(cells[i].dtype));
            CHECK_ERR(CT_EFORMAT, want);
        } else {
            CHECK(d && csv_feature(d, 1, 1, &v) && isfinite(v));
            ct_dataset_free(d);
        }
    }
}

/* num_classes: labels outside [0, num_classes) are refused at load, naming
 * the line, the label column and the value; 0 checks nothing. */
static void test_csv_labels(void) {
    ct_csv_opts o = csv(false, 1);
    o.num_classes = 2;
    ct_dataset *d = csv_both("lab.csv", "0.5,1\n0.25,0\n-1,1.0\n", &o);
    int64_t y[3] = {-1, -1, -1};
    CHECK(d && csv_label(d, 0, &y[0]) && csv_label(d, 1, &y[1]) && csv_label(d, 2, &y[2]));
    CHECK(y[0] == 1 && y[1] == 0 && y[2] == 1);
    ct_dataset_free(d);
    CHECK(csv_both("lab.csv", "0.5,1\n0.25,7\n", &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "lab.csv:2:2: '7' is out of range [0, 2) for num_classes 2");
    CHECK(csv_both("lab.csv", "0.5,2\n", &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "lab.csv:1:2: '2' is out of range [0, 2) for num_classes 2");
    CHECK(csv_both("lab.csv", "0.5,1\n0.5,-1\n", &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "lab.csv:2:2: '-1' is out of range [0, 2) for num_classes 2");
    CHECK(csv_both("lab.csv", "0.5,-100\n", &o) == NULL); /* ignore_index too */
    CHECK_ERR(CT_EFORMAT, "lab.csv:1:2: '-100' is out of range [0, 2) for num_classes 2");
    /* The label column first, after a header and a blank line: line 4. */
    o = csv(true, 0);
    o.num_classes = 3;
    CHECK(csv_both("lab0.csv", "y,x\n\n2,0.5\n3e0,0.5\n", &o) == NULL);
    CHECK_ERR(CT_EFORMAT, "lab0.csv:4:1: '3e0' is out of range [0, 3) for num_classes 3");

    /* num_classes 0: any int64 label, negative ones included (ignore_index). */
    o = csv(false, 1);
    d = csv_both("lab.csv", "0.5,7\n0.25,-100\n", &o);
    CHECK(d && csv_label(d, 0, &y[0]) && csv_label(d, 1, &y[1]));
    CHECK(y[0] == 7 && y[1] == -100);
    ct_dataset_free(d);

    o.num_classes = -1;
    CHECK(csv_both("lab.csv", "0.5,1\n", &o) == NULL);
    CHECK_ERR(CT_EINVAL, "lab.csv: num_classes is -1; must be > 0, or 0: unchecked");
    o = csv(false, -1);
    o.num_classes = 2;
    CHECK(csv_both("lab.csv", "0.5,1\n", &o) == NULL);
    CHECK_ERR(CT_EINVAL, "lab.csv: num_classes is 2, but label_column is -1: no labels to check");
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ct_dataset_errors_XXXXXX");
    if (!mkdtemp(dir)) return 2;
    size_t live = ct_tensor_live_count();
    test_idx_parse();
    test_idx_read();
    test_mnist();
    test_records();
    test_csv();
    test_csv_finite();
    test_csv_narrowing();
    test_csv_labels();
    CHECK(ct_tensor_live_count() == live);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ct_test_result("dataset_errors");
}
