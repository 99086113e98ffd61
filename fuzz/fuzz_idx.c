/* libFuzzer target: the IDX parser (formats/idx.h) on arbitrary bytes.
 * Beyond "no crash, no leak, no undefined behaviour", a failed parse is a
 * format error, and a successful one accounts for every byte: the header it
 * reports is the input's, its sizes agree with each other and with the
 * input's length, and the decoded values, written back big-endian after the
 * header, give the input again. Built by fuzz/CMakeLists.txt, run by
 * fuzz/run.sh. */
#include <stdint.h>
#include <stdlib.h>

#include "formats/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cti_idx_header h;
    void *values;
    if (cti_idx_parse_values(data, size, "fuzz.idx", &h, &values)) {
        if (ct_last_code() != CT_EFORMAT || values) abort(); /* bad bytes are a format error */
        ct_clear_error();
        return 0;
    }
    size_t esize = ct_dtype_size(h.dtype);
    if (h.ndim != data[3] || h.offset != 4 + 4 * (size_t)h.ndim) abort();
    uint64_t numel = 1;
    for (int i = 0; i < h.ndim; i++) {
        if (h.dims[i] != be32(data + 4 + 4 * i)) abort();
        numel *= (uint64_t)h.dims[i]; /* cannot wrap: the parser checked the product */
    }
    if (numel != h.numel || h.numel * esize != h.nbytes || h.offset + h.nbytes != size) abort();
    if ((values == NULL) != (h.nbytes == 0)) abort();
    /* Host order back to big-endian; the fuzzers run on little-endian hosts. */
    const uint8_t *host = values;
    for (size_t i = 0; i < h.nbytes; i += esize)
        for (size_t b = 0; b < esize; b++)
            if (data[h.offset + i + b] != host[i + esize - 1 - b]) abort();
    free(values);
    return 0;
}
