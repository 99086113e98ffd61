/* decode_dump OUT MODE PATH [MODE PATH]... — ct_image_read of each file in
 * each mode (0..4, ct_image_mode), written to OUT for
 * test_decode_parity.py (dump_write.h): the image, or the error. It checks
 * itself (exit 1) that ct_image_decode of the file's bytes gives the same
 * tensor, or the same error code, as ct_image_read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>
#include <ctrial/vision.h>

#include "dump_write.h"

static unsigned char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    size_t n = 0, cap = 0;
    if (!f) return NULL;
    for (;;) {
        if (n == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 4096))) exit(2);
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0) break;
        n += got;
    }
    fclose(f);
    *size = n;
    return buf;
}

static bool same(const ct_tensor *a, const ct_tensor *b) {
    ct_value *x = ct_value_tensor(ct_alias(a)), *y = ct_value_tensor(ct_alias(b));
    bool eq = ct_value_equal(x, y) && ct_stride(a, 0) == ct_stride(b, 0) && ct_stride(a, 2) == ct_stride(b, 2);
    ct_value_free(x);
    ct_value_free(y);
    return eq;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc % 2) {
        fprintf(stderr, "usage: decode_dump OUT MODE PATH [MODE PATH]...\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f) return 2;
    int bad = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        ct_image_mode mode = (ct_image_mode)atoi(argv[i]);
        const char *path = argv[i + 1];
        ct_tensor *t = ct_image_read(path, mode);
        int code = ct_last_code();
        if (t) dump_tensor(f, t);
        else dump_error(f);
        size_t size = 0;
        unsigned char *data = slurp(path, &size);
        if (data) {
            ct_tensor *m = ct_image_decode(data, size, mode, path);
            if (t ? !m || !same(t, m) : m || ct_last_code() != code || !strstr(ct_last_error(), path)) {
                fprintf(stderr, "decode_dump: %s in mode %d: ct_image_decode disagrees with ct_image_read (%s)\n",
                        path, (int)mode, ct_last_error());
                bad = 1;
            }
            ct_tensor_free(m);
            ct_clear_error();
            free(data);
        }
        ct_tensor_free(t);
    }
    return fclose(f) != 0 || bad;
}
