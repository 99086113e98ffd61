/* Segmentation folders, masks and joint transforms refused where they
 * should be, each message naming the file or the shapes (vision.h):
 *   - ct_dataset_segmentation_folder at creation: bad options, a missing
 *     folder, no image, an image without its mask, a mask without its
 *     image (and ignore_unpaired_masks), two images of one stem, a .bmp;
 *   - its samples: a mask of another size than its image, a corrupt image,
 *     a corrupt mask, an RGB mask (through get and the loader, which adds
 *     the index), and the accessors' errors;
 *   - ct_image_read_mask / ct_image_decode_mask: palette indices at 2 bits
 *     and interlaced, 2-bit gray scaled as PIL, 16-bit gray, a gray JPEG
 *     kept; gray + alpha and colour JPEGs refused;
 *   - ct_transform_apply_pair: NULL arguments, no generator, shapes that do
 *     not match, a failing step naming both shapes; a [N, H, W] uint8 mask
 *     keeps its dims and dtype; the image of a pair is, draw for draw, the
 *     image ct_transform_apply gives alone;
 *   - ct_dataset_transform_pair: bad fields, a failed constructor's message
 *     kept, a sample without the fields.
 * Nothing leaks. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctrial/vision.h>

#include "ct_test.h"
#include "image_write.h"

static char dir[256];

static void mkdir_p(const char *path) {
    if (mkdir(path, 0777) != 0) {
        perror(path);
        exit(2);
    }
}

/* An 8-bit PNG of h x w: gray (color_type 0), RGB (2) or palette (3),
 * pixel values from `seed`. */
static void put_png(const char *path, int h, int w, int color_type, int seed) {
    int c = color_type == 2 ? 3 : 1;
    unsigned char *px = malloc((size_t)(h * w * c));
    for (int i = 0; i < h * w * c; i++) px[i] = (unsigned char)((i * 7 + seed * 13) % (color_type == 3 ? 4 : 256));
    unsigned char palette[12] = {0, 0, 0, 128, 0, 0, 0, 128, 0, 128, 128, 0};
    encoded e = png_encode(w, h, color_type, 8, false, px, color_type == 3 ? palette : NULL, 4);
    write_file(path, e.data, e.size);
    free(e.data);
    free(px);
}

/* a and b: the same shape and values. */
static bool same(const ct_tensor *a, const ct_tensor *b) {
    if (!a || !b || ct_ndim(a) != ct_ndim(b)) return false;
    for (int i = 0; i < ct_ndim(a); i++)
        if (ct_size(a, i) != ct_size(b, i)) return false;
    ct_scope *s = ct_scope_begin();
    double d = -1;
    bool ok = ct_item(ct_max(ct_abs(ct_sub(ct_to_dtype(a, CT_F64), ct_to_dtype(b, CT_F64)))), &d) == 0 && d == 0;
    ct_scope_end(s);
    return ok;
}

/* The largest value of t, or -1. */
static double top_of(const ct_tensor *t) {
    ct_scope *s = ct_scope_begin();
    double v = -1;
    if (!t || ct_item(ct_max(ct_to_dtype(t, CT_F64)), &v) != 0) v = -1;
    ct_scope_end(s);
    return v;
}

static char *path_of(const char *a, const char *b) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s%s%s", dir, a, b ? "/" : "", b ? b : "");
    return buf[k];
}

/* A folder pair `name`/images and `name`/masks. */
static void folders(const char *name) {
    mkdir_p(path_of(name, NULL));
    char p[512];
    snprintf(p, sizeof p, "%s/%s/images", dir, name);
    mkdir_p(p);
    snprintf(p, sizeof p, "%s/%s/masks", dir, name);
    mkdir_p(p);
}

static ct_dataset *open_seg(const char *name, const ct_segmentation_folder_opts *o) {
    char images[512], masks[512];
    snprintf(images, sizeof images, "%s/%s/images", dir, name);
    snprintf(masks, sizeof masks, "%s/%s/masks", dir, name);
    return ct_dataset_segmentation_folder(images, masks, o);
}

