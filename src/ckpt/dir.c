/* src/ckpt/dir.c — checkpoint directories on disk: atomic commit, metadata,
 * verification, finding the latest one, retention (see ckpt.h, and
 * docs/design.md's checkpoint contract). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt.h"

#include "base/clock.h"
#include "base/files.h"
#include "base/value_json.h"

#define TMP_PREFIX ".tmp-"
#define DEL_PREFIX ".del-"

/* ---- small file-system helpers --------------------------------------------- */

static int io_error(const char *what, const char *path) {
    return ct_set_error(CT_EIO, "%s %s: %s", what, path, strerror(errno));
}

/* fsync of a directory, so that entries created or renamed in it persist. */
static int sync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return io_error("cannot open", path);
    int rc = fsync(fd) == 0 ? CT_OK : io_error("cannot fsync", path);
    close(fd);
    return rc;
}

/* rm -r of a checkpoint directory (files and nested directories). */
static void remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char child[4096];
            if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child) continue;
            struct stat st;
            if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(child);
            else unlink(child);
        }
        closedir(d);
    }
    rmdir(path);
}

/* Deleting a checkpoint: renamed out of sight first (one atomic step), so a
 * crash mid-way never leaves a half-deleted checkpoint under a real name. */
static void delete_checkpoint(const char *parent, const char *name) {
    char from[4096], to[4096];
    snprintf(from, sizeof from, "%s/%s", parent, name);
    snprintf(to, sizeof to, "%s/" DEL_PREFIX "%s", parent, name);
    if (rename(from, to) == 0) remove_tree(to);
}

static uint32_t fresh_tag(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
    x ^= x >> 33; /* splitmix-style finaliser: spread the bits */
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* ---- writing ----------------------------------------------------------------- */

int ct_ckpt_begin(ct_ckpt_writer *w, const char *checkpoint_dir, int64_t steps) {
    memset(w, 0, sizeof *w);
    int rc = ct_make_dirs(checkpoint_dir, "checkpoint directory");
    if (rc != CT_OK) return rc;
    snprintf(w->parent, sizeof w->parent, "%s", checkpoint_dir);
    for (int attempt = 0; attempt < 16; attempt++) {
        snprintf(w->name, sizeof w->name, "ckpt-%06lld-%08x", (long long)steps, fresh_tag());
        snprintf(w->final, sizeof w->final, "%s/%s", checkpoint_dir, w->name);
        snprintf(w->tmp, sizeof w->tmp, "%s/" TMP_PREFIX "%s", checkpoint_dir, w->name);
        struct stat st;
        if (stat(w->final, &st) == 0) continue; /* a fresh directory every time */
        if (mkdir(w->tmp, 0777) == 0) {
            w->files = json_object();
            return w->files ? CT_OK : ct_set_error(CT_ENOMEM, "out of memory");
        }
        if (errno != EEXIST) return io_error("cannot create", w->tmp);
    }
    return ct_set_error(CT_EIO, "cannot find a fresh checkpoint name in %s", checkpoint_dir);
}

static json_t *file_entry(const ct_file_sum *sum) {
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", (unsigned)sum->crc32);
    return json_pack("{s:I, s:s}", "size", (json_int_t)sum->nbytes, "crc32", crc);
}

int ct_ckpt_write_pth(ct_ckpt_writer *w, const char *file, const ct_value *v) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", w->tmp, file);
    ct_pth_save_params p = ct_pth_save_default_params();
    p.fsync = true;
    p.archive_name = "state_dict"; /* torch.save's name for state_dict.pth */
    ct_file_sum sum;
    int rc = ct_pth_save(path, v, &p, &sum);
    if (rc != CT_OK) return rc;
    json_object_set_new(w->files, file, file_entry(&sum));
    return CT_OK;
}

/* Writes text to path and fsyncs it. */
static int write_synced(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) return io_error("cannot create", path);
    size_t n = strlen(text), done = 0;
    while (done < n) {
        ssize_t k = write(fd, text + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int rc = io_error("cannot write", path);
            close(fd);
            return rc;
        }
        done += (size_t)k;
    }
    int rc = fsync(fd) == 0 ? CT_OK : io_error("cannot fsync", path);
    if (close(fd) != 0 && rc == CT_OK) rc = io_error("cannot close", path);
    return rc;
}

