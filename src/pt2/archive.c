/* src/pt2/archive.c — a .pt2 archive's directory, its programs' JSON and
 * its weights and constants (pt2.h has the layout).
 *
 * The archive is checked before anything is parsed: a zip (pth/zip_read.c)
 * whose archive_format is "pt2" and archive_version one this reader knows,
 * little-endian. A weight is a view of a storage: each file
 * data/weights/weight_<i> is read once, CRC-checked, into a storage made
 * by the caller's table, and every state-dict name the config maps to it
 * becomes a view with the config's dtype, sizes, strides and offset,
 * checked to lie inside the file's bytes. Names that are the same view of
 * the same file (a tied embedding and output layer) are reported as one
 * tensor and its aliases, so the module registers the tensor once, as
 * Python's named_parameters() lists it once.
 */
#define _POSIX_C_SOURCE 200809L /* fstat, close */
#include "pt2/pt2.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"

enum { MAX_JSON = 1 << 30, MAX_SMALL = 64 };

static char *str_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* A whole entry, CRC checked, NUL-terminated: NEW buffer or NULL + error. */
static char *read_record(const cti_pt2_archive *a, const char *record, size_t max, size_t *len) {
    const cti_pth_entry *e = cti_pth_zip_find(&a->zip, record);
    if (!e) {
        ct_set_error(CT_EFORMAT, "%s: no entry %s/%s", a->path, a->zip.prefix, record);
        return NULL;
    }
    if (e->size > max) {
        ct_set_error(CT_EFORMAT, "%s: entry %s is %" PRIu64 " bytes, more than the %zu it can be", a->path, e->name,
                     e->size, max);
        return NULL;
    }
    char *buf = malloc((size_t)e->size + 1);
    if (!buf) {
        ct_set_error(CT_ENOMEM, "%s: out of host memory for entry %s", a->path, e->name);
        return NULL;
    }
    if (cti_pth_zip_read(&a->src, e, buf)) {
        free(buf);
        return NULL;
    }
    buf[e->size] = '\0';
    if (len) *len = (size_t)e->size;
    return buf;
}

/* A small text entry equal to `want` (trailing newline ignored). */
static int check_text(const cti_pt2_archive *a, const char *record, const char *want, const char *what) {
    size_t n = 0;
    char *text = read_record(a, record, MAX_SMALL, &n);
    if (!text) return ct_last_code();
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r')) text[--n] = '\0';
    int rc = strcmp(text, want) == 0 ? 0
             : ct_set_error(CT_ENOTSUP, "%s: %s is '%.32s', but this reader knows '%s' (torch 2.11's %s): export the "
                            "model again with torch 2.11",
                            a->path, record, text, want, what);
    free(text);
    return rc;
}

static int by_str(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

static int list_models(cti_pt2_archive *a) {
    const char *dir = "models/";
    size_t plen = strlen(a->zip.prefix), dlen = strlen(dir), ext = strlen(".json");
    a->models = calloc(a->zip.n + 1, sizeof *a->models);
    if (!a->models) return ct_set_error(CT_ENOMEM, "%s: out of host memory", a->path);
    for (size_t i = 0; i < a->zip.n; i++) {
        const char *name = a->zip.entries[i].name;
        if (strncmp(name, a->zip.prefix, plen) || name[plen] != '/' || strncmp(name + plen + 1, dir, dlen)) continue;
        const char *m = name + plen + 1 + dlen;
        size_t mlen = strlen(m);
        if (mlen <= ext || strcmp(m + mlen - ext, ".json") || memchr(m, '/', mlen)) continue;
        if (!(a->models[a->nmodels] = malloc(mlen - ext + 1)))
            return ct_set_error(CT_ENOMEM, "%s: out of host memory", a->path);
        memcpy(a->models[a->nmodels], m, mlen - ext);
        a->models[a->nmodels++][mlen - ext] = '\0';
    }
    qsort(a->models, a->nmodels, sizeof *a->models, by_str);
    if (!a->nmodels)
        return ct_set_error(CT_EFORMAT, "%s: the archive holds no program (no %s/models/<name>.json): it was saved "
                            "without an ExportedProgram (AOTInductor packages hold compiled code, not a graph)",
                            a->path, a->zip.prefix);
    return 0;
}

static int open_src(cti_pt2_archive *a) {
    int rc = cti_pth_zip_open(&a->src, &a->zip);
    if (rc) return rc;
    if (!cti_pth_zip_find(&a->zip, "archive_format")) {
        if (cti_pth_zip_find(&a->zip, "data.pkl"))
            return ct_set_error(CT_EFORMAT, "%s: a torch.save file (data.pkl), not torch.export.save's .pt2 "
                                "archive: save the program with torch.export.save (tools/export_model.py)", a->path);
        if (cti_pth_zip_find(&a->zip, "serialized_exported_program.json"))
            return ct_set_error(CT_ENOTSUP, "%s: the .pt2 layout of torch before 2.6: export the model again with "
                                "torch 2.11", a->path);
        return ct_set_error(CT_EFORMAT, "%s: a zip archive without %s/archive_format: not a .pt2 archive", a->path,
                            a->zip.prefix);
    }
    if ((rc = check_text(a, "archive_format", "pt2", "archive format"))) return rc;
    if ((rc = check_text(a, "archive_version", "0", "archive version"))) return rc;
    if (cti_pth_zip_find(&a->zip, "byteorder") && (rc = check_text(a, "byteorder", "little", "byte order")))
        return rc;
    return list_models(a);
}

int cti_pt2_open(const char *path, cti_pt2_archive *a) {
    memset(a, 0, sizeof *a);
    a->src.fd = -1;
    if (!(a->path = str_dup(path))) return ct_set_error(CT_ENOMEM, "out of host memory");
    int fd = cti_open_regular(path, "exported program");
    if (fd < 0) {
        cti_pt2_close(a);
        return ct_last_code();
    }
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        cti_pt2_close(a);
        return ct_set_error(CT_EIO, "%s: %s", path, strerror(e));
    }
    a->src = (cti_pth_src){a->path, fd, NULL, (uint64_t)st.st_size};
    int rc = open_src(a);
    if (rc) cti_pt2_close(a);
    return rc;
}

