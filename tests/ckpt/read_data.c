/* tests/ckpt/read_data.c — reads one data file the way a trial does, for
 * test_ckpt_not_regular.py: `read_data idx|csv|records|pth PATH` prints "ok"
 * and exits 0, or prints ct_last_error() on stderr and exits 1. A FIFO or a
 * device must be refused, not read (a read of one blocks or never ends). */
#include <stdio.h>
#include <string.h>

#include <ctrial/ctrial.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: read_data idx|csv|records|pth PATH\n");
        return 2;
    }
    const char *kind = argv[1], *path = argv[2];
    int ok;
    if (strcmp(kind, "idx") == 0) {
        ct_tensor *t = ct_idx_read(path);
        ok = t != NULL;
        ct_tensor_free(t);
    } else if (strcmp(kind, "csv") == 0) {
        ct_csv_opts o = ct_csv_defaults();
        ct_dataset *d = ct_dataset_csv(path, &o);
        ok = d != NULL;
        ct_dataset_free(d);
    } else if (strcmp(kind, "records") == 0) {
        ct_records_opts o = {.num_fields = 1, .fields = {{.dtype = CT_U8, .ndim = 0}}};
        ct_dataset *d = ct_dataset_records(path, &o);
        ok = d != NULL;
        ct_dataset_free(d);
    } else if (strcmp(kind, "pth") == 0) {
        ct_value *v = NULL;
        ok = ct_pth_load(path, &v) == 0;
        ct_value_free(v);
    } else {
        fprintf(stderr, "read_data: unknown kind '%s'\n", kind);
        return 2;
    }
    if (!ok) {
        fprintf(stderr, "%s\n", ct_last_error());
        return 1;
    }
    printf("ok\n");
    return 0;
}
