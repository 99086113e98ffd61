/* libFuzzer target: the image decoder (ct_image_decode, module vision:
 * libjpeg-turbo and libpng) over the release build's shim. The input is a
 * whole file, decoded in each of the five modes (a PNG also as PIL opens
 * it for ImageFolder: 16 bits become 8), then as a segmentation mask
 * (ct_image_decode_mask's class map), under a limit of 16 MiB decoded (the fuzzer's memory is bounded; ct_image_decode's is 2 GiB).
 *
 * Beyond "no crash, no leak, no undefined behaviour" (libjpeg and libpng
 * longjmp out of their callbacks: nothing may be left behind), it checks
 * that
 *  - a refused input is CT_EFORMAT, CT_ENOTSUP or CT_ENOMEM, and the
 *    message names the input;
 *  - a decoded one is a [C, H, W] tensor of the mode's channels (1 to 4 in
 *    UNCHANGED), uint8, or uint16 from a PNG only (never when it is
 *    asked for 8 bits), laid out channels-last
 *    as torchvision's view is, within the limit, whose every byte reads;
 *  - a decoded mask is one channel, uint8 (uint16 from a 16-bit PNG). 
 * Built by fuzz/CMakeLists.txt when the shim is given, run by fuzz/run.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>
#include <ctrial/vision.h>

#include "vision/image.h"

#define LIMIT ((uint64_t)16 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const int64_t want_c[] = {0, 1, 2, 3, 4}; /* by mode; 0: any of 1..4 */
    bool png = size >= 4 && memcmp(data, "\x89PNG", 4) == 0;
    for (int k = 0; k < (png ? 10 : 5); k++) {
        int mode = k % 5;
        bool eight_bit = k >= 5;
        cti_image_decode_how how = {.max_bytes = LIMIT, .eight_bit = eight_bit};
        ct_tensor *t = cti_image_decode_box(data, size, (ct_image_mode)mode, "fuzz.img", "fuzz", &how);
        if (!t) {
            int code = ct_last_code();
            if ((code != CT_EFORMAT && code != CT_ENOTSUP && code != CT_ENOMEM) ||
                !strstr(ct_last_error(), "fuzz: fuzz.img: "))
                abort();
            ct_clear_error();
            continue;
        }
        ct_dtype dtype = ct_dtype_of(t);
        int64_t c = ct_size(t, 0), h = ct_size(t, 1), w = ct_size(t, 2);
        if (ct_ndim(t) != 3 || (dtype != CT_U8 && !(png && !eight_bit && dtype == CT_U16))) abort();
        if (want_c[mode] ? c != want_c[mode] : c < 1 || c > 4) abort();
        if (h < 1 || w < 1 || ct_stride(t, 0) != 1 || ct_stride(t, 1) != w * c || ct_stride(t, 2) != c) abort();
        size_t bytes = (size_t)(c * h * w) * ct_dtype_size(dtype);
        if (bytes > LIMIT) abort();
        void *buf = malloc(bytes);
        if (!buf || ct_read(t, buf, bytes) != 0) abort();
        free(buf);
        ct_tensor_free(t);
    }
    cti_image_decode_how how = {.max_bytes = LIMIT, .class_map = true};
    ct_tensor *m = cti_image_decode_box(data, size, CT_IMAGE_UNCHANGED, "fuzz.img", "fuzz", &how);
    if (!m) {
        int code = ct_last_code();
        if ((code != CT_EFORMAT && code != CT_ENOTSUP && code != CT_ENOMEM) ||
            !strstr(ct_last_error(), "fuzz: fuzz.img: "))
            abort();
        ct_clear_error();
    } else {
        ct_dtype dtype = ct_dtype_of(m);
        int64_t h = ct_size(m, 1), w = ct_size(m, 2);
        if (ct_ndim(m) != 3 || ct_size(m, 0) != 1 || h < 1 || w < 1 || (dtype != CT_U8 && !(png && dtype == CT_U16)))
            abort();
        size_t bytes = (size_t)(h * w) * ct_dtype_size(dtype);
        void *buf = bytes <= LIMIT ? malloc(bytes) : NULL;
        if (!buf || ct_read(m, buf, bytes) != 0) abort();
        free(buf);
        ct_tensor_free(m);
    }
    if (ct_tensor_live_count() != 0) abort();
    return 0;
}
