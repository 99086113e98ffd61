/* libFuzzer target: ct_csv_parse on arbitrary text. The first byte picks the
 * options, so one corpus covers them all:
 *   bit 0     header line
 *   bit 1     '\t' instead of ','
 *   bits 2-3  label column: none, 0, 1, 2
 *   bits 4-6  features dtype: float32 float64 int64 int32 uint8 bool float16 bfloat16
 *   bit 7     delimiter 0 with the name "fuzz.tsv" (chosen by extension)
 * A dataset that parses is read back through get and get_batch, and float64
 * tables are printed and parsed again. Built and run by fuzz/run.sh. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ct_dtype dtypes[8] = {CT_F32, CT_F64, CT_I64, CT_I32,
                                   CT_U8,  CT_BOOL, CT_F16, CT_BF16};

/* float64 values printed with %.17g and parsed again come back bit for bit
 * (NaNs as NaNs): nothing is lost or invented between text and tensor. */
static void round_trip(ct_dataset *d, char delim) {
    int64_t n = ct_dataset_len(d), idx[64];
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    ct_value *b = ct_dataset_get_batch(d, idx, n);
    ct_tensor *t = ct_batch_tensor(b);
    int64_t cols = ct_size(t, 1);
    size_t count = (size_t)(n * cols);
    double *v = malloc((count ? count : 1) * sizeof *v), *w = malloc((count ? count : 1) * sizeof *w);
    char *text = malloc((size_t)n * (size_t)(cols ? cols : 1) * 32 + 1);
    if (!v || !w || !text || ct_read(t, v, count * sizeof *v) != 0) abort();
    size_t at = 0;
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < cols; c++)
            at += (size_t)sprintf(text + at, "%.17g%c", v[r * cols + c], c + 1 < cols ? delim : '\n');
    ct_csv_opts o = ct_csv_defaults();
    o.delimiter = delim;
    o.dtype = CT_F64;
    ct_dataset *again = cols ? ct_csv_parse(text, at, "again.csv", &o) : NULL;
    if (cols) {
        ct_value *b2 = again ? ct_dataset_get_batch(again, idx, n) : NULL;
        if (!b2 || ct_read(ct_batch_tensor(b2), w, count * sizeof *w) != 0) abort();
        for (size_t i = 0; i < count; i++)
            if (isnan(v[i]) ? !isnan(w[i]) : memcmp(&v[i], &w[i], sizeof v[i]) != 0) abort();
        ct_value_free(b2);
    }
    ct_dataset_free(again);
    ct_value_free(b);
    free(v);
    free(w);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t sel = data[0];
    ct_csv_opts o = ct_csv_defaults();
    o.header = sel & 1;
    o.delimiter = (sel & 2) ? '\t' : ',';
    o.label_column = ((sel >> 2) & 3) - 1;
    o.dtype = dtypes[(sel >> 4) & 7];
    const char *name = "fuzz.csv";
    if (sel & 0x80) {
        o.delimiter = 0;
        name = "fuzz.tsv";
    }
    ct_dataset *d = ct_csv_parse((const char *)data + 1, size - 1, name, &o);
    if (!d) {
        int code = ct_last_code();
        if (code != CT_EFORMAT && code != CT_EINVAL) abort();
        ct_clear_error();
        return 0;
    }
    int64_t n = ct_dataset_len(d);
    if (n <= 0) abort(); /* an empty parse is an error, never an empty dataset */
    int64_t idx[16];
    int64_t m = n < 16 ? n : 16;
    for (int64_t i = 0; i < m; i++) idx[i] = (i * 7) % n;
    ct_value *b = ct_dataset_get_batch(d, idx, m);
    ct_value *s = ct_dataset_get(d, n - 1);
    if (!b || !s) abort();
    if (ct_batch_length(b) != m) abort();
    ct_value_free(b);
    ct_value_free(s);
    if (o.dtype == CT_F64 && o.label_column < 0 && n <= 64)
        round_trip(d, o.delimiter ? o.delimiter : '\t'); /* 0: the name says .tsv */
    ct_dataset_free(d);
    return 0;
}
