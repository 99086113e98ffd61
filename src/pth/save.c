/* src/pth/save.c — the engine of ct_pth_save (ckpt.h): torch.save of a
 * ct_value tree, its tensors described and read by the caller's
 * cti_pth_tensors (pth.h).
 *
 * The tree is pickled first (small: ~100 bytes per tensor), which also lists
 * the storages it refers to. Then the entries go out in torch.save's order:
 * data.pkl, .format_version, .storage_alignment, byteorder, data/0, data/1,
 * ..., and the zip writer adds version and .data/serialization_id. A CPU
 * storage is written straight from its memory (tensors->storage_bytes); a
 * CUDA storage is copied to the host in bounded chunks
 * (tensors->storage_read). Each entry's CRC-32 goes into its data
 * descriptor: for large CPU storages a helper thread computes them, in
 * order, while the calling thread writes (write(2) into the page cache is
 * the slower of the two, so the CRCs cost no time); small and device
 * storages get theirs on the way.
 */
#include "pth/pth.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    PIECE = 64 << 20,        /* bytes per write of a CPU storage */
    DEVICE_CHUNK = 16 << 20, /* host bounce buffer for device storages */
    LARGE = 1 << 20,         /* CPU storages whose CRC the helper computes */
};

/* ---- CRCs of large storages, ahead of the writes ------------------------------------- */

typedef struct {
    const unsigned char **data; /* per storage: its bytes when the helper does it, else NULL */
    const size_t *nbytes;
    uint32_t *crc;
    size_t n;
    size_t done; /* storages [0, done) are finished; guarded by mu */
    bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} crc_ahead;

static void *crc_worker(void *arg) {
    crc_ahead *c = arg;
    for (size_t i = 0; i < c->n; i++) {
        uint32_t crc = c->data[i] ? cti_crc32(0, c->data[i], c->nbytes[i]) : 0;
        pthread_mutex_lock(&c->mu);
        c->crc[i] = crc;
        c->done = i + 1;
        bool stop = c->stop;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
        if (stop) break;
    }
    return NULL;
}

/* The CRC of storage i, once the helper has it. */
static uint32_t crc_wait(crc_ahead *c, size_t i) {
    pthread_mutex_lock(&c->mu);
    while (c->done <= i) pthread_cond_wait(&c->cv, &c->mu);
    uint32_t crc = c->crc[i];
    pthread_mutex_unlock(&c->mu);
    return crc;
}

ct_pth_save_params cti_pth_save_defaults(void) {
    ct_pth_save_params p = {.fsync = false, .archive_name = NULL};
    return p;
}

/* torch.save's archive name for a path: the file name without directory
 * and without its last extension ("ckpt/m.pth" -> "m"); "archive" (the name
 * PyTorch uses for streams) when that leaves nothing. */
static void default_archive(const char *path, char *out, size_t len) {
    const char *start = path;
    for (const char *c = path; *c; c++)
        if (*c == '/' || *c == '\\') start = c + 1;
    size_t n = strlen(start);
    for (size_t i = n; i > 0; i--) {
        if (start[i - 1] == '.') {
            n = i - 1;
            break;
        }
    }
    if (n == 0) {
        snprintf(out, len, "archive");
        return;
    }
    if (n >= len) n = len - 1;
    memcpy(out, start, n);
    out[n] = '\0';
}

static int check_archive(const char *path, const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 1024 || strchr(name, '/') || strchr(name, '\\') ||
        !cti_pth_utf8_valid((const unsigned char *)name, n))
        return ct_set_error(CT_EINVAL,
                            "ct_pth_save: %s: archive_name \"%.64s\" must be 1 to 1024 bytes of UTF-8 "
                            "without '/' or '\\' (every entry lives in <archive_name>/)",
                            path, name);
    return 0;
}

/* A CPU storage, straight from its memory; its CRC too unless crc is NULL. */
static int write_host(cti_pth_zw *w, const unsigned char *data, size_t n, uint32_t *crc) {
    for (size_t at = 0; at < n; at += PIECE) {
        size_t k = n - at < PIECE ? n - at : PIECE;
        if (crc) *crc = cti_crc32(*crc, data + at, k);
        if (cti_pth_zw_data(w, data + at, k)) return ct_last_code();
    }
    return 0;
}

/* A device storage, through a host buffer of at most DEVICE_CHUNK bytes. */
static int write_device(cti_pth_zw *w, const cti_pth_tensors *tensors, const ct_value *leaf, size_t n, uint32_t *crc,
                        const char *path, const char *record) {
    size_t cap = n < DEVICE_CHUNK ? n : DEVICE_CHUNK;
    unsigned char *buf = malloc(cap ? cap : 1);
    if (!buf) return ct_set_error(CT_ENOMEM, "ct_pth_save: %s: out of host memory for %s", path, record);
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < n; at += cap) {
        size_t k = n - at < cap ? n - at : cap;
        if (tensors->storage_read(leaf, at, buf, k)) {
            rc = ct_set_error(ct_last_code(), "ct_pth_save: %s: copying %s to the host: %s", path, record,
                              ct_last_error());
            break;
        }
        *crc = cti_crc32(*crc, buf, k);
        rc = cti_pth_zw_data(w, buf, k);
    }
    free(buf);
    return rc;
}

