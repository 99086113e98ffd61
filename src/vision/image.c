/* src/vision/image.c — JPEG and PNG files decoded into tensors (vision.h:
 * ct_image_decode, ct_image_read), as torchvision.io.decode_image decodes
 * them (torchvision/csrc/io/image/cpu/decode_jpeg.cpp, decode_png.cpp).
 *
 * Each decoder fills an [H, W, C] tensor row by row and returns its view
 * permuted to [C, H, W], the channels-last layout torchvision returns (and
 * that the resize kernels are fast on). libjpeg and libpng report errors
 * by calling back, and their callbacks longjmp: every decoder keeps all its
 * state in a job struct that lives in the caller's frame, and the function
 * that calls setjmp changes no local after it, so nothing it reads after
 * the jump is indeterminate; the caller frees what the job holds. Only C
 * frames (ours, libjpeg's, libpng's) lie between setjmp and longjmp.
 *
 * Where torchvision's decoders go wrong (indices of a palette PNG in
 * UNCHANGED mode, packed when under 8 bits; an alpha channel of 1 for 1-,
 * 2- and 4-bit gray; rows laid out for 4 channels while libpng writes 3
 * when an alpha channel is asked of a palette image without tRNS), these
 * give what the mode asks: RGB, an opaque alpha of 255. JPEG's
 * GRAY_ALPHA and RGB_ALPHA (torchvision refuses them) add that alpha too.
 * Stricter than torchvision, as training data wants: a JPEG or PNG cut
 * short anywhere (libjpeg-turbo would pad it gray with a warning; libpng
 * is never asked for what follows the image data) is an error, and so are
 * images larger than CT_IMAGE_MAX_BYTES decoded and progressive JPEGs of
 * more than MAX_SCANS scans, so a hostile header cannot take the memory or
 * the time of a worker. libjpeg's and libpng's warnings are dropped:
 * torchvision decodes on through them and so do these, silently.
 */
#define _POSIX_C_SOURCE 200809L

#include "ctrial/vision.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include "base/files.h"
#include "vision/image.h"

#define MAX_SCANS 1000        /* progressive JPEG scans; real files have a dozen */
#define TRUNCATED "Image is incomplete or truncated"
#define STR_(x) #x
#define STR(x) STR_(x)

static bool host_is_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* What a decoder reports: a CT_E* code and a message (without the name). */
typedef struct {
    int code;
    char msg[JMSG_LENGTH_MAX + 128];
} failure;