int cti_pt2_open_buffer(const void *data, size_t size, const char *name, cti_pt2_archive *a) {
    memset(a, 0, sizeof *a);
    if (!(a->path = str_dup(name))) return ct_set_error(CT_ENOMEM, "out of host memory");
    a->src = (cti_pth_src){a->path, -1, data, size};
    int rc = open_src(a);
    if (rc) cti_pt2_close(a);
    return rc;
}

void cti_pt2_close(cti_pt2_archive *a) {
    if (a->src.fd >= 0) close(a->src.fd);
    cti_pth_zip_free(&a->zip);
    for (size_t i = 0; a->models && i < a->nmodels; i++) free(a->models[i]);
    free(a->models);
    free(a->path);
    memset(a, 0, sizeof *a);
    a->src.fd = -1;
}

bool cti_pt2_has_model(const cti_pt2_archive *a, const char *model) {
    for (size_t i = 0; i < a->nmodels; i++)
        if (!strcmp(a->models[i], model)) return true;
    return false;
}

cti_pt2_program *cti_pt2_read_program(const cti_pt2_archive *a, const char *model) {
    char record[512], what[1024];
    snprintf(record, sizeof record, "models/%s.json", model);
    size_t n = 0;
    char *json = read_record(a, record, MAX_JSON, &n);
    if (!json) return NULL;
    snprintf(what, sizeof what, "%s: %s", a->path, record);
    cti_pt2_program *p = cti_pt2_program_parse(json, n, model, what);
    free(json);
    return p;
}

/* ---- weights and constants ------------------------------------------------------------ */

typedef struct {
    char *path_name;
    int64_t offset;
    int ndim;
    int64_t size[CT_PTH_MAX_DIMS], stride[CT_PTH_MAX_DIMS];
    ct_dtype dtype;
} view_key;

typedef struct {
    const char *path_name;
    void *storage;          /* the caller's, one reference held here */
    unsigned char *data;
    uint64_t nbytes;
} file_storage;

typedef struct {
    const cti_pt2_archive *a;
    const cti_pth_tensors *tensors;
    const char *dir, *config_name;
    file_storage *files;
    size_t nfiles;
    view_key *keys;
} tensor_reader;

static int config_bad(tensor_reader *t, const char *name, const char *msg) {
    return ct_set_error(CT_EFORMAT, "%s: %s: '%s': %s", t->a->path, t->config_name, name, msg);
}

