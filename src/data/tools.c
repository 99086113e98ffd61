/* src/data/tools.c — dataset tools (data.h): Subset, ConcatDataset,
 * random_split and per-channel mean/std, as torch.utils.data has them.
 *
 * Subsets and concatenations are datasets over other datasets: each holds a
 * reference to every dataset it reads, checks indices once at creation, and
 * passes get_batch through to its parents' get_batch (their fast paths stay
 * fast). A concatenation's batch that mixes sources is fetched per source
 * and its rows put back in order when the batch is a tree of CPU tensors;
 * anything else falls back to get + collate, so the result is always what
 * collating the samples gives.
 */
#include "ctrial/data.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "data/dataset.h"

/* ---- Subset ------------------------------------------------------------ */

typedef struct {
    ct_dataset *parent; /* a reference of our own */
    int64_t n;
    int64_t idx[];
} subset_ds;

static int64_t subset_len(void *self) { return ((subset_ds *)self)->n; }

/* Seeds pass through unchanged: a record draws from the seed of the index
 * the loader asked for, whichever index of the parent it maps to. */
static ct_value *subset_get(void *self, int64_t index, uint64_t seed) {
    subset_ds *s = self;
    return cti_ds_get(s->parent, s->idx[index], seed);
}

static ct_value *subset_get_batch(void *self, const int64_t *indices, const uint64_t *seeds, int64_t n) {
    subset_ds *s = self;
    int64_t *mapped = malloc((size_t)n * sizeof *mapped);
    if (!mapped) {
        ct_set_error(CT_ENOMEM, "subset: out of host memory");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) mapped[i] = s->idx[indices[i]];
    ct_value *batch = cti_ds_get_batch(s->parent, mapped, seeds, n);
    free(mapped);
    return batch;
}

static void subset_free(void *self) {
    subset_ds *s = self;
    ct_dataset_free(s->parent);
    free(s);
}

ct_dataset *ct_dataset_subset(ct_dataset *d, const int64_t *indices, int64_t n) {
    const char *fn = "ct_dataset_subset";
    if (!d || (!indices && n > 0) || n < 0) {
        ct_set_error(CT_EINVAL, "%s: %s", fn,
                     !d ? "dataset is NULL" : n < 0 ? "n must be >= 0" : "indices is NULL");
        return NULL;
    }
    int64_t len = ct_dataset_len(d);
    for (int64_t i = 0; i < n; i++) {
        if (indices[i] < 0 || indices[i] >= len) {
            ct_set_error(CT_EINDEX,
                         "%s: indices[%" PRId64 "] = %" PRId64
                         " is out of range for a dataset of length %" PRId64,
                         fn, i, indices[i], len);
            return NULL;
        }
    }
    if ((uint64_t)n > (SIZE_MAX - sizeof(subset_ds)) / sizeof(int64_t)) {
        ct_set_error(CT_ENOMEM, "%s: %" PRId64 " indices cannot be addressed", fn, n);
        return NULL;
    }
    subset_ds *s = malloc(sizeof *s + (size_t)n * sizeof s->idx[0]);
    if (!s) {
        ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
        return NULL;
    }
    s->parent = ct_dataset_ref(d);
    s->n = n;
    if (n > 0) memcpy(s->idx, indices, (size_t)n * sizeof s->idx[0]);
    static const ct_dataset_vtable vt = {subset_len, NULL, NULL, subset_free};
    static const cti_ds_seeded sv = {subset_get, subset_get_batch};
    ct_dataset *out = cti_ds_new_seeded(&vt, &sv, s);
    if (!out) subset_free(s);
    return out;
}

/* ---- random_split -------------------------------------------------------- */

