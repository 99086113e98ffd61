/* libFuzzer target: ct_idx_parse on arbitrary bytes. Beyond "no crash, no
 * leak, no undefined behaviour", a successful parse must account for every
 * byte: the tensor's values, written back big-endian after the header, give
 * the input again. Built and run by fuzz/run.sh. */
#include <stdint.h>
#include <stdlib.h>

#include <ctrial/ctrial.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_tensor *t = ct_idx_parse(data, size, "fuzz.idx");
    if (!t) {
        if (ct_last_code() != CT_EFORMAT) abort(); /* bad bytes are a format error, always */
        ct_clear_error();
        return 0;
    }
    int ndim = ct_ndim(t);
    size_t esize = ct_dtype_size(ct_dtype_of(t)), header = 4 + 4 * (size_t)ndim;
    size_t nbytes = (size_t)ct_numel(t) * esize;
    if (ndim != data[3] || header + nbytes != size) abort();
    unsigned char *host = malloc(nbytes ? nbytes : 1);
    if (ct_read(t, host, nbytes) != 0) abort();
    /* Host order back to big-endian; the fuzzers run on little-endian hosts. */
    for (size_t i = 0; i < nbytes; i += esize)
        for (size_t b = 0; b < esize; b++)
            if (data[header + i + b] != host[i + esize - 1 - b]) abort();
    free(host);
    ct_tensor_free(t);
    return 0;
}
