/* src/vision/transforms.c — torchvision.transforms.v2 on images [.., C, H, W]
 * and on an image with its segmentation mask (vision.h), and
 * ct_dataset_transform / ct_dataset_transform_pair.
 *
 * Each transform is written as torchvision's tensor kernel is: the same
 * ATen operators (called by name, ops.h) in the same order on tensors of
 * the same dtype and layout, so that the pixels come out the same. Where
 * torchvision does something in place (`x.sub_(y)`), the out-of-place
 * operator here computes the same values. Random parameters follow each
 * transform's make_params, drawing from the record's ct_rng with the same
 * operators (uniform_, randint, rand, randperm) in the same order, so that
 * torch.manual_seed(s) before a v2 transform in Python draws what
 * ct_rng_new(s) draws here. An image with its mask draws each step's
 * parameters once, the image alone's draws, and moves the mask's pixels
 * with them (apply_joint), as v2 does for (image, tv_tensors.Mask).
 *
 * A call runs inside a scope of its own: the intermediates die with it and
 * only the result leaves (ct_scope_return).
 */
#include "ctrial/vision.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/ops.h"
#include "data/pool.h"
#include "vision/folder.h"
#include "vision/image.h"

typedef enum {
    TF_RESIZE,
    TF_CENTER_CROP,
    TF_RANDOM_RESIZED_CROP,
    TF_RANDOM_CROP,
    TF_HFLIP,
    TF_COLOR_JITTER,
    TF_TO_TENSOR,
    TF_NORMALIZE,
    TF_COMPOSE,
} tf_kind;

struct ct_transform {
    tf_kind kind;
    int64_t h, w, max_size;
    double scale[2], ratio[2];     /* RandomResizedCrop */
    double p;                      /* RandomHorizontalFlip */
    double jitter[4][2];           /* ColorJitter ranges: brightness, contrast, saturation, hue */
    bool jitter_on[4];
    ct_crop_padding pad;           /* RandomCrop */
    double mask_fill;              /* RandomCrop: a mask's constant padding (ct_transform_apply_pair) */
    int n;                         /* Normalize: channels; Compose: parts */
    double *mean, *std;
    ct_transform **parts;
};

static const char *const tf_names[] = {"Resize", "CenterCrop", "RandomResizedCrop", "RandomCrop",
                                       "RandomHorizontalFlip", "ColorJitter", "ToTensor", "Normalize",
                                       "Compose"};

static ct_transform *tf_new(tf_kind kind) {
    ct_transform *t = calloc(1, sizeof *t);
    if (!t) ct_set_error(CT_ENOMEM, "ct_tf_%s: out of host memory", tf_names[kind]);
    else t->kind = kind;
    return t;
}

static ct_transform *bad_arg(const char *fn, const char *what) {
    ct_set_error(CT_EINVAL, "%s: %s", fn, what);
    return NULL;
}

/* ==== constructors ========================================================= */

ct_transform *ct_tf_resize(int64_t h, int64_t w, int64_t max_size) {
    if (h < 1 || w < 0) return bad_arg("ct_tf_resize", "the size must be positive (w 0: the smaller edge to h)");
    if (max_size < 0 || (max_size > 0 && (w > 0 || max_size <= h)))
        return bad_arg("ct_tf_resize", w > 0 ? "max_size applies only to a smaller-edge resize (w 0)"
                                             : "max_size must be greater than the smaller edge's size h");
    ct_transform *t = tf_new(TF_RESIZE);
    if (t) {
        t->h = h;
        t->w = w;
        t->max_size = max_size;
    }
    return t;
}

ct_transform *ct_tf_center_crop(int64_t h, int64_t w) {
    if (h < 1 || w < 1) return bad_arg("ct_tf_center_crop", "the crop's size must be positive");
    ct_transform *t = tf_new(TF_CENTER_CROP);
    if (t) {
        t->h = h;
        t->w = w;
    }
    return t;
}

ct_transform *ct_tf_random_resized_crop(int64_t h, int64_t w, double scale_lo, double scale_hi,
                                        double ratio_lo, double ratio_hi) {
    const char *fn = "ct_tf_random_resized_crop";
    if (h < 1 || w < 1) return bad_arg(fn, "the output size must be positive");
    if (!(scale_lo > 0 && scale_lo <= scale_hi))
        return bad_arg(fn, "scale must be (min, max) with 0 < min <= max");
    if (!(ratio_lo > 0 && ratio_lo <= ratio_hi))
        return bad_arg(fn, "ratio must be (min, max) with 0 < min <= max");
    ct_transform *t = tf_new(TF_RANDOM_RESIZED_CROP);
    if (t) {
        t->h = h;
        t->w = w;
        t->scale[0] = scale_lo;
        t->scale[1] = scale_hi;
        t->ratio[0] = ratio_lo;
        t->ratio[1] = ratio_hi;
    }
    return t;
}

static ct_transform *random_crop_new(const char *fn, int64_t h, int64_t w, const ct_crop_padding *padding,
                                     const double *mask_fill) {
    if (h < 1 || w < 1) return bad_arg(fn, "the crop's size must be positive");
    ct_crop_padding pad = {0};
    if (padding) pad = *padding;
    if (pad.left < 0 || pad.top < 0 || pad.right < 0 || pad.bottom < 0)
        return bad_arg(fn, "padding must be >= 0");
    if ((int)pad.mode < (int)CT_PAD_CONSTANT || (int)pad.mode > (int)CT_PAD_SYMMETRIC)
        return bad_arg(fn, "padding mode must be CT_PAD_CONSTANT, _EDGE, _REFLECT or _SYMMETRIC");
    ct_transform *t = tf_new(TF_RANDOM_CROP);
    if (t) {
        t->h = h;
        t->w = w;
        t->pad = pad;
        t->mask_fill = mask_fill ? *mask_fill : pad.fill; /* v2: a single fill pads every input */
    }
    return t;
}

ct_transform *ct_tf_random_crop(int64_t h, int64_t w, const ct_crop_padding *padding) {
    return random_crop_new("ct_tf_random_crop", h, w, padding, NULL);
}

ct_transform *ct_tf_random_crop_ex(int64_t h, int64_t w, const ct_crop_padding *padding, double mask_fill) {
    return random_crop_new("ct_tf_random_crop_ex", h, w, padding, &mask_fill);
}

ct_transform *ct_tf_random_horizontal_flip(double p) {
    if (!(p >= 0 && p <= 1)) return bad_arg("ct_tf_random_horizontal_flip", "p must be in [0, 1]");
    ct_transform *t = tf_new(TF_HFLIP);
    if (t) t->p = p;
    return t;
}

ct_transform *ct_tf_color_jitter(double brightness, double contrast, double saturation, double hue) {
    const char *fn = "ct_tf_color_jitter";
    double v[4] = {brightness, contrast, saturation, hue};
    for (int k = 0; k < 4; k++)
        if (!(v[k] >= 0)) return bad_arg(fn, "brightness, contrast, saturation and hue must be >= 0");
    if (hue > 0.5) return bad_arg(fn, "hue must be in [0, 0.5]");
    ct_transform *t = tf_new(TF_COLOR_JITTER);
    if (!t) return NULL;
    /* ColorJitter._check_input: [center - v, center + v], the first clipped
     * at 0 except for hue; an adjustment whose range is {center} is off. */
    for (int k = 0; k < 4; k++) {
        double center = k == 3 ? 0 : 1;
        t->jitter[k][0] = k == 3 ? center - v[k] : fmax(center - v[k], 0.0);
        t->jitter[k][1] = center + v[k];
        t->jitter_on[k] = !(t->jitter[k][0] == center && t->jitter[k][1] == center);
    }
    return t;
}

