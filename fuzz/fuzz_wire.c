/* libFuzzer target: value_wire's decoder (dist/value_wire.h), which reads
 * the bytes other ranks send (metrics, reducer values, rank 0's
 * decisions), over the release build's shim: its tensors are libtorch's.
 * Beyond "no crash, no leak, no undefined behaviour", it checks that
 *  - bytes that do not decode are CT_EFORMAT with a message naming the
 *    offset, and no value;
 *  - bytes that decode encode back to the very same bytes (the encoding is
 *    faithful: one tree has one encoding), and that encoding decodes to an
 *    equal tree.
 * Built by fuzz/CMakeLists.txt when the shim is given, run by fuzz/run.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist/value_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_value *v = cti_value_from_bytes(data, size);
    if (!v) {
        if (ct_last_code() != CT_EFORMAT || !strstr(ct_last_error(), "offset")) abort();
        ct_clear_error();
        return 0;
    }
    void *bytes = NULL;
    size_t n = 0;
    if (cti_value_to_bytes(v, &bytes, &n) != 0 || n != size || memcmp(bytes, data, size) != 0) abort();
    ct_value *back = cti_value_from_bytes(bytes, n);
    if (!back || !ct_value_equal(v, back)) abort();
    ct_value_free(back);
    free(bytes);
    ct_value_free(v);
    return 0;
}
