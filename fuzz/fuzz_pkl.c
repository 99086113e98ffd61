/* libFuzzer target: the pickle machine of ct_pth_load (cti_pth_unpickle) on
 * arbitrary bytes, then the saver on what it made, with modules pth and
 * base alone: no libtorch. fuzz_pth feeds whole archives, whose CRCs stop
 * nearly every mutated pickle before it runs; this target runs them
 * directly, with storages made up on demand (zeros, at most 64 KiB each).
 * Its tensors are plain records (record_tensors.h). Beyond "no crash, no
 * leak, no undefined behaviour", it checks that
 *  - bad bytes are always CT_EFORMAT with no value out;
 *  - every view the machine makes lies inside its storage, and every range
 *    the saver reads of a storage too;
 *  - the engine drops every reference it takes: once the values are freed,
 *    no storage is left;
 *  - a value that loads saves (cti_pth_save_with) and loads back equal (the
 *    same views of the same bytes), tensors sharing a storage exactly when
 *    they did, unless it holds one storage under two dtypes, which the
 *    saver refuses (CT_EDTYPE) as torch.save does.
 * Built by fuzz/CMakeLists.txt, run by fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record_tensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- checks over whole values ------------------------------------------------------- */

/* ---- storages, made up -------------------------------------------------------------- */

enum { MAX_STORAGES = 16, MAX_BYTES = 1 << 16 };

typedef struct {
    char key[MAX_STORAGES][32];
    storage *st[MAX_STORAGES]; /* a reference each */
    int n;
} made_up;

/* The unpickler's storage callback: zeros of the size the pickle asks, the
 * same storage for every use of a key. */
static void *made_up_storage(void *ctx, const char *key, ct_dtype dtype, int64_t numel) {
    made_up *m = ctx;
    uint64_t nbytes = (uint64_t)numel * ct_dtype_size(dtype);
    if (strlen(key) >= sizeof m->key[0] || numel > MAX_BYTES || nbytes > MAX_BYTES) {
        ct_set_error(CT_EFORMAT, "fuzz: storage '%.40s' of %lld elements is beyond the made-up ones", key,
                     (long long)numel);
        return NULL;
    }
    for (int i = 0; i < m->n; i++) {
        if (strcmp(m->key[i], key) != 0) continue;
        if (m->st[i]->nbytes == nbytes) return m->st[i];
        ct_set_error(CT_EFORMAT, "fuzz: storage '%s' used with two sizes", key);
        return NULL;
    }
    if (m->n == MAX_STORAGES) {
        ct_set_error(CT_EFORMAT, "fuzz: more than %d storages", MAX_STORAGES);
        return NULL;
    }
    unsigned char *bytes;
    storage *s = record_storage_new(nbytes, &bytes);
    memset(bytes, 0, (size_t)nbytes);
    snprintf(m->key[m->n], sizeof m->key[0], "%s", key);
    m->st[m->n++] = s;
    return s;
}

/* ---- the target --------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    made_up m = {.n = 0};
    cti_pth_unpickle_env env = {
        .storage = made_up_storage, .ctx = &m, .tensors = &record_tensors, .file = "fuzz.pkl", .entry = "fuzz/data.pkl"};
    ct_value *v = (ct_value *)&v;
    int rc = cti_pth_unpickle(data, size, &env, &v);
    for (int i = 0; i < m.n; i++) record_storage_release(m.st[i]); /* the views keep theirs */
    if (rc != 0) {
        if (ct_last_code() != CT_EFORMAT || v || record_live_storages) abort(); /* bad bytes are a format error, always */
        ct_clear_error();
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_pkl_%ld.pth", (long)getpid());
    if (cti_pth_save_with(path, v, NULL, NULL, false, &record_tensors) != 0) {
        if (ct_last_code() != CT_EDTYPE) abort();
        ct_clear_error();
    } else {
        ct_value *back = NULL;
        if (cti_pth_load_with(path, &record_tensors, &back) != 0 || !ct_value_equal(v, back)) abort();
        record_check_sharing(v, back);
        ct_value_free(back);
    }
    unlink(path);
    ct_value_free(v);
    if (record_live_storages) abort();
    return 0;
}