ct_transform *ct_tf_to_tensor(void) { return tf_new(TF_TO_TENSOR); }

ct_transform *ct_tf_normalize(int c, const double *mean, const double *std) {
    const char *fn = "ct_tf_normalize";
    if (c < 1 || !mean || !std) return bad_arg(fn, "needs c >= 1 and c values of mean and std");
    for (int i = 0; i < c; i++)
        if (std[i] == 0) return bad_arg(fn, "std evaluated to zero, leading to division by zero");
    ct_transform *t = tf_new(TF_NORMALIZE);
    if (!t) return NULL;
    t->n = c;
    t->mean = malloc((size_t)c * sizeof *t->mean);
    t->std = malloc((size_t)c * sizeof *t->std);
    if (!t->mean || !t->std) {
        ct_transform_free(t);
        ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
        return NULL;
    }
    memcpy(t->mean, mean, (size_t)c * sizeof *mean);
    memcpy(t->std, std, (size_t)c * sizeof *std);
    return t;
}

ct_transform *ct_tf_compose(int n, ct_transform *const *transforms) {
    const char *fn = "ct_tf_compose";
    bool ok = n >= 1 && transforms;
    for (int i = 0; ok && i < n; i++) ok = transforms[i] != NULL;
    ct_transform *t = ok ? tf_new(TF_COMPOSE) : NULL;
    if (t) t->parts = malloc((size_t)n * sizeof *t->parts);
    if (!t || !t->parts) {
        int code = ct_last_code();
        for (int i = 0; transforms && i < n; i++) ct_transform_free(transforms[i]);
        free(t);
        if (ok) ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
        /* a NULL part is the failure of its constructor: keep its message */
        else if (!(transforms && n >= 1 && code != CT_OK))
            ct_set_error(CT_EINVAL, "%s: needs n >= 1 transforms, none NULL", fn);
        return NULL;
    }
    t->n = n;
    memcpy(t->parts, transforms, (size_t)n * sizeof *t->parts);
    return t;
}

void ct_transform_free(ct_transform *t) {
    if (!t) return;
    for (int i = 0; t->kind == TF_COMPOSE && i < t->n; i++) ct_transform_free(t->parts[i]);
    free(t->parts);
    free(t->mean);
    free(t->std);
    free(t);
}

/* ==== kernels: torchvision's, operator by operator ========================== */

/* _max_value(dtype): 255 for uint8, 65535 for uint16, 1 for floats. */
static int64_t max_value(ct_dtype d) { return d == CT_U8 ? 255 : d == CT_U16 ? 65535 : 1; }

/* The image's C, H, W (its last three dims); -1 + CT_ESHAPE when it has
 * fewer than three. */
static int chw(const ct_tensor *img, const char *what, int64_t out[3]) {
    int nd = ct_ndim(img);
    if (nd < 3)
        return ct_set_error(CT_ESHAPE, "%s: expected an image [..., C, H, W], got %d dims", what, nd);
    for (int i = 0; i < 3; i++) out[i] = ct_size(img, nd - 3 + i);
    return 0;
}

/* Python's x.reshape(shape[:-3] + (c, h, w)) of the image `like`. */
static ct_tensor *reshape_chw(const ct_tensor *t, const ct_tensor *like, int64_t c, int64_t h, int64_t w) {
    int nd = ct_ndim(like);
    int64_t shape[8];
    if (nd > 8) return NULL;
    for (int i = 0; i < nd - 3; i++) shape[i] = ct_size(like, i);
    shape[nd - 3] = c;
    shape[nd - 2] = h;
    shape[nd - 1] = w;
    return ct_reshape(t, nd, shape);
}

/* is_contiguous(memory_format=torch.channels_last) of a 4-D tensor: the
 * strides of N, H, W, C from the innermost out, size-1 dims skipped. */
static bool channels_last_contiguous(const ct_tensor *t) {
    static const int order[4] = {1, 3, 2, 0};
    int64_t expected = 1;
    for (int k = 0; k < 4; k++) {
        int64_t size = ct_size(t, order[k]);
        if (size == 1) continue;
        if (ct_stride(t, order[k]) != expected) return false;
        expected *= size;
    }
    return true;
}

/* resize_image(image, [new_h, new_w], BILINEAR, antialias=True), or with
 * NEAREST (`nearest`: resize_mask's, no antialiasing). */
static ct_tensor *resize_with(const ct_tensor *img, int64_t new_h, int64_t new_w, bool nearest) {
    int64_t s[3];
    if (chw(img, "Resize", s)) return NULL;
    if (new_h == s[1] && new_w == s[2]) return ct_alias(img);
    ct_dtype dtype = ct_dtype_of(img);
    ct_tensor *x = ct_reshape(img, 4, (int64_t[]){-1, s[0], s[1], s[2]});
    if (!x) return NULL;
    int64_t numel = ct_numel(x);
    /* torchvision's restride of a single channels-last image, so that the
     * interpolation keeps channels-last (pytorch/pytorch#68430). */
    if (channels_last_contiguous(x) && ct_size(x, 0) == 1 && numel != ct_stride(x, 0))
        x = CT_CALL("aten::as_strided", CT_T(x), CT_INTS(1, s[0], s[1], s[2]),
                    CT_INTS(numel, ct_stride(x, 1), ct_stride(x, 2), ct_stride(x, 3)));
    /* uint8 is resized natively on CPUs with AVX2 (every CPU torch's wheel
     * runs its AVX2 kernels on), and by NEAREST anywhere; other integer
     * dtypes go through float32. */
    bool cast = !(dtype == CT_F32 || dtype == CT_F64 || dtype == CT_U8);
    if (cast) x = ct_to_dtype(x, CT_F32);
    if (nearest) {
        x = CT_CALL("aten::upsample_nearest2d.vec", CT_T(x), CT_INTS(new_h, new_w), CT_NONE);
        /* rounded back for the signed integer dtypes (nearest's values are
         * the input's: the rounding changes none) */
        bool round = dtype == CT_I8 || dtype == CT_I16 || dtype == CT_I32 || dtype == CT_I64;
        if (cast) x = ct_to_dtype(round ? CT_CALL("aten::round", CT_T(x)) : x, dtype);
    } else {
        x = CT_CALL("aten::_upsample_bilinear2d_aa", CT_T(x), CT_INTS(new_h, new_w), CT_B(false), CT_NONE, CT_NONE);
        if (cast) x = ct_to_dtype(CT_CALL("aten::round", CT_T(x)), dtype);
    }
    return x ? reshape_chw(x, img, s[0], new_h, new_w) : NULL;
}

static ct_tensor *resize_to(const ct_tensor *img, int64_t new_h, int64_t new_w) {
    return resize_with(img, new_h, new_w, false);
}

/* image[..., top:top+h, left:left+w] (in bounds). */
static ct_tensor *crop(const ct_tensor *img, int64_t top, int64_t left, int64_t h, int64_t w) {
    return ct_narrow(ct_narrow(img, -2, top, h), -1, left, w);
}

