/* src/ckpt/dir.c — checkpoint directories on disk: atomic commit, metadata,
 * verification, finding the latest one, retention (see ckpt.h, and
 * docs/design.md's checkpoint contract). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/remote.h" /* defines: cti_ckpt_is_remote, cti_ckpt_remote_pick (a store's latest and best) */

#include "base/clock.h"
#include "base/crc32.h"
#include "base/files.h"
#include "base/json_write.h"
#include "base/value_json.h"
#include "pth/pth.h"

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

/* Deleting a checkpoint: renamed out of sight first (one atomic step), so a
 * crash mid-way never leaves a half-deleted checkpoint under a real name. */
static void delete_checkpoint(const char *parent, const char *name) {
    char from[4096], to[4096];
    snprintf(from, sizeof from, "%s/%s", parent, name);
    snprintf(to, sizeof to, "%s/" DEL_PREFIX "%s", parent, name);
    if (rename(from, to) == 0) cti_remove_tree(to);
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

int cti_ckpt_begin(cti_ckpt_writer *w, const char *checkpoint_dir, int64_t steps) {
    memset(w, 0, sizeof *w);
    int rc = cti_make_dirs(checkpoint_dir, "checkpoint directory");
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

int cti_ckpt_write_pth(cti_ckpt_writer *w, const char *file, const ct_value *v) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", w->tmp, file);
    ct_pth_save_params p = cti_pth_save_defaults();
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

/* The place of the 8 hex digits of metadata_crc32 in a metadata.json's
 * text: the last "metadata_crc32" key (ctrial writes it last, at the top
 * level), its colon and its string. NULL when there is none. */
static char *crc_digits(char *text, size_t len) {
    static const char key[] = "\"" CT_CKPT_CRC_KEY "\"";
    char *found = NULL; /* text holds no NUL before its end (JSON: jansson refuses one) */
    for (char *p = text; (p = strstr(p, key)); p += sizeof key - 1) found = p;
    if (!found) return NULL;
    char *p = found + sizeof key - 1, *end = text + len;
    while (p < end && strchr(" \t\r\n", *p)) p++;
    if (p == end || *p++ != ':') return NULL;
    while (p < end && strchr(" \t\r\n", *p)) p++;
    if (end - p < 10 || p[0] != '"' || p[9] != '"') return NULL;
    return p + 1;
}

/* CRC-32 of metadata.json's text with its 8 digits read as "00000000". */
static uint32_t metadata_crc(char *text, size_t len, char *digits) {
    char saved[8];
    memcpy(saved, digits, 8);
    memset(digits, '0', 8);
    uint32_t crc = cti_crc32(0, text, len);
    memcpy(digits, saved, 8);
    return crc;
}

/* One more than the highest commit_sequence of the committed checkpoints in
 * checkpoint_dir (1 for the first; checkpoints of earlier versions, without
 * one, count as 0). */
static int next_sequence(const char *checkpoint_dir, int64_t *seq);

int cti_ckpt_commit(cti_ckpt_writer *w, json_t *metadata) {
    if (!metadata) return ct_set_error(CT_ENOMEM, "out of memory building checkpoint metadata");
    int64_t seq = 0;
    int rc = next_sequence(w->parent, &seq);
    if (rc != CT_OK) {
        json_decref(metadata);
        return rc;
    }
    json_object_set(metadata, "files", w->files);
    json_object_set_new(metadata, CT_CKPT_SEQ_KEY, json_integer((json_int_t)seq));
    json_object_set_new(metadata, "time", json_real(cti_clock_wall())); /* for people: nothing orders by it */
    json_object_del(metadata, CT_CKPT_CRC_KEY);
    json_object_set_new(metadata, CT_CKPT_CRC_KEY, json_string("00000000")); /* last: sealed below */
    char *text = cti_json_dumps(metadata, JSON_INDENT(2));
    json_decref(metadata);
    if (!text) return ct_set_error(CT_ENOMEM, "cannot format %s", CT_CKPT_METADATA_FILE);
    size_t len = strlen(text);
    char *digits = crc_digits(text, len);
    if (!digits) {
        free(text);
        return ct_set_error(CT_EFORMAT, "cannot seal %s: no %s in it", CT_CKPT_METADATA_FILE, CT_CKPT_CRC_KEY);
    }
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", (unsigned)metadata_crc(text, len, digits));
    memcpy(digits, hex, 8);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", w->tmp, CT_CKPT_METADATA_FILE);
    rc = write_synced(path, text);
    free(text);
    if (rc == CT_OK) rc = sync_dir(w->tmp);
    if (rc == CT_OK && rename(w->tmp, w->final) != 0) rc = io_error("cannot rename to", w->final);
    if (rc == CT_OK) rc = sync_dir(w->parent);
    return rc;
}

void cti_ckpt_abort(cti_ckpt_writer *w) {
    if (w->tmp[0]) cti_remove_tree(w->tmp);
    json_decref(w->files);
    w->files = NULL;
    w->tmp[0] = '\0';
}

void cti_ckpt_remove_leftovers(const char *checkpoint_dir) {
    DIR *d = opendir(checkpoint_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) && strncmp(e->d_name, DEL_PREFIX, strlen(DEL_PREFIX)))
            continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", checkpoint_dir, e->d_name) < (int)sizeof path) cti_remove_tree(path);
    }
    closedir(d);
}

