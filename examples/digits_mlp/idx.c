/* idx.c — a small reader of MNIST's IDX format: a 4-byte magic (0, 0, type,
 * ndim), ndim big-endian uint32 sizes, then the data. Only unsigned bytes
 * (type 0x08), which is what MNIST and the bundled digits use. */
#include "idx.h"

#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

ct_tensor *idx_load(const char *path) {
    gzFile f = gzopen(path, "rb");  /* reads plain files unchanged too */
    if (!f) {
        ct_set_error(CT_EIO, "%s: cannot open", path);
        return NULL;
    }
    unsigned char head[4];
    int64_t shape[4];
    ct_tensor *t = NULL;
    uint8_t *buf = NULL;
    if (gzread(f, head, 4) != 4 || head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] < 1 ||
        head[3] > 4) {
        ct_set_error(CT_EFORMAT, "%s: not an unsigned-byte IDX file (bad magic)", path);
        goto done;
    }
    int64_t n = 1;
    for (int i = 0; i < head[3]; i++) {
        unsigned char b[4];
        if (gzread(f, b, 4) != 4) {
            ct_set_error(CT_EFORMAT, "%s: header ends early", path);
            goto done;
        }
        shape[i] = (int64_t)b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3];
        n *= shape[i];
    }
    buf = malloc((size_t)n);
    if (!buf) {
        ct_set_error(CT_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (gzread(f, buf, (unsigned)n) != (int)n) {
        ct_set_error(CT_EFORMAT, "%s: holds fewer than the %lld bytes its header promises", path, (long long)n);
        goto done;
    }
    t = ct_from_data(buf, head[3], shape, CT_U8);
done:
    free(buf);
    gzclose(f);
    return t;
}
