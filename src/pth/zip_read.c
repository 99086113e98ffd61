/* src/pth/zip_read.c — the directory of a zip archive written by
 * torch.save (or by any zip writer that stores entries uncompressed).
 *
 * The end of central directory record is found at the end of the file (its
 * comment may push it back by up to 64 KiB); when a zip64 locator precedes
 * it, the zip64 end record gives the real counts, sizes and offsets. The
 * central directory is then read in one piece and each entry's local header
 * once, to find where its data starts. Every number is untrusted: each is
 * checked against the bytes that exist before it is used, so a damaged
 * archive costs an error message naming the entry and the field, never a
 * crash or an allocation larger than the file.
 */
#define _POSIX_C_SOURCE 200809L /* pread */
#include "pth/pth.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    EOCD_SIZE = 22,
    LOCATOR_SIZE = 20,
    ZIP64_EOCD_SIZE = 56,
    CD_HEADER_SIZE = 46,
    LOCAL_HEADER_SIZE = 30,
    MAX_COMMENT = 0xFFFF,
};
#define MAX_CD_SIZE ((uint64_t)1 << 30) /* a central directory of ~10M entries */

/* ---- sources ------------------------------------------------------------------- */

int cti_pth_src_read(const cti_pth_src *src, uint64_t off, void *dst, size_t n, const char *what) {
    if (off > src->size || n > src->size - off)
        return ct_set_error(CT_EFORMAT,
                            "%s: %s needs bytes %" PRIu64 " to %" PRIu64 " but the file has %" PRIu64
                            " (truncated?)",
                            src->name, what, off, off + (uint64_t)n, src->size);
    if (src->fd < 0) {
        if (n) memcpy(dst, src->mem + off, n);
        return 0;
    }
    unsigned char *p = dst;
    while (n > 0) {
        ssize_t got = pread(src->fd, p, n > (1u << 30) ? 1u << 30 : n, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return ct_set_error(CT_EIO, "%s: reading %s at byte %" PRIu64 " failed (%s)", src->name, what, off,
                                strerror(errno));
        if (got == 0)
            return ct_set_error(CT_EFORMAT, "%s: %s: the file ended at byte %" PRIu64 " while reading (it shrank?)",
                                src->name, what, off);
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return 0;
}

/* ---- little-endian fields ------------------------------------------------------------ */

static uint64_t rd16(const unsigned char *p) { return (uint64_t)p[0] | (uint64_t)p[1] << 8; }
static uint64_t rd32(const unsigned char *p) { return rd16(p) | rd16(p + 2) << 16; }
static uint64_t rd64(const unsigned char *p) { return rd32(p) | rd32(p + 4) << 32; }

/* ---- the end records ------------------------------------------------------------------ */

typedef struct {
    uint64_t count, cd_offset, cd_size;
    uint64_t limit; /* where the end records start: the directory lies before */
} directory;

static int check_magic(const cti_pth_src *src) {
    unsigned char head[4];
    if (src->size < EOCD_SIZE)
        return ct_set_error(CT_EFORMAT, "%s: only %" PRIu64 " bytes: not a zip archive (torch.save writes zip files)",
                            src->name, src->size);
    if (cti_pth_src_read(src, 0, head, 4, "the zip magic")) return ct_last_code();
    if (memcmp(head, "PK\3\4", 4) == 0) return 0;
    if (head[0] == 0x80)
        return ct_set_error(CT_EFORMAT,
                            "%s: a bare pickle, not a zip archive: torch.save's legacy format (before "
                            "PyTorch 1.6, or _use_new_zipfile_serialization=False) is not supported",
                            src->name);
    return ct_set_error(CT_EFORMAT,
                        "%s: not a zip archive (starts with %02x %02x %02x %02x, not \"PK\\3\\4\"): torch.save "
                        "writes zip files",
                        src->name, head[0], head[1], head[2], head[3]);
}

/* The zip64 end record named by the locator at `at`. */
static int read_zip64(const cti_pth_src *src, uint64_t at, directory *d) {
    unsigned char loc[LOCATOR_SIZE], rec[ZIP64_EOCD_SIZE];
    if (cti_pth_src_read(src, at, loc, sizeof loc, "the zip64 end locator")) return ct_last_code();
    uint64_t z64 = rd64(loc + 8);
    if (z64 > at || at - z64 < ZIP64_EOCD_SIZE)
        return ct_set_error(CT_EFORMAT, "%s: the zip64 locator points at byte %" PRIu64
                            ", where no zip64 end record fits (it would overlap byte %" PRIu64 ")",
                            src->name, z64, at);
    if (cti_pth_src_read(src, z64, rec, sizeof rec, "the zip64 end record")) return ct_last_code();
    if (rd32(rec) != 0x06064b50)
        return ct_set_error(CT_EFORMAT, "%s: no zip64 end record at byte %" PRIu64 " (signature 0x%08" PRIx64 ")",
                            src->name, z64, rd32(rec));
    if (rd32(rec + 16) != 0 || rd32(rec + 20) != 0 || rd32(loc + 4) != 0)
        return ct_set_error(CT_EFORMAT, "%s: a split (multi-disk) zip archive is not supported", src->name);
    d->count = rd64(rec + 32);
    d->cd_size = rd64(rec + 40);
    d->cd_offset = rd64(rec + 48);
    d->limit = z64;
    return 0;
}

static int find_directory(const cti_pth_src *src, directory *d) {
    if (check_magic(src)) return ct_last_code();
    size_t tlen = src->size < EOCD_SIZE + MAX_COMMENT ? (size_t)src->size : EOCD_SIZE + MAX_COMMENT;
    uint64_t tail_at = src->size - tlen;
    unsigned char *tail = malloc(tlen);
    if (!tail) return ct_set_error(CT_ENOMEM, "%s: out of host memory", src->name);
    if (cti_pth_src_read(src, tail_at, tail, tlen, "the end of central directory record")) {
        free(tail);
        return ct_last_code();
    }
    /* The last signature whose comment reaches exactly to the end. */
    size_t i = tlen - EOCD_SIZE + 1;
    bool found = false;
    while (i-- > 0) {
        if (memcmp(tail + i, "PK\5\6", 4) == 0 && i + EOCD_SIZE + rd16(tail + i + 20) == tlen) {
            found = true;
            break;
        }
    }
    if (!found) {
        free(tail);
        return ct_set_error(CT_EFORMAT, "%s: no end of central directory record in the last %zu bytes: the file "
                            "is truncated or not a zip archive",
                            src->name, tlen);
    }
    const unsigned char *e = tail + i;
    uint64_t eocd = tail_at + i;
    bool split = rd16(e + 4) != 0 || rd16(e + 6) != 0;
    d->count = rd16(e + 10);
    d->cd_size = rd32(e + 12);
    d->cd_offset = rd32(e + 16);
    d->limit = eocd;
    bool wants64 = d->count == 0xFFFF || d->cd_size == 0xFFFFFFFF || d->cd_offset == 0xFFFFFFFF;
    bool has64 = false;
    if (eocd >= LOCATOR_SIZE) {
        unsigned char sig[4];
        if (cti_pth_src_read(src, eocd - LOCATOR_SIZE, sig, 4, "the zip64 end locator")) {
            free(tail);
            return ct_last_code();
        }
        has64 = rd32(sig) == 0x07064b50;
    }
    free(tail);
    if (split) return ct_set_error(CT_EFORMAT, "%s: a split (multi-disk) zip archive is not supported", src->name);
    if (has64) return read_zip64(src, eocd - LOCATOR_SIZE, d);
    if (wants64)
        return ct_set_error(CT_EFORMAT, "%s: the end record defers to a zip64 end record, but there is no zip64 "
                            "locator before it",
                            src->name);
    return 0;
}

/* ---- the central directory -------------------------------------------------------------- */

/* Fills the 64-bit values a zip64 extra field holds for the fields saturated
 * at 0xFFFFFFFF, in the order the format lists them. */
static int zip64_fields(const cti_pth_src *src, const char *name, const unsigned char *x, size_t xlen,
                        uint64_t *size, uint64_t *csize, uint64_t *header) {
    uint64_t *want[3] = {*size == 0xFFFFFFFF ? size : NULL, *csize == 0xFFFFFFFF ? csize : NULL,
                         *header == 0xFFFFFFFF ? header : NULL};
    static const char *what[3] = {"size", "compressed size", "header offset"};
    if (!want[0] && !want[1] && !want[2]) return 0;
    size_t at = 0;
    while (at + 4 <= xlen) {
        size_t id = (size_t)rd16(x + at), len = (size_t)rd16(x + at + 2);
        if (len > xlen - at - 4) break;
        if (id == 1) {
            size_t k = at + 4, end = k + len;
            for (int f = 0; f < 3; f++) {
                if (!want[f]) continue;
                if (end - k < 8)
                    return ct_set_error(CT_EFORMAT, "%s: entry %s: its zip64 extra field lacks the %s", src->name,
                                        name, what[f]);
                *want[f] = rd64(x + k);
                k += 8;
            }
            return 0;
        }
        at += 4 + len;
    }
    return ct_set_error(CT_EFORMAT, "%s: entry %s: its %s is 0xFFFFFFFF but it has no zip64 extra field",
                        src->name, name, !want[0] ? (!want[1] ? what[2] : what[1]) : what[0]);
}

/* Parses one directory record at cd[*at]; advances *at. */
static int parse_record(const cti_pth_src *src, const unsigned char *cd, size_t cd_size, size_t *at,
                        size_t index, cti_pth_entry *e, uint64_t *header) {
    const unsigned char *r = cd + *at;
    if (cd_size - *at < CD_HEADER_SIZE || rd32(r) != 0x02014b50)
        return ct_set_error(CT_EFORMAT, "%s: central directory record %zu (byte %zu of the directory) is %s",
                            src->name, index, *at, cd_size - *at < CD_HEADER_SIZE ? "cut short" : "damaged");
    size_t nlen = (size_t)rd16(r + 28), xlen = (size_t)rd16(r + 30), clen = (size_t)rd16(r + 32);
    if (cd_size - *at - CD_HEADER_SIZE < nlen + xlen + clen)
        return ct_set_error(CT_EFORMAT, "%s: central directory record %zu is cut short", src->name, index);
    const char *name = (const char *)r + CD_HEADER_SIZE;
    if (nlen == 0 || memchr(name, '\0', nlen))
        return ct_set_error(CT_EFORMAT, "%s: central directory record %zu has an %s name", src->name, index,
                            nlen ? "unprintable" : "empty");
    e->name = malloc(nlen + 1);
    if (!e->name) return ct_set_error(CT_ENOMEM, "%s: out of host memory", src->name);
    memcpy(e->name, name, nlen);
    e->name[nlen] = '\0';
    unsigned flags = (unsigned)rd16(r + 8), method = (unsigned)rd16(r + 10);
    uint64_t csize = rd32(r + 20);
    e->crc = (uint32_t)rd32(r + 16);
    e->size = rd32(r + 24);
    *header = rd32(r + 42);
    if (zip64_fields(src, e->name, r + CD_HEADER_SIZE + nlen, xlen, &e->size, &csize, header))
        return ct_last_code();
    if (flags & 1) return ct_set_error(CT_EFORMAT, "%s: entry %s is encrypted", src->name, e->name);
    if (method != 0)
        return ct_set_error(CT_EFORMAT, "%s: entry %s is compressed (method %u); torch.save stores entries "
                            "uncompressed, and so must other writers",
                            src->name, e->name, method);
    if (csize != e->size)
        return ct_set_error(CT_EFORMAT, "%s: entry %s is stored, yet its compressed size %" PRIu64
                            " differs from its size %" PRIu64,
                            src->name, e->name, csize, e->size);
    *at += CD_HEADER_SIZE + nlen + xlen + clen;
    return 0;
}

/* Reads the local header of e at `header` and sets e->offset. */
static int locate(const cti_pth_src *src, cti_pth_entry *e, uint64_t header, uint64_t data_end) {
    size_t nlen = strlen(e->name);
    unsigned char *h = malloc(LOCAL_HEADER_SIZE + nlen);
    if (!h) return ct_set_error(CT_ENOMEM, "%s: out of host memory", src->name);
    char what[96];
    snprintf(what, sizeof what, "the local header of entry %.64s", e->name);
    int rc = cti_pth_src_read(src, header, h, LOCAL_HEADER_SIZE + nlen, what);
    if (!rc && (rd32(h) != 0x04034b50 || rd16(h + 26) != nlen || memcmp(h + LOCAL_HEADER_SIZE, e->name, nlen)))
        rc = ct_set_error(CT_EFORMAT, "%s: entry %s: no matching local header at byte %" PRIu64
                          " (the directory and the data disagree)",
                          src->name, e->name, header);
    if (!rc) {
        e->offset = header + LOCAL_HEADER_SIZE + nlen + rd16(h + 28);
        if (e->offset > data_end || e->size > data_end - e->offset)
            rc = ct_set_error(CT_EFORMAT, "%s: entry %s: its %" PRIu64 " bytes at byte %" PRIu64
                              " run past the data area, which ends at byte %" PRIu64 " (truncated?)",
                              src->name, e->name, e->size, e->offset, data_end);
    }
    free(h);
    return rc;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(cti_pth_entry *const *)a)->name, (*(cti_pth_entry *const *)b)->name);
}

