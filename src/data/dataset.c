/* src/data/dataset.c — reference-counted datasets over a user vtable, and
 * TensorDataset (data.h).
 *
 * A dataset is shared by the loader and its worker threads, which call
 * get / get_batch concurrently; the only thing they change is the reference
 * count, hence the atomic. The length is asked once, at creation, and kept:
 * every get is bounds-checked against it, and the user's len() need not be
 * safe to call from worker threads.
 */
#include "ctrial/data.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "data/dataset.h"

struct ct_dataset {
    atomic_long refs;
    ct_dataset_vtable vt;
    cti_ds_seeded sv; /* built-in datasets that draw or pass seeds on; else zeros */
    void *self;
    int64_t len;
};

/* ---- the generic dataset ------------------------------------------------ */

/* A dataset over vt (len checked) with seeded functions sv (NULL: none). */
static ct_dataset *dataset_make(const ct_dataset_vtable *vt, const cti_ds_seeded *sv, void *self) {
    int64_t len = vt->len(self);
    if (len < 0) {
        ct_set_error(CT_EINVAL, "ct_dataset_new: len() returned %" PRId64 " (must be >= 0)", len);
        return NULL;
    }
    ct_dataset *d = malloc(sizeof *d);
    if (!d) {
        ct_set_error(CT_ENOMEM, "ct_dataset_new: out of host memory");
        return NULL;
    }
    atomic_init(&d->refs, 1);
    d->vt = *vt;
    if (sv) d->sv = *sv;
    else memset(&d->sv, 0, sizeof d->sv);
    d->self = self;
    d->len = len;
    return d;
}

ct_dataset *ct_dataset_new(const ct_dataset_vtable *vt, void *self) {
    if (!vt || !vt->len || !vt->get) {
        ct_set_error(CT_EINVAL, "ct_dataset_new: %s", !vt ? "vtable is NULL"
                                                      : !vt->len ? "vtable has no len function"
                                                                 : "vtable has no get function");
        return NULL;
    }
    return dataset_make(vt, NULL, self);
}

ct_dataset *cti_ds_new_seeded(const ct_dataset_vtable *vt, const cti_ds_seeded *sv, void *self) {
    return dataset_make(vt, sv, self);
}

ct_dataset *ct_dataset_ref(ct_dataset *d) {
    if (d) atomic_fetch_add_explicit(&d->refs, 1, memory_order_relaxed);
    return d;
}

void ct_dataset_free(ct_dataset *d) {
    if (!d) return;
    /* acq_rel: the thread that frees must see every other thread's last use. */
    if (atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) != 1) return;
    if (d->vt.free) d->vt.free(d->self);
    free(d);
}

void *cti_ds_self_if(const ct_dataset *d, ct_value *(*get)(void *self, int64_t index)) {
    return d && d->vt.get == get ? d->self : NULL;
}

int64_t ct_dataset_len(const ct_dataset *d) {
    if (!d) {
        ct_set_error(CT_EINVAL, "ct_dataset_len: dataset is NULL");
        return -1;
    }
    return d->len;
}

static int check_index(const ct_dataset *d, int64_t index, const char *fn) {
    if (index >= 0 && index < d->len) return 0;
    return ct_set_error(CT_EINDEX, "%s: index %" PRId64 " out of range for a dataset of length %" PRId64,
                        fn, index, d->len);
}

/* Calls the dataset's get: its seeded one when it has one, else the plain
 * one (which ignores the seed). The thread's error is cleared first so that
 * a NULL returned without ct_set_error() can be told apart from a stale
 * error. */
static ct_value *call_get(ct_dataset *d, int64_t index, uint64_t seed) {
    ct_clear_error();
    ct_value *v = d->sv.get ? d->sv.get(d->self, index, seed) : d->vt.get(d->self, index);
    if (!v && ct_last_code() == CT_OK)
        ct_set_error(CT_ETRIAL, "dataset get(%" PRId64 ") returned NULL without setting an error",
                     index);
    return v;
}

