/* src/ckpt/remote.c — checkpoints in object storage (remote.h). */
#define _POSIX_C_SOURCE 200809L
#include "ckpt/remote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/value_json.h"
#include "ctrial/error.h"

struct cti_ckpt_remote {
    cti_s3 *s3;
    char bucket[256];
    char prefix[1024]; /* without leading or trailing '/'; "" for the bucket's root */
};

bool cti_ckpt_is_remote(const char *path) { return path && strstr(path, "://") != NULL; }

/* The stores that are refused, with the way to reach them as S3. */
static const struct {
    const char *scheme, *what, *way;
} kOthers[] = {
    {"gs://", "Google Cloud Storage", "its S3-compatible XML API: s3 with endpoint_url https://storage.googleapis.com "
                                      "and an HMAC key as access_key and secret_key"},
    {"gcs://", "Google Cloud Storage", "its S3-compatible XML API: s3 with endpoint_url "
                                       "https://storage.googleapis.com and an HMAC key"},
    {"az://", "Azure Blob Storage", "an S3-compatible gateway in front of it (MinIO's, for one) as s3 with its "
                                    "endpoint_url"},
    {"abfs://", "Azure Blob Storage", "an S3-compatible gateway in front of it as s3 with its endpoint_url"},
    {"azure://", "Azure Blob Storage", "an S3-compatible gateway in front of it as s3 with its endpoint_url"},
};

cti_ckpt_remote *cti_ckpt_remote_open(const char *url, const cti_s3_opts *opts) {
    if (!url) {
        ct_set_error(CT_EINVAL, "checkpoint storage: the URL is NULL");
        return NULL;
    }
    for (size_t i = 0; i < sizeof kOthers / sizeof kOthers[0]; i++)
        if (strncmp(url, kOthers[i].scheme, strlen(kOthers[i].scheme)) == 0) {
            ct_set_error(CT_ENOTSUP, "checkpoint storage %s: %s is not supported; reach it through %s", url,
                         kOthers[i].what, kOthers[i].way);
            return NULL;
        }
    if (strncmp(url, "s3://", 5) != 0) {
        ct_set_error(CT_EINVAL, "checkpoint storage '%s': expected s3://BUCKET[/PREFIX]", url);
        return NULL;
    }
    cti_ckpt_remote *r = calloc(1, sizeof *r);
    if (!r) {
        ct_set_error(CT_ENOMEM, "out of memory");
        return NULL;
    }
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t bl = slash ? (size_t)(slash - b) : strlen(b);
    if (bl == 0 || bl >= sizeof r->bucket) {
        free(r);
        ct_set_error(CT_EINVAL, "checkpoint storage '%s': %s bucket name", url, bl ? "too long a" : "no");
        return NULL;
    }
    memcpy(r->bucket, b, bl);
    const char *p = slash ? slash : "";
    while (*p == '/') p++;
    if (snprintf(r->prefix, sizeof r->prefix, "%s", p) >= (int)sizeof r->prefix) {
        free(r);
        ct_set_error(CT_EINVAL, "checkpoint storage '%s': the prefix is too long", url);
        return NULL;
    }
    size_t pl = strlen(r->prefix);
    while (pl > 0 && r->prefix[pl - 1] == '/') r->prefix[--pl] = '\0';
    if (strstr(r->prefix, "..") && (strcmp(r->prefix, "..") == 0 || strncmp(r->prefix, "../", 3) == 0 ||
                                    strstr(r->prefix, "/../") || (pl >= 3 && strcmp(r->prefix + pl - 3, "/..") == 0))) {
        free(r);
        ct_set_error(CT_EINVAL, "checkpoint storage '%s': the prefix cannot contain '..' segments", url);
        return NULL;
    }
    cti_s3_opts o = opts ? *opts : cti_s3_default_opts();
    o.bucket = r->bucket;
    if (!(r->s3 = cti_s3_new(&o))) {
        free(r);
        return NULL;
    }
    return r;
}

void cti_ckpt_remote_free(cti_ckpt_remote *r) {
    if (!r) return;
    cti_s3_free(r->s3);
    free(r);
}

const char *cti_ckpt_remote_where(const cti_ckpt_remote *r, const char *name) {
    static _Thread_local char buf[1600];
    snprintf(buf, sizeof buf, "s3://%s%s%s%s%s", r->bucket, r->prefix[0] ? "/" : "", r->prefix, name ? "/" : "",
             name ? name : "");
    return buf;
}

