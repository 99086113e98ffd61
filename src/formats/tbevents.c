/* src/formats/tbevents.c — TensorBoard event files (see tbevents.h).
 *
 * A record is assembled from a few pieces (a small encoded head on the stack,
 * the caller's tag bytes, a small tail) that are CRC'd in turn and handed to
 * stdio one after the other: the protobuf is never built whole, so a tag of
 * any length needs no heap buffer. Lengths of the nested messages are known
 * in advance, which is what lets the head be encoded before the tag.
 */
#define _POSIX_C_SOURCE 200809L /* gethostname, getpid */

#include "formats/tbevents.h"

#include "base/clock.h"
#include "base/files.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "ctrial/error.h"

struct ct_tb_writer {
    FILE *f;
    bool failed; /* a write failed: the file may end mid-record */
    char path[]; /* the event file's path */
};

/* ---- CRC32C ------------------------------------------------------------- */

/* crc32c_table[i] = CRC of the byte i, reflected polynomial 0x82F63B78
 * (generated once; the tests compare it with the bit-by-bit definition). */
static const uint32_t crc32c_table[256] = {
    0x00000000, 0xF26B8303, 0xE13B70F7, 0x1350F3F4, 0xC79A971F, 0x35F1141C,
    0x26A1E7E8, 0xD4CA64EB, 0x8AD958CF, 0x78B2DBCC, 0x6BE22838, 0x9989AB3B,
    0x4D43CFD0, 0xBF284CD3, 0xAC78BF27, 0x5E133C24, 0x105EC76F, 0xE235446C,
    0xF165B798, 0x030E349B, 0xD7C45070, 0x25AFD373, 0x36FF2087, 0xC494A384,
    0x9A879FA0, 0x68EC1CA3, 0x7BBCEF57, 0x89D76C54, 0x5D1D08BF, 0xAF768BBC,
    0xBC267848, 0x4E4DFB4B, 0x20BD8EDE, 0xD2D60DDD, 0xC186FE29, 0x33ED7D2A,
    0xE72719C1, 0x154C9AC2, 0x061C6936, 0xF477EA35, 0xAA64D611, 0x580F5512,
    0x4B5FA6E6, 0xB93425E5, 0x6DFE410E, 0x9F95C20D, 0x8CC531F9, 0x7EAEB2FA,
    0x30E349B1, 0xC288CAB2, 0xD1D83946, 0x23B3BA45, 0xF779DEAE, 0x05125DAD,
    0x1642AE59, 0xE4292D5A, 0xBA3A117E, 0x4851927D, 0x5B016189, 0xA96AE28A,
    0x7DA08661, 0x8FCB0562, 0x9C9BF696, 0x6EF07595, 0x417B1DBC, 0xB3109EBF,
    0xA0406D4B, 0x522BEE48, 0x86E18AA3, 0x748A09A0, 0x67DAFA54, 0x95B17957,
    0xCBA24573, 0x39C9C670, 0x2A993584, 0xD8F2B687, 0x0C38D26C, 0xFE53516F,
    0xED03A29B, 0x1F682198, 0x5125DAD3, 0xA34E59D0, 0xB01EAA24, 0x42752927,
    0x96BF4DCC, 0x64D4CECF, 0x77843D3B, 0x85EFBE38, 0xDBFC821C, 0x2997011F,
    0x3AC7F2EB, 0xC8AC71E8, 0x1C661503, 0xEE0D9600, 0xFD5D65F4, 0x0F36E6F7,
    0x61C69362, 0x93AD1061, 0x80FDE395, 0x72966096, 0xA65C047D, 0x5437877E,
    0x4767748A, 0xB50CF789, 0xEB1FCBAD, 0x197448AE, 0x0A24BB5A, 0xF84F3859,
    0x2C855CB2, 0xDEEEDFB1, 0xCDBE2C45, 0x3FD5AF46, 0x7198540D, 0x83F3D70E,
    0x90A324FA, 0x62C8A7F9, 0xB602C312, 0x44694011, 0x5739B3E5, 0xA55230E6,
    0xFB410CC2, 0x092A8FC1, 0x1A7A7C35, 0xE811FF36, 0x3CDB9BDD, 0xCEB018DE,
    0xDDE0EB2A, 0x2F8B6829, 0x82F63B78, 0x709DB87B, 0x63CD4B8F, 0x91A6C88C,
    0x456CAC67, 0xB7072F64, 0xA457DC90, 0x563C5F93, 0x082F63B7, 0xFA44E0B4,
    0xE9141340, 0x1B7F9043, 0xCFB5F4A8, 0x3DDE77AB, 0x2E8E845F, 0xDCE5075C,
    0x92A8FC17, 0x60C37F14, 0x73938CE0, 0x81F80FE3, 0x55326B08, 0xA759E80B,
    0xB4091BFF, 0x466298FC, 0x1871A4D8, 0xEA1A27DB, 0xF94AD42F, 0x0B21572C,
    0xDFEB33C7, 0x2D80B0C4, 0x3ED04330, 0xCCBBC033, 0xA24BB5A6, 0x502036A5,
    0x4370C551, 0xB11B4652, 0x65D122B9, 0x97BAA1BA, 0x84EA524E, 0x7681D14D,
    0x2892ED69, 0xDAF96E6A, 0xC9A99D9E, 0x3BC21E9D, 0xEF087A76, 0x1D63F975,
    0x0E330A81, 0xFC588982, 0xB21572C9, 0x407EF1CA, 0x532E023E, 0xA145813D,
    0x758FE5D6, 0x87E466D5, 0x94B49521, 0x66DF1622, 0x38CC2A06, 0xCAA7A905,
    0xD9F75AF1, 0x2B9CD9F2, 0xFF56BD19, 0x0D3D3E1A, 0x1E6DCDEE, 0xEC064EED,
    0xC38D26C4, 0x31E6A5C7, 0x22B65633, 0xD0DDD530, 0x0417B1DB, 0xF67C32D8,
    0xE52CC12C, 0x1747422F, 0x49547E0B, 0xBB3FFD08, 0xA86F0EFC, 0x5A048DFF,
    0x8ECEE914, 0x7CA56A17, 0x6FF599E3, 0x9D9E1AE0, 0xD3D3E1AB, 0x21B862A8,
    0x32E8915C, 0xC083125F, 0x144976B4, 0xE622F5B7, 0xF5720643, 0x07198540,
    0x590AB964, 0xAB613A67, 0xB831C993, 0x4A5A4A90, 0x9E902E7B, 0x6CFBAD78,
    0x7FAB5E8C, 0x8DC0DD8F, 0xE330A81A, 0x115B2B19, 0x020BD8ED, 0xF0605BEE,
    0x24AA3F05, 0xD6C1BC06, 0xC5914FF2, 0x37FACCF1, 0x69E9F0D5, 0x9B8273D6,
    0x88D28022, 0x7AB90321, 0xAE7367CA, 0x5C18E4C9, 0x4F48173D, 0xBD23943E,
    0xF36E6F75, 0x0105EC76, 0x12551F82, 0xE03E9C81, 0x34F4F86A, 0xC69F7B69,
    0xD5CF889D, 0x27A40B9E, 0x79B737BA, 0x8BDCB4B9, 0x988C474D, 0x6AE7C44E,
    0xBE2DA0A5, 0x4C4623A6, 0x5F16D052, 0xAD7D5351,
};

