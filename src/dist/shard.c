/* src/dist/shard.c — an optimizer's state split across ranks (shard.h).
 *
 * Three parts: the partition (ZeroRedundancyOptimizer's greedy rule, made
 * once), the parameters' broadcast after each step, and the state dict
 * put back together for a checkpoint. The last does not gather whole
 * state dicts as bytes (rank 0 would hold every rank's encoding beside
 * the decoded tensors, twice the state it writes): the ranks first share
 * what each entry holds (keys, dtypes, shapes: a small value tree), then
 * every state tensor is broadcast from its owner straight into a tensor of
 * its shape, one at a time, which rank 0 keeps and the others free. */
#include "dist/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/dist.h"
#include "ctrial/error.h"
#include "ctrial/tensor.h"
#include "dist/grad_sync.h"

struct cti_shard {
    int rank, size;
    size_t n;   /* the optimizer's parameters */
    int *owner; /* [n] the rank that steps each */
};

/* ---- the partition ---------------------------------------------------------- */

typedef struct {
    size_t index;
    int64_t numel;
} sized;

/* Largest first; equal sizes keep index order (Python's sorted is stable). */
static int larger_first(const void *a, const void *b) {
    const sized *x = a, *y = b;
    if (x->numel != y->numel) return x->numel > y->numel ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The parameters of group g in the optimizer's state dict (its "params"
 * list, which holds their indices). */
static const ct_value *group_params(const ct_value *sd, size_t g) {
    return ct_value_dict_get(ct_value_list_get(ct_value_dict_get(sd, "param_groups"), g), "params");
}

/* ZeroRedundancyOptimizer._partition_parameters: group by group, each
 * parameter, largest first, to the rank with the fewest elements so far
 * (sizes carried over from group to group; the lowest rank on a tie). */
static int partition(cti_shard *s, const ct_optim *opt) {
    ct_value *sd = ct_optim_state_dict(opt);
    sized *order = malloc((s->n ? s->n : 1) * sizeof *order);
    int64_t *elements = calloc((size_t)s->size, sizeof *elements); /* what each rank steps so far */
    if (!sd || !order || !elements) {
        ct_value_free(sd);
        free(order);
        free(elements);
        return sd ? ct_set_error(CT_ENOMEM, "sharding the optimizer: out of host memory") : ct_last_code();
    }
    for (size_t i = 0; i < s->n; i++) s->owner[i] = -1;
    for (size_t g = 0; g < ct_optim_num_groups(opt); g++) {
        const ct_value *ids = group_params(sd, g);
        size_t m = ct_value_len(ids);
        for (size_t k = 0; k < m; k++) {
            int64_t i = -1;
            ct_value_get_int(ct_value_list_get(ids, k), &i);
            order[k] = (sized){(size_t)i, ct_numel(ct_optim_param(opt, (size_t)i))};
        }
        qsort(order, m, sizeof *order, larger_first);
        for (size_t k = 0; k < m; k++) {
            int r = 0;
            for (int q = 1; q < s->size; q++)
                if (elements[q] < elements[r]) r = q;
            s->owner[order[k].index] = r;
            elements[r] += order[k].numel;
        }
    }
    free(order);
    free(elements);
    ct_value_free(sd);
    return CT_OK;
}

cti_shard *cti_shard_new(ct_optim *opt, int rank, int size) {
    if (!opt || size < 1 || rank < 0 || rank >= size) {
        ct_set_error(CT_EINVAL, "cti_shard_new: %s", opt ? "bad rank or size" : "optimizer is NULL");
        return NULL;
    }
    if (!strcmp(ct_optim_type(opt), "LBFGS")) {
        ct_set_error(CT_ENOTSUP, "shard_optimizer: LBFGS cannot be sharded: one state (its directions and "
                                 "history) spans all its parameters");
        return NULL;
    }
    cti_shard *s = calloc(1, sizeof *s);
    size_t n = ct_optim_num_params(opt);
    bool *mine = s ? malloc((n ? n : 1) * sizeof *mine) : NULL;
    if (s) {
        s->rank = rank;
        s->size = size;
        s->n = n;
        s->owner = malloc((n ? n : 1) * sizeof *s->owner);
    }
    int rc = !s || !mine || !s->owner ? ct_set_error(CT_ENOMEM, "sharding the optimizer: out of host memory")
                                      : partition(s, opt);
    for (size_t i = 0; rc == CT_OK && i < n; i++) mine[i] = s->owner[i] == rank;
    if (rc == CT_OK) rc = ct_optim_set_stepped(opt, mine);
    free(mine);
    /* Only this rank's state from now on: what the optimizer holds for the
     * others' parameters (Adagrad makes it in its constructor) goes. */
    ct_value *sd = rc == CT_OK ? ct_optim_state_dict(opt) : NULL;
    ct_value *own = sd ? cti_shard_own_state(s, sd) : NULL;
    if (rc == CT_OK) rc = own && ct_optim_load_state_dict(opt, own) == CT_OK ? CT_OK : ct_last_code();
    ct_value_free(own);
    ct_value_free(sd);
    if (rc != CT_OK) {
        if (s && s->owner) ct_optim_set_stepped(opt, NULL);
        cti_shard_free(s);
        return NULL;
    }
    return s;
}

