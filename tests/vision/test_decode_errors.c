/* ct_image_decode and ct_image_read on bad input: every prefix of a PNG and
 * of a JPEG (baseline and progressive) fails with CT_EFORMAT naming the
 * file, and so do bytes flipped anywhere in a PNG; flipping any byte of a
 * JPEG gives an error naming the file or an image of the mode's channels
 * (libjpeg decodes on through damaged scan data, as torchvision does),
 * never a crash (the suite runs this under ASan and UBSan). Then empty,
 * non-image, missing and directory paths, bad arguments, headers claiming
 * images too large to decode, 12-bit and CMYK JPEGs, a progressive JPEG
 * of too many scans, and the layout and byte order of what decodes. The
 * images are encoded here with libpng and libjpeg (image_write.c). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <ctrial/vision.h>

#include "ct_test.h"
#include "image_write.h"

static char dir[256];

static const char *path_of(const char *name) {
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static const ct_image_mode modes[] = {CT_IMAGE_UNCHANGED, CT_IMAGE_GRAY, CT_IMAGE_GRAY_ALPHA, CT_IMAGE_RGB,
                                      CT_IMAGE_RGB_ALPHA};

/* Channels of an image of `file_c` channels (1, 2, 3, 4) decoded in mode. */
static int64_t channels(ct_image_mode mode, int file_c) {
    switch (mode) {
    case CT_IMAGE_GRAY: return 1;
    case CT_IMAGE_GRAY_ALPHA: return 2;
    case CT_IMAGE_RGB: return 3;
    case CT_IMAGE_RGB_ALPHA: return 4;
    default: return file_c;
    }
}

/* An [C, H, W] image of dtype, laid out channels-last. */
static bool is_image(const ct_tensor *t, int64_t c, int64_t h, int64_t w, ct_dtype dtype) {
    return t && ct_dtype_of(t) == dtype && ct_ndim(t) == 3 && ct_size(t, 0) == c && ct_size(t, 1) == h &&
           ct_size(t, 2) == w && ct_stride(t, 0) == 1 && ct_stride(t, 1) == w * c && ct_stride(t, 2) == c;
}

static unsigned char *pattern(int w, int h, int c) {
    unsigned char *p = malloc((size_t)(w * h * c));
    for (int i = 0; i < w * h * c; i++) p[i] = (unsigned char)((i * 37 + (i / (w * c)) * 11) & 0xff);
    return p;
}

/* Every prefix fails (CT_EFORMAT, the name in the message); the whole decodes. */
static void check_prefixes(const char *name, const encoded *e, int file_c, int h, int w, ct_dtype dtype) {
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        int bad = 0;
        for (size_t n = 0; n < e->size; n++) {
            ct_tensor *t = ct_image_decode(e->data, n, modes[m], name);
            if (t || ct_last_code() != CT_EFORMAT || !strstr(ct_last_error(), name)) {
                if (bad++ < 3)
                    fprintf(stderr, "%s cut at %zu of %zu, mode %d: %s (%s)\n", name, n, e->size, (int)modes[m],
                            t ? "decoded" : ct_strerror(ct_last_code()), ct_last_error());
            }
            ct_tensor_free(t);
            ct_clear_error();
        }
        CHECK(bad == 0);
        ct_tensor *t = ct_image_decode(e->data, e->size, modes[m], name);
        CHECK(is_image(t, channels(modes[m], file_c), h, w, dtype));
        ct_tensor_free(t);
    }
    /* and from files, cut at a few points */
    size_t cuts[] = {1, 8, e->size / 3, e->size / 2, e->size - 2, e->size - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
        const char *p = path_of("cut.img");
        write_file(p, e->data, cuts[k]);
        CHECK(ct_image_read(p, CT_IMAGE_RGB) == NULL);
        CHECK_ERR(CT_EFORMAT, p);
    }
}

/* Each byte flipped in turn: an error naming the file, or (when
 * `may_decode`) an image of the mode's channels. */
