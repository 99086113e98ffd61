/* Decoding with the first crop cut by the decoder (ct_image_decode_transform,
 * ct_image_read_transform, and ct_dataset_transform of an image folder)
 * gives what decoding the whole image and then transforming it gives, to
 * the pixel and to the draw:
 *   - JPEGs of every sampling (4:2:0, 4:2:2, 4:4:0, 4:4:4, 4:1:1), gray,
 *     CMYK, progressive, with restart markers, at odd sizes, in every
 *     mode, cut by RandomCrop (boxes at every position, from 1 x 1 to the
 *     whole image, under many seeds), CenterCrop, and RandomResizedCrop
 *     followed by a flip, ToTensor and Normalize; PNGs likewise;
 *   - transforms that start with no crop, or with a crop that pads;
 *   - a file cut short, or with a byte changed, anywhere: an error in both
 *     or the same pixels in both (a truncation below the box still fails);
 *   - an image folder transformed (decoded box by box) against the same
 *     transform through ct_dataset_map on the decoded images.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctrial/vision.h>

#include "ct_test.h"
#include "image_write.h"

static const double mean[3] = {0.485, 0.456, 0.406}, stdev[3] = {0.229, 0.224, 0.225};

/* Smooth colours with some grain: chroma that upsampling has to blend. */
static unsigned char *pixels(int w, int h, int comps, unsigned seed) {
    unsigned char *px = malloc((size_t)w * (size_t)h * (size_t)comps);
    if (!px) exit(2);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < comps; c++) {
                seed = seed * 1103515245u + 12345u;
                int v = (x * (3 + c) + y * (5 - c) + c * 40) % 256 + (int)((seed >> 16) % 31) - 15;
                px[((size_t)y * (size_t)w + (size_t)x) * (size_t)comps + (size_t)c] =
                    (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return px;
}

/* t on the whole decoded image, and t through the box decoder: both fail,
 * or both give the same tensor. Returns whether both decoded. */
static bool same_both_ways(const encoded *e, ct_image_mode mode, const ct_transform *t, uint64_t seed,
                           const char *what) {
    ct_rng *r1 = ct_rng_new(seed), *r2 = ct_rng_new(seed);
    ct_tensor *img = ct_image_decode(e->data, e->size, mode, what);
    ct_tensor *want = img ? ct_transform_apply(t, img, r1) : NULL;
    ct_tensor *got = ct_image_decode_transform(e->data, e->size, mode, what, t, r2);
    bool ok = want && got ? ct_test_same(want, got) : !want && !got;
    if (!ok) {
        fprintf(stderr, "  %s, mode %d, seed %llu: %s\n", what, (int)mode, (unsigned long long)seed,
                !want && !got ? "" : !want ? "only the whole decode failed" : !got ? ct_last_error() : "pixels differ");
    }
    if (want && got) { /* the draws after the crop came out the same too */
        double u1 = 0, u2 = 0;
        ok &= ct_rng_rand(r1, &u1) == 0 && ct_rng_rand(r2, &u2) == 0 && u1 == u2;
    }
    CHECK(ok);
    bool decoded = want && got;
    ct_tensor_free(img);
    ct_tensor_free(want);
    ct_tensor_free(got);
    ct_rng_free(r1);
    ct_rng_free(r2);
    return decoded;
}

typedef struct {
    const char *name;
    int comps, hs, vs, restart;
    bool progressive;
} jpeg_kind;

static const jpeg_kind kinds[] = {
    {"4:2:0", 3, 2, 2, 0, false},  {"4:2:2", 3, 2, 1, 0, false},        {"4:4:0", 3, 1, 2, 0, false},
    {"4:4:4", 3, 1, 1, 0, false},  {"4:1:1", 3, 4, 1, 0, false},        {"4:2:0 restarts", 3, 2, 2, 1, false},
    {"progressive 4:2:0", 3, 2, 2, 0, true}, {"progressive 4:2:2", 3, 2, 1, 0, true},
    {"gray", 1, 1, 1, 0, false},   {"gray progressive", 1, 1, 1, 0, true}, {"cmyk", 4, 1, 1, 0, false},
    {"cmyk 2x2", 4, 2, 2, 0, false},
};

/* Every kind at odd sizes, every mode, cut by crops at many places. */
static void test_jpeg_boxes(void) {
    const int sizes[][2] = {{1, 1}, {17, 9}, {61, 47}, {123, 200}};
    ct_transform *crops[] = {
        ct_tf_random_crop(1, 1, NULL), ct_tf_random_crop(5, 7, NULL), ct_tf_random_crop(9, 17, NULL),
        ct_tf_random_crop(40, 33, NULL), ct_tf_center_crop(8, 8), ct_tf_center_crop(31, 20),
    };
    int n_crops = (int)(sizeof crops / sizeof *crops);
    int compared = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            int w = sizes[s][0], h = sizes[s][1];
            const jpeg_kind *jk = &kinds[k];
            unsigned char *px = pixels(w, h, jk->comps, (unsigned)(k * 31 + s));
            encoded e = jpeg_encode_sampled(w, h, jk->comps, jk->progressive, 90, jk->hs, jk->vs, jk->restart, px);
            char what[96];
            snprintf(what, sizeof what, "%s %dx%d", jk->name, w, h);
            for (int mode = CT_IMAGE_GRAY; mode <= CT_IMAGE_RGB_ALPHA; mode++)
                for (int c = 0; c < n_crops; c++)
                    for (uint64_t seed = 0; seed < (c < 4 ? 12u : 1u); seed++) {
                        /* a crop larger than the image is an error both ways */
                        same_both_ways(&e, (ct_image_mode)mode, crops[c], seed, what);
                        compared++;
                    }
            if (jk->comps != 4) /* UNCHANGED: CMYK is refused both ways (checked above in the other modes) */
                compared += same_both_ways(&e, CT_IMAGE_UNCHANGED, crops[1], 3, what);
            free(px);
            free(e.data);
        }
    for (int c = 0; c < n_crops; c++) ct_transform_free(crops[c]);
    CHECK(compared > 2000);
}