void cti_shard_free(cti_shard *s) {
    if (!s) return;
    free(s->owner);
    free(s);
}

/* The rank that steps parameter i (state_dict index order), -1 out of range. */
static int owner_of(const cti_shard *s, size_t i) { return i < s->n ? s->owner[i] : -1; }

/* ---- loading ---------------------------------------------------------------- */

ct_value *cti_shard_own_state(const cti_shard *s, const ct_value *sd) {
    const ct_value *state = ct_value_dict_get(sd, "state");
    const ct_value *groups = ct_value_dict_get(sd, "param_groups");
    if (ct_value_kind_of(sd) != CT_VALUE_DICT || ct_value_kind_of(state) != CT_VALUE_DICT || !groups) {
        ct_set_error(CT_EFORMAT, "optimizer state dict has no 'state' dict and 'param_groups' list");
        return NULL;
    }
    /* A saved id is the parameter at its place in the groups' "params"
     * lists taken in order (ids a Python optimizer numbered differently
     * included), which is this optimizer's index order. */
    ct_value *out = ct_value_dict();
    ct_value *kept = ct_value_dict();
    bool ok = out && kept;
    for (size_t e = 0; ok && e < ct_value_len(state); e++) {
        const char *skey = NULL;
        int64_t id = 0;
        const ct_value *entry = ct_value_dict_at(state, e, &skey, &id);
        int64_t at = -1, k = 0;
        for (size_t g = 0; at < 0 && !skey && g < ct_value_len(groups); g++) {
            const ct_value *ids = ct_value_dict_get(ct_value_list_get(groups, g), "params");
            for (size_t j = 0; j < ct_value_len(ids); j++, k++) {
                int64_t v = 0;
                if (ct_value_get_int(ct_value_list_get(ids, j), &v) == 0 && v == id) {
                    at = k;
                    break;
                }
            }
        }
        /* An id that belongs to no parameter stays, for the load to refuse. */
        if (at >= 0 && owner_of(s, (size_t)at) != s->rank) continue;
        ct_value *copy = ct_value_copy(entry, false);
        ok = copy && (skey ? ct_value_dict_set(kept, skey, copy) : ct_value_dict_set_int(kept, id, copy)) == 0;
    }
    for (size_t e = 0; ok && e < ct_value_len(sd); e++) {
        const char *key = NULL;
        const ct_value *v = ct_value_dict_at(sd, e, &key, NULL);
        if (key && !strcmp(key, "state")) {
            ok = ct_value_dict_set(out, "state", kept) == 0;
            kept = NULL;
        } else {
            ct_value *copy = ct_value_copy(v, false);
            ok = copy && key && ct_value_dict_set(out, key, copy) == 0;
        }
    }
    ct_value_free(kept);
    if (ok) return out;
    ct_value_free(out);
    if (ct_last_code() == CT_OK) ct_set_error(CT_ENOMEM, "sharding the optimizer: out of host memory");
    return NULL;
}

/* ---- after each step --------------------------------------------------------- */