/* The storage of data/<dir>/<path_name>, read on first use. */
static file_storage *storage_of(tensor_reader *t, const char *name, const char *path_name) {
    for (size_t i = 0; i < t->nfiles; i++)
        if (!strcmp(t->files[i].path_name, path_name)) return &t->files[i];
    char record[512];
    if (!path_name[0] || strchr(path_name, '/') || strlen(path_name) > 200) {
        config_bad(t, name, "its path_name is not a file name");
        return NULL;
    }
    snprintf(record, sizeof record, "%s%s", t->dir, path_name);
    const cti_pth_entry *e = cti_pth_zip_find(&t->a->zip, record);
    if (!e) {
        ct_set_error(CT_EFORMAT, "%s: %s names %s for '%s', which the archive lacks (truncated or damaged?)",
                     t->a->path, t->config_name, record, name);
        return NULL;
    }
    file_storage *f = &t->files[t->nfiles];
    f->path_name = path_name;
    f->nbytes = e->size;
    if (!(f->storage = t->tensors->storage_new(e->size, &f->data))) return NULL;
    t->nfiles++;
    if (e->size && cti_pth_zip_read(&t->a->src, e, f->data)) return NULL;
    return f;
}

/* A TensorMeta of static ints into key (dtype, sizes, strides, offset). */
static int read_meta(tensor_reader *t, const char *name, const json_t *m, view_key *k) {
    const json_t *sizes = json_object_get(m, "sizes"), *strides = json_object_get(m, "strides");
    const json_t *dtype = json_object_get(m, "dtype"), *off = json_object_get(m, "storage_offset");
    if (!json_is_integer(dtype) || !json_is_array(sizes) || !json_is_array(strides) ||
        json_array_size(sizes) != json_array_size(strides) || json_array_size(sizes) > CT_PTH_MAX_DIMS)
        return config_bad(t, name, "tensor_meta lacks dtype, or sizes and strides of one length");
    int64_t st = json_integer_value(dtype);
    if (!cti_pt2_dtype(st, &k->dtype)) {
        return ct_set_error(CT_ENOTSUP, "%s: '%s' is %s, a dtype ctrial's tensors do not have", t->a->path, name,
                            cti_pt2_scalar_type_name(st));
    }
    const json_t *layout = json_object_get(m, "layout");
    if (json_is_integer(layout) && json_integer_value(layout) != 7)
        return ct_set_error(CT_ENOTSUP, "%s: '%s' is not a strided tensor (layout %" PRId64 "): sparse and mkldnn "
                            "weights are not supported", t->a->path, name, (int64_t)json_integer_value(layout));
    k->ndim = (int)json_array_size(sizes);
    const json_t *o = json_object_get(off, "as_int");
    if (!json_is_integer(o)) return config_bad(t, name, "its storage_offset is not a number");
    k->offset = json_integer_value(o);
    for (int i = 0; i < k->ndim; i++) {
        const json_t *sz = json_object_get(json_array_get(sizes, (size_t)i), "as_int");
        const json_t *sd = json_object_get(json_array_get(strides, (size_t)i), "as_int");
        if (!json_is_integer(sz) || !json_is_integer(sd)) return config_bad(t, name, "a size or stride is not a number");
        k->size[i] = json_integer_value(sz);
        k->stride[i] = json_integer_value(sd);
        if (k->size[i] < 0 || k->stride[i] < 0) return config_bad(t, name, "a negative size or stride");
    }
    return 0;
}

/* Whether the view lies inside nbytes bytes. */
static bool view_fits(const view_key *k, uint64_t nbytes) {
    uint64_t elem = ct_dtype_size(k->dtype), last = 0;
    if (k->offset < 0) return false;
    for (int i = 0; i < k->ndim; i++) {
        if (k->size[i] == 0) return true; /* empty: no byte is read */
        uint64_t span = (uint64_t)(k->size[i] - 1);
        if (k->stride[i] && span > (UINT64_MAX / 2) / (uint64_t)k->stride[i]) return false;
        last += span * (uint64_t)k->stride[i];
        if (last > UINT64_MAX / 4) return false;
    }
    uint64_t end = ((uint64_t)k->offset + last + 1);
    return end <= nbytes / elem;
}

static bool same_view(const view_key *x, const view_key *y) {
    if (strcmp(x->path_name, y->path_name) || x->dtype != y->dtype || x->offset != y->offset || x->ndim != y->ndim)
        return false;
    for (int i = 0; i < x->ndim; i++)
        if (x->size[i] != y->size[i] || x->stride[i] != y->stride[i]) return false;
    return true;
}

