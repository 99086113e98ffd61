/* src/vision/names.c — file names for the folder datasets (names.h). */
#include "vision/names.h"

#include <stdlib.h>
#include <string.h>

#include "ctrial/error.h"

const char *const cti_img_extensions[CTI_IMG_EXTENSIONS] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp",
                                                            ".pgm", ".tif",  ".tiff", ".webp"};
const char *const cti_other_image_formats[CTI_OTHER_IMAGE_FORMATS] = {".ppm",  ".bmp",  ".pgm", ".tif",
                                                                      ".tiff", ".webp", ".gif"};

void cti_names_free(cti_names *s) {
    for (int64_t i = 0; i < s->n; i++) free(s->items[i]);
    free(s->items);
    *s = (cti_names){0};
}

int cti_names_push(cti_names *s, char *str, const char *fn) {
    if (!str) return ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 16;
        char **items = realloc(s->items, (size_t)cap * sizeof *items);
        if (!items) {
            free(str);
            return ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
        }
        s->items = items;
        s->cap = cap;
    }
    s->items[s->n++] = str;
    return 0;
}

int cti_names_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void cti_names_sort(cti_names *s) {
    if (s->n > 1) qsort(s->items, (size_t)s->n, sizeof *s->items, cti_names_cmp);
}

char *cti_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    bool slash = a > 0 && dir[a - 1] != '/';
    char *p = malloc(a + slash + b + 1);
    if (!p) return NULL;
    memcpy(p, dir, a);
    if (slash) p[a] = '/';
    memcpy(p + a + slash, name, b + 1);
    return p;
}

static int ascii_lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

bool cti_name_ends_in(const char *name, const char *ext) {
    size_t n = strlen(name), e = strlen(ext);
    if (e > n) return false;
    for (size_t i = 0; i < e; i++)
        if (ascii_lower((unsigned char)name[n - e + i]) != ascii_lower((unsigned char)ext[i])) return false;
    return true;
}
