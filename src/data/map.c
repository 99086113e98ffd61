/* src/data/map.c — per-record transforms (ct_dataset_map) and the seed each
 * record draws from (ct_record_seed), data.h.
 *
 * torch's DataLoader seeds each worker process once and a transform draws
 * from whatever state that worker's generator has reached, so a record's
 * augmentation depends on the number of workers and on which worker got
 * it, and a resumed run draws differently. Here the loader hands each
 * record a seed made from (loader seed, pass, index) alone; a map makes a
 * fresh generator from it for that record, so the draws are the record's
 * own: the same on any number of workers, in any batch, after a resume.
 */
#include "ctrial/data.h"

#include <stdlib.h>

#include "data/dataset.h"

static uint64_t splitmix64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t ct_record_seed(uint64_t seed, int64_t epoch, int64_t index) {
    uint64_t h = splitmix64(seed);
    h = splitmix64(h ^ (uint64_t)epoch);
    h = splitmix64(h ^ (uint64_t)index);
    return h >> 1; /* below 2^63: any torch.manual_seed takes it */
}

typedef struct {
    ct_dataset *parent; /* a reference of our own */
    ct_map_fn fn;
    void *ctx;
    void (*ctx_free)(void *);
} map_ds;

static int64_t map_len(void *self) { return ct_dataset_len(((map_ds *)self)->parent); }

static ct_value *map_get(void *self, int64_t index, uint64_t seed) {
    map_ds *m = self;
    ct_value *sample = cti_ds_get(m->parent, index, seed);
    if (!sample) return NULL;
    ct_rng *rng = ct_rng_new(seed);
    ct_value *out = NULL;
    if (rng) {
        ct_clear_error();
        /* Tensors the function makes and does not put in its result die
         * with the scope; its result owns its own. */
        ct_scope *scope = ct_scope_begin();
        out = m->fn(sample, rng, m->ctx);
        ct_scope_end(scope);
        if (!out && ct_last_code() == CT_OK)
            ct_set_error(CT_ETRIAL, "map function returned NULL without setting an error");
    }
    ct_rng_free(rng);
    ct_value_free(sample);
    return out;
}

static void map_free(void *self) {
    map_ds *m = self;
    ct_dataset_free(m->parent);
    if (m->ctx_free) m->ctx_free(m->ctx);
    free(m);
}

ct_dataset *ct_dataset_map(ct_dataset *d, ct_map_fn fn, void *ctx, void (*ctx_free)(void *)) {
    if (!d || !fn) {
        if (ctx_free) ctx_free(ctx);
        /* a NULL dataset from a failed constructor keeps that failure's message */
        if (!fn || ct_last_code() == CT_OK) ct_set_error(CT_EINVAL, "ct_dataset_map: %s is NULL", !d ? "dataset" : "fn");
        return NULL;
    }
    map_ds *m = malloc(sizeof *m);
    if (!m) {
        if (ctx_free) ctx_free(ctx);
        ct_set_error(CT_ENOMEM, "ct_dataset_map: out of host memory");
        return NULL;
    }
    *m = (map_ds){ct_dataset_ref(d), fn, ctx, ctx_free};
    static const ct_dataset_vtable vt = {map_len, NULL, NULL, map_free};
    static const cti_ds_seeded sv = {map_get, NULL};
    ct_dataset *out = cti_ds_new_seeded(&vt, &sv, m);
    if (!out) map_free(m);
    return out;
}