int ct_ckpt_commit(ct_ckpt_writer *w, json_t *metadata) {
    if (!metadata) return ct_set_error(CT_ENOMEM, "out of memory building checkpoint metadata");
    json_object_set(metadata, "files", w->files);
    json_object_set_new(metadata, "time", json_real(ct_clock_wall()));
    char *text = json_dumps(metadata, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(metadata);
    if (!text) return ct_set_error(CT_ENOMEM, "cannot format %s", CT_CKPT_METADATA_FILE);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", w->tmp, CT_CKPT_METADATA_FILE);
    int rc = write_synced(path, text);
    free(text);
    if (rc == CT_OK) rc = sync_dir(w->tmp);
    if (rc == CT_OK && rename(w->tmp, w->final) != 0) rc = io_error("cannot rename to", w->final);
    if (rc == CT_OK) rc = sync_dir(w->parent);
    return rc;
}

void ct_ckpt_abort(ct_ckpt_writer *w) {
    if (w->tmp[0]) remove_tree(w->tmp);
    json_decref(w->files);
    w->files = NULL;
    w->tmp[0] = '\0';
}

void ct_ckpt_remove_leftovers(const char *checkpoint_dir) {
    DIR *d = opendir(checkpoint_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) && strncmp(e->d_name, DEL_PREFIX, strlen(DEL_PREFIX)))
            continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", checkpoint_dir, e->d_name) < (int)sizeof path) remove_tree(path);
    }
    closedir(d);
}

/* ---- reading and verifying ---------------------------------------------------- */

static json_t *bad(const char *dir, const char *fmt, const char *detail) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, detail);
    ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s", dir, msg);
    return NULL;
}

json_t *ct_ckpt_read_metadata(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, CT_CKPT_METADATA_FILE);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return bad(dir, "%s", "not a directory");
    json_error_t err;
    json_t *m = json_load_file(path, 0, &err);
    if (!m) {
        char detail[400];
        snprintf(detail, sizeof detail, "%s: %s (line %d)", CT_CKPT_METADATA_FILE, err.text, err.line);
        return bad(dir, "%s", detail);
    }
    static const struct { const char *key; json_type type; } need[] = {
        {"steps_completed", JSON_INTEGER}, {"framework", JSON_STRING}, {"format", JSON_STRING},
        {"files", JSON_OBJECT},            {"trial_state", JSON_OBJECT}, {"time", JSON_REAL},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        json_t *v = json_object_get(m, need[i].key);
        if (!v || json_typeof(v) != need[i].type) {
            json_decref(m);
            return bad(dir, "metadata.json lacks '%s' (or it has the wrong type)", need[i].key);
        }
    }
    if (strcmp(json_string_value(json_object_get(m, "format")), CT_CKPT_FORMAT) != 0) {
        json_decref(m);
        return bad(dir, "metadata.json: format is '%s', not 'pickle'", json_string_value(json_object_get(m, "format")));
    }
    if (!json_object_get(json_object_get(m, "files"), CT_CKPT_STATE_FILE)) {
        json_decref(m);
        return bad(dir, "metadata.json does not list %s", CT_CKPT_STATE_FILE);
    }
    return m;
}

/* Every file metadata.json lists exists with its size and CRC-32. */
static int verify_files(const char *dir, json_t *files) {
    const char *name;
    json_t *entry;
    json_object_foreach(files, name, entry) {
        json_t *size = json_object_get(entry, "size"), *crc = json_object_get(entry, "crc32");
        if (!json_is_integer(size) || !json_is_string(crc) || strchr(name, '/'))
            return ct_set_error(CT_ECHECKPOINT, "checkpoint %s: metadata.json has a malformed entry for '%s'", dir, name);
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        struct stat st;
        if (stat(path, &st) != 0) return ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s is missing", dir, name);
        if ((json_int_t)st.st_size != json_integer_value(size))
            return ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s has %lld bytes, metadata.json says %lld", dir, name,
                                (long long)st.st_size, (long long)json_integer_value(size));
        ct_file_sum sum;
        if (ct_file_checksum(path, &sum) != CT_OK) return ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s", dir, ct_last_error());
        char got[16];
        snprintf(got, sizeof got, "%08x", (unsigned)sum.crc32);
        if (strcmp(got, json_string_value(crc)) != 0)
            return ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s has CRC-32 %s, metadata.json says %s (the file is damaged)",
                                dir, name, got, json_string_value(crc));
    }
    return CT_OK;
}