/* ---- reading and verifying ---------------------------------------------------- */

/* A checkpoint directory's name, "ckpt-<steps>-<tag>": its steps, or
 * INT64_MAX when the name does not say (then it may be anything). */
static int64_t steps_of_name(const char *name) {
    if (strncmp(name, CT_CKPT_PREFIX, strlen(CT_CKPT_PREFIX)) != 0) return INT64_MAX;
    const char *p = name + strlen(CT_CKPT_PREFIX);
    int64_t steps = 0;
    if (*p < '0' || *p > '9') return INT64_MAX;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (steps > (INT64_MAX - 9) / 10) return INT64_MAX;
        steps = steps * 10 + (*p - '0');
    }
    return *p == '-' ? steps : INT64_MAX;
}

static const char *json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* The top-level keys ctrial needs, with their types (JSON_REAL stands for
 * any number: an integer or a real). commit_sequence and metadata_crc32 are checked apart: checkpoints
 * of earlier versions have neither. */
static const struct {
    const char *key;
    json_type type;
    const char *type_name;
} needed[] = {
    {"steps_completed", JSON_INTEGER, "an integer"}, {"framework", JSON_STRING, "a string"},
    {"format", JSON_STRING, "a string"},             {"files", JSON_OBJECT, "an object"},
    {"trial_state", JSON_OBJECT, "an object"},       {"time", JSON_REAL, "a number"},
};

