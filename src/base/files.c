/* src/base/files.c — directories, whole files and file checksums (see
 * files.h). */
#define _POSIX_C_SOURCE 200809L /* posix_fadvise */
#include "base/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/crc32.h"
#include "ctrial/ckpt.h" /* ct_file_checksum */

/* ---- directories ------------------------------------------------------------ */

/* One directory of `path`; an existing directory (or a link to one) is fine. */
static int make_dir(const char *dir, const char *what, const char *path) {
    if (mkdir(dir, 0777) == 0) return CT_OK;
    int err = errno;
    struct stat st;
    /* Checked after mkdir, not before: another process may create it too. */
    if (stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return CT_OK;
        err = ENOTDIR;
    }
    return ct_set_error(CT_EIO, "cannot create %s %s: %s: %s", what, path, dir, strerror(err));
}

int ct_make_dirs(const char *path, const char *what) {
    size_t n = strlen(path);
    char *p = malloc(n + 1);
    if (!p) return ct_set_error(CT_ENOMEM, "cannot create %s %s: out of memory", what, path);
    memcpy(p, path, n + 1);
    int rc = CT_OK;
    for (size_t i = 1; i <= n && rc == CT_OK; i++) {
        if ((p[i] != '/' && p[i] != '\0') || p[i - 1] == '/') continue;
        char saved = p[i];
        p[i] = '\0';
        rc = make_dir(p, what, path);
        p[i] = saved;
    }
    free(p);
    return rc;
}

/* ---- whole files, plain or gzip --------------------------------------------- */

static int gz_fail(gzFile f, const char *path) {
    int err = 0;
    const char *msg = gzerror(f, &err);
    if (err == Z_ERRNO)
        return ct_set_error(CT_EIO, "%s: read failed (%s)", path, strerror(errno));
    if (err == Z_MEM_ERROR) return ct_set_error(CT_ENOMEM, "%s: out of memory while reading", path);
    return ct_set_error(CT_EFORMAT, "%s: damaged gzip data (%s)", path, msg ? msg : "unknown error");
}

int ct_read_file(const char *path, unsigned char **data, size_t *size) {
    errno = 0;
    /* gzread passes a file without a gzip header through unchanged. */
    gzFile f = gzopen(path, "rb");
    if (!f)
        return ct_set_error(CT_EIO, "%s: cannot open (%s)", path,
                            errno ? strerror(errno) : "out of memory");
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    int rc = buf ? 0 : ct_set_error(CT_ENOMEM, "%s: out of host memory", path);
    while (rc == 0) {
        if (len == cap) {
            unsigned char *p = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!p) {
                rc = ct_set_error(CT_ENOMEM, "%s: out of host memory after %zu bytes", path, len);
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t room = cap - len;
        unsigned chunk = room > (1u << 30) ? 1u << 30 : (unsigned)room;
        int got = gzread(f, buf + len, chunk);
        if (got < 0) rc = gz_fail(f, path);
        else if (got == 0) break;
        else len += (size_t)got;
    }
    /* A gzip stream cut short reads as an early end; gzclose tells. */
    int closed = gzclose(f);
    if (rc == 0 && closed == Z_BUF_ERROR)
        rc = ct_set_error(CT_EFORMAT, "%s: gzip data ends early (the file is truncated)", path);
    else if (rc == 0 && closed != Z_OK)
        rc = ct_set_error(CT_EIO, "%s: closing failed (zlib error %d)", path, closed);
    if (rc) {
        free(buf);
        return rc;
    }
    *data = buf;
    *size = len;
    return 0;
}

/* ---- checksums ----------------------------------------------------------------- */

int ct_file_checksum(const char *path, ct_file_sum *out) {
    if (!path || !out) return ct_set_error(CT_EINVAL, "ct_file_checksum: %s is NULL", !path ? "path" : "out");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ct_set_error(CT_EIO, "ct_file_checksum: %s: cannot open (%s)", path, strerror(errno));
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    enum { CHUNK = 4 << 20 };
    unsigned char *buf = malloc(CHUNK);
    int rc = buf ? 0 : ct_set_error(CT_ENOMEM, "ct_file_checksum: %s: out of host memory", path);
    uint64_t total = 0;
    uint32_t crc = 0;
    while (rc == 0) {
        ssize_t got = read(fd, buf, CHUNK);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) rc = ct_set_error(CT_EIO, "ct_file_checksum: %s: read failed after %llu bytes (%s)",
                                       path, (unsigned long long)total, strerror(errno));
        if (got <= 0) break;
        crc = ct_crc32(crc, buf, (size_t)got);
        total += (uint64_t)got;
    }
    free(buf);
    close(fd);
    if (rc) return rc;
    out->nbytes = total;
    out->crc32 = crc;
    return 0;
}
