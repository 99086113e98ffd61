/* src/vision/image.c — JPEG and PNG files decoded into tensors (vision.h:
 * ct_image_decode, ct_image_read), as torchvision.io.decode_image decodes
 * them (torchvision/csrc/io/image/cpu/decode_jpeg.cpp, decode_png.cpp),
 * and segmentation masks decoded as class maps (ct_image_decode_mask,
 * ct_image_read_mask: what np.array(PIL.Image.open(file)) holds, a
 * palette's indices where decode_image would give colours).
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
 * images larger than CT_IMAGE_MAX_BYTES decoded, images of more pixels
 * than PIL's decompression-bomb limit (ct_image_set_max_pixels), a PNG
 * chunk claiming more bytes than the file has left, and progressive JPEGs
 * of more than MAX_SCANS scans, so a hostile header cannot take the memory
 * or the time of a worker; libpng inflates no text or ICC chunk past
 * MAX_CHUNK bytes (it drops the chunk). libjpeg's warnings that the data ended early (a marker
 * inside a scan, the file's end before EOI: libjpeg would pad the rest) are
 * truncation errors; its other warnings, and libpng's, are dropped:
 * torchvision decodes on through them and so do these, silently.
 */
#define _POSIX_C_SOURCE 200809L

#include "ctrial/vision.h"

#include <limits.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include "base/files.h"
#include "data/pool.h"
#include "vision/image.h"

#define MAX_SCANS 1000        /* progressive JPEG scans; real files have a dozen */
#define MAX_CHUNK (8u << 20)  /* an ancillary PNG chunk (text, ICC profile): libpng's suggested limit */
#define PIL_MAX_IMAGE_PIXELS 89478485 /* PIL.Image.MAX_IMAGE_PIXELS: 1024 * 1024 * 1024 // 4 // 3 */

/* PIL's Image.MAX_IMAGE_PIXELS, which torchvision's ImageFolder loader
 * obeys: an image of more than twice as many pixels is a decompression
 * bomb (PIL's DecompressionBombError). 0: no limit. Read by the loader's
 * workers while a program may set it. */
static _Atomic int64_t g_max_pixels = PIL_MAX_IMAGE_PIXELS;

int64_t ct_image_set_max_pixels(int64_t max_pixels) {
    return atomic_exchange(&g_max_pixels, max_pixels > 0 ? max_pixels : 0);
}
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

/* The whole image's size against the limit (also when only a box of it
 * is decoded: the same files are refused either way). */
static int check_size(failure *f, uint64_t h, uint64_t w, int c, ct_dtype dtype, uint64_t max_bytes) {
    int64_t max_pixels = atomic_load(&g_max_pixels);
    if (max_pixels > 0 && h * w > 2 * (uint64_t)max_pixels)
        return fail_with(f, CT_ENOTSUP,
                         "the image (%llu x %llu: %llu pixels) is larger than %llu pixels, twice the limit of "
                         "ct_image_set_max_pixels (PIL's MAX_IMAGE_PIXELS, which refuses it as a decompression bomb)",
                         (unsigned long long)h, (unsigned long long)w, (unsigned long long)(h * w),
                         (unsigned long long)(2 * (uint64_t)max_pixels));
    uint64_t bytes = h * w * (uint64_t)c * ct_dtype_size(dtype); /* h, w < 2^32: no overflow */
    if (bytes <= max_bytes) return 0;
    char dims[96];
    snprintf(dims, sizeof dims, "%llu x %llu x %d", (unsigned long long)h, (unsigned long long)w, c);
    return fail_with(f, CT_ENOTSUP, "the image (%s) takes more than the %llu bytes decoded that ctrial allows", dims,
                     (unsigned long long)max_bytes);
}

/* An [h, w, c] tensor of `dtype` to decode into. */
static int new_hwc(failure *f, uint64_t h, uint64_t w, int c, ct_dtype dtype, ct_tensor **out) {
    /* in a loader, memory from its pool (data/pool.h) */
    *out = cti_buf_empty(3, (const int64_t[]){(int64_t)h, (int64_t)w, c}, dtype);
    return *out ? 0 : fail_ct(f);
}

