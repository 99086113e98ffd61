/* src/dist/shard.c — an optimizer's state split across ranks (shard.h).
 *
 * Three parts: the partition (ZeroRedundancyOptimizer's greedy rule, made
 * once), the parameters passed from their owners after each step, and the
 * state dict put back together for a checkpoint. The last does not gather
 * whole state dicts as bytes (rank 0 would hold every rank's encoding
 * beside the decoded tensors, twice the state it writes): the ranks first
 * share what each entry holds (keys, dtypes, shapes: a small value tree),
 * then every state tensor is broadcast from its owner straight into a
 * tensor of its shape, one at a time, which rank 0 keeps and the others
 * free. Rank 0 keeps the others' tensors in a spill file beside the
 * checkpoints, mapped into memory (MAP_SHARED): the kernel writes their
 * pages back and drops them as memory is needed, so rank 0 never holds more
 * of the state in its own memory than its share, and a limit that the
 * sharded state fits also fits its checkpoints. */
#define _POSIX_C_SOURCE 200809L
#include "dist/shard.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ctrial/dist.h"
#include "ctrial/error.h"
#include "ctrial/tensor.h"
#include "dist/agree.h"
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
int cti_shard_owner_of(const cti_shard *s, size_t i) { return s && i < s->n ? s->owner[i] : -1; }

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
        if (at >= 0 && cti_shard_owner_of(s, (size_t)at) != s->rank) continue;
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
        if (cti_shard_owner_of(s, (size_t)id) != s->rank) continue;
        ct_value *one = describe(entry);
        if (!one || ct_value_dict_set_int(d, id, one) != 0) {
            ct_value_free(d);
            return NULL;
        }
    }
    return d;
}

/* Where rank 0 keeps the state tensors it receives: an unlinked file in
 * the checkpoint directory (nothing is left of it after a kill -9), each
 * tensor a region of it mapped shared. fd -1: in memory. */
typedef struct {
    int fd;
    off_t end; /* the next region's offset, page-aligned */
    const char *dir;
} spill;

static void spill_open(spill *sp, const char *dir) {
    sp->fd = -1;
    sp->end = 0;
    sp->dir = dir;
    if (!dir) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/.optimizer-state-XXXXXX", dir);
    sp->fd = mkstemp(path);
    if (sp->fd >= 0) unlink(path);
}

static void spill_close(spill *sp) {
    if (sp->fd >= 0) close(sp->fd); /* the mappings keep the file */
    sp->fd = -1;
}

/* The spill regions mapped now, for cti_shard_is_spilled: added when a
 * region is mapped, removed when its last tensor goes (which may be on a
 * checkpoint's writer thread: hence the lock). A region that cannot be
 * listed (out of memory) is still used, only never shared. */
static struct {
    pthread_mutex_t lock;
    struct region {
        const char *base;
        size_t len;
    } *at;
    size_t n, cap;
} spilled = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

static void list_region(const void *base, size_t len) {
    pthread_mutex_lock(&spilled.lock);
    if (spilled.n == spilled.cap) {
        size_t cap = spilled.cap ? 2 * spilled.cap : 64;
        struct region *at = realloc(spilled.at, cap * sizeof *at);
        if (at) spilled.at = at, spilled.cap = cap;
    }
    if (spilled.n < spilled.cap) spilled.at[spilled.n++] = (struct region){base, len};
    pthread_mutex_unlock(&spilled.lock);
}

bool cti_shard_is_spilled(const void *p) {
    bool found = false;
    pthread_mutex_lock(&spilled.lock);
    for (size_t i = 0; i < spilled.n && !found; i++)
        found = (const char *)p >= spilled.at[i].base && (const char *)p < spilled.at[i].base + spilled.at[i].len;
    pthread_mutex_unlock(&spilled.lock);
    return found;
}

static void unmap(void *data, void *len) {
    pthread_mutex_lock(&spilled.lock);
    for (size_t i = 0; i < spilled.n; i++)
        if (spilled.at[i].base == data) {
            spilled.at[i] = spilled.at[--spilled.n];
            break;
        }
    pthread_mutex_unlock(&spilled.lock);
    munmap(data, (size_t)(uintptr_t)len);
}

