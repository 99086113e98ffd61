/* tests/vision/image_write.h — PNG and JPEG files made in memory, for the C
 * tests of the image decoder (libpng's and libjpeg's encoders). */
#ifndef CT_TEST_IMAGE_WRITE_H
#define CT_TEST_IMAGE_WRITE_H

#include <stdbool.h>
#include <stddef.h>

/* A malloc'd encoded image. */
typedef struct {
    unsigned char *data;
    size_t size;
} encoded;

/* A PNG of w x h pixels: color_type is libpng's (PNG_COLOR_TYPE_GRAY = 0,
 * RGB = 2, PALETTE = 3, GRAY_ALPHA = 4, RGB_ALPHA = 6), depth its bits
 * per sample; `rows` holds the packed rows as a PNG stores them (16-bit
 * samples big-endian). A palette image gets `palette` (3 bytes a colour,
 * n_palette of them). Exits on failure. */
encoded png_encode(int w, int h, int color_type, int depth, bool interlace, const unsigned char *rows,
                   const unsigned char *palette, int n_palette);
/* A JPEG of w x h pixels of `comps` components (1 gray, 3 RGB, 4 CMYK),
 * baseline or progressive. Exits on failure. */
encoded jpeg_encode(int w, int h, int comps, bool progressive, int quality, const unsigned char *pixels);
/* jpeg_encode with the first component sampled hs x vs times the others
 * (2 x 2: 4:2:0, libjpeg's default for colour; 2 x 1: 4:2:2; 1 x 1:
 * 4:4:4) and a restart marker every restart_rows MCU rows (0: none). */
encoded jpeg_encode_sampled(int w, int h, int comps, bool progressive, int quality, int hs, int vs,
                            int restart_rows, const unsigned char *pixels);
/* Writes e to path; exits on failure. */
void write_file(const char *path, const void *data, size_t size);

#endif
