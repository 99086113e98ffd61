/* src/vision/folder.c — torchvision's ImageFolder (vision.h:
 * ct_dataset_image_folder and its accessors).
 *
 * The file list is torchvision.datasets.folder's, built once at creation:
 * find_classes (root's sub-folders, symbolic links to folders included,
 * sorted) and make_dataset (per class, os.walk(followlinks=True) with its
 * (root, dirs, files) tuples sorted, which orders the folders by their
 * whole path string, and each folder's files sorted; a file counts when
 * its lower-cased path ends in one of the extensions). Strings sort by
 * strcmp, which is Python's order for UTF-8 names. A folder reached again
 * through a symbolic link under itself is not walked again (os.walk would
 * go round until the path is too long). The dataset is then immutable:
 * get() reads and decodes one file into a buffer of its own, so the
 * loader's workers call it concurrently.
 */

#define _POSIX_C_SOURCE 200809L /* struct stat, dev_t, ino_t */

#include "ctrial/vision.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/dataset.h"
#include "vision/folder.h"
#include "vision/names.h"
#include "vision/image.h"

#define FN "ct_dataset_image_folder"

typedef struct {
    ct_image_mode mode;
    cti_names classes;
    cti_names paths;   /* the samples' files */
    int64_t *labels; /* their classes, paths.n of them */
} folder_ds;

/* One folder that os.walk yields: its path and its sorted files. */
typedef struct {
    char *path;
    cti_names files;
} walked;

typedef struct {
    walked *w;
    int64_t n, cap;
} walk_list;

static void walk_list_free(walk_list *l) {
    for (int64_t i = 0; i < l->n; i++) {
        free(l->w[i].path);
        cti_names_free(&l->w[i].files);
    }
    free(l->w);
    *l = (walk_list){0};
}

/* The folders on the way down from the class folder, to stop at a cycle. */
typedef struct ancestor {
    dev_t dev;
    ino_t ino;
    const struct ancestor *up;
} ancestor;

/* os.walk(dir, followlinks=True): `dir` (taken) and every folder under it
 * into l, each with its files. */
static int walk(char *dir, const ancestor *up, walk_list *l) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        int rc = ct_set_error(CT_EIO, FN ": %s: cannot read the folder (%s)", dir, strerror(errno));
        free(dir);
        return rc;
    }
    for (const ancestor *a = up; a; a = a->up)
        if (a->dev == st.st_dev && a->ino == st.st_ino) { /* a link back up: walked already */
            free(dir);
            return 0;
        }
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 16;
        walked *w = realloc(l->w, (size_t)cap * sizeof *w);
        if (!w) {
            free(dir);
            return ct_set_error(CT_ENOMEM, FN ": out of host memory");
        }
        l->w = w;
        l->cap = cap;
    }
    walked *me = &l->w[l->n++];
    *me = (walked){.path = dir};
    cti_names subdirs = {0};
    int rc = cti_list_dir(dir, &subdirs, &me->files, FN, NULL);
    cti_names_sort(&me->files); /* me stays valid until the walks below grow l */
    ancestor here = {st.st_dev, st.st_ino, up};
    for (int64_t i = 0; !rc && i < subdirs.n; i++) {
        char *sub = cti_path_join(dir, subdirs.items[i]);
        rc = sub ? walk(sub, &here, l) : ct_set_error(CT_ENOMEM, FN ": out of host memory");
    }
    cti_names_free(&subdirs);
    return rc;
}

static int by_path(const void *a, const void *b) {
    return strcmp(((const walked *)a)->path, ((const walked *)b)->path);
}

static void folder_free(void *self) {
    folder_ds *ds = self;
    if (!ds) return;
    cti_names_free(&ds->classes);
    cti_names_free(&ds->paths);
    free(ds->labels);
    free(ds);
}

static int64_t folder_len(void *self) { return ((folder_ds *)self)->paths.n; }

/* Sample `index`: (img, its label); takes img. NULL + error when img is. */
static ct_value *sample_of(const folder_ds *ds, int64_t index, ct_tensor *img) {
    if (!img) return NULL;
    ct_tensor *label = ct_scalar_tensor((double)ds->labels[index], &(ct_topts){.dtype = CT_I64});
    return cti_ds_pack(2, (ct_tensor *[]){img, label});
}

static ct_value *folder_get(void *self, int64_t index) {
    const folder_ds *ds = self;
    return sample_of(ds, index, cti_image_read_as_pil(ds->paths.items[index], ds->mode, NULL, NULL));
}

/* Does this file count? CT_ENOTSUP for one that counts and that ctrial
 * cannot decode. */
