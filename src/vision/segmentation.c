/* src/vision/segmentation.c — images and their segmentation masks paired by
 * name (vision.h: ct_dataset_segmentation_folder and its accessors).
 *
 * What a PyTorch segmentation dataset does by hand: list the images
 * (sorted(os.listdir(images_dir)), the files whose name ends in an image
 * extension), and for each one open masks_dir/<stem><mask_suffix>. The
 * pairs are found and checked once, at creation: every image has its
 * mask, no two images share a stem, and, unless asked to ignore them,
 * every mask has its image. The dataset is then immutable: get() reads
 * and decodes one image and its mask into buffers of its own, so the
 * loader's workers call it concurrently.
 */

#include "ctrial/vision.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/dataset.h"
#include "vision/image.h"
#include "vision/names.h"

#define FN "ct_dataset_segmentation_folder"

typedef struct {
    ct_image_mode mode;
    cti_names images, masks; /* the pairs' paths, images.n of each */
} seg_ds;

/* What cti_path_join puts between dir and a name, for messages that name a path. */
static const char *sep(const char *dir) {
    size_t n = strlen(dir);
    return n > 0 && dir[n - 1] == '/' ? "" : "/";
}

/* The names of the files in `dir` (not its folders; a symbolic link to a
 * folder is a folder, a broken one a file, as os.path.isdir sees them),
 * sorted. CT_EIO naming the folder when it cannot be read. */
