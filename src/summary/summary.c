/* src/summary/summary.c — ctrial/summary.h: torch.utils.tensorboard's
 * SummaryWriter over tensors. Internal to ctrial.
 *
 * The records themselves are src/formats/tbevents.c's (pure C, over plain
 * arrays); this file turns tensors into those arrays as torch's
 * add_histogram and add_image turn them into numpy arrays: a histogram's
 * values flattened to float64, an image's CHW tensor read back as HWC bytes
 * with torch's scaling of non-uint8 pixels and its gray-to-RGB repeat.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "ctrial/summary.h"

#include <limits.h>
#include <stdbool.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/error.h"
#include "ctrial/tensor.h"
#include "formats/tbevents.h"

struct ct_summary_writer {
    cti_tb_writer *tb;
};

/* The event file's suffix: apart from the loop's own file ("" suffix) in the
 * same directory. */
static const char summary_suffix[] = ".summary";

/* A failure of ct_tb_<x> reported under the public name: "cti_tb_add_image:
 * ..." becomes "ct_summary_add_image: ...". Returns the code. */
static int rename_error(int code, const char *tb_fn, const char *fn) {
    const char *msg = ct_last_error();
    size_t n = strlen(tb_fn);
    if (strncmp(msg, tb_fn, n) != 0) return code;
    char *copy = strdup(msg + n);
    if (!copy) return code;
    ct_set_error(code, "%s%s", fn, copy);
    free(copy);
    return code;
}

ct_summary_writer *ct_summary_open(const char *logdir) {
    static const char fn[] = "ct_summary_open";
    ct_summary_writer *w = malloc(sizeof *w);
    if (!w) {
        ct_set_error(CT_ENOMEM, "%s: out of memory", fn);
        return NULL;
    }
    w->tb = cti_tb_open(logdir, summary_suffix);
    if (!w->tb) {
        rename_error(ct_last_code(), "cti_tb_open", fn);
        free(w);
        return NULL;
    }
    return w;
}

const char *ct_summary_path(const ct_summary_writer *w) {
    return w ? cti_tb_path(w->tb) : NULL;
}

int ct_summary_add_scalar(ct_summary_writer *w, const char *tag, double value, int64_t step) {
    if (!w) return 0;
    int rc = cti_tb_add_scalar(w->tb, tag, value, step, 0);
    return rc ? rename_error(rc, "cti_tb_add_scalar", "ct_summary_add_scalar") : 0;
}

/* The tensor's elements as a NEW host array of `dtype` (C order of the
 * dimensions listed in perm, or of t's own when perm is NULL), detached from
 * autograd; *n is the element count. Temporaries live in a scope of their
 * own. */
static int read_as(const ct_tensor *t, ct_dtype dtype, const int64_t *perm, void **out, size_t *n,
                   const char *fn, const char *tag) {
    int64_t numel = ct_numel(t);
    if (numel < 0) return ct_set_error(CT_EINVAL, "%s: tag \"%s\": the tensor is not valid", fn, tag);
    size_t size = ct_dtype_size(dtype);
    if ((uint64_t)numel > SIZE_MAX / size)
        return ct_set_error(CT_ENOMEM, "%s: tag \"%s\": %lld elements are too many", fn, tag,
                            (long long)numel);
    *n = (size_t)numel;
    *out = malloc(*n ? *n * size : 1);
    if (!*out)
        return ct_set_error(CT_ENOMEM, "%s: tag \"%s\": out of memory for %lld elements", fn, tag,
                            (long long)numel);
    if (*n == 0) return 0;
    ct_scope *s = ct_scope_begin();
    ct_tensor *x = ct_detach(t);
    /* torch's make_np: bfloat16 becomes float16 first (numpy has no
     * bfloat16), which turns values beyond +-65504 into +-inf. */
    if (x && ct_dtype_of(x) == CT_BF16 && dtype != CT_BF16) x = ct_to_dtype(x, CT_F16);
    if (x && ct_dtype_of(x) != dtype) x = ct_to_dtype(x, dtype);
    if (x && perm) x = ct_permute(x, ct_ndim(t), perm);
    int rc = x ? ct_read(x, *out, *n * size) : ct_last_code();
    if (rc < 0) rc = ct_set_error(rc, "%s: tag \"%s\": %s", fn, tag, ct_last_error());
    ct_scope_end(s);
    if (rc < 0) {
        free(*out);
        *out = NULL;
    }
    return rc < 0 ? rc : 0;
}

