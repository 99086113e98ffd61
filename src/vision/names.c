/* src/vision/names.c — file names for the folder datasets (names.h). */
#define _DEFAULT_SOURCE /* struct dirent's d_type (DT_DIR...): no stat() per file */
#include "vision/names.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

int cti_list_dir(const char *dir, cti_names *dirs, cti_names *files, const char *fn, const char *what) {
    char folder[64];
    snprintf(folder, sizeof folder, "%s%sfolder", what ? what : "", what ? " " : "");
    DIR *d = opendir(dir);
    if (!d) return ct_set_error(CT_EIO, "%s: %s: cannot read the %s (%s)", fn, dir, folder, strerror(errno));
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno) rc = ct_set_error(CT_EIO, "%s: %s: cannot read the %s (%s)", fn, dir, folder, strerror(errno));
            break;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        bool is_dir;
#ifdef _DIRENT_HAVE_D_TYPE
        if (e->d_type == DT_DIR) is_dir = true;
        else if (e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) is_dir = false;
        else
#endif
        {
            char *p = cti_path_join(dir, e->d_name);
            struct stat st;
            if (!p) {
                rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
                break;
            }
            is_dir = stat(p, &st) == 0 && S_ISDIR(st.st_mode); /* a broken link is a file, as in Python */
            free(p);
        }
        cti_names *to = is_dir ? dirs : files;
        if (to && (rc = cti_names_push(to, strdup(e->d_name), fn)) != 0) break;
    }
    closedir(d);
    return rc;
}