/* The key of `file` in checkpoint `name` (file NULL: the name's own
 * prefix, ending in '/'). */
static void key_of(const cti_ckpt_remote *r, const char *name, const char *file, char *key, size_t len) {
    snprintf(key, len, "%s%s%s/%s", r->prefix, r->prefix[0] ? "/" : "", name, file ? file : "");
}

/* ---- uploading ------------------------------------------------------------------- */

int cti_ckpt_remote_upload(cti_ckpt_remote *r, const char *dir) {
    json_t *m = cti_ckpt_read_metadata(dir);
    if (!m) return ct_last_code();
    const char *slash = strrchr(dir, '/');
    const char *name = slash ? slash + 1 : dir;
    int rc = CT_OK;
    const char *file;
    json_t *entry;
    json_object_foreach(json_object_get(m, "files"), file, entry) {
        (void)entry;
        char key[1400], path[4400];
        key_of(r, name, file, key, sizeof key);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if ((rc = cti_s3_put_file(r->s3, key, path)) != CT_OK) break;
    }
    json_decref(m);
    if (rc == CT_OK) {
        /* last: the checkpoint counts in the store from here on */
        char key[1400], path[4400];
        key_of(r, name, CT_CKPT_METADATA_FILE, key, sizeof key);
        snprintf(path, sizeof path, "%s/%s", dir, CT_CKPT_METADATA_FILE);
        rc = cti_s3_put_file(r->s3, key, path);
    }
    if (rc != CT_OK) {
        int code = ct_last_code();
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        return ct_set_error(code, "uploading checkpoint %s to %s: %s", name, cti_ckpt_remote_where(r, NULL), msg);
    }
    return CT_OK;
}

/* ---- listing ------------------------------------------------------------------------ */

void cti_ckpt_remote_listing_free(cti_ckpt_listed *l, size_t n) {
    for (size_t i = 0; l && i < n; i++) free(l[i].damaged);
    free(l);
}

static cti_ckpt_listed *grow(cti_ckpt_listed **l, size_t *n, size_t *cap, const char *name) {
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        cti_ckpt_listed *g = realloc(*l, c * sizeof *g);
        if (!g) return NULL;
        *l = g;
        *cap = c;
    }
    cti_ckpt_listed *e = &(*l)[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    return e;
}

/* One checkpoint's objects objs[0 .. k) (keys prefix/name/file): its
 * metadata.json fetched and checked, every file it lists there with its
 * size. NEW json and *seq, or NULL with why. */
static json_t *check_one(cti_ckpt_remote *r, const cti_s3_object *objs, size_t k, size_t skip, int64_t *seq,
                         char *why, size_t why_len) {
    const cti_s3_object *meta = NULL;
    for (size_t i = 0; i < k; i++)
        if (strcmp(objs[i].key + skip, CT_CKPT_METADATA_FILE) == 0) meta = &objs[i];
    if (!meta) {
        snprintf(why, why_len, "no %s: an upload that did not finish", CT_CKPT_METADATA_FILE);
        return NULL;
    }
    char *text = NULL;
    size_t len = 0;
    if (cti_s3_get_bytes(r->s3, meta->key, CT_CKPT_METADATA_MAX, &text, &len) != CT_OK) {
        snprintf(why, why_len, "%s", ct_last_error());
        return NULL;
    }
    json_t *m = cti_ckpt_parse_metadata(text, len, seq, why, why_len);
    free(text);
    if (!m) return NULL;
    const char *file;
    json_t *entry;
    json_object_foreach(json_object_get(m, "files"), file, entry) {
        json_int_t want = json_integer_value(json_object_get(entry, "size"));
        const cti_s3_object *found = NULL;
        for (size_t i = 0; i < k && !found; i++)
            if (strcmp(objs[i].key + skip, file) == 0) found = &objs[i];
        if (!found || found->size != (int64_t)want) {
            if (!found) snprintf(why, why_len, "%s is missing", file);
            else snprintf(why, why_len, "%s has %lld bytes, %s says %lld", file, (long long)found->size,
                          CT_CKPT_METADATA_FILE, (long long)want);
            json_decref(m);
            return NULL;
        }
    }
    return m;
}