/* The box to decode, asked of the caller's pick once the header gives the
 * image's size: {top, left, height, width}, the whole image when there is
 * no pick. A pick's failure, or a box outside the image, fails the decode. */
typedef struct {
    cti_image_box_fn pick;
    void *ctx;
    int64_t box[4];
} box_job;

static int pick_box(failure *f, box_job *b, int64_t h, int64_t w) {
    b->box[0] = 0, b->box[1] = 0, b->box[2] = h, b->box[3] = w;
    if (!b->pick) return 0;
    ct_clear_error();
    if (b->pick(b->ctx, h, w, b->box)) return fail_ct(f);
    const int64_t *x = b->box;
    if (x[0] < 0 || x[1] < 0 || x[2] < 1 || x[3] < 1 || x[0] + x[2] > h || x[1] + x[3] > w)
        return fail_with(f, CT_EINVAL, "the box to decode (top %lld, left %lld, %lld x %lld) is not inside the %lld x %lld image",
                         (long long)x[0], (long long)x[1], (long long)x[2], (long long)x[3], (long long)h,
                         (long long)w);
    return 0;
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
    bool class_map;     /* a segmentation mask: a grayscale JPEG only (cti_image_decode_how) */
    box_job box;
    ct_tensor *hwc;     /* the rows and columns decoded: the box and its margin */
    int64_t at[2];      /* where the box starts in hwc: row, column */
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

/* A warning that the data ended before the image did (a marker inside a
 * scan's data, the file's end before EOI) is a truncation: libjpeg would
 * pad the rest, a 1 KB file standing for a huge image. Others are dropped. */
static void jpeg_on_message(j_common_ptr c, int level) {
    int m = c->err->msg_code;
    if (level < 0 && (m == JWRN_HIT_MARKER || m == JWRN_JPEG_EOF)) jpeg_fail(c, CT_EFORMAT, TRUNCATED);
}

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
    if (j->class_map && cs != JCS_GRAYSCALE)
        return fail_with(&j->f, CT_EFORMAT, "a mask must be a grayscale image (a class index per pixel); this JPEG "
                                            "has %d components", ci->num_components);
    if (cmyk && mode == CT_IMAGE_UNCHANGED)
        return fail_with(&j->f, CT_ENOTSUP, "a CMYK JPEG has no RGB or gray channels to keep in UNCHANGED mode "
                                            "(decode it in RGB or GRAY mode)");
    int base_c = mode == CT_IMAGE_UNCHANGED ? (cs == JCS_GRAYSCALE ? 1 : 3)
                 : mode == CT_IMAGE_GRAY || mode == CT_IMAGE_GRAY_ALPHA ? 1 : 3;
    bool alpha = mode == CT_IMAGE_GRAY_ALPHA || mode == CT_IMAGE_RGB_ALPHA;
    if (mode != CT_IMAGE_UNCHANGED) ci->out_color_space = cmyk ? JCS_CMYK : base_c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_calc_output_dimensions(ci);
    int in_c = cmyk ? 4 : base_c, c = base_c + alpha;
    if (check_size(&j->f, ci->output_height, ci->output_width, c, CT_U8, j->max_bytes) ||
        pick_box(&j->f, &j->box, ci->output_height, ci->output_width))
        return j->f.code;
    jpeg_start_decompress(ci);
    if (ci->output_components != in_c)
        return fail_with(&j->f, CT_ENOTSUP, "libjpeg gives %d components for this colour space",
                         ci->output_components);
    /* Only the box's rows and columns, and one iMCU around it: libjpeg
     * starts a cropped row at an iMCU boundary and upsamples the chroma at
     * a crop's edges as at the image's, so the pixels next to an edge of
     * what it decodes may differ from the whole image's; one iMCU away
     * they are the same (tests/vision: vision_decode_box). Skipped rows
     * are still entropy-decoded, so a file cut short anywhere still fails;
     * but libjpeg skips rows to the end of the image without reading them,
     * so the last row is read, and dropped. */
    const int64_t *b = j->box.box;
    int64_t my = 8 * ci->max_v_samp_factor, mx = 8 * ci->max_h_samp_factor;
    JDIMENSION height = ci->output_height, width = ci->output_width;
    JDIMENSION y0 = (JDIMENSION)(b[0] > my ? b[0] - my : 0), y1 = (JDIMENSION)(b[0] + b[2] + my);
    JDIMENSION x0 = (JDIMENSION)(b[1] > mx ? b[1] - mx : 0), x1 = (JDIMENSION)(b[1] + b[3] + mx);
    if (y1 > height) y1 = height;
    if (x1 > width) x1 = width;
    JDIMENSION cols = x1 - x0;
    if (cols < width) jpeg_crop_scanline(ci, &x0, &cols); /* moves x0 to an iMCU boundary */
    if (y0 > 0 && jpeg_skip_scanlines(ci, y0) != y0) return fail_with(&j->f, CT_EFORMAT, TRUNCATED);
    j->at[0] = b[0] - (int64_t)y0, j->at[1] = b[1] - (int64_t)x0;
    if (new_hwc(&j->f, y1 - y0, ci->output_width, c, CT_U8, &j->hwc)) return j->f.code;
    bool direct = !cmyk && !alpha; /* libjpeg writes the tensor's rows itself */
    size_t stride = (size_t)ci->output_width * (size_t)c;
    if (!(j->line = malloc((size_t)ci->output_width * (size_t)in_c)))
        return fail_with(&j->f, CT_ENOMEM, "out of host memory");
    unsigned char *base = ct_data_ptr(j->hwc);
    while (ci->output_scanline < y1) {
        unsigned char *row = base + (size_t)(ci->output_scanline - y0) * stride;
        JSAMPROW dst = direct ? row : j->line;
        if (jpeg_read_scanlines(ci, &dst, 1) != 1) return fail_with(&j->f, CT_EFORMAT, TRUNCATED);
        if (!direct) jpeg_convert(j->line, in_c, row, base_c, alpha, ci->output_width);
    }
    if (y1 + 1 < height && jpeg_skip_scanlines(ci, height - y1 - 1) != height - y1 - 1)
        return fail_with(&j->f, CT_EFORMAT, TRUNCATED);
    if (y1 < height && jpeg_read_scanlines(ci, &j->line, 1) != 1) return fail_with(&j->f, CT_EFORMAT, TRUNCATED);
    if (!jpeg_finish_decompress(ci)) return fail_with(&j->f, CT_EFORMAT, TRUNCATED); /* it would wait for data */
    return 0;
}