int ct_ckpt_verify(const char *dir) {
    if (!dir) return ct_set_error(CT_EINVAL, "ct_ckpt_verify: dir is NULL");
    json_t *m = ct_ckpt_read_metadata(dir);
    if (!m) return ct_last_code();
    int rc = verify_files(dir, json_object_get(m, "files"));
    json_decref(m);
    return rc;
}

ct_value *ct_ckpt_metadata(const char *dir) {
    if (!dir) {
        ct_set_error(CT_EINVAL, "ct_ckpt_metadata: dir is NULL");
        return NULL;
    }
    json_t *m = ct_ckpt_read_metadata(dir);
    if (!m) return NULL;
    ct_value *v = ct_value_from_json(m);
    json_decref(m);
    return v;
}

/* ---- listing ------------------------------------------------------------------- */

typedef struct {
    char name[256];
    double time;
    int64_t steps;
    bool has_metric;
    double metric;
} listed;

/* Committed checkpoints in checkpoint_dir (readable metadata.json). */
static int list_checkpoints(const char *checkpoint_dir, const char *metric, listed **out, size_t *n) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(checkpoint_dir);
    if (!d) return errno == ENOENT ? CT_OK : io_error("cannot read", checkpoint_dir);
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof((listed *)0)->name) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", checkpoint_dir, e->d_name);
        char code_msg[2048];
        snprintf(code_msg, sizeof code_msg, "%s", ct_last_error());
        int code = ct_last_code();
        json_t *m = ct_ckpt_read_metadata(path);
        ct_set_error(code, "%s", code_msg); /* a foreign directory is not an error here */
        if (!m) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            listed *grown = realloc(*out, cap * sizeof **out);
            if (!grown) {
                json_decref(m);
                closedir(d);
                return ct_set_error(CT_ENOMEM, "out of memory listing %s", checkpoint_dir);
            }
            *out = grown;
        }
        listed *c = &(*out)[(*n)++];
        memset(c, 0, sizeof *c);
        snprintf(c->name, sizeof c->name, "%s", e->d_name);
        c->time = json_real_value(json_object_get(m, "time"));
        c->steps = json_integer_value(json_object_get(m, "steps_completed"));
        json_t *v = metric ? json_object_get(json_object_get(m, "validation_metrics"), metric) : NULL;
        /* A NaN or infinite metric is never the best (nor breaks the sort). */
        if (json_is_number(v) && isfinite(json_number_value(v))) {
            c->has_metric = true;
            c->metric = json_number_value(v);
        }
        json_decref(m);
    }
    closedir(d);
    return CT_OK;
}

int ct_ckpt_count(const char *checkpoint_dir, size_t *n) {
    listed *all;
    int rc = list_checkpoints(checkpoint_dir, NULL, &all, n);
    free(all);
    return rc;
}

int ct_ckpt_remove_all(const char *checkpoint_dir) {
    listed *all;
    size_t n;
    int rc = list_checkpoints(checkpoint_dir, NULL, &all, &n);
    for (size_t i = 0; rc == CT_OK && i < n; i++) delete_checkpoint(checkpoint_dir, all[i].name);
    free(all);
    return rc;
}

static int newest_first(const void *a, const void *b) {
    const listed *x = a, *y = b;
    if (x->time != y->time) return x->time > y->time ? -1 : 1;
    return x->steps > y->steps ? -1 : x->steps < y->steps;
}