json_t *cti_ckpt_parse_metadata(char *text, size_t len, int64_t *seq, char *why, size_t why_len) {
#define DAMAGED(...) do { snprintf(why, why_len, __VA_ARGS__); goto damaged; } while (0)
    json_t *m = NULL;
    *seq = 0;
    if (len == 0) DAMAGED("%s is empty", CT_CKPT_METADATA_FILE);
    json_error_t err;
    if (!(m = json_loadb(text, len, 0, &err)))
        DAMAGED("%s is not valid JSON: %s (line %d, column %d)", CT_CKPT_METADATA_FILE, err.text, err.line,
                err.column);
    if (!json_is_object(m)) DAMAGED("%s is %s, not a JSON object", CT_CKPT_METADATA_FILE, json_type_name(m));
    /* The seal: CRC-32 of the file's bytes with its own 8 digits as zeros. */
    json_t *crc = json_object_get(m, CT_CKPT_CRC_KEY), *sequence = json_object_get(m, CT_CKPT_SEQ_KEY);
    if (crc || sequence) {
        if (!crc) DAMAGED("%s lacks '%s' (it has '%s')", CT_CKPT_METADATA_FILE, CT_CKPT_CRC_KEY, CT_CKPT_SEQ_KEY);
        const char *want = json_string_value(crc);
        char *digits = crc_digits(text, len);
        if (!want || strlen(want) != 8 || strspn(want, "0123456789abcdef") != 8)
            DAMAGED("%s: '%s' is not 8 hex digits", CT_CKPT_METADATA_FILE, CT_CKPT_CRC_KEY);
        if (!digits || memcmp(digits, want, 8) != 0)
            DAMAGED("%s: '%s' is not its last key", CT_CKPT_METADATA_FILE, CT_CKPT_CRC_KEY);
        char got[9];
        snprintf(got, sizeof got, "%08x", (unsigned)metadata_crc(text, len, digits));
        if (strcmp(got, want) != 0)
            DAMAGED("%s has CRC-32 %s, its %s says %s (the file is damaged or was edited)", CT_CKPT_METADATA_FILE,
                    got, CT_CKPT_CRC_KEY, want);
        if (!sequence) DAMAGED("%s lacks '%s'", CT_CKPT_METADATA_FILE, CT_CKPT_SEQ_KEY);
        if (!json_is_integer(sequence))
            DAMAGED("%s: '%s' is %s, not an integer", CT_CKPT_METADATA_FILE, CT_CKPT_SEQ_KEY,
                    json_type_name(sequence));
        if (json_integer_value(sequence) < 1)
            DAMAGED("%s: '%s' is %lld, not 1 or more", CT_CKPT_METADATA_FILE, CT_CKPT_SEQ_KEY,
                    (long long)json_integer_value(sequence));
        *seq = json_integer_value(sequence);
    }
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        json_t *v = json_object_get(m, needed[i].key);
        if (!v) DAMAGED("%s lacks '%s'", CT_CKPT_METADATA_FILE, needed[i].key);
        bool ok = needed[i].type == JSON_REAL ? json_is_number(v) : json_typeof(v) == needed[i].type;
        if (!ok)
            DAMAGED("%s: '%s' is %s, not %s", CT_CKPT_METADATA_FILE, needed[i].key, json_type_name(v),
                    needed[i].type_name);
    }
    if (json_integer_value(json_object_get(m, "steps_completed")) < 0)
        DAMAGED("%s: 'steps_completed' is negative", CT_CKPT_METADATA_FILE);
    const char *format = json_string_value(json_object_get(m, "format"));
    if (strcmp(format, CT_CKPT_FORMAT) != 0)
        DAMAGED("%s: format is '%s', not '%s'", CT_CKPT_METADATA_FILE, format, CT_CKPT_FORMAT);
    if (!json_object_get(json_object_get(m, "files"), CT_CKPT_STATE_FILE))
        DAMAGED("%s does not list %s", CT_CKPT_METADATA_FILE, CT_CKPT_STATE_FILE);
    return m;
damaged:
    json_decref(m);
    *seq = 0;
    return NULL;
#undef DAMAGED
}

/* dir's metadata.json, read, sealed and checked: NEW json, and its commit
 * sequence in *seq (0: written before ctrial recorded one). NULL when
 * damaged, with why (without the directory) in `why`. */
static json_t *load_metadata(const char *dir, int64_t *seq, char *why, size_t why_len) {
    char path[4200];
    char *text = NULL;
    size_t len = 0;
    struct stat st;
    *seq = 0;
    if (snprintf(path, sizeof path, "%s/%s", dir, CT_CKPT_METADATA_FILE) >= (int)sizeof path) {
        snprintf(why, why_len, "its path is too long");
        return NULL;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, why_len, "not a directory");
        return NULL;
    }
    if (stat(path, &st) != 0 && errno == ENOENT) {
        snprintf(why, why_len, "%s is missing", CT_CKPT_METADATA_FILE);
        return NULL;
    }
    /* A regular file only: a FIFO would block, a device never end. */
    if (cti_read_file_raw(path, CT_CKPT_METADATA_MAX, &text, &len) != CT_OK) {
        const char *msg = ct_last_error();
        size_t n = strlen(path);
        snprintf(why, why_len, "%s%s", CT_CKPT_METADATA_FILE, strncmp(msg, path, n) == 0 ? msg + n : msg);
        return NULL;
    }
    json_t *m = cti_ckpt_parse_metadata(text, len, seq, why, why_len);
    free(text);
    return m;
}