int ct_dataset_random_split(ct_dataset *d, int n, const int64_t *lengths, uint64_t seed,
                            ct_dataset **out) {
    const char *fn = "ct_dataset_random_split";
    if (out && n > 0)
        for (int i = 0; i < n; i++) out[i] = NULL;
    if (!d || !lengths || !out || n < 1)
        return ct_set_error(CT_EINVAL, "%s: %s", fn,
                            !d         ? "dataset is NULL"
                            : !lengths ? "lengths is NULL"
                            : !out     ? "out is NULL"
                                       : "n (the number of splits) must be >= 1");
    int64_t len = ct_dataset_len(d), sum = 0;
    for (int i = 0; i < n; i++) {
        if (lengths[i] < 0)
            return ct_set_error(CT_EINVAL, "%s: lengths[%d] is %" PRId64 " (lengths must be >= 0)",
                                fn, i, lengths[i]);
        if (lengths[i] > len - sum) /* before the sum could overflow */
            return ct_set_error(CT_EINVAL,
                                "%s: lengths[0..%d] already sum to more than the dataset's %" PRId64
                                " samples (the lengths must sum to its length)",
                                fn, i, len);
        sum += lengths[i];
    }
    if (sum != len)
        return ct_set_error(CT_EINVAL,
                            "%s: the lengths sum to %" PRId64 " but the dataset has %" PRId64
                            " samples (they must be equal)",
                            fn, sum, len);
    int64_t *perm = malloc((size_t)(len > 0 ? len : 1) * sizeof *perm);
    if (!perm) return ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
    /* torch.randperm(len, generator=torch.Generator().manual_seed(seed)) */
    ct_tensor *p = ct_randperm_seeded(len, seed);
    int rc = p ? ct_read(p, perm, (size_t)len * sizeof *perm) : ct_last_code();
    ct_tensor_free(p);
    for (int64_t i = 0, off = 0; rc == 0 && i < n; off += lengths[i], i++) {
        out[i] = ct_dataset_subset(d, perm + off, lengths[i]);
        if (!out[i]) rc = ct_last_code();
    }
    free(perm);
    if (rc != 0)
        for (int i = 0; i < n; i++) {
            ct_dataset_free(out[i]);
            out[i] = NULL;
        }
    return rc;
}

/* Python's sum() of floats (3.12 and later: Neumaier's compensated sum). */
static double compensated_sum(const double *x, int n) {
    double s = 0, c = 0;
    for (int i = 0; i < n; i++) {
        double t = s + x[i];
        c += fabs(s) >= fabs(x[i]) ? (s - t) + x[i] : (x[i] - t) + s;
        s = t;
    }
    return s + c;
}

int ct_dataset_random_split_fractions(ct_dataset *d, int n, const double *fractions, uint64_t seed,
                                      ct_dataset **out) {
    const char *fn = "ct_dataset_random_split_fractions";
    if (out && n > 0)
        for (int i = 0; i < n; i++) out[i] = NULL;
    if (!d || !fractions || !out || n < 1)
        return ct_set_error(CT_EINVAL, "%s: %s", fn,
                            !d           ? "dataset is NULL"
                            : !fractions ? "fractions is NULL"
                            : !out       ? "out is NULL"
                                         : "n (the number of splits) must be >= 1");
    for (int i = 0; i < n; i++)
        if (!(fractions[i] >= 0 && fractions[i] <= 1))
            return ct_set_error(CT_EINVAL, "%s: fractions[%d] is %.17g (not between 0 and 1)", fn, i,
                                fractions[i]);
    /* torch: math.isclose(sum, 1) and sum <= 1; isclose's rel_tol is 1e-9. */
    double total = compensated_sum(fractions, n);
    if (!(fabs(total - 1) <= 1e-9 * fmax(fabs(total), 1.0) && total <= 1))
        return ct_set_error(CT_EINVAL, "%s: the fractions sum to %.17g, not 1", fn, total);
    int64_t len = ct_dataset_len(d);
    int64_t *lengths = malloc((size_t)n * sizeof *lengths);
    if (!lengths) return ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        lengths[i] = (int64_t)floor((double)len * fractions[i]);
        sum += lengths[i];
    }
    /* The remainder, one at a time, round-robin from the first split. */
    int64_t rem = len - sum;
    if (rem > 0)
        for (int i = 0; i < n; i++) lengths[i] += rem / n + (i < rem % n);
    int rc = ct_dataset_random_split(d, n, lengths, seed, out);
    free(lengths);
    return rc;
}

/* ---- ConcatDataset ------------------------------------------------------- */

typedef struct {
    int n;
    ct_dataset **ds;  /* references of our own */
    int64_t *cum;     /* cumulative sizes, as torch's cumulative_sizes */
} concat_ds;

static int64_t concat_len(void *self) {
    concat_ds *c = self;
    return c->cum[c->n - 1];
}

/* bisect.bisect_right(cumulative_sizes, idx): the first k with cum[k] > idx. */
static int concat_source(const concat_ds *c, int64_t idx, int64_t *local) {
    int lo = 0, hi = c->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (c->cum[mid] > idx) hi = mid;
        else lo = mid + 1;
    }
    *local = lo == 0 ? idx : idx - c->cum[lo - 1];
    return lo;
}