static int read_directory(const cti_pth_src *src, const directory *d, cti_pth_zip *z) {
    if (d->cd_offset > d->limit || d->cd_size > d->limit - d->cd_offset)
        return ct_set_error(CT_EFORMAT, "%s: the central directory (%" PRIu64 " bytes at byte %" PRIu64
                            ") does not lie before the end records at byte %" PRIu64,
                            src->name, d->cd_size, d->cd_offset, d->limit);
    if (d->cd_size > MAX_CD_SIZE)
        return ct_set_error(CT_EFORMAT, "%s: a central directory of %" PRIu64 " bytes is beyond ctrial's limit (%"
                            PRIu64 ")", src->name, d->cd_size, MAX_CD_SIZE);
    if (d->count > d->cd_size / CD_HEADER_SIZE)
        return ct_set_error(CT_EFORMAT, "%s: %" PRIu64 " entries cannot fit in a central directory of %" PRIu64
                            " bytes", src->name, d->count, d->cd_size);
    if (d->count == 0) return ct_set_error(CT_EFORMAT, "%s: the zip archive has no entries", src->name);
    unsigned char *cd = malloc((size_t)d->cd_size);
    z->entries = calloc((size_t)d->count, sizeof *z->entries);
    z->by_name = malloc((size_t)d->count * sizeof *z->by_name);
    uint64_t *headers = malloc((size_t)d->count * sizeof *headers);
    int rc = cd && z->entries && z->by_name && headers ? 0 : ct_set_error(CT_ENOMEM, "%s: out of host memory",
                                                                          src->name);
    if (!rc) rc = cti_pth_src_read(src, d->cd_offset, cd, (size_t)d->cd_size, "the central directory");
    size_t at = 0;
    for (size_t i = 0; !rc && i < d->count; i++) {
        rc = parse_record(src, cd, (size_t)d->cd_size, &at, i, &z->entries[i], &headers[i]);
        z->n = i + 1; /* so that cti_pth_zip_free frees the name */
    }
    for (size_t i = 0; !rc && i < z->n; i++) rc = locate(src, &z->entries[i], headers[i], d->cd_offset);
    free(headers);
    free(cd);
    return rc;
}

