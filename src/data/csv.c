/* src/data/csv.c — CSV/TSV files of numbers as a dataset (data.h:
 * ct_dataset_csv, ct_csv_parse).
 *
 * The text is parsed by formats/csv.c, in pure C, into a table of int64 or
 * double values and int64 labels; this file makes it one features tensor
 * [N, C] of the asked dtype and, with a label column, one int64 labels
 * tensor [N]. Samples and batches are then rows of these (a TensorDataset
 * underneath, so batches are one index_select).
 */
#include "ctrial/data.h"

#include <stdlib.h>

#include "base/files.h"
#include "data/dataset.h"
#include "formats/csv.h"

ct_csv_opts ct_csv_defaults(void) {
    ct_csv_opts o = {.delimiter = 0, .header = false, .label_column = -1, .dtype = CT_F32,
                     .finite_only = false, .num_classes = 0};
    return o;
}

/* The table's values as tensors (copies: the table is freed after), then a
 * dataset over them. The float dtypes, float16 and bfloat16 included, are
 * narrowed from double by libtorch. */
static ct_dataset *make_dataset(const cti_csv_table *t, const char *name) {
    int64_t shape[2] = {t->rows, t->cols};
    ct_tensor *raw = t->values ? ct_from_data(t->values, 2, shape, t->values_dtype)
                               : ct_empty(2, shape, &(ct_topts){.dtype = t->values_dtype}); /* [N, 0] */
    ct_tensor *feat = raw && t->values_dtype != t->dtype ? ct_to_dtype(raw, t->dtype) : raw;
    if (feat != raw) ct_tensor_free(raw);
    if (!feat) return NULL;
    if (!t->labels) return cti_ds_tensors_take(1, &feat, true, name);
    ct_tensor *ts[2] = {feat, ct_from_data(t->labels, 1, shape, CT_I64)};
    if (!ts[1]) {
        ct_tensor_free(feat);
        return NULL;
    }
    return cti_ds_tensors_take(2, ts, true, name);
}

ct_dataset *ct_csv_parse(const char *text, size_t len, const char *name, const ct_csv_opts *o) {
    if (!name) name = "<csv>";
    if (!text && len > 0) {
        ct_set_error(CT_EINVAL, "ct_csv_parse: text is NULL");
        return NULL;
    }
    ct_csv_opts defaults = ct_csv_defaults();
    if (!o) o = &defaults;
    cti_csv_table t;
    if (cti_csv_table_parse(text, len, name, o, &t)) return NULL;
    ct_dataset *d = make_dataset(&t, name);
    cti_csv_table_free(&t);
    return d;
}

ct_dataset *ct_dataset_csv(const char *path, const ct_csv_opts *o) {
    if (!path) {
        ct_set_error(CT_EINVAL, "ct_dataset_csv: path is NULL");
        return NULL;
    }
    unsigned char *data;
    size_t size;
    if (cti_read_file(path, &data, &size)) return NULL;
    ct_dataset *d = ct_csv_parse((const char *)data, size, path, o);
    free(data);
    return d;
}
