/* src/vision/image.h — the image decoder's internals shared with its
 * fuzzer (fuzz/fuzz_image.c). Internal to ctrial. */
#ifndef CTRIAL_VISION_IMAGE_H
#define CTRIAL_VISION_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrial/vision.h"

/* The most bytes a decoded image may take (ct_image_decode's limit): 2^31. */
#define CT_IMAGE_MAX_BYTES ((uint64_t)1 << 31)

/* Chooses the part of an image to decode once its header gives its size
 * (h, w): box = {top, left, height, width}, inside the image (box holds
 * the whole image on entry). 0, or a CT_E* code with the error set, which
 * fails the decode. */
typedef int (*cti_image_box_fn)(void *ctx, int64_t h, int64_t w, int64_t box[4]);

/* How cti_image_decode_box decodes, beyond the mode. */
typedef struct {
    uint64_t max_bytes;   /* the most bytes the decoded image may take: CT_IMAGE_MAX_BYTES (less: the fuzzer) */
    bool eight_bit;       /* a 16-bit PNG becomes 8 bits, each sample's high byte, as PIL opens it */
    bool class_map;       /* a segmentation mask: [1, H, W] of the values np.array(PIL.Image.open(f)) holds
                           * (a palette's indices, gray values; 1-bit gray 0/1), mode ignored; colour or
                           * alpha is CT_EFORMAT (ct_image_read_mask) */
    cti_image_box_fn pick; /* chooses the box to decode; NULL: the whole image */
    void *ctx;            /* pick's */
} cti_image_decode_how;

/* ct_image_decode of only the box that how->pick chooses: the same pixels
 * as narrowing the whole image's decode to the box, as a view [C, box h,
 * box w]. A JPEG decodes the box's rows and columns and one iMCU around
 * them (the rest is entropy-decoded and dropped: a truncated file still
 * fails); a PNG decodes whole. The limits are on the whole image. NEW
 * tensor or NULL + error "fn: name: why". */
ct_tensor *cti_image_decode_box(const void *data, size_t size, ct_image_mode mode, const char *name, const char *fn,
                               const cti_image_decode_how *how);

/* The file at path, whole, into *data (malloc'd; the caller frees it) and
 * *size, at most CT_IMAGE_MAX_BYTES: 0, or CT_EINVAL (path NULL) / CT_EIO
 * with the error "fn: path: why". */
int cti_image_read_bytes(const char *path, const char *fn, char **data, size_t *size);

/* ct_image_decode with another limit on the decoded image's bytes (and on
 * libjpeg's working memory, a small multiple of it): the fuzzer runs under
 * a memory limit of its own. `fn` starts the messages. */
ct_tensor *cti_image_decode_limited(const void *data, size_t size, ct_image_mode mode, const char *name,
                                   const char *fn, uint64_t max_bytes);

/* ct_image_read, or ct_image_read_transform when t is not NULL, as
 * torchvision's ImageFolder reads a file through PIL: in any mode but
 * CT_IMAGE_UNCHANGED, a 16-bit PNG becomes 8 bits (each sample's high
 * byte), so that it collates beside 8-bit files. Messages start as those
 * functions' do. NEW tensor or NULL + error. (In transforms.c.) */
ct_tensor *cti_image_read_as_pil(const char *path, ct_image_mode mode, const ct_transform *t, ct_rng *rng);

#endif