/* The decoded [h, w, c] tensor as the box's [C, H, W] view (permuted, then
 * narrowed from `at`), or NULL + *f when the decode failed (rc) or the
 * view cannot be made. Frees hwc. */
static ct_tensor *box_view(int rc, ct_tensor *hwc, const int64_t at[2], const int64_t box[4], failure *f) {
    ct_tensor *chw = NULL;
    if (!rc) {
        ct_tensor *p = ct_permute(hwc, CT_DIMS(2, 0, 1));
        ct_tensor *r = p ? ct_narrow(p, 1, at[0], box[2]) : NULL;
        chw = r ? ct_narrow(r, 2, at[1], box[3]) : NULL;
        ct_tensor_free(p);
        ct_tensor_free(r);
        if (!chw) fail_ct(f);
    }
    ct_tensor_free(hwc);
    return chw;
}

static ct_tensor *decode_jpeg(const unsigned char *data, size_t size, ct_image_mode mode, failure *f,
                              uint64_t max_bytes, const box_job *box, bool class_map) {
    jpeg_job *j = calloc(1, sizeof *j);
    if (!j) {
        fail_with(f, CT_ENOMEM, "out of host memory");
        return NULL;
    }
    j->max_bytes = max_bytes;
    j->class_map = class_map;
    j->box = *box;
    int rc = jpeg_run(j, data, size, mode);
    jpeg_destroy_decompress(&j->cinfo); /* safe on a struct never created: zeroed */
    free(j->line);
    if (rc) *f = j->f;
    ct_tensor *chw = box_view(rc, j->hwc, j->at, j->box.box, f);
    free(j);
    return chw;
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
    bool eight_bit; /* a 16-bit file becomes 8 bits */
    bool class_map; /* a segmentation mask: one channel of the file's own values (cti_image_decode_how) */
    box_job box;
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

/* Reads the image's rows (every interlace pass) into j->hwc, whose rows
 * are `stride` bytes, then the file to IEND (a file cut short is refused). */
static void read_png_rows(png_job *j, png_uint_32 h, size_t stride, int passes) {
    unsigned char *base = ct_data_ptr(j->hwc);
    for (int pass = 0; pass < passes; pass++)
        for (png_uint_32 y = 0; y < h; y++) png_read_row(j->png, base + y * stride, NULL);
    png_read_end(j->png, j->info);
}

/* A segmentation mask, as np.array(PIL.Image.open(file)) gives it: one
 * channel of the file's own values. A palette image's indices (unpacked
 * when under 8 bits, tRNS ignored), gray values: 1-bit gray as 0 and 1
 * (PIL's mode "1", a bool array), 2- and 4-bit gray scaled to 8 bits as
 * PIL scales them (x 85, x 17), 16-bit gray as uint16 (PIL's "I;16").
 * Colour or alpha (np.array: [H, W, C]) is not a class map. Called by
 * png_run after png_read_info, under its setjmp. */
static int png_class_map(png_job *j, png_uint_32 w, png_uint_32 h, int depth, int type) {
    png_structp png = j->png;
    if (type != PNG_COLOR_TYPE_PALETTE && type != PNG_COLOR_TYPE_GRAY)
        return fail_with(&j->f, CT_EFORMAT,
                         "a mask must be a palette or grayscale PNG (a class index per pixel); this one is %s",
                         type == PNG_COLOR_TYPE_RGB ? "RGB" : type == PNG_COLOR_TYPE_RGB_ALPHA ? "RGB with alpha"
                                                                                             : "gray with alpha");
    if (depth < 8 && (type == PNG_COLOR_TYPE_PALETTE || depth == 1)) png_set_packing(png);
    else if (depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16 && host_is_little_endian()) png_set_swap(png);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, j->info);
    ct_dtype dtype = depth == 16 ? CT_U16 : CT_U8;
    if (check_size(&j->f, h, w, 1, dtype, j->max_bytes) || pick_box(&j->f, &j->box, h, w) ||
        new_hwc(&j->f, h, w, 1, dtype, &j->hwc))
        return j->f.code;
    size_t stride = (size_t)w * ct_dtype_size(dtype);
    if (png_get_rowbytes(png, j->info) != stride) /* never: a guard for the rows written below */
        return fail_with(&j->f, CT_ENOTSUP, "libpng's rows (%zu bytes) do not fit the mask",
                         (size_t)png_get_rowbytes(png, j->info));
    read_png_rows(j, h, stride, passes);
    return 0;
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
    png_set_chunk_malloc_max(png, MAX_CHUNK); /* a chunk's claimed length is allocated before it is read */
    png_set_read_fn(png, j, png_on_read);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, type, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &type, &interlace, NULL, NULL);
    if (depth > 8 && depth != 16)
        return fail_with(&j->f, CT_ENOTSUP, "a PNG of bit depth %d (ctrial reads 1, 2, 4, 8 and 16)", depth);

    if (j->class_map) return png_class_map(j, w, h, depth, type);

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
    if (depth == 16 && j->eight_bit) png_set_strip_16(png), depth = 8; /* the high byte, as PIL's RGB;16B */
    if (!alpha && want_alpha) png_set_add_alpha(png, depth == 16 ? 0xffff : 0xff, PNG_FILLER_AFTER);
    if (depth == 16 && host_is_little_endian()) png_set_swap(png);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);

    int c = (want_color ? 3 : 1) + want_alpha;
    ct_dtype dtype = depth == 16 ? CT_U16 : CT_U8;
    /* PNG rows are inflated in order, so the whole image is decoded and the
     * box is a view of it */
    if (check_size(&j->f, h, w, c, dtype, j->max_bytes) || pick_box(&j->f, &j->box, h, w) ||
        new_hwc(&j->f, h, w, c, dtype, &j->hwc))
        return j->f.code;
    size_t stride = (size_t)w * (size_t)c * ct_dtype_size(dtype);
    if (png_get_rowbytes(png, info) != stride) /* never: a guard for the rows written below */
        return fail_with(&j->f, CT_ENOTSUP, "libpng's rows (%zu bytes) do not fit the image",
                         (size_t)png_get_rowbytes(png, info));
    read_png_rows(j, h, stride, passes);
    return 0;
}

