/* libFuzzer target: the loader of ct_pth_load (cti_pth_load_buffer_with, on
 * memory, and cti_pth_load_with on the same bytes in a file) on arbitrary
 * bytes, then the saver on what it loaded, with
 * modules pth and base alone: no libtorch. Its tensors are plain records
 * (record_tensors.h). Beyond "no crash, no leak, no undefined behaviour",
 * it checks that
 *  - bad bytes are always CT_EFORMAT with no value out;
 *  - loading from a file gives what loading from memory gives: the same
 *    error, or an equal value whose tensors share storages alike;
 *  - every view the engine makes lies inside its storage, and every range
 *    it reads of a storage too;
 *  - the engine drops every reference it takes: once the values are freed,
 *    no storage is left;
 *  - after a load, each tensor's storage holds the bytes of an entry of
 *    the archive of its size, or, for a tensor made of a numpy array in the
 *    pickle, the very bytes the pickle alone gives it (run again with
 *    made-up storages);
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

/* Storages made up for a second run of the pickle: one per key, never
 * filled from the archive. */
enum { MAX_MADE = 64 };
typedef struct {
    char key[MAX_MADE][64];
    storage *st[MAX_MADE]; /* a reference each */
    int n;
} made_up;

static void *made_up_storage(void *ctx, const char *key, ct_dtype dtype, int64_t numel) {
    made_up *m = ctx;
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->key[i], key) == 0) return m->st[i];
    if (m->n == MAX_MADE || strlen(key) >= sizeof m->key[0]) abort(); /* the first run took it */
    unsigned char *bytes;
    snprintf(m->key[m->n], sizeof m->key[0], "%s", key);
    return m->st[m->n++] = record_storage_new((uint64_t)numel * ct_dtype_size(dtype), &bytes);
}

static bool made(const made_up *m, const storage *s) {
    for (int i = 0; i < m->n; i++)
        if (m->st[i] == s) return true;
    return false;
}

/* Each tensor's storage holds the bytes of an entry of z of its size;
 * except where its counterpart in `again` (the same pickle run with
 * made-up storages) is on no made-up storage: a numpy array's, whose bytes
 * must then be the same in both. */
static void check_storages(const ct_value *v, const ct_value *again, const made_up *m, const cti_pth_zip *z,
                           const uint8_t *data) {
    if (ct_value_kind_of(v) != ct_value_kind_of(again)) abort();
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_TENSOR: {
        storage *s = record_tensor_of(v)->st, *t = record_tensor_of(again)->st;
        if (!made(m, t)) {
            if (s->nbytes != t->nbytes || memcmp(s->bytes, t->bytes, (size_t)s->nbytes) != 0) abort();
            return;
        }
        bool found = s->checked;
        for (size_t k = 0; !found && k < z->n; k++)
            found = z->entries[k].size == s->nbytes &&
                    memcmp(data + z->entries[k].offset, s->bytes, (size_t)s->nbytes) == 0;
        if (!found) abort();
        s->checked = true;
        return;
    }
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
    case CT_VALUE_DICT:
        if (ct_value_len(v) != ct_value_len(again)) abort();
        for (size_t i = 0; i < ct_value_len(v); i++) {
            const char *skey;
            int64_t ikey;
            bool dict = ct_value_kind_of(v) == CT_VALUE_DICT;
            check_storages(dict ? ct_value_dict_at(v, i, &skey, &ikey) : ct_value_list_get(v, i),
                           dict ? ct_value_dict_at(again, i, &skey, &ikey) : ct_value_list_get(again, i), m, z,
                           data);
        }
        return;
    default: return;
    }
}

/* ---- the target --------------------------------------------------------------------- */

/* The same bytes through ct_pth_load's file path (cti_pth_load_with: a
 * regular file read with pread, large entries on several threads): the
 * same outcome, the same error or an equal value. */
static void check_file_path(const uint8_t *data, size_t size, int rc, const ct_value *v) {
    char path[64], first[512];
    snprintf(path, sizeof path, "/tmp/fuzz_pth_in_%ld.pth", (long)getpid());
    snprintf(first, sizeof first, "%s", rc ? ct_last_error() : "");
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
    ct_value *w = NULL;
    int frc = cti_pth_load_with(path, &record_tensors, &w);
    unlink(path);
    if (frc != rc) abort();
    if (frc) {
        /* The message names the file instead of the buffer; past the name it is the same. */
        const char *a = strstr(first, "fuzz.pth"), *b = strstr(ct_last_error(), path);
        if (!a || !b || strcmp(a + strlen("fuzz.pth"), b + strlen(path)) != 0) abort();
        ct_clear_error();
        return;
    }
    if (!ct_value_equal(v, w)) abort();
    record_check_sharing(v, w);
    ct_value_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_value *v = (ct_value *)&v;
    if (cti_pth_load_buffer_with(data, size, "fuzz.pth", &record_tensors, &v) != 0) {
        if (ct_last_code() != CT_EFORMAT || v || record_live_storages) abort(); /* bad bytes are a format error, always */
        check_file_path(data, size, CT_EFORMAT, NULL);
        if (record_live_storages) abort();
        ct_clear_error();
        return 0;
    }
    check_file_path(data, size, 0, v);
    cti_pth_src src = {.name = "fuzz.pth", .fd = -1, .mem = data, .size = size};
    cti_pth_zip z;
    if (cti_pth_zip_open(&src, &z)) abort(); /* it loaded */
    const cti_pth_entry *pkl = cti_pth_zip_find(&z, "data.pkl");
    made_up m = {.n = 0};
    cti_pth_unpickle_env env = {
        .storage = made_up_storage, .ctx = &m, .tensors = &record_tensors, .file = "fuzz.pth", .entry = "data.pkl"};
    ct_value *again = NULL;
    if (!pkl || cti_pth_unpickle(data + pkl->offset, (size_t)pkl->size, &env, &again) != 0) abort(); /* it ran */
    check_storages(v, again, &m, &z, data);
    ct_value_free(again);
    for (int i = 0; i < m.n; i++) record_storage_release(m.st[i]);
    cti_pth_zip_free(&z);

    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_pth_%ld.pth", (long)getpid());
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
