/* src/pth/zip_write.c — a streaming zip writer laid out exactly as
 * PyTorch's (caffe2::serialize::PyTorchStreamWriter on miniz) lays out the
 * files of torch.save:
 *
 *  - every entry stored (no compression), flags 0x0808 (UTF-8 name, sizes
 *    and CRC in a data descriptor after the data), times and versions 0;
 *  - each local header ends with an extra field "FB" of 'Z' bytes that
 *    pads the data to a multiple of 64 bytes in the file, so that a reader
 *    may map storages in place;
 *  - an entry of 4 GiB or more, or one starting past 4 GiB, carries a zip64
 *    extra field (in its local header: the size, a zero compressed size
 *    and/or the header offset, as miniz writes them; in the central
 *    directory: whichever fields overflow) and a 24-byte descriptor;
 *  - the archive always ends with a zip64 end record, its locator and the
 *    classic end record;
 *  - finishing writes <archive>/version and <archive>/.data/serialization_id
 *    last, as PyTorch's writer does.
 *
 * Headers, descriptors and small entries collect in one buffer that goes
 * out in a single write; large entry data is written straight from the
 * caller's memory. The CRC-32 of the whole file is assembled on the way
 * (buffers as they are flushed, large entries from their CRCs with
 * crc32_combine), so nothing is read back.
 */
#define _POSIX_C_SOURCE 200809L /* fsync */
#include "pth/pth.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    ALIGN = 64,                 /* storage data alignment in the file */
    BUF_SIZE = 256 << 10,       /* the header buffer */
    SMALL_ENTRY = 64 << 10,     /* entries up to this size go through the buffer */
    MAX_WRITE = 1 << 30,        /* bytes per write(2) */
};
#define U32_MAX_FIELD 0xFFFFFFFFu

typedef struct {
    char *name;      /* full name, <archive>/<record> */
    uint64_t header; /* local header offset */
    uint64_t size;
    uint32_t crc;
    bool big_size, big_offset; /* which fields need zip64 */
} zentry;

struct cti_pth_zw {
    int fd;
    char *path;
    char *archive;
    bool zip64_all;
    unsigned char *buf;
    size_t blen;
    uint64_t pos;          /* file offset after everything buffered */
    uint32_t file_crc;     /* CRC of the bytes written out so far */
    uint64_t file_written; /* how many bytes that is */
    zentry *entries;
    size_t n, cap;
    /* The entry between begin and end. */
    bool in_entry, buffered;
    uint64_t expect, got;
    /* For .data/serialization_id: hashes of the record names and CRCs. */
    uint64_t name_hash, crc_hash;
};

/* ---- output --------------------------------------------------------------------- */

static int write_all(cti_pth_zw *w, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t put = write(w->fd, p, n > MAX_WRITE ? MAX_WRITE : n);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0)
            return ct_set_error(CT_EIO, "ct_pth_save: %s: write failed at byte %" PRIu64 " (%s)", w->path,
                                w->file_written, put < 0 ? strerror(errno) : "nothing written");
        p += put;
        n -= (size_t)put;
        w->file_written += (uint64_t)put;
    }
    return 0;
}

static int flush(cti_pth_zw *w) {
    if (w->blen == 0) return 0;
    w->file_crc = cti_crc32(w->file_crc, w->buf, w->blen);
    int rc = write_all(w, w->buf, w->blen);
    w->blen = 0;
    return rc;
}

/* Appends to the buffer (flushing first when it is full). */
static int put(cti_pth_zw *w, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n > 0) {
        if (w->blen == BUF_SIZE && flush(w)) return ct_last_code();
        size_t room = BUF_SIZE - w->blen, take = n < room ? n : room;
        memcpy(w->buf + w->blen, p, take);
        w->blen += take;
        w->pos += take;
        p += take;
        n -= take;
    }
    return 0;
}

/* Little-endian fields into a header under construction. */
static unsigned char *le16(unsigned char *p, uint64_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}
static unsigned char *le32(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
    return p + 4;
}
static unsigned char *le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
    return p + 8;
}

/* ---- open ------------------------------------------------------------------------ */

static char *copy_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

cti_pth_zw *cti_pth_zw_open(const char *path, const char *archive, bool force_zip64) {
    cti_pth_zw *w = calloc(1, sizeof *w);
    if (w) {
        w->fd = -1;
        w->path = copy_str(path);
        w->archive = copy_str(archive);
        w->buf = malloc(BUF_SIZE);
        w->zip64_all = force_zip64;
        w->name_hash = 0xcbf29ce484222325ull;
    }
    if (!w || !w->path || !w->archive || !w->buf) {
        ct_set_error(CT_ENOMEM, "ct_pth_save: %s: out of host memory", path);
        cti_pth_zw_abort(w);
        return NULL;
    }
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (w->fd < 0) {
        ct_set_error(CT_EIO, "ct_pth_save: %s: cannot create (%s)", path, strerror(errno));
        cti_pth_zw_abort(w);
        return NULL;
    }
    return w;
}

