/* tests/vision/dump_write.h — the records the vision dump programs write
 * for their Python drivers (read back by vision_dump.py), host byte order:
 *   'T' int32 dtype, int32 ndim, int64 shape[ndim], int64 stride[ndim],
 *       int64 nbytes, the elements C-contiguous (a tensor)
 *   'E' int32 code, int32 n, n bytes (an error: ct_last_code, ct_last_error)
 *   'S' int32 n, n bytes (a string)
 *   'I' int64 (an integer) */
#ifndef CT_TEST_DUMP_WRITE_H
#define CT_TEST_DUMP_WRITE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

static inline void dump_bytes(FILE *f, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "dump: write failed\n");
        exit(2);
    }
}

static inline void dump_int(FILE *f, int64_t v) {
    dump_bytes(f, "I", 1);
    dump_bytes(f, &v, sizeof v);
}

static inline void dump_str(FILE *f, const char *s) {
    int32_t n = (int32_t)strlen(s);
    dump_bytes(f, "S", 1);
    dump_bytes(f, &n, sizeof n);
    dump_bytes(f, s, (size_t)n);
}

static inline void dump_error(FILE *f) {
    int32_t code = ct_last_code(), n = (int32_t)strlen(ct_last_error());
    dump_bytes(f, "E", 1);
    dump_bytes(f, &code, sizeof code);
    dump_bytes(f, &n, sizeof n);
    dump_bytes(f, ct_last_error(), (size_t)n);
    ct_clear_error();
}

/* t's dtype, shape and strides as they are, then its elements in C order. */
static inline void dump_tensor(FILE *f, const ct_tensor *t) {
    int32_t dtype = (int32_t)ct_dtype_of(t), ndim = ct_ndim(t);
    dump_bytes(f, "T", 1);
    dump_bytes(f, &dtype, sizeof dtype);
    dump_bytes(f, &ndim, sizeof ndim);
    for (int i = 0; i < ndim; i++) {
        int64_t s = ct_size(t, i);
        dump_bytes(f, &s, sizeof s);
    }
    for (int i = 0; i < ndim; i++) {
        int64_t s = ct_stride(t, i);
        dump_bytes(f, &s, sizeof s);
    }
    int64_t nbytes = ct_numel(t) * (int64_t)ct_dtype_size(ct_dtype_of(t));
    void *buf = malloc(nbytes ? (size_t)nbytes : 1);
    if (!buf || ct_read(t, buf, (size_t)nbytes) != 0) {
        fprintf(stderr, "dump: cannot read a tensor: %s\n", ct_last_error());
        exit(2);
    }
    dump_bytes(f, &nbytes, sizeof nbytes);
    dump_bytes(f, buf, (size_t)nbytes);
    free(buf);
}

#endif