json_t *cti_ckpt_read_metadata(const char *dir) {
    char why[1024];
    int64_t seq;
    json_t *m = load_metadata(dir, &seq, why, sizeof why);
    if (!m) ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s", dir, why);
    return m;
}

/* Every file metadata.json lists is a regular file with its size and CRC-32. */
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
        /* Before its size: a FIFO or a device has none, and reading one
         * would block or never end. */
        if (cti_check_regular(path, NULL) != CT_OK)
            return ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s", dir, ct_last_error());
        if ((json_int_t)st.st_size != json_integer_value(size))
            return ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s has %lld bytes, metadata.json says %lld", dir, name,
                                (long long)st.st_size, (long long)json_integer_value(size));
        ct_file_sum sum;
        if (cti_files_checksum(path, &sum) != CT_OK) return ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s", dir, ct_last_error());
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
    json_t *m = cti_ckpt_read_metadata(dir);
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
    json_t *m = cti_ckpt_read_metadata(dir);
    if (!m) return NULL;
    ct_value *v = cti_value_from_json(m);
    json_decref(m);
    return v;
}

/* ---- listing ------------------------------------------------------------------- */

typedef cti_ckpt_listed listed;

typedef struct {
    listed *at;
    size_t n, cap;
} listing;

static void free_listing(listing *l) {
    for (size_t i = 0; i < l->n; i++) free(l->at[i].damaged);
    free(l->at);
    memset(l, 0, sizeof *l);
}

static listed *add_listed(listing *l, const char *name) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        listed *grown = realloc(l->at, cap * sizeof *grown);
        if (!grown) return NULL;
        l->at = grown;
        l->cap = cap;
    }
    listed *c = &l->at[l->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    return c;
}

/* The checkpoints in checkpoint_dir: committed ones into `intact`, and,
 * when `damaged` is not NULL, ckpt-* directories whose metadata.json is
 * missing, unreadable or invalid into it. Other directories without a
 * readable metadata.json (not checkpoints), files, and the .tmp-* and
 * .del-* directories of a write or a deletion are left out. A folder that
 * does not exist holds none. */
static int list_checkpoints(const char *checkpoint_dir, const char *metric, listing *intact, listing *damaged) {
    memset(intact, 0, sizeof *intact);
    if (damaged) memset(damaged, 0, sizeof *damaged);
    DIR *d = opendir(checkpoint_dir);
    if (!d) return errno == ENOENT ? CT_OK : io_error("cannot read", checkpoint_dir);
    int rc = CT_OK;
    struct dirent *e;
    while (rc == CT_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof((listed *)0)->name) continue;
        char path[4096], why[1024];
        if (snprintf(path, sizeof path, "%s/%s", checkpoint_dir, e->d_name) >= (int)sizeof path) continue;
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        int64_t seq;
        json_t *m = load_metadata(path, &seq, why, sizeof why);
        if (!m) {
            if (!damaged || strncmp(e->d_name, CT_CKPT_PREFIX, strlen(CT_CKPT_PREFIX)) != 0) continue;
            listed *c = add_listed(damaged, e->d_name);
            if (!c || !(c->damaged = strdup(why))) {
                rc = ct_set_error(CT_ENOMEM, "out of memory listing %s", checkpoint_dir);
                break;
            }
            c->steps = steps_of_name(e->d_name);
            continue;
        }
        listed *c = add_listed(intact, e->d_name);
        if (!c) {
            json_decref(m);
            rc = ct_set_error(CT_ENOMEM, "out of memory listing %s", checkpoint_dir);
            break;
        }
        cti_ckpt_listed_fill(c, m, seq, metric);
        json_decref(m);
    }
    closedir(d);
    if (rc != CT_OK) {
        free_listing(intact);
        if (damaged) free_listing(damaged);
    }
    return rc;
}

