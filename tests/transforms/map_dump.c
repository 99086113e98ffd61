/* map_dump OUT SEED WORKERS WORLD RANK SKIP NBATCHES — batches of a loader
 * over a dataset with random per-record transforms, for test_map.py.
 *
 * The dataset: 10 images uint8 [3, 12, 10] (pixel value (i * 31 + c * 7 +
 * y * 3 + x) % 256 for image i) with their indices, transformed by
 * RandomCrop(8, padding=2, reflect), RandomHorizontalFlip(), ColorJitter(0.3,
 * 0.3, 0.3, 0.05) through ct_dataset_transform. The loader: batch 4,
 * shuffled with SEED, in training mode on rank RANK of WORLD, SKIP batches
 * skipped (a resume), WORKERS worker threads. OUT gets NBATCHES batches:
 * each the images (uint8 [4, 3, 8, 8]) then the indices (int64 [4]). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

enum { N = 10, C = 3, H = 12, W = 10 };

static int fail(const char *what) {
    fprintf(stderr, "map_dump: %s: %s\n", what, ct_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: map_dump OUT SEED WORKERS WORLD RANK SKIP NBATCHES\n");
        return 2;
    }
    static uint8_t px[N][C][H][W];
    int64_t idx[N];
    for (int i = 0; i < N; i++) {
        idx[i] = i;
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) px[i][c][y][x] = (uint8_t)((i * 31 + c * 7 + y * 3 + x) % 256);
    }
    ct_tensor *ts[2] = {ct_from_data(px, 4, (int64_t[]){N, C, H, W}, CT_U8), ct_from_data(idx, 1, (int64_t[]){N}, CT_I64)};
    ct_dataset *images = ct_dataset_tensors(2, ts);
    ct_crop_padding pad = {.left = 2, .top = 2, .right = 2, .bottom = 2, .mode = CT_PAD_REFLECT};
    ct_transform *steps[] = {ct_tf_random_crop(8, 8, &pad), ct_tf_random_horizontal_flip(0.5),
                             ct_tf_color_jitter(0.3, 0.3, 0.3, 0.05)};
    ct_dataset *d = ct_dataset_transform(images, 0, ct_tf_compose(3, steps));
    ct_dataset_free(images);
    if (!d) return fail("ct_dataset_transform");
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = 4;
    o.shuffle = true;
    o.seed = strtoull(argv[2], NULL, 10);
    o.num_workers = atoi(argv[3]);
    o.world_size = atoi(argv[4]);
    o.rank = atoi(argv[5]);
    o.skip_batches = atoll(argv[6]);
    o.repeat = true;
    ct_loader *l = ct_loader_new(d, &o);
    if (!l) return fail("ct_loader_new");
    FILE *f = fopen(argv[1], "wb");
    for (int64_t b = 0, n = atoll(argv[7]); b < n; b++) {
        ct_value *batch;
        if (ct_loader_next(l, &batch) != 1) return fail("ct_loader_next");
        for (size_t leaf = 0; leaf < 2; leaf++) {
            ct_tensor *t = ct_contiguous(ct_batch_at(batch, leaf));
            fwrite(ct_data_ptr(t), ct_dtype_size(ct_dtype_of(t)), (size_t)ct_numel(t), f);
            ct_tensor_free(t);
        }
        ct_value_free(batch);
    }
    fclose(f);
    ct_loader_free(l);
    ct_tensor_free(ts[0]);
    ct_tensor_free(ts[1]);
    return ct_tensor_live_count() == 0 ? 0 : 4;
}