/* _pad_with_scalar_fill(image, [left, right, top, bottom], fill, mode). */
static ct_tensor *pad(const ct_tensor *img, const int64_t lrtb[4], double fill, ct_pad_mode mode) {
    int64_t s[3];
    if (chw(img, "pad", s)) return NULL;
    ct_tensor *x = ct_reshape(img, 4, (int64_t[]){-1, s[0], s[1], s[2]});
    ct_arg padding = ct_arg_ints(4, lrtb);
    ct_dtype dtype = ct_dtype_of(img);
    if (mode == CT_PAD_CONSTANT) {
        x = CT_CALL("aten::constant_pad_nd", CT_T(x), padding, CT_F(fill));
    } else if (mode == CT_PAD_EDGE || mode == CT_PAD_REFLECT) {
        /* torch pads only floats so: through float32 and back */
        bool cast = !ct_dtype_is_floating(dtype);
        if (cast) x = ct_to_dtype(x, CT_F32);
        x = CT_CALL(mode == CT_PAD_EDGE ? "aten::replication_pad2d" : "aten::reflection_pad2d", CT_T(x), padding);
        if (cast) x = ct_to_dtype(x, dtype);
    } else { /* symmetric: index the edge-repeating mirror, as _pad_symmetric */
        for (int d = 0; d < 2 && x; d++) { /* d 0: width (dim 3), 1: height (dim 2) */
            int64_t n = s[2 - d], before = lrtb[2 * d], after = lrtb[2 * d + 1];
            int64_t total = before + n + after;
            int64_t *idx = malloc((size_t)total * sizeof *idx);
            if (!idx) {
                ct_set_error(CT_ENOMEM, "pad: out of host memory");
                return NULL;
            }
            for (int64_t i = 0; i < total; i++) {
                int64_t k = i - before; /* mirror with the edge repeated, period 2n */
                int64_t m = ((k % (2 * n)) + 2 * n) % (2 * n);
                idx[i] = m < n ? m : 2 * n - 1 - m;
            }
            ct_tensor *index = ct_from_data(idx, 1, (int64_t[]){total}, CT_I64);
            free(idx);
            x = ct_index_select(x, 3 - d, index);
        }
    }
    if (!x) return NULL;
    return reshape_chw(x, img, s[0], ct_size(x, 2), ct_size(x, 3));
}

static ct_tensor *mul_s(const ct_tensor *t, double v) { return CT_CALL("aten::mul.Scalar", CT_T(t), CT_F(v)); }

/* (x.clamp_(0, bound) and .to(dtype) unless the image is float). */
static ct_tensor *clamp_back(ct_tensor *x, ct_dtype dtype) {
    x = CT_CALL("aten::clamp", CT_T(x), CT_I(0), CT_I(max_value(dtype)));
    return ct_dtype_is_floating(dtype) ? x : ct_to_dtype(x, dtype);
}

/* _blend(image1, image2, ratio) */
static ct_tensor *blend(const ct_tensor *a, const ct_tensor *b, double ratio) {
    ct_tensor *x = CT_CALL("aten::add.Tensor", CT_T(mul_s(a, ratio)), CT_T(b), CT_KW("alpha", CT_F(1.0 - ratio)));
    return clamp_back(x, ct_dtype_of(a));
}

/* _rgb_to_grayscale_image(image, 1, preserve_dtype=False), floored for an
 * integer image as saturation and contrast do. */
static ct_tensor *grayscale(const ct_tensor *img) {
    ct_tensor *rgb[3];
    if (CT_CALL_N("aten::unbind.int", 3, rgb, CT_T(img), CT_I(-3)) != 3) return NULL;
    ct_tensor *l = mul_s(rgb[0], 0.2989);
    l = CT_CALL("aten::add.Tensor", CT_T(l), CT_T(rgb[1]), CT_KW("alpha", CT_F(0.587)));
    l = CT_CALL("aten::add.Tensor", CT_T(l), CT_T(rgb[2]), CT_KW("alpha", CT_F(0.114)));
    l = ct_unsqueeze(l, -3);
    if (!ct_dtype_is_floating(ct_dtype_of(img))) l = ct_floor(l);
    return l;
}

static ct_tensor *adjust_brightness(const ct_tensor *img, double f) {
    return clamp_back(mul_s(img, f), ct_dtype_of(img));
}

static ct_tensor *adjust_saturation(const ct_tensor *img, double f) {
    if (ct_size(img, -3) == 1) return ct_alias(img); /* as PIL */
    return blend(img, grayscale(img), f);
}

static ct_tensor *adjust_contrast(const ct_tensor *img, double f) {
    bool fp = ct_dtype_is_floating(ct_dtype_of(img));
    ct_tensor *gray = ct_size(img, -3) == 3 ? grayscale(img) : fp ? ct_alias(img) : ct_to_dtype(img, CT_F32);
    ct_tensor *mean = CT_CALL("aten::mean.dim", CT_T(gray), CT_INTS(-3, -2, -1), CT_B(true));
    return blend(img, mean, f);
}

/* _rgb_to_hsv on a float image in [0, 1]. */
static ct_tensor *rgb_to_hsv(const ct_tensor *img) {
    ct_tensor *ch[3], *mm[2];
    if (CT_CALL_N("aten::unbind.int", 3, ch, CT_T(img), CT_I(-3)) != 3) return NULL;
    if (CT_CALL_N("aten::aminmax", 2, mm, CT_T(img), CT_KW("dim", CT_I(-3))) != 2) return NULL;
    ct_tensor *minc = mm[0], *maxc = mm[1];
    ct_tensor *eqc = ct_eq(maxc, minc);
    ct_tensor *range = ct_sub(maxc, minc);
    ct_tensor *ones = ct_ones_like(maxc);
    ct_tensor *s = ct_div(range, CT_CALL("aten::where.self", CT_T(eqc), CT_T(ones), CT_T(maxc)));
    ct_tensor *divisor = ct_unsqueeze(CT_CALL("aten::where.self", CT_T(eqc), CT_T(ones), CT_T(range)), -3);
    ct_tensor *rgbc[3];
    ct_tensor *diff = ct_div(ct_sub(ct_unsqueeze(maxc, -3), img), divisor);
    if (CT_CALL_N("aten::unbind.int", 3, rgbc, CT_T(diff), CT_I(-3)) != 3) return NULL;
    ct_tensor *rc = rgbc[0], *gc = rgbc[1], *bc = rgbc[2];
    ct_tensor *maxc_neq_r = ct_ne(maxc, ch[0]);
    ct_tensor *maxc_eq_g = ct_eq(maxc, ch[1]);
    ct_tensor *hg = ct_mul(ct_sub(ct_add_scalar(rc, 2.0), bc), CT_CALL("aten::bitwise_and.Tensor", CT_T(maxc_eq_g), CT_T(maxc_neq_r)));
    ct_tensor *hr = ct_mul(ct_sub(bc, gc), ct_logical_not(maxc_neq_r));
    ct_tensor *hb = ct_mul(ct_sub(ct_add_scalar(gc, 4.0), rc),
                           CT_CALL("aten::logical_and", CT_T(maxc_neq_r), CT_T(ct_logical_not(maxc_eq_g))));
    ct_tensor *h = ct_add(ct_add(hr, hg), hb);
    h = CT_CALL("aten::fmod.Scalar", CT_T(ct_add_scalar(mul_s(h, 1.0 / 6.0), 1.0)), CT_F(1.0));
    return ct_stack(3, (ct_tensor *[]){h, s, maxc}, -3);
}