int cti_shard_sync_params(const cti_shard *s, ct_optim *opt, struct cti_grad_sync *const *syncs, size_t nsyncs) {
    if (!s || !opt) return ct_set_error(CT_EINVAL, "cti_shard_sync_params: %s is NULL", s ? "opt" : "shard");
    if (s->size == 1) return CT_OK;
    ct_tensor **params = malloc((s->n ? s->n : 1) * sizeof *params);
    bool *done = calloc(s->n ? s->n : 1, sizeof *done), *got = malloc((s->n ? s->n : 1) * sizeof *got);
    int rc = params && done && got ? CT_OK : ct_set_error(CT_ENOMEM, "sharded optimizer: out of host memory");
    for (size_t i = 0; rc == CT_OK && i < s->n; i++) params[i] = ct_optim_param(opt, i);
    /* Shared memory first (every rank reaches the same decisions: the
     * buckets and the parameters are alike everywhere)... */
    for (size_t k = 0; rc == CT_OK && k < nsyncs; k++) {
        rc = cti_grad_sync_share_params(syncs[k], s->n, params, s->owner, got);
        for (size_t i = 0; rc == CT_OK && i < s->n; i++) done[i] = done[i] || got[i];
    }
    /* ...then messages for the rest. */
    for (size_t i = 0; rc == CT_OK && i < s->n; i++)
        if (!done[i] && ct_dist_broadcast(params[i], s->owner[i]) != CT_OK)
            rc = ct_set_error(ct_last_code(), "sharded optimizer: rank %d: parameter %zu from rank %d: %s", s->rank, i,
                              s->owner[i], ct_last_error());
    free(params);
    free(done);
    free(got);
    return rc;
}

/* ---- the whole state for a checkpoint ------------------------------------------ */

/* What entry holds, without its tensors: {key: ["tensor", dtype, device
 * type, [sizes]] or ["value", v]}. NEW, or NULL. */
static ct_value *describe(const ct_value *entry) {
    ct_value *d = ct_value_dict();
    for (size_t k = 0; d && k < ct_value_len(entry); k++) {
        const char *key = NULL;
        const ct_value *v = ct_value_dict_at(entry, k, &key, NULL);
        ct_value *what = ct_value_list();
        ct_tensor *t = ct_value_get_tensor(v);
        bool ok = what && key;
        if (ok && t) {
            ct_value *sizes = ct_value_list();
            ok = sizes && ct_value_list_append(what, ct_value_str("tensor")) == 0 &&
                 ct_value_list_append(what, ct_value_int(ct_dtype_of(t))) == 0 &&
                 ct_value_list_append(what, ct_value_int(ct_device_of(t).type)) == 0 &&
                 ct_value_list_append(what, sizes) == 0;
            for (int j = 0; ok && j < ct_ndim(t); j++) ok = ct_value_list_append(sizes, ct_value_int(ct_size(t, j))) == 0;
        } else if (ok) {
            ok = ct_value_list_append(what, ct_value_str("value")) == 0 &&
                 ct_value_list_append(what, ct_value_copy(v, false)) == 0;
        }
        if (!ok || ct_value_dict_set(d, key, what) != 0) {
            if (!ok) ct_value_free(what);
            ct_value_free(d);
            return NULL;
        }
    }
    return d;
}

/* This rank's state entries described: {index: describe(entry)}. NEW. */
static ct_value *describe_mine(const cti_shard *s, const ct_value *state) {
    ct_value *d = ct_value_dict();
    for (size_t e = 0; d && e < ct_value_len(state); e++) {
        int64_t id = -1;
        const ct_value *entry = ct_value_dict_at(state, e, NULL, &id);
        if (owner_of(s, (size_t)id) != s->rank) continue;
        ct_value *one = describe(entry);
        if (!one || ct_value_dict_set_int(d, id, one) != 0) {
            ct_value_free(d);
            return NULL;
        }
    }
    return d;
}

/* Tensor `key` of parameter i's entry, as its owner describes it: the
 * owner's own (shared), or a new one of that shape received from it.
 * Collective. NEW value on root, NULL elsewhere (and on failure, with the
 * error set and *rc nonzero). */
static ct_value *share_tensor(const cti_shard *s, const ct_optim *opt, size_t i, const ct_value *mine,
                              const ct_value *what, int root, int *rc) {
    int owner = s->owner[i];
    ct_tensor *t = NULL;
    if (owner == s->rank) {
        t = ct_value_get_tensor(mine);
        if (!t) {
            *rc = ct_set_error(CT_ESTATE, "the state entry of parameter %zu changed while it was shared", i);
            return NULL;
        }
        t = ct_keep(ct_alias(t));
    } else {
        int64_t dtype = 0, devtype = 0, shape[16];
        const ct_value *sizes = ct_value_list_get(what, 3);
        int nd = (int)ct_value_len(sizes);
        ct_value_get_int(ct_value_list_get(what, 1), &dtype);
        ct_value_get_int(ct_value_list_get(what, 2), &devtype);
        for (int j = 0; j < nd && j < 16; j++) ct_value_get_int(ct_value_list_get(sizes, (size_t)j), &shape[j]);
        /* A CUDA tensor on this rank's own device: the parameter's. */
        ct_device dev = {CT_CPU, 0};
        if (devtype == CT_CUDA) dev = ct_device_of(ct_optim_param(opt, i));
        ct_topts o = {.dtype = (ct_dtype)dtype, .device = dev};
        t = nd <= 16 ? ct_keep(ct_empty(nd, shape, &o)) : NULL;
        if (!t && nd > 16) ct_set_error(CT_ESHAPE, "a state tensor of %d dimensions", nd);
    }
    if (!t || ct_dist_broadcast(t, owner) != CT_OK) {
        ct_tensor_free(t);
        *rc = ct_last_code() ? ct_last_code() : CT_EDIST;
        return NULL;
    }
    if (s->rank != root) {
        ct_tensor_free(t);
        return NULL;
    }
    return ct_value_tensor(t);
}