static ct_value *concat_get(void *self, int64_t index, uint64_t seed) {
    concat_ds *c = self;
    int64_t local;
    int k = concat_source(c, index, &local);
    return cti_ds_get(c->ds[k], local, seed);
}

/* get + collate over the sources, naming the failing sample's index. */
static ct_value *concat_collate_gets(concat_ds *c, const int64_t *indices, const uint64_t *seeds,
                                     int64_t n) {
    ct_value **samples = calloc((size_t)n, sizeof *samples);
    if (!samples) {
        ct_set_error(CT_ENOMEM, "concat dataset: out of host memory");
        return NULL;
    }
    int64_t got = 0;
    for (; got < n; got++)
        if (!(samples[got] = concat_get(c, indices[got], seeds[got]))) break;
    ct_value *batch = NULL;
    int64_t bad = -1;
    if (got == n) batch = cti_collate_where(samples, n, &bad);
    if (!batch && bad >= 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        ct_set_error(ct_last_code(), "%s (sample %" PRId64 " is dataset index %" PRId64 ")", msg, bad,
                     indices[bad]);
    }
    for (int64_t i = 0; i < got; i++) ct_value_free(samples[i]);
    free(samples);
    return batch;
}

/* Rows of the per-source batches put back in the batch's order: row j of
 * part s goes to row pos[s][j]. Returns a NEW value, or NULL with
 * *unsupported set (no error) when the parts are not all trees of CPU
 * tensors of one structure, dtype and row shape: the caller then collates
 * the samples instead, which gives collate's own result or error. */
static ct_value *merge_parts(ct_value *const *parts, int np, int64_t *const *pos,
                             const int64_t *cnt, int64_t n, bool *unsupported) {
    ct_value_kind kind = ct_value_kind_of(parts[0]);
    for (int s = 1; s < np; s++)
        if (ct_value_kind_of(parts[s]) != kind) goto unsupported;
    if (kind == CT_VALUE_TENSOR) {
        int64_t shape[8], sh[8];
        const ct_tensor *t0 = ct_value_get_tensor(parts[0]);
        int nd = ct_ndim(t0);
        if (nd < 1 || nd > 8 || ct_shape(t0, shape, 8) != nd) goto unsupported;
        ct_dtype dtype = ct_dtype_of(t0);
        size_t row = ct_dtype_size(dtype);
        for (int i = 1; i < nd; i++) row *= (size_t)shape[i];
        for (int s = 0; s < np; s++) {
            const ct_tensor *t = ct_value_get_tensor(parts[s]);
            if (ct_ndim(t) != nd || ct_shape(t, sh, 8) != nd || ct_dtype_of(t) != dtype ||
                ct_device_of(t).type != CT_CPU || ct_requires_grad(t) || sh[0] != cnt[s])
                goto unsupported;
            for (int i = 1; i < nd; i++)
                if (sh[i] != shape[i]) goto unsupported;
        }
        shape[0] = n;
        ct_tensor *out = ct_empty(nd, shape, &(ct_topts){.dtype = dtype});
        char *dst = out ? ct_data_ptr(out) : NULL;
        if (!dst) {
            ct_tensor_free(out);
            return NULL;
        }
        for (int s = 0; s < np; s++) {
            ct_tensor *src = ct_contiguous(ct_value_get_tensor(parts[s]));
            const char *p = src ? ct_data_ptr(src) : NULL;
            if (!p && row * (size_t)cnt[s] > 0) {
                ct_tensor_free(src);
                ct_tensor_free(out);
                return NULL;
            }
            for (int64_t j = 0; j < cnt[s]; j++)
                memcpy(dst + (size_t)pos[s][j] * row, p + (size_t)j * row, row);
            ct_tensor_free(src);
        }
        return ct_value_tensor(out);
    }
    if (kind != CT_VALUE_TUPLE && kind != CT_VALUE_LIST && kind != CT_VALUE_DICT) goto unsupported;
    size_t len = ct_value_len(parts[0]);
    for (int s = 1; s < np; s++)
        if (ct_value_len(parts[s]) != len) goto unsupported;
    ct_value *out = kind == CT_VALUE_TUPLE ? ct_value_tuple()
                    : kind == CT_VALUE_LIST ? ct_value_list()
                                            : ct_value_dict();
    ct_value *stack[8];
    ct_value **kids = np <= 8 ? stack : malloc((size_t)np * sizeof *kids);
    if (!out || !kids) {
        if (kids != stack) free(kids);
        ct_value_free(out);
        if (!kids) ct_set_error(CT_ENOMEM, "concat dataset: out of host memory");
        return NULL;
    }
    for (size_t i = 0; i < len; i++) {
        const char *key0 = NULL;
        int64_t ikey0 = 0;
        for (int s = 0; s < np; s++) {
            if (kind != CT_VALUE_DICT) {
                kids[s] = ct_value_list_get(parts[s], i);
                continue;
            }
            const char *key = NULL;
            int64_t ikey = 0;
            kids[s] = ct_value_dict_at(parts[s], i, &key, &ikey);
            if (s == 0) {
                key0 = key;
                ikey0 = ikey;
            } else if ((key0 == NULL) != (key == NULL) || (key0 && strcmp(key0, key) != 0) ||
                       (!key0 && ikey0 != ikey)) {
                *unsupported = true;
            }
        }
        ct_value *m = *unsupported ? NULL : merge_parts(kids, np, pos, cnt, n, unsupported);
        int rc = !m                         ? -1
                 : kind != CT_VALUE_DICT    ? ct_value_list_append(out, m)
                 : key0                     ? ct_value_dict_set(out, key0, m)
                                            : ct_value_dict_set_int(out, ikey0, m);
        if (rc != 0) { /* append and set free m on failure */
            if (kids != stack) free(kids);
            ct_value_free(out);
            return NULL;
        }
    }
    if (kids != stack) free(kids);
    return out;
unsupported:
    *unsupported = true;
    return NULL;
}