/* What an upload cut off leaves: objects under a ckpt-* name, no metadata.json. */
static const char kCutOff[] = "no " CT_CKPT_METADATA_FILE;

/* One row of ct_ckpt_store_list: {"name", "state", "metadata" or "why"};
 * m (borrowed) for a committed one. Returns a status. */
static int add_row(ct_value *rows, const char *name, const json_t *m, const char *why) {
    ct_value *row = ct_value_dict();
    ct_value *meta = m ? cti_value_from_json(m) : NULL;
    const char *state = m ? "committed" : strncmp(why, kCutOff, sizeof kCutOff - 1) == 0 ? "uncommitted" : "damaged";
    bool ok = row && (!m || meta) && ct_value_dict_set(row, "name", ct_value_str(name)) == CT_OK &&
              ct_value_dict_set(row, "state", ct_value_str(state)) == CT_OK;
    if (ok) ok = ct_value_dict_set(row, m ? "metadata" : "why", m ? meta : ct_value_str(why)) == CT_OK;
    else ct_value_free(meta);
    if (ok) return ct_value_list_append(rows, row);
    ct_value_free(row);
    return ct_set_error(CT_ENOMEM, "out of memory listing checkpoints");
}

/* cti_ckpt_remote_list, and when rows is not NULL one row per ckpt-* name
 * in key order, as ct_ckpt_store_list gives them. */
static int list_store(cti_ckpt_remote *r, const char *metric, cti_ckpt_listed **intact, size_t *n,
                      cti_ckpt_listed **damaged, size_t *nd, ct_value *rows) {
    *intact = NULL;
    *n = 0;
    if (damaged) *damaged = NULL;
    if (nd) *nd = 0;
    char base[1100]; /* "prefix/", or "" for the bucket's root */
    snprintf(base, sizeof base, "%s%s", r->prefix, r->prefix[0] ? "/" : "");
    size_t bl = strlen(base);
    cti_s3_object *objs = NULL;
    size_t count = 0, cap = 0, dcap = 0;
    int rc = cti_s3_list(r->s3, base, &objs, &count);
    for (size_t i = 0; rc == CT_OK && i < count;) {
        const char *rest = objs[i].key + bl, *sl = strchr(rest, '/');
        size_t nl = sl ? (size_t)(sl - rest) : 0;
        size_t j = i + 1;
        while (j < count && sl && strncmp(objs[j].key + bl, rest, nl + 1) == 0) j++;
        char name[256];
        if (!sl || nl >= sizeof name || strncmp(rest, CT_CKPT_PREFIX, strlen(CT_CKPT_PREFIX)) != 0) {
            i = j; /* not a checkpoint's object */
            continue;
        }
        memcpy(name, rest, nl);
        name[nl] = '\0';
        char why[1024] = "";
        int64_t seq = 0;
        json_t *m = check_one(r, objs + i, j - i, bl + nl + 1, &seq, why, sizeof why);
        if (m) {
            cti_ckpt_listed *e = grow(intact, n, &cap, name);
            if (e) cti_ckpt_listed_fill(e, m, seq, metric);
            else rc = ct_set_error(CT_ENOMEM, "out of memory");
        } else if (damaged) {
            cti_ckpt_listed *e = grow(damaged, nd, &dcap, name);
            if (!e || !(e->damaged = strdup(why))) rc = ct_set_error(CT_ENOMEM, "out of memory");
        }
        if (rc == CT_OK && rows) rc = add_row(rows, name, m, why);
        json_decref(m);
        i = j;
    }
    cti_s3_objects_free(objs, count);
    if (rc != CT_OK) {
        cti_ckpt_remote_listing_free(*intact, *n);
        *intact = NULL;
        *n = 0;
        if (damaged) {
            cti_ckpt_remote_listing_free(*damaged, *nd);
            *damaged = NULL;
            *nd = 0;
        }
    }
    return rc;
}

int cti_ckpt_remote_list(cti_ckpt_remote *r, const char *metric, cti_ckpt_listed **intact, size_t *n,
                         cti_ckpt_listed **damaged, size_t *nd) {
    return list_store(r, metric, intact, n, damaged, nd, NULL);
}

/* ---- reading a store without changing it: ctrial/ckpt.h's calls on s3:// URLs ---------- */