/* Entry data/<key>: its CRC comes from `ahead` when that computes it. */
static int write_storage(cti_pth_zw *w, const cti_pth_tensors *tensors, const cti_pth_storage *st, size_t key,
                         const unsigned char *data, crc_ahead *ahead, const char *path) {
    char record[32];
    snprintf(record, sizeof record, "data/%zu", key);
    if (cti_pth_zw_begin(w, record, st->nbytes)) return ct_last_code();
    uint32_t crc = 0;
    bool helped = ahead && ahead->data[key];
    int rc = st->device.type == CT_CPU ? write_host(w, data, st->nbytes, helped ? NULL : &crc)
                                       : write_device(w, tensors, st->leaf, st->nbytes, &crc, path, record);
    if (!rc && helped) crc = crc_wait(ahead, key);
    return rc ? rc : cti_pth_zw_end(w, crc);
}

/* The storages' entries; a helper thread computes the CRCs of the large
 * CPU ones when it can be started. */
static int write_storages(cti_pth_zw *w, const cti_pth_tensors *tensors, const cti_pth_pickled *pk, const char *path) {
    size_t n = pk->nstorages;
    const unsigned char **data = calloc(n ? n : 1, sizeof *data);
    size_t *nbytes = calloc(n ? n : 1, sizeof *nbytes);
    uint32_t *crc = calloc(n ? n : 1, sizeof *crc);
    int rc = data && nbytes && crc ? 0 : ct_set_error(CT_ENOMEM, "ct_pth_save: %s: out of host memory", path);
    size_t large = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        const cti_pth_storage *st = &pk->storages[i];
        nbytes[i] = st->nbytes;
        if (st->device.type != CT_CPU || st->nbytes == 0) continue;
        if (!(data[i] = tensors->storage_bytes(st->leaf)))
            rc = ct_set_error(ct_last_code(), "ct_pth_save: %s: data/%zu: %s", path, i, ct_last_error());
        large += st->nbytes >= LARGE;
    }
    /* The helper gets pointers only to the large storages: the rest (and
     * the device ones) are CRC'd by the writing thread. */
    const unsigned char **helper_data = rc || !large ? NULL : calloc(n, sizeof *helper_data);
    for (size_t i = 0; helper_data && i < n; i++) helper_data[i] = nbytes[i] >= LARGE ? data[i] : NULL;
    crc_ahead ahead = {.data = helper_data, .nbytes = nbytes, .crc = crc, .n = n};
    pthread_t helper;
    bool started = false;
    if (helper_data && pthread_mutex_init(&ahead.mu, NULL) == 0) {
        if (pthread_cond_init(&ahead.cv, NULL) == 0) {
            started = pthread_create(&helper, NULL, crc_worker, &ahead) == 0;
            if (!started) pthread_cond_destroy(&ahead.cv);
        }
        if (!started) pthread_mutex_destroy(&ahead.mu);
    }
    for (size_t i = 0; !rc && i < n; i++)
        rc = write_storage(w, tensors, &pk->storages[i], i, data[i], started ? &ahead : NULL, path);
    if (started) {
        pthread_mutex_lock(&ahead.mu);
        ahead.stop = true;
        pthread_mutex_unlock(&ahead.mu);
        pthread_join(helper, NULL);
        pthread_cond_destroy(&ahead.cv);
        pthread_mutex_destroy(&ahead.mu);
    }
    free(helper_data);
    free(data);
    free(nbytes);
    free(crc);
    return rc;
}

int cti_pth_save_with(const char *path, const ct_value *v, const ct_pth_save_params *p, ct_file_sum *sum,
                     bool force_zip64, const cti_pth_tensors *tensors) {
    if (!path || !v) return ct_set_error(CT_EINVAL, "ct_pth_save: %s is NULL", !path ? "path" : "v");
    ct_pth_save_params params = p ? *p : cti_pth_save_defaults();
    char archive[1100];
    if (params.archive_name) {
        if (check_archive(path, params.archive_name)) return CT_EINVAL;
        snprintf(archive, sizeof archive, "%s", params.archive_name);
    } else {
        default_archive(path, archive, sizeof archive);
    }
    cti_pth_pickled pk;
    if (cti_pth_pickle(v, tensors, path, &pk)) return ct_last_code();
    cti_pth_zw *w = cti_pth_zw_open(path, archive, force_zip64);
    int rc = w ? 0 : ct_last_code();
    const uint16_t probe = 1;
    const char *byteorder = *(const unsigned char *)&probe ? "little" : "big";
    if (!rc) rc = cti_pth_zw_entry(w, "data.pkl", pk.pkl.data, pk.pkl.len);
    if (!rc) rc = cti_pth_zw_entry(w, ".format_version", "1", 1);
    if (!rc) rc = cti_pth_zw_entry(w, ".storage_alignment", "64", 2);
    if (!rc) rc = cti_pth_zw_entry(w, "byteorder", byteorder, strlen(byteorder));
    if (!rc) rc = write_storages(w, tensors, &pk, path);
    if (!rc) {
        rc = cti_pth_zw_finish(w, params.fsync, sum);
        w = NULL;
    }
    cti_pth_zw_abort(w);
    cti_pth_pickled_free(&pk);
    return rc;
}
