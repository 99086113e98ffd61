/* src/vision/image.h — the image decoder's internals shared with its
 * fuzzer (fuzz/fuzz_image.c). Internal to ctrial. */
#ifndef CTRIAL_VISION_IMAGE_H
#define CTRIAL_VISION_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "ctrial/vision.h"

/* The most bytes a decoded image may take (ct_image_decode's limit): 2^31. */
#define CT_IMAGE_MAX_BYTES ((uint64_t)1 << 31)

/* ct_image_decode with another limit on the decoded image's bytes (and on
 * libjpeg's working memory, a small multiple of it): the fuzzer runs under
 * a memory limit of its own. `fn` starts the messages. */
ct_tensor *ct_image_decode_limited(const void *data, size_t size, ct_image_mode mode, const char *name,
                                   const char *fn, uint64_t max_bytes);

#endif
