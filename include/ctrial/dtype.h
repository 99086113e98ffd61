/*
 * ctrial/dtype.h — dtypes and devices: their names, sizes and text forms.
 *
 * Plain C data, implemented without libtorch (module base), so the
 * pure-C parts of ctrial and programs that only read or write files
 * (checkpoints, TensorBoard events) use them too. tensor.h includes it.
 *
 *     ct_device d;
 *     if (ct_device_parse("cuda:1", &d) == 0) ...   // {CT_CUDA, 1}
 *     printf("%s, %zu bytes\n", ct_dtype_name(CT_BF16), ct_dtype_size(CT_BF16));  // "bfloat16, 2 bytes"
 */
#ifndef CTRIAL_DTYPE_H
#define CTRIAL_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CT_F32 = 0, /* the default: zero-initialised options mean float32 */
    CT_F64,
    CT_F16,
    CT_BF16,
    CT_I64,
    CT_I32,
    CT_U8,
    CT_BOOL,
    CT_I8,
    CT_I16,
    CT_U16, /* torch.uint16: 16-bit PNGs; few operators take it (convert first) */
    CT_DTYPE_MAX_ENUM_ = 0x7fffffff /* keeps the enum int-sized; not a dtype */
} ct_dtype;

typedef enum {
    CT_CPU = 0,
    CT_CUDA = 1,
    CT_DEVICE_MAX_ENUM_ = 0x7fffffff /* keeps the enum int-sized */
} ct_device_type;

typedef struct {
    ct_device_type type;
    int index; /* CUDA ordinal; ignored for CPU */
} ct_device;

CT_API const char *ct_dtype_name(ct_dtype dtype); /* "float32", ... */
CT_API size_t ct_dtype_size(ct_dtype dtype);      /* bytes per element */
CT_API bool ct_dtype_is_floating(ct_dtype dtype);

static inline ct_device ct_cpu(void) { ct_device d = {CT_CPU, 0}; return d; }
static inline ct_device ct_cuda(int index) { ct_device d = {CT_CUDA, index}; return d; }

/* Parses "cpu", "cuda", "cuda:N". Returns 0 or CT_EINVAL. */
CT_API int ct_device_parse(const char *text, ct_device *out);
/* Writes "cpu" or "cuda:N" into buf (NUL-terminated, truncated to len). */
CT_API void ct_device_format(ct_device device, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
