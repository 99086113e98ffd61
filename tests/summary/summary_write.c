/* Writes the two event files test_summary.py compares with what
 * torch.utils.tensorboard writes for the same data:
 *
 *     summary_write OUTDIR [DEVICE]
 *
 *   OUTDIR/tb/       cti_tb_add_histogram / _image / _text (src/formats) on
 *                    plain arrays, wall times fixed so that Python can
 *                    serialize the same Events byte for byte;
 *   OUTDIR/summary/  ct_summary_* (ctrial/summary.h) on tensors of many
 *                    dtypes and layouts, on DEVICE ("cpu" or "cuda").
 *
 * Prints the two files' paths, one a line. Every input is made of exact
 * IEEE operations (integer formulas, one division, ldexp) that
 * test_summary.py repeats in numpy, so both sides start from the same bits. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/ctrial.h"
#include "formats/tbevents.h"

static int fail(const char *what) {
    fprintf(stderr, "summary_write: %s: %s: %s\n", what, ct_strerror(ct_last_code()),
            ct_last_error());
    return 1;
}

/* ---- the histograms' values (test_summary.py: hist_values) ------------- */

static uint64_t lcg_state;
static uint64_t lcg(void) {
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lcg_state;
}

/* Fills v (room for 4000 values) with data set `name`; returns the count. */
static size_t hist_values(const char *name, double *v) {
    size_t n = 0;
    double e[CT_TB_HIST_EDGES];
    int k = cti_tb_hist_edges(e);
    if (!strcmp(name, "dyadic")) { /* every partial sum exact: sum_squares too */
        for (int i = -1000; i <= 1000; i++) v[n++] = i / 64.0;
        v[n++] = 1048576.0;
        v[n++] = -0x1p-30;
        v[n++] = 0.0;
        v[n++] = -0.0;
    } else if (!strcmp(name, "span")) { /* every bucket, and values on edges */
        for (int i = 0; i < k; i++) {
            v[n++] = e[i] * 1.05;
            v[n++] = -e[i] * 1.05;
            if (i % 50 == 0) v[n++] = e[i], v[n++] = -e[i];
        }
        v[n++] = e[k - 1];  /* the last edge: in the last bucket */
        v[n++] = -e[k - 1]; /* the first edge */
        v[n++] = -0.5e-12;
        v[n++] = 0.0;
    } else if (!strcmp(name, "single")) {
        v[n++] = 3.0;
    } else if (!strcmp(name, "first_bucket")) { /* torch's start == 0 case */
        v[n++] = -9.91e19;
        v[n++] = 5.0;
    } else if (!strcmp(name, "nonfinite")) { /* inf and 1e30: in no bucket */
        v[n++] = 1.0;
        v[n++] = INFINITY;
        v[n++] = -1e30;
        v[n++] = 2.5;
    } else if (!strcmp(name, "nan")) {
        v[n++] = 1.0;
        v[n++] = NAN;
        v[n++] = 2.0;
    } else if (!strcmp(name, "ties")) { /* pairwise sum: 7, 8, 128, 129 values */
        for (int i = 0; i < 129; i++) v[n++] = 1.0 / (i + 3.0);
    }
    return n;
}

/* 20000 values over 60 binary orders of magnitude. */
static void lcg_values(double *v, size_t n) {
    lcg_state = 12345;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = lcg();
        int64_t m = (int64_t)((r >> 11) % 2000001) - 1000000;
        int ex = (int)((r >> 5) % 61) - 30;
        v[i] = ldexp((double)m / 997.0, ex);
    }
}

/* ---- images' pixels (test_summary.py: the same formulas) -------------- */

static void fill_u8(uint8_t *p, int c, int h, int w, int a, int b, int d) {
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                p[((size_t)ch * h + y) * w + x] = (uint8_t)((ch * a + y * b + x * d + x * y) % 256);
}

static void fill_f32(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (float)((int)((i * 37) % 301) - 25) / 250.0f;
}

static const char *const texts[] = {
    "hello",
    "",
    "größe € \xf0\x9f\x98\x80\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n*emphasis* `code`",
};

