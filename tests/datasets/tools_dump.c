/* Runs the dataset tools (random_split, Subset, ConcatDataset, mean/std) on
 * the datasets a JSON job file describes and dumps what they give, for
 * test_dataset_tools.py to compare with torch and numpy:
 *
 *     tools_dump JOBS.json OUTDIR
 *
 * The datasets are built here from formulas the Python side repeats
 * exactly (values k/8 are exact in float32) and from the bundled digits:
 *   "t"       TensorDataset(X [40, 2, 3] float32, y [40] int64)
 *   "u"       TensorDataset(X2 [25, 2, 3] float32, y2 [25] int64)
 *   "subset"  Subset(t, jobs.subset_indices)
 *   "concat"  ConcatDataset([t, subset, u])
 *   "digits"  ConcatDataset([MNIST(t10k), Subset(MNIST(train), jobs.digits_indices)])
 *   "big"     TensorDataset(B [300, 3, 64, 64] float32): mean_std reads it in 3 batches
 *             after sample 0 (about 16 MiB of float64 each)
 *   "train"   MNIST(train) of the digits
 * Each split job gives the indices of every split (the splits are taken of
 * TensorDataset(arange(n))); each batch job the leaves of get_batch and
 * whether they equal ct_collate of the get() samples; each stats job the
 * mean and std. Tensors go to OUTDIR/NAME.K.bin; OUTDIR/result.json says
 * what is where.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <ctrial/ctrial.h>

static const char *outdir;
static int dumped;

static void die(const char *what) {
    fprintf(stderr, "tools_dump: %s: %s\n", what, ct_last_error());
    exit(2);
}

static json_t *dump_tensor(const ct_tensor *t) {
    char path[1024];
    snprintf(path, sizeof path, "%s/t%d.bin", outdir, dumped++);
    ct_tensor *c = ct_contiguous(t);
    size_t nbytes = (size_t)ct_numel(c) * ct_dtype_size(ct_dtype_of(c));
    void *buf = malloc(nbytes ? nbytes : 1);
    FILE *f = fopen(path, "wb");
    if (!c || !buf || !f || ct_read(c, buf, nbytes) != 0 || fwrite(buf, 1, nbytes, f) != nbytes)
        die(path);
    fclose(f);
    free(buf);
    json_t *shape = json_array();
    for (int i = 0; i < ct_ndim(c); i++) json_array_append_new(shape, json_integer(ct_size(c, i)));
    ct_tensor_free(c);
    return json_pack("{s:s, s:o, s:s}", "dtype", ct_dtype_name(ct_dtype_of(t)), "shape", shape,
                     "file", path);
}

static json_t *dump_leaves(const ct_value *v) {
    json_t *out = json_array();
    if (ct_value_kind_of(v) == CT_VALUE_TENSOR) {
        json_array_append_new(out, dump_tensor(ct_value_get_tensor(v)));
        return out;
    }
    for (size_t i = 0; i < ct_value_len(v); i++)
        json_array_append_new(out, dump_tensor(ct_value_get_tensor(ct_value_list_get(v, i))));
    return out;
}

/* ((i*131 + a*17 + b*7 + c*3) % 251) / 8 + shift: exact in float32. */
static ct_tensor *formula(int64_t n, int64_t d1, int64_t d2, int64_t d3, double shift,
                          double channel_step) {
    int64_t numel = n * d1 * d2 * d3;
    float *x = malloc((size_t)numel * sizeof *x);
    for (int64_t i = 0, k = 0; i < n; i++)
        for (int64_t a = 0; a < d1; a++)
            for (int64_t b = 0; b < d2; b++)
                for (int64_t c = 0; c < d3; c++, k++)
                    x[k] = (float)((double)((i * 131 + a * 17 + b * 7 + c * 3) % 251) / 8.0 + shift +
                                   channel_step * (double)a);
    ct_tensor *t = d3 == 1 ? ct_from_data(x, 3, (int64_t[]){n, d1, d2}, CT_F32)
                           : ct_from_data(x, 4, (int64_t[]){n, d1, d2, d3}, CT_F32);
    free(x);
    return t;
}

static ct_tensor *labels(int64_t n, int64_t mod) {
    int64_t *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++) y[i] = (i * 5) % mod;
    ct_tensor *t = ct_from_data(y, 1, &n, CT_I64);
    free(y);
    return t;
}

