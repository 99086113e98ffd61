/* ct_dataset_image_folder through the threaded loader: a tree of PNGs of
 * one size (classes with nested folders, files whose pixels encode their
 * class and number) read by ct_loader with two workers, every batch
 * checked against the files' pixels and classes, in order and shuffled;
 * a corrupt file fails the loader's batch naming the file; the accessors'
 * errors (a subset is not a folder, indices out of range); 16-bit PNGs
 * beside 8-bit ones collate as 8-bit images (their high bytes), decoded
 * alone and cropped as decoded. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctrial/vision.h>

#include "ct_test.h"
#include "image_write.h"

#define W 6
#define H 4

static char dir[256];

/* File `num` of class `k`: pixel (y, x) channel c is its value(). */
static unsigned char value(int k, int num, int y, int x, int c) {
    return (unsigned char)(k * 60 + num * 13 + y * 7 + x * 3 + c * 29);
}

static void put_png(const char *path, int k, int num) {
    unsigned char px[H * W * 3];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++) px[(y * W + x) * 3 + c] = value(k, num, y, x, c);
    encoded e = png_encode(W, H, 2, 8, false, px, NULL, 0);
    write_file(path, e.data, e.size);
    free(e.data);
}

static void mkdir_p(const char *path) {
    if (mkdir(path, 0777) != 0) {
        perror(path);
        exit(2);
    }
}

/* The class and number a file's name encodes: .../k<K>_<NUM>.png */
static void parse(const char *path, int *k, int *num) {
    const char *base = strrchr(path, '/');
    if (sscanf(base ? base + 1 : path, "k%d_%d", k, num) != 2) *k = *num = -1;
}

/* Row `row` of batch (x [B, 3, H, W] uint8, y [B] int64) is sample i. */
static bool row_is(const ct_value *batch, int64_t row, ct_dataset *d, int64_t i) {
    const ct_tensor *x = ct_batch_at(batch, 0), *y = ct_batch_at(batch, 1);
    int k, num;
    parse(ct_image_folder_path(d, i), &k, &num);
    unsigned char img[3 * H * W];
    int64_t label = -1;
    ct_tensor *xi = ct_select(x, 0, row), *yi = ct_select(y, 0, row);
    bool ok = xi && yi && ct_read(xi, img, sizeof img) == 0 && ct_item_int(yi, &label) == 0 && label == k;
    for (int c = 0; ok && c < 3; c++)
        for (int yy = 0; yy < H; yy++)
            for (int xx = 0; xx < W; xx++) ok &= img[(c * H + yy) * W + xx] == value(k, num, yy, xx, c);
    ct_tensor_free(xi);
    ct_tensor_free(yi);
    return ok;
}

static void test_loader(void) {
    char p[512];
    const char *classes[] = {"cat", "dog", "emu"};
    int per_class[] = {5, 4, 6};
    snprintf(p, sizeof p, "%s/root", dir);
    mkdir_p(p);
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/root/%s", dir, classes[k]);
        mkdir_p(p);
        snprintf(p, sizeof p, "%s/root/%s/nested", dir, classes[k]);
        mkdir_p(p);
        for (int num = 0; num < per_class[k]; num++) {
            snprintf(p, sizeof p, "%s/root/%s%s/k%d_%d.png", dir, classes[k], num % 2 ? "/nested" : "", k, num);
            put_png(p, k, num);
        }
    }
    snprintf(p, sizeof p, "%s/root", dir);
    ct_dataset *d = ct_dataset_image_folder(p, NULL);
    CHECK(d != NULL);
    if (!d) return;
    CHECK(ct_dataset_len(d) == 15);
    CHECK(ct_image_folder_num_classes(d) == 3);
    CHECK(strcmp(ct_image_folder_class(d, 1), "dog") == 0);
    /* files first, then nested/ (os.walk's sorted tuples): cat's 0 2 4 1 3 */
    int k, num;
    parse(ct_image_folder_path(d, 2), &k, &num);
    CHECK(k == 0 && num == 4);
    parse(ct_image_folder_path(d, 3), &k, &num);
    CHECK(k == 0 && num == 1);

    /* accessors' errors */
    CHECK(ct_image_folder_class(d, 3) == NULL);
    CHECK_ERR(CT_EINDEX, "class 3 is out of range [0, 3)");
    CHECK(ct_image_folder_path(d, -1) == NULL);
    CHECK_ERR(CT_EINDEX, "sample -1");
    ct_dataset *sub = ct_dataset_subset(d, (const int64_t[]){0, 1}, 2);
    CHECK(ct_image_folder_num_classes(sub) == -1);
    CHECK_ERR(CT_EINVAL, "not an image-folder dataset");
    CHECK(ct_image_folder_path(sub, 0) == NULL);
    CHECK_ERR(CT_EINVAL, "not an image-folder dataset");
    ct_dataset_free(sub);
    CHECK(ct_image_folder_num_classes(NULL) == -1);
    CHECK_ERR(CT_EINVAL, "NULL");

    /* two workers, in order then shuffled: every sample once, as written */
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = 4;
        o.num_workers = 2;
        o.shuffle = shuffle;
        o.seed = 11;
        ct_loader *l = ct_loader_new(ct_dataset_ref(d), &o);
        CHECK(l != NULL);
        ct_value *b;
        int64_t seen = 0, good = 0;
        int rc;
        bool found[15] = {false};
        while (l && (rc = ct_loader_next(l, &b)) == 1) {
            int64_t rows = ct_batch_length(b);
            const ct_tensor *x = ct_batch_at(b, 0);
            CHECK(ct_dtype_of(x) == CT_U8 && ct_ndim(x) == 4 && ct_size(x, 1) == 3 && ct_size(x, 2) == H &&
                  ct_size(x, 3) == W);
            for (int64_t r = 0; r < rows; r++, seen++) {
                if (!shuffle) {
                    good += row_is(b, r, d, seen);
                    continue;
                }
                for (int64_t i = 0; i < 15; i++) /* which sample is it? */
                    if (!found[i] && row_is(b, r, d, i)) {
                        found[i] = true;
                        good++;
                        break;
                    }
            }
            ct_value_free(b);
        }
        CHECK(l && rc == 0);
        CHECK(seen == 15 && good == 15);
        ct_loader_free(l);
    }

    /* a corrupt file: its batch fails, naming the file */
    snprintf(p, sizeof p, "%s/root/dog/k1_9.png", dir);
    write_file(p, "\x89PNG\r\n\x1a\nnot really", 18);
    snprintf(p, sizeof p, "%s/root", dir);
    ct_dataset *bad = ct_dataset_image_folder(p, NULL);
    CHECK(bad && ct_dataset_len(bad) == 16);
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = 4;
    o.num_workers = 2;
    ct_loader *l = ct_loader_new(bad, &o);
    ct_value *b = NULL;
    int rc = 0;
    while (l && (rc = ct_loader_next(l, &b)) == 1) ct_value_free(b);
    CHECK(rc < 0);
    CHECK_ERR(CT_EFORMAT, "dog/k1_9.png");
    ct_loader_free(l);
    ct_dataset_free(d);
}