void cti_ckpt_listed_fill(cti_ckpt_listed *c, const json_t *m, int64_t seq, const char *metric) {
    c->seq = seq;
    c->steps = json_integer_value(json_object_get(m, "steps_completed"));
    json_t *v = metric ? json_object_get(json_object_get(m, "validation_metrics"), metric) : NULL;
    /* A NaN or infinite metric is never the best (nor breaks the sort). */
    c->has_metric = json_is_number(v) && isfinite(json_number_value(v));
    c->metric = c->has_metric ? json_number_value(v) : 0.0;
}

/* Commit order, newest first: the commit sequence (checkpoints of earlier
 * versions, without one, before every other), then the steps trained, then
 * the name. Never the clock: one that steps back would make an older
 * checkpoint the latest. */
static int newest_first(const void *a, const void *b) {
    const listed *x = a, *y = b;
    if (x->seq != y->seq) return x->seq > y->seq ? -1 : 1;
    if (x->steps != y->steps) return x->steps > y->steps ? -1 : 1;
    return -strcmp(x->name, y->name);
}

void cti_ckpt_sort_newest(cti_ckpt_listed *l, size_t n) {
    if (n > 0) qsort(l, n, sizeof *l, newest_first);
}

static int next_sequence(const char *checkpoint_dir, int64_t *seq) {
    listing all;
    int rc = list_checkpoints(checkpoint_dir, NULL, &all, NULL);
    if (rc != CT_OK) return rc;
    int64_t top = 0;
    for (size_t i = 0; i < all.n; i++)
        if (all.at[i].seq > top) top = all.at[i].seq;
    free_listing(&all);
    *seq = top + 1;
    return CT_OK;
}

int cti_ckpt_count(const char *checkpoint_dir, size_t *n) {
    listing all, damaged;
    int rc = list_checkpoints(checkpoint_dir, NULL, &all, &damaged);
    *n = all.n + damaged.n;
    free_listing(&all);
    free_listing(&damaged);
    return rc;
}

int cti_ckpt_remove_all(const char *checkpoint_dir) {
    listing all, damaged;
    int rc = list_checkpoints(checkpoint_dir, NULL, &all, &damaged);
    for (size_t i = 0; rc == CT_OK && i < all.n; i++) delete_checkpoint(checkpoint_dir, all.at[i].name);
    for (size_t i = 0; rc == CT_OK && i < damaged.n; i++) delete_checkpoint(checkpoint_dir, damaged.at[i].name);
    free_listing(&all);
    free_listing(&damaged);
    return rc;
}

/* ---- the latest ----------------------------------------------------------------- */

/* Appends to buf (of len bytes, NUL-terminated), cutting what does not fit. */
static void append(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t len, const char *fmt, ...) {
    size_t at = strlen(buf);
    if (at + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + at, len - at, fmt, ap);
    va_end(ap);
}