/* _hsv_to_rgb */
static ct_tensor *hsv_to_rgb(const ct_tensor *hsv) {
    ct_tensor *c[3];
    if (CT_CALL_N("aten::unbind.int", 3, c, CT_T(hsv), CT_I(-3)) != 3) return NULL;
    ct_tensor *h = c[0], *s = c[1], *v = c[2];
    ct_tensor *h6 = mul_s(h, 6);
    ct_tensor *i = ct_floor(h6);
    ct_tensor *f = ct_sub(h6, i);
    i = ct_to_dtype(i, CT_I32);
    ct_tensor *sxf = ct_mul(s, f);
    ct_tensor *one_minus_s = ct_rsub_scalar(s, 1.0);
    ct_tensor *q = CT_CALL("aten::clamp", CT_T(ct_mul(ct_rsub_scalar(sxf, 1.0), v)), CT_F(0.0), CT_F(1.0));
    ct_tensor *t = CT_CALL("aten::clamp", CT_T(ct_mul(ct_add(sxf, one_minus_s), v)), CT_F(0.0), CT_F(1.0));
    ct_tensor *p = CT_CALL("aten::clamp", CT_T(ct_mul(one_minus_s, v)), CT_F(0.0), CT_F(1.0));
    i = CT_CALL("aten::remainder.Scalar", CT_T(i), CT_I(6));
    ct_tensor *vpqt = ct_stack(4, (ct_tensor *[]){v, p, q, t}, -3);
    static const int64_t table[18] = {0, 2, 1, 1, 3, 0, 3, 0, 0, 2, 1, 1, 1, 1, 3, 0, 0, 2};
    ct_tensor *select = ct_from_data(table, 2, (int64_t[]){3, 6}, CT_I64);
    /* select[:, i]: the table's columns picked by i, shape [3, *i.shape] */
    int nd = i ? ct_ndim(i) : 0;
    int64_t shape[9] = {3};
    for (int k = 0; k < nd && k < 8; k++) shape[k + 1] = ct_size(i, k);
    ct_tensor *picked = ct_reshape(ct_index_select(select, 1, ct_flatten(i, 0, -1)), nd + 1, shape);
    if (picked && nd + 1 > 3) picked = CT_CALL("aten::movedim.int", CT_T(picked), CT_I(0), CT_I(-3));
    return ct_gather(vpqt, -3, picked);
}

static ct_tensor *adjust_hue(const ct_tensor *img, double f) {
    if (ct_size(img, -3) == 1 || ct_numel(img) == 0) return ct_alias(img);
    ct_dtype dtype = ct_dtype_of(img);
    bool fp = ct_dtype_is_floating(dtype);
    /* to_dtype_image(image, float32, scale=True) */
    ct_tensor *x = fp ? ct_alias(img) : mul_s(ct_to_dtype(img, CT_F32), 1.0 / (double)max_value(dtype));
    if (fp && dtype != CT_F32) x = ct_to_dtype(img, CT_F32);
    ct_tensor *hsv = rgb_to_hsv(x), *c[3];
    if (CT_CALL_N("aten::unbind.int", 3, c, CT_T(hsv), CT_I(-3)) != 3) return NULL;
    c[0] = CT_CALL("aten::remainder.Scalar", CT_T(ct_add_scalar(c[0], f)), CT_F(1.0));
    ct_tensor *rgb = hsv_to_rgb(ct_stack(3, c, -3));
    /* to_dtype_image(rgb, orig_dtype, scale=True) */
    if (fp) return ct_to_dtype(rgb, dtype);
    return ct_to_dtype(mul_s(rgb, (double)max_value(dtype) + 1.0 - 1e-3), dtype);
}

/* ==== applying ============================================================ */

/* A float32 value through a [1] float32 tensor op (torch.exp of the draw). */
static int exp_f32(double v, double *out) {
    ct_tensor *t = ct_exp(ct_full(1, (int64_t[]){1}, v, &(ct_topts){.dtype = CT_F32}));
    return t ? ct_item(t, out) : ct_last_code();
}

/* Resize's output size for an h x w image. */
static void resized_size(const ct_transform *t, int64_t h, int64_t w, int64_t *out_h, int64_t *out_w) {
    int64_t new_h = t->h, new_w = t->w;
    if (t->w == 0) { /* _compute_resized_output_size with one size */
        int64_t shorter = w <= h ? w : h, longer = w <= h ? h : w;
        int64_t new_short = t->h, new_long = (int64_t)((double)(t->h * longer) / (double)shorter);
        if (t->max_size > 0 && new_long > t->max_size) {
            new_short = (int64_t)((double)(t->max_size * new_short) / (double)new_long);
            new_long = t->max_size;
        }
        new_w = w <= h ? new_short : new_long;
        new_h = w <= h ? new_long : new_short;
    }
    *out_h = new_h, *out_w = new_w;
}

static ct_tensor *apply_resize(const ct_transform *t, const ct_tensor *img) {
    int64_t s[3], new_h, new_w;
    if (chw(img, "Resize", s)) return NULL;
    resized_size(t, s[1], s[2], &new_h, &new_w);
    return resize_to(img, new_h, new_w);
}

/* CenterCrop's box in an h x w image at least as large as the crop:
 * int(round((h - ch) / 2.0)), Python rounding half to even, as rint. */
static void center_box(int64_t h, int64_t w, int64_t ch, int64_t cw, int64_t box[4]) {
    box[0] = (int64_t)rint((double)(h - ch) / 2.0);
    box[1] = (int64_t)rint((double)(w - cw) / 2.0);
    box[2] = ch;
    box[3] = cw;
}

static ct_tensor *apply_center_crop(const ct_transform *t, const ct_tensor *img) {
    int64_t s[3], box[4];
    if (chw(img, "CenterCrop", s)) return NULL;
    int64_t ch = t->h, cw = t->w, h = s[1], w = s[2];
    ct_tensor *x = ct_alias(img);
    if (ch > h || cw > w) {
        int64_t lrtb[4] = {cw > w ? (cw - w) / 2 : 0, cw > w ? (cw - w + 1) / 2 : 0, ch > h ? (ch - h) / 2 : 0,
                           ch > h ? (ch - h + 1) / 2 : 0};
        x = pad(x, lrtb, 0.0, CT_PAD_CONSTANT);
        if (!x) return NULL;
        h = ct_size(x, -2);
        w = ct_size(x, -1);
        if (ch == h && cw == w) return x;
    }
    center_box(h, w, ch, cw, box);
    return crop(x, box[0], box[1], box[2], box[3]);
}

/* RandomResizedCrop.make_params: the box {top, left, h, w} of a height x
 * width image. 0, or -1 + error. */
