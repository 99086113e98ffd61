/* tests/vision/image_write.c — PNG and JPEG files made in memory with
 * libpng's and libjpeg's encoders (image_write.h). */
#include "image_write.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

static void die(const char *what) {
    fprintf(stderr, "image_write: %s\n", what);
    exit(2);
}

static void png_append(png_structp png, png_bytep data, size_t n) {
    encoded *e = png_get_io_ptr(png);
    unsigned char *p = realloc(e->data, e->size + n);
    if (!p) die("out of memory");
    memcpy(p + e->size, data, n);
    e->data = p;
    e->size += n;
}

static void png_no_flush(png_structp png) { (void)png; }

encoded png_encode(int w, int h, int color_type, int depth, bool interlace, const unsigned char *rows,
                   const unsigned char *palette, int n_palette) {
    encoded e = {NULL, 0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) die("libpng failed to encode");
    png_set_write_fn(png, &e, png_append, png_no_flush);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color_type,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (color_type == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[256];
        for (int i = 0; i < n_palette; i++) pal[i] = (png_color){palette[3 * i], palette[3 * i + 1], palette[3 * i + 2]};
        png_set_PLTE(png, info, pal, n_palette);
    }
    png_write_info(png, info);
    size_t stride = png_get_rowbytes(png, info);
    int passes = png_set_interlace_handling(png);
    for (int p = 0; p < passes; p++)
        for (int y = 0; y < h; y++) png_write_row(png, rows + (size_t)y * stride);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return e;
}

encoded jpeg_encode(int w, int h, int comps, bool progressive, int quality, const unsigned char *pixels) {
    return jpeg_encode_sampled(w, h, comps, progressive, quality, comps == 3 ? 2 : 1, comps == 3 ? 2 : 1, 0, pixels);
}

encoded jpeg_encode_sampled(int w, int h, int comps, bool progressive, int quality, int hs, int vs,
                            int restart_rows, const unsigned char *pixels) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err); /* exits on error */
    jpeg_create_compress(&c);
    unsigned char *buf = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &buf, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    c.comp_info[0].h_samp_factor = hs;
    c.comp_info[0].v_samp_factor = vs;
    for (int i = 1; i < comps; i++) c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
    c.restart_in_rows = restart_rows;
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)c.next_scanline * (size_t)w * (size_t)comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    encoded e = {malloc(size), size};
    if (!e.data) die("out of memory");
    memcpy(e.data, buf, size);
    free(buf);
    return e;
}

void write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) die(path);
}