/* Every chunk up to IEND fits in the file: libpng allocates a chunk's
 * claimed length before it reads it (2 GiB for a tEXt chunk claiming
 * 2^31 - 1 bytes in a file of 2 KB), so a claim past the end is refused
 * here, as the truncation it is, before libpng sees it. */
static int png_chunks_fit(const unsigned char *data, size_t size, failure *f) {
    for (size_t at = 8; at < size;) {
        if (size - at < 12) return fail_with(f, CT_EFORMAT, TRUNCATED);
        const unsigned char *c = data + at;
        uint64_t length = (uint64_t)c[0] << 24 | (uint64_t)c[1] << 16 | (uint64_t)c[2] << 8 | c[3];
        if (length > size - at - 12) {
            char name[5] = "????";
            for (int i = 0; i < 4; i++)
                if ((c[4 + i] | 0x20) >= 'a' && (c[4 + i] | 0x20) <= 'z') name[i] = (char)c[4 + i];
            return fail_with(f, CT_EFORMAT, "%s: the %s chunk at byte %zu claims %llu bytes, %zu are left", TRUNCATED,
                             name, at, (unsigned long long)length, size - at - 12);
        }
        if (memcmp(c + 4, "IEND", 4) == 0) break;
        at += 12 + (size_t)length;
    }
    return 0;
}