int ct_summary_add_histogram(ct_summary_writer *w, const char *tag, const ct_tensor *values,
                             int64_t step) {
    static const char fn[] = "ct_summary_add_histogram";
    if (!w) return 0;
    const char *name = tag ? tag : "(null)";
    if (!values) return ct_set_error(CT_EINVAL, "%s: tag \"%s\": values is NULL", fn, name);
    void *data;
    size_t n;
    int rc = read_as(values, CT_F64, NULL, &data, &n, fn, name);
    if (rc) return rc;
    rc = cti_tb_add_histogram(w->tb, tag, data, n, step, 0);
    free(data);
    return rc ? rename_error(rc, "cti_tb_add_histogram", fn) : 0;
}

/* torch's image(): numpy's (x.astype(float32) * 255).clip(0, 255)
 * .astype(uint8), the product rounded to float32, the cast truncating
 * toward zero; NaN (which numpy's cast leaves undefined, 0 on x86) is 0. */
static uint8_t scale_pixel(float f) {
    float v = f * 255.0f;
    if (!(v > 0.0f)) return 0; /* also NaN */
    if (v >= 255.0f) return 255;
    return (uint8_t)v;
}

int ct_summary_add_image(ct_summary_writer *w, const char *tag, const ct_tensor *img,
                         int64_t step) {
    static const char fn[] = "ct_summary_add_image";
    if (!w) return 0;
    const char *name = tag ? tag : "(null)";
    if (!img) return ct_set_error(CT_EINVAL, "%s: tag \"%s\": img is NULL", fn, name);
    int ndim = ct_ndim(img);
    if (ndim != 2 && ndim != 3) {
        char desc[128];
        ct_describe(img, desc, sizeof desc);
        return ct_set_error(CT_EINVAL,
                            "%s: tag \"%s\": an image is C x H x W (or H x W), not %s", fn, name,
                            desc);
    }
    int64_t shape[3] = {0, 0, 0};
    ct_shape(img, shape, 3);
    int64_t c = ndim == 3 ? shape[0] : 1, h = shape[ndim - 2], wd = shape[ndim - 1];
    if (c != 1 && c != 3 && c != 4)
        return ct_set_error(CT_EINVAL,
                            "%s: tag \"%s\": %lld channels (shape [%lld, %lld, %lld]): an image "
                            "has 1 (gray), 3 (RGB) or 4 (RGBA) in dim 0 (CHW)",
                            fn, name, (long long)c, (long long)c, (long long)h, (long long)wd);
    if (h < 1 || wd < 1 || h > INT_MAX || wd > INT_MAX)
        return ct_set_error(CT_EINVAL, "%s: tag \"%s\": image size %lld x %lld: each must be in [1, %d]",
                            fn, name, (long long)h, (long long)wd, INT_MAX);

    /* C x H x W read back as H x W x C (a 2-D image is its own HWC). */
    bool u8 = ct_dtype_of(img) == CT_U8;
    void *data;
    size_t n;
    int rc = read_as(img, u8 ? CT_U8 : CT_F32, ndim == 3 ? (const int64_t[]){1, 2, 0} : NULL, &data,
                     &n, fn, name);
    if (rc) return rc;
    /* Pixels, gray repeated into RGB as torch's convert_to_HWC does. */
    size_t out_c = c == 1 ? 3 : (size_t)c, pixels = n / (size_t)c;
    uint8_t *px = malloc(pixels * out_c);
    if (!px) {
        free(data);
        return ct_set_error(CT_ENOMEM, "%s: tag \"%s\": out of memory", fn, name);
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t v = u8 ? ((const uint8_t *)data)[i] : scale_pixel(((const float *)data)[i]);
        if (c == 1) px[3 * i] = px[3 * i + 1] = px[3 * i + 2] = v;
        else px[i] = v;
    }
    free(data);
    rc = cti_tb_add_image(w->tb, tag, px, (int)h, (int)wd, (int)out_c, step, 0);
    free(px);
    return rc ? rename_error(rc, "cti_tb_add_image", fn) : 0;
}

int ct_summary_add_text(ct_summary_writer *w, const char *tag, const char *text, int64_t step) {
    if (!w) return 0;
    int rc = cti_tb_add_text(w->tb, tag, text, step, 0);
    return rc ? rename_error(rc, "cti_tb_add_text", "ct_summary_add_text") : 0;
}

int ct_summary_flush(ct_summary_writer *w) {
    if (!w) return 0;
    int rc = cti_tb_flush(w->tb);
    return rc ? rename_error(rc, "cti_tb_flush", "ct_summary_flush") : 0;
}

int ct_summary_close(ct_summary_writer *w) {
    if (!w) return 0;
    int rc = ct_summary_flush(w);
    cti_tb_close(w->tb);
    free(w);
    return rc;
}