int cti_ckpt_find_latest(const char *checkpoint_dir, char *buf, size_t len, cti_ckpt_scan *scan) {
    cti_ckpt_scan ignored;
    if (!scan) scan = &ignored;
    memset(scan, 0, sizeof *scan);
    if (!checkpoint_dir || !buf) return ct_set_error(CT_EINVAL, "ct_ckpt_latest: argument is NULL");
    if (len) buf[0] = '\0';
    listing all, damaged;
    int rc = list_checkpoints(checkpoint_dir, NULL, &all, &damaged);
    if (rc != CT_OK) return rc;
    scan->intact = all.n;
    scan->damaged = damaged.n;
    cti_ckpt_sort_newest(all.at, all.n);
    /* A damaged checkpoint may be the latest unless its name says it trained
     * less than the latest intact one: the furthest-looking of those. */
    const listed *latest = all.n ? &all.at[0] : NULL, *blocking = NULL;
    for (size_t i = 0; i < damaged.n; i++) {
        const listed *d = &damaged.at[i];
        if (latest && d->steps < latest->steps) {
            append(scan->skipped, sizeof scan->skipped, "%s%s/%s (%s)", scan->skipped[0] ? "; " : "", checkpoint_dir,
                   d->name, d->damaged);
            continue;
        }
        if (!blocking || d->steps > blocking->steps || (d->steps == blocking->steps && strcmp(d->name, blocking->name) > 0))
            blocking = d;
    }
    if (all.n == 0 && damaged.n == 0) {
        scan->empty = true;
        rc = ct_set_error(CT_ECHECKPOINT, "no checkpoint in %s", checkpoint_dir);
    } else if (blocking && latest) {
        char steps[32] = "an unknown number of";
        if (blocking->steps != INT64_MAX) snprintf(steps, sizeof steps, "%lld", (long long)blocking->steps);
        rc = ct_set_error(CT_ECHECKPOINT,
                          "checkpoint %s/%s is damaged (%s) and may be the latest (its name says %s batches; the "
                          "latest intact checkpoint, %s/%s, has %lld): --resume latest does not fall back to an "
                          "older checkpoint by itself. Move the damaged one out of %s and resume again, or resume "
                          "the intact one with --resume %s/%s",
                          checkpoint_dir, blocking->name, blocking->damaged, steps, checkpoint_dir, latest->name,
                          (long long)latest->steps, checkpoint_dir, checkpoint_dir, latest->name);
    } else if (blocking) {
        rc = ct_set_error(CT_ECHECKPOINT,
                          "checkpoint %s/%s is damaged (%s), and %s holds no intact checkpoint%s: --resume latest "
                          "does not start from the beginning by itself. Move the damaged checkpoints out of %s, or "
                          "start the run over with --overwrite instead of --resume",
                          checkpoint_dir, blocking->name, blocking->damaged, checkpoint_dir,
                          damaged.n > 1 ? " (the other ckpt-* directories are damaged too)" : "", checkpoint_dir);
    } else if (snprintf(buf, len, "%s/%s", checkpoint_dir, latest->name) >= (int)len) {
        rc = ct_set_error(CT_EINVAL, "ct_ckpt_latest: buffer of %zu bytes is too small", len);
        buf[0] = '\0';
    }
    free_listing(&all);
    free_listing(&damaged);
    return rc;
}

int ct_ckpt_latest(const char *checkpoint_dir, char *buf, size_t len) {
    if (cti_ckpt_is_remote(checkpoint_dir)) return cti_ckpt_remote_pick(checkpoint_dir, NULL, true, buf, len, NULL);
    return cti_ckpt_find_latest(checkpoint_dir, buf, len, NULL);
}

int cti_ckpt_verify_latest(const char *checkpoint_dir, const char *path) {
    if (ct_ckpt_verify(path) == CT_OK) return CT_OK;
    char why[2048];
    snprintf(why, sizeof why, "%s", ct_last_error());
    /* Name the latest older checkpoint that verifies: each is read in turn,
     * newest first (only on this failure path). */
    listing all;
    if (list_checkpoints(checkpoint_dir, NULL, &all, NULL) != CT_OK) return ct_set_error(CT_ECHECKPOINT, "%s", why);
    cti_ckpt_sort_newest(all.at, all.n);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char alternative[4096] = "";
    bool past = false;
    for (size_t i = 0; i < all.n && !alternative[0]; i++) {
        if (!past) {
            past = strcmp(all.at[i].name, base) == 0;
            continue;
        }
        char candidate[4096];
        if (snprintf(candidate, sizeof candidate, "%s/%s", checkpoint_dir, all.at[i].name) >= (int)sizeof candidate)
            continue;
        if (ct_ckpt_verify(candidate) == CT_OK) snprintf(alternative, sizeof alternative, "%s", candidate);
    }
    free_listing(&all);
    if (alternative[0])
        return ct_set_error(CT_ECHECKPOINT,
                            "%s: --resume latest does not fall back to an older checkpoint by itself. Move the damaged "
                            "one out of %s and resume again, or resume the latest intact one with --resume %s",
                            why, checkpoint_dir, alternative);
    return ct_set_error(CT_ECHECKPOINT,
                        "%s, and no older checkpoint in %s is intact: --resume latest does not start from the "
                        "beginning by itself. Move the damaged checkpoints out of %s, or start the run over with "
                        "--overwrite instead of --resume",
                        why, checkpoint_dir, checkpoint_dir);
}

