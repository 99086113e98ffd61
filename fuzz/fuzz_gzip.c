/* libFuzzer target: the gzip layer every data file goes through
 * (cti_read_file, module base: IDX and CSV files, plain or .gz), with no
 * libtorch. Each input is read three ways, from a scratch file:
 *  - as it is: bytes that do not start with gzip's magic (1f 8b) come back
 *    unchanged; bytes that do either decompress or fail with CT_EFORMAT
 *    (CT_ENOMEM aside) naming the file;
 *  - gzip-compressed here (zlib's deflate with a gzip wrapper): it comes
 *    back equal to the input, byte for byte;
 *  - that compressed file cut short at a point the input picks: never a
 *    success, always CT_EFORMAT naming the file (a truncated download is
 *    an error, not a shorter dataset).
 * Built by fuzz/CMakeLists.txt, run by fuzz/run.sh. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) abort();
}

/* The input gzip-compressed (a malloc'd buffer, *n bytes). */
static unsigned char *gzip(const uint8_t *data, size_t size, size_t *n) {
    z_stream z = {0};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
    size_t cap = deflateBound(&z, size) + 32;
    unsigned char *out = malloc(cap);
    if (!out) abort();
    z.next_in = (unsigned char *)data;
    z.avail_in = (uInt)size;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) abort();
    *n = z.total_out;
    deflateEnd(&z);
    return out;
}

/* cti_read_file on path: 0 and the bytes, or its code (and a message naming
 * the file). */
static int read_back(const char *path, unsigned char **out, size_t *n) {
    *out = NULL;
    int rc = cti_read_file(path, out, n);
    if (rc) {
        if (*out) abort(); /* nothing comes out of a failure */
        if (rc != ct_last_code() || !strstr(ct_last_error(), path)) abort();
        ct_clear_error();
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_gzip_%ld.gz", (long)getpid());
    unsigned char *got;
    size_t n;

    write_file(path, data, size);
    int rc = read_back(path, &got, &n);
    bool magic = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    if (!magic && (rc || n != size || memcmp(got, data, size) != 0)) abort();
    if (rc && rc != CT_EFORMAT && rc != CT_ENOMEM) abort();
    free(got);

    size_t zn;
    unsigned char *z = gzip(data, size, &zn);
    write_file(path, z, zn);
    if (read_back(path, &got, &n) || n != size || (size && memcmp(got, data, size) != 0)) abort();
    free(got);

    /* Cut somewhere past the magic (shorter is no longer gzip data at all). */
    size_t cut = 2 + (size ? data[0] | (size_t)data[size - 1] << 8 : 0) % (zn - 2);
    write_file(path, z, cut);
    rc = read_back(path, &got, &n);
    if (rc != CT_EFORMAT) abort();
    free(z);
    unlink(path);
    return 0;
}
