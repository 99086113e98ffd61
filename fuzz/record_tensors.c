/* fuzz/record_tensors.c — tensors as plain records, for the fuzzers of
 * module pth (see record_tensors.h). */
#include "record_tensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

long record_live_storages;
static long made_storages;

void *record_storage_new(uint64_t nbytes, unsigned char **data) {
    storage *s = calloc(1, sizeof *s);
    if (!s || nbytes >= SIZE_MAX || !(s->bytes = malloc((size_t)nbytes + 1))) abort();
    memset(s->bytes, 0xA5, (size_t)nbytes); /* what a storage left unread would hold */
    s->refs = 1;
    s->on_device = made_storages++ % 2;
    s->nbytes = nbytes;
    record_live_storages++;
    *data = s->bytes;
    return s;
}

void record_storage_release(void *handle) {
    storage *s = handle;
    if (s->refs <= 0) abort();
    if (--s->refs) return;
    free(s->bytes);
    free(s);
    record_live_storages--;
}

static void tensor_free(ct_tensor *t) {
    if (t->refs <= 0) abort();
    if (--t->refs) return;
    record_storage_release(t->st);
    free(t);
}

static ct_tensor *tensor_share(const ct_tensor *t) {
    ((ct_tensor *)t)->refs++;
    return (ct_tensor *)t;
}

/* The engine shares tensors (ct_value_copy(leaf, false)); it never clones
 * them, nor reads their values as doubles (the JSON view). */
static ct_tensor *tensor_clone(const ct_tensor *t) { abort(); }
static int64_t tensor_doubles(const ct_tensor *t, double **out, bool *is_array) { abort(); }

/* The same view of the same bytes. */
static bool tensor_equal(const ct_tensor *a, const ct_tensor *b) {
    if (a->dtype != b->dtype || a->offset != b->offset || a->ndim != b->ndim || a->requires_grad != b->requires_grad ||
        a->st->nbytes != b->st->nbytes || memcmp(a->st->bytes, b->st->bytes, (size_t)a->st->nbytes) != 0)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->size[d] != b->size[d] || a->stride[d] != b->stride[d]) return false;
    return true;
}

static const cti_value_tensor_ops record_ops = {tensor_free, tensor_share, tensor_clone, tensor_equal, tensor_doubles};

ct_tensor *record_tensor_of(const ct_value *leaf) {
    ct_tensor *t = ct_value_get_tensor(leaf);
    if (!t) abort();
    return t;
}

/* A NEW leaf viewing s, which must lie inside it: the engine checked. */
static ct_value *view(void *handle, ct_dtype dtype, int64_t offset, int ndim, const int64_t *size,
                      const int64_t *stride, bool requires_grad) {
    storage *s = handle;
    size_t esize = ct_dtype_size(dtype);
    if (s->refs <= 0 || esize == 0 || s->nbytes % esize || offset < 0 || ndim < 0 || ndim > CT_PTH_MAX_DIMS)
        abort();
    int64_t elems = (int64_t)(s->nbytes / esize), last = offset;
    bool empty = false;
    for (int d = 0; d < ndim; d++) {
        if (size[d] < 0 || stride[d] < 0) abort();
        empty |= size[d] == 0;
    }
    for (int d = 0; !empty && d < ndim; d++) {
        int64_t span;
        if (__builtin_mul_overflow(size[d] - 1, stride[d], &span) || __builtin_add_overflow(last, span, &last))
            abort();
    }
    if (empty ? offset > elems : last >= elems) abort();
    if (requires_grad && !ct_dtype_is_floating(dtype)) { /* as libtorch refuses it */
        ct_set_error(CT_EINVAL, "requires_grad on a %s tensor: only floating-point tensors can require gradients",
                     ct_dtype_name(dtype));
        return NULL;
    }
    ct_tensor *t = calloc(1, sizeof *t);
    if (!t) abort();
    *t = (ct_tensor){.refs = 1, .st = s, .dtype = dtype, .offset = offset, .ndim = ndim, .requires_grad = requires_grad};
    memcpy(t->size, size, (size_t)ndim * sizeof *size);
    memcpy(t->stride, stride, (size_t)ndim * sizeof *stride);
    s->refs++;
    return cti_value_tensor_leaf(t, &record_ops);
}

static ct_value *parameter(const ct_value *leaf, bool requires_grad) {
    const ct_tensor *t = record_tensor_of(leaf);
    if (requires_grad && !ct_dtype_is_floating(t->dtype)) {
        ct_set_error(CT_EINVAL, "requires_grad on a %s parameter: only floating-point tensors can require gradients",
                     ct_dtype_name(t->dtype));
        return NULL;
    }
    return view(t->st, t->dtype, t->offset, t->ndim, t->size, t->stride, requires_grad);
}

static int describe(const ct_value *leaf, cti_pth_tensor_info *out) {
    const ct_tensor *t = record_tensor_of(leaf);
    *out = (cti_pth_tensor_info){.storage_id = t->st, .storage_nbytes = (size_t)t->st->nbytes,
                                .device = t->st->on_device ? ct_cuda(0) : ct_cpu(), .dtype = t->dtype,
                                .offset = t->offset, .ndim = t->ndim, .requires_grad = t->requires_grad};
    memcpy(out->size, t->size, (size_t)t->ndim * sizeof *t->size);
    memcpy(out->stride, t->stride, (size_t)t->ndim * sizeof *t->stride);
    return 0;
}

/* The engine takes host pointers of CPU storages only, and copies ranges
 * inside the others. */
static const void *storage_bytes(const ct_value *leaf) {
    const storage *s = record_tensor_of(leaf)->st;
    if (s->on_device) abort();
    return s->bytes;
}

static int storage_read(const ct_value *leaf, size_t pos, void *dst, size_t n) {
    const storage *s = record_tensor_of(leaf)->st;
    if (!s->on_device || pos > s->nbytes || n > s->nbytes - pos) abort();
    memcpy(dst, s->bytes + pos, n);
    return 0;
}

const cti_pth_tensors record_tensors = {
    .storage_new = record_storage_new,
    .storage_release = record_storage_release,
    .view = view,
    .parameter = parameter,
    .describe = describe,
    .storage_bytes = storage_bytes,
    .storage_read = storage_read,
};

/* Pairs each storage of a with the storage of b in the same place
 * (aborting when one would pair with two), or with unpair clears the
 * pairs again. */
static void pair_storages(const ct_value *a, const ct_value *b, bool unpair) {
    switch (ct_value_kind_of(a)) {
    case CT_VALUE_TENSOR: {
        storage *sa = record_tensor_of(a)->st, *sb = record_tensor_of(b)->st;
        if (unpair) {
            sa->partner = sb->partner = NULL;
            return;
        }
        if (!sa->partner && !sb->partner) sa->partner = sb, sb->partner = sa;
        if (sa->partner != sb || sb->partner != sa) abort();
        return;
    }
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
    case CT_VALUE_DICT:
        for (size_t i = 0; i < ct_value_len(a); i++) {
            const char *skey;
            int64_t ikey;
            if (ct_value_kind_of(a) == CT_VALUE_DICT)
                pair_storages(ct_value_dict_at(a, i, &skey, &ikey), ct_value_dict_at(b, i, &skey, &ikey), unpair);
            else
                pair_storages(ct_value_list_get(a, i), ct_value_list_get(b, i), unpair);
        }
        return;
    default: return;
    }
}

void record_check_sharing(const ct_value *a, const ct_value *b) {
    pair_storages(a, b, false);
    pair_storages(a, b, true);
}
