/* src/base/dtype.c — what tensor.h says of dtypes and devices that needs no
 * tensor: names, element sizes, "cuda:N" text. Pure C, so the config and
 * the file formats use it without libtorch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/tensor.h"

/* Indexed by ct_dtype, in its order. */
static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    {"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8},
    {"int32", 4},   {"uint8", 1},   {"bool", 1},    {"int8", 1},     {"int16", 2},
    {"uint16", 2},
};
#define NUM_DTYPES ((int)(sizeof dtypes / sizeof *dtypes))

const char *ct_dtype_name(ct_dtype d) {
    int i = (int)d;
    return i >= 0 && i < NUM_DTYPES ? dtypes[i].name : "unknown";
}

size_t ct_dtype_size(ct_dtype d) {
    int i = (int)d;
    return i >= 0 && i < NUM_DTYPES ? dtypes[i].size : 0;
}

bool ct_dtype_is_floating(ct_dtype d) { return d == CT_F32 || d == CT_F64 || d == CT_F16 || d == CT_BF16; }

int ct_device_parse(const char *text, ct_device *out) {
    if (!text || !out) return ct_set_error(CT_EINVAL, "ct_device_parse: NULL argument");
    if (strcmp(text, "cpu") == 0) {
        *out = ct_cpu();
        return CT_OK;
    }
    if (strcmp(text, "cuda") == 0) {
        *out = ct_cuda(0);
        return CT_OK;
    }
    if (strncmp(text, "cuda:", 5) == 0 && text[5] >= '0' && text[5] <= '9') {
        char *end = NULL;
        long idx = strtol(text + 5, &end, 10);
        if (*end == '\0' && idx < 1024) {
            *out = ct_cuda((int)idx);
            return CT_OK;
        }
    }
    return ct_set_error(CT_EINVAL, "ct_device_parse: '%s' is not a device (expected cpu, cuda or cuda:N)", text);
}

void ct_device_format(ct_device d, char *buf, size_t len) {
    if (!buf || !len) return;
    if (d.type == CT_CUDA) snprintf(buf, len, "cuda:%d", d.index);
    else snprintf(buf, len, "cpu");
}
