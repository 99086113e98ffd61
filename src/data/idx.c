/* src/data/idx.c — IDX files (MNIST's format) as tensors, and the MNIST
 * dataset (data.h).
 *
 * The file format itself, header checks and byte order, is
 * formats/idx.c's, in pure C; this file gives its results tensors: the
 * header's shape and dtype make an empty tensor, and the values are decoded
 * straight into the tensor's memory, the only copy of them made.
 */
#include "ctrial/data.h"

#include <inttypes.h>
#include <stdlib.h>

#include "base/files.h"
#include "data/dataset.h"
#include "formats/idx.h"

ct_tensor *ct_idx_parse(const void *data, size_t size, const char *name) {
    if (!name) name = "<IDX buffer>";
    if (!data && size > 0) {
        ct_set_error(CT_EINVAL, "ct_idx_parse: data is NULL");
        return NULL;
    }
    cti_idx_header h;
    if (cti_idx_parse_header(data, size, name, &h)) return NULL;
    ct_tensor *t = ct_empty(h.ndim, h.dims, &(ct_topts){.dtype = h.dtype});
    if (!t || h.nbytes == 0) return t;
    void *dst = ct_data_ptr(t);
    if (!dst) {
        ct_tensor_free(t);
        return NULL;
    }
    cti_idx_decode(&h, data, dst);
    return t;
}

ct_tensor *ct_idx_read(const char *path) {
    if (!path) {
        ct_set_error(CT_EINVAL, "ct_idx_read: path is NULL");
        return NULL;
    }
    unsigned char *data;
    size_t size;
    if (cti_read_file(path, &data, &size)) return NULL;
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
            d = cti_ds_tensors_take(2, ts, true, "ct_dataset_mnist");
        } else {
            ct_tensor_free(ts[0]);
            ct_tensor_free(ts[1]);
        }
    }
    ct_tensor_free(images);
    ct_tensor_free(labels);
    return d;
}