int cti_pth_zip_open(const cti_pth_src *src, cti_pth_zip *z) {
    memset(z, 0, sizeof *z);
    directory d = {0, 0, 0, 0};
    int rc = find_directory(src, &d);
    if (!rc) rc = read_directory(src, &d, z);
    if (!rc) {
        const char *first = z->entries[0].name, *slash = strchr(first, '/');
        if (!slash || slash == first)
            rc = ct_set_error(CT_EFORMAT, "%s: entry %s is not in a folder; torch.save puts every entry in "
                              "<archive>/", src->name, first);
        else if (!(z->prefix = malloc((size_t)(slash - first) + 1)))
            rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", src->name);
        else {
            memcpy(z->prefix, first, (size_t)(slash - first));
            z->prefix[slash - first] = '\0';
        }
    }
    if (!rc) {
        for (size_t i = 0; i < z->n; i++) z->by_name[i] = &z->entries[i];
        qsort(z->by_name, z->n, sizeof *z->by_name, by_name);
        for (size_t i = 1; !rc && i < z->n; i++)
            if (strcmp(z->by_name[i - 1]->name, z->by_name[i]->name) == 0)
                rc = ct_set_error(CT_EFORMAT, "%s: entry %s appears twice", src->name, z->by_name[i]->name);
    }
    if (rc) cti_pth_zip_free(z);
    return rc;
}