static int fail_with(failure *f, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int fail_with(failure *f, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    f->code = code;
    vsnprintf(f->msg, sizeof f->msg, fmt, ap);
    va_end(ap);
    return code;
}

/* A ct_* call failed: its code and message become the decoder's. */
static int fail_ct(failure *f) {
    f->code = ct_last_code() ? ct_last_code() : CT_ENOMEM;
    snprintf(f->msg, sizeof f->msg, "%s", ct_last_error());
    return f->code;
}

/* An [H, W, C] tensor of `dtype` for a decoded image, after checking its
 * size against the limit. */
static int new_hwc(failure *f, uint64_t h, uint64_t w, int c, ct_dtype dtype, uint64_t max_bytes,
                   ct_tensor **out) {
    uint64_t bytes = h * w * (uint64_t)c * ct_dtype_size(dtype); /* h, w < 2^32: no overflow */
    if (bytes > max_bytes) {
        char dims[96];
        snprintf(dims, sizeof dims, "%llu x %llu x %d", (unsigned long long)h, (unsigned long long)w, c);
        return fail_with(f, CT_ENOTSUP, "the image (%s) takes more than the %llu bytes decoded that ctrial allows",
                         dims, (unsigned long long)max_bytes);
    }
    *out = ct_empty(3, (const int64_t[]){(int64_t)h, (int64_t)w, c}, &(ct_topts){.dtype = dtype});
    return *out ? 0 : fail_ct(f);
}

/* ==== JPEG (libjpeg-turbo) ================================================ */

typedef struct {
    struct jpeg_error_mgr err; /* first: libjpeg hands back &err as cinfo->err */
    struct jpeg_decompress_struct cinfo;
    struct jpeg_source_mgr src;
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
    failure f;
    uint64_t max_bytes;
    ct_tensor *hwc;
    unsigned char *line; /* a scanline as libjpeg writes it, when it is not the tensor's row */
} jpeg_job;

static jpeg_job *jpeg_job_of(j_common_ptr c) { return (jpeg_job *)(void *)c->err; }

static void jpeg_fail(j_common_ptr c, int code, const char *msg) {
    jpeg_job *j = jpeg_job_of(c);
    j->f.code = code;
    snprintf(j->f.msg, sizeof j->f.msg, "%s", msg);
    longjmp(j->jump, 1);
}

static void jpeg_on_error(j_common_ptr c) {
    jpeg_job *j = jpeg_job_of(c);
    int m = j->err.msg_code;
    if (m == JERR_NO_BACKING_STORE) { /* a virtual array over max_memory_to_use */
        j->f.code = CT_ENOTSUP;
        snprintf(j->f.msg, sizeof j->f.msg, "decoding needs more than the %ld bytes of memory that ctrial allows",
                 c->mem->max_memory_to_use);
    } else {
        j->f.code = m == JERR_OUT_OF_MEMORY ? CT_ENOMEM
                    : m == JERR_IMAGE_TOO_BIG || m == JERR_WIDTH_OVERFLOW || m == JERR_BAD_PRECISION ||
                              m == JERR_NOT_COMPILED || m == JERR_CONVERSION_NOTIMPL
                        ? CT_ENOTSUP
                        : CT_EFORMAT;
        (*c->err->format_message)(c, j->f.msg);
    }
    longjmp(j->jump, 1);
}

static void jpeg_on_message(j_common_ptr c, int level) { (void)c, (void)level; }

static void jpeg_on_progress(j_common_ptr c) {
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->input_scan_number > MAX_SCANS) jpeg_fail(c, CT_ENOTSUP, "a progressive JPEG of more than " STR(MAX_SCANS) " scans");
}

/* The source: the whole file in memory. Asking for more is a truncation. */
static void src_nop(j_decompress_ptr c) { (void)c; }

static boolean src_fill(j_decompress_ptr c) {
    jpeg_fail((j_common_ptr)c, CT_EFORMAT, TRUNCATED);
    return FALSE;
}

static void src_skip(j_decompress_ptr c, long n) {
    struct jpeg_source_mgr *s = c->src;
    if (n <= 0) return;
    if ((unsigned long)n > s->bytes_in_buffer) jpeg_fail((j_common_ptr)c, CT_EFORMAT, TRUNCATED);
    s->next_input_byte += n;
    s->bytes_in_buffer -= (size_t)n;
}

/* Pillow's (and torchvision's) CMYK to RGB, for Adobe's inverted CMYK. */
static unsigned char cmyk_part(int k, int cmy) {
    int v = k * cmy + 128;
    v = ((v >> 8) + v) >> 8;
    return (unsigned char)(k - v < 0 ? 0 : k - v);
}

/* One scanline of libjpeg's output (`in`, in_c components) into the
 * tensor's row: CMYK converted to RGB or gray as torchvision converts it,
 * then an opaque alpha when asked for. */
static void jpeg_convert(const unsigned char *in, int in_c, unsigned char *out, int base_c, bool alpha,
                         JDIMENSION w) {
    for (JDIMENSION x = 0; x < w; x++, in += in_c) {
        unsigned char px[3];
        if (in_c == 4) {
            px[0] = cmyk_part(in[3], 255 - in[0]);
            px[1] = cmyk_part(in[3], 255 - in[1]);
            px[2] = cmyk_part(in[3], 255 - in[2]);
            if (base_c == 1) px[0] = (unsigned char)((px[0] * 19595 + px[1] * 38470 + px[2] * 7471 + 0x8000) >> 16);
        } else {
            memcpy(px, in, (size_t)base_c);
        }
        memcpy(out, px, (size_t)base_c);
        out += base_c;
        if (alpha) *out++ = 255;
    }
}