void cti_pth_zw_abort(cti_pth_zw *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    for (size_t i = 0; i < w->n; i++) free(w->entries[i].name);
    free(w->entries);
    free(w->buf);
    free(w->archive);
    free(w->path);
    free(w);
}

/* ---- entries ---------------------------------------------------------------------- */

/* c10::hash_combine, for the serialization id. */
static uint64_t hash_combine(uint64_t seed, uint64_t v) {
    return seed ^ (v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
}

int cti_pth_zw_begin(cti_pth_zw *w, const char *record, uint64_t size) {
    if (w->in_entry) return ct_set_error(CT_ESTATE, "ct_pth_save: %s: entry %s begun inside another", w->path, record);
    size_t alen = strlen(w->archive), rlen = strlen(record), nlen = alen + 1 + rlen;
    if (nlen > 0xFFFF)
        return ct_set_error(CT_EINVAL, "ct_pth_save: %s: entry name of %zu bytes is too long for a zip", w->path, nlen);
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 32;
        zentry *p = realloc(w->entries, cap * sizeof *p);
        if (!p) return ct_set_error(CT_ENOMEM, "ct_pth_save: %s: out of host memory", w->path);
        w->entries = p;
        w->cap = cap;
    }
    zentry *e = &w->entries[w->n];
    e->name = malloc(nlen + 1);
    if (!e->name) return ct_set_error(CT_ENOMEM, "ct_pth_save: %s: out of host memory", w->path);
    memcpy(e->name, w->archive, alen);
    e->name[alen] = '/';
    memcpy(e->name + alen + 1, record, rlen + 1);
    e->header = w->pos;
    e->size = size;
    e->crc = 0;
    e->big_size = w->zip64_all || size >= U32_MAX_FIELD;
    e->big_offset = w->zip64_all || e->header >= U32_MAX_FIELD;
    w->n++;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the record name */
    for (size_t i = 0; i < rlen; i++) h = (h ^ (unsigned char)record[i]) * 0x100000001b3ull;
    w->name_hash = hash_combine(w->name_hash, h);

    /* Local header, zip64 extra field, then "FB" padding up to alignment. */
    size_t z64 = (e->big_size ? 16 : 0) + (e->big_offset ? 8 : 0);
    uint64_t start = e->header + 30 + nlen + 4 + (z64 ? 4 + z64 : 0);
    size_t pad = (size_t)((ALIGN - start % ALIGN) % ALIGN);
    unsigned char h30[30 + 4 + 24 + 4], *p = h30;
    p = le32(p, 0x04034b50);
    p = le16(p, 0);      /* version needed (PyTorch writes 0) */
    p = le16(p, 0x0808); /* UTF-8 name, data descriptor */
    p = le16(p, 0);      /* stored */
    p = le32(p, 0);      /* time, date */
    p = le32(p, 0);      /* CRC: in the descriptor */
    p = le32(p, 0);      /* compressed size */
    p = le32(p, 0);      /* size */
    p = le16(p, nlen);
    p = le16(p, (z64 ? 4 + z64 : 0) + 4 + pad);
    int rc = put(w, h30, (size_t)(p - h30));
    if (!rc) rc = put(w, e->name, nlen);
    p = h30;
    if (z64) {
        p = le16(p, 0x0001);
        p = le16(p, z64);
        if (e->big_size) p = le64(le64(p, size), 0);
        if (e->big_offset) p = le64(p, e->header);
    }
    p = le16(p, 'F' | 'B' << 8);
    p = le16(p, pad);
    if (!rc) rc = put(w, h30, (size_t)(p - h30));
    unsigned char zz[ALIGN];
    memset(zz, 'Z', sizeof zz);
    if (!rc) rc = put(w, zz, pad);
    if (rc) return rc;
    w->in_entry = true;
    w->buffered = size <= SMALL_ENTRY;
    w->expect = size;
    w->got = 0;
    return 0;
}

int cti_pth_zw_data(cti_pth_zw *w, const void *data, size_t n) {
    if (!w->in_entry || n > w->expect - w->got)
        return ct_set_error(CT_ESTATE, "ct_pth_save: %s: %zu bytes of data beyond the entry's %" PRIu64, w->path,
                            n, w->expect);
    w->got += n;
    if (w->buffered) return put(w, data, n);
    if (flush(w)) return ct_last_code();
    w->pos += n;
    return write_all(w, data, n);
}

int cti_pth_zw_end(cti_pth_zw *w, uint32_t crc) {
    zentry *e = &w->entries[w->n - 1];
    if (!w->in_entry || w->got != w->expect)
        return ct_set_error(CT_ESTATE, "ct_pth_save: %s: entry %s ended after %" PRIu64 " of %" PRIu64 " bytes",
                            w->path, e->name, w->got, w->expect);
    w->in_entry = false;
    e->crc = crc;
    w->crc_hash = hash_combine(w->crc_hash, crc);
    /* Unbuffered data went out unseen by flush: account for it now. */
    if (!w->buffered) {
        w->file_crc = cti_crc32_combine(w->file_crc, crc, e->size);
    }
    unsigned char d[24], *p = d;
    p = le32(p, 0x08074b50);
    p = le32(p, crc);
    if (e->big_size || e->big_offset) p = le64(le64(p, e->size), e->size);
    else p = le32(le32(p, e->size), e->size);
    return put(w, d, (size_t)(p - d));
}