static int64_t *int_array(json_t *a, int64_t *n) {
    *n = (int64_t)json_array_size(a);
    int64_t *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    for (int64_t i = 0; i < *n; i++) v[i] = json_integer_value(json_array_get(a, (size_t)i));
    return v;
}

static json_t *run_split(json_t *job) {
    int64_t n = json_integer_value(json_object_get(job, "n"));
    /* a decimal string: JSON integers stop at 2^63 in jansson */
    uint64_t seed = strtoull(json_string_value(json_object_get(job, "seed")), NULL, 10);
    ct_tensor *ar = ct_arange(0, (double)n, 1, &(ct_topts){.dtype = CT_I64});
    ct_dataset *d = ct_dataset_tensors(1, &ar);
    ct_tensor_free(ar);
    if (!d) die("arange dataset");
    json_t *fr = json_object_get(job, "fractions");
    json_t *ls = json_object_get(job, "lengths");
    int k = (int)json_array_size(fr ? fr : ls);
    ct_dataset **out = calloc((size_t)k, sizeof *out);
    int rc;
    if (fr) {
        double *f = malloc((size_t)k * sizeof *f);
        for (int i = 0; i < k; i++) f[i] = json_number_value(json_array_get(fr, (size_t)i));
        rc = ct_dataset_random_split_fractions(d, k, f, seed, out);
        free(f);
    } else {
        int64_t cnt;
        int64_t *l = int_array(ls, &cnt);
        rc = ct_dataset_random_split(d, k, l, seed, out);
        free(l);
    }
    json_t *res = json_object();
    if (rc != 0) {
        json_object_set_new(res, "error", json_string(ct_last_error()));
    } else {
        json_t *splits = json_array();
        for (int i = 0; i < k; i++) {
            json_t *idx = json_array();
            int64_t len = ct_dataset_len(out[i]);
            for (int64_t j = 0; j < len; j++) {
                ct_value *s = ct_dataset_get(out[i], j);
                int64_t v;
                if (!s || ct_item_int(ct_value_get_tensor(s), &v) != 0) die("split sample");
                json_array_append_new(idx, json_integer(v));
                ct_value_free(s);
            }
            json_array_append_new(splits, idx);
            ct_dataset_free(out[i]);
        }
        json_object_set_new(res, "splits", splits);
    }
    free(out);
    ct_dataset_free(d);
    return res;
}

