/* src/formats/tbevents.c — TensorBoard event files (see tbevents.h).
 *
 * A record is assembled from a few pieces (a small encoded head on the stack,
 * the caller's tag bytes, a small tail) that are CRC'd in turn and handed to
 * stdio one after the other: the protobuf is never built whole, so a tag of
 * any length needs no heap buffer. Lengths of the nested messages are known
 * in advance, which is what lets the head be encoded before the tag. The
 * bodies of histograms (their buckets) and images (the PNG, encoded by
 * libpng) are built on the heap first; a text's bytes are a piece of their own.
 */
#define _POSIX_C_SOURCE 200809L /* gethostname, getpid */

#include "formats/tbevents.h"

#include "base/clock.h"
#include "base/crc32.h"
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
#include <png.h>

#include "ctrial/error.h"

struct cti_tb_writer {
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

uint32_t cti_tb_crc32c(uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = data;
    crc = ~crc; /* undoes the final inversion of a CRC being continued */
    while (n--) crc = crc32c_table[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

uint32_t cti_tb_mask_crc(uint32_t crc) {
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
    EVENT_SESSION_LOG = 7,
    SESSION_LOG_STATUS = 1,
    SESSION_LOG_START = 1, /* SessionLog.SessionStatus.START */
    SUMMARY_VALUE = 1,
    VALUE_TAG = 1,
    VALUE_SIMPLE_VALUE = 2,
};

/* Every field number here is below 16, so a key is one byte. */
static uint8_t field_key(unsigned field, unsigned wire) {
    return (uint8_t)(field << 3 | wire);
}

size_t cti_tb_put_varint(uint8_t *out, uint64_t v) {
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
    return 1 + cti_tb_put_varint(out + 1, len);
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

/* (tbevents.h) Protobuf's readers reject a proto3 string field that is not
 * UTF-8, and with it the whole event, so a bad tag is refused here rather
 * than in TensorBoard. */
size_t cti_tb_utf8_error_at(const void *str, size_t n) {
    const unsigned char *s = str;
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

static int write_failed(cti_tb_writer *w, const char *fn) {
    w->failed = true;
    return ct_set_error(CT_EIO, "%s: %s: write failed (%s)", fn, w->path, strerror(errno));
}

/* One TFRecord whose data is the concatenation of the pieces. */
static int write_record(cti_tb_writer *w, const piece *pieces, int count, const char *fn) {
    uint64_t len = 0;
    uint32_t crc = 0;
    for (int i = 0; i < count; i++) {
        len += pieces[i].n;
        crc = cti_tb_crc32c(crc, pieces[i].p, pieces[i].n);
    }
    uint8_t head[12], tail[4];
    put_le(head, len, 8);
    put_le(head + 8, cti_tb_mask_crc(cti_tb_crc32c(0, head, 8)), 4);
    put_le(tail, cti_tb_mask_crc(crc), 4);

    bool ok = fwrite(head, 1, sizeof head, w->f) == sizeof head;
    for (int i = 0; ok && i < count; i++) ok = fwrite(pieces[i].p, 1, pieces[i].n, w->f) == pieces[i].n;
    ok = ok && fwrite(tail, 1, sizeof tail, w->f) == sizeof tail;
    return ok ? 0 : write_failed(w, fn);
}

static int write_file_version(cti_tb_writer *w, const char *fn) {
    static const char version[] = "brain.Event:2";
    const size_t vlen = sizeof version - 1;
    uint8_t head[16];
    size_t n = put_double_field(head, EVENT_WALL_TIME, cti_clock_wall());
    n += put_len_prefix(head + n, EVENT_FILE_VERSION, vlen);
    const piece pieces[2] = {{head, n}, {version, vlen}};
    return write_record(w, pieces, 2, fn);
}

/* The checks every Value record starts with: the writer, the tag (non-empty
 * UTF-8) and the wall time; fills *tag_len and turns a wall_time <= 0 into
 * now. The writer's failed state is checked last, by check_state, so that
 * bad arguments are reported as such whatever the writer's state. */
static int check_tag_time(cti_tb_writer *w, const char *tag, size_t *tag_len, double *wall_time,
                          const char *fn) {
    if (!w) return ct_set_error(CT_EINVAL, "%s: writer is NULL", fn);
    if (!tag) return ct_set_error(CT_EINVAL, "%s: %s: tag is NULL", fn, w->path);
    *tag_len = strlen(tag);
    if (*tag_len == 0) return ct_set_error(CT_EINVAL, "%s: %s: tag is empty", fn, w->path);
    size_t bad = cti_tb_utf8_error_at(tag, *tag_len);
    if (bad < *tag_len)
        return ct_set_error(CT_EINVAL, "%s: %s: tag \"%s\" is not valid UTF-8 (byte %zu)", fn,
                            w->path, tag, bad);
    if (!isfinite(*wall_time))
        return ct_set_error(CT_EINVAL, "%s: %s: wall_time %g is not finite (tag \"%s\")", fn,
                            w->path, *wall_time, tag);
    if (*wall_time <= 0) *wall_time = cti_clock_wall();
    return 0;
}

static int check_state(cti_tb_writer *w, const char *fn) {
    if (w->failed) return ct_set_error(CT_ESTATE, "%s: %s: an earlier write failed", fn, w->path);
    return 0;
}

enum { MAX_PIECES = 8 };

/* Event{wall_time, step, summary: Summary{value: [Value{tag, ...}]}}: the
 * tag is the concatenation of `tag` pieces, and `body` the Value's fields
 * after the tag (numbers 2 and up, already encoded, in number order).
 * Lengths are summed first, innermost out, so the head can be encoded
 * before the pieces it measures. */
static int write_value(cti_tb_writer *w, const piece *tag, int ntag, const piece *body, int nbody,
                       int64_t step, double wall_time, const char *fn) {
    uint64_t tag_len = 0, body_len = 0;
    for (int i = 0; i < ntag; i++) tag_len += tag[i].n;
    for (int i = 0; i < nbody; i++) body_len += body[i].n;
    uint64_t value_len = 1 + varint_size(tag_len) + tag_len + body_len;
    uint64_t summary_len = 1 + varint_size(value_len) + value_len;

    uint8_t head[64]; /* at most 9 + 11 + 3 * 11 bytes */
    size_t n = put_double_field(head, EVENT_WALL_TIME, wall_time);
    if (step != 0) { /* proto3 leaves a zero scalar out; so do we, byte for byte */
        head[n++] = field_key(EVENT_STEP, WIRE_VARINT);
        n += cti_tb_put_varint(head + n, (uint64_t)step); /* two's complement, as int64 */
    }
    n += put_len_prefix(head + n, EVENT_SUMMARY, summary_len);
    n += put_len_prefix(head + n, SUMMARY_VALUE, value_len);
    n += put_len_prefix(head + n, VALUE_TAG, tag_len);

    piece pieces[MAX_PIECES];
    int count = 0;
    pieces[count++] = (piece){head, n};
    for (int i = 0; i < ntag; i++) pieces[count++] = tag[i];
    for (int i = 0; i < nbody; i++) pieces[count++] = body[i];
    return write_record(w, pieces, count, fn);
}

int cti_tb_add_session_start(cti_tb_writer *w, int64_t step, double wall_time) {
    static const char fn[] = "cti_tb_add_session_start";
    if (!w) return ct_set_error(CT_EINVAL, "%s: writer is NULL", fn);
    if (!isfinite(wall_time)) return ct_set_error(CT_EINVAL, "%s: %s: wall_time %g is not finite", fn, w->path, wall_time);
    if (wall_time <= 0) wall_time = cti_clock_wall();
    int rc = check_state(w, fn);
    if (rc != 0) return rc;
    /* Event{wall_time, step, session_log: SessionLog{status: START}}. */
    uint8_t rec[32];
    size_t n = put_double_field(rec, EVENT_WALL_TIME, wall_time);
    if (step != 0) {
        rec[n++] = field_key(EVENT_STEP, WIRE_VARINT);
        n += cti_tb_put_varint(rec + n, (uint64_t)step);
    }
    n += put_len_prefix(rec + n, EVENT_SESSION_LOG, 2);
    rec[n++] = field_key(SESSION_LOG_STATUS, WIRE_VARINT);
    rec[n++] = SESSION_LOG_START;
    const piece p = {rec, n};
    return write_record(w, &p, 1, fn);
}

int cti_tb_add_scalar(cti_tb_writer *w, const char *tag, double value, int64_t step,
                     double wall_time) {
    static const char fn[] = "cti_tb_add_scalar";
    size_t tag_len;
    int rc = check_tag_time(w, tag, &tag_len, &wall_time, fn);
    if (rc == 0) rc = check_state(w, fn);
    if (rc != 0) return rc;
    uint8_t tail[5];
    size_t tail_len = put_float_field(tail, VALUE_SIMPLE_VALUE, to_float(value));
    const piece t = {tag, tag_len}, b = {tail, tail_len};
    return write_value(w, &t, 1, &b, 1, step, wall_time, fn);
}

/* ---- histograms ------------------------------------------------------------ */

int cti_tb_hist_edges(double *out) {
    /* torch's SummaryWriter.__init__, float for float: v = 1e-12; while
     * v < 1e20: append v; v *= 1.1. */
    int k = 0;
    for (double v = 1e-12; v < 1e20 && k < CT_TB_HIST_EDGES; v *= 1.1) out[k++] = v;
    return k;
}

enum { HIST_ALL_EDGES = 2 * CT_TB_HIST_EDGES + 1, HIST_BINS = HIST_ALL_EDGES - 1 };

/* numpy's pairwise summation (DOUBLE_pairwise_sum), of the values or of
 * their squares: below 8 values a plain loop; up to 128, eight partial sums
 * combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the
 * rest one by one; above, the two halves (the first a multiple of 8). */
static double pairwise_sum(const double *a, size_t n, bool square) {
#define PW_TERM(i) (square ? a[i] * a[i] : a[i])
    if (n < 8) {
        double res = 0.;
        for (size_t i = 0; i < n; i++) res += PW_TERM(i);
        return res;
    }
    if (n <= 128) {
        double r[8];
        for (size_t j = 0; j < 8; j++) r[j] = PW_TERM(j);
        size_t i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (size_t j = 0; j < 8; j++) r[j] += PW_TERM(i + j);
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += PW_TERM(i);
        return res;
    }
#undef PW_TERM
    size_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2, square) + pairwise_sum(a + n2, n - n2, square);
}

/* A packed repeated double field's key, length and values. */
static size_t put_packed_doubles(uint8_t *out, unsigned field, const double *v, size_t n) {
    size_t k = put_len_prefix(out, field, 8 * (uint64_t)n);
    for (size_t i = 0; i < n; i++) {
        uint64_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        put_le(out + k, bits, 8);
        k += 8;
    }
    return k;
}

/* A proto3 double: left out when its bits are zero (0.0, not -0.0), as
 * protobuf's serializers do. */
static size_t put_double_if_set(uint8_t *out, unsigned field, double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return bits ? put_double_field(out, field, d) : 0;
}

enum {
    VALUE_IMAGE = 4,
    VALUE_HISTO = 5,
    VALUE_TENSOR = 8,
    VALUE_METADATA = 9,
    HISTO_MIN = 1,
    HISTO_MAX = 2,
    HISTO_NUM = 3,
    HISTO_SUM = 4,
    HISTO_SUM_SQUARES = 5,
    HISTO_BUCKET_LIMIT = 6,
    HISTO_BUCKET = 7,
    IMAGE_HEIGHT = 1,
    IMAGE_WIDTH = 2,
    IMAGE_COLORSPACE = 3,
    IMAGE_ENCODED = 4,
};

int cti_tb_add_histogram(cti_tb_writer *w, const char *tag, const double *values, size_t n,
                        int64_t step, double wall_time) {
    static const char fn[] = "cti_tb_add_histogram";
    size_t tag_len;
    int rc = check_tag_time(w, tag, &tag_len, &wall_time, fn);
    if (rc != 0) return rc;
    if (!values && n > 0)
        return ct_set_error(CT_EINVAL, "%s: %s: values is NULL (tag \"%s\")", fn, w->path, tag);
    if (n == 0)
        return ct_set_error(CT_EINVAL, "%s: %s: no values (tag \"%s\"): a histogram needs at least one",
                            fn, w->path, tag);
    if ((rc = check_state(w, fn)) != 0) return rc;

    /* The edges, ascending: -e[K-1] .. -e[0], 0, e[0] .. e[K-1]. */
    double pos[CT_TB_HIST_EDGES], edge[HIST_ALL_EDGES];
    int k = cti_tb_hist_edges(pos);
    for (int i = 0; i < k; i++) {
        edge[i] = -pos[k - 1 - i];
        edge[k + 1 + i] = pos[i];
    }
    edge[k] = 0.0;
    const int last = 2 * k; /* the last edge's index; bins 0 .. last - 1 */

    /* numpy.histogram's counts: [edge[i], edge[i+1]), the last bin closed. */
    int64_t count[HIST_BINS] = {0};
    double min = values[0], max = values[0];
    for (size_t i = 0; i < n; i++) {
        double v = values[i];
        if (isnan(v) || v < min) min = isnan(min) ? min : v;
        if (isnan(v) || v > max) max = isnan(max) ? max : v;
        if (!(v >= edge[0] && v <= edge[last])) continue; /* outside, or NaN */
        int lo = 0, hi = last; /* edge[lo] <= v; the answer is in [lo, hi] */
        while (lo < hi) {
            int mid = lo + (hi - lo + 1) / 2;
            if (edge[mid] <= v) lo = mid;
            else hi = mid - 1;
        }
        count[lo == last ? last - 1 : lo]++;
    }
    int first = -1, final = -1;
    for (int b = 0; b < last; b++) {
        if (count[b] == 0) continue;
        if (first < 0) first = b;
        final = b;
    }
    if (first < 0)
        return ct_set_error(CT_EINVAL,
                            "%s: %s: none of the %zu values lies within the histogram's edges "
                            "[%.17g, %.17g] (tag \"%s\")",
                            fn, w->path, n, edge[0], edge[last], tag);

    /* torch's trimming: an empty bucket, then the first to the last
     * non-empty one; each bucket's limit is its right edge. */
    size_t m = (size_t)(final - first) + 2;
    double *limits = malloc(2 * m * sizeof *limits);
    uint8_t *body = malloc(1 + 10 + 5 * 9 + 2 * (1 + 10 + 8 * m));
    if (!limits || !body) {
        free(limits);
        free(body);
        return ct_set_error(CT_ENOMEM, "%s: %s: out of memory", fn, w->path);
    }
    double *buckets = limits + m;
    buckets[0] = 0.0;
    for (size_t b = 1; b < m; b++) buckets[b] = (double)count[first + (int)b - 1];
    for (size_t b = 0; b < m; b++) limits[b] = edge[first + (int)b];

    /* HistogramProto, after the Value's histo key and length. */
    uint8_t *h = body + 11; /* room for the key and the length, moved down below */
    size_t hn = 0;
    hn += put_double_if_set(h + hn, HISTO_MIN, min);
    hn += put_double_if_set(h + hn, HISTO_MAX, max);
    hn += put_double_if_set(h + hn, HISTO_NUM, (double)n);
    hn += put_double_if_set(h + hn, HISTO_SUM, 0.0 + pairwise_sum(values, n, false));
    hn += put_double_if_set(h + hn, HISTO_SUM_SQUARES, 0.0 + pairwise_sum(values, n, true));
    hn += put_packed_doubles(h + hn, HISTO_BUCKET_LIMIT, limits, m);
    hn += put_packed_doubles(h + hn, HISTO_BUCKET, buckets, m);
    uint8_t key[11];
    size_t kn = put_len_prefix(key, VALUE_HISTO, hn);
    memcpy(h - kn, key, kn);

    const piece t = {tag, tag_len}, b = {h - kn, kn + hn};
    rc = write_value(w, &t, 1, &b, 1, step, wall_time, fn);
    free(limits);
    free(body);
    return rc;
}

/* ---- images ---------------------------------------------------------------- */

/* libpng writes into a growing buffer, and reports errors by longjmp. */
typedef struct {
    uint8_t *data;
    size_t len, cap;
    bool oom;
    char why[256];
} png_sink;

static void png_sink_write(png_structp png, png_bytep bytes, png_size_t n) {
    png_sink *sink = png_get_io_ptr(png);
    if (sink->oom) return;
    if (sink->len + n > sink->cap) {
        size_t cap = sink->cap ? sink->cap : 4096;
        while (cap < sink->len + n) cap *= 2;
        uint8_t *grown = realloc(sink->data, cap);
        if (!grown) {
            sink->oom = true;
            return;
        }
        sink->data = grown;
        sink->cap = cap;
    }
    memcpy(sink->data + sink->len, bytes, n);
    sink->len += n;
}

static void png_sink_flush(png_structp png) { (void)png; }

static void png_on_error(png_structp png, png_const_charp msg) {
    png_sink *sink = png_get_error_ptr(png);
    snprintf(sink->why, sizeof sink->why, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

/* An 8-bit PNG of the pixels (gray, gray+alpha, RGB, RGBA by channel
 * count), encoded by libpng with its default filtering and zlib level 6, as
 * PIL's Image.save(format="PNG"), which torch's add_image uses. NEW buffer
 * in *out. */
static int encode_png(const uint8_t *px, int height, int width, int channels, uint8_t **out,
                      size_t *out_len, const char *fn, const char *path) {
    static const int color_type[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                      PNG_COLOR_TYPE_RGB_ALPHA};
    png_sink sink = {0};
    png_bytep *rows = malloc((size_t)height * sizeof *rows);
    png_structp png = rows ? png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, png_on_error, png_on_warning)
                           : NULL;
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        free(rows);
        return ct_set_error(CT_ENOMEM, "%s: %s: out of memory for a %d x %d image", fn, path, height, width);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(rows);
        free(sink.data);
        return ct_set_error(CT_EINVAL, "%s: %s: libpng: %s", fn, path, sink.why);
    }
    png_set_write_fn(png, &sink, png_sink_write, png_sink_flush);
    png_set_compression_level(png, 6);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, color_type[channels], PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    const size_t row = (size_t)width * (size_t)channels;
    for (int y = 0; y < height; y++) rows[y] = (png_bytep)(px + (size_t)y * row);
    png_write_info(png, info);
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    if (sink.oom) {
        free(sink.data);
        return ct_set_error(CT_ENOMEM, "%s: %s: out of memory for a %d x %d image", fn, path, height, width);
    }
    *out = sink.data;
    *out_len = sink.len;
    return 0;
}

int cti_tb_add_image(cti_tb_writer *w, const char *tag, const uint8_t *hwc, int height, int width,
                    int channels, int64_t step, double wall_time) {
    static const char fn[] = "cti_tb_add_image";
    size_t tag_len;
    int rc = check_tag_time(w, tag, &tag_len, &wall_time, fn);
    if (rc != 0) return rc;
    if (!hwc) return ct_set_error(CT_EINVAL, "%s: %s: pixels are NULL (tag \"%s\")", fn, w->path, tag);
    if (height < 1 || width < 1)
        return ct_set_error(CT_EINVAL, "%s: %s: image size %d x %d: both must be >= 1 (tag \"%s\")", fn,
                            w->path, height, width, tag);
    if (channels != 1 && channels != 3 && channels != 4)
        return ct_set_error(CT_EINVAL,
                            "%s: %s: %d channels: an image has 1 (gray), 3 (RGB) or 4 (RGBA) "
                            "(tag \"%s\")",
                            fn, w->path, channels, tag);
    if ((rc = check_state(w, fn)) != 0) return rc;

    uint8_t *png = NULL;
    size_t png_len = 0;
    if ((rc = encode_png(hwc, height, width, channels, &png, &png_len, fn, w->path)) != 0) return rc;
    /* Value.image = Image{height, width, colorspace, encoded_image_string}. */
    uint8_t img_head[64];
    size_t ih = 0;
    img_head[ih++] = field_key(IMAGE_HEIGHT, WIRE_VARINT);
    ih += cti_tb_put_varint(img_head + ih, (uint64_t)height);
    img_head[ih++] = field_key(IMAGE_WIDTH, WIRE_VARINT);
    ih += cti_tb_put_varint(img_head + ih, (uint64_t)width);
    img_head[ih++] = field_key(IMAGE_COLORSPACE, WIRE_VARINT);
    ih += cti_tb_put_varint(img_head + ih, (uint64_t)channels);
    ih += put_len_prefix(img_head + ih, IMAGE_ENCODED, png_len);
    uint8_t key[11];
    size_t kn = put_len_prefix(key, VALUE_IMAGE, ih + png_len);

    const piece t = {tag, tag_len}, body[3] = {{key, kn}, {img_head, ih}, {png, png_len}};
    rc = write_value(w, &t, 1, body, 3, step, wall_time, fn);
    free(png);
    return rc;
}

/* ---- text ------------------------------------------------------------------- */

int cti_tb_add_text(cti_tb_writer *w, const char *tag, const char *text, int64_t step,
                   double wall_time) {
    static const char fn[] = "cti_tb_add_text";
    size_t tag_len;
    int rc = check_tag_time(w, tag, &tag_len, &wall_time, fn);
    if (rc != 0) return rc;
    if (!text) return ct_set_error(CT_EINVAL, "%s: %s: text is NULL (tag \"%s\")", fn, w->path, tag);
    size_t text_len = strlen(text);
    size_t bad = cti_tb_utf8_error_at(text, text_len);
    if (bad < text_len)
        return ct_set_error(CT_EINVAL, "%s: %s: text is not valid UTF-8 (byte %zu; tag \"%s\")", fn,
                            w->path, bad, tag);
    if ((rc = check_state(w, fn)) != 0) return rc;

    static const char suffix[] = "/text_summary";
    /* TensorProto{dtype: DT_STRING (7), tensor_shape: {dim: [{size: 1}]},
     * string_val: [text]} */
    static const uint8_t dtype_shape[] = {0x08, 0x07, 0x12, 0x04, 0x12, 0x02, 0x08, 0x01};
    /* Value.metadata = SummaryMetadata{plugin_data: {plugin_name: "text"}} */
    static const uint8_t metadata[] = {0x4A, 0x08, 0x0A, 0x06, 0x0A, 0x04, 't', 'e', 'x', 't'};
    uint8_t head[32];
    uint64_t string_len = 1 + varint_size(text_len) + text_len;
    size_t hn = put_len_prefix(head, VALUE_TENSOR, sizeof dtype_shape + string_len);
    memcpy(head + hn, dtype_shape, sizeof dtype_shape);
    hn += sizeof dtype_shape;
    hn += put_len_prefix(head + hn, 8 /* string_val */, text_len);

    const piece t[2] = {{tag, tag_len}, {suffix, sizeof suffix - 1}};
    const piece body[3] = {{head, hn}, {text, text_len}, {metadata, sizeof metadata}};
    return write_value(w, t, 2, body, 3, step, wall_time, fn);
}

/* ---- plugin metadata only (the hparams plugin's summaries) ---------------- */

int cti_tb_add_plugin_value(cti_tb_writer *w, const char *tag, const char *plugin_name,
                           const void *content, size_t content_len, int64_t step,
                           double wall_time, const char *caller) {
    const char *fn = caller ? caller : "cti_tb_add_plugin_value";
    size_t tag_len;
    int rc = check_tag_time(w, tag, &tag_len, &wall_time, fn);
    if (rc != 0) return rc;
    if (!plugin_name || !*plugin_name)
        return ct_set_error(CT_EINVAL, "%s: %s: plugin name is %s (tag \"%s\")", fn, w->path,
                            plugin_name ? "empty" : "NULL", tag);
    size_t name_len = strlen(plugin_name);
    if (cti_tb_utf8_error_at(plugin_name, name_len) < name_len)
        return ct_set_error(CT_EINVAL, "%s: %s: plugin name is not valid UTF-8 (tag \"%s\")", fn,
                            w->path, tag);
    if (!content && content_len > 0)
        return ct_set_error(CT_EINVAL, "%s: %s: content is NULL (tag \"%s\")", fn, w->path, tag);
    if ((rc = check_state(w, fn)) != 0) return rc;

    /* Value.metadata = SummaryMetadata{plugin_data: PluginData{plugin_name,
     * content}}; an empty content is left out, as proto3 leaves out bytes. */
    uint64_t data_len = 1 + varint_size(name_len) + name_len;
    if (content_len > 0) data_len += 1 + varint_size(content_len) + content_len;
    uint64_t metadata_len = 1 + varint_size(data_len) + data_len;
    uint8_t head[40], mid[12];
    size_t hn = put_len_prefix(head, VALUE_METADATA, metadata_len);
    hn += put_len_prefix(head + hn, 1 /* plugin_data */, data_len);
    hn += put_len_prefix(head + hn, 1 /* plugin_name */, name_len);
    size_t mn = content_len > 0 ? put_len_prefix(mid, 2 /* content */, content_len) : 0;

    const piece t = {tag, tag_len};
    const piece body[4] = {{head, hn}, {plugin_name, name_len}, {mid, mn}, {content, content_len}};
    return write_value(w, &t, 1, body, content_len > 0 ? 4 : 2, step, wall_time, fn);
}

static int flush_writer(cti_tb_writer *w, const char *fn) {
    if (w->failed) return ct_set_error(CT_ESTATE, "%s: %s: an earlier write failed", fn, w->path);
    return fflush(w->f) == 0 ? 0 : write_failed(w, fn);
}

int cti_tb_flush(cti_tb_writer *w) {
    if (!w) return ct_set_error(CT_EINVAL, "cti_tb_flush: writer is NULL");
    return flush_writer(w, "cti_tb_flush");
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

cti_tb_writer *cti_tb_open(const char *logdir, const char *suffix) {
    static const char fn[] = "cti_tb_open";
    if (!logdir || !*logdir) {
        ct_set_error(CT_EINVAL, "%s: logdir is %s", fn, logdir ? "empty" : "NULL");
        return NULL;
    }
    if (!suffix) suffix = "";
    if (strchr(suffix, '/')) {
        ct_set_error(CT_EINVAL, "%s: suffix \"%s\" contains '/'", fn, suffix);
        return NULL;
    }
    if (cti_make_dirs(logdir, "log directory") != CT_OK) {
        ct_set_error(ct_last_code(), "%s: %s", fn, ct_last_error());
        return NULL;
    }

    size_t dir_len = strlen(logdir);
    while (dir_len > 0 && logdir[dir_len - 1] == '/') dir_len--; /* "runs/" + "/events..." */
    size_t cap = dir_len + strlen(suffix) + 256 + 96; /* hostname, digits, fixed text */
    cti_tb_writer *w = calloc(1, sizeof *w + cap);
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

const char *cti_tb_path(const cti_tb_writer *w) {
    return w ? w->path : NULL;
}

void cti_tb_close(cti_tb_writer *w) {
    if (!w) return;
    fclose(w->f); /* flushes; a failure here is documented as unreported */
    free(w);
}
