/* seg_dump OUT IMAGES MASKS SUFFIX SEED EPOCHS WORKERS [STEP... [-- STEP...]...] —
 * ct_dataset_segmentation_folder (mask suffix SUFFIX, "-": the default)
 * and ct_dataset_transform_pair over it, written to OUT for
 * test_segmentation.py (dump_write.h):
 *   - the error when creation fails; else the number of samples, and per
 *     sample its image and mask paths, then its image and mask, or the
 *     error of ct_dataset_get;
 *   - then for each pipeline (STEPs, pipelines separated by "--"): per
 *     pass e < EPOCHS and sample i, the transformed image and mask as a
 *     loader seeded SEED gives them in pass e (ct_dataset_get_drawn), or
 *     the error; and with WORKERS > 0, one pass of a loader (WORKERS
 *     workers, batches of 2, no shuffle, seed SEED) over the transformed
 *     dataset: the number of batches, then each batch's images and masks.
 *
 * Steps, composed in order (tf_dump's, with the mask's fill):
 * resize:H:W:MAX  center:H:W  rrc:H:W:S0:S1:R0:R1
 * crop:H:W:L:T:R:B:IFNEEDED:FILL:MODE[:MASKFILL] (MODE constant|edge|reflect|symmetric;
 * MASKFILL given: ct_tf_random_crop_ex)  flip:P  jitter:B:C:S:H  totensor
 * normalize:M0,M1,..:S0,S1,.. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>
#include <ctrial/vision.h>

#include "dump_write.h"

/* "0.5,0.25,..." into v (at most 8); returns the count. */
static int parse_list(const char *s, double *v) {
    int n = 0;
    while (s && *s && n < 8) {
        char *end;
        v[n++] = strtod(s, &end);
        s = *end == ',' ? end + 1 : NULL;
    }
    return n;
}

static ct_transform *parse_step(const char *step) {
    char name[32];
    double v[12] = {0};
    const char *rest = strchr(step, ':');
    size_t len = rest ? (size_t)(rest - step) : strlen(step);
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, step, len);
    name[len] = '\0';
    if (strcmp(name, "normalize") == 0) {
        double mean[8], std[8];
        const char *second = rest ? strchr(rest + 1, ':') : NULL;
        int c = parse_list(rest ? rest + 1 : NULL, mean);
        parse_list(second ? second + 1 : NULL, std);
        return ct_tf_normalize(c, mean, std);
    }
    int n = 0;
    for (const char *p = rest; p && n < 12; p = strchr(p + 1, ':')) {
        const char *a = p + 1;
        v[n++] = strncmp(a, "constant", 8) == 0    ? CT_PAD_CONSTANT
                 : strncmp(a, "edge", 4) == 0      ? CT_PAD_EDGE
                 : strncmp(a, "reflect", 7) == 0   ? CT_PAD_REFLECT
                 : strncmp(a, "symmetric", 9) == 0 ? CT_PAD_SYMMETRIC
                                                   : atof(a);
    }
    if (strcmp(name, "resize") == 0) return ct_tf_resize((int64_t)v[0], (int64_t)v[1], (int64_t)v[2]);
    if (strcmp(name, "center") == 0) return ct_tf_center_crop((int64_t)v[0], (int64_t)v[1]);
    if (strcmp(name, "rrc") == 0)
        return ct_tf_random_resized_crop((int64_t)v[0], (int64_t)v[1], v[2], v[3], v[4], v[5]);
    if (strcmp(name, "crop") == 0) {
        ct_crop_padding pad = {(int64_t)v[2], (int64_t)v[3], (int64_t)v[4], (int64_t)v[5], v[6] != 0, v[7],
                               (ct_pad_mode)(int)v[8]};
        return n > 9 ? ct_tf_random_crop_ex((int64_t)v[0], (int64_t)v[1], &pad, v[9])
                     : ct_tf_random_crop((int64_t)v[0], (int64_t)v[1], &pad);
    }
    if (strcmp(name, "flip") == 0) return ct_tf_random_horizontal_flip(v[0]);
    if (strcmp(name, "jitter") == 0) return ct_tf_color_jitter(v[0], v[1], v[2], v[3]);
    if (strcmp(name, "totensor") == 0) return ct_tf_to_tensor();
    fprintf(stderr, "seg_dump: unknown step %s\n", name);
    exit(2);
}