uint32_t ct_tb_crc32c(uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = data;
    crc = ~crc; /* undoes the final inversion of a CRC being continued */
    while (n--) crc = crc32c_table[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

uint32_t ct_tb_mask_crc(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

/* ---- protobuf wire format ------------------------------------------------ */

enum { WIRE_VARINT = 0, WIRE_64BIT = 1, WIRE_LEN = 2, WIRE_32BIT = 5 };

/* Field numbers of tensorboard/compat/proto/{event,summary}.proto. */
enum {
    EVENT_WALL_TIME = 1,
    EVENT_STEP = 2,
    EVENT_FILE_VERSION = 3,
    EVENT_SUMMARY = 5,
    SUMMARY_VALUE = 1,
    VALUE_TAG = 1,
    VALUE_SIMPLE_VALUE = 2,
};

/* Every field number here is below 16, so a key is one byte. */
static uint8_t field_key(unsigned field, unsigned wire) {
    return (uint8_t)(field << 3 | wire);
}

size_t ct_tb_put_varint(uint8_t *out, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

static size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Fixed-width fields, records' lengths and CRCs are all little-endian,
 * whatever the host's byte order. */
static void put_le(uint8_t *out, uint64_t v, int nbytes) {
    for (int i = 0; i < nbytes; i++) out[i] = (uint8_t)(v >> (8 * i));
}

static size_t put_double_field(uint8_t *out, unsigned field, double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    out[0] = field_key(field, WIRE_64BIT);
    put_le(out + 1, bits, 8);
    return 9;
}

static size_t put_float_field(uint8_t *out, unsigned field, float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    out[0] = field_key(field, WIRE_32BIT);
    put_le(out + 1, bits, 4);
    return 5;
}

/* The key and length of a length-delimited field whose bytes follow. */
static size_t put_len_prefix(uint8_t *out, unsigned field, uint64_t len) {
    out[0] = field_key(field, WIRE_LEN);
    return 1 + ct_tb_put_varint(out + 1, len);
}

/* double -> float, rounding to nearest as IEEE 754 does. ISO C leaves a
 * cast of an out-of-range double undefined, so overflow is decided here:
 * below the midpoint between FLT_MAX and 2^128 a value rounds down to
 * FLT_MAX; from the midpoint on it rounds to infinity (a tie goes to the
 * even neighbour, and FLT_MAX's significand is odd). */
static float to_float(double v) {
    const double overflow = 0x1p128 - 0x1p103;
    if (fabs(v) >= overflow) return v > 0 ? INFINITY : -INFINITY;
    if (fabs(v) > FLT_MAX) return v > 0 ? FLT_MAX : -FLT_MAX;
    return (float)v;
}

/* Offset of the first byte that is not valid UTF-8 (overlong forms,
 * surrogates and code points past U+10FFFF included), or n. Protobuf's
 * readers reject a proto3 string field that is not UTF-8, and with it the
 * whole event, so a bad tag is refused here rather than in TensorBoard. */
static size_t utf8_error_at(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return i;
        }
        if (n - i < len) return i;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += len;
    }
    return n;
}

/* ---- records -------------------------------------------------------------- */

typedef struct {
    const void *p;
    size_t n;
} piece;

static int write_failed(ct_tb_writer *w, const char *fn) {
    w->failed = true;
    return ct_set_error(CT_EIO, "%s: %s: write failed (%s)", fn, w->path, strerror(errno));
}

/* One TFRecord whose data is the concatenation of the pieces. */
static int write_record(ct_tb_writer *w, const piece *pieces, int count, const char *fn) {
    uint64_t len = 0;
    uint32_t crc = 0;
    for (int i = 0; i < count; i++) {
        len += pieces[i].n;
        crc = ct_tb_crc32c(crc, pieces[i].p, pieces[i].n);
    }
    uint8_t head[12], tail[4];
    put_le(head, len, 8);
    put_le(head + 8, ct_tb_mask_crc(ct_tb_crc32c(0, head, 8)), 4);
    put_le(tail, ct_tb_mask_crc(crc), 4);

    bool ok = fwrite(head, 1, sizeof head, w->f) == sizeof head;
    for (int i = 0; ok && i < count; i++) ok = fwrite(pieces[i].p, 1, pieces[i].n, w->f) == pieces[i].n;
    ok = ok && fwrite(tail, 1, sizeof tail, w->f) == sizeof tail;
    return ok ? 0 : write_failed(w, fn);
}

static int write_file_version(ct_tb_writer *w, const char *fn) {
    static const char version[] = "brain.Event:2";
    const size_t vlen = sizeof version - 1;
    uint8_t head[16];
    size_t n = put_double_field(head, EVENT_WALL_TIME, ct_clock_wall());
    n += put_len_prefix(head + n, EVENT_FILE_VERSION, vlen);
    const piece pieces[2] = {{head, n}, {version, vlen}};
    return write_record(w, pieces, 2, fn);
}

int ct_tb_add_scalar(ct_tb_writer *w, const char *tag, double value, int64_t step,
                     double wall_time) {
    static const char fn[] = "ct_tb_add_scalar";
    if (!w) return ct_set_error(CT_EINVAL, "%s: writer is NULL", fn);
    if (!tag) return ct_set_error(CT_EINVAL, "%s: %s: tag is NULL", fn, w->path);
    size_t tag_len = strlen(tag);
    if (tag_len == 0) return ct_set_error(CT_EINVAL, "%s: %s: tag is empty", fn, w->path);
    size_t bad = utf8_error_at((const unsigned char *)tag, tag_len);
    if (bad < tag_len)
        return ct_set_error(CT_EINVAL, "%s: %s: tag \"%s\" is not valid UTF-8 (byte %zu)", fn,
                            w->path, tag, bad);
    if (!isfinite(wall_time))
        return ct_set_error(CT_EINVAL, "%s: %s: wall_time %g is not finite (tag \"%s\")", fn,
                            w->path, wall_time, tag);
    if (w->failed)
        return ct_set_error(CT_ESTATE, "%s: %s: an earlier write failed", fn, w->path);
    if (wall_time <= 0) wall_time = ct_clock_wall();

    /* Event{wall_time, step, summary: Summary{value: Value{tag, simple_value}}},
     * innermost lengths first. */
    uint8_t tail[5];
    size_t tail_len = put_float_field(tail, VALUE_SIMPLE_VALUE, to_float(value));
    uint64_t value_len = 1 + varint_size(tag_len) + tag_len + tail_len;
    uint64_t summary_len = 1 + varint_size(value_len) + value_len;

    uint8_t head[64]; /* at most 9 + 11 + 3 * 11 bytes */
    size_t n = put_double_field(head, EVENT_WALL_TIME, wall_time);
    if (step != 0) { /* proto3 leaves a zero scalar out; so do we, byte for byte */
        head[n++] = field_key(EVENT_STEP, WIRE_VARINT);
        n += ct_tb_put_varint(head + n, (uint64_t)step); /* two's complement, as int64 */
    }
    n += put_len_prefix(head + n, EVENT_SUMMARY, summary_len);
    n += put_len_prefix(head + n, SUMMARY_VALUE, value_len);
    n += put_len_prefix(head + n, VALUE_TAG, tag_len);

    const piece pieces[3] = {{head, n}, {tag, tag_len}, {tail, tail_len}};
    return write_record(w, pieces, 3, fn);
}

static int flush_writer(ct_tb_writer *w, const char *fn) {
    if (w->failed) return ct_set_error(CT_ESTATE, "%s: %s: an earlier write failed", fn, w->path);
    return fflush(w->f) == 0 ? 0 : write_failed(w, fn);
}

int ct_tb_flush(ct_tb_writer *w) {
    if (!w) return ct_set_error(CT_EINVAL, "ct_tb_flush: writer is NULL");
    return flush_writer(w, "ct_tb_flush");
}

/* ---- opening and closing ------------------------------------------------- */

/* Creates the file under the first free name: the plain name, then the
 * same with ".1", ".2"... after the pid. "x" makes the creation exclusive,
 * so two writers never share a file. */
static FILE *create_exclusive(char *path, size_t cap, int dir_len, const char *logdir,
                              const char *suffix, const char *fn) {
    char host[256];
    if (gethostname(host, sizeof host) != 0 || host[0] == '\0') strcpy(host, "localhost");
    host[sizeof host - 1] = '\0'; /* POSIX leaves a truncated name unterminated */
    long long secs = (long long)time(NULL);
    long pid = (long)getpid();
    for (int k = 0;; k++) {
        if (k == 0)
            snprintf(path, cap, "%.*s/events.out.tfevents.%010lld.%s.%ld%s", dir_len, logdir, secs,
                     host, pid, suffix);
        else
            snprintf(path, cap, "%.*s/events.out.tfevents.%010lld.%s.%ld.%d%s", dir_len, logdir,
                     secs, host, pid, k, suffix);
        FILE *f = fopen(path, "wbx");
        if (f) return f;
        if (errno != EEXIST || k == 999) {
            ct_set_error(CT_EIO, "%s: %s: cannot create (%s)", fn, path, strerror(errno));
            return NULL;
        }
    }
}

ct_tb_writer *ct_tb_open(const char *logdir, const char *suffix) {
    static const char fn[] = "ct_tb_open";
    if (!logdir || !*logdir) {
        ct_set_error(CT_EINVAL, "%s: logdir is %s", fn, logdir ? "empty" : "NULL");
        return NULL;
    }
    if (!suffix) suffix = "";
    if (strchr(suffix, '/')) {
        ct_set_error(CT_EINVAL, "%s: suffix \"%s\" contains '/'", fn, suffix);
        return NULL;
    }
    if (ct_make_dirs(logdir, "log directory") != CT_OK) {
        ct_set_error(ct_last_code(), "%s: %s", fn, ct_last_error());
        return NULL;
    }

    size_t dir_len = strlen(logdir);
    while (dir_len > 0 && logdir[dir_len - 1] == '/') dir_len--; /* "runs/" + "/events..." */
    size_t cap = dir_len + strlen(suffix) + 256 + 96; /* hostname, digits, fixed text */
    ct_tb_writer *w = calloc(1, sizeof *w + cap);
    if (!w) {
        ct_set_error(CT_ENOMEM, "%s: out of memory", fn);
        return NULL;
    }
    w->f = create_exclusive(w->path, cap, (int)dir_len, logdir, suffix, fn);
    if (!w->f) {
        free(w);
        return NULL;
    }
    if (write_file_version(w, fn) < 0 || flush_writer(w, fn) < 0) {
        /* An empty or cut file would show up in TensorBoard as a broken run. */
        fclose(w->f);
        remove(w->path);
        free(w);
        return NULL;
    }
    return w;
}

const char *ct_tb_path(const ct_tb_writer *w) {
    return w ? w->path : NULL;
}

void ct_tb_close(ct_tb_writer *w) {
    if (!w) return;
    fclose(w->f); /* flushes; a failure here is documented as unreported */
    free(w);
}
