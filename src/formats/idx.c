/* src/formats/idx.c — the IDX header and values (see idx.h).
 *
 * Every message names the file and says what the header claims against
 * what the file holds; data/idx.c passes them on to ct_idx_parse's callers
 * unchanged, and tests/datasets checks their texts.
 */
#include "formats/idx.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/error.h"

static const struct {
    unsigned char code;
    ct_dtype dtype;
} idx_types[] = {
    {0x08, CT_U8}, {0x09, CT_I8}, {0x0B, CT_I16}, {0x0C, CT_I32}, {0x0D, CT_F32}, {0x0E, CT_F64},
};

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* "[60000, 28, 28]" into buf. */
static const char *fmt_dims(char *buf, size_t len, int ndim, const int64_t *dims) {
    size_t at = 0;
    at += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, i ? ", " : "", dims[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
    return buf;
}

/* The dtype of a type code, or -1. */
static int idx_dtype(unsigned char code, ct_dtype *out) {
    for (size_t i = 0; i < sizeof idx_types / sizeof idx_types[0]; i++) {
        if (idx_types[i].code == code) {
            *out = idx_types[i].dtype;
            return 0;
        }
    }
    return -1;
}

/* Checks the magic; sets *dtype and *ndim. */
static int parse_magic(const unsigned char *p, size_t size, const char *name, ct_dtype *dtype,
                       int *ndim) {
    if (size == 0)
        return ct_set_error(CT_EFORMAT, "%s: empty file (an IDX file starts with a 4-byte magic)",
                            name);
    if (size < 4)
        return ct_set_error(CT_EFORMAT, "%s: only %zu bytes, too short for an IDX magic (4 bytes)",
                            name, size);
    uint32_t magic = be32(p);
    if (p[0] != 0 || p[1] != 0)
        return ct_set_error(CT_EFORMAT,
                            "%s: wrong magic 0x%08" PRIX32 "; expected 0x0000TTNN (two zero bytes, "
                            "type code TT such as 08, NN dimensions): not an IDX file",
                            name, magic);
    if (idx_dtype(p[2], dtype) != 0)
        return ct_set_error(CT_EFORMAT,
                            "%s: unknown type code 0x%02X in magic 0x%08" PRIX32 " (IDX knows 0x08 "
                            "uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64)",
                            name, p[2], magic);
    *ndim = p[3];
    if (*ndim < 1 || *ndim > CT_IDX_MAX_DIMS)
        return ct_set_error(CT_EFORMAT,
                            "%s: magic 0x%08" PRIX32 " gives %d dimensions; supported are 1 to %d",
                            name, magic, *ndim, CT_IDX_MAX_DIMS);
    return 0;
}

int cti_idx_parse_header(const void *data, size_t size, const char *name, cti_idx_header *out) {
    const unsigned char *p = data;
    ct_dtype dtype = CT_U8;
    int ndim = 0;
    if (parse_magic(p, size, name, &dtype, &ndim)) return ct_last_code();
    size_t header = 4 + 4 * (size_t)ndim;
    if (size < header)
        return ct_set_error(CT_EFORMAT,
                            "%s: header ends early: %d dimensions need %zu header bytes, the file has %zu",
                            name, ndim, header, size);
    int64_t dims[CT_IDX_MAX_DIMS];
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        dims[i] = be32(p + 4 + 4 * i);
        if (dims[i] == 0) empty = true;
    }
    /* A header may claim 2^32-1 in every dim: multiply with overflow checks.
     * Even when a zero dim empties the tensor, the others must fit a
     * tensor's int64 strides (products of the sizes, zeros counted as 1). */
    char shape[160];
    uint64_t elems = 1;
    for (int i = 0; i < ndim; i++) {
        uint64_t d = dims[i] ? (uint64_t)dims[i] : 1;
        if (elems > (uint64_t)INT64_MAX / d)
            return ct_set_error(CT_EFORMAT, "%s: dimensions %s are too large for a tensor: their "
                                "product overflows 64 bits",
                                name, fmt_dims(shape, sizeof shape, ndim, dims));
        elems *= d;
    }
    if (empty) elems = 0;
    size_t esize = ct_dtype_size(dtype), avail = size - header;
    bool fits = elems <= UINT64_MAX / esize;
    uint64_t need = fits ? elems * esize : 0;
    if (!fits || need != avail) {
        char promised[40];
        if (fits) snprintf(promised, sizeof promised, "%" PRIu64, need);
        else snprintf(promised, sizeof promised, "more than 2^64");
        return ct_set_error(CT_EFORMAT,
                            "%s: %s: holds %zu bytes of data, its header promises %s (%s of %zu-byte %s)",
                            name, !fits || need > avail ? "truncated" : "trailing bytes", avail,
                            promised, fmt_dims(shape, sizeof shape, ndim, dims), esize,
                            ct_dtype_name(dtype));
    }
    /* need == avail: the byte and element counts fit size_t from here on. */
    *out = (cti_idx_header){.dtype = dtype, .ndim = ndim, .numel = (size_t)elems,
                           .offset = header, .nbytes = (size_t)need};
    memcpy(out->dims, dims, (size_t)ndim * sizeof dims[0]);
    return 0;
}

/* Assembling each value as an unsigned integer and copying its bytes works
 * whatever the host's byte order, for the floating types too. */
void cti_idx_decode(const cti_idx_header *h, const void *data, void *dst) {
    if (h->numel == 0) return; /* dst may be NULL, which memcpy must not see */
    const unsigned char *src = (const unsigned char *)data + h->offset;
    unsigned char *out = dst;
    size_t count = h->numel;
    switch (ct_dtype_size(h->dtype)) {
    case 1:
        memcpy(out, src, count);
        break;
    case 2:
        for (size_t i = 0; i < count; i++, src += 2, out += 2) {
            uint16_t v = (uint16_t)(src[0] << 8 | src[1]);
            memcpy(out, &v, 2);
        }
        break;
    case 4:
        for (size_t i = 0; i < count; i++, src += 4, out += 4) {
            uint32_t v = be32(src);
            memcpy(out, &v, 4);
        }
        break;
    default: /* 8 */
        for (size_t i = 0; i < count; i++, src += 8, out += 8) {
            uint64_t v = (uint64_t)be32(src) << 32 | be32(src + 4);
            memcpy(out, &v, 8);
        }
        break;
    }
}

int cti_idx_parse_values(const void *data, size_t size, const char *name, cti_idx_header *h,
                        void **values) {
    *values = NULL;
    if (cti_idx_parse_header(data, size, name, h)) return ct_last_code();
    if (h->nbytes == 0) return 0;
    void *buf = malloc(h->nbytes);
    if (!buf)
        return ct_set_error(CT_ENOMEM, "%s: out of host memory for %zu bytes of values", name,
                            h->nbytes);
    cti_idx_decode(h, data, buf);
    *values = buf;
    return 0;
}
