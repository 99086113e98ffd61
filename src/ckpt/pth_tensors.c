/* src/ckpt/pth_tensors.c — ct_pth_save and ct_pth_load (ckpt.h): the
 * pure-C engine of src/pth/ run with libtorch's tensors.
 *
 * The engine makes and reads tensors only through a cti_pth_tensors table
 * (pth/pth.h); this is ctrial's. A storage being loaded is a uint8 CPU
 * tensor the size of its entry, whose memory the engine reads the entry
 * into, and every tensor a view of one (Tensor.set_), so tensors that
 * shared a storage when saved share one when loaded. Saving records what
 * torch.save does (storage, offset, sizes, strides) and writes each
 * storage's bytes: from memory on the CPU, copied in ranges from a device.
 */
#include "ckpt/pth_tensors.h"

#include "base/files.h"
#include "pth/pth.h"

/* ---- loading ---------------------------------------------------------------------------- */

static void *storage_new(uint64_t nbytes, unsigned char **data) {
    *data = NULL;
    /* nbytes is the size of an entry inside the archive: it fits. */
    ct_tensor *base = ct_keep(ct_empty(1, (const int64_t[]){(int64_t)nbytes}, &(ct_topts){.dtype = CT_U8}));
    if (!base) return NULL;
    if (nbytes && !(*data = ct_data_ptr(base))) {
        ct_tensor_free(base);
        return NULL;
    }
    return base;
}

static void storage_release(void *storage) { ct_tensor_free(storage); }

static void *storage_wrap(unsigned char *data, uint64_t nbytes, void (*release)(void *data, void *ctx), void *ctx) {
    return ct_keep(ct_from_blob(data, 1, (const int64_t[]){(int64_t)nbytes}, CT_U8, release, ctx));
}

/* A leaf holding t (NULL keeps its error), requiring grad when asked; `what`
 * ("tensor", "parameter") names it when libtorch refuses. */
static ct_value *leaf(ct_tensor *t, bool requires_grad, const char *what) {
    if (!t) return NULL;
    if (requires_grad && ct_set_requires_grad(t, true)) {
        ct_set_error(ct_last_code(), "requires_grad on a %s %s: %s", ct_dtype_name(ct_dtype_of(t)), what,
                     ct_last_error());
        ct_tensor_free(t);
        return NULL;
    }
    return ct_value_tensor(t);
}

static ct_value *view(void *storage, ct_dtype dtype, int64_t offset, int ndim, const int64_t *size,
                      const int64_t *stride, bool requires_grad) {
    return leaf(ct_keep(ct_storage_view(storage, dtype, offset, ndim, size, stride)), requires_grad, "tensor");
}

static ct_value *parameter(const ct_value *tensor, bool requires_grad) {
    return leaf(ct_keep(ct_detach(ct_value_get_tensor(tensor))), requires_grad, "parameter");
}

/* ---- saving ----------------------------------------------------------------------------- */

static int describe(const ct_value *leaf, cti_pth_tensor_info *out) {
    const ct_tensor *t = ct_value_get_tensor(leaf);
    ct_storage_info si;
    if (ct_storage_info_of(t, &si)) return ct_last_code();
    out->storage_id = si.id;
    out->storage_nbytes = si.nbytes;
    out->device = si.device;
    out->dtype = ct_dtype_of(t);
    out->offset = si.offset;
    out->ndim = ct_ndim(t);
    for (int d = 0; d < out->ndim && d < CT_PTH_MAX_DIMS; d++) {
        out->size[d] = ct_size(t, d);
        out->stride[d] = ct_stride(t, d);
    }
    out->requires_grad = ct_requires_grad(t);
    return 0;
}

static const void *storage_bytes(const ct_value *leaf) { return ct_storage_data(ct_value_get_tensor(leaf)); }

static int storage_read(const ct_value *leaf, size_t pos, void *dst, size_t n) {
    return ct_storage_read(ct_value_get_tensor(leaf), pos, dst, n);
}

static const cti_pth_tensors libtorch_tensors = {
    .storage_new = storage_new,
    .storage_release = storage_release,
    .storage_wrap = storage_wrap,
    .view = view,
    .parameter = parameter,
    .describe = describe,
    .storage_bytes = storage_bytes,
    .storage_read = storage_read,
};

/* ---- the entry points ------------------------------------------------------------------- */

ct_pth_save_params ct_pth_save_default_params(void) { return cti_pth_save_defaults(); }

int ct_file_checksum(const char *path, ct_file_sum *out) { return cti_files_checksum(path, out); }

int ct_pth_save(const char *path, const ct_value *v, const ct_pth_save_params *p, ct_file_sum *sum) {
    return cti_pth_save_with(path, v, p, sum, false, &libtorch_tensors);
}

int cti_pth_save_ex(const char *path, const ct_value *v, const ct_pth_save_params *p, ct_file_sum *sum,
                   bool force_zip64) {
    return cti_pth_save_with(path, v, p, sum, force_zip64, &libtorch_tensors);
}

const cti_pth_tensors *cti_pth_libtorch_tensors(void) { return &libtorch_tensors; }

int ct_pth_load(const char *path, ct_value **out) { return cti_pth_load_with(path, &libtorch_tensors, out); }

int cti_pth_load_mapped(const char *path, ct_value **out) {
    return cti_pth_load_mapped_with(path, &libtorch_tensors, out);
}

int cti_pth_load_buffer(const void *data, size_t size, const char *name, ct_value **out) {
    return cti_pth_load_buffer_with(data, size, name, &libtorch_tensors, out);
}