static int list_files(const char *dir, const char *what, cti_names *out) {
    struct stat st;
    if (stat(dir, &st) != 0)
        return ct_set_error(CT_EIO, FN ": %s: cannot open the %s folder (%s)", dir, what, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return ct_set_error(CT_EIO, FN ": %s: the %s folder is not a folder", dir, what);
    int rc = cti_list_dir(dir, NULL, out, FN, what);
    if (!rc) cti_names_sort(out);
    return rc;
}

/* os.path.splitext(name)[0] + suffix: the extension is from the last '.'
 * on, unless every character before that '.' is a '.' (".png" has none). */
static char *mask_name(const char *name, const char *suffix) {
    const char *dot = strrchr(name, '.');
    const char *p = name;
    while (p < dot && *p == '.') p++;
    size_t stem = dot && p < dot ? (size_t)(dot - name) : strlen(name), n = strlen(suffix);
    char *out = malloc(stem + n + 1);
    if (!out) return NULL;
    memcpy(out, name, stem);
    memcpy(out + stem, suffix, n + 1);
    return out;
}

static bool has_name(const cti_names *sorted, const char *name) {
    return sorted->n > 0 &&
           bsearch(&name, sorted->items, (size_t)sorted->n, sizeof *sorted->items, cti_names_cmp) != NULL;
}

static void seg_free(void *self) {
    seg_ds *ds = self;
    if (!ds) return;
    cti_names_free(&ds->images);
    cti_names_free(&ds->masks);
    free(ds);
}

static int64_t seg_len(void *self) { return ((seg_ds *)self)->images.n; }

static ct_value *seg_get(void *self, int64_t index) {
    const seg_ds *ds = self;
    const char *ipath = ds->images.items[index], *mpath = ds->masks.items[index];
    ct_tensor *img = cti_image_read_as_pil(ipath, ds->mode, NULL, NULL);
    ct_tensor *mask = img ? ct_image_read_mask(mpath) : NULL;
    if (mask && (ct_size(mask, 0) != ct_size(img, 1) || ct_size(mask, 1) != ct_size(img, 2))) {
        ct_set_error(CT_ESHAPE,
                     FN ": %s: the mask is %" PRId64 " x %" PRId64 " (H x W), its image %s is %" PRId64 " x %" PRId64,
                     mpath, ct_size(mask, 0), ct_size(mask, 1), ipath, ct_size(img, 1), ct_size(img, 2));
        ct_tensor_free(mask);
        mask = NULL;
    }
    if (!mask) {
        ct_tensor_free(img);
        return NULL;
    }
    return cti_ds_pack(2, (ct_tensor *[]){img, mask});
}

ct_segmentation_folder_opts ct_segmentation_folder_defaults(void) {
    return (ct_segmentation_folder_opts){.mode = CT_IMAGE_RGB, .extensions = NULL, .num_extensions = 0,
                                         .mask_suffix = NULL, .ignore_unpaired_masks = false};
}

static int check_opts(const char *images_dir, const char *masks_dir, const ct_segmentation_folder_opts *o) {
    if (!images_dir || !masks_dir)
        return ct_set_error(CT_EINVAL, FN ": %s is NULL", !images_dir ? "images_dir" : "masks_dir");
    if ((int)o->mode < (int)CT_IMAGE_UNCHANGED || (int)o->mode > (int)CT_IMAGE_RGB_ALPHA)
        return ct_set_error(CT_EINVAL, FN ": %s: mode %d is not a ct_image_mode", images_dir, (int)o->mode);
    if (o->extensions && o->num_extensions < 1)
        return ct_set_error(CT_EINVAL, FN ": %s: num_extensions is %d; must be >= 1 when extensions is given",
                            images_dir, o->num_extensions);
    for (int i = 0; o->extensions && i < o->num_extensions; i++)
        if (!o->extensions[i]) return ct_set_error(CT_EINVAL, FN ": %s: extension %d is NULL", images_dir, i);
    if (o->mask_suffix && (!*o->mask_suffix || strchr(o->mask_suffix, '/')))
        return ct_set_error(CT_EINVAL, FN ": %s: mask_suffix \"%s\" must be a non-empty end of a file name (no '/')",
                            masks_dir, o->mask_suffix);
    return 0;
}

/* The images of images_dir that count, sorted: their names. CT_ENOTSUP
 * for one that counts and that ctrial cannot decode. */
static int find_images(const char *dir, const ct_segmentation_folder_opts *o, cti_names *out) {
    const char *const *ext = o->extensions ? o->extensions : cti_img_extensions;
    int n_ext = o->extensions ? o->num_extensions : CTI_IMG_EXTENSIONS;
    cti_names all = {0};
    int rc = list_files(dir, "images", &all);
    for (int64_t i = 0; !rc && i < all.n; i++) {
        const char *name = all.items[i];
        bool yes = false;
        for (int k = 0; k < n_ext && !yes; k++) yes = cti_name_ends_in(name, ext[k]);
        if (!yes) continue;
        for (size_t k = 0; !rc && k < CTI_OTHER_IMAGE_FORMATS; k++)
            if (cti_name_ends_in(name, cti_other_image_formats[k]))
                rc = ct_set_error(CT_ENOTSUP,
                                  FN ": %s%s%s: a %s file; ctrial decodes JPEG and PNG only (pass extensions "
                                     "{\".jpg\", \".jpeg\", \".png\"} to leave such files out)",
                                  dir, sep(dir), name, cti_other_image_formats[k]);
        if (!rc) {
            rc = cti_names_push(out, all.items[i], FN);
            all.items[i] = NULL; /* out's now */
        }
    }
    cti_names_free(&all);
    return rc;
}

/* Pairs each image with its mask's name (mask_of[i]); refuses an image
 * without a mask. */
static int pair_up(const char *images_dir, const char *masks_dir, const cti_names *images, const cti_names *masks,
                   const char *suffix, cti_names *mask_of) {
    int64_t missing = 0, first = -1;
    for (int64_t i = 0; i < images->n; i++) {
        char *m = mask_name(images->items[i], suffix);
        if (!m) return ct_set_error(CT_ENOMEM, FN ": out of host memory");
        if (!has_name(masks, m) && missing++ == 0) first = i;
        int rc = cti_names_push(mask_of, m, FN);
        if (rc) return rc;
    }
    if (!missing) return 0;
    char more[96] = "";
    if (missing > 1) snprintf(more, sizeof more, " (nor have %" PRId64 " other images)", missing - 1);
    return ct_set_error(CT_EINVAL, FN ": %s%s%s: the image has no mask %s%s%s%s", images_dir, sep(images_dir),
                        images->items[first], masks_dir, sep(masks_dir), mask_of->items[first], more);
}

/* Refuses two images of one stem (a.jpg and a.png would share a mask),
 * and, unless `ignore`, a mask (a file of masks_dir ending in the suffix)
 * without its image: each naming the first such file. */
static int check_pairs(const char *images_dir, const char *masks_dir, const cti_names *images, const cti_names *masks,
                       const cti_names *mask_of, const char *suffix, bool ignore) {
    cti_names sorted = {.items = malloc((size_t)(mask_of->n ? mask_of->n : 1) * sizeof(char *)), .n = mask_of->n};
    if (!sorted.items) return ct_set_error(CT_ENOMEM, FN ": out of host memory");
    memcpy(sorted.items, mask_of->items, (size_t)mask_of->n * sizeof(char *)); /* borrowed */
    cti_names_sort(&sorted);
    int rc = 0;
    for (int64_t i = 1; !rc && i < sorted.n; i++) {
        if (strcmp(sorted.items[i - 1], sorted.items[i]) != 0) continue;
        const char *both[2] = {NULL, NULL};
        for (int64_t k = 0, found = 0; k < images->n && found < 2; k++)
            if (strcmp(mask_of->items[k], sorted.items[i]) == 0) both[found++] = images->items[k];
        rc = ct_set_error(CT_EINVAL,
                          FN ": %s: the images %s and %s have one stem: both would pair with the mask %s%s%s", images_dir, both[0], both[1], masks_dir, sep(masks_dir), sorted.items[i]);
    }
    int64_t extra = 0, first = -1;
    size_t n = strlen(suffix);
    for (int64_t i = 0; !rc && !ignore && i < masks->n; i++) {
        const char *m = masks->items[i];
        size_t len = strlen(m);
        if (len < n || strcmp(m + len - n, suffix) != 0 || has_name(&sorted, m)) continue;
        if (extra++ == 0) first = i;
    }
    free(sorted.items);
    if (rc || !extra) return rc;
    char more[96] = "";
    if (extra > 1) snprintf(more, sizeof more, " (nor have %" PRId64 " other masks)", extra - 1);
    return ct_set_error(CT_EINVAL, FN ": %s%s%s: the mask has no image%s (set ignore_unpaired_masks to leave such "
                                   "masks out)", masks_dir, sep(masks_dir), masks->items[first], more);
}

ct_dataset *ct_dataset_segmentation_folder(const char *images_dir, const char *masks_dir,
                                           const ct_segmentation_folder_opts *o) {
    ct_segmentation_folder_opts defaults = ct_segmentation_folder_defaults();
    if (!o) o = &defaults;
    if (check_opts(images_dir, masks_dir, o)) return NULL;
    const char *suffix = o->mask_suffix ? o->mask_suffix : ".png";
    seg_ds *ds = calloc(1, sizeof *ds);
    if (!ds) {
        ct_set_error(CT_ENOMEM, FN ": out of host memory");
        return NULL;
    }
    ds->mode = o->mode;
    cti_names images = {0}, masks = {0}, mask_of = {0};
    int rc = find_images(images_dir, o, &images);
    if (!rc) rc = list_files(masks_dir, "masks", &masks);
    if (!rc && images.n == 0)
        rc = ct_set_error(CT_EINVAL, FN ": %s: no image in it (the files that count end in %s)", images_dir,
                          o->extensions ? "one of the extensions given" : "one of torchvision's IMG_EXTENSIONS");
    if (!rc) rc = pair_up(images_dir, masks_dir, &images, &masks, suffix, &mask_of);
    if (!rc) rc = check_pairs(images_dir, masks_dir, &images, &masks, &mask_of, suffix, o->ignore_unpaired_masks);
    for (int64_t i = 0; !rc && i < images.n; i++) {
        rc = cti_names_push(&ds->images, cti_path_join(images_dir, images.items[i]), FN);
        if (!rc) rc = cti_names_push(&ds->masks, cti_path_join(masks_dir, mask_of.items[i]), FN);
    }
    cti_names_free(&images);
    cti_names_free(&masks);
    cti_names_free(&mask_of);
    static const ct_dataset_vtable vt = {seg_len, seg_get, NULL, seg_free};
    ct_dataset *d = rc ? NULL : ct_dataset_new(&vt, ds);
    if (!d) seg_free(ds);
    return d;
}

/* Sample i of the segmentation folder d, or NULL + error naming fn. */
static const seg_ds *seg_of(const ct_dataset *d, int64_t i, const char *fn) {
    const seg_ds *ds = d ? cti_ds_self_if(d, seg_get) : NULL;
    if (!ds)
        ct_set_error(CT_EINVAL, "%s: %s", fn,
                     d ? "not a segmentation-folder dataset (ask the folder itself, not a subset or a transform of it)"
                       : "the dataset is NULL");
    else if (i < 0 || i >= ds->images.n) {
        ct_set_error(CT_EINDEX, "%s: sample %" PRId64 " is out of range [0, %" PRId64 ")", fn, i, ds->images.n);
        ds = NULL;
    }
    return ds;
}

const char *ct_segmentation_folder_image_path(const ct_dataset *d, int64_t i) {
    const seg_ds *ds = seg_of(d, i, "ct_segmentation_folder_image_path");
    return ds ? ds->images.items[i] : NULL;
}

const char *ct_segmentation_folder_mask_path(const ct_dataset *d, int64_t i) {
    const seg_ds *ds = seg_of(d, i, "ct_segmentation_folder_mask_path");
    return ds ? ds->masks.items[i] : NULL;
}