int ct_ckpt_latest(const char *checkpoint_dir, char *buf, size_t len) {
    if (!checkpoint_dir || !buf) return ct_set_error(CT_EINVAL, "ct_ckpt_latest: argument is NULL");
    listed *all;
    size_t n;
    int rc = list_checkpoints(checkpoint_dir, NULL, &all, &n);
    if (rc != CT_OK) return rc;
    if (n == 0) rc = ct_set_error(CT_ECHECKPOINT, "no checkpoint in %s", checkpoint_dir);
    else {
        qsort(all, n, sizeof *all, newest_first);
        if (snprintf(buf, len, "%s/%s", checkpoint_dir, all[0].name) >= (int)len)
            rc = ct_set_error(CT_EINVAL, "ct_ckpt_latest: buffer of %zu bytes is too small", len);
    }
    free(all);
    return rc;
}

/* ---- the best, and retention ----------------------------------------------------- */

static bool g_smaller; /* qsort has no context argument */

static int best_first(const void *a, const void *b) {
    const listed *x = a, *y = b;
    if (x->has_metric != y->has_metric) return x->has_metric ? -1 : 1;
    if (x->metric != y->metric) return (x->metric < y->metric) == g_smaller ? -1 : 1;
    return newest_first(a, b);
}

int ct_ckpt_best(const char *checkpoint_dir, const char *metric, bool smaller_is_better, char *buf, size_t len,
                 double *value) {
    if (!checkpoint_dir || !metric || !buf) return ct_set_error(CT_EINVAL, "ct_ckpt_best: argument is NULL");
    listed *all;
    size_t n;
    int rc = list_checkpoints(checkpoint_dir, metric, &all, &n);
    if (rc != CT_OK) return rc;
    g_smaller = smaller_is_better;
    if (n > 0) qsort(all, n, sizeof *all, best_first);
    if (n == 0 || !all[0].has_metric)
        rc = ct_set_error(CT_ECHECKPOINT, "no checkpoint in %s has a finite validation metric '%s'", checkpoint_dir,
                          metric);
    else if (snprintf(buf, len, "%s/%s", checkpoint_dir, all[0].name) >= (int)len)
        rc = ct_set_error(CT_EINVAL, "ct_ckpt_best: buffer of %zu bytes is too small", len);
    else if (value)
        *value = all[0].metric;
    free(all);
    return rc;
}

int ct_ckpt_prune(const char *checkpoint_dir, int keep_latest, int keep_best, const char *metric,
                  bool smaller_is_better, const char *protect) {
    listed *all;
    size_t n;
    int rc = list_checkpoints(checkpoint_dir, metric, &all, &n);
    if (rc != CT_OK || n == 0) return rc;
    bool *keep = calloc(n, sizeof *keep);
    if (!keep) {
        free(all);
        return ct_set_error(CT_ENOMEM, "out of memory pruning %s", checkpoint_dir);
    }
    qsort(all, n, sizeof *all, newest_first);
    for (size_t i = 0; i < n && (int)i < keep_latest; i++) keep[i] = true;
    for (size_t i = 0; i < n; i++) keep[i] = keep[i] || (protect && strcmp(all[i].name, protect) == 0);
    /* Mark the best ones by name: sort a copy. */
    listed *by_best = malloc(n * sizeof *by_best);
    if (by_best) {
        memcpy(by_best, all, n * sizeof *all);
        g_smaller = smaller_is_better;
        qsort(by_best, n, sizeof *by_best, best_first);
        int want = keep_best > 1 ? keep_best : 1; /* the best one is never deleted */
        for (size_t j = 0; j < n && (int)j < want && by_best[j].has_metric; j++)
            for (size_t i = 0; i < n; i++)
                if (strcmp(all[i].name, by_best[j].name) == 0) keep[i] = true;
        free(by_best);
        for (size_t i = 0; i < n; i++)
            if (!keep[i]) delete_checkpoint(checkpoint_dir, all[i].name);
    }
    free(keep);
    free(all);
    return by_best ? CT_OK : ct_set_error(CT_ENOMEM, "out of memory pruning %s", checkpoint_dir);
}