int cti_shard_state_dict(const cti_shard *s, const ct_optim *opt, int root, ct_value **out) {
    *out = NULL;
    ct_value *sd = ct_optim_state_dict(opt);
    const ct_value *state = ct_value_dict_get(sd, "state");
    ct_value *mine = state ? describe_mine(s, state) : NULL;
    /* Every rank takes part in the exchange, also after a failure here. */
    ct_value *all = ct_dist_allgather_value(mine);
    ct_value_free(mine);
    if (!all) {
        ct_value_free(sd);
        return ct_last_code();
    }
    ct_value *merged = s->rank == root ? ct_value_dict() : NULL;
    int rc = CT_OK;
    for (size_t i = 0; i < s->n; i++) {
        const ct_value *entry = ct_value_dict_get_int(ct_value_list_get(all, (size_t)s->owner[i]), (int64_t)i);
        if (!entry) continue; /* not stepped yet: Python has no entry either */
        ct_value *one = s->rank == root ? ct_value_dict() : NULL; /* parameter i's entry */
        const ct_value *own = s->owner[i] == s->rank ? ct_value_dict_get_int(state, (int64_t)i) : NULL;
        for (size_t k = 0; k < ct_value_len(entry); k++) {
            const char *key = NULL;
            const ct_value *what = ct_value_dict_at(entry, k, &key, NULL);
            const char *kind = ct_value_get_str(ct_value_list_get(what, 0));
            ct_value *v = NULL;
            if (kind && !strcmp(kind, "tensor")) {
                /* Collective: even after a failure, every rank goes on to
                 * the same broadcasts (a failed one sends or receives
                 * nothing, and ends the job at the collective timeout). */
                int trc = CT_OK;
                v = share_tensor(s, opt, i, own ? ct_value_dict_get(own, key) : NULL, what, root, &trc);
                if (trc != CT_OK && rc == CT_OK) rc = trc;
            } else if (one) {
                v = ct_value_copy(ct_value_list_get(what, 1), false);
            }
            if (one && (!v || ct_value_dict_set(one, key, v) != 0) && rc == CT_OK)
                rc = ct_last_code() ? ct_last_code() : CT_ENOMEM;
        }
        if (one && ct_value_dict_set_int(merged, (int64_t)i, one) != 0 && rc == CT_OK) rc = CT_ENOMEM;
    }
    ct_value_free(all);
    if (s->rank != root || rc != CT_OK) {
        ct_value_free(merged);
        ct_value_free(sd);
        return rc == CT_OK ? CT_OK
                           : ct_set_error(rc, "gathering the sharded optimizer's state: rank %d: %s", s->rank,
                                          ct_last_error()[0] ? ct_last_error() : "out of memory");
    }
    /* torch's layout: "state" (whole now), then "param_groups". */
    ct_value *whole = ct_value_dict();
    bool ok = whole && ct_value_dict_set(whole, "state", merged) == 0;
    if (!ok) ct_value_free(merged);
    for (size_t e = 0; ok && e < ct_value_len(sd); e++) {
        const char *key = NULL;
        const ct_value *v = ct_value_dict_at(sd, e, &key, NULL);
        if (key && strcmp(key, "state") != 0) ok = ct_value_dict_set(whole, key, ct_value_copy(v, false)) == 0;
    }
    ct_value_free(sd);
    if (ok) {
        *out = whole;
        return CT_OK;
    }
    ct_value_free(whole);
    return ct_set_error(CT_ENOMEM, "gathering the sharded optimizer's state: out of host memory");
}
