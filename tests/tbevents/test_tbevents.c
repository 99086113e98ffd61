/* The pieces of the event-file writer (src/formats/tbevents.c): CRC32C against
 * published test vectors and the bit-by-bit definition, TFRecord's masking,
 * protobuf varints at their edges, one scalar event byte for byte against
 * what Python's protobuf serializes, the file's name, and every error path.
 * test_tb_read.py checks whole files with TensorBoard's own readers. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, getpid, gethostname */

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ct_test.h"
#include "formats/tbevents.h"

static char dir[256];

/* ---- CRC32C ---------------------------------------------------------------- */

static uint32_t crc32c_bitwise(const unsigned char *p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void test_crc32c(void) {
    CHECK(cti_tb_crc32c(0, "123456789", 9) == 0xE3069283u);
    unsigned char buf[256];
    memset(buf, 0, 32);
    CHECK(cti_tb_crc32c(0, buf, 32) == 0x8A9136AAu);
    memset(buf, 0xFF, 32); /* RFC 3720, B.4 */
    CHECK(cti_tb_crc32c(0, buf, 32) == 0x62A8AB43u);
    for (int i = 0; i < 256; i++) buf[i] = (unsigned char)i;
    CHECK(cti_tb_crc32c(0, buf, 32) == 0x46DD794Eu);
    CHECK(cti_tb_crc32c(0, buf, 256) == 0x9C44184Bu); /* Python's crc32c, every byte value */
    CHECK(cti_tb_crc32c(0, buf, 0) == 0);
    CHECK(cti_tb_crc32c(0x12345678u, buf, 0) == 0x12345678u);

    /* Continuing a CRC over a split buffer gives the CRC of the whole. */
    CHECK(cti_tb_crc32c(cti_tb_crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u);

    /* The table against the definition, for every byte value at every
     * position the table is reached from. */
    uint32_t x = 12345;
    for (int trial = 0; trial < 200; trial++) {
        size_t n = (size_t)(trial % 67);
        for (size_t i = 0; i < n; i++) {
            x = x * 1664525u + 1013904223u;
            buf[i] = (unsigned char)(x >> 24);
        }
        CHECK(cti_tb_crc32c(0, buf, n) == crc32c_bitwise(buf, n));
    }
}

static void test_mask(void) {
    CHECK(cti_tb_mask_crc(0) == 0xA282EAD8u);
    CHECK(cti_tb_mask_crc(0xE3069283u) == 0xC78AB0E5u); /* Python's masked_crc32c(b"123456789") */
    /* The rotation wraps and the addition is modulo 2^32. */
    CHECK(cti_tb_mask_crc(0xFFFFFFFFu) == (uint32_t)(0xFFFFFFFFu + 0xA282EAD8u));
    CHECK(cti_tb_mask_crc(1u << 15) == 1u + 0xA282EAD8u);
    CHECK(cti_tb_mask_crc(1) == (1u << 17) + 0xA282EAD8u);
    /* The length CRC of an empty record, as TensorFlow writes it. */
    unsigned char zero8[8] = {0};
    CHECK(cti_tb_mask_crc(cti_tb_crc32c(0, zero8, 8)) == 0x07980329u);
}

/* ---- varints ----------------------------------------------------------------- */

static void check_varint(uint64_t v, const uint8_t *want, size_t want_len, int line) {
    uint8_t out[12];
    memset(out, 0xEE, sizeof out);
    size_t n = cti_tb_put_varint(out, v);
    ct_test_checks++;
    if (n != want_len || memcmp(out, want, want_len) != 0 || out[n] != 0xEE) {
        ct_test_failures++;
        fprintf(stderr, "line %d: varint of %llu: %zu bytes, expected %zu\n", line,
                (unsigned long long)v, n, want_len);
    }
}
#define VARINT(v, ...)                                                                 \
    do {                                                                               \
        static const uint8_t want_[] = {__VA_ARGS__};                                  \
        check_varint((v), want_, sizeof want_, __LINE__);                              \
    } while (0)

static void test_varint(void) {
    VARINT(0, 0x00);
    VARINT(1, 0x01);
    VARINT(127, 0x7F);
    VARINT(128, 0x80, 0x01);
    VARINT(150, 0x96, 0x01); /* protobuf's documentation example */
    VARINT(300, 0xAC, 0x02);
    VARINT(16383, 0xFF, 0x7F);
    VARINT(16384, 0x80, 0x80, 0x01);
    VARINT(UINT64_C(1) << 32, 0x80, 0x80, 0x80, 0x80, 0x10);
    VARINT((uint64_t)INT64_MAX, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F);
    /* Negative int64 values pass as their two's complement: 10 bytes. */
    VARINT((uint64_t)(int64_t)-1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01);
    VARINT((uint64_t)(int64_t)-2, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01);
    VARINT((uint64_t)INT64_MIN, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01);
    VARINT(UINT64_MAX, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01);
}

/* ---- files ------------------------------------------------------------------ */

static size_t read_file(const char *path, unsigned char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static uint64_t get_le(const unsigned char *p, int nbytes) {
    uint64_t v = 0;
    for (int i = nbytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Checks the framing of the record at buf[*off] and returns its data (length
 * in *len), moving *off past it; NULL if the record is malformed. */
static const unsigned char *next_record(const unsigned char *buf, size_t size, size_t *off,
                                        size_t *len) {
    if (size - *off < 16) return NULL;
    const unsigned char *p = buf + *off;
    uint64_t n = get_le(p, 8);
    if (n > size - *off - 16) return NULL;
    if (get_le(p + 8, 4) != cti_tb_mask_crc(cti_tb_crc32c(0, p, 8))) return NULL;
    if (get_le(p + 12 + n, 4) != cti_tb_mask_crc(cti_tb_crc32c(0, p + 12, n))) return NULL;
    *off += 16 + n;
    *len = (size_t)n;
    return p + 12;
}

static void test_scalar_bytes(void) {
    char logdir[300];
    snprintf(logdir, sizeof logdir, "%s/bytes", dir);
    cti_tb_writer *w = cti_tb_open(logdir, NULL);
    CHECK(w != NULL);
    if (!w) return;
    CHECK_OK(cti_tb_add_scalar(w, "a", 0.5, 3, 1.5));
    CHECK_OK(cti_tb_add_scalar(w, "a", 0.0, -1, 1.5));
    CHECK_OK(cti_tb_add_scalar(w, "a", 0.25, 0, 1.5));
    char path[600];
    snprintf(path, sizeof path, "%s", cti_tb_path(w));
    cti_tb_close(w);

    static unsigned char buf[4096];
    size_t size = read_file(path, buf, sizeof buf), off = 0, len = 0;
    /* Event{wall_time: now, file_version: "brain.Event:2"} */
    const unsigned char *d = next_record(buf, size, &off, &len);
    CHECK(d && len == 9 + 2 + 13 && d[0] == 0x09 && d[9] == 0x1A && d[10] == 13 &&
          memcmp(d + 11, "brain.Event:2", 13) == 0);

    /* Python: Event(wall_time=1.5, step=3, summary=Summary(value=[
     * Summary.Value(tag="a", simple_value=0.5)])).SerializeToString() */
    static const unsigned char want1[] = {0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF8,
                                          0x3F, 0x10, 0x03, 0x2A, 0x0A, 0x0A, 0x08, 0x0A,
                                          0x01, 0x61, 0x15, 0x00, 0x00, 0x00, 0x3F};
    d = next_record(buf, size, &off, &len);
    CHECK(d && len == sizeof want1 && memcmp(d, want1, len) == 0);

    /* step=-1 is ten bytes; simple_value=0.0 is still written (a oneof
     * member has presence, so proto3 keeps its zero). */
    static const unsigned char want2[] = {0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF8,
                                          0x3F, 0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                          0xFF, 0xFF, 0xFF, 0x01, 0x2A, 0x0A, 0x0A, 0x08,
                                          0x0A, 0x01, 0x61, 0x15, 0x00, 0x00, 0x00, 0x00};
    d = next_record(buf, size, &off, &len);
    CHECK(d && len == sizeof want2 && memcmp(d, want2, len) == 0);

    /* step=0 is left out, as proto3 does. */
    static const unsigned char want3[] = {0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF8,
                                          0x3F, 0x2A, 0x0A, 0x0A, 0x08, 0x0A, 0x01, 0x61,
                                          0x15, 0x00, 0x00, 0x80, 0x3E};
    d = next_record(buf, size, &off, &len);
    CHECK(d && len == sizeof want3 && memcmp(d, want3, len) == 0);
    CHECK(off == size);
}

/* A tag far beyond any stack buffer: lengths take several varint bytes. */
static void test_long_tag(void) {
    char logdir[300];
    snprintf(logdir, sizeof logdir, "%s/long", dir);
    cti_tb_writer *w = cti_tb_open(logdir, "");
    CHECK(w != NULL);
    if (!w) return;
    size_t tag_len = 200000;
    char *tag = malloc(tag_len + 1);
    memset(tag, 'x', tag_len);
    tag[tag_len] = '\0';
    CHECK_OK(cti_tb_add_scalar(w, tag, 2.0, 7, 10.0));
    char path[600];
    snprintf(path, sizeof path, "%s", cti_tb_path(w));
    cti_tb_close(w);

    unsigned char *buf = malloc(tag_len + 4096);
    size_t size = read_file(path, buf, tag_len + 4096), off = 0, len = 0;
    CHECK(next_record(buf, size, &off, &len) != NULL);
    const unsigned char *d = next_record(buf, size, &off, &len);
    /* wall_time 9 + step 2 + summary (1 + 3) + value (1 + 3) + tag (1 + 3) + tag + float 5 */
    CHECK(d && len == 9 + 2 + 4 + 4 + 4 + tag_len + 5);
    CHECK(d && memcmp(d + 9 + 2 + 4 + 4 + 4, tag, tag_len) == 0);
    CHECK(off == size);
    free(buf);
    free(tag);
}

/* events.out.tfevents.<10 digits>.<hostname>.<pid><suffix>; a second writer
 * in the same second gets its own file. */
static void test_names(void) {
    char logdir[300], host[256], want[600];
    snprintf(logdir, sizeof logdir, "%s/names/a/b/", dir); /* parents and a trailing '/' */
    if (gethostname(host, sizeof host) != 0) strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';

    cti_tb_writer *w1 = cti_tb_open(logdir, ".ctrial");
    cti_tb_writer *w2 = cti_tb_open(logdir, ".ctrial");
    CHECK(w1 && w2);
    if (w1 && w2) {
        const char *p1 = cti_tb_path(w1), *p2 = cti_tb_path(w2);
        snprintf(want, sizeof want, "%s/names/a/b/events.out.tfevents.", dir);
        CHECK(strncmp(p1, want, strlen(want)) == 0);
        const char *stamp = p1 + strlen(want);
        size_t digits = strspn(stamp, "0123456789");
        CHECK(digits == 10 && stamp[10] == '.');
        long long secs = atoll(stamp);
        CHECK(secs > 1600000000LL && secs <= (long long)time(NULL));
        snprintf(want, sizeof want, ".%s.%ld.ctrial", host, (long)getpid());
        CHECK(strcmp(stamp + 10, want) == 0);
        CHECK(strcmp(p1, p2) != 0);
        struct stat st;
        CHECK(stat(p1, &st) == 0 && st.st_size == 40); /* the file_version record, flushed */
        CHECK(stat(p2, &st) == 0 && st.st_size == 40);
    }
    cti_tb_close(w1);
    cti_tb_close(w2);
}

/* ---- errors ------------------------------------------------------------------ */

static void test_errors(void) {
    char path[512];
    CHECK(cti_tb_open(NULL, "") == NULL);
    CHECK_ERR(CT_EINVAL, "cti_tb_open: logdir is NULL");
    CHECK(cti_tb_open("", "") == NULL);
    CHECK_ERR(CT_EINVAL, "cti_tb_open: logdir is empty");
    CHECK(cti_tb_open(dir, "a/b") == NULL);
    CHECK_ERR(CT_EINVAL, "suffix \"a/b\" contains '/'");

    /* A log directory under a regular file, and one that is a regular file. */
    snprintf(path, sizeof path, "%s/plain", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    char logdir[512], want[2048];
    snprintf(logdir, sizeof logdir, "%s/plain/sub/dir", dir);
    CHECK(cti_tb_open(logdir, "") == NULL);
    snprintf(want, sizeof want, "cannot create log directory %s: %s: %s", logdir, path,
             strerror(ENOTDIR));
    CHECK_ERR(CT_EIO, want);
    CHECK(cti_tb_open(path, "") == NULL);
    snprintf(want, sizeof want, "cannot create log directory %s: %s: %s", path, path,
             strerror(ENOTDIR));
    CHECK_ERR(CT_EIO, want);

    CHECK(cti_tb_add_scalar(NULL, "t", 1.0, 0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "cti_tb_add_scalar: writer is NULL");
    CHECK(cti_tb_flush(NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "cti_tb_flush: writer is NULL");
    CHECK(cti_tb_path(NULL) == NULL);
    cti_tb_close(NULL);

    snprintf(logdir, sizeof logdir, "%s/errors", dir);
    cti_tb_writer *w = cti_tb_open(logdir, "");
    CHECK(w != NULL);
    if (!w) return;
    CHECK(cti_tb_add_scalar(w, NULL, 1.0, 0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "tag is NULL");
    CHECK(cti_tb_add_scalar(w, "", 1.0, 0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "tag is empty");
    CHECK(cti_tb_add_scalar(w, "bad\xff", 1.0, 0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "is not valid UTF-8 (byte 3)");
    CHECK(cti_tb_add_scalar(w, "x\xc0\xaf", 1.0, 0, 0) == CT_EINVAL); /* overlong '/' */
    CHECK_ERR(CT_EINVAL, "(byte 1)");
    CHECK(cti_tb_add_scalar(w, "\xed\xa0\x80", 1.0, 0, 0) == CT_EINVAL); /* a surrogate */
    CHECK_ERR(CT_EINVAL, "(byte 0)");
    CHECK(cti_tb_add_scalar(w, "ab\xe2\x82", 1.0, 0, 0) == CT_EINVAL); /* cut short */
    CHECK_ERR(CT_EINVAL, "(byte 2)");
    CHECK(cti_tb_add_scalar(w, "\xf4\x90\x80\x80", 1.0, 0, 0) == CT_EINVAL); /* > U+10FFFF */
    CHECK_ERR(CT_EINVAL, "(byte 0)");
    CHECK(cti_tb_add_scalar(w, "t", 1.0, 0, NAN) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "wall_time nan is not finite (tag \"t\")");
    CHECK(cti_tb_add_scalar(w, "t", 1.0, 0, INFINITY) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "wall_time inf is not finite");
    /* Valid multi-byte tags pass; the refused calls above wrote nothing. */
    CHECK_OK(cti_tb_add_scalar(w, "größe/\xe2\x82\xac/\xf0\x9f\x98\x80", 1.0, 0, 0));
    CHECK_OK(cti_tb_flush(w));
    struct stat st;
    CHECK(stat(cti_tb_path(w), &st) == 0 && st.st_size > 40);
    cti_tb_close(w);
}

static int count_files(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Write failures, made real by a file-size limit (writes past it fail with
 * EFBIG instead of raising SIGXFSZ, which is ignored here). */
static void test_write_errors(void) {
    struct rlimit saved, lim;
    if (getrlimit(RLIMIT_FSIZE, &saved) != 0) return;
    signal(SIGXFSZ, SIG_IGN);
    char logdir[300], want[1024];
    lim = saved;

    /* Not even the file_version record fits: no writer, and no file left. */
    snprintf(logdir, sizeof logdir, "%s/full0", dir);
    lim.rlim_cur = 10;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    CHECK(cti_tb_open(logdir, "") == NULL);
    snprintf(want, sizeof want, "cti_tb_open: %s/events.out.tfevents.", logdir);
    CHECK(strstr(ct_last_error(), strerror(EFBIG)) != NULL);
    CHECK_ERR(CT_EIO, want);
    CHECK(count_files(logdir) == 0);

    /* A few kilobytes fit; the failing write is reported with the path and
     * errno's text, and the writer refuses everything after it. */
    snprintf(logdir, sizeof logdir, "%s/full1", dir);
    lim.rlim_cur = 4000;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    cti_tb_writer *w = cti_tb_open(logdir, "");
    CHECK(w != NULL);
    if (w) {
        char tag[1000];
        memset(tag, 't', sizeof tag - 1);
        tag[sizeof tag - 1] = '\0';
        int rc = 0, i;
        for (i = 0; i < 10 && rc == 0; i++) {
            rc = cti_tb_add_scalar(w, tag, i, i, 0);
            if (rc == 0) rc = cti_tb_flush(w);
        }
        CHECK(rc == CT_EIO && i > 1 && i < 10);
        snprintf(want, sizeof want, "%s: write failed (%s)", cti_tb_path(w), strerror(EFBIG));
        CHECK_ERR(CT_EIO, want);
        CHECK(cti_tb_add_scalar(w, "t", 1.0, 1, 0) == CT_ESTATE);
        snprintf(want, sizeof want, "cti_tb_add_scalar: %s: an earlier write failed", cti_tb_path(w));
        CHECK_ERR(CT_ESTATE, want);
        CHECK(cti_tb_flush(w) == CT_ESTATE);
        CHECK_ERR(CT_ESTATE, "an earlier write failed");
        cti_tb_close(w);
    }
    CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    signal(SIGXFSZ, SIG_DFL);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ct_tbevents_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    test_crc32c();
    test_mask();
    test_varint();
    test_scalar_bytes();
    test_long_tag();
    test_names();
    test_errors();
    test_write_errors();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ct_test_result("tbevents");
}
