/* Loads the datasets a JSON job file describes and dumps what ctrial reads,
 * for test_datasets_parity.py to compare with numpy:
 *
 *     datasets_dump JOBS.json OUTDIR
 *
 * Each job is {"name", "kind": "idx" | "mnist" | "records" | "csv" |
 * "csv_buffer", paths and options}. For an IDX file the tensor is dumped;
 * for a dataset, the batch of all its samples (ct_dataset_get_batch over
 * 0..len-1) and the structure of sample 0. Tensors go to OUTDIR/NAME.K.bin
 * (raw, C order) and OUTDIR/result.json says their dtype and shape.
 *
 * Here in C, each dataset's get_batch is checked against stacking its get()
 * results with ct_stack, for all indices in order and for a scrambled run
 * with repeats: "batch_matches_gets" in the result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <ctrial/ctrial.h>

static const char *outdir;

static int dtype_from_name(const char *name, ct_dtype *out) {
    for (int d = CT_F32; d <= CT_I16; d++) {
        if (strcmp(ct_dtype_name((ct_dtype)d), name) == 0) {
            *out = (ct_dtype)d;
            return 0;
        }
    }
    return ct_set_error(CT_EINVAL, "unknown dtype name '%s'", name);
}

/* Writes t to OUTDIR/NAME.K.bin; returns its description. */
static json_t *dump_tensor(const ct_tensor *t, const char *name, int k) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%d.bin", outdir, name, k);
    size_t nbytes = (size_t)ct_numel(t) * ct_dtype_size(ct_dtype_of(t));
    void *buf = malloc(nbytes ? nbytes : 1);
    FILE *f = fopen(path, "wb");
    if (!buf || !f || ct_read(t, buf, nbytes) != 0 || fwrite(buf, 1, nbytes, f) != nbytes) {
        fprintf(stderr, "cannot dump %s: %s\n", path, ct_last_error());
        exit(2);
    }
    fclose(f);
    free(buf);
    json_t *shape = json_array();
    for (int i = 0; i < ct_ndim(t); i++) json_array_append_new(shape, json_integer(ct_size(t, i)));
    return json_pack("{s:s, s:o, s:s}", "dtype", ct_dtype_name(ct_dtype_of(t)), "shape", shape,
                     "file", path);
}

/* The tensor leaves of a sample or batch: itself, or a tuple's items. */
static int leaves_of(const ct_value *v, ct_tensor **out, int max) {
    if (ct_value_kind_of(v) == CT_VALUE_TENSOR) {
        out[0] = ct_value_get_tensor(v);
        return 1;
    }
    int n = (int)ct_value_len(v);
    for (int i = 0; i < n && i < max; i++) out[i] = ct_value_get_tensor(ct_value_list_get(v, (size_t)i));
    return n;
}

/* What collating these samples gives, built by hand with ct_stack. */
static ct_value *stack_samples(ct_value **samples, int64_t n) {
    ct_tensor *first[8];
    int nleaves = leaves_of(samples[0], first, 8);
    ct_tensor **col = malloc((size_t)n * sizeof *col);
    ct_value *out = ct_value_kind_of(samples[0]) == CT_VALUE_TENSOR ? NULL : ct_value_tuple();
    for (int j = 0; j < nleaves; j++) {
        for (int64_t i = 0; i < n; i++) {
            ct_tensor *l[8];
            leaves_of(samples[i], l, 8);
            col[i] = l[j];
        }
        ct_tensor *s = ct_stack((int)n, col, 0);
        if (!out) {
            out = ct_value_tensor(s);
        } else {
            ct_value_list_append(out, ct_value_tensor(s));
        }
    }
    free(col);
    return out;
}

static bool batch_matches_gets(ct_dataset *d, const int64_t *idx, int64_t n) {
    ct_value *batch = ct_dataset_get_batch(d, idx, n);
    ct_value **samples = calloc((size_t)n, sizeof *samples);
    bool ok = batch != NULL;
    for (int64_t i = 0; i < n && ok; i++) ok = (samples[i] = ct_dataset_get(d, idx[i])) != NULL;
    ct_value *stacked = ok ? stack_samples(samples, n) : NULL;
    ok = ok && stacked && ct_value_equal(batch, stacked);
    if (!ok) fprintf(stderr, "get_batch differs from stacked gets (%s)\n", ct_last_error());
    for (int64_t i = 0; i < n; i++) ct_value_free(samples[i]);
    free(samples);
    ct_value_free(batch);
    ct_value_free(stacked);
    return ok;
}

