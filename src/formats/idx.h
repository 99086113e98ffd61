/* src/formats/idx.h — IDX files (MNIST's format) in pure C: the header,
 * checked against the bytes present, and the values decoded to host order.
 * Internal to ctrial: data/idx.c builds ct_idx_parse's tensors on it, and
 * fuzz/fuzz_idx.c fuzzes it without libtorch.
 *
 * An IDX file is a 4-byte magic (0, 0, type code, number of dims), one
 * big-endian uint32 size per dim, then the values, big-endian, C order.
 *
 *     cti_idx_header h;
 *     if (cti_idx_parse_header(data, size, name, &h)) return ct_last_code();
 *     void *dst = ...;                  // h.nbytes bytes: a tensor's memory
 *     cti_idx_decode(&h, data, dst);
 *
 * The header is split from the decoding so that the caller can allocate the
 * destination (a tensor of h.dims) and the values are decoded straight into
 * it: a file of hundreds of megabytes is copied once, not twice.
 *
 * The header is untrusted input: its sizes are multiplied with overflow
 * checks and compared with the bytes actually present before anyone
 * allocates, so a damaged or hostile header costs nothing but an error.
 * Nothing here allocates except cti_idx_parse_values; no state is shared, so
 * any thread may parse any buffer.
 */
#ifndef CTRIAL_FORMATS_IDX_H
#define CTRIAL_FORMATS_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "ctrial/tensor.h" /* ct_dtype */

enum { CT_IDX_MAX_DIMS = 8 };

/* What a valid header says, with the sizes derived from it. */
typedef struct {
    ct_dtype dtype;                /* CT_U8, CT_I8, CT_I16, CT_I32, CT_F32 or CT_F64 */
    int ndim;                      /* 1..CT_IDX_MAX_DIMS */
    int64_t dims[CT_IDX_MAX_DIMS]; /* each < 2^32; their product, zeros counted as 1, fits int64 */
    size_t numel;                  /* product of the dims: 0 when one of them is 0 */
    size_t offset;                 /* where the values start: 4 + 4 * ndim */
    size_t nbytes;                 /* numel * element size, which is all the rest of the file */
} cti_idx_header;

/* Reads and checks the header of the whole IDX file in data[0, size): magic,
 * type code, dims, and that the values fill the rest of the file exactly.
 * `data` may be NULL only when size is 0; `name` (not NULL) names the file
 * in messages. Returns 0 and fills *out, or CT_EFORMAT saying what is wrong
 * (empty, short, wrong magic, unknown type code, bad number of dims, header
 * cut short, dims overflowing, truncated, trailing bytes). Borrows data. */
int cti_idx_parse_header(const void *data, size_t size, const char *name, cti_idx_header *out);

/* Decodes the h->numel big-endian values of the file `data` (the buffer `h`
 * was parsed from) into dst, h->nbytes bytes in host order. dst is the
 * caller's and must not overlap data; it may be NULL when h->nbytes is 0. */
void cti_idx_decode(const cti_idx_header *h, const void *data, void *dst);

/* cti_idx_parse_header, then the values decoded into a NEW malloc'd buffer
 * (*values, the caller frees it; NULL when the file holds no values).
 * Returns 0, or CT_EFORMAT as above or CT_ENOMEM, leaving *values NULL. */
int cti_idx_parse_values(const void *data, size_t size, const char *name, cti_idx_header *h,
                        void **values);

#endif