static void check_flips(const char *name, const encoded *e, int file_c, bool may_decode) {
    unsigned char *copy = malloc(e->size);
    int bad = 0, decoded = 0;
    for (size_t i = 0; i < e->size; i++) {
        memcpy(copy, e->data, e->size);
        copy[i] ^= (unsigned char)(i % 3 == 0 ? 0xFF : i % 3 == 1 ? 0x01 : 0x80);
        ct_image_mode mode = modes[i % 5];
        ct_tensor *t = ct_image_decode(copy, e->size, mode, name);
        int code = ct_last_code();
        bool ok = t ? may_decode && ct_ndim(t) == 3 && ct_size(t, 0) == channels(mode, file_c)
                    : (code == CT_EFORMAT || code == CT_ENOTSUP) && strstr(ct_last_error(), name);
        decoded += t != NULL;
        if (!ok && bad++ < 3)
            fprintf(stderr, "%s with byte %zu flipped, mode %d: %s (%s)\n", name, i, (int)mode,
                    t ? "decoded" : ct_strerror(code), ct_last_error());
        ct_tensor_free(t);
        ct_clear_error();
    }
    CHECK(bad == 0);
    printf("%s: %d of %zu flips decode\n", name, decoded, e->size);
    free(copy);
}

static void test_truncated_and_corrupt(void) {
    int w = 33, h = 17;
    unsigned char *rgb = pattern(w, h, 3), *gray = pattern(w, h, 1);
    encoded png = png_encode(w, h, 2, 8, false, rgb, NULL, 0);
    encoded png_i = png_encode(w, h, 0, 8, true, gray, NULL, 0);
    unsigned char *rows16 = pattern(w, h, 2); /* 16-bit gray rows: 2 bytes a pixel */
    encoded png16 = png_encode(w, h, 0, 16, false, rows16, NULL, 0);
    encoded jpg = jpeg_encode(w, h, 3, false, 75, rgb);
    encoded jpg_p = jpeg_encode(w, h, 3, true, 75, rgb);
    encoded jpg_g = jpeg_encode(w, h, 1, false, 75, gray);
    check_prefixes("rgb.png", &png, 3, h, w, CT_U8);
    check_prefixes("interlaced.png", &png_i, 1, h, w, CT_U8);
    check_prefixes("gray16.png", &png16, 1, h, w, CT_U16);
    check_prefixes("rgb.jpg", &jpg, 3, h, w, CT_U8);
    check_prefixes("progressive.jpg", &jpg_p, 3, h, w, CT_U8);
    check_prefixes("gray.jpg", &jpg_g, 1, h, w, CT_U8);
    check_flips("rgb.png", &png, 3, false);
    check_flips("interlaced.png", &png_i, 1, false);
    check_flips("rgb.jpg", &jpg, 3, true);
    check_flips("progressive.jpg", &jpg_p, 3, true);
    encoded all[] = {png, png_i, png16, jpg, jpg_p, jpg_g};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i].data);
    free(rgb);
    free(gray);
    free(rows16);
}

static void test_files_and_arguments(void) {
    const char *p = path_of("empty.png");
    write_file(p, "", 0);
    CHECK(ct_image_read(p, CT_IMAGE_RGB) == NULL);
    CHECK_ERR(CT_EFORMAT, p);
    CHECK(ct_image_decode("", 0, CT_IMAGE_RGB, "nothing.jpg") == NULL);
    CHECK_ERR(CT_EFORMAT, "nothing.jpg");
    p = path_of("notes.png");
    write_file(p, "hello, world\n", 13);
    CHECK(ct_image_read(p, CT_IMAGE_RGB) == NULL);
    CHECK_ERR(CT_ENOTSUP, p);
    CHECK(ct_image_decode("GIF89a", 6, CT_IMAGE_RGB, NULL) == NULL);
    CHECK_ERR(CT_ENOTSUP, "<memory>: not a JPEG or PNG file");
    p = path_of("missing.jpg");
    CHECK(ct_image_read(p, CT_IMAGE_RGB) == NULL);
    CHECK_ERR(CT_EIO, p);
    CHECK(ct_image_read(dir, CT_IMAGE_RGB) == NULL);
    CHECK_ERR(CT_EIO, dir);
    CHECK(ct_image_read(NULL, CT_IMAGE_RGB) == NULL);
    CHECK_ERR(CT_EINVAL, "path is NULL");
    CHECK(ct_image_decode(NULL, 10, CT_IMAGE_RGB, "x.png") == NULL);
    CHECK_ERR(CT_EINVAL, "x.png");
    CHECK(ct_image_decode("\x89PNG", 4, (ct_image_mode)5, "x.png") == NULL);
    CHECK_ERR(CT_EINVAL, "mode 5");
    CHECK(ct_image_decode("\x89PNG\r\n\x1a\n", 8, CT_IMAGE_RGB, "sig.png") == NULL); /* the signature alone */
    CHECK_ERR(CT_EFORMAT, "sig.png");
    CHECK(ct_image_decode("\x89PNG\r\n\x1b\n....", 12, CT_IMAGE_RGB, "sig.png") == NULL);
    CHECK_ERR(CT_EFORMAT, "sig.png: not a PNG file");
}