/* Decodes into j->hwc. Changes no local after setjmp: all state is *j. */
static int jpeg_run(jpeg_job *j, const unsigned char *data, size_t size, ct_image_mode mode) {
    if (setjmp(j->jump)) return j->f.code;
    struct jpeg_decompress_struct *ci = &j->cinfo;
    ci->err = jpeg_std_error(&j->err);
    j->err.error_exit = jpeg_on_error;
    j->err.emit_message = jpeg_on_message;
    jpeg_create_decompress(ci);
    uint64_t mem = 3 * j->max_bytes + ((uint64_t)16 << 20); /* progressive coefficients: 2 bytes a sample */
    ci->mem->max_memory_to_use = mem > (uint64_t)LONG_MAX ? LONG_MAX : (long)mem;
    j->src = (struct jpeg_source_mgr){.next_input_byte = data, .bytes_in_buffer = size, .init_source = src_nop,
                                      .fill_input_buffer = src_fill, .skip_input_data = src_skip,
                                      .resync_to_restart = jpeg_resync_to_restart, .term_source = src_nop};
    ci->src = &j->src;
    j->progress.progress_monitor = jpeg_on_progress;
    ci->progress = &j->progress;
    jpeg_read_header(ci, TRUE);

    J_COLOR_SPACE cs = ci->jpeg_color_space;
    bool cmyk = cs == JCS_CMYK || cs == JCS_YCCK;
    if (!cmyk && cs != JCS_GRAYSCALE && cs != JCS_YCbCr && cs != JCS_RGB)
        return fail_with(&j->f, CT_ENOTSUP, "unsupported JPEG colour space (%d components)", ci->num_components);
    if (cmyk && mode == CT_IMAGE_UNCHANGED)
        return fail_with(&j->f, CT_ENOTSUP, "a CMYK JPEG has no RGB or gray channels to keep in UNCHANGED mode "
                                            "(decode it in RGB or GRAY mode)");
    int base_c = mode == CT_IMAGE_UNCHANGED ? (cs == JCS_GRAYSCALE ? 1 : 3)
                 : mode == CT_IMAGE_GRAY || mode == CT_IMAGE_GRAY_ALPHA ? 1 : 3;
    bool alpha = mode == CT_IMAGE_GRAY_ALPHA || mode == CT_IMAGE_RGB_ALPHA;
    if (mode != CT_IMAGE_UNCHANGED) ci->out_color_space = cmyk ? JCS_CMYK : base_c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_calc_output_dimensions(ci);
    int in_c = cmyk ? 4 : base_c, c = base_c + alpha;
    if (new_hwc(&j->f, ci->output_height, ci->output_width, c, CT_U8, j->max_bytes, &j->hwc)) return j->f.code;
    jpeg_start_decompress(ci);
    if (ci->output_components != in_c)
        return fail_with(&j->f, CT_ENOTSUP, "libjpeg gives %d components for this colour space",
                         ci->output_components);
    bool direct = !cmyk && !alpha; /* libjpeg writes the tensor's rows itself */
    size_t stride = (size_t)ci->output_width * (size_t)c;
    if (!direct && !(j->line = malloc((size_t)ci->output_width * (size_t)in_c)))
        return fail_with(&j->f, CT_ENOMEM, "out of host memory");
    unsigned char *base = ct_data_ptr(j->hwc);
    while (ci->output_scanline < ci->output_height) {
        unsigned char *row = base + (size_t)ci->output_scanline * stride;
        JSAMPROW dst = direct ? row : j->line;
        if (jpeg_read_scanlines(ci, &dst, 1) != 1) return fail_with(&j->f, CT_EFORMAT, TRUNCATED);
        if (!direct) jpeg_convert(j->line, in_c, row, base_c, alpha, ci->output_width);
    }
    jpeg_finish_decompress(ci);
    return 0;
}

static ct_tensor *decode_jpeg(const unsigned char *data, size_t size, ct_image_mode mode, failure *f,
                              uint64_t max_bytes) {
    jpeg_job *j = calloc(1, sizeof *j);
    if (!j) {
        fail_with(f, CT_ENOMEM, "out of host memory");
        return NULL;
    }
    j->max_bytes = max_bytes;
    int rc = jpeg_run(j, data, size, mode);
    jpeg_destroy_decompress(&j->cinfo); /* safe on a struct never created: zeroed */
    free(j->line);
    ct_tensor *hwc = j->hwc;
    if (rc) {
        *f = j->f;
        ct_tensor_free(hwc);
        hwc = NULL;
    }
    free(j);
    return hwc;
}

