/* bench/loader/bench_images.c — images/s of ctrial's image pipeline: an
 * image folder decoded and augmented through the loader. images.py drives
 * it and puts the figures next to torchvision's ImageFolder + DataLoader.
 *
 *   bench_images loader ROOT SIZE WORKERS [BATCH [PASSES [CROP [THREADS]]]]
 *       ct_dataset_image_folder(ROOT) -> ct_dataset_transform with
 *       Compose(CROP, RandomHorizontalFlip(0.5), ToTensor, Normalize(ImageNet
 *       mean/std)) -> ct_loader (batch BATCH (64), shuffle, seed 1, WORKERS
 *       workers, one pass per reset). CROP "rrc" (default) is
 *       RandomResizedCrop(SIZE, scale (0.08, 1), ratio (3/4, 4/3)); "pad" is
 *       RandomCrop(SIZE, padding=2). One warm-up pass (page cache, workers
 *       started), then PASSES (3) timed passes; prints
 *       {"images_per_s": [one per pass], ...}. THREADS > 0 sets libtorch's
 *       intra-op threads of the calling thread (which loads when WORKERS is
 *       0; workers always run single-threaded).
 *
 *   bench_images parts ROOT SIZE [CROP]
 *       Where one image's time goes, on one thread (intra-op threads 1, as
 *       in a worker): every file of the folder read and decoded
 *       (ct_image_read), then each step of the chain applied on its own
 *       (ct_transform_apply); one warm-up pass, then the mean microseconds
 *       per image of each over one pass. Prints one JSON object.
 *
 * Not a test: nothing is asserted. Build: ninja -C BUILD bench_images. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ctrial/ctrial.h>

static const double mean[3] = {0.485, 0.456, 0.406}, stdev[3] = {0.229, 0.224, 0.225};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int die(const char *what) {
    fprintf(stderr, "bench_images: %s: %s\n", what, ct_last_error());
    return 1;
}

/* The chain's four steps, each a new transform. */
static void make_steps(int64_t size, const char *crop, ct_transform *steps[4]) {
    if (strcmp(crop, "pad") == 0)
        steps[0] = ct_tf_random_crop(size, size, &(ct_crop_padding){.left = 2, .top = 2, .right = 2, .bottom = 2});
    else
        steps[0] = ct_tf_random_resized_crop(size, size, 0.08, 1.0, 3.0 / 4, 4.0 / 3);
    steps[1] = ct_tf_random_horizontal_flip(0.5);
    steps[2] = ct_tf_to_tensor();
    steps[3] = ct_tf_normalize(3, mean, stdev);
}

static int loader(const char *root, int64_t size, int workers, int64_t batch, int passes, const char *crop,
                  int threads) {
    if (threads > 0) ct_set_num_threads(threads);
    ct_dataset *folder = ct_dataset_image_folder(root, NULL);
    if (!folder) return die(root);
    ct_transform *steps[4];
    make_steps(size, crop, steps);
    ct_dataset *train = ct_dataset_transform(folder, 0, ct_tf_compose(4, steps));
    ct_dataset_free(folder);
    if (!train) return die("ct_dataset_transform");
    int64_t n = ct_dataset_len(train);
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = batch;
    o.shuffle = true;
    o.seed = 1;
    o.num_workers = workers;
    ct_loader *l = ct_loader_new(train, &o);
    if (!l) return die("ct_loader_new");
    printf("{\"workers\": %d, \"threads\": %d, \"images\": %lld, \"images_per_s\": [", workers,
           ct_get_num_threads(), (long long)n);
    for (int p = -1; p < passes; p++) { /* pass -1 warms up */
        double t0 = now_s();
        int64_t images = 0;
        ct_value *b;
        int r;
        while ((r = ct_loader_next(l, &b)) == 1) {
            images += ct_batch_length(b);
            ct_value_free(b);
        }
        double dt = now_s() - t0;
        if (r < 0 || images != n || ct_loader_reset(l) != 0) {
            fprintf(stderr, "pass %d: %lld images\n", p, (long long)images);
            return die("ct_loader_next");
        }
        if (p >= 0) printf(p ? ", %.1f" : "%.1f", (double)images / dt);
    }
    printf("]}\n");
    ct_loader_free(l);
    return 0;
}

static int parts(const char *root, int64_t size, const char *crop) {
    static const char *const names[4] = {"crop", "flip", "to_tensor", "normalize"};
    ct_set_num_threads(1);
    ct_dataset *folder = ct_dataset_image_folder(root, NULL);
    if (!folder) return die(root);
    ct_transform *steps[4];
    make_steps(size, crop, steps);
    int64_t n = ct_dataset_len(folder);
    double decode_s = 0, step_s[4] = {0};
    for (int pass = 0; pass < 2; pass++) { /* pass 0 warms up */
        decode_s = 0;
        memset(step_s, 0, sizeof step_s);
        for (int64_t i = 0; i < n; i++) {
            ct_scope *scope = ct_scope_begin();
            ct_rng *rng = ct_rng_new((uint64_t)i);
            double t0 = now_s();
            ct_tensor *x = ct_image_read(ct_image_folder_path(folder, i), CT_IMAGE_RGB);
            decode_s += now_s() - t0;
            for (int k = 0; k < 4 && x; k++) {
                t0 = now_s();
                x = ct_transform_apply(steps[k], x, rng);
                step_s[k] += now_s() - t0;
            }
            ct_rng_free(rng);
            ct_scope_end(scope);
            if (!x) return die(ct_image_folder_path(folder, i));
        }
    }
    printf("{\"images\": %lld, \"us_per_image\": {\"decode\": %.1f", (long long)n, 1e6 * decode_s / (double)n);
    for (int k = 0; k < 4; k++) printf(", \"%s\": %.1f", names[k], 1e6 * step_s[k] / (double)n);
    printf("}}\n");
    for (int k = 0; k < 4; k++) ct_transform_free(steps[k]);
    ct_dataset_free(folder);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 5 && argc <= 9 && strcmp(argv[1], "loader") == 0)
        return loader(argv[2], atoll(argv[3]), atoi(argv[4]), argc > 5 ? atoll(argv[5]) : 64,
                      argc > 6 ? atoi(argv[6]) : 3, argc > 7 ? argv[7] : "rrc", argc > 8 ? atoi(argv[8]) : 0);
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "parts") == 0)
        return parts(argv[2], atoll(argv[3]), argc > 4 ? argv[4] : "rrc");
    fprintf(stderr, "usage: %s loader ROOT SIZE WORKERS [BATCH [PASSES [CROP [THREADS]]]]\n"
                    "       %s parts ROOT SIZE [CROP]\n"
                    "CROP: rrc (RandomResizedCrop, default) or pad (RandomCrop with padding 2)\n",
            argv[0], argv[0]);
    return 2;
}