static ct_tensor *decode_png(const unsigned char *data, size_t size, ct_image_mode mode,
                             const cti_image_decode_how *how, failure *f, const box_job *box) {
    if (size < 8 || png_sig_cmp(data, 0, 8) != 0) {
        fail_with(f, CT_EFORMAT, "%s", size < 8 ? TRUNCATED : "not a PNG file (bad signature)");
        return NULL;
    }
    if (png_chunks_fit(data, size, f)) return NULL;
    png_job *j = calloc(1, sizeof *j);
    if (!j) {
        fail_with(f, CT_ENOMEM, "out of host memory");
        return NULL;
    }
    *j = (png_job){.at = data + 8, .left = size - 8, .max_bytes = how->max_bytes, .eight_bit = how->eight_bit,
                   .class_map = how->class_map, .box = *box};
    int rc = png_run(j, mode);
    png_destroy_read_struct(&j->png, j->info ? &j->info : NULL, NULL);
    if (rc) *f = j->f;
    ct_tensor *chw = box_view(rc, j->hwc, (const int64_t[]){j->box.box[0], j->box.box[1]}, j->box.box, f);
    free(j);
    return chw;
}

/* ==== the API ============================================================= */

/* data starts as `sig` does, or is shorter and a prefix of it. */
static bool starts_as(const unsigned char *data, size_t size, const unsigned char *sig, size_t n) {
    return memcmp(data, sig, size < n ? size : n) == 0;
}