int cti_ckpt_remote_pick(const char *url, const char *metric, bool smaller_is_better, char *buf, size_t len,
                         double *value) {
    const char *fn = metric ? "ct_ckpt_best" : "ct_ckpt_latest";
    if (!buf || !len) return ct_set_error(CT_EINVAL, "%s: the buffer is NULL or empty", fn);
    buf[0] = '\0';
    cti_ckpt_remote *r = cti_ckpt_remote_open(url, NULL);
    if (!r) return ct_last_code();
    cti_ckpt_listed *l = NULL;
    size_t n = 0;
    int rc = cti_ckpt_remote_list(r, metric, &l, &n, NULL, NULL); /* committed ones only */
    if (rc == CT_OK) {
        if (metric) cti_ckpt_sort_best(l, n, smaller_is_better);
        else cti_ckpt_sort_newest(l, n);
        const char *where = cti_ckpt_remote_where(r, NULL);
        if (n == 0 && !metric)
            rc = ct_set_error(CT_ECHECKPOINT, "no checkpoint in %s", where);
        else if (n == 0 || (metric && !l[0].has_metric))
            rc = ct_set_error(CT_ECHECKPOINT, "no checkpoint in %s has a finite validation metric '%s'", where,
                              metric);
        else if (snprintf(buf, len, "%s", cti_ckpt_remote_where(r, l[0].name)) >= (int)len) {
            buf[0] = '\0';
            rc = ct_set_error(CT_EINVAL, "%s: buffer of %zu bytes is too small", fn, len);
        } else if (value && metric) {
            *value = l[0].metric;
        }
    }
    cti_ckpt_remote_listing_free(l, n);
    cti_ckpt_remote_free(r);
    return rc;
}

/* The row of rows named `name` (borrowed), NULL when none is. */
static const ct_value *row_named(const ct_value *rows, const char *name) {
    for (size_t i = 0; i < ct_value_len(rows); i++) {
        const ct_value *row = ct_value_list_get(rows, i);
        const char *n = ct_value_get_str(ct_value_dict_get(row, "name"));
        if (n && strcmp(n, name) == 0) return row;
    }
    return NULL;
}

ct_value *ct_ckpt_store_list(const char *url) {
    cti_ckpt_remote *r = cti_ckpt_remote_open(url, NULL);
    ct_value *rows = r ? ct_value_list() : NULL, *out = r ? ct_value_list() : NULL;
    cti_ckpt_listed *l = NULL, *d = NULL;
    size_t n = 0, nd = 0;
    int rc = !r ? ct_last_code() : rows && out ? list_store(r, NULL, &l, &n, &d, &nd, rows) : CT_ENOMEM;
    /* the committed ones in commit order, oldest first; then the others by name */
    cti_ckpt_sort_newest(l, n);
    for (size_t i = n; rc == CT_OK && i-- > 0;) {
        const ct_value *row = row_named(rows, l[i].name);
        if (row) rc = ct_value_list_append(out, ct_value_copy(row, false));
    }
    for (size_t i = 0; rc == CT_OK && i < ct_value_len(rows); i++) {
        const ct_value *row = ct_value_list_get(rows, i);
        if (strcmp(ct_value_get_str(ct_value_dict_get(row, "state")), "committed") != 0)
            rc = ct_value_list_append(out, ct_value_copy(row, false));
    }
    if (rc == CT_ENOMEM) ct_set_error(CT_ENOMEM, "out of memory listing %s", url);
    if (rc != CT_OK) {
        ct_value_free(out);
        out = NULL;
    }
    ct_value_free(rows);
    cti_ckpt_remote_listing_free(l, n);
    cti_ckpt_remote_listing_free(d, nd);
    cti_ckpt_remote_free(r);
    return out;
}

int ct_ckpt_fetch(const char *url, const char *parent, char *buf, size_t len) {
    if (!url || !parent || !buf || !len) return ct_set_error(CT_EINVAL, "ct_ckpt_fetch: an argument is NULL or empty");
    buf[0] = '\0';
    return cti_ckpt_fetch_url(url, NULL, parent, buf, len);
}

static int remove_one(cti_ckpt_remote *r, const char *name);

/* Whether a listed name is what an upload cut off left (no metadata.json). */
static bool cut_off(const cti_ckpt_listed *e) {
    return e->damaged && strncmp(e->damaged, kCutOff, sizeof kCutOff - 1) == 0;
}