static json_t *run_batch(ct_dataset *d, json_t *idx_json) {
    int64_t n;
    int64_t *idx = int_array(idx_json, &n);
    ct_value *batch = ct_dataset_get_batch(d, idx, n);
    if (!batch) die("get_batch");
    ct_value **samples = malloc((size_t)n * sizeof *samples);
    for (int64_t i = 0; i < n; i++)
        if (!(samples[i] = ct_dataset_get(d, idx[i]))) die("get");
    ct_value *collated = ct_collate(samples, n);
    if (!collated) die("collate");
    json_t *res = json_pack("{s:o, s:b}", "leaves", dump_leaves(batch), "batch_equals_collated_gets",
                            ct_value_equal(batch, collated));
    /* sample 0 on its own too */
    json_object_set_new(res, "sample0", dump_leaves(samples[0]));
    for (int64_t i = 0; i < n; i++) ct_value_free(samples[i]);
    free(samples);
    ct_value_free(collated);
    ct_value_free(batch);
    free(idx);
    return res;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tools_dump JOBS.json OUTDIR\n");
        return 2;
    }
    outdir = argv[2];
    json_error_t jerr;
    json_t *jobs = json_load_file(argv[1], 0, &jerr);
    if (!jobs) {
        fprintf(stderr, "tools_dump: %s: %s\n", argv[1], jerr.text);
        return 2;
    }
    const char *digits = json_string_value(json_object_get(jobs, "digits"));
    char ip[1024], lp[1024];

    ct_tensor *tt[2] = {formula(40, 2, 3, 1, -10, 0), labels(40, 7)};
    ct_tensor *ut[2] = {formula(25, 2, 3, 1, 3, 0), labels(25, 3)};
    ct_dataset *t = ct_dataset_tensors(2, tt), *u = ct_dataset_tensors(2, ut);
    for (int i = 0; i < 2; i++) {
        ct_tensor_free(tt[i]);
        ct_tensor_free(ut[i]);
    }
    int64_t ns;
    int64_t *si = int_array(json_object_get(jobs, "subset_indices"), &ns);
    ct_dataset *subset = ct_dataset_subset(t, si, ns);
    free(si);
    ct_dataset *concat = ct_dataset_concat(3, (ct_dataset *[]){t, subset, u});

    snprintf(ip, sizeof ip, "%s/t10k-images-idx3-ubyte.gz", digits);
    snprintf(lp, sizeof lp, "%s/t10k-labels-idx1-ubyte.gz", digits);
    ct_dataset *mtest = ct_dataset_mnist(ip, lp);
    snprintf(ip, sizeof ip, "%s/train-images-idx3-ubyte.gz", digits);
    snprintf(lp, sizeof lp, "%s/train-labels-idx1-ubyte.gz", digits);
    ct_dataset *mtrain = ct_dataset_mnist(ip, lp);
    int64_t *di = int_array(json_object_get(jobs, "digits_indices"), &ns);
    ct_dataset *msub = mtrain ? ct_dataset_subset(mtrain, di, ns) : NULL;
    free(di);
    ct_dataset *mcat = ct_dataset_concat(2, (ct_dataset *[]){mtest, msub});
    ct_tensor *bt = formula(300, 3, 64, 64, 0, 10);
    ct_dataset *big = ct_dataset_tensors(1, &bt);
    ct_tensor_free(bt);
    if (!t || !u || !subset || !concat || !mtest || !mtrain || !msub || !mcat || !big)
        die("building the datasets");
    /* The parents live on inside the subsets and concatenations. */
    ct_dataset_free(msub);
    ct_dataset_free(mtest);

    struct { const char *name; ct_dataset *d; } named[] = {
        {"t", t}, {"u", u}, {"subset", subset}, {"concat", concat}, {"digits", mcat},
        {"big", big}, {"train", mtrain}};
    json_t *result = json_object(), *lens = json_object();
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        json_object_set_new(lens, named[i].name, json_integer(ct_dataset_len(named[i].d)));
    json_object_set_new(result, "lengths", lens);

    json_t *splits = json_array(), *job;
    size_t i;
    json_array_foreach(json_object_get(jobs, "splits"), i, job) json_array_append_new(splits, run_split(job));
    json_object_set_new(result, "splits", splits);

    json_t *batches = json_array();
    json_array_foreach(json_object_get(jobs, "batches"), i, job) {
        const char *name = json_string_value(json_object_get(job, "dataset"));
        ct_dataset *d = NULL;
        for (size_t k = 0; k < sizeof named / sizeof named[0]; k++)
            if (strcmp(named[k].name, name) == 0) d = named[k].d;
        json_array_append_new(batches, run_batch(d, json_object_get(job, "indices")));
    }
    json_object_set_new(result, "batches", batches);

    json_t *stats = json_array();
    json_array_foreach(json_object_get(jobs, "stats"), i, job) {
        const char *name = json_string_value(json_object_get(job, "dataset"));
        ct_dataset *d = NULL;
        for (size_t k = 0; k < sizeof named / sizeof named[0]; k++)
            if (strcmp(named[k].name, name) == 0) d = named[k].d;
        ct_tensor *mean, *std;
        int rc = ct_dataset_mean_std(d, (int)json_integer_value(json_object_get(job, "field")),
                                     (int)json_integer_value(json_object_get(job, "channel_dim")),
                                     &mean, &std);
        if (rc != 0) die("mean_std");
        int64_t c = ct_numel(mean);
        double *m = malloc((size_t)c * sizeof *m), *s = malloc((size_t)c * sizeof *s);
        if (ct_read(mean, m, (size_t)c * 8) || ct_read(std, s, (size_t)c * 8)) die("read stats");
        json_t *jm = json_array(), *js = json_array();
        for (int64_t k = 0; k < c; k++) {
            json_array_append_new(jm, json_real(m[k]));
            json_array_append_new(js, json_real(s[k]));
        }
        json_array_append_new(stats, json_pack("{s:o, s:o, s:i}", "mean", jm, "std", js, "ndim",
                                               ct_ndim(mean)));
        free(m);
        free(s);
        ct_tensor_free(mean);
        ct_tensor_free(std);
    }
    json_object_set_new(result, "stats", stats);

    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) ct_dataset_free(named[k].d);
    char path[1024];
    snprintf(path, sizeof path, "%s/result.json", outdir);
    if (json_dump_file(result, path, JSON_INDENT(1)) != 0) die(path);
    json_decref(result);
    json_decref(jobs);
    return 0;
}