static int resized_crop_box(const ct_transform *t, int64_t height, int64_t width, ct_rng *rng, int64_t box[4]) {
    int64_t area = height * width;
    /* self._log_ratio = torch.log(torch.tensor(self.ratio)): float32 */
    ct_scope *scope = ct_scope_begin();
    ct_tensor *lr = ct_log(ct_from_data((float[]){(float)t->ratio[0], (float)t->ratio[1]}, 1, (int64_t[]){2}, CT_F32));
    float log_ratio[2];
    int rc = !lr || ct_read(lr, log_ratio, sizeof log_ratio) != 0 ? -1 : 0;
    ct_scope_end(scope);
    if (rc) return -1;
    int64_t top = 0, left = 0, h = 0, w = 0;
    bool found = false;
    for (int attempt = 0; attempt < 10 && !found; attempt++) {
        double u, r, aspect;
        if (ct_rng_uniform(rng, t->scale[0], t->scale[1], &u) || ct_rng_uniform(rng, log_ratio[0], log_ratio[1], &r) ||
            exp_f32(r, &aspect))
            return -1;
        double target_area = (double)area * u;
        w = (int64_t)rint(sqrt(target_area * aspect));
        h = (int64_t)rint(sqrt(target_area / aspect));
        if (0 < w && w <= width && 0 < h && h <= height) {
            if (ct_rng_randint(rng, 0, height - h + 1, &top) || ct_rng_randint(rng, 0, width - w + 1, &left))
                return -1;
            found = true;
        }
    }
    if (!found) { /* the central crop */
        double in_ratio = (double)width / (double)height;
        double rmin = fmin(t->ratio[0], t->ratio[1]), rmax = fmax(t->ratio[0], t->ratio[1]);
        if (in_ratio < rmin) {
            w = width;
            h = (int64_t)rint((double)w / rmin);
        } else if (in_ratio > rmax) {
            h = height;
            w = (int64_t)rint((double)h * rmax);
        } else {
            w = width;
            h = height;
        }
        top = (height - h) / 2;
        left = (width - w) / 2;
    }
    box[0] = top, box[1] = left, box[2] = h, box[3] = w;
    return 0;
}

static ct_tensor *apply_random_resized_crop(const ct_transform *t, const ct_tensor *img, ct_rng *rng) {
    int64_t s[3], box[4];
    if (chw(img, "RandomResizedCrop", s) || resized_crop_box(t, s[1], s[2], rng, box)) return NULL;
    return resize_to(crop(img, box[0], box[1], box[2], box[3]), t->h, t->w);
}

/* RandomCrop.make_params' position in a (padded) ph x pw image. */
static int random_crop_at(const ct_transform *t, int64_t ph, int64_t pw, ct_rng *rng, int64_t *top, int64_t *left) {
    *top = 0, *left = 0;
    if (ph > t->h && ct_rng_randint(rng, 0, ph - t->h + 1, top)) return -1;
    if (pw > t->w && ct_rng_randint(rng, 0, pw - t->w + 1, left)) return -1;
    return 0;
}

/* RandomCrop's parameters: the padding (pad_if_needed's added), the padded
 * size ph x pw and the crop's top and left in it. */
typedef struct {
    ct_crop_padding p;
    int64_t ph, pw, top, left;
} crop_params;

/* RandomCrop.make_params for an h x w image. 0, or -1 + error. */
static int random_crop_params(const ct_transform *t, int64_t h, int64_t w, ct_rng *rng, crop_params *c) {
    ct_crop_padding p = t->pad;
    int64_t ph = h + p.top + p.bottom, pw = w + p.left + p.right;
    if (p.if_needed) {
        if (ph < t->h) {
            int64_t diff = t->h - ph;
            p.top += diff;
            p.bottom += diff;
            ph += 2 * diff;
        }
        if (pw < t->w) {
            int64_t diff = t->w - pw;
            p.left += diff;
            p.right += diff;
            pw += 2 * diff;
        }
    }
    if (ph < t->h || pw < t->w) {
        ct_set_error(CT_ESHAPE,
                     "RandomCrop: required crop size (%" PRId64 ", %" PRId64 ") is larger than the %sinput image size (%" PRId64
                     ", %" PRId64 ")",
                     t->h, t->w, (t->pad.left | t->pad.top | t->pad.right | t->pad.bottom) ? "padded " : "", ph, pw);
        return -1;
    }
    c->p = p, c->ph = ph, c->pw = pw;
    return random_crop_at(t, ph, pw, rng, &c->top, &c->left);
}

/* RandomCrop's transform of one input with the drawn parameters, its
 * constant padding `fill`. */
static ct_tensor *random_crop_with(const ct_transform *t, const ct_tensor *img, const crop_params *c, double fill) {
    const ct_crop_padding *p = &c->p;
    ct_tensor *x = ct_alias(img);
    if (p->left || p->top || p->right || p->bottom)
        x = pad(x, (int64_t[]){p->left, p->right, p->top, p->bottom}, fill, p->mode);
    if (!x || (c->ph == t->h && c->pw == t->w)) return x;
    return crop(x, c->top, c->left, t->h, t->w);
}

static ct_tensor *apply_random_crop(const ct_transform *t, const ct_tensor *img, ct_rng *rng) {
    int64_t s[3];
    crop_params c;
    if (chw(img, "RandomCrop", s) || random_crop_params(t, s[1], s[2], rng, &c)) return NULL;
    return random_crop_with(t, img, &c, t->pad.fill);
}

/* RandomHorizontalFlip's draw: 1 flip, 0 not, -1 + error. */
static int hflip_draw(const ct_transform *t, ct_rng *rng) {
    double u;
    if (ct_rng_rand(rng, &u)) return -1;
    /* torch.rand(1) >= self.p, compared in float32: no flip */
    return (float)u >= (float)t->p ? 0 : 1;
}

static ct_tensor *hflip(const ct_tensor *img) { return CT_CALL("aten::flip", CT_T(img), CT_INTS(-1)); }

static ct_tensor *apply_hflip(const ct_transform *t, const ct_tensor *img, ct_rng *rng) {
    int flip = hflip_draw(t, rng);
    return flip < 0 ? NULL : flip ? hflip(img) : ct_alias(img);
}

static ct_tensor *apply_color_jitter(const ct_transform *t, const ct_tensor *img, ct_rng *rng) {
    int64_t s[3];
    if (chw(img, "ColorJitter", s)) return NULL;
    if (s[0] != 1 && s[0] != 3) {
        ct_set_error(CT_ESHAPE, "ColorJitter: images must have 1 or 3 channels, got %" PRId64, s[0]);
        return NULL;
    }
    int64_t order[4];
    double factor[4];
    if (ct_rng_randperm(rng, 4, order)) return NULL;
    for (int k = 0; k < 4; k++)
        if (t->jitter_on[k] && ct_rng_uniform(rng, t->jitter[k][0], t->jitter[k][1], &factor[k])) return NULL;
    ct_tensor *x = ct_alias(img);
    for (int k = 0; k < 4 && x; k++) {
        int64_t fn = order[k];
        if (!t->jitter_on[fn]) continue;
        x = fn == 0 ? adjust_brightness(x, factor[0])
            : fn == 1 ? adjust_contrast(x, factor[1])
            : fn == 2 ? adjust_saturation(x, factor[2])
                      : adjust_hue(x, factor[3]);
    }
    return x;
}

static ct_tensor *apply_to_tensor(const ct_tensor *img) {
    ct_dtype d = ct_dtype_of(img);
    if (ct_dtype_is_floating(d)) return ct_alias(img);
    if (d != CT_U8 && d != CT_U16) {
        ct_set_error(CT_EDTYPE, "ToTensor: takes uint8 or uint16 images, got %s", ct_dtype_name(d));
        return NULL;
    }
    /* image.to(float32).div_(max): divided in place, one new buffer; in a
     * loader, from its pool (data/pool.h), the conversion a copy into it */
    int64_t shape[8];
    int nd = ct_shape(img, shape, 8);
    ct_tensor *f;
    if (cti_buf_pool_current() && nd <= 8) {
        f = cti_buf_empty(nd, shape, CT_F32);
        f = f ? CT_CALL("aten::copy_", CT_T(f), CT_T(img)) : NULL;
    } else {
        f = ct_to_dtype(img, CT_F32);
    }
    return CT_CALL("aten::div_.Scalar", CT_T(f), CT_I(max_value(d)));
}