/* The pipeline people write, and transforms with no crop first. */
static void test_pipelines(void) {
    ct_transform *imagenet = ct_tf_compose(
        4, (ct_transform *[]){ct_tf_random_resized_crop(32, 32, 0.08, 1.0, 3.0 / 4, 4.0 / 3),
                              ct_tf_random_horizontal_flip(0.5), ct_tf_to_tensor(), ct_tf_normalize(3, mean, stdev)});
    /* nested: the first step of the first part */
    ct_transform *nested = ct_tf_compose(
        2, (ct_transform *[]){ct_tf_compose(2, (ct_transform *[]){ct_tf_random_resized_crop(24, 16, 0.3, 0.9, 0.5, 2.0),
                                                                  ct_tf_color_jitter(0.4, 0.4, 0.4, 0.1)}),
                              ct_tf_to_tensor()});
    ct_transform *no_crop = ct_tf_compose(
        2, (ct_transform *[]){ct_tf_resize(20, 0, 0), ct_tf_random_crop(16, 16, NULL)});
    ct_transform *padded = ct_tf_random_crop(64, 64, &(ct_crop_padding){.left = 4, .top = 4, .right = 4, .bottom = 4,
                                                                        .mode = CT_PAD_REFLECT});
    ct_transform *center_pads = ct_tf_center_crop(300, 10); /* taller than the image: pads */
    ct_transform *pad_if_needed = ct_tf_random_crop(250, 100, &(ct_crop_padding){.if_needed = true});
    ct_transform *all[] = {imagenet, nested, no_crop, padded, center_pads, pad_if_needed};
    int decoded = 0;
    for (int k = 0; k < 4; k++) {
        const jpeg_kind *jk = &kinds[k == 3 ? 6 : k];
        unsigned char *px = pixels(211, 157, 3, (unsigned)k);
        encoded e = jpeg_encode_sampled(211, 157, 3, jk->progressive, 85, jk->hs, jk->vs, 0, px);
        for (size_t t = 0; t < sizeof all / sizeof *all; t++)
            for (uint64_t seed = 0; seed < 20; seed++)
                decoded += same_both_ways(&e, CT_IMAGE_RGB, all[t], 1000 * t + seed, jk->name);
        free(px);
        free(e.data);
    }
    CHECK(decoded == 4 * 6 * 20);
    /* PNG: decoded whole, the box a view of it */
    unsigned char *px = pixels(90, 70, 3, 7);
    encoded png = png_encode(90, 70, 2, 8, false, px, NULL, 0);
    for (size_t t = 0; t < sizeof all / sizeof *all; t++)
        for (uint64_t seed = 0; seed < 10; seed++) CHECK(same_both_ways(&png, CT_IMAGE_RGB, all[t], seed, "png"));
    free(px);
    free(png.data);
    for (size_t t = 0; t < sizeof all / sizeof *all; t++) ct_transform_free(all[t]);
}

