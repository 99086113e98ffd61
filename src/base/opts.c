/* src/base/opts.c — option structs that carry their size (opts.h). */
#include "base/opts.h"

#include <stdint.h>
#include <string.h>

#include "ctrial/error.h"

void cti_opts_init(void *o, size_t size, const void *defaults, size_t lib_size) {
    if (!o || size < sizeof(uint32_t)) return;
    size_t known = size < lib_size ? size : lib_size;
    memcpy(o, defaults, known);
    if (size > known) memset((char *)o + known, 0, size - known);
    uint32_t s = (uint32_t)size;
    memcpy(o, &s, sizeof s);
}

int cti_opts_take(void *dst, const void *src, const void *defaults, size_t lib_size, size_t min_size,
                 const char *type, const char *init) {
    uint32_t size;
    memcpy(&size, src, sizeof size);
    if (size == 0)
        return ct_set_error(CT_EINVAL, "%s.size is 0: make the struct with %s(), which sets it", type, init);
    if (size > lib_size)
        return ct_set_error(CT_EINVAL,
                            "%s of %u bytes: the program was built against a newer ctrial than this library, "
                            "whose %s has %zu bytes; run it with the libctrial it was built for, or rebuild it",
                            type, (unsigned)size, type, lib_size);
    if (size < min_size)
        return ct_set_error(CT_EINVAL, "%s.size is %u: no ctrial made a %s that small (%zu bytes at least); "
                            "make the struct with %s()", type, (unsigned)size, type, min_size, init);
    memcpy(dst, defaults, lib_size);
    memcpy(dst, src, size);
    uint32_t s = (uint32_t)lib_size;
    memcpy(dst, &s, sizeof s);
    return CT_OK;
}