static int write_tb(const char *dir) {
    cti_tb_writer *w = cti_tb_open(dir, ".ctrial");
    if (!w) return fail("cti_tb_open");
    static double v[4000];
    static const char *const sets[] = {"dyadic", "span", "single", "first_bucket",
                                       "nonfinite", "nan", "ties"};
    double wall = 1700000000.0;
    for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
        size_t n = hist_values(sets[s], v);
        char tag[64];
        snprintf(tag, sizeof tag, "hist/%s", sets[s]);
        if (cti_tb_add_histogram(w, tag, v, n, (int64_t)s * 3 - 2, wall + s)) return fail(tag);
    }
    static double big[20000];
    lcg_values(big, 20000);
    if (cti_tb_add_histogram(w, "hist/lcg", big, 20000, 1 << 20, wall + 10)) return fail("hist/lcg");

    /* Images: gray (one channel, colorspace 1), RGB, RGBA; HWC bytes. */
    static uint8_t px[4 * 40 * 50];
    const int chans[3] = {1, 3, 4};
    for (int i = 0; i < 3; i++) {
        int h = 10 + i * 15, wd = 13 + i * 18, c = chans[i];
        for (int y = 0; y < h; y++)
            for (int x = 0; x < wd; x++)
                for (int ch = 0; ch < c; ch++)
                    px[((size_t)y * wd + x) * c + ch] = (uint8_t)((y * 7 + x * 3 + ch * 60 + x * y) % 256);
        char tag[32];
        snprintf(tag, sizeof tag, "tbimg/c%d", c);
        if (cti_tb_add_image(w, tag, px, h, wd, c, i, wall + 20 + i)) return fail(tag);
    }

    for (int i = 0; i < 3; i++)
        if (cti_tb_add_text(w, "notes", texts[i], i, wall + 30 + i)) return fail("text");
    printf("%s\n", cti_tb_path(w));
    if (cti_tb_flush(w)) return fail("flush");
    cti_tb_close(w);
    return 0;
}

static ct_tensor *on(ct_tensor *t, ct_device dev) {
    return dev.type == CT_CPU ? t : ct_to_device(t, dev, false);
}