/* Cut short or a byte changed anywhere: both fail, or both give the same. */
static void test_damage(void) {
    unsigned char *px = pixels(64, 96, 3, 11);
    encoded e = jpeg_encode_sampled(64, 96, 3, false, 90, 2, 2, 0, px);
    ct_transform *top_left = ct_tf_center_crop(16, 16); /* the box is in the middle; truncations below it */
    int failed = 0;
    for (size_t cut = 0; cut < e.size; cut += 7) {
        encoded part = {e.data, cut};
        failed += !same_both_ways(&part, CT_IMAGE_RGB, top_left, 0, "truncated");
    }
    CHECK(failed == (int)((e.size + 6) / 7)); /* every prefix fails, the decoder's box or not */
    ct_tensor *t = ct_image_decode_transform(e.data, e.size - 2, CT_IMAGE_RGB, "cut.jpg", top_left, NULL);
    CHECK(!t);
    CHECK_ERR(CT_EFORMAT, "ct_image_decode_transform: cut.jpg: Image is incomplete or truncated");
    unsigned char *copy = malloc(e.size);
    for (size_t at = 2; at < e.size; at += 5) {
        memcpy(copy, e.data, e.size);
        copy[at] ^= 0x5A;
        encoded bad = {copy, e.size};
        same_both_ways(&bad, CT_IMAGE_RGB, top_left, 0, "flipped");
    }
    /* no transform, no generator for a random one */
    CHECK(!ct_image_decode_transform(e.data, e.size, CT_IMAGE_RGB, "x.jpg", NULL, NULL));
    CHECK_ERR(CT_EINVAL, "ct_image_decode_transform: x.jpg: transform is NULL");
    ct_transform *rc = ct_tf_random_crop(8, 8, NULL);
    CHECK(!ct_image_decode_transform(e.data, e.size, CT_IMAGE_RGB, "x.jpg", rc, NULL));
    CHECK_ERR(CT_EINVAL, "RandomCrop draws random parameters: it needs a ct_rng");
    CHECK(!ct_image_read_transform("/nonexistent/x.jpg", CT_IMAGE_RGB, rc, NULL));
    CHECK_ERR(CT_EIO, "ct_image_read_transform: /nonexistent/x.jpg");
    /* a transform that fails after the decode names the file */
    ct_rng *rng = ct_rng_new(1);
    ct_transform *norm = ct_tf_normalize(3, mean, stdev); /* on uint8: refused */
    CHECK(!ct_image_decode_transform(e.data, e.size, CT_IMAGE_RGB, "x.jpg", norm, rng));
    CHECK_ERR(CT_EDTYPE, "ct_image_decode_transform: x.jpg: Normalize: input tensor should be a float tensor");
    ct_rng_free(rng);
    ct_transform_free(norm);
    ct_transform_free(rc);
    ct_transform_free(top_left);
    free(copy);
    free(px);
    free(e.data);
}

/* ct_dataset_transform of a folder against ct_dataset_map of the same
 * transform over the decoded images. */
typedef struct {
    const ct_transform *t;
} map_ctx;