/* A get_batch's result, its NULL without an error made into one. */
static ct_value *batch_result(ct_value *v, const int64_t *indices, int64_t n) {
    if (!v && ct_last_code() == CT_OK)
        ct_set_error(CT_ETRIAL,
                     "dataset get_batch of %" PRId64 " samples (first index %" PRId64
                     ") returned NULL without setting an error",
                     n, indices[0]);
    return v;
}

ct_value *cti_ds_get(ct_dataset *d, int64_t index, uint64_t seed) {
    if (!d) {
        ct_set_error(CT_EINVAL, "ct_dataset_get: dataset is NULL");
        return NULL;
    }
    if (check_index(d, index, "ct_dataset_get")) return NULL;
    return call_get(d, index, seed);
}

ct_value *ct_dataset_get(ct_dataset *d, int64_t index) {
    return cti_ds_get(d, index, ct_record_seed(0, 0, index));
}

ct_value *ct_dataset_get_drawn(ct_dataset *d, int64_t index, uint64_t seed, int64_t epoch) {
    return cti_ds_get(d, index, ct_record_seed(seed, epoch, index));
}

/* get + collate, for datasets without a get_batch (seeds: one per index, or
 * NULL for a dataset without a seeded get). */
static ct_value *collate_gets(ct_dataset *d, const int64_t *indices, const uint64_t *seeds, int64_t n) {
    ct_value **samples = calloc((size_t)n, sizeof *samples);
    if (!samples) {
        ct_set_error(CT_ENOMEM, "ct_dataset_get_batch: out of host memory");
        return NULL;
    }
    ct_value *batch = NULL;
    int64_t got = 0;
    for (; got < n; got++) {
        samples[got] = call_get(d, indices[got], seeds ? seeds[got] : 0);
        if (!samples[got]) break;
    }
    int64_t bad = -1;
    if (got == n) batch = cti_collate_where(samples, n, &bad);
    if (!batch && bad >= 0) { /* name the dataset's index, not the batch position */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        ct_set_error(ct_last_code(), "%s (sample %" PRId64 " is dataset index %" PRId64 ")", msg,
                     bad, indices[bad]);
    }
    for (int64_t i = 0; i < got; i++) ct_value_free(samples[i]);
    free(samples);
    return batch;
}

ct_value *ct_dataset_get_batch(ct_dataset *d, const int64_t *indices, int64_t n) {
    return cti_ds_get_batch(d, indices, NULL, n);
}