/* ==== PNG (libpng) ======================================================== */

typedef struct {
    png_structp png;
    png_infop info;
    jmp_buf jump;
    failure f;
    const unsigned char *at; /* what is left to read */
    size_t left;
    uint64_t max_bytes;
    ct_tensor *hwc;
} png_job;

static void png_on_error(png_structp png, png_const_charp msg) {
    png_job *j = png_get_error_ptr(png);
    j->f.code = CT_EFORMAT;
    snprintf(j->f.msg, sizeof j->f.msg, "%s", msg);
    longjmp(j->jump, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void png_on_read(png_structp png, png_bytep out, size_t n) {
    png_job *j = png_get_io_ptr(png);
    if (n > j->left) png_error(png, TRUNCATED);
    memcpy(out, j->at, n);
    j->at += n;
    j->left -= n;
}

/* Decodes into j->hwc. Changes no local after setjmp: all state is *j. */
static int png_run(png_job *j, ct_image_mode mode) {
    if (setjmp(j->jump)) return j->f.code;
    j->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, j, png_on_error, png_on_warning);
    if (j->png) j->info = png_create_info_struct(j->png);
    if (!j->info) return fail_with(&j->f, CT_ENOMEM, "out of host memory");
    png_structp png = j->png;
    png_infop info = j->info;
    png_set_sig_bytes(png, 8);
    png_set_read_fn(png, j, png_on_read);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, type, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &type, &interlace, NULL, NULL);
    if (depth > 8 && depth != 16)
        return fail_with(&j->f, CT_ENOTSUP, "a PNG of bit depth %d (ctrial reads 1, 2, 4, 8 and 16)", depth);

    /* torchvision's transformations; a palette becomes RGB (RGBA with tRNS). */
    bool palette = type == PNG_COLOR_TYPE_PALETTE;
    bool color = (type & PNG_COLOR_MASK_COLOR) != 0;
    bool alpha = palette ? png_get_valid(png, info, PNG_INFO_tRNS) != 0 : (type & PNG_COLOR_MASK_ALPHA) != 0;
    bool want_color = mode == CT_IMAGE_UNCHANGED ? color : mode == CT_IMAGE_RGB || mode == CT_IMAGE_RGB_ALPHA;
    bool want_alpha = mode == CT_IMAGE_UNCHANGED ? alpha && !palette
                                                 : mode == CT_IMAGE_GRAY_ALPHA || mode == CT_IMAGE_RGB_ALPHA;
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (palette) png_set_palette_to_rgb(png);
    if (color && !want_color) png_set_rgb_to_gray(png, 1, 0.2989, 0.587);
    if (!color && want_color) png_set_gray_to_rgb(png);
    if (alpha && !want_alpha) png_set_strip_alpha(png);
    if (!alpha && want_alpha) png_set_add_alpha(png, depth == 16 ? 0xffff : 0xff, PNG_FILLER_AFTER);
    if (depth == 16 && host_is_little_endian()) png_set_swap(png);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);

    int c = (want_color ? 3 : 1) + want_alpha;
    ct_dtype dtype = depth == 16 ? CT_U16 : CT_U8;
    if (new_hwc(&j->f, h, w, c, dtype, j->max_bytes, &j->hwc)) return j->f.code;
    size_t stride = (size_t)w * (size_t)c * ct_dtype_size(dtype);
    if (png_get_rowbytes(png, info) != stride) /* never: a guard for the rows written below */
        return fail_with(&j->f, CT_ENOTSUP, "libpng's rows (%zu bytes) do not fit the image",
                         (size_t)png_get_rowbytes(png, info));
    unsigned char *base = ct_data_ptr(j->hwc);
    for (int pass = 0; pass < passes; pass++)
        for (png_uint_32 y = 0; y < h; y++) png_read_row(png, base + y * stride, NULL);
    png_read_end(png, info); /* to IEND: a file cut short is refused */
    return 0;
}