/* A NEW CPU tensor of this shape in the spill file's next region (its
 * blocks reserved first, so a full disk is an error here, never a SIGBUS
 * later), or in memory without a file, for no bytes, or where the file
 * cannot be mapped (a file system without shared mappings). NULL + error. */
static ct_tensor *spill_tensor(spill *sp, int nd, const int64_t *shape, ct_dtype dtype) {
    size_t len = ct_dtype_size(dtype);
    for (int j = 0; j < nd; j++) len *= (size_t)shape[j];
    if (sp->fd < 0 || len == 0) return ct_empty(nd, shape, &(ct_topts){.dtype = dtype});
    long page = sysconf(_SC_PAGESIZE);
    int err = posix_fallocate(sp->fd, sp->end, (off_t)len);
    if (err) {
        ct_set_error(CT_EIO, "keeping %zu bytes of optimizer state in a file in %s: %s", len, sp->dir, strerror(err));
        return NULL;
    }
    void *data = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, sp->fd, sp->end);
    if (data == MAP_FAILED) return ct_empty(nd, shape, &(ct_topts){.dtype = dtype});
    sp->end += (off_t)((len + (size_t)page - 1) / (size_t)page * (size_t)page);
    list_region(data, len);
    ct_tensor *t = ct_from_blob(data, nd, shape, dtype, unmap, (void *)(uintptr_t)len);
    if (!t) unmap(data, (void *)(uintptr_t)len); /* a failed ct_from_blob never calls its deleter */
    return t;
}

/* The tensor into which the owner broadcasts one tensor of parameter i's
 * entry (`what`: its description), on this rank: the owner's own (mine,
 * aliased), else a new one of that shape, received as it is held (a CUDA
 * one on this rank's own device: the parameter's). On root *kept is what
 * the state dict keeps: the owner's own, or a CPU tensor in sp (the same
 * as *buf unless it is received through a GPU). NEW handles; returns a
 * status. Local. */
static int receive_buffer(const cti_shard *s, const ct_optim *opt, size_t i, const ct_value *mine,
                          const ct_value *what, int root, spill *sp, ct_tensor **buf, ct_tensor **kept) {
    if (s->owner[i] == s->rank) {
        ct_tensor *t = ct_value_get_tensor(mine);
        if (!t) return ct_set_error(CT_ESTATE, "the state entry of parameter %zu changed while it was shared", i);
        *buf = ct_keep(ct_alias(t));
        if (s->rank == root) *kept = *buf;
        return *buf ? CT_OK : ct_last_code();
    }
    int64_t dtype = 0, devtype = 0, shape[16];
    const ct_value *sizes = ct_value_list_get(what, 3);
    int nd = (int)ct_value_len(sizes);
    if (nd > 16) return ct_set_error(CT_ESHAPE, "parameter %zu: a state tensor of %d dimensions", i, nd);
    ct_value_get_int(ct_value_list_get(what, 1), &dtype);
    ct_value_get_int(ct_value_list_get(what, 2), &devtype);
    for (int j = 0; j < nd; j++) ct_value_get_int(ct_value_list_get(sizes, (size_t)j), &shape[j]);
    if (s->rank == root && !(*kept = ct_keep(spill_tensor(sp, nd, shape, (ct_dtype)dtype)))) return ct_last_code();
    if (*kept && devtype != CT_CUDA) {
        *buf = *kept;
        return CT_OK;
    }
    ct_device dev = {CT_CPU, 0};
    if (devtype == CT_CUDA) dev = ct_device_of(ct_optim_param(opt, i));
    *buf = ct_keep(ct_empty(nd, shape, &(ct_topts){.dtype = (ct_dtype)dtype, .device = dev}));
    return *buf ? CT_OK : ct_last_code();
}

/* Parameter i's entry, whole on root: every tensor broadcast from its
 * owner (`entry`: the owner's description, `own`: its entry on the owner).
 * Every rank first makes what it receives into, then all agree on their
 * status and `pending` (a failure of this rank's since the last
 * agreement), so that none enters a broadcast another left (a rank that
 * cannot make its buffers, root out of memory or disk, fails them all
 * here). Collective. Returns the agreed status, the same on every rank;
 * then, on root, *one is the NEW entry, or NULL and *failed the code of a
 * failure after the agreement (a copy, the dict), which the next
 * agreement must carry. */