static int read_one(tensor_reader *t, size_t i, const char *name, const json_t *meta, cti_pt2_tensors *out) {
    cti_pt2_tensor *item = &out->items[i];
    view_key *k = &t->keys[i];
    item->alias_of = -1;
    if (!(item->name = str_dup(name))) return ct_set_error(CT_ENOMEM, "out of host memory");
    if (!json_is_object(meta)) return config_bad(t, name, "its entry is not an object");
    item->is_param = json_is_true(json_object_get(meta, "is_param"));
    const char *path_name = json_string_value(json_object_get(meta, "path_name"));
    if (!path_name) return config_bad(t, name, "it has no path_name");
    if (!(k->path_name = str_dup(path_name))) return ct_set_error(CT_ENOMEM, "out of host memory");
    if (json_is_true(json_object_get(meta, "use_pickle")))
        return ct_set_error(CT_ENOTSUP,
                            "%s: '%s' was saved with pickle (a tensor subclass or a custom object, %s), which ctrial "
                            "cannot read: export a module whose state is plain tensors",
                            t->a->path, name, path_name);
    const json_t *tm = json_object_get(meta, "tensor_meta");
    if (!json_is_object(tm)) return config_bad(t, name, "it has no tensor_meta");
    int rc = read_meta(t, name, tm, k);
    if (rc) return rc;
    for (size_t j = 0; j < i; j++)
        if (same_view(k, &t->keys[j])) {
            item->alias_of = (long)j; /* the first match is the tensor itself, never an alias */
            return 0;
        }
    file_storage *f = storage_of(t, name, path_name);
    if (!f) return ct_last_code();
    if (!view_fits(k, f->nbytes)) {
        char msg[160];
        snprintf(msg, sizeof msg, "its sizes, strides and offset reach past the %" PRIu64 " bytes of %s (truncated?)",
                 f->nbytes, path_name);
        return config_bad(t, name, msg);
    }
    item->leaf = t->tensors->view(f->storage, k->dtype, k->offset, k->ndim, k->size, k->stride, false);
    return item->leaf ? 0 : ct_last_code();
}

int cti_pt2_read_tensors(const cti_pt2_archive *a, const char *model, bool constants, const cti_pth_tensors *tensors,
                        cti_pt2_tensors *out) {
    memset(out, 0, sizeof *out);
    char record[512];
    snprintf(record, sizeof record, constants ? "data/constants/%s_constants_config.json"
                                              : "data/weights/%s_weights_config.json", model);
    tensor_reader t = {a, tensors, constants ? "data/constants/" : "data/weights/", record, NULL, 0, NULL};
    if (!cti_pth_zip_find(&a->zip, record)) {
        if (constants) return 0; /* a program without constants may lack the file */
        return ct_set_error(CT_EFORMAT, "%s: no %s: the archive holds no weights for program '%s' (truncated?)",
                            a->path, record, model);
    }
    size_t n = 0;
    char *text = read_record(a, record, MAX_JSON, &n);
    if (!text) return ct_last_code();
    json_error_t err;
    json_t *top = json_loadb(text, n, JSON_REJECT_DUPLICATES, &err);
    free(text);
    size_t count = 0;
    if (!top) return ct_set_error(CT_EFORMAT, "%s: %s: not valid JSON (%s)", a->path, record, err.text);
    const json_t *config = json_object_get(top, "config");
    int rc = 0;
    if (!json_is_object(config)) {
        rc = ct_set_error(CT_EFORMAT, "%s: %s has no 'config' object", a->path, record);
        goto out;
    }
    count = json_object_size(config);
    out->items = calloc(count + 1, sizeof *out->items);
    t.keys = calloc(count + 1, sizeof *t.keys);
    t.files = calloc(count + 1, sizeof *t.files);
    if (!out->items || !t.keys || !t.files) {
        rc = ct_set_error(CT_ENOMEM, "out of host memory");
        goto out;
    }
    const char *name;
    json_t *meta;
    json_object_foreach((json_t *)config, name, meta) {
        if ((rc = read_one(&t, out->n++, name, meta, out))) break;
    }
out:
    for (size_t i = 0; t.files && i < t.nfiles; i++) tensors->storage_release(t.files[i].storage);
    for (size_t i = 0; t.keys && i < count; i++) free(t.keys[i].path_name);
    free(t.files);
    free(t.keys);
    json_decref(top);
    if (rc) cti_pt2_tensors_free(out);
    return rc;
}

void cti_pt2_tensors_free(cti_pt2_tensors *t) {
    for (size_t i = 0; t->items && i < t->n; i++) {
        free(t->items[i].name);
        ct_value_free(t->items[i].leaf);
    }
    free(t->items);
    memset(t, 0, sizeof *t);
}