static ct_tensor *decode_png(const unsigned char *data, size_t size, ct_image_mode mode, failure *f,
                             uint64_t max_bytes) {
    if (size < 8 || png_sig_cmp(data, 0, 8) != 0) {
        fail_with(f, CT_EFORMAT, "%s", size < 8 ? TRUNCATED : "not a PNG file (bad signature)");
        return NULL;
    }
    png_job *j = calloc(1, sizeof *j);
    if (!j) {
        fail_with(f, CT_ENOMEM, "out of host memory");
        return NULL;
    }
    *j = (png_job){.at = data + 8, .left = size - 8, .max_bytes = max_bytes};
    int rc = png_run(j, mode);
    png_destroy_read_struct(&j->png, j->info ? &j->info : NULL, NULL);
    ct_tensor *hwc = j->hwc;
    if (rc) {
        *f = j->f;
        ct_tensor_free(hwc);
        hwc = NULL;
    }
    free(j);
    return hwc;
}

/* ==== the API ============================================================= */

/* data starts as `sig` does, or is shorter and a prefix of it. */
static bool starts_as(const unsigned char *data, size_t size, const unsigned char *sig, size_t n) {
    return memcmp(data, sig, size < n ? size : n) == 0;
}

ct_tensor *ct_image_decode_limited(const void *data, size_t size, ct_image_mode mode, const char *name,
                                   const char *fn, uint64_t max_bytes) {
    if (!name) name = "<memory>";
    if (!data && size) {
        ct_set_error(CT_EINVAL, "%s: %s: data is NULL", fn, name);
        return NULL;
    }
    if ((int)mode < (int)CT_IMAGE_UNCHANGED || (int)mode > (int)CT_IMAGE_RGB_ALPHA) {
        ct_set_error(CT_EINVAL, "%s: %s: mode %d is not a ct_image_mode", fn, name, (int)mode);
        return NULL;
    }
    static const unsigned char jpeg_sig[3] = {0xFF, 0xD8, 0xFF}, png_sig[4] = {0x89, 'P', 'N', 'G'};
    const unsigned char *p = data;
    failure f = {0};
    ct_tensor *hwc = NULL;
    if (size == 0) fail_with(&f, CT_EFORMAT, "empty (0 bytes)");
    else if (starts_as(p, size, jpeg_sig, sizeof jpeg_sig)) hwc = decode_jpeg(p, size, mode, &f, max_bytes);
    else if (starts_as(p, size, png_sig, sizeof png_sig)) hwc = decode_png(p, size, mode, &f, max_bytes);
    else fail_with(&f, CT_ENOTSUP, "not a JPEG or PNG file");
    if (!hwc) {
        ct_set_error(f.code ? f.code : CT_EFORMAT, "%s: %s: %s", fn, name, f.msg);
        return NULL;
    }
    ct_tensor *chw = ct_permute(hwc, CT_DIMS(2, 0, 1));
    ct_tensor_free(hwc);
    return chw;
}

ct_tensor *ct_image_decode(const void *data, size_t size, ct_image_mode mode, const char *name) {
    return ct_image_decode_limited(data, size, mode, name, "ct_image_decode", CT_IMAGE_MAX_BYTES);
}

ct_tensor *ct_image_read(const char *path, ct_image_mode mode) {
    if (!path) {
        ct_set_error(CT_EINVAL, "ct_image_read: path is NULL");
        return NULL;
    }
    char *data = NULL;
    size_t size = 0;
    int rc = ct_read_file_raw(path, (size_t)CT_IMAGE_MAX_BYTES, &data, &size);
    if (rc) { /* "PATH: why", named by this function */
        char why[512];
        snprintf(why, sizeof why, "%s", ct_last_error());
        ct_set_error(rc, "ct_image_read: %s", why);
        return NULL;
    }
    ct_tensor *t = ct_image_decode_limited(data, size, mode, path, "ct_image_read", CT_IMAGE_MAX_BYTES);
    free(data);
    return t;
}