/* A sample's image and mask, or the error; 1 when it is not a pair. */
static int dump_pair(FILE *f, ct_value *s) {
    if (!s) {
        dump_error(f);
        return 0;
    }
    ct_tensor *img = ct_batch_at(s, 0), *mask = ct_batch_at(s, 1);
    int bad = ct_value_kind_of(s) != CT_VALUE_TUPLE || ct_value_len(s) != 2 || !img || !mask;
    if (!bad) {
        dump_tensor(f, img);
        dump_tensor(f, mask);
    }
    ct_value_free(s);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: seg_dump OUT IMAGES MASKS SUFFIX SEED EPOCHS WORKERS [STEP...]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f) return 2;
    ct_segmentation_folder_opts o = ct_segmentation_folder_defaults();
    if (strcmp(argv[4], "-") != 0) o.mask_suffix = argv[4];
    uint64_t seed = strtoull(argv[5], NULL, 10);
    int64_t epochs = atoll(argv[6]);
    int workers = atoi(argv[7]);
    ct_dataset *d = ct_dataset_segmentation_folder(argv[2], argv[3], &o);
    if (!d) {
        dump_error(f);
        return fclose(f) != 0;
    }
    int bad = 0;
    int64_t n = ct_dataset_len(d);
    dump_int(f, n);
    for (int64_t i = 0; i < n; i++) {
        dump_str(f, ct_segmentation_folder_image_path(d, i));
        dump_str(f, ct_segmentation_folder_mask_path(d, i));
        bad |= dump_pair(f, ct_dataset_get(d, i));
    }
    for (int at = 8; at < argc;) {
        int nsteps = 0;
        while (at + nsteps < argc && strcmp(argv[at + nsteps], "--") != 0) nsteps++;
        ct_transform **steps = calloc((size_t)(nsteps ? nsteps : 1), sizeof *steps);
        for (int i = 0; i < nsteps; i++) steps[i] = parse_step(argv[at + i]);
        at += nsteps + 1;
        ct_dataset *t = ct_dataset_transform_pair(d, 0, 1, ct_tf_compose(nsteps, steps));
        free(steps);
        if (!t) {
            fprintf(stderr, "seg_dump: %s\n", ct_last_error());
            return 1;
        }
        for (int64_t e = 0; e < epochs; e++)
            for (int64_t i = 0; i < n; i++) bad |= dump_pair(f, ct_dataset_get_drawn(t, i, seed, e));
        if (workers > 0) {
            ct_loader_opts lo = ct_loader_defaults();
            lo.batch_size = 2;
            lo.num_workers = workers;
            lo.seed = seed;
            ct_loader *l = ct_loader_new(ct_dataset_ref(t), &lo);
            int64_t batches = l ? ct_loader_len(l) : -1;
            dump_int(f, batches);
            ct_value *b = NULL;
            for (int64_t k = 0; k < batches; k++) {
                if (ct_loader_next(l, &b) != 1) {
                    dump_error(f);
                    dump_error(f);
                    continue;
                }
                bad |= dump_pair(f, b);
            }
            ct_loader_free(l);
        }
        ct_dataset_free(t);
    }
    ct_dataset_free(d);
    if (ct_tensor_live_count() != 0) {
        fprintf(stderr, "seg_dump: %zu tensors leaked\n", ct_tensor_live_count());
        bad = 1;
    }
    return fclose(f) != 0 || bad;
}