static ct_value *concat_get_batch(void *self, const int64_t *indices, const uint64_t *seeds, int64_t n) {
    concat_ds *c = self;
    /* src[i], local[i]: where sample i comes from. */
    int *src = malloc((size_t)n * sizeof *src);
    int64_t *local = malloc((size_t)n * sizeof *local);
    int64_t *grouped = malloc((size_t)n * sizeof *grouped);
    uint64_t *grouped_seeds = malloc((size_t)n * sizeof *grouped_seeds);
    int64_t *where = malloc((size_t)n * sizeof *where);
    int64_t *cnt = calloc((size_t)c->n, sizeof *cnt);
    int64_t *off = malloc((size_t)c->n * sizeof *off);
    int64_t *fill = calloc((size_t)c->n, sizeof *fill);
    /* The parts actually fetched, in source order: batch, rows, positions. */
    ct_value **parts = calloc((size_t)c->n, sizeof *parts);
    int64_t *part_cnt = malloc((size_t)c->n * sizeof *part_cnt);
    int64_t **part_pos = malloc((size_t)c->n * sizeof *part_pos);
    int np = 0;
    ct_value *batch = NULL;
    if (!src || !local || !grouped || !grouped_seeds || !where || !cnt || !off || !fill || !parts || !part_cnt ||
        !part_pos) {
        ct_set_error(CT_ENOMEM, "concat dataset: out of host memory");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        src[i] = concat_source(c, indices[i], &local[i]);
        cnt[src[i]]++;
    }
    if (cnt[src[0]] == n) { /* one source: its own get_batch */
        batch = cti_ds_get_batch(c->ds[src[0]], local, seeds, n);
        goto done;
    }
    /* Group the indices by source, keeping their order within a source. */
    for (int k = 0; k < c->n; k++) off[k] = k == 0 ? 0 : off[k - 1] + cnt[k - 1];
    for (int64_t i = 0; i < n; i++) {
        int k = src[i];
        grouped[off[k] + fill[k]] = local[i];
        grouped_seeds[off[k] + fill[k]] = seeds[i];
        where[off[k] + fill[k]] = i;
        fill[k]++;
    }
    for (int k = 0; k < c->n; k++) {
        if (!cnt[k]) continue;
        parts[np] = cti_ds_get_batch(c->ds[k], grouped + off[k], grouped_seeds + off[k], cnt[k]);
        if (!parts[np]) goto done;
        part_cnt[np] = cnt[k];
        part_pos[np] = where + off[k];
        np++;
    }
    bool unsupported = false;
    ct_scope *scope = ct_scope_begin();
    batch = merge_parts(parts, np, part_pos, part_cnt, n, &unsupported);
    ct_scope_end(scope);
    if (!batch && unsupported) batch = concat_collate_gets(c, indices, seeds, n);
done:
    for (int k = 0; k < np; k++) ct_value_free(parts[k]);
    free(src);
    free(local);
    free(grouped);
    free(grouped_seeds);
    free(where);
    free(cnt);
    free(off);
    free(fill);
    free(parts);
    free(part_cnt);
    free(part_pos);
    return batch;
}