static int write_summary(const char *dir, ct_device dev) {
    ct_summary_writer *w = ct_summary_open(dir);
    if (!w) return fail("ct_summary_open");
    ct_scope *scope = ct_scope_begin();

    /* Scalars. */
    const double scalars[] = {0.1, -2.5, 1e39, 3.0};
    for (int i = 0; i < 4; i++)
        if (ct_summary_add_scalar(w, "scalar/x", scalars[i], i * 10)) return fail("scalar");

    /* Histograms from tensors. */
    static double big[20000];
    lcg_values(big, 20000);
    ct_tensor *h64 = on(ct_from_data(big, CT_SHAPE(100, 200), CT_F64), dev);
    ct_tensor *h32 = ct_to_dtype(h64, CT_F32);
    ct_tensor *h16 = ct_to_dtype(ct_div_scalar(h64, 1e6), CT_BF16);
    ct_tensor *ints = ct_t(ct_reshape(on(ct_arange(-50, 50, 1, &(ct_topts){.dtype = CT_I64}), dev),
                                      CT_SHAPE(10, 10)));
    static double v[4000];
    size_t n = hist_values("span", v);
    ct_tensor *span = on(ct_from_data(v, CT_SHAPE((int64_t)n), CT_F64), dev);
    if (!h64 || !h32 || !h16 || !ints || !span) return fail("histogram tensors");
    if (ct_summary_add_histogram(w, "hist/f64", h64, 0) ||
        ct_summary_add_histogram(w, "hist/f32", h32, 1) ||
        ct_summary_add_histogram(w, "hist/bf16", h16, 2) ||
        ct_summary_add_histogram(w, "hist/i64_t", ints, -3) ||
        ct_summary_add_histogram(w, "hist/span", span, (int64_t)1 << 40))
        return fail("histogram");

    /* Images, CHW unless said. */
    static uint8_t u8[3 * 300 * 400];
    fill_u8(u8, 1, 5, 7, 0, 31, 7);
    ct_tensor *gray_u8 = on(ct_from_data(u8, CT_SHAPE(1, 5, 7), CT_U8), dev);
    fill_u8(u8, 3, 16, 24, 85, 13, 29);
    ct_tensor *rgb_u8 = on(ct_from_data(u8, CT_SHAPE(3, 16, 24), CT_U8), dev);
    fill_u8(u8, 4, 9, 11, 64, 17, 5);
    ct_tensor *rgba_u8 = on(ct_from_data(u8, CT_SHAPE(4, 9, 11), CT_U8), dev);
    fill_u8(u8, 3, 300, 400, 1, 3, 2);
    ct_tensor *big_u8 = on(ct_from_data(u8, CT_SHAPE(3, 300, 400), CT_U8), dev);
    fill_u8(u8, 6, 4, 3, 11, 40, 90); /* 72 bytes, read as H x W x C = 6 x 4 x 3 */
    ct_tensor *hwc = on(ct_from_data(u8, CT_SHAPE(6, 4, 3), CT_U8), dev);
    ct_tensor *perm = ct_permute(hwc, CT_DIMS(2, 0, 1)); /* CHW, not contiguous */

    static float f[3 * 32 * 40];
    fill_f32(f, 3 * 32 * 40);
    f[5] = NAN, f[6] = -0.0f, f[7] = 1.0f, f[8] = 0.5f, f[9] = 254.5f / 255.0f;
    f[10] = 1.0f / 255.0f, f[11] = 2.0f, f[12] = -1.0f, f[13] = 999.0f / 1000.0f;
    ct_tensor *rgb_f32 = on(ct_from_data(f, CT_SHAPE(3, 32, 40), CT_F32), dev);
    ct_tensor *gray_f64 = ct_div_scalar(ct_reshape(on(ct_arange(0, 36, 1, &(ct_topts){.dtype = CT_F64}), dev),
                                                   CT_SHAPE(1, 6, 6)),
                                        35.0);
    ct_tensor *hw_f32 = on(ct_from_data(f, CT_SHAPE(8, 10), CT_F32), dev);
    ct_tensor *rgba_f16 = ct_to_dtype(on(ct_from_data(f, CT_SHAPE(4, 3, 5), CT_F32), dev), CT_F16);
    ct_tensor *rgb_bf16 = ct_to_dtype(on(ct_from_data(f, CT_SHAPE(3, 4, 6), CT_F32), dev), CT_BF16);
    bool checker_data[16];
    int64_t i64_data[12];
    for (int i = 0; i < 16; i++) checker_data[i] = i % 3 == 0;
    for (int i = 0; i < 12; i++) i64_data[i] = i % 3;
    ct_tensor *checker = on(ct_from_data(checker_data, CT_SHAPE(1, 4, 4), CT_BOOL), dev);
    ct_tensor *i64 = on(ct_from_data(i64_data, CT_SHAPE(3, 2, 2), CT_I64), dev);
    ct_tensor *one = on(ct_from_data((const float[]){0.25f, 0.5f, 0.75f}, CT_SHAPE(3, 1, 1), CT_F32), dev);
    struct {
        const char *tag;
        ct_tensor *t;
    } imgs[] = {{"img/gray_u8", gray_u8},   {"img/rgb_u8", rgb_u8},     {"img/rgba_u8", rgba_u8},
                {"img/big_u8", big_u8},     {"img/perm_u8", perm},      {"img/rgb_f32", rgb_f32},
                {"img/gray_f64", gray_f64}, {"img/hw_f32", hw_f32},     {"img/rgba_f16", rgba_f16},
                {"img/rgb_bf16", rgb_bf16}, {"img/bool", checker},      {"img/i64", i64},
                {"img/1x1", one}};
    for (size_t i = 0; i < sizeof imgs / sizeof *imgs; i++) {
        if (!imgs[i].t) return fail(imgs[i].tag);
        if (ct_summary_add_image(w, imgs[i].tag, imgs[i].t, (int64_t)i)) return fail(imgs[i].tag);
    }

    /* Text, and a long one. */
    for (int i = 0; i < 3; i++)
        if (ct_summary_add_text(w, "notes", texts[i], i)) return fail("text");
    size_t long_len = 100000;
    char *long_text = malloc(long_len + 1);
    for (size_t i = 0; i < long_len; i++) long_text[i] = (char)('a' + i % 26);
    long_text[long_len] = '\0';
    if (ct_summary_add_text(w, "long", long_text, 7)) return fail("long text");
    free(long_text);

    ct_scope_end(scope);
    printf("%s\n", ct_summary_path(w));
    if (ct_summary_close(w)) return fail("close");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: summary_write OUTDIR [DEVICE]\n");
        return 2;
    }
    ct_device dev = ct_cpu();
    if (argc == 3 && ct_device_parse(argv[2], &dev)) return fail("device");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tb", argv[1]);
    if (write_tb(dir)) return 1;
    snprintf(dir, sizeof dir, "%s/summary", argv[1]);
    return write_summary(dir, dev);
}