static void put32(unsigned char *p, uint32_t v) {
    for (int b = 0; b < 4; b++) p[b] = (unsigned char)(v >> (24 - 8 * b));
}

/* The offset of the first marker `m` (0xFF m) after SOI, or 0. */
static size_t find_marker(const encoded *e, unsigned char m) {
    for (size_t i = 2; i + 1 < e->size; i++)
        if (e->data[i] == 0xFF && e->data[i + 1] == m) return i;
    return 0;
}

static void test_limits_and_kinds(void) {
    /* A PNG header claiming 65535 x 65535 RGBA of 16 bits (32 GiB): refused
     * before anything is allocated. */
    unsigned char png[8 + 25 + 12 + 12] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char *ihdr = png + 8;
    put32(ihdr, 13);
    memcpy(ihdr + 4, "IHDR", 4);
    put32(ihdr + 8, 65535);
    put32(ihdr + 12, 65535);
    ihdr[16] = 16, ihdr[17] = 6, ihdr[18] = ihdr[19] = ihdr[20] = 0;
    put32(ihdr + 21, (uint32_t)crc32(0, ihdr + 4, 17));
    memcpy(ihdr + 25, "\0\0\0\0IDAT", 8); /* libpng reads the header up to the image data */
    put32(ihdr + 33, (uint32_t)crc32(0, (const unsigned char *)"IDAT", 4));
    memcpy(ihdr + 37, "\0\0\0\0IEND\xae\x42\x60\x82", 12);
    CHECK(ct_image_decode(png, sizeof png, CT_IMAGE_RGB_ALPHA, "huge.png") == NULL);
    CHECK_ERR(CT_ENOTSUP, "huge.png: the image (65535 x 65535: 4294836225 pixels) is larger than 178956970 pixels");
    CHECK(ct_image_set_max_pixels(0) == 89478485); /* no pixel limit: the size limit still holds */
    CHECK(ct_image_decode(png, sizeof png, CT_IMAGE_RGB_ALPHA, "huge.png") == NULL);
    CHECK_ERR(CT_ENOTSUP, "huge.png: the image (65535 x 65535 x 4)");

    int w = 16, h = 8;
    unsigned char *rgb = pattern(w, h, 3), *cmyk = pattern(w, h, 4);
    encoded jpg = jpeg_encode(w, h, 3, false, 90, rgb);
    size_t sof = find_marker(&jpg, 0xC0); /* FF C0, length (2), precision, height (2), width (2) */
    CHECK(sof > 0);
    unsigned char *copy = malloc(jpg.size);
    memcpy(copy, jpg.data, jpg.size);
    copy[sof + 5] = copy[sof + 6] = copy[sof + 7] = copy[sof + 8] = 0xFF; /* 65535 x 65535 */
    CHECK(ct_image_decode(copy, jpg.size, CT_IMAGE_RGB, "wide.jpg") == NULL);
    CHECK_ERR(CT_ENOTSUP, "wide.jpg");
    copy[sof + 5] = copy[sof + 7] = 0xFF, copy[sof + 6] = copy[sof + 8] = 0xDC; /* 65500 x 65500: 12 GB */
    CHECK(ct_image_decode(copy, jpg.size, CT_IMAGE_GRAY, "big.jpg") == NULL);
    CHECK_ERR(CT_ENOTSUP, "big.jpg: the image (65500 x 65500 x 1)");
    CHECK(ct_image_set_max_pixels(89478485) == 0);
    CHECK(ct_image_decode(copy, jpg.size, CT_IMAGE_GRAY, "big.jpg") == NULL);
    CHECK_ERR(CT_ENOTSUP, "big.jpg: the image (65500 x 65500: 4290250000 pixels) is larger than 178956970 pixels");
    memcpy(copy, jpg.data, jpg.size);
    copy[sof + 4] = 12; /* 12-bit samples */
    CHECK(ct_image_decode(copy, jpg.size, CT_IMAGE_RGB, "deep.jpg") == NULL);
    CHECK_ERR(CT_ENOTSUP, "deep.jpg");
    free(copy);

    /* CMYK: RGB and GRAY convert, UNCHANGED is refused */
    encoded cm = jpeg_encode(w, h, 4, false, 90, cmyk);
    ct_tensor *t = ct_image_decode(cm.data, cm.size, CT_IMAGE_RGB, "cmyk.jpg");
    CHECK(is_image(t, 3, h, w, CT_U8));
    ct_tensor_free(t);
    t = ct_image_decode(cm.data, cm.size, CT_IMAGE_GRAY_ALPHA, "cmyk.jpg");
    CHECK(is_image(t, 2, h, w, CT_U8));
    ct_tensor_free(t);
    CHECK(ct_image_decode(cm.data, cm.size, CT_IMAGE_UNCHANGED, "cmyk.jpg") == NULL);
    CHECK_ERR(CT_ENOTSUP, "cmyk.jpg: a CMYK JPEG");

    /* A progressive JPEG whose last scan comes 1001 times (libjpeg only
     * warns of the bogus progression): refused past 1000 scans. */
    encoded prog = jpeg_encode(w, h, 3, true, 90, rgb);
    size_t last = 0;
    for (size_t i = 2; i + 1 < prog.size; i++)
        if (prog.data[i] == 0xFF && prog.data[i + 1] == 0xDA) last = i;
    CHECK(last > 0 && prog.data[prog.size - 2] == 0xFF && prog.data[prog.size - 1] == 0xD9);
    size_t seg = prog.size - 2 - last, n = last + 1001 * seg + 2;
    unsigned char *many = malloc(n);
    memcpy(many, prog.data, last);
    for (int k = 0; k < 1001; k++) memcpy(many + last + (size_t)k * seg, prog.data + last, seg);
    memcpy(many + n - 2, "\xFF\xD9", 2);
    CHECK(ct_image_decode(many, n, CT_IMAGE_RGB, "scans.jpg") == NULL);
    CHECK_ERR(CT_ENOTSUP, "scans.jpg: a progressive JPEG of more than 1000 scans");
    t = ct_image_decode(many, last + 200 * seg + 2, CT_IMAGE_RGB, "fewer.jpg"); /* cut short: an error */
    CHECK(t == NULL);
    CHECK_ERR(CT_EFORMAT, "fewer.jpg");
    /* cut inside a scan's data and closed with EOI: libjpeg warns that it
     * hit a marker and would pad the rest; a truncation */
    memcpy(many + last + seg / 2, "\xFF\xD9", 2);
    CHECK(ct_image_decode(many, last + seg / 2 + 2, CT_IMAGE_RGB, "half.jpg") == NULL);
    CHECK_ERR(CT_EFORMAT, "half.jpg: Image is incomplete or truncated");
    memcpy(many + last + seg / 2, prog.data + last + seg / 2, 2);
    memcpy(many + last + 200 * seg, "\xFF\xD9", 2); /* 200 scans and EOI: decodes */
    t = ct_image_decode(many, last + 200 * seg + 2, CT_IMAGE_RGB, "fewer.jpg");
    CHECK(is_image(t, 3, h, w, CT_U8));
    ct_tensor_free(t);
    free(many);

    /* A decompression bomb (the fault campaign's): a small progressive JPEG
     * whose header claims 26000 x 26000 is refused before anything is
     * decoded, as PIL refuses more than 2 x MAX_IMAGE_PIXELS; the limit
     * is PIL's and can be moved. */
    size_t sof2 = find_marker(&prog, 0xC2);
    CHECK(sof2 > 0);
    unsigned char *bomb = malloc(prog.size);
    memcpy(bomb, prog.data, prog.size);
    bomb[sof2 + 5] = bomb[sof2 + 7] = 0x65, bomb[sof2 + 6] = bomb[sof2 + 8] = 0x90; /* 0x6590 = 26000 */
    CHECK(ct_image_decode(bomb, prog.size, CT_IMAGE_RGB, "bomb.jpg") == NULL);
    CHECK_ERR(CT_ENOTSUP, "bomb.jpg: the image (26000 x 26000: 676000000 pixels) is larger than 178956970 pixels");
    free(bomb);
    CHECK(ct_image_set_max_pixels(50) == 89478485);
    CHECK(ct_image_decode(jpg.data, jpg.size, CT_IMAGE_RGB, "small.jpg") == NULL); /* 128 pixels > 100 */
    CHECK_ERR(CT_ENOTSUP, "small.jpg: the image (8 x 16: 128 pixels) is larger than 100 pixels");
    CHECK(ct_image_set_max_pixels(64) == 50);
    t = ct_image_decode(jpg.data, jpg.size, CT_IMAGE_RGB, "small.jpg"); /* 128 <= 2 x 64 */
    CHECK(is_image(t, 3, h, w, CT_U8));
    ct_tensor_free(t);
    CHECK(ct_image_set_max_pixels(0) == 64); /* lifted */
    CHECK(ct_image_set_max_pixels(89478485) == 0);

    /* A PNG whose tEXt chunk claims 2^31 - 1 bytes in a 2.4 KB file: refused
     * as cut short before libpng allocates the claimed length (PIL, which
     * ImageFolder decodes with, reads the chunk in blocks and fails at the
     * file's end: truncated too). Determined decodes no images itself. */
    unsigned char text_png[8 + 25 + 12 + 2400];
    memcpy(text_png, png, 8);
    put32(ihdr + 8, 4);
    put32(ihdr + 12, 4);
    ihdr[16] = 8, ihdr[17] = 0;
    put32(ihdr + 21, (uint32_t)crc32(0, ihdr + 4, 17));
    memcpy(text_png + 8, ihdr, 25);
    unsigned char *chunk = text_png + 33;
    put32(chunk, 0x7FFFFFFF);
    memcpy(chunk + 4, "tEXt", 4);
    memset(chunk + 8, 'a', sizeof text_png - 41);
    CHECK(ct_image_decode(text_png, sizeof text_png, CT_IMAGE_GRAY, "text.png") == NULL);
    CHECK_ERR(CT_EFORMAT, "text.png: Image is incomplete or truncated: the tEXt chunk at byte 33 claims 2147483647 "
                          "bytes, 2400 are left");

    encoded all[] = {jpg, cm, prog};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i].data);
    free(rgb);
    free(cmyk);
}