/* ---- the best, and retention ----------------------------------------------------- */

static bool g_smaller; /* qsort has no context argument */

static int best_first(const void *a, const void *b) {
    const listed *x = a, *y = b;
    if (x->has_metric != y->has_metric) return x->has_metric ? -1 : 1;
    if (x->metric != y->metric) return (x->metric < y->metric) == g_smaller ? -1 : 1;
    return newest_first(a, b);
}

void cti_ckpt_sort_best(cti_ckpt_listed *l, size_t n, bool smaller_is_better) {
    g_smaller = smaller_is_better;
    if (n > 0) qsort(l, n, sizeof *l, best_first);
}

int ct_ckpt_best(const char *checkpoint_dir, const char *metric, bool smaller_is_better, char *buf, size_t len,
                 double *value) {
    if (!checkpoint_dir || !metric || !buf) return ct_set_error(CT_EINVAL, "ct_ckpt_best: argument is NULL");
    if (cti_ckpt_is_remote(checkpoint_dir))
        return cti_ckpt_remote_pick(checkpoint_dir, metric, smaller_is_better, buf, len, value);
    listing all;
    int rc = list_checkpoints(checkpoint_dir, metric, &all, NULL);
    if (rc != CT_OK) return rc;
    cti_ckpt_sort_best(all.at, all.n, smaller_is_better);
    if (all.n == 0 || !all.at[0].has_metric)
        rc = ct_set_error(CT_ECHECKPOINT, "no checkpoint in %s has a finite validation metric '%s'", checkpoint_dir,
                          metric);
    else if (snprintf(buf, len, "%s/%s", checkpoint_dir, all.at[0].name) >= (int)len)
        rc = ct_set_error(CT_EINVAL, "ct_ckpt_best: buffer of %zu bytes is too small", len);
    else if (value)
        *value = all.at[0].metric;
    free_listing(&all);
    return rc;
}

bool *cti_ckpt_retain(cti_ckpt_listed *all, size_t n, int keep_latest, int keep_best, bool smaller_is_better,
                     const char *protect) {
    bool *keep = calloc(n ? n : 1, sizeof *keep);
    listed *by_best = malloc((n ? n : 1) * sizeof *by_best);
    if (!keep || !by_best) {
        free(keep);
        free(by_best);
        ct_set_error(CT_ENOMEM, "out of memory choosing the checkpoints to keep");
        return NULL;
    }
    cti_ckpt_sort_newest(all, n);
    for (size_t i = 0; i < n && (int)i < keep_latest; i++) keep[i] = true;
    for (size_t i = 0; i < n; i++) keep[i] = keep[i] || (protect && strcmp(all[i].name, protect) == 0);
    /* Mark the best ones by name: sort a copy. */
    if (n > 0) memcpy(by_best, all, n * sizeof *all);
    cti_ckpt_sort_best(by_best, n, smaller_is_better);
    int want = keep_best > 1 ? keep_best : 1; /* the best one is never deleted */
    for (size_t j = 0; j < n && (int)j < want && by_best[j].has_metric; j++)
        for (size_t i = 0; i < n; i++)
            if (strcmp(all[i].name, by_best[j].name) == 0) keep[i] = true;
    free(by_best);
    return keep;
}

int cti_ckpt_prune(const char *checkpoint_dir, int keep_latest, int keep_best, const char *metric,
                  bool smaller_is_better, const char *protect) {
    listing l;
    int rc = list_checkpoints(checkpoint_dir, metric, &l, NULL); /* damaged ones are never deleted */
    if (rc != CT_OK || l.n == 0) {
        free_listing(&l);
        return rc;
    }
    bool *keep = cti_ckpt_retain(l.at, l.n, keep_latest, keep_best, smaller_is_better, protect);
    for (size_t i = 0; keep && i < l.n; i++)
        if (!keep[i]) delete_checkpoint(checkpoint_dir, l.at[i].name);
    free(keep);
    free_listing(&l);
    return keep ? CT_OK : ct_last_code();
}
