/* src/idx.c — IDX files (MNIST's format) and the MNIST dataset (data.h).
 *
 * An IDX file is a 4-byte magic (0, 0, type code, number of dims), one
 * big-endian uint32 size per dim, then the values, big-endian, C order. The
 * header is untrusted input: its sizes are multiplied with overflow checks
 * and compared with the bytes actually present before anything is
 * allocated, so a damaged or hostile header costs nothing but an error.
 */
#include "ctrial/data.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "data/dataset.h"

enum { IDX_MAX_DIMS = 8 };

static const struct {
    unsigned char code;
    ct_dtype dtype;
} idx_types[] = {
    {0x08, CT_U8}, {0x09, CT_I8}, {0x0B, CT_I16}, {0x0C, CT_I32}, {0x0D, CT_F32}, {0x0E, CT_F64},
};


/* ---- parsing --------------------------------------------------------------- */

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

/* Big-endian values to host order. Assembling each value as an unsigned
 * integer and copying its bytes works whatever the host's byte order, for
 * the floating types too. */
static void copy_be(unsigned char *dst, const unsigned char *src, size_t count, size_t esize) {
    switch (esize) {
    case 1:
        memcpy(dst, src, count);
        break;
    case 2:
        for (size_t i = 0; i < count; i++, src += 2, dst += 2) {
            uint16_t v = (uint16_t)(src[0] << 8 | src[1]);
            memcpy(dst, &v, 2);
        }
        break;
    case 4:
        for (size_t i = 0; i < count; i++, src += 4, dst += 4) {
            uint32_t v = be32(src);
            memcpy(dst, &v, 4);
        }
        break;
    default: /* 8 */
        for (size_t i = 0; i < count; i++, src += 8, dst += 8) {
            uint64_t v = (uint64_t)be32(src) << 32 | be32(src + 4);
            memcpy(dst, &v, 8);
        }
        break;
    }
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
    if (*ndim < 1 || *ndim > IDX_MAX_DIMS)
        return ct_set_error(CT_EFORMAT,
                            "%s: magic 0x%08" PRIX32 " gives %d dimensions; supported are 1 to %d",
                            name, magic, *ndim, IDX_MAX_DIMS);
    return 0;
}

ct_tensor *ct_idx_parse(const void *data, size_t size, const char *name) {
    if (!name) name = "<IDX buffer>";
    if (!data && size > 0) {
        ct_set_error(CT_EINVAL, "ct_idx_parse: data is NULL");
        return NULL;
    }
    const unsigned char *p = data;
    ct_dtype dtype = CT_U8;
    int ndim = 0;
    if (parse_magic(p, size, name, &dtype, &ndim)) return NULL;
    size_t header = 4 + 4 * (size_t)ndim;
    if (size < header) {
        ct_set_error(CT_EFORMAT,
                     "%s: header ends early: %d dimensions need %zu header bytes, the file has %zu",
                     name, ndim, header, size);
        return NULL;
    }
    int64_t dims[IDX_MAX_DIMS];
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
        if (elems > (uint64_t)INT64_MAX / d) {
            ct_set_error(CT_EFORMAT, "%s: dimensions %s are too large for a tensor: their product "
                         "overflows 64 bits", name, fmt_dims(shape, sizeof shape, ndim, dims));
            return NULL;
        }
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
        ct_set_error(CT_EFORMAT,
                     "%s: %s: holds %zu bytes of data, its header promises %s (%s of %zu-byte %s)",
                     name, !fits || need > avail ? "truncated" : "trailing bytes", avail, promised,
                     fmt_dims(shape, sizeof shape, ndim, dims), esize, ct_dtype_name(dtype));
        return NULL;
    }
    ct_tensor *t = ct_empty(ndim, dims, &(ct_topts){.dtype = dtype});
    if (!t || need == 0) return t;
    unsigned char *dst = ct_data_ptr(t);
    if (!dst) {
        ct_tensor_free(t);
        return NULL;
    }
    copy_be(dst, p + header, (size_t)need / esize, esize);
    return t;
}

ct_tensor *ct_idx_read(const char *path) {
    if (!path) {
        ct_set_error(CT_EINVAL, "ct_idx_read: path is NULL");
        return NULL;
    }
    unsigned char *data;
    size_t size;
    if (ct_read_file(path, &data, &size)) return NULL;
    ct_tensor *t = ct_idx_parse(data, size, path);
    free(data);
    return t;
}

/* ---- MNIST ------------------------------------------------------------------- */

static bool is_integer_dtype(ct_dtype d) {
    return d == CT_U8 || d == CT_I8 || d == CT_I16 || d == CT_I32 || d == CT_I64;
}

/* torchvision's ToTensor on a uint8 image: float32, divided by 255, with
 * the channel dim in front: [N, H, W] -> [N, 1, H, W]. */
static ct_tensor *to_unit_float(const ct_tensor *images) {
    ct_tensor *f = ct_to_dtype(images, CT_F32);
    ct_tensor *scaled = ct_div_scalar(f, 255.0);
    ct_tensor_free(f);
    ct_tensor *out = ct_unsqueeze(scaled, 1);
    ct_tensor_free(scaled);
    return out;
}

ct_dataset *ct_dataset_mnist(const char *images_path, const char *labels_path) {
    if (!images_path || !labels_path) {
        ct_set_error(CT_EINVAL, "ct_dataset_mnist: %s is NULL",
                     !images_path ? "images_path" : "labels_path");
        return NULL;
    }
    ct_tensor *images = ct_idx_read(images_path);
    if (!images) return NULL;
    char desc[96];
    ct_describe(images, desc, sizeof desc);
    if (ct_dtype_of(images) != CT_U8 || ct_ndim(images) != 3) {
        ct_set_error(CT_EFORMAT,
                     "ct_dataset_mnist: %s holds %s; MNIST images are uint8 [N, H, W] "
                     "(an idx3-ubyte file)",
                     images_path, desc);
        ct_tensor_free(images);
        return NULL;
    }
    ct_tensor *labels = ct_idx_read(labels_path);
    if (!labels) {
        ct_tensor_free(images);
        return NULL;
    }
    ct_describe(labels, desc, sizeof desc);
    ct_dataset *d = NULL;
    if (!is_integer_dtype(ct_dtype_of(labels)) || ct_ndim(labels) != 1) {
        ct_set_error(CT_EFORMAT,
                     "ct_dataset_mnist: %s holds %s; MNIST labels are integers [N] "
                     "(an idx1-ubyte file)",
                     labels_path, desc);
    } else if (ct_size(labels, 0) != ct_size(images, 0)) {
        ct_set_error(CT_EFORMAT, "ct_dataset_mnist: %s holds %" PRId64 " images but %s holds %" PRId64
                     " labels",
                     images_path, ct_size(images, 0), labels_path, ct_size(labels, 0));
    } else {
        ct_tensor *ts[2] = {to_unit_float(images), ct_to_dtype(labels, CT_I64)};
        if (ts[0] && ts[1]) {
            d = ct_ds_tensors_take(2, ts, true, "ct_dataset_mnist");
        } else {
            ct_tensor_free(ts[0]);
            ct_tensor_free(ts[1]);
        }
    }
    ct_tensor_free(images);
    ct_tensor_free(labels);
    return d;
}