static int counts(const char *path, const char *const *ext, int n_ext, bool *yes) {
    *yes = false;
    for (int i = 0; i < n_ext && !*yes; i++) *yes = cti_name_ends_in(path, ext[i]);
    if (!*yes) return 0;
    for (size_t i = 0; i < CTI_OTHER_IMAGE_FORMATS; i++)
        if (cti_name_ends_in(path, cti_other_image_formats[i]))
            return ct_set_error(CT_ENOTSUP, FN ": %s: a %s file; ctrial decodes JPEG and PNG only (pass extensions "
                                            "{\".jpg\", \".jpeg\", \".png\"} to leave such files out)",
                                path, cti_other_image_formats[i]);
    return 0;
}

/* Class `label`'s samples: make_dataset's loop body for one class. */
static int add_class(folder_ds *ds, const char *root, int64_t label, const char *const *ext, int n_ext,
                     int64_t *found) {
    walk_list l = {0};
    char *top = cti_path_join(root, ds->classes.items[label]);
    int rc = top ? walk(top, NULL, &l) : ct_set_error(CT_ENOMEM, FN ": out of host memory");
    if (!rc && l.n > 1) qsort(l.w, (size_t)l.n, sizeof *l.w, by_path);
    *found = 0;
    for (int64_t i = 0; !rc && i < l.n; i++)
        for (int64_t k = 0; !rc && k < l.w[i].files.n; k++) {
            char *path = cti_path_join(l.w[i].path, l.w[i].files.items[k]);
            bool yes = false;
            rc = path ? counts(path, ext, n_ext, &yes) : ct_set_error(CT_ENOMEM, FN ": out of host memory");
            if (rc || !yes) {
                free(path);
                continue;
            }
            if (ds->paths.n == ds->paths.cap) { /* labels grow with paths */
                int64_t *lab = realloc(ds->labels, (size_t)(ds->paths.cap ? 2 * ds->paths.cap : 16) * sizeof *lab);
                if (!lab) {
                    free(path);
                    rc = ct_set_error(CT_ENOMEM, FN ": out of host memory");
                    break;
                }
                ds->labels = lab;
            }
            ds->labels[ds->paths.n] = label;
            rc = cti_names_push(&ds->paths, path, FN);
            *found += !rc;
        }
    walk_list_free(&l);
    return rc;
}