/* in_place: img is a buffer of our own (ToTensor's, just made), normalised
 * where it lies, as v2.Normalize(inplace=True); the values are the same. */
static ct_tensor *apply_normalize(const ct_transform *t, const ct_tensor *img, bool in_place) {
    int64_t s[3];
    if (chw(img, "Normalize", s)) return NULL;
    ct_dtype d = ct_dtype_of(img);
    if (!ct_dtype_is_floating(d)) {
        ct_set_error(CT_EDTYPE, "Normalize: input tensor should be a float tensor, got %s (ToTensor first)",
                     ct_dtype_name(d));
        return NULL;
    }
    if (s[0] != t->n && t->n != 1) {
        ct_set_error(CT_ESHAPE, "Normalize: %d mean/std values for an image of %" PRId64 " channels", t->n, s[0]);
        return NULL;
    }
    /* torch.as_tensor(mean, dtype=image.dtype).view(-1, 1, 1) */
    ct_tensor *mean = ct_view(ct_to_dtype(ct_from_data(t->mean, 1, (int64_t[]){t->n}, CT_F64), d), 3,
                              (int64_t[]){-1, 1, 1});
    ct_tensor *std = ct_view(ct_to_dtype(ct_from_data(t->std, 1, (int64_t[]){t->n}, CT_F64), d), 3,
                             (int64_t[]){-1, 1, 1});
    /* image.sub(mean).div_(std): one new buffer */
    ct_tensor *centred = in_place ? CT_CALL("aten::sub_.Tensor", CT_T(img), CT_T(mean)) : ct_sub(img, mean);
    return CT_CALL("aten::div_.Tensor", CT_T(centred), CT_T(std));
}

static ct_tensor *apply(const ct_transform *t, const ct_tensor *img, ct_rng *rng);

/* A composition's parts from `from` on. ToTensor of an integer image then
 * Normalize: one float buffer, normalised in place. */
static ct_tensor *apply_parts(const ct_transform *t, int from, const ct_tensor *img, ct_rng *rng) {
    ct_tensor *x = ct_alias(img);
    for (int i = from; i < t->n && x; i++) {
        const ct_transform *p = t->parts[i];
        bool fuse = p->kind == TF_TO_TENSOR && i + 1 < t->n && t->parts[i + 1]->kind == TF_NORMALIZE &&
                    !ct_dtype_is_floating(ct_dtype_of(x));
        x = apply(p, x, rng);
        if (fuse && x) x = apply_normalize(t->parts[++i], x, true);
    }
    return x;
}

static ct_tensor *apply(const ct_transform *t, const ct_tensor *img, ct_rng *rng) {
    switch (t->kind) {
    case TF_RESIZE: return apply_resize(t, img);
    case TF_CENTER_CROP: return apply_center_crop(t, img);
    case TF_RANDOM_RESIZED_CROP: return apply_random_resized_crop(t, img, rng);
    case TF_RANDOM_CROP: return apply_random_crop(t, img, rng);
    case TF_HFLIP: return apply_hflip(t, img, rng);
    case TF_COLOR_JITTER: return apply_color_jitter(t, img, rng);
    case TF_TO_TENSOR: return apply_to_tensor(img);
    case TF_NORMALIZE: return apply_normalize(t, img, false);
    case TF_COMPOSE: return apply_parts(t, 0, img, rng);
    }
    return NULL;
}

static bool is_random(const ct_transform *t) {
    if (t->kind == TF_COMPOSE) {
        for (int i = 0; i < t->n; i++)
            if (is_random(t->parts[i])) return true;
        return false;
    }
    return t->kind == TF_RANDOM_RESIZED_CROP || t->kind == TF_RANDOM_CROP || t->kind == TF_HFLIP ||
           t->kind == TF_COLOR_JITTER;
}

ct_tensor *ct_transform_apply(const ct_transform *t, const ct_tensor *img, ct_rng *rng) {
    if (!t || !img) {
        ct_set_error(CT_EINVAL, "ct_transform_apply: %s is NULL", !t ? "transform" : "image");
        return NULL;
    }
    if (!rng && is_random(t)) {
        ct_set_error(CT_EINVAL, "ct_transform_apply: %s draws random parameters: it needs a ct_rng",
                     tf_names[t->kind]);
        return NULL;
    }
    ct_scope *scope = ct_scope_begin();
    ct_tensor *out = apply(t, img, rng);
    if (out) out = ct_scope_return(out);
    if (!out) { /* name the image: the step's message says what failed */
        char what[128], msg[512];
        ct_describe(img, what, sizeof what);
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        ct_set_error(ct_last_code() != CT_OK ? ct_last_code() : CT_ETRIAL, "%s (the image: %s)", msg, what);
    }
    ct_scope_end(scope);
    return out;
}

/* ==== an image and its mask (ct_transform_apply_pair) ===================== */

/* What v2 does to (image, tv_tensors.Mask(mask)): one make_params per
 * step, from the image's size (query_size: the mask's is the same), then
 * each input's kernel with those parameters. The mask's geometric kernels
 * are the image's on the mask as [..., C, H, W] (a 2-D mask gets a
 * channel, as the *_mask kernels unsqueeze it): resize_mask is NEAREST,
 * pad_mask pads with the mask's fill, crops and flips are the image's.
 * Colour steps, ToTensor and Normalize have no Mask kernel: v2 passes the
 * mask through. */
static ct_tensor *apply_joint(const ct_transform *t, const ct_tensor *img, ct_tensor **mask, ct_rng *rng);

/* A composition's parts on the pair; ToTensor then Normalize fused as in
 * apply_parts (the image's values are the same). */
static ct_tensor *apply_joint_parts(const ct_transform *t, const ct_tensor *img, ct_tensor **mask, ct_rng *rng) {
    ct_tensor *x = ct_alias(img);
    for (int i = 0; i < t->n && x; i++) {
        const ct_transform *p = t->parts[i];
        bool fuse = p->kind == TF_TO_TENSOR && i + 1 < t->n && t->parts[i + 1]->kind == TF_NORMALIZE &&
                    !ct_dtype_is_floating(ct_dtype_of(x));
        x = apply_joint(p, x, mask, rng);
        if (fuse && x) x = apply_normalize(t->parts[++i], x, true);
    }
    return x;
}

/* t on the image, and on *mask (replaced by its result) with the same
 * parameters when t moves pixels. NULL + error when either fails. */
