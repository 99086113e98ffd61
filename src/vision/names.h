/* src/vision/names.h — file names for the folder datasets (folder.c,
 * segmentation.c): a growable list of strings, os.path.join, and
 * torchvision's image extensions. Internal to ctrial. */
#ifndef CTRIAL_VISION_NAMES_H
#define CTRIAL_VISION_NAMES_H

#include <stdbool.h>
#include <stdint.h>

/* A list of NEW strings, owned. Zero-initialised: empty. */
typedef struct {
    char **items;
    int64_t n, cap;
} cti_names;

void cti_names_free(cti_names *s);
/* Appends str (taken, also on failure; NULL: out of memory). Returns 0, or
 * CT_ENOMEM naming `fn`. */
int cti_names_push(cti_names *s, char *str, const char *fn);
/* Sorted by strcmp: Python's order for UTF-8 names. */
void cti_names_sort(cti_names *s);
/* The same order for qsort and bsearch over char * items. */
int cti_names_cmp(const void *a, const void *b);

/* os.path.join(dir, name): a '/' between them unless dir ends in one. NEW
 * string, or NULL. */
char *cti_path_join(const char *dir, const char *name);
/* Python's has_file_allowed_extension: the name ends in ext, ASCII letters
 * compared without case, whatever the locale. */
bool cti_name_ends_in(const char *name, const char *ext);

/* The entries of `dir` (not . and ..), split into the folders (symbolic
 * links followed: os.scandir's is_dir()) and the rest; only the names are
 * pushed, and either list may be NULL (not wanted). A folder that cannot be
 * read is CT_EIO naming `fn`, the folder and `what` it is ("the images
 * folder"; NULL: "the folder"). */
int cti_list_dir(const char *dir, cti_names *dirs, cti_names *files, const char *fn, const char *what);

/* torchvision.datasets.folder.IMG_EXTENSIONS */
#define CTI_IMG_EXTENSIONS 9
extern const char *const cti_img_extensions[CTI_IMG_EXTENSIONS];
/* Image files of formats ctrial does not decode: refused where they count. */
#define CTI_OTHER_IMAGE_FORMATS 7
extern const char *const cti_other_image_formats[CTI_OTHER_IMAGE_FORMATS];

#endif