/* 16-bit samples come out in host order, as uint16; RGB 8-bit as written. */
static void test_values(void) {
    const unsigned char rows[] = {0x01, 0x02, 0xA0, 0xB0, 0xFF, 0xFE}; /* 3 x 1 gray, big-endian */
    encoded e = png_encode(3, 1, 0, 16, false, rows, NULL, 0);
    ct_tensor *t = ct_image_decode(e.data, e.size, CT_IMAGE_UNCHANGED, "v16.png");
    CHECK(is_image(t, 1, 1, 3, CT_U16));
    CHECK(strcmp(ct_dtype_name(CT_U16), "uint16") == 0 && ct_dtype_size(CT_U16) == 2);
    uint16_t v[3] = {0};
    CHECK_OK(ct_read(t, v, sizeof v));
    CHECK(v[0] == 0x0102 && v[1] == 0xA0B0 && v[2] == 0xFFFE);
    ct_tensor_free(t);
    t = ct_image_decode(e.data, e.size, CT_IMAGE_RGB_ALPHA, "v16.png");
    uint16_t v4[12] = {0};
    CHECK(is_image(t, 4, 1, 3, CT_U16));
    CHECK_OK(ct_read(t, v4, sizeof v4)); /* C-ordered: channel by channel */
    CHECK(v4[0] == 0x0102 && v4[3] == 0x0102 && v4[6] == 0x0102 && v4[9] == 0xFFFF && v4[11] == 0xFFFF);
    ct_tensor_free(t);
    free(e.data);

    const unsigned char px[] = {10, 20, 30, 40, 50, 60}; /* 2 x 1 RGB */
    e = png_encode(2, 1, 2, 8, false, px, NULL, 0);
    t = ct_image_decode(e.data, e.size, CT_IMAGE_UNCHANGED, "v8.png");
    CHECK(is_image(t, 3, 1, 2, CT_U8) && !ct_is_contiguous(t));
    const unsigned char *hwc = ct_data_ptr(t); /* NULL: not contiguous */
    CHECK(hwc == NULL);
    ct_clear_error();
    unsigned char chw[6];
    CHECK_OK(ct_read(t, chw, sizeof chw));
    CHECK(chw[0] == 10 && chw[1] == 40 && chw[2] == 20 && chw[3] == 50 && chw[4] == 30 && chw[5] == 60);
    ct_tensor_free(t);
    free(e.data);
    CHECK(ct_tensor_live_count() == 0);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ct_vision_errors_XXXXXX");
    if (!mkdtemp(dir)) return 2;
    test_truncated_and_corrupt();
    test_files_and_arguments();
    test_limits_and_kinds();
    test_values();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ct_test_result("vision_decode_errors");
}
