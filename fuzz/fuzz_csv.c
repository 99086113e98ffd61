/* libFuzzer target: ct_csv_parse on arbitrary text. The first byte picks the
 * options, so one corpus covers them all:
 *   bit 0     header line
 *   bit 1     '\t' instead of ','
 *   bits 2-3  label column: none, 0, 1, 2
 *   bits 4-6  features dtype: float32 float64 int64 int32 uint8 bool float16 bfloat16
 *   bit 7     delimiter 0 with the name "fuzz.tsv" (chosen by extension)
 * A dataset that parses is read back through get and get_batch. Built and
 * run by fuzz/run.sh. */
#include <stdint.h>
#include <stdlib.h>

#include <ctrial/ctrial.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ct_dtype dtypes[8] = {CT_F32, CT_F64, CT_I64, CT_I32,
                                   CT_U8,  CT_BOOL, CT_F16, CT_BF16};

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
    ct_dataset_free(d);
    return 0;
}