ct_tensor *cti_image_decode_box(const void *data, size_t size, ct_image_mode mode, const char *name, const char *fn,
                               const cti_image_decode_how *how) {
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
    box_job box = {.pick = how->pick, .ctx = how->ctx};
    uint64_t max_bytes = how->max_bytes;
    ct_tensor *chw = NULL;
    if (size == 0) fail_with(&f, CT_EFORMAT, "empty (0 bytes)");
    else if (starts_as(p, size, jpeg_sig, sizeof jpeg_sig))
        chw = decode_jpeg(p, size, how->class_map ? CT_IMAGE_GRAY : mode, &f, max_bytes, &box, how->class_map);
    else if (starts_as(p, size, png_sig, sizeof png_sig)) chw = decode_png(p, size, mode, how, &f, &box);
    else fail_with(&f, CT_ENOTSUP, "not a JPEG or PNG file");
    if (!chw) ct_set_error(f.code ? f.code : CT_EFORMAT, "%s: %s: %s", fn, name, f.msg);
    return chw;
}

ct_tensor *cti_image_decode_limited(const void *data, size_t size, ct_image_mode mode, const char *name,
                                   const char *fn, uint64_t max_bytes) {
    return cti_image_decode_box(data, size, mode, name, fn, &(cti_image_decode_how){.max_bytes = max_bytes});
}

ct_tensor *ct_image_decode(const void *data, size_t size, ct_image_mode mode, const char *name) {
    return cti_image_decode_limited(data, size, mode, name, "ct_image_decode", CT_IMAGE_MAX_BYTES);
}

int cti_image_read_bytes(const char *path, const char *fn, char **data, size_t *size) {
    if (!path) return ct_set_error(CT_EINVAL, "%s: path is NULL", fn);
    int rc = cti_read_file_raw(path, (size_t)CT_IMAGE_MAX_BYTES, data, size);
    if (rc) { /* "PATH: why", named by fn */
        char why[512];
        snprintf(why, sizeof why, "%s", ct_last_error());
        ct_set_error(rc, "%s: %s", fn, why);
    }
    return rc;
}

ct_tensor *ct_image_read(const char *path, ct_image_mode mode) {
    char *data = NULL;
    size_t size = 0;
    if (cti_image_read_bytes(path, "ct_image_read", &data, &size)) return NULL;
    ct_tensor *t = cti_image_decode_limited(data, size, mode, path, "ct_image_read", CT_IMAGE_MAX_BYTES);
    free(data);
    return t;
}

/* ==== segmentation masks ================================================== */

/* A decoded class map [1, H, W] as the int64 [H, W] the API gives. */
static ct_tensor *class_map_i64(ct_tensor *m, const char *fn, const char *name) {
    if (!m) return NULL;
    ct_tensor *hw = ct_squeeze_dim(m, 0);
    ct_tensor *out = hw ? ct_to_dtype(hw, CT_I64) : NULL;
    ct_tensor_free(hw);
    ct_tensor_free(m);
    if (!out) {
        char why[512];
        snprintf(why, sizeof why, "%s", ct_last_error());
        ct_set_error(ct_last_code() ? ct_last_code() : CT_ENOMEM, "%s: %s: %s", fn, name, why);
    }
    return out;
}

ct_tensor *ct_image_decode_mask(const void *data, size_t size, const char *name) {
    const char *fn = "ct_image_decode_mask";
    cti_image_decode_how how = {.max_bytes = CT_IMAGE_MAX_BYTES, .class_map = true};
    return class_map_i64(cti_image_decode_box(data, size, CT_IMAGE_UNCHANGED, name, fn, &how), fn,
                         name ? name : "<memory>");
}

ct_tensor *ct_image_read_mask(const char *path) {
    const char *fn = "ct_image_read_mask";
    char *data = NULL;
    size_t size = 0;
    if (cti_image_read_bytes(path, fn, &data, &size)) return NULL;
    cti_image_decode_how how = {.max_bytes = CT_IMAGE_MAX_BYTES, .class_map = true};
    ct_tensor *m = cti_image_decode_box(data, size, CT_IMAGE_UNCHANGED, path, fn, &how);
    free(data);
    return class_map_i64(m, fn, path);
}