static void concat_free(void *self) {
    concat_ds *c = self;
    for (int k = 0; k < c->n; k++) ct_dataset_free(c->ds[k]);
    free(c->ds);
    free(c->cum);
    free(c);
}

ct_dataset *ct_dataset_concat(int n, ct_dataset *const *datasets) {
    const char *fn = "ct_dataset_concat";
    if (n < 1 || !datasets) {
        ct_set_error(CT_EINVAL, "%s: %s", fn,
                     !datasets ? "datasets is NULL" : "n must be >= 1 (torch: datasets should not be "
                                                      "an empty iterable)");
        return NULL;
    }
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        if (!datasets[k]) {
            ct_set_error(CT_EINVAL, "%s: datasets[%d] is NULL", fn, k);
            return NULL;
        }
        int64_t len = ct_dataset_len(datasets[k]);
        if (len > INT64_MAX - total) {
            ct_set_error(CT_EINVAL, "%s: the datasets hold more than INT64_MAX samples together", fn);
            return NULL;
        }
        total += len;
    }
    concat_ds *c = calloc(1, sizeof *c);
    if (c) {
        c->ds = calloc((size_t)n, sizeof *c->ds);
        c->cum = malloc((size_t)n * sizeof *c->cum);
    }
    if (!c || !c->ds || !c->cum) {
        if (c) {
            free(c->ds);
            free(c->cum);
        }
        free(c);
        ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
        return NULL;
    }
    c->n = n;
    for (int k = 0; k < n; k++) {
        c->ds[k] = ct_dataset_ref(datasets[k]);
        c->cum[k] = (k ? c->cum[k - 1] : 0) + ct_dataset_len(datasets[k]);
    }
    static const ct_dataset_vtable vt = {concat_len, NULL, NULL, concat_free};
    static const cti_ds_seeded sv = {concat_get, concat_get_batch};
    ct_dataset *out = cti_ds_new_seeded(&vt, &sv, c);
    if (!out) concat_free(c);
    return out;
}

/* ---- mean and std ------------------------------------------------------ */

/* The field's tensor in a batch: the batch itself when it is a tensor and
 * field is 0, else its field-th element. Borrowed. */
static ct_tensor *field_of(const ct_value *batch, int field) {
    if (ct_value_kind_of(batch) == CT_VALUE_TENSOR && field == 0) return ct_value_get_tensor(batch);
    return ct_batch_at(batch, (size_t)field);
}

enum { STATS_BATCH_BYTES = 16 << 20 }; /* float64 bytes per batch, about */