int cti_ckpt_remote_latest(cti_ckpt_remote *r, char *name, size_t len, bool *none) {
    cti_ckpt_listed *l = NULL, *d = NULL;
    size_t n = 0, nd = 0;
    int rc = cti_ckpt_remote_list(r, NULL, &l, &n, &d, &nd);
    for (size_t i = 0; rc == CT_OK && i < nd; i++)
        if (cut_off(&d[i])) rc = remove_one(r, d[i].name);
    *none = n == 0;
    name[0] = '\0';
    cti_ckpt_sort_newest(l, n);
    if (rc == CT_OK && n > 0) snprintf(name, len, "%s", l[0].name);
    cti_ckpt_remote_listing_free(l, n);
    cti_ckpt_remote_listing_free(d, nd);
    return rc;
}

/* ---- downloading --------------------------------------------------------------------- */

int cti_ckpt_remote_fetch(cti_ckpt_remote *r, const char *name, const char *parent, char *path, size_t len) {
    if (snprintf(path, len, "%s/%s", parent, name) >= (int)len)
        return ct_set_error(CT_EINVAL, "checkpoint %s: the local path is too long", name);
    struct stat st;
    if (stat(path, &st) == 0 && ct_ckpt_verify(path) == CT_OK) return CT_OK; /* already here, whole */
    ct_clear_error();
    char tmp[4200], key[1400];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s-%ld", parent, name, (long)getpid());
    if (cti_make_dirs(tmp, "checkpoint directory") != CT_OK) return ct_last_code();
    key_of(r, name, CT_CKPT_METADATA_FILE, key, sizeof key);
    char *text = NULL;
    size_t tl = 0;
    int64_t seq = 0;
    char why[1024];
    int rc = cti_s3_get_bytes(r->s3, key, CT_CKPT_METADATA_MAX, &text, &tl);
    json_t *m = rc == CT_OK ? cti_ckpt_parse_metadata(text, tl, &seq, why, sizeof why) : NULL;
    if (rc == CT_ENOENT)
        rc = ct_set_error(CT_ECHECKPOINT, "checkpoint %s: no %s there (not a committed checkpoint)",
                          cti_ckpt_remote_where(r, name), CT_CKPT_METADATA_FILE);
    else if (rc == CT_OK && !m)
        rc = ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s", cti_ckpt_remote_where(r, name), why);
    const char *file;
    json_t *entry;
    if (m) json_object_foreach(json_object_get(m, "files"), file, entry) {
        (void)entry;
        char fpath[4400];
        if (strchr(file, '/')) {
            rc = ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s lists '%s'", cti_ckpt_remote_where(r, name),
                              CT_CKPT_METADATA_FILE, file);
            break;
        }
        key_of(r, name, file, key, sizeof key);
        snprintf(fpath, sizeof fpath, "%s/%s", tmp, file);
        if ((rc = cti_s3_get_file(r->s3, key, fpath, NULL)) != CT_OK) break;
    }
    json_decref(m);
    if (rc == CT_OK) {
        /* metadata.json last, as in a commit on disk */
        char mpath[4400];
        snprintf(mpath, sizeof mpath, "%s/%s", tmp, CT_CKPT_METADATA_FILE);
        FILE *f = fopen(mpath, "wb");
        if (!f || fwrite(text, 1, tl, f) != tl || fflush(f) != 0 || fsync(fileno(f)) != 0)
            rc = ct_set_error(CT_EIO, "checkpoint %s: cannot write %s: %s", name, mpath, strerror(errno));
        if (f) fclose(f);
    }
    free(text);
    if (rc == CT_OK && (rc = ct_ckpt_verify(tmp)) != CT_OK)
        rc = ct_set_error(CT_ECHECKPOINT, "checkpoint %s as downloaded: %s", cti_ckpt_remote_where(r, name),
                          ct_last_error());
    if (rc == CT_OK && stat(path, &st) == 0 && ct_ckpt_verify(path) != CT_OK) {
        /* a damaged copy of it on disk: out of sight first, as a deletion */
        char del[4300];
        snprintf(del, sizeof del, "%s/.del-%s-%ld", parent, name, (long)getpid());
        if (rename(path, del) == 0) cti_remove_tree(del);
    }
    if (rc == CT_OK) ct_clear_error(); /* the verification of a damaged copy failed, not the fetch */
    if (rc == CT_OK && rename(tmp, path) != 0) {
        /* another process sharing this disk put it there first */
        if ((errno == EEXIST || errno == ENOTEMPTY) && ct_ckpt_verify(path) == CT_OK) cti_remove_tree(tmp);
        else rc = ct_set_error(CT_EIO, "checkpoint %s: cannot rename %s to %s: %s", name, tmp, path, strerror(errno));
    }
    if (rc != CT_OK) cti_remove_tree(tmp);
    return rc;
}

