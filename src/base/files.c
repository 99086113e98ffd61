/* src/base/files.c — directories, whole files and file checksums (see
 * files.h). */
#define _POSIX_C_SOURCE 200809L /* posix_fadvise */
#include "base/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/crc32.h"
#include "ctrial/ckpt.h" /* ct_file_sum */

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

int cti_make_dirs(const char *path, const char *what) {
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

/* ---- regular files only ------------------------------------------------------ */

static const char *file_kind(mode_t m) {
    return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISDIR(m)  ? "a directory" : S_ISSOCK(m) ? "a socket" : "of an unknown kind";
}

/* "WHO: PATH: ..." or "PATH: ..." */
static int file_error(int code, const char *who, const char *path, const char *what, const char *detail) {
    return ct_set_error(code, "%s%s%s: %s (%s)", who ? who : "", who ? ": " : "", path, what, detail);
}

int cti_check_regular(const char *path, const char *who) {
    struct stat st;
    if (stat(path, &st) != 0) return file_error(CT_EIO, who, path, "cannot open", strerror(errno));
    if (!S_ISREG(st.st_mode)) return file_error(CT_EIO, who, path, "not a regular file", file_kind(st.st_mode));
    return 0;
}

int cti_open_regular(const char *path, const char *who) {
    /* stat first: a device is never opened (opening one may do something),
     * and O_NONBLOCK keeps a FIFO that turns up in between from blocking
     * open(2); fstat then checks what was opened. */
    int rc = cti_check_regular(path, who);
    if (rc) return rc;
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return file_error(CT_EIO, who, path, "cannot open", strerror(errno));
    int flags;
    if (fstat(fd, &st) != 0) rc = file_error(CT_EIO, who, path, "cannot stat", strerror(errno));
    else if (!S_ISREG(st.st_mode)) rc = file_error(CT_EIO, who, path, "not a regular file", file_kind(st.st_mode));
    else if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        rc = file_error(CT_EIO, who, path, "cannot open", strerror(errno));
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

int cti_read_at(int fd, void *buf, size_t n, uint64_t at, uint64_t size, const char *who, const char *path) {
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return ct_set_error(CT_EIO, "%s: %s: cannot read bytes %llu..%llu (%s)", who, path,
                                (unsigned long long)at, (unsigned long long)(at + n), strerror(errno));
        if (r == 0) {
            struct stat st;
            unsigned long long now = fstat(fd, &st) == 0 ? (unsigned long long)st.st_size : at + got;
            return ct_set_error(CT_EIO, "%s: %s: the file changed while in use: it held %llu bytes when opened and "
                                        "holds %llu now, too few for bytes %llu..%llu (was it rewritten in place?)",
                                who, path, (unsigned long long)size, now, (unsigned long long)at,
                                (unsigned long long)(at + n));
        }
        got += (size_t)r;
    }
    return 0;
}

int cti_read_file_raw(const char *path, size_t max_bytes, char **data, size_t *size) {
    int fd = cti_open_regular(path, NULL);
    if (fd < 0) return fd;
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? 0 : ct_set_error(CT_EIO, "%s: cannot stat (%s)", path, strerror(errno));
    if (rc == 0 && (uint64_t)st.st_size > max_bytes)
        rc = ct_set_error(CT_EFORMAT, "%s: larger than %zu bytes (%lld)", path, max_bytes, (long long)st.st_size);
    /* Read to the end, not to st_size: the file may have changed since. */
    size_t cap = rc == 0 ? (size_t)st.st_size + 1 : 0, len = 0;
    char *buf = rc == 0 ? malloc(cap) : NULL;
    if (rc == 0 && !buf) rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", path);
    while (rc == 0) {
        if (len + 1 == cap) {
            if (len >= max_bytes) {
                rc = ct_set_error(CT_EFORMAT, "%s: larger than %zu bytes", path, max_bytes);
                break;
            }
            char *p = realloc(buf, cap * 2);
            if (!p) {
                rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", path);
                break;
            }
            buf = p;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + len, cap - 1 - len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) rc = ct_set_error(CT_EIO, "%s: read failed (%s)", path, strerror(errno));
        if (got <= 0) break;
        len += (size_t)got;
    }
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *data = buf;
    *size = len;
    return 0;
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

int cti_read_file(const char *path, unsigned char **data, size_t *size) {
    int fd = cti_open_regular(path, NULL);
    if (fd < 0) return fd;
    /* gzread passes a file without a gzip header through unchanged. */
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return ct_set_error(CT_ENOMEM, "%s: cannot open (out of memory)", path);
    }
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

int cti_files_checksum(const char *path, ct_file_sum *out) {
    if (!path || !out) return ct_set_error(CT_EINVAL, "ct_file_checksum: %s is NULL", !path ? "path" : "out");
    int fd = cti_open_regular(path, "ct_file_checksum");
    if (fd < 0) return fd;
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
        crc = cti_crc32(crc, buf, (size_t)got);
        total += (uint64_t)got;
    }
    free(buf);
    close(fd);
    if (rc) return rc;
    out->nbytes = total;
    out->crc32 = crc;
    return 0;
}

void cti_remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char child[4096];
            if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child) continue;
            struct stat st;
            if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode)) cti_remove_tree(child);
            else unlink(child);
        }
        closedir(d);
    }
    rmdir(path);
}
