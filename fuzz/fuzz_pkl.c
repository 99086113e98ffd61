/* libFuzzer target: the pickle machine of ct_pth_load (ct_pth_unpickle) on
 * arbitrary bytes. fuzz_pth feeds whole archives, whose CRCs stop nearly
 * every mutated pickle before it runs; this target runs them directly,
 * with storages made up on demand (zeros, at most 64 KiB each). Beyond "no
 * crash, no leak, no undefined behaviour": bad bytes are always CT_EFORMAT
 * with no value out, and a value that loads must save (ct_pth_save) and
 * load back equal, unless it holds one storage under two dtypes, which
 * ct_pth_save refuses as torch.save does. Built and run by fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctrial/ctrial.h>

#include "pth/pth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_STORAGES = 16, MAX_BYTES = 1 << 16 };

typedef struct {
    char key[32];
    ct_tensor *base;
} made_up;

typedef struct {
    made_up st[MAX_STORAGES];
    int n;
} storages;

/* The unpickler's storage callback: zeros of the size the pickle asks,
 * the same tensor for every use of a key. */
static ct_tensor *storage(void *ctx, const char *key, ct_dtype dtype, int64_t numel) {
    storages *s = ctx;
    uint64_t nbytes = (uint64_t)numel * ct_dtype_size(dtype);
    if (strlen(key) >= sizeof s->st[0].key || numel > MAX_BYTES || nbytes > MAX_BYTES) {
        ct_set_error(CT_EFORMAT, "fuzz: storage '%.40s' of %lld elements is beyond the made-up ones", key,
                     (long long)numel);
        return NULL;
    }
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->st[i].key, key) != 0) continue;
        if ((uint64_t)ct_numel(s->st[i].base) == nbytes) return s->st[i].base;
        ct_set_error(CT_EFORMAT, "fuzz: storage '%s' used with two sizes", key);
        return NULL;
    }
    if (s->n == MAX_STORAGES) {
        ct_set_error(CT_EFORMAT, "fuzz: more than %d storages", MAX_STORAGES);
        return NULL;
    }
    ct_tensor *base = ct_keep(ct_zeros(1, (const int64_t[]){(int64_t)nbytes}, &(ct_topts){.dtype = CT_U8}));
    if (!base) abort();
    snprintf(s->st[s->n].key, sizeof s->st[0].key, "%s", key);
    s->st[s->n++].base = base;
    return base;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    storages s = {.n = 0};
    ct_pth_unpickle_env env = {.storage = storage, .ctx = &s, .file = "fuzz.pkl", .entry = "fuzz/data.pkl"};
    ct_value *v = (ct_value *)&v;
    int rc = ct_pth_unpickle(data, size, &env, &v);
    for (int i = 0; i < s.n; i++) ct_tensor_free(s.st[i].base);
    if (rc != 0) {
        if (ct_last_code() != CT_EFORMAT || v) abort(); /* bad bytes are a format error, always */
        ct_clear_error();
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_pkl_%ld.pth", (long)getpid());
    if (ct_pth_save(path, v, NULL, NULL) != 0) {
        if (ct_last_code() != CT_EDTYPE) abort();
        ct_clear_error();
    } else {
        ct_value *back = NULL;
        if (ct_pth_load(path, &back) != 0 || !ct_value_equal(v, back)) abort();
        ct_value_free(back);
    }
    unlink(path);
    ct_value_free(v);
    return 0;
}