static json_t *describe_dataset(ct_dataset *d, const char *name) {
    int64_t n = ct_dataset_len(d);
    json_t *r = json_pack("{s:I}", "len", (json_int_t)n);
    if (n == 0) return r;
    ct_value *s0 = ct_dataset_get(d, 0);
    ct_tensor *l[8];
    int nl = leaves_of(s0, l, 8);
    json_t *sample = json_array();
    for (int j = 0; j < nl; j++) {
        json_t *shape = json_array();
        for (int i = 0; i < ct_ndim(l[j]); i++) json_array_append_new(shape, json_integer(ct_size(l[j], i)));
        json_array_append_new(sample, json_pack("{s:s, s:o}", "dtype", ct_dtype_name(ct_dtype_of(l[j])),
                                                "shape", shape));
    }
    json_object_set_new(r, "sample_kind", json_string(ct_value_kind_name(ct_value_kind_of(s0))));
    json_object_set_new(r, "sample", sample);
    ct_value_free(s0);

    int64_t *all = malloc((size_t)n * sizeof *all);
    for (int64_t i = 0; i < n; i++) all[i] = i;
    int64_t m = n * 2 < 37 ? n * 2 : 37; /* scrambled, with repeats when n is small */
    int64_t *mixed = malloc((size_t)m * sizeof *mixed);
    for (int64_t k = 0; k < m; k++) mixed[k] = (k * 7919 + 11) % n;
    bool ok = batch_matches_gets(d, all, n) && batch_matches_gets(d, mixed, m);
    json_object_set_new(r, "batch_matches_gets", json_boolean(ok));

    ct_value *batch = ct_dataset_get_batch(d, all, n);
    json_t *leaves = json_array();
    nl = batch ? leaves_of(batch, l, 8) : 0;
    for (int j = 0; j < nl; j++) json_array_append_new(leaves, dump_tensor(l[j], name, j));
    json_object_set_new(r, "batch", leaves);
    ct_value_free(batch);
    free(all);
    free(mixed);
    return r;
}

static int records_opts(json_t *job, ct_records_opts *o) {
    memset(o, 0, sizeof *o);
    o->header_bytes = (size_t)json_integer_value(json_object_get(job, "header_bytes"));
    json_t *fields = json_object_get(job, "fields");
    o->num_fields = (int)json_array_size(fields);
    for (int f = 0; f < o->num_fields && f < CT_RECORD_MAX_FIELDS; f++) {
        json_t *fd = json_array_get(fields, (size_t)f);
        if (dtype_from_name(json_string_value(json_object_get(fd, "dtype")), &o->fields[f].dtype))
            return -1;
        json_t *shape = json_object_get(fd, "shape");
        o->fields[f].ndim = (int)json_array_size(shape);
        for (int i = 0; i < o->fields[f].ndim && i < 4; i++)
            o->fields[f].shape[i] = json_integer_value(json_array_get(shape, (size_t)i));
    }
    return 0;
}

static int csv_opts(json_t *job, ct_csv_opts *o) {
    *o = ct_csv_defaults();
    const char *delim = json_string_value(json_object_get(job, "delimiter"));
    if (delim) o->delimiter = delim[0];
    o->header = json_is_true(json_object_get(job, "header"));
    if (json_object_get(job, "label_column"))
        o->label_column = (int)json_integer_value(json_object_get(job, "label_column"));
    const char *dtype = json_string_value(json_object_get(job, "dtype"));
    return dtype ? dtype_from_name(dtype, &o->dtype) : 0;
}

static ct_dataset *csv_from_buffer(const char *path, const ct_csv_opts *o) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        ct_set_error(CT_EIO, "cannot open %s", path);
        return NULL;
    }
    char *text = malloc(1 << 20);
    size_t len = fread(text, 1, 1 << 20, f);
    fclose(f);
    ct_dataset *d = ct_csv_parse(text, len, path, o);
    free(text);
    return d;
}

static json_t *run_job(json_t *job) {
    const char *name = json_string_value(json_object_get(job, "name"));
    const char *kind = json_string_value(json_object_get(job, "kind"));
    const char *path = json_string_value(json_object_get(job, "path"));
    ct_dataset *d = NULL;
    if (!strcmp(kind, "idx")) {
        ct_tensor *t = ct_idx_read(path);
        if (t) {
            json_t *r = json_pack("{s:[o]}", "batch", dump_tensor(t, name, 0));
            ct_tensor_free(t);
            return r;
        }
    } else if (!strcmp(kind, "mnist")) {
        d = ct_dataset_mnist(json_string_value(json_object_get(job, "images")),
                             json_string_value(json_object_get(job, "labels")));
    } else if (!strcmp(kind, "records")) {
        ct_records_opts o;
        if (records_opts(job, &o) == 0) d = ct_dataset_records(path, &o);
    } else if (!strcmp(kind, "csv") || !strcmp(kind, "csv_buffer")) {
        ct_csv_opts o;
        if (csv_opts(job, &o) == 0)
            d = !strcmp(kind, "csv") ? ct_dataset_csv(path, &o) : csv_from_buffer(path, &o);
    } else {
        ct_set_error(CT_EINVAL, "unknown kind '%s'", kind);
    }
    if (!d) {
        json_t *r = json_pack("{s:s, s:s}", "error", ct_strerror(ct_last_code()), "message",
                              ct_last_error());
        ct_clear_error();
        return r;
    }
    json_t *r = describe_dataset(d, name);
    ct_dataset_free(d);
    return r;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s JOBS.json OUTDIR\n", argv[0]);
        return 2;
    }
    outdir = argv[2];
    json_error_t err;
    json_t *jobs = json_load_file(argv[1], 0, &err);
    if (!jobs) {
        fprintf(stderr, "%s: %s\n", argv[1], err.text);
        return 2;
    }
    json_t *results = json_object();
    size_t i;
    json_t *job;
    json_array_foreach(jobs, i, job) {
        json_object_set_new(results, json_string_value(json_object_get(job, "name")), run_job(job));
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/result.json", outdir);
    if (json_dump_file(results, path, JSON_INDENT(1)) != 0) return 2;
    json_decref(results);
    json_decref(jobs);
    return ct_tensor_live_count() == 0 ? 0 : 3;
}