int cti_ckpt_fetch_url(const char *url, const cti_s3_opts *opts, const char *parent, char *path, size_t len) {
    char where[2048];
    if (snprintf(where, sizeof where, "%s", url) >= (int)sizeof where)
        return ct_set_error(CT_EINVAL, "checkpoint %.64s...: the URL is too long", url);
    size_t n = strlen(where);
    while (n > 0 && where[n - 1] == '/') where[--n] = '\0';
    char *slash = strrchr(where, '/');
    if (!slash || slash < where + 5 || strncmp(slash + 1, CT_CKPT_PREFIX, strlen(CT_CKPT_PREFIX)) != 0)
        return ct_set_error(CT_EINVAL, "checkpoint %s: expected s3://BUCKET[/PREFIX]/ckpt-<steps>-<tag>", url);
    *slash = '\0';
    cti_ckpt_remote *r = cti_ckpt_remote_open(where, opts);
    if (!r) return ct_last_code();
    int rc = cti_make_dirs(parent, "checkpoint directory");
    if (rc == CT_OK) rc = cti_ckpt_remote_fetch(r, slash + 1, parent, path, len);
    cti_ckpt_remote_free(r);
    return rc;
}

/* ---- deleting ------------------------------------------------------------------------- */

/* Deletes checkpoint `name` from the store, metadata.json first (from then
 * on it is no checkpoint, whatever happens to the rest). */
static int remove_one(cti_ckpt_remote *r, const char *name) {
    char key[1400];
    key_of(r, name, CT_CKPT_METADATA_FILE, key, sizeof key);
    int rc = cti_s3_delete(r->s3, key);
    cti_s3_object *objs = NULL;
    size_t n = 0;
    key_of(r, name, NULL, key, sizeof key);
    if (rc == CT_OK) rc = cti_s3_list(r->s3, key, &objs, &n);
    for (size_t i = 0; rc == CT_OK && i < n; i++) rc = cti_s3_delete(r->s3, objs[i].key);
    cti_s3_objects_free(objs, n);
    return rc;
}

int cti_ckpt_remote_prune(cti_ckpt_remote *r, int keep_latest, int keep_best, const char *metric,
                          bool smaller_is_better, const char *protect) {
    cti_ckpt_listed *l = NULL;
    size_t n = 0;
    int rc = cti_ckpt_remote_list(r, metric, &l, &n, NULL, NULL); /* damaged ones are never deleted here */
    bool *keep = rc == CT_OK ? cti_ckpt_retain(l, n, keep_latest, keep_best, smaller_is_better, protect) : NULL;
    if (rc == CT_OK && !keep) rc = ct_last_code();
    for (size_t i = 0; rc == CT_OK && i < n; i++)
        if (!keep[i]) rc = remove_one(r, l[i].name);
    free(keep);
    cti_ckpt_remote_listing_free(l, n);
    return rc;
}

/* The store's checkpoint names, committed or not: counted into *count (may
 * be NULL), and deleted when `remove`. Returns a status. */
static int sweep(cti_ckpt_remote *r, bool remove, size_t *count) {
    cti_ckpt_listed *l = NULL, *d = NULL;
    size_t n = 0, nd = 0;
    int rc = cti_ckpt_remote_list(r, NULL, &l, &n, &d, &nd);
    for (size_t i = 0; remove && rc == CT_OK && i < n + nd; i++) rc = remove_one(r, i < n ? l[i].name : d[i - n].name);
    if (count) *count = n + nd;
    cti_ckpt_remote_listing_free(l, n);
    cti_ckpt_remote_listing_free(d, nd);
    return rc;
}

int cti_ckpt_remote_count(cti_ckpt_remote *r, size_t *count) { return sweep(r, false, count); }
int cti_ckpt_remote_remove_all(cti_ckpt_remote *r) { return sweep(r, true, NULL); }