int ct_dataset_mean_std(ct_dataset *d, int field, int channel_dim, ct_tensor **mean,
                        ct_tensor **std) {
    const char *fn = "ct_dataset_mean_std";
    if (mean) *mean = NULL;
    if (std) *std = NULL;
    if (!d || !mean || !std || field < 0 || channel_dim < -1)
        return ct_set_error(CT_EINVAL, "%s: %s", fn,
                            !d                ? "dataset is NULL"
                            : !mean || !std   ? "mean and std must not be NULL"
                            : field < 0       ? "field must be >= 0"
                                              : "channel_dim must be >= 0, or -1 for none");
    int64_t len = ct_dataset_len(d);
    if (len == 0) return ct_set_error(CT_EINVAL, "%s: the dataset is empty", fn);
    int64_t *idx = NULL, rows = 1, C = 1, count = 0;
    double *acc = NULL; /* per channel: mean, M2 (sum of squared deviations) */
    int rc = 0;
    int sample_ndim = -1;
    int64_t b = 1; /* samples in this batch: sample 0 alone first, to learn the shape */
    for (int64_t start = 0; start < len && rc == 0; start += b) {
        b = start == 0 ? 1 : (len - start < rows ? len - start : rows);
        if (start > 0 && !idx) {
            idx = malloc((size_t)rows * sizeof *idx);
            if (!idx) {
                rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
                break;
            }
        }
        int64_t zero = 0;
        for (int64_t i = 0; idx && i < b; i++) idx[i] = start + i;
        ct_scope *scope = ct_scope_begin();
        ct_value *batch = ct_dataset_get_batch(d, start == 0 ? &zero : idx, b);
        ct_tensor *x = batch ? field_of(batch, field) : NULL;
        if (!x) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            int code = ct_last_code() ? ct_last_code() : CT_EINVAL;
            if (batch)
                rc = ct_set_error(code, "%s: field %d of samples %" PRId64 "..%" PRId64 ": %s", fn,
                                  field, start, start + b - 1, msg);
            else
                rc = ct_set_error(code, "%s: reading samples %" PRId64 "..%" PRId64 ": %s", fn, start,
                                  start + b - 1, msg);
            goto next;
        }
        int nd = ct_ndim(x) - 1; /* a sample's dims */
        if (start == 0) {
            sample_ndim = nd;
            if (channel_dim >= nd) {
                rc = ct_set_error(CT_EINVAL,
                                  "%s: channel_dim %d is out of range for samples of %d dims "
                                  "(field %d)",
                                  fn, channel_dim, nd, field);
                goto next;
            }
            C = channel_dim >= 0 ? ct_size(x, channel_dim + 1) : 1;
            acc = calloc((size_t)(2 * (C > 0 ? C : 1)), sizeof *acc);
            int64_t per = ct_numel(x) > 0 ? ct_numel(x) : 1;
            rows = (int64_t)STATS_BATCH_BYTES / 8 / per;
            if (rows < 1) rows = 1;
            if (!acc) {
                rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
                goto next;
            }
        } else if (nd != sample_ndim || (channel_dim >= 0 && ct_size(x, channel_dim + 1) != C)) {
            rc = ct_set_error(CT_ESHAPE,
                              "%s: field %d of samples %" PRId64 "..%" PRId64
                              " has another number of dims or channels than sample 0's",
                              fn, field, start, start + b - 1);
            goto next;
        }
        /* [C, everything else] in float64 */
        ct_tensor *xd = ct_to_dtype(x, CT_F64);
        if (channel_dim >= 0) xd = ct_transpose(xd, 0, channel_dim + 1);
        xd = ct_reshape(xd, 2, (int64_t[]){C, -1});
        ct_tensor *m = ct_mean_dim(xd, 1, (int64_t[]){1}, false);
        ct_tensor *v = ct_var(xd, 1, (int64_t[]){1}, 0.0, false);
        if (!m || !v) {
            rc = ct_last_code();
            goto next;
        }
        int64_t k = ct_size(xd, 1); /* elements per channel in this batch */
        double *bm = malloc((size_t)(2 * C) * sizeof *bm);
        if (!bm || ct_read(m, bm, (size_t)C * sizeof *bm) || ct_read(v, bm + C, (size_t)C * sizeof *bm)) {
            rc = bm ? ct_last_code() : ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
            free(bm);
            goto next;
        }
        /* Chan et al.'s pairwise update of (count, mean, M2). */
        for (int64_t c = 0; c < C; c++) {
            double na = (double)count, nb = (double)k, nt = na + nb;
            double delta = bm[c] - acc[2 * c];
            acc[2 * c] += nt > 0 ? delta * nb / nt : 0;
            acc[2 * c + 1] += bm[C + c] * nb + (nt > 0 ? delta * delta * na * nb / nt : 0);
        }
        count += k;
        free(bm);
    next:
        ct_value_free(batch);
        ct_scope_end(scope);
    }
    if (rc == 0) {
        double *mv = malloc((size_t)(2 * (C > 0 ? C : 1)) * sizeof *mv);
        if (!mv) rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
        for (int64_t c = 0; mv && c < C; c++) {
            mv[c] = acc[2 * c];
            mv[C + c] = count > 0 ? sqrt(acc[2 * c + 1] / (double)count) : NAN;
            if (count == 0) mv[c] = NAN;
        }
        if (mv) {
            int nd = channel_dim >= 0 ? 1 : 0;
            *mean = ct_from_data(mv, nd, &C, CT_F64);
            *std = ct_from_data(mv + C, nd, &C, CT_F64);
            if (!*mean || !*std) {
                rc = ct_last_code();
                ct_tensor_free(*mean);
                ct_tensor_free(*std);
                *mean = *std = NULL;
            }
        }
        free(mv);
    }
    free(idx);
    free(acc);
    return rc;
}
