/* folder_dump OUT ROOT MODE ALLOW_EMPTY [EXT...] — ct_dataset_image_folder
 * (mode 0..4, allow_empty 0/1, the extensions given or torchvision's
 * default) written to OUT for test_image_folder.py (dump_write.h): the
 * error when creation fails; else the number of classes and their names,
 * the number of samples, and per sample its path, then its image and
 * label, or the error of ct_dataset_get. It checks itself (exit 1) that
 * every sample is a tuple of two tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>
#include <ctrial/vision.h>

#include "dump_write.h"

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: folder_dump OUT ROOT MODE ALLOW_EMPTY [EXT...]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f) return 2;
    ct_image_folder_opts o = ct_image_folder_defaults();
    o.mode = (ct_image_mode)atoi(argv[3]);
    o.allow_empty = atoi(argv[4]) != 0;
    if (argc > 5) {
        o.extensions = (const char *const *)argv + 5;
        o.num_extensions = argc - 5;
    }
    ct_dataset *d = ct_dataset_image_folder(argv[2], &o);
    if (!d) {
        dump_error(f);
        return fclose(f) != 0;
    }
    int bad = 0;
    int64_t k = ct_image_folder_num_classes(d), n = ct_dataset_len(d);
    dump_int(f, k);
    for (int64_t c = 0; c < k; c++) dump_str(f, ct_image_folder_class(d, c));
    dump_int(f, n);
    for (int64_t i = 0; i < n; i++) {
        dump_str(f, ct_image_folder_path(d, i));
        ct_value *s = ct_dataset_get(d, i);
        if (!s) {
            dump_error(f);
            continue;
        }
        ct_tensor *img = ct_batch_at(s, 0), *label = ct_batch_at(s, 1);
        if (ct_value_kind_of(s) != CT_VALUE_TUPLE || ct_value_len(s) != 2 || !img || !label) {
            fprintf(stderr, "folder_dump: sample %lld is not (image, label)\n", (long long)i);
            bad = 1;
        } else {
            dump_tensor(f, img);
            dump_tensor(f, label);
        }
        ct_value_free(s);
    }
    ct_dataset_free(d);
    return fclose(f) != 0 || bad;
}