static ct_value *apply_to_image(const ct_value *sample, ct_rng *rng, void *ctx) {
    const map_ctx *m = ctx;
    ct_tensor *img = ct_transform_apply(m->t, ct_value_get_tensor(ct_value_list_get(sample, 0)), rng);
    ct_tensor *label = ct_clone(ct_value_get_tensor(ct_value_list_get(sample, 1)));
    ct_value *out = ct_value_tuple();
    ct_value_list_append(out, ct_value_tensor(img));
    ct_value_list_append(out, ct_value_tensor(label));
    return out;
}

static ct_transform *train_transform(void) {
    return ct_tf_compose(
        4, (ct_transform *[]){ct_tf_random_resized_crop(24, 24, 0.08, 1.0, 3.0 / 4, 4.0 / 3),
                              ct_tf_random_horizontal_flip(0.5), ct_tf_to_tensor(), ct_tf_normalize(3, mean, stdev)});
}

static void test_folder(void) {
    char dir[] = "/tmp/ct_decode_box_XXXXXX", path[512];
    CHECK(mkdtemp(dir) != NULL);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/class%d", dir, k);
        CHECK(mkdir(path, 0777) == 0);
        for (int i = 0; i < 6; i++) {
            int w = 40 + 13 * i, h = 90 - 7 * i;
            unsigned char *px = pixels(w, h, 3, (unsigned)(k * 10 + i));
            encoded e = i % 3 == 2 ? png_encode(w, h, 2, 8, false, px, NULL, 0)
                                   : jpeg_encode_sampled(w, h, 3, i % 3 == 1, 90, 2, i % 2 + 1, 0, px);
            snprintf(path, sizeof path, "%s/class%d/%d.%s", dir, k, i, i % 3 == 2 ? "png" : "jpg");
            write_file(path, e.data, e.size);
            free(px);
            free(e.data);
        }
    }
    ct_dataset *folder = ct_dataset_image_folder(dir, NULL);
    CHECK(folder);
    ct_dataset *fused = ct_dataset_transform(folder, 0, train_transform());
    ct_transform *t = train_transform();
    map_ctx m = {t};
    ct_dataset *mapped = ct_dataset_map(folder, apply_to_image, &m, NULL);
    CHECK(fused && mapped && ct_dataset_len(fused) == 12);
    /* through the loader, shuffled, two workers, two passes: every record's own seed */
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = 4;
    o.shuffle = true;
    o.seed = 5;
    o.num_workers = 2;
    ct_loader *a = ct_loader_new(ct_dataset_ref(fused), &o), *b = ct_loader_new(ct_dataset_ref(mapped), &o);
    CHECK(a && b);
    int batches = 0;
    for (int pass = 0; pass < 2 && a && b; pass++) {
        ct_value *x = NULL, *y = NULL;
        while (ct_loader_next(a, &x) == 1 && ct_loader_next(b, &y) == 1) {
            CHECK(ct_test_same(ct_batch_at(x, 0), ct_batch_at(y, 0)));
            CHECK(ct_test_same(ct_batch_at(x, 1), ct_batch_at(y, 1)));
            batches++;
            ct_value_free(x);
            ct_value_free(y);
        }
        CHECK(ct_loader_reset(a) == 0 && ct_loader_reset(b) == 0);
    }
    CHECK(batches == 6);
    /* the accessors still want the folder itself */
    CHECK(ct_image_folder_path(fused, 0) == NULL);
    CHECK_ERR(CT_EINVAL, "not an image-folder dataset");
    /* a broken file fails its record naming the file */
    snprintf(path, sizeof path, "%s/class1/0.jpg", dir);
    FILE *f = fopen(path, "r+b");
    CHECK(f && ftruncate(fileno(f), 100) == 0);
    fclose(f);
    int64_t broken = 6; /* class1/0.jpg */
    CHECK(ct_dataset_get(fused, broken) == NULL);
    CHECK_ERR(CT_EFORMAT, "0.jpg: Image is incomplete or truncated");
    ct_loader_free(a);
    ct_loader_free(b);
    ct_dataset_free(fused);
    ct_dataset_free(mapped);
    ct_dataset_free(folder);
    ct_transform_free(t);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    test_jpeg_boxes();
    test_pipelines();
    test_damage();
    test_folder();
    return ct_test_result("vision_decode_box");
}