/* A 16-bit RGB PNG and a 16-bit gray one beside an 8-bit RGB one: an RGB
 * folder gives uint8 for all three (each sample's high byte, as PIL gives
 * ImageFolder), so a batch collates, plain and through a crop applied as
 * the file is decoded; UNCHANGED keeps 16 bits. */
static void test_sixteen_bit(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/deep", dir);
    mkdir_p(p);
    snprintf(p, sizeof p, "%s/deep/c", dir);
    mkdir_p(p);
    snprintf(p, sizeof p, "%s/deep/c/a.png", dir);
    put_png(p, 0, 0);
    unsigned char rows[H * W * 3 * 2];
    for (int i = 0; i < H * W * 3; i++) /* big-endian samples: high byte value(), low byte 0xAB */
        rows[2 * i] = value(1, 1, i / 3 / W, i / 3 % W, i % 3), rows[2 * i + 1] = 0xAB;
    encoded rgb = png_encode(W, H, 2, 16, false, rows, NULL, 0), gray = png_encode(W, H, 0, 16, false, rows, NULL, 0);
    snprintf(p, sizeof p, "%s/deep/c/b.png", dir);
    write_file(p, rgb.data, rgb.size);
    snprintf(p, sizeof p, "%s/deep/c/c.png", dir);
    write_file(p, gray.data, gray.size);
    free(rgb.data);
    free(gray.data);

    snprintf(p, sizeof p, "%s/deep", dir);
    ct_dataset *d = ct_dataset_image_folder(p, NULL);
    ct_dataset *cropped = ct_dataset_transform(d, 0, ct_tf_center_crop(H - 2, W - 2)); /* holds its own d */
    CHECK(d && cropped);
    for (int pass = 0; d && cropped && pass < 2; pass++) {
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = 3;
        ct_loader *l = ct_loader_new(ct_dataset_ref(pass ? cropped : d), &o);
        ct_value *b = NULL;
        CHECK(l && ct_loader_next(l, &b) == 1);
        const ct_tensor *x = b ? ct_batch_at(b, 0) : NULL;
        int64_t h = pass ? H - 2 : H, w = pass ? W - 2 : W;
        CHECK(x && ct_dtype_of(x) == CT_U8 && ct_size(x, 0) == 3 && ct_size(x, 1) == 3 && ct_size(x, 2) == h);
        unsigned char got[3 * 3 * H * W];
        CHECK(x && ct_read(x, got, (size_t)(9 * h * w)) == 0);
        bool ok = true;
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < h; y++)
                for (int xx = 0; xx < w; xx++) {
                    int yy = y + pass, xs = xx + pass; /* the center crop's offset */
                    ok &= got[((0 * 3 + c) * h + y) * w + xx] == value(0, 0, yy, xs, c);
                    ok &= got[((1 * 3 + c) * h + y) * w + xx] == value(1, 1, yy, xs, c);
                    /* gray: the first H*W samples of rows, repeated to RGB */
                    ok &= got[((2 * 3 + c) * h + y) * w + xx] == rows[2 * (yy * W + xs)];
                }
        CHECK(ok);
        ct_value_free(b);
        ct_loader_free(l);
    }
    ct_image_folder_opts o = ct_image_folder_defaults();
    o.mode = CT_IMAGE_UNCHANGED;
    ct_dataset *raw = ct_dataset_image_folder(p, &o);
    ct_value *s = raw ? ct_dataset_get(raw, 1) : NULL;
    CHECK(s && ct_dtype_of(ct_batch_at(s, 0)) == CT_U16);
    ct_value_free(s);
    ct_dataset_free(raw);
    ct_dataset_free(cropped);
    ct_dataset_free(d);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ct_vision_folder_XXXXXX");
    if (!mkdtemp(dir)) return 2;
    test_loader();
    test_sixteen_bit();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ct_test_result("vision_folder_loader");
}