/* find_classes: root's sub-folders, sorted. */
static int find_classes(folder_ds *ds, const char *root) {
    struct stat st;
    if (stat(root, &st) != 0)
        return ct_set_error(CT_EIO, FN ": %s: cannot open the root folder (%s)", root, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return ct_set_error(CT_EIO, FN ": %s: the root is not a folder", root);
    int rc = cti_list_dir(root, &ds->classes, NULL, FN, NULL);
    if (rc) return rc;
    if (ds->classes.n == 0)
        return ct_set_error(CT_EINVAL, FN ": %s: no class folder in it (each class is a sub-folder of the root)",
                            root);
    cti_names_sort(&ds->classes);
    return 0;
}

ct_image_folder_opts ct_image_folder_defaults(void) {
    return (ct_image_folder_opts){.mode = CT_IMAGE_RGB, .extensions = NULL, .num_extensions = 0,
                                  .allow_empty = false};
}

static int check_opts(const char *root, const ct_image_folder_opts *o) {
    if (!root) return ct_set_error(CT_EINVAL, FN ": root is NULL");
    if ((int)o->mode < (int)CT_IMAGE_UNCHANGED || (int)o->mode > (int)CT_IMAGE_RGB_ALPHA)
        return ct_set_error(CT_EINVAL, FN ": %s: mode %d is not a ct_image_mode", root, (int)o->mode);
    if (o->extensions && o->num_extensions < 1)
        return ct_set_error(CT_EINVAL, FN ": %s: num_extensions is %d; must be >= 1 when extensions is given", root,
                            o->num_extensions);
    for (int i = 0; o->extensions && i < o->num_extensions; i++)
        if (!o->extensions[i]) return ct_set_error(CT_EINVAL, FN ": %s: extension %d is NULL", root, i);
    return 0;
}

/* CT_EINVAL naming the classes without a file (as torchvision's
 * FileNotFoundError), at most as many as fit. */
static int empty_classes_error(const folder_ds *ds, const char *root, const int64_t *found,
                               const char *const *ext, int n_ext) {
    char names[512] = "", exts[256] = "";
    size_t at = 0;
    for (int64_t k = 0; k < ds->classes.n; k++) {
        if (found[k]) continue;
        const char *name = ds->classes.items[k];
        if (at + strlen(name) + 4 + 8 > sizeof names) { /* room kept for ", ..." */
            memcpy(names + at, ", ...", 6);
            break;
        }
        at += (size_t)snprintf(names + at, sizeof names - at, "%s'%s'", at ? ", " : "", name);
    }
    for (int i = 0, e = 0; i < n_ext; i++) {
        int w = snprintf(exts + e, sizeof exts - (size_t)e, "%s%s", e ? " " : "", ext[i]);
        if (w < 0 || (size_t)w >= sizeof exts - (size_t)e) break;
        e += w;
    }
    return ct_set_error(CT_EINVAL, FN ": %s: no file that counts in the class folder(s) %s (extensions: %s; set "
                                     "allow_empty to allow empty classes)", root, names, exts);
}

ct_dataset *ct_dataset_image_folder(const char *root, const ct_image_folder_opts *o) {
    ct_image_folder_opts defaults = ct_image_folder_defaults();
    if (!o) o = &defaults;
    if (check_opts(root, o)) return NULL;
    const char *const *ext = o->extensions ? o->extensions : cti_img_extensions;
    int n_ext = o->extensions ? o->num_extensions : CTI_IMG_EXTENSIONS;
    folder_ds *ds = calloc(1, sizeof *ds);
    if (!ds) {
        ct_set_error(CT_ENOMEM, FN ": out of host memory");
        return NULL;
    }
    ds->mode = o->mode;
    int rc = find_classes(ds, root);
    int64_t *found = rc ? NULL : calloc((size_t)ds->classes.n, sizeof *found);
    if (!rc && !found) rc = ct_set_error(CT_ENOMEM, FN ": out of host memory");
    bool any_empty = false;
    for (int64_t k = 0; !rc && k < ds->classes.n; k++) {
        rc = add_class(ds, root, k, ext, n_ext, &found[k]);
        any_empty |= found[k] == 0;
    }
    if (!rc && any_empty && !o->allow_empty) rc = empty_classes_error(ds, root, found, ext, n_ext);
    free(found);
    static const ct_dataset_vtable vt = {folder_len, folder_get, NULL, folder_free};
    ct_dataset *d = rc ? NULL : ct_dataset_new(&vt, ds);
    if (!d) folder_free(ds);
    return d;
}

/* d's folder, or NULL + CT_EINVAL naming `fn`. */
static const folder_ds *folder_of(const ct_dataset *d, const char *fn) {
    const folder_ds *ds = d ? cti_ds_self_if(d, folder_get) : NULL;
    if (!ds)
        ct_set_error(CT_EINVAL, "%s: %s", fn,
                     d ? "not an image-folder dataset (ask the folder itself, not a subset or a transform of it)"
                       : "the dataset is NULL");
    return ds;
}

int64_t ct_image_folder_num_classes(const ct_dataset *d) {
    const folder_ds *ds = folder_of(d, "ct_image_folder_num_classes");
    return ds ? ds->classes.n : CT_EINVAL;
}

const char *ct_image_folder_class(const ct_dataset *d, int64_t k) {
    const folder_ds *ds = folder_of(d, "ct_image_folder_class");
    if (ds && (k < 0 || k >= ds->classes.n)) {
        ct_set_error(CT_EINDEX, "ct_image_folder_class: class %" PRId64 " is out of range [0, %" PRId64 ")", k,
                     ds->classes.n);
        return NULL;
    }
    return ds ? ds->classes.items[k] : NULL;
}

const char *ct_image_folder_path(const ct_dataset *d, int64_t i) {
    const folder_ds *ds = folder_of(d, "ct_image_folder_path");
    if (ds && (i < 0 || i >= ds->paths.n)) {
        ct_set_error(CT_EINDEX, "ct_image_folder_path: sample %" PRId64 " is out of range [0, %" PRId64 ")", i,
                     ds->paths.n);
        return NULL;
    }
    return ds ? ds->paths.items[i] : NULL;
}

bool cti_image_folder_is(const ct_dataset *d) { return d && cti_ds_self_if(d, folder_get); }

/* ==== transformed as decoded (ct_dataset_transform of a folder) =========== */

typedef struct {
    ct_dataset *folder; /* a reference of our own */
    const folder_ds *ds;
    ct_transform *t;
} folder_tf;

static int64_t folder_tf_len(void *self) { return ((folder_tf *)self)->ds->paths.n; }

static ct_value *folder_tf_get(void *self, int64_t index, uint64_t seed) {
    const folder_tf *f = self;
    ct_rng *rng = ct_rng_new(seed);
    ct_tensor *img = rng ? cti_image_read_as_pil(f->ds->paths.items[index], f->ds->mode, f->t, rng) : NULL;
    ct_rng_free(rng);
    return sample_of(f->ds, index, img);
}

static void folder_tf_free(void *self) {
    folder_tf *f = self;
    ct_dataset_free(f->folder);
    ct_transform_free(f->t);
    free(f);
}

ct_dataset *cti_image_folder_transformed(ct_dataset *d, ct_transform *t) {
    folder_tf *f = malloc(sizeof *f);
    if (!f) {
        ct_transform_free(t);
        ct_set_error(CT_ENOMEM, "ct_dataset_transform: out of host memory");
        return NULL;
    }
    *f = (folder_tf){ct_dataset_ref(d), cti_ds_self_if(d, folder_get), t};
    static const ct_dataset_vtable vt = {folder_tf_len, NULL, NULL, folder_tf_free};
    static const cti_ds_seeded sv = {folder_tf_get, NULL};
    ct_dataset *out = cti_ds_new_seeded(&vt, &sv, f);
    if (!out) folder_tf_free(f);
    return out;
}