const cti_pth_entry *cti_pth_zip_find(const cti_pth_zip *z, const char *record) {
    size_t plen = strlen(z->prefix), rlen = strlen(record);
    char stack[256], *name = plen + rlen + 2 <= sizeof stack ? stack : malloc(plen + rlen + 2);
    if (!name) return NULL;
    memcpy(name, z->prefix, plen);
    name[plen] = '/';
    memcpy(name + plen + 1, record, rlen + 1);
    cti_pth_entry key = {.name = name}, *pkey = &key;
    cti_pth_entry **hit = bsearch(&pkey, z->by_name, z->n, sizeof *z->by_name, by_name);
    if (name != stack) free(name);
    return hit ? *hit : NULL;
}

int cti_pth_zip_read(const cti_pth_src *src, const cti_pth_entry *e, void *dst) {
    char what[96];
    snprintf(what, sizeof what, "entry %.80s", e->name);
    if (e->size > SIZE_MAX) return ct_set_error(CT_ENOMEM, "%s: %s is too large for this machine", src->name, what);
    if (cti_pth_src_read(src, e->offset, dst, (size_t)e->size, what)) return ct_last_code();
    uint32_t crc = cti_crc32(0, dst, (size_t)e->size);
    if (crc != e->crc)
        return ct_set_error(CT_EFORMAT,
                            "%s: entry %s: its bytes have CRC-32 0x%08" PRIx32 " but the central directory says 0x%08"
                            PRIx32 ": the file is damaged",
                            src->name, e->name, crc, e->crc);
    return 0;
}

void cti_pth_zip_free(cti_pth_zip *z) {
    for (size_t i = 0; z->entries && i < z->n; i++) free(z->entries[i].name);
    free(z->entries);
    free(z->by_name);
    free(z->prefix);
    memset(z, 0, sizeof *z);
}