static int share_entry(const cti_shard *s, const ct_optim *opt, size_t i, const ct_value *entry, const ct_value *own,
                       int root, spill *sp, int pending, ct_value **one, int *failed) {
    *one = NULL;
    *failed = CT_OK;
    size_t nk = ct_value_len(entry);
    ct_tensor **buf = calloc(nk ? nk : 1, sizeof *buf), **kept = calloc(nk ? nk : 1, sizeof *kept);
    int rc = pending != CT_OK ? pending : buf && kept ? CT_OK : ct_set_error(CT_ENOMEM, "out of host memory");
    for (size_t k = 0; rc == CT_OK && k < nk; k++) {
        const char *key = NULL;
        const ct_value *what = ct_value_dict_at(entry, k, &key, NULL);
        const char *kind = ct_value_get_str(ct_value_list_get(what, 0));
        if (kind && !strcmp(kind, "tensor"))
            rc = receive_buffer(s, opt, i, own ? ct_value_dict_get(own, key) : NULL, what, root, sp, &buf[k], &kept[k]);
    }
    rc = cti_ranks_agree(rc);
    int after = CT_OK; /* this rank's failure from here on */
    for (size_t k = 0; rc == CT_OK && after == CT_OK && k < nk; k++)
        if (buf[k] && ct_dist_broadcast(buf[k], s->owner[i]) != CT_OK) after = ct_last_code();
    /* On root, the entry: the tensors kept (copied out of a GPU's), the values as described. */
    ct_value *d = rc == CT_OK && after == CT_OK && s->rank == root ? ct_value_dict() : NULL;
    if (rc == CT_OK && after == CT_OK && s->rank == root && !d) after = ct_last_code();
    for (size_t k = 0; buf && kept && k < nk; k++) {
        const char *key = NULL;
        const ct_value *what = ct_value_dict_at(entry, k, &key, NULL);
        if (after == CT_OK && d && kept[k] && kept[k] != buf[k]) after = ct_copy_(kept[k], buf[k]);
        if (buf[k] != kept[k]) ct_tensor_free(buf[k]);
        ct_value *v = NULL;
        if (kept[k]) v = ct_value_tensor(kept[k]); /* takes it */
        else if (d && !buf[k]) v = ct_value_copy(ct_value_list_get(what, 1), false);
        if (after == CT_OK && d && (!v || ct_value_dict_set(d, key, v) != 0))
            after = ct_last_code() ? ct_last_code() : CT_ENOMEM; /* dict_set frees v */
        else if (!d || after != CT_OK) ct_value_free(v);
    }
    free(buf);
    free(kept);
    if (rc != CT_OK || after != CT_OK) ct_value_free(d);
    else *one = d;
    *failed = rc == CT_OK ? after : CT_OK;
    return rc;
}

int cti_shard_state_dict(const cti_shard *s, const ct_optim *opt, int root, const char *spill_dir, ct_value **out) {
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
    /* A failure of this rank's not yet agreed: the next entry's agreement
     * carries it to every rank (after the last one, the caller's does). */
    int pending = s->rank != root || merged ? CT_OK : ct_last_code();
    int rc = CT_OK;
    spill sp;
    spill_open(&sp, s->rank == root ? spill_dir : NULL);
    /* Entry by entry, in parameter order; the first agreed failure ends
     * the loop on every rank at once. */
    for (size_t i = 0; rc == CT_OK && i < s->n; i++) {
        const ct_value *entry = ct_value_dict_get_int(ct_value_list_get(all, (size_t)s->owner[i]), (int64_t)i);
        if (!entry) continue; /* not stepped yet: Python has no entry either */
        const ct_value *own = s->owner[i] == s->rank ? ct_value_dict_get_int(state, (int64_t)i) : NULL;
        ct_value *one = NULL;
        rc = share_entry(s, opt, i, entry, own, root, &sp, pending, &one, &pending);
        if (one && ct_value_dict_set_int(merged, (int64_t)i, one) != 0) pending = ct_last_code();
    }
    if (rc == CT_OK) rc = pending;
    ct_value_free(all);
    spill_close(&sp);
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