static void test_creation(void) {
    ct_segmentation_folder_opts o = ct_segmentation_folder_defaults();
    CHECK(o.mode == CT_IMAGE_RGB && !o.mask_suffix && !o.ignore_unpaired_masks && !o.extensions);
    CHECK(ct_dataset_segmentation_folder(NULL, "m", NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "images_dir is NULL");
    o.mask_suffix = "sub/x.png";
    CHECK(ct_dataset_segmentation_folder("i", "m", &o) == NULL);
    CHECK_ERR(CT_EINVAL, "mask_suffix");
    o = ct_segmentation_folder_defaults();
    o.mode = (ct_image_mode)9;
    CHECK(ct_dataset_segmentation_folder("i", "m", &o) == NULL);
    CHECK_ERR(CT_EINVAL, "mode 9");

    /* missing folders, no image */
    folders("empty");
    CHECK(open_seg("nowhere", NULL) == NULL);
    CHECK_ERR(CT_EIO, "nowhere/images: cannot open the images folder");
    CHECK(open_seg("empty", NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "empty/images: no image in it");

    /* an image without its mask, named with the mask it lacks */
    folders("missing");
    put_png(path_of("missing/images", "a.png"), 4, 6, 2, 1);
    put_png(path_of("missing/images", "b.jpg"), 4, 6, 2, 2); /* a PNG named .jpg: decoded by content */
    put_png(path_of("missing/images", "c.png"), 4, 6, 2, 3);
    put_png(path_of("missing/masks", "a.png"), 4, 6, 3, 1);
    CHECK(open_seg("missing", NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "missing/images/b.jpg: the image has no mask");
    CHECK(open_seg("missing", NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "missing/masks/b.png (nor have 1 other images)");

    /* a mask without its image; ignored when asked */
    folders("extra");
    put_png(path_of("extra/images", "a.png"), 4, 6, 2, 1);
    put_png(path_of("extra/masks", "a.png"), 4, 6, 3, 1);
    put_png(path_of("extra/masks", "zz.png"), 4, 6, 3, 1);
    write_file(path_of("extra/masks", "notes.txt"), "x\n", 2); /* not a mask: ignored */
    CHECK(open_seg("extra", NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "extra/masks/zz.png: the mask has no image");
    o = ct_segmentation_folder_defaults();
    o.ignore_unpaired_masks = true;
    ct_dataset *d = open_seg("extra", &o);
    CHECK(d && ct_dataset_len(d) == 1);
    CHECK(d && strstr(ct_segmentation_folder_mask_path(d, 0), "extra/masks/a.png"));
    ct_dataset_free(d);

    /* two images of one stem */
    folders("twice");
    put_png(path_of("twice/images", "a.png"), 4, 6, 2, 1);
    put_png(path_of("twice/images", "a.jpg"), 4, 6, 2, 1);
    put_png(path_of("twice/masks", "a.png"), 4, 6, 3, 1);
    CHECK(open_seg("twice", NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "the images a.jpg and a.png have one stem");

    /* an image that counts in a format ctrial does not decode */
    folders("bmp");
    write_file(path_of("bmp/images", "a.bmp"), "BM", 2);
    CHECK(open_seg("bmp", NULL) == NULL);
    CHECK_ERR(CT_ENOTSUP, "bmp/images/a.bmp: a .bmp file");
}

static void test_samples(void) {
    folders("bad");
    put_png(path_of("bad/images", "1_ok.png"), 4, 6, 2, 1);
    put_png(path_of("bad/masks", "1_ok.png"), 4, 6, 3, 1);
    put_png(path_of("bad/images", "2_size.png"), 5, 6, 2, 2);
    put_png(path_of("bad/masks", "2_size.png"), 4, 6, 0, 2);
    write_file(path_of("bad/images", "3_corrupt.png"), "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
    put_png(path_of("bad/masks", "3_corrupt.png"), 4, 6, 3, 3);
    put_png(path_of("bad/images", "4_mask_corrupt.png"), 4, 6, 2, 4);
    write_file(path_of("bad/masks", "4_mask_corrupt.png"), "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
    put_png(path_of("bad/images", "5_rgb_mask.png"), 4, 6, 2, 5);
    put_png(path_of("bad/masks", "5_rgb_mask.png"), 4, 6, 2, 5);
    ct_dataset *d = open_seg("bad", NULL);
    CHECK(d && ct_dataset_len(d) == 5);
    if (!d) return;
    ct_value *s = ct_dataset_get(d, 0);
    CHECK(s && ct_dtype_of(ct_batch_at(s, 0)) == CT_U8 && ct_dtype_of(ct_batch_at(s, 1)) == CT_I64 &&
          ct_ndim(ct_batch_at(s, 1)) == 2 && ct_size(ct_batch_at(s, 1), 0) == 4 && ct_size(ct_batch_at(s, 1), 1) == 6);
    ct_value_free(s);
    CHECK(ct_dataset_get(d, 1) == NULL);
    CHECK_ERR(CT_ESHAPE, "bad/masks/2_size.png: the mask is 4 x 6 (H x W), its image");
    CHECK(ct_dataset_get(d, 1) == NULL);
    CHECK_ERR(CT_ESHAPE, "bad/images/2_size.png is 5 x 6");
    CHECK(ct_dataset_get(d, 2) == NULL);
    CHECK_ERR(CT_EFORMAT, "bad/images/3_corrupt.png: Image is incomplete or truncated");
    CHECK(ct_dataset_get(d, 3) == NULL);
    CHECK_ERR(CT_EFORMAT, "ct_image_read_mask: ");
    CHECK(ct_dataset_get(d, 3) == NULL);
    CHECK_ERR(CT_EFORMAT, "bad/masks/4_mask_corrupt.png");
    CHECK(ct_dataset_get(d, 4) == NULL);
    CHECK_ERR(CT_EFORMAT, "bad/masks/5_rgb_mask.png: a mask must be a palette or grayscale PNG");

    /* through the loader, with the index */
    ct_loader_opts lo = ct_loader_defaults();
    lo.num_workers = 2;
    ct_loader *l = ct_loader_new(ct_dataset_ref(d), &lo);
    ct_value *b = NULL;
    CHECK(ct_loader_next(l, &b) == 1);
    ct_value_free(b);
    CHECK(ct_loader_next(l, &b) < 0);
    CHECK_ERR(CT_ESHAPE, "dataset index 1: ct_dataset_segmentation_folder: ");
    ct_loader_free(l);

    /* the accessors */
    CHECK(ct_segmentation_folder_image_path(d, 5) == NULL);
    CHECK_ERR(CT_EINDEX, "sample 5 is out of range [0, 5)");
    CHECK(strstr(ct_segmentation_folder_image_path(d, 4), "bad/images/5_rgb_mask.png") != NULL);
    ct_dataset *sub = ct_dataset_subset(d, (int64_t[]){0}, 1);
    CHECK(sub && ct_segmentation_folder_mask_path(sub, 0) == NULL);
    CHECK_ERR(CT_EINVAL, "not a segmentation-folder dataset");
    CHECK(ct_image_folder_path(d, 0) == NULL); /* nor an image folder */
    CHECK_ERR(CT_EINVAL, "not an image-folder dataset");
    ct_dataset_free(sub);
    ct_dataset_free(d);
}

static void test_masks(void) {
    /* a 2-bit palette PNG: its indices, unpacked */
    unsigned char row[2] = {0x1B, 0xE4}; /* 0 1 2 3 | 3 2 1 0 */
    unsigned char palette[12] = {10, 10, 10, 20, 20, 20, 30, 30, 30, 40, 40, 40};
    encoded e = png_encode(8, 1, 3, 2, false, row, palette, 4);
    ct_tensor *m = ct_image_decode_mask(e.data, e.size, "p2.png");
    int64_t v[8], want[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    CHECK(m && ct_dtype_of(m) == CT_I64 && ct_ndim(m) == 2 && ct_size(m, 0) == 1 && ct_size(m, 1) == 8 &&
          ct_read(m, v, sizeof v) == 0 && memcmp(v, want, sizeof v) == 0);
    ct_tensor_free(m);
    free(e.data);
    /* 2-bit gray: scaled to 8 bits as PIL's "L" (x 85) */
    e = png_encode(4, 1, 0, 2, false, row, NULL, 0);
    m = ct_image_decode_mask(e.data, e.size, "g2.png");
    CHECK(m && ct_size(m, 1) == 4 && ct_read(m, v, 4 * sizeof *v) == 0 && v[0] == 0 && v[1] == 85 && v[2] == 170 &&
          v[3] == 255);
    ct_tensor_free(m);
    free(e.data);
    /* an interlaced 8-bit palette PNG: its indices, where they were */
    unsigned char idx[9 * 7];
    for (int i = 0; i < 9 * 7; i++) idx[i] = (unsigned char)(i % 4);
    e = png_encode(9, 7, 3, 8, true, idx, palette, 4);
    m = ct_image_decode_mask(e.data, e.size, "adam7.png");
    int64_t all[9 * 7];
    bool ok = m && ct_size(m, 0) == 7 && ct_size(m, 1) == 9 && ct_read(m, all, sizeof all) == 0;
    for (int i = 0; ok && i < 9 * 7; i++) ok = all[i] == i % 4;
    CHECK(ok);
    ct_tensor_free(m);
    free(e.data);
        /* 16-bit gray, big-endian in the file */
    unsigned char rows16[4] = {0x01, 0x2C, 0xFF, 0xFF}; /* 300, 65535 */
    e = png_encode(2, 1, 0, 16, false, rows16, NULL, 0);
    m = ct_image_decode_mask(e.data, e.size, "g16.png");
    CHECK(m && ct_read(m, v, 2 * sizeof *v) == 0 && v[0] == 300 && v[1] == 65535);
    ct_tensor_free(m);
    free(e.data);
    /* gray + alpha is not a class map */
    unsigned char ga[4] = {1, 255, 2, 255};
    e = png_encode(2, 1, 4, 8, false, ga, NULL, 0);
    CHECK(ct_image_decode_mask(e.data, e.size, "ga.png") == NULL);
    CHECK_ERR(CT_EFORMAT, "ct_image_decode_mask: ga.png: a mask must be a palette or grayscale PNG");
    free(e.data);
    /* a gray JPEG is its values (as PIL's "L"); a colour JPEG is refused */
    unsigned char px[8 * 8 * 3];
    for (int i = 0; i < 8 * 8 * 3; i++) px[i] = (unsigned char)(i % 2 ? 200 : 40);
    e = jpeg_encode(8, 8, 1, false, 95, px);
    m = ct_image_decode_mask(e.data, e.size, NULL);
    ct_tensor *g = ct_image_decode(e.data, e.size, CT_IMAGE_GRAY, NULL);
    ct_tensor *g64 = g ? ct_to_dtype(ct_squeeze_dim(g, 0), CT_I64) : NULL;
    CHECK(same(m, g64));
    ct_tensor_free(m);
    ct_tensor_free(g);
    ct_tensor_free(g64);
    free(e.data);
    e = jpeg_encode(8, 8, 3, false, 95, px);
    CHECK(ct_image_decode_mask(e.data, e.size, NULL) == NULL);
    CHECK_ERR(CT_EFORMAT, "<memory>: a mask must be a grayscale image");
    free(e.data);
    CHECK(ct_image_read_mask(path_of("nowhere.png", NULL)) == NULL);
    CHECK_ERR(CT_EIO, "nowhere.png");
}

static void test_apply_pair(void) {
    ct_tensor *img = ct_randint(0, 256, CT_SHAPE(3, 20, 24), &(ct_topts){.dtype = CT_U8});
    ct_tensor *mask = ct_randint(0, 5, CT_SHAPE(20, 24), &(ct_topts){.dtype = CT_I64});
    ct_tensor *a = NULL, *b = NULL;
    ct_transform *flip = ct_tf_random_horizontal_flip(0.5);
    ct_rng *rng = ct_rng_new(3);
    CHECK(ct_transform_apply_pair(flip, img, NULL, rng, &a, &b) == CT_EINVAL && !a && !b);
    CHECK_ERR(CT_EINVAL, "mask is NULL");
    CHECK(ct_transform_apply_pair(flip, img, mask, NULL, &a, &b) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "needs a ct_rng");
    ct_tensor *narrow = ct_narrow(mask, 0, 0, 19);
    CHECK(ct_transform_apply_pair(flip, img, narrow, rng, &a, &b) == CT_ESHAPE && !a && !b);
    CHECK_ERR(CT_ESHAPE, "the mask: [19, 24]");
    CHECK(ct_transform_apply_pair(flip, mask, mask, rng, &a, &b) == CT_ESHAPE);
    CHECK_ERR(CT_ESHAPE, "the image: [20, 24]");
    ct_transform *big = ct_tf_random_crop(32, 32, NULL);
    CHECK(ct_transform_apply_pair(big, img, mask, rng, &a, &b) == CT_ESHAPE && !a && !b);
    CHECK_ERR(CT_ESHAPE, "larger than the input image size (20, 24) (the image: [3, 20, 24]");
    ct_transform_free(big);
    CHECK(ct_tf_random_crop_ex(0, 4, NULL, 255) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_tf_random_crop_ex");

    /* a [2, H, W] uint8 mask keeps its dims and dtype; NEAREST keeps its values */
    ct_tensor *m3 = ct_randint(0, 3, CT_SHAPE(2, 20, 24), &(ct_topts){.dtype = CT_U8});
    ct_transform *rrc = ct_tf_random_resized_crop(9, 11, 0.2, 1, 0.5, 2);
    CHECK(ct_transform_apply_pair(rrc, img, m3, rng, &a, &b) == 0);
    CHECK(a && b && ct_ndim(b) == 3 && ct_size(b, 0) == 2 && ct_size(b, 1) == 9 && ct_size(b, 2) == 11 &&
          ct_dtype_of(b) == CT_U8 && top_of(b) == 2);
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_transform_free(rrc);

    /* the pair's image is the image alone's, draw for draw */
    ct_crop_padding pad = {.left = 3, .top = 3, .right = 3, .bottom = 3};
    ct_transform *steps[] = {ct_tf_random_resized_crop(16, 18, 0.3, 1, 0.75, 4.0 / 3),
                             ct_tf_random_horizontal_flip(0.5), ct_tf_random_crop_ex(16, 18, &pad, 255),
                             ct_tf_color_jitter(0.4, 0.4, 0.4, 0.1), ct_tf_to_tensor()};
    ct_transform *t = ct_tf_compose(5, steps);
    int equal = 0, padded = 0;
    for (uint64_t seed = 0; seed < 16; seed++) {
        ct_rng *r1 = ct_rng_new(seed), *r2 = ct_rng_new(seed);
        ct_tensor *alone = ct_transform_apply(t, img, r1);
        CHECK(ct_transform_apply_pair(t, img, mask, r2, &a, &b) == 0);
        equal += same(alone, a);
        padded += top_of(b) == 255;
        ct_tensor_free(alone);
        ct_tensor_free(a);
        ct_tensor_free(b);
        ct_rng_free(r1);
        ct_rng_free(r2);
    }
    CHECK(equal == 16);
    CHECK(padded > 0); /* mask_fill 255 where the image got 0 */
    ct_tensor_free(mask);
    ct_tensor_free(m3);
    ct_tensor_free(narrow);
    ct_rng_free(rng);

    /* the dataset wrapper */
    ct_tensor *zeros = ct_zeros(CT_SHAPE(1, 20, 24), &(ct_topts){.dtype = CT_I64});
    ct_dataset *d = ct_dataset_tensors(2, (ct_tensor *[]){ct_unsqueeze(img, 0), zeros});
    CHECK(ct_dataset_transform_pair(d, 1, 1, ct_tf_to_tensor()) == NULL);
    CHECK_ERR(CT_EINVAL, "two different fields");
    CHECK(ct_dataset_transform_pair(d, 0, 1, ct_tf_resize(0, 0, 0)) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_tf_resize");
    CHECK(ct_dataset_transform_pair(NULL, 0, 1, ct_tf_to_tensor()) == NULL);
    CHECK_ERR(CT_EINVAL, "dataset is NULL");
    ct_dataset *p = ct_dataset_transform_pair(d, 0, 1, t); /* takes t */
    ct_value *s = p ? ct_dataset_get(p, 0) : NULL;
    CHECK(s && ct_size(ct_batch_at(s, 0), 1) == 16 && ct_dtype_of(ct_batch_at(s, 0)) == CT_F32 &&
          ct_size(ct_batch_at(s, 1), 0) == 16 && ct_dtype_of(ct_batch_at(s, 1)) == CT_I64);
    ct_value_free(s);
    ct_dataset_free(p);
    p = ct_dataset_transform_pair(d, 0, 2, ct_tf_to_tensor());
    CHECK(p && ct_dataset_get(p, 0) == NULL);
    CHECK_ERR(CT_EINVAL, "field 0 (the image) and field 2 (the mask) of the sample (a tuple of 2)");
    ct_dataset_free(p);
    ct_dataset_free(d);
    ct_transform_free(flip);
    ct_tensor_free(img);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/ctrial-seg-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    ct_scope *scope = ct_scope_begin();
    test_creation();
    test_samples();
    test_masks();
    test_apply_pair();
    ct_scope_end(scope);
    CHECK(ct_tensor_live_count() == 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ct_test_result("vision_segmentation_errors");
}