ct_value *cti_ds_get_batch(ct_dataset *d, const int64_t *indices, const uint64_t *seeds, int64_t n) {
    if (!d || !indices || n <= 0) {
        ct_set_error(CT_EINVAL, "ct_dataset_get_batch: %s",
                     !d ? "dataset is NULL" : !indices ? "indices is NULL" : "n must be > 0");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        if (check_index(d, indices[i], "ct_dataset_get_batch")) return NULL;
    if (d->sv.get) { /* draws, or passes seeds on: every record needs its seed */
        uint64_t *own = NULL;
        if (!seeds) {
            own = malloc((size_t)n * sizeof *own);
            if (!own) {
                ct_set_error(CT_ENOMEM, "ct_dataset_get_batch: out of host memory");
                return NULL;
            }
            for (int64_t i = 0; i < n; i++) own[i] = ct_record_seed(0, 0, indices[i]);
            seeds = own;
        }
        ct_value *v;
        if (d->sv.get_batch) {
            ct_clear_error();
            v = batch_result(d->sv.get_batch(d->self, indices, seeds, n), indices, n);
        } else {
            v = collate_gets(d, indices, seeds, n);
        }
        free(own);
        return v;
    }
    if (!d->vt.get_batch) return collate_gets(d, indices, NULL, n);
    ct_clear_error();
    return batch_result(d->vt.get_batch(d->self, indices, n), indices, n);
}

/* ---- helpers of the built-in datasets --------------------------------- */

ct_value *cti_ds_pack(int n, ct_tensor **ts) {
    int i = 0;
    for (; i < n && ts[i]; i++) {}
    if (i < n) { /* a failed op: its error stays, the rest are dropped */
        for (int j = 0; j < n; j++) ct_tensor_free(ts[j]);
        return NULL;
    }
    if (n == 1) return ct_value_tensor(ts[0]);
    ct_value *tuple = ct_value_tuple();
    if (!tuple) {
        for (int j = 0; j < n; j++) ct_tensor_free(ts[j]);
        return NULL;
    }
    for (int j = 0; j < n; j++) {
        ct_value *leaf = ct_value_tensor(ts[j]);
        if (ct_value_list_append(tuple, leaf) != 0) { /* append freed leaf */
            for (int k = j + 1; k < n; k++) ct_tensor_free(ts[k]);
            ct_value_free(tuple);
            return NULL;
        }
    }
    return tuple;
}

/* ---- TensorDataset ------------------------------------------------------ */

typedef struct {
    int n;
    bool copy;     /* get() returns copies, not views */
    int64_t len;
    ct_tensor *t[]; /* owned, outside any scope */
} tensor_ds;

static int64_t tensor_ds_len(void *self) { return ((tensor_ds *)self)->len; }

/* Room for the leaves of one sample or batch: on the stack for the usual
 * handful of tensors, so a get allocates nothing of its own. */
enum { STACK_LEAVES = 8 };

static ct_tensor **leaves_buf(ct_tensor **stack, int n) {
    if (n <= STACK_LEAVES) return stack;
    ct_tensor **p = malloc((size_t)n * sizeof *p);
    if (!p) ct_set_error(CT_ENOMEM, "dataset: out of host memory");
    return p;
}

static ct_value *tensor_ds_get(void *self, int64_t index) {
    tensor_ds *ds = self;
    ct_tensor *stack[STACK_LEAVES];
    ct_tensor **leaves = leaves_buf(stack, ds->n);
    if (!leaves) return NULL;
    for (int j = 0; j < ds->n; j++) {
        ct_tensor *v = ct_select(ds->t[j], 0, index);
        if (ds->copy && v) {
            ct_tensor *c = ct_clone(v);
            ct_tensor_free(v);
            v = c;
        }
        leaves[j] = v;
    }
    ct_value *sample = cti_ds_pack(ds->n, leaves);
    if (leaves != stack) free(leaves);
    return sample;
}

/* Rows of a contiguous CPU tensor copied one by one into a new tensor.
 * index_select gives the same result but starts an OpenMP thread team for
 * every batch, which for batches of small samples costs far more than the
 * copy (the loader benchmark ran 10x slower with it at 0 workers). NULL
 * without an error when this path does not apply. */
static ct_tensor *gather_rows(const ct_tensor *t, const int64_t *indices, int64_t n) {
    int64_t shape[8];
    int nd = ct_ndim(t);
    const char *src = ct_device_of(t).type == CT_CPU && ct_is_contiguous(t) && !ct_requires_grad(t) && nd >= 1 &&
                              nd <= 8 && ct_shape(t, shape, 8) == nd
                          ? ct_data_ptr(t)
                          : NULL;
    if (!src) return NULL;
    ct_dtype dtype = ct_dtype_of(t);
    size_t row = ct_dtype_size(dtype) * (size_t)(shape[0] > 0 ? ct_numel(t) / shape[0] : 0);
    shape[0] = n;
    ct_tensor *out = ct_empty(nd, shape, &(ct_topts){.dtype = dtype});
    char *dst = out ? ct_data_ptr(out) : NULL;
    if (!dst) {
        ct_tensor_free(out);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * row, src + (size_t)indices[i] * row, row);
    return out;
}

/* One gather per tensor instead of n selects and a stack: rows copied
 * directly where the tensor allows, else index_select over the indices. */
static ct_value *tensor_ds_get_batch(void *self, const int64_t *indices, int64_t n) {
    tensor_ds *ds = self;
    /* The index tensor only reads the caller's array, for this call. */
    ct_tensor *idx = ct_from_blob((void *)indices, 1, &n, CT_I64, NULL, NULL);
    if (!idx) return NULL;
    ct_tensor *stack[STACK_LEAVES];
    ct_tensor **leaves = leaves_buf(stack, ds->n);
    if (!leaves) {
        ct_tensor_free(idx);
        return NULL;
    }
    for (int j = 0; j < ds->n; j++) {
        ct_device dev = ct_device_of(ds->t[j]);
        if (dev.type == CT_CPU) {
            leaves[j] = gather_rows(ds->t[j], indices, n);
            if (!leaves[j]) leaves[j] = ct_index_select(ds->t[j], 0, idx);
        } else { /* a dataset kept on the GPU needs its index there */
            ct_tensor *didx = ct_to_device(idx, dev, false);
            leaves[j] = ct_index_select(ds->t[j], 0, didx);
            ct_tensor_free(didx);
        }
    }
    ct_tensor_free(idx);
    ct_value *batch = cti_ds_pack(ds->n, leaves);
    if (leaves != stack) free(leaves);
    return batch;
}

static void tensor_ds_free(void *self) {
    tensor_ds *ds = self;
    for (int j = 0; j < ds->n; j++) ct_tensor_free(ds->t[j]);
    free(ds);
}

static void free_all(int n, ct_tensor **ts) {
    for (int j = 0; j < n; j++) ct_tensor_free(ts[j]);
}

ct_dataset *cti_ds_tensors_take(int n, ct_tensor **ts, bool copy_samples, const char *what) {
    for (int j = 0; j < n; j++) {
        if (ct_ndim(ts[j]) < 1) {
            ct_set_error(CT_ESHAPE, "%s: tensor %d is 0-dim: it has no size(0) to index samples by",
                         what, j);
            free_all(n, ts);
            return NULL;
        }
        if (ct_size(ts[j], 0) != ct_size(ts[0], 0)) {
            ct_set_error(CT_ESHAPE,
                         "%s: tensor %d has size(0) %" PRId64 " but tensor 0 has %" PRId64
                         " (all tensors must hold the same number of samples)",
                         what, j, ct_size(ts[j], 0), ct_size(ts[0], 0));
            free_all(n, ts);
            return NULL;
        }
    }
    tensor_ds *ds = malloc(sizeof *ds + (size_t)n * sizeof ds->t[0]);
    if (!ds) {
        ct_set_error(CT_ENOMEM, "%s: out of host memory", what);
        free_all(n, ts);
        return NULL;
    }
    ds->n = n;
    ds->copy = copy_samples;
    ds->len = ct_size(ts[0], 0);
    for (int j = 0; j < n; j++) ds->t[j] = ct_keep(ts[j]);
    static const ct_dataset_vtable vt = {tensor_ds_len, tensor_ds_get, tensor_ds_get_batch,
                                         tensor_ds_free};
    ct_dataset *d = ct_dataset_new(&vt, ds);
    if (!d) tensor_ds_free(ds);
    return d;
}

ct_dataset *ct_dataset_tensors(int n, ct_tensor *const *tensors) {
    const char *fn = "ct_dataset_tensors";
    if (n < 1 || !tensors) {
        ct_set_error(CT_EINVAL, "%s: %s", fn, !tensors ? "tensors is NULL" : "n must be >= 1");
        return NULL;
    }
    for (int j = 0; j < n; j++) {
        if (!tensors[j]) {
            /* Keep a failed op's error, as tensor ops do with NULL inputs. */
            if (ct_last_code() == CT_OK) ct_set_error(CT_EINVAL, "%s: tensor %d is NULL", fn, j);
            return NULL;
        }
        if (!ct_is_defined(tensors[j])) {
            ct_set_error(CT_ESTATE, "%s: tensor %d was freed", fn, j);
            return NULL;
        }
    }
    ct_tensor **own = malloc((size_t)n * sizeof *own);
    if (!own) {
        ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
        return NULL;
    }
    int made = 0;
    for (; made < n; made++) {
        own[made] = ct_keep(ct_alias(tensors[made]));
        if (!own[made]) break;
    }
    ct_dataset *d = NULL;
    if (made == n) d = cti_ds_tensors_take(n, own, false, fn);
    else free_all(made, own);
    free(own);
    return d;
}