static ct_tensor *apply_joint(const ct_transform *t, const ct_tensor *img, ct_tensor **mask, ct_rng *rng) {
    int64_t s[3], box[4], new_h, new_w;
    switch (t->kind) {
    case TF_RESIZE:
        if (chw(img, "Resize", s)) return NULL;
        resized_size(t, s[1], s[2], &new_h, &new_w);
        *mask = resize_with(*mask, new_h, new_w, true);
        return *mask ? resize_to(img, new_h, new_w) : NULL;
    case TF_CENTER_CROP: /* center_crop_mask: the image's, padding with 0 */
        *mask = apply_center_crop(t, *mask);
        return *mask ? apply_center_crop(t, img) : NULL;
    case TF_RANDOM_RESIZED_CROP:
        if (chw(img, "RandomResizedCrop", s) || resized_crop_box(t, s[1], s[2], rng, box)) return NULL;
        *mask = resize_with(crop(*mask, box[0], box[1], box[2], box[3]), t->h, t->w, true);
        return *mask ? resize_to(crop(img, box[0], box[1], box[2], box[3]), t->h, t->w) : NULL;
    case TF_RANDOM_CROP: {
        crop_params c;
        if (chw(img, "RandomCrop", s) || random_crop_params(t, s[1], s[2], rng, &c)) return NULL;
        *mask = random_crop_with(t, *mask, &c, t->mask_fill);
        return *mask ? random_crop_with(t, img, &c, t->pad.fill) : NULL;
    }
    case TF_HFLIP: {
        int flip = hflip_draw(t, rng);
        if (flip <= 0) return flip < 0 ? NULL : ct_alias(img);
        *mask = hflip(*mask);
        return *mask ? hflip(img) : NULL;
    }
    case TF_COMPOSE: return apply_joint_parts(t, img, mask, rng);
    case TF_COLOR_JITTER:
    case TF_TO_TENSOR:
    case TF_NORMALIZE: break;
    }
    return apply(t, img, rng); /* the image only */
}

int ct_transform_apply_pair(const ct_transform *t, const ct_tensor *img, const ct_tensor *mask, ct_rng *rng,
                            ct_tensor **img_out, ct_tensor **mask_out) {
    const char *fn = "ct_transform_apply_pair";
    if (img_out) *img_out = NULL;
    if (mask_out) *mask_out = NULL;
    if (!t || !img || !mask || !img_out || !mask_out)
        return ct_set_error(CT_EINVAL, "%s: %s is NULL", fn,
                            !t ? "transform" : !img ? "image" : !mask ? "mask" : !img_out ? "img_out" : "mask_out");
    if (!rng && is_random(t))
        return ct_set_error(CT_EINVAL, "%s: %s draws random parameters: it needs a ct_rng", fn, tf_names[t->kind]);
    char what[128], mwhat[128];
    ct_describe(img, what, sizeof what);
    ct_describe(mask, mwhat, sizeof mwhat);
    int nd = ct_ndim(img), md = ct_ndim(mask);
    if (nd < 3 || md < 2 || ct_size(mask, md - 2) != ct_size(img, nd - 2) ||
        ct_size(mask, md - 1) != ct_size(img, nd - 1))
        return ct_set_error(CT_ESHAPE,
                            "%s: the image must be [..., C, H, W] and its mask [..., H, W] of the same H and W "
                            "(the image: %s, the mask: %s)", fn, what, mwhat);
    ct_scope *scope = ct_scope_begin();
    /* a 2-D mask gets a channel for the image's kernels, as the *_mask kernels give it one */
    ct_tensor *m = md == 2 ? ct_unsqueeze(mask, 0) : ct_alias(mask);
    ct_tensor *x = m ? apply_joint(t, img, &m, rng) : NULL;
    if (x && m && md == 2) m = ct_squeeze_dim(m, 0);
    int rc = 0;
    if (x && m) {
        *img_out = ct_scope_return(x);
        *mask_out = ct_scope_return(m);
    } else { /* name the pair: the step's message says what failed */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        rc = ct_last_code() != CT_OK ? ct_last_code() : CT_ETRIAL;
        ct_set_error(rc, "%s (the image: %s, the mask: %s)", msg, what, mwhat);
    }
    ct_scope_end(scope);
    return rc;
}

/* ==== decoding and transforming at once (ct_image_decode_transform) ====== */

/* The step that sees the image first: t, or its first part's first step. */
static const ct_transform *first_step(const ct_transform *t) {
    while (t->kind == TF_COMPOSE) t = t->parts[0];
    return t;
}

/* The box that the crop step t takes from an h x w image, drawn from rng
 * as apply() draws it: 1 when t crops inside the image without padding
 * (RandomResizedCrop; CenterCrop and RandomCrop with nothing to pad), 0
 * when it does not (nothing drawn), -1 + error. */
static int crop_box(const ct_transform *t, int64_t h, int64_t w, ct_rng *rng, int64_t box[4]) {
    const ct_crop_padding *p = &t->pad;
    switch (t->kind) {
    case TF_RANDOM_RESIZED_CROP: return resized_crop_box(t, h, w, rng, box) ? -1 : 1;
    case TF_CENTER_CROP:
        if (t->h > h || t->w > w) return 0;
        center_box(h, w, t->h, t->w, box);
        return 1;
    case TF_RANDOM_CROP:
        if (p->left || p->top || p->right || p->bottom || t->h > h || t->w > w) return 0;
        box[2] = t->h, box[3] = t->w;
        return random_crop_at(t, h, w, rng, &box[0], &box[1]) ? -1 : 1;
    default: return 0;
    }
}

/* t on an image that its first step's crop has already cut: the rest of
 * that step (RandomResizedCrop's resize), then every step after it. */
static ct_tensor *apply_after_crop(const ct_transform *t, const ct_tensor *img, ct_rng *rng) {
    if (t->kind == TF_COMPOSE) {
        ct_tensor *x = apply_after_crop(t->parts[0], img, rng);
        return x ? apply_parts(t, 1, x, rng) : NULL;
    }
    return t->kind == TF_RANDOM_RESIZED_CROP ? resize_to(img, t->h, t->w) : ct_alias(img);
}

typedef struct {
    const ct_transform *t;
    ct_rng *rng;
    bool cropped; /* the decoder cut the first step's box */
} decode_plan;

static int plan_box(void *ctx, int64_t h, int64_t w, int64_t box[4]) {
    decode_plan *p = ctx;
    int r = crop_box(first_step(p->t), h, w, p->rng, box);
    if (r < 0) return ct_last_code() != CT_OK ? ct_last_code() : CT_ETRIAL;
    p->cropped = r == 1;
    return 0;
}

static ct_tensor *decode_transform(const void *data, size_t size, ct_image_mode mode, bool eight_bit,
                                   const char *name, const ct_transform *t, ct_rng *rng, const char *fn) {
    if (!name) name = "<memory>";
    if (!t) {
        ct_set_error(CT_EINVAL, "%s: %s: transform is NULL", fn, name);
        return NULL;
    }
    if (!rng && is_random(t)) {
        ct_set_error(CT_EINVAL, "%s: %s: %s draws random parameters: it needs a ct_rng", fn, name, tf_names[t->kind]);
        return NULL;
    }
    ct_scope *scope = ct_scope_begin();
    decode_plan plan = {t, rng, false};
    cti_image_decode_how how = {.max_bytes = CT_IMAGE_MAX_BYTES, .eight_bit = eight_bit, .pick = plan_box, .ctx = &plan};
    ct_tensor *img = cti_image_decode_box(data, size, mode, name, fn, &how);
    ct_tensor *out = !img ? NULL : plan.cropped ? apply_after_crop(t, img, rng) : apply(t, img, rng);
    if (out) out = ct_scope_return(out);
    if (!out && img) { /* a transform failed: name the file */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        ct_set_error(ct_last_code() != CT_OK ? ct_last_code() : CT_ETRIAL, "%s: %s: %s", fn, name, msg);
    }
    ct_scope_end(scope);
    return out;
}

ct_tensor *ct_image_decode_transform(const void *data, size_t size, ct_image_mode mode, const char *name,
                                     const ct_transform *t, ct_rng *rng) {
    return decode_transform(data, size, mode, false, name, t, rng, "ct_image_decode_transform");
}