int cti_pth_zw_entry(cti_pth_zw *w, const char *record, const void *data, size_t n) {
    int rc = cti_pth_zw_begin(w, record, n);
    if (!rc) rc = cti_pth_zw_data(w, data, n);
    if (!rc) rc = cti_pth_zw_end(w, cti_crc32(0, data, n));
    return rc;
}

/* ---- the end ---------------------------------------------------------------------- */

static int put_central_directory(cti_pth_zw *w) {
    for (size_t i = 0; i < w->n; i++) {
        const zentry *e = &w->entries[i];
        size_t nlen = strlen(e->name);
        size_t z64 = (e->big_size ? 16 : 0) + (e->big_offset ? 8 : 0);
        unsigned char h[46 + 4 + 24], *p = h;
        p = le32(p, 0x02014b50);
        p = le16(p, 0); /* made by */
        p = le16(p, 0); /* needed */
        p = le16(p, 0x0808);
        p = le16(p, 0);
        p = le32(p, 0);
        p = le32(p, e->crc);
        p = le32(p, e->big_size ? U32_MAX_FIELD : e->size);
        p = le32(p, e->big_size ? U32_MAX_FIELD : e->size);
        p = le16(p, nlen);
        p = le16(p, z64 ? 4 + z64 : 0);
        p = le16(p, 0); /* comment */
        p = le16(p, 0); /* disk */
        p = le16(p, 0); /* internal attributes */
        p = le32(p, 0); /* external attributes */
        p = le32(p, e->big_offset ? U32_MAX_FIELD : e->header);
        if (put(w, h, (size_t)(p - h)) || put(w, e->name, nlen)) return ct_last_code();
        if (z64) {
            p = h;
            p = le16(p, 0x0001);
            p = le16(p, z64);
            if (e->big_size) p = le64(le64(p, e->size), e->size);
            if (e->big_offset) p = le64(p, e->header);
            if (put(w, h, (size_t)(p - h))) return ct_last_code();
        }
    }
    return 0;
}

static int put_end_records(cti_pth_zw *w, uint64_t cd_offset, uint64_t cd_size) {
    uint64_t z64_offset = w->pos;
    unsigned char h[56 + 20 + 22], *p = h;
    /* zip64 end of central directory record */
    p = le32(p, 0x06064b50);
    p = le64(p, 44);
    p = le16(p, 0x031e); /* made by: UNIX, 3.0 */
    p = le16(p, 45);     /* needed: 4.5 (zip64) */
    p = le32(p, 0);
    p = le32(p, 0);
    p = le64(p, w->n);
    p = le64(p, w->n);
    p = le64(p, cd_size);
    p = le64(p, cd_offset);
    /* its locator */
    p = le32(p, 0x07064b50);
    p = le32(p, 0);
    p = le64(p, z64_offset);
    p = le32(p, 1);
    /* end of central directory record */
    bool all = w->zip64_all;
    uint64_t count = all || w->n >= 0xFFFF ? 0xFFFF : w->n;
    p = le32(p, 0x06054b50);
    p = le32(p, 0);
    p = le16(p, count);
    p = le16(p, count);
    p = le32(p, all || cd_size >= U32_MAX_FIELD ? U32_MAX_FIELD : cd_size);
    p = le32(p, all || cd_offset >= U32_MAX_FIELD ? U32_MAX_FIELD : cd_offset);
    p = le16(p, 0);
    return put(w, h, (size_t)(p - h));
}

int cti_pth_zw_finish(cti_pth_zw *w, bool fsync_file, ct_file_sum *sum) {
    int rc = w->in_entry ? ct_set_error(CT_ESTATE, "ct_pth_save: %s: finished inside an entry", w->path) : 0;
    if (!rc) rc = cti_pth_zw_entry(w, "version", "3\n", 2);
    if (!rc) {
        char id[48];
        snprintf(id, sizeof id, "%020" PRIu64 "%020" PRIu64, w->name_hash, w->crc_hash);
        rc = cti_pth_zw_entry(w, ".data/serialization_id", id, 40);
    }
    uint64_t cd_offset = w->pos;
    if (!rc) rc = put_central_directory(w);
    if (!rc) rc = put_end_records(w, cd_offset, w->pos - cd_offset);
    if (!rc) rc = flush(w);
    if (!rc && fsync_file && fsync(w->fd) != 0)
        rc = ct_set_error(CT_EIO, "ct_pth_save: %s: fsync failed (%s)", w->path, strerror(errno));
    if (!rc) {
        int fd = w->fd;
        w->fd = -1;
        if (close(fd) != 0) rc = ct_set_error(CT_EIO, "ct_pth_save: %s: close failed (%s)", w->path, strerror(errno));
    }
    if (!rc && sum) {
        sum->nbytes = w->file_written;
        sum->crc32 = w->file_crc;
    }
    cti_pth_zw_abort(w);
    return rc;
}