/* The file at path decoded, then transformed by t when `transform` (t
 * NULL is then an error, as in ct_image_read_transform). */
static ct_tensor *read_transform(const char *path, ct_image_mode mode, bool eight_bit, bool transform,
                                 const ct_transform *t, ct_rng *rng) {
    const char *fn = transform ? "ct_image_read_transform" : "ct_image_read";
    char *data = NULL;
    size_t size = 0;
    if (cti_image_read_bytes(path, fn, &data, &size)) return NULL;
    cti_image_decode_how how = {.max_bytes = CT_IMAGE_MAX_BYTES, .eight_bit = eight_bit};
    ct_tensor *out = transform ? decode_transform(data, size, mode, eight_bit, path, t, rng, fn)
                               : cti_image_decode_box(data, size, mode, path, fn, &how);
    free(data);
    return out;
}

ct_tensor *ct_image_read_transform(const char *path, ct_image_mode mode, const ct_transform *t, ct_rng *rng) {
    return read_transform(path, mode, false, true, t, rng);
}

ct_tensor *cti_image_read_as_pil(const char *path, ct_image_mode mode, const ct_transform *t, ct_rng *rng) {
    return read_transform(path, mode, mode != CT_IMAGE_UNCHANGED, t != NULL, t, rng);
}

/* ==== ct_dataset_transform ================================================= */

typedef struct {
    ct_transform *t;
    int field;
} transform_ctx;

static void transform_ctx_free(void *p) {
    transform_ctx *c = p;
    ct_transform_free(c->t);
    free(c);
}

static ct_value *transform_sample(const ct_value *sample, ct_rng *rng, void *p) {
    const transform_ctx *c = p;
    ct_value_kind kind = ct_value_kind_of(sample);
    bool seq = kind == CT_VALUE_TUPLE || kind == CT_VALUE_LIST;
    const ct_value *leaf = seq ? ct_value_list_get(sample, (size_t)c->field) : c->field == 0 ? sample : NULL;
    const ct_tensor *img = leaf ? ct_value_get_tensor(leaf) : NULL;
    if (!img) {
        ct_set_error(CT_EINVAL, "ct_dataset_transform: field %d of the sample (a %s) is not a tensor", c->field,
                     ct_value_kind_name(kind));
        return NULL;
    }
    ct_tensor *out = ct_transform_apply(c->t, img, rng);
    if (!out) return NULL;
    if (!seq) return ct_value_tensor(out);
    ct_value *copy = kind == CT_VALUE_TUPLE ? ct_value_tuple() : ct_value_list();
    for (size_t i = 0; copy && i < ct_value_len(sample); i++) {
        ct_value *item = (int)i == c->field ? ct_value_tensor(out) : ct_value_copy(ct_value_list_get(sample, i), false);
        if ((int)i == c->field) out = NULL; /* owned by item now (or freed with it) */
        if (ct_value_list_append(copy, item) != 0) {
            ct_value_free(copy);
            copy = NULL;
        }
    }
    ct_tensor_free(out);
    return copy;
}

ct_dataset *ct_dataset_transform(ct_dataset *d, int field, ct_transform *t) {
    if (!t || !d || field < 0) {
        ct_transform_free(t);
        /* a NULL from a failed constructor keeps that failure's message */
        if (field < 0 || ct_last_code() == CT_OK)
            ct_set_error(CT_EINVAL, "ct_dataset_transform: %s",
                         field < 0 ? "field must be >= 0" : !t ? "transform is NULL" : "dataset is NULL");
        return NULL;
    }
    /* an image folder's images: transformed as they are decoded, a first
     * crop cut by the decoder */
    if (field == 0 && cti_image_folder_is(d)) return cti_image_folder_transformed(d, t);
    transform_ctx *c = malloc(sizeof *c);
    if (!c) {
        ct_transform_free(t);
        ct_set_error(CT_ENOMEM, "ct_dataset_transform: out of host memory");
        return NULL;
    }
    c->t = t;
    c->field = field;
    return ct_dataset_map(d, transform_sample, c, transform_ctx_free);
}

/* ==== ct_dataset_transform_pair ============================================ */

typedef struct {
    ct_transform *t;
    int image, mask; /* the fields */
} pair_ctx;

static void pair_ctx_free(void *p) {
    pair_ctx *c = p;
    ct_transform_free(c->t);
    free(c);
}

static ct_value *transform_pair_sample(const ct_value *sample, ct_rng *rng, void *p) {
    const pair_ctx *c = p;
    ct_value_kind kind = ct_value_kind_of(sample);
    bool seq = kind == CT_VALUE_TUPLE || kind == CT_VALUE_LIST;
    size_t len = seq ? ct_value_len(sample) : 0;
    const ct_value *leaf[2] = {seq && (size_t)c->image < len ? ct_value_list_get(sample, (size_t)c->image) : NULL,
                               seq && (size_t)c->mask < len ? ct_value_list_get(sample, (size_t)c->mask) : NULL};
    const ct_tensor *img = leaf[0] ? ct_value_get_tensor(leaf[0]) : NULL;
    const ct_tensor *mask = leaf[1] ? ct_value_get_tensor(leaf[1]) : NULL;
    if (!img || !mask) {
        ct_set_error(CT_EINVAL, "ct_dataset_transform_pair: field %d (the image) and field %d (the mask) of the sample "
                     "(a %s of %zu) must be tensors", c->image, c->mask, ct_value_kind_name(kind), len);
        return NULL;
    }
    ct_tensor *out[2];
    if (ct_transform_apply_pair(c->t, img, mask, rng, &out[0], &out[1])) return NULL;
    ct_value *copy = kind == CT_VALUE_TUPLE ? ct_value_tuple() : ct_value_list();
    for (size_t i = 0; copy && i < len; i++) {
        int k = (int)i == c->image ? 0 : (int)i == c->mask ? 1 : -1;
        ct_value *item = k >= 0 ? ct_value_tensor(out[k]) : ct_value_copy(ct_value_list_get(sample, i), false);
        if (k >= 0) out[k] = NULL; /* owned by item now (or freed with it) */
        if (ct_value_list_append(copy, item) != 0) {
            ct_value_free(copy);
            copy = NULL;
        }
    }
    ct_tensor_free(out[0]);
    ct_tensor_free(out[1]);
    return copy;
}

ct_dataset *ct_dataset_transform_pair(ct_dataset *d, int image_field, int mask_field, ct_transform *t) {
    if (!t || !d || image_field < 0 || mask_field < 0 || image_field == mask_field) {
        ct_transform_free(t);
        bool bad_fields = image_field < 0 || mask_field < 0 || image_field == mask_field;
        /* a NULL from a failed constructor keeps that failure's message */
        if (bad_fields || ct_last_code() == CT_OK)
            ct_set_error(CT_EINVAL, "ct_dataset_transform_pair: %s",
                         bad_fields ? "the image's and the mask's fields must be two different fields >= 0"
                         : !t       ? "transform is NULL"
                                    : "dataset is NULL");
        return NULL;
    }
    pair_ctx *c = malloc(sizeof *c);
    if (!c) {
        ct_transform_free(t);
        ct_set_error(CT_ENOMEM, "ct_dataset_transform_pair: out of host memory");
        return NULL;
    }
    *c = (pair_ctx){t, image_field, mask_field};
    return ct_dataset_map(d, transform_pair_sample, c, pair_ctx_free);
}
