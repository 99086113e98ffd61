/* The HParams plugin's summaries (src/formats/tb_hparams.c) without Python:
 * a few records byte for byte against hand-encoded protobufs (the empty
 * cases, the session end, a content too large for the stack buffer), and
 * every refused argument, each CT_EINVAL with a message naming it and
 * nothing written. test_hp_read.py checks whole searches with TensorBoard's
 * readers, its HParams plugin and torch's hparams(). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "ct_test.h"
#include "formats/tb_hparams.h"

static char dir[256];

/* ---- reading back ------------------------------------------------------------ */

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* The data of the file's last record into buf (room for cap bytes); its
 * length, or 0 when the file cannot be read. */
static size_t last_record(const char *path, uint8_t *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = 0;
    uint8_t head[12];
    while (fread(head, 1, 12, f) == 12) {
        uint64_t len = 0;
        for (int i = 7; i >= 0; i--) len = len << 8 | head[i];
        if (len > cap || fread(buf, 1, (size_t)len, f) != len || fseek(f, 4, SEEK_CUR) != 0) {
            got = 0;
            break;
        }
        got = (size_t)len;
    }
    fclose(f);
    return got;
}

/* ---- a tiny encoder for the expected bytes ------------------------------------ */

typedef struct {
    uint8_t b[4096];
    size_t n;
} bytes;

static void put(bytes *o, const void *p, size_t n) {
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void put_byte(bytes *o, uint8_t v) { o->b[o->n++] = v; }

static void put_varint(bytes *o, uint64_t v) { o->n += cti_tb_put_varint(o->b + o->n, v); }

static void put_double(bytes *o, unsigned field, double d) {
    uint64_t bits;
    memcpy(&bits, &d, 8);
    put_byte(o, (uint8_t)(field << 3 | 1));
    for (int i = 0; i < 8; i++) put_byte(o, (uint8_t)(bits >> (8 * i)));
}

/* key, length, bytes of a length-delimited field */
static void put_len(bytes *o, unsigned field, const void *p, size_t n) {
    put_varint(o, field << 3 | 2);
    put_varint(o, n);
    put(o, p, n);
}

static void put_str(bytes *o, unsigned field, const char *s) { put_len(o, field, s, strlen(s)); }

/* The whole Event a tb_hparams call writes around `content` (the
 * HParamsPluginData's bytes). */
static void expected_event(bytes *out, double wall_time, const char *tag, const bytes *content) {
    bytes pd = {.n = 0}, md = {.n = 0}, value = {.n = 0}, summary = {.n = 0};
    put_str(&pd, 1, "hparams");
    put_len(&pd, 2, content->b, content->n);
    put_len(&md, 1, pd.b, pd.n);
    put_str(&value, 1, tag);
    put_len(&value, 9, md.b, md.n);
    put_len(&summary, 1, value.b, value.n);
    out->n = 0;
    put_double(out, 1, wall_time);
    put_len(out, 5, summary.b, summary.n);
}

static uint8_t rec[1 << 16];

static void check_last(const char *path, const bytes *want, int line) {
    size_t n = last_record(path, rec, sizeof rec);
    ct_test_checks++;
    if (n != want->n || memcmp(rec, want->b, n) != 0) {
        ct_test_failures++;
        fprintf(stderr, "%s:%d: last record (%zu bytes) differs from the expected %zu bytes\n",
                __FILE__, line, n, want->n);
    }
}

/* ---- records byte for byte ----------------------------------------------------- */

static void test_bytes(void) {
    char logdir[512];
    snprintf(logdir, sizeof logdir, "%s/bytes", dir);
    cti_tb_writer *w = cti_tb_open(logdir, "");
    CHECK(w != NULL);
    if (!w) return;
    const char *path = cti_tb_path(w);
    bytes content, inner, event;

    /* An experiment of nothing: Experiment{time_created_secs} only. */
    CHECK_OK(cti_tb_add_hparams_experiment(w, NULL, 0, NULL, 0, 1.5));
    CHECK_OK(cti_tb_flush(w));
    inner.n = 0;
    put_double(&inner, 3, 1.5);
    content.n = 0;
    put_len(&content, 2, inner.b, inner.n);
    expected_event(&event, 1.5, "_hparams_/experiment", &content);
    check_last(path, &event, __LINE__);

    /* A session with no values and no group ("" as NULL): start time only. */
    CHECK_OK(cti_tb_add_hparams_session_start(w, "", NULL, 0, 2.0));
    CHECK_OK(cti_tb_flush(w));
    inner.n = 0;
    put_double(&inner, 5, 2.0);
    content.n = 0;
    put_len(&content, 3, inner.b, inner.n);
    expected_event(&event, 2.0, "_hparams_/session_start_info", &content);
    check_last(path, &event, __LINE__);

    /* The end: status, end time; STATUS_UNKNOWN (0) is left out. */
    CHECK_OK(cti_tb_add_hparams_session_end(w, CT_TB_HP_STATUS_RUNNING, 3.25));
    CHECK_OK(cti_tb_flush(w));
    inner.n = 0;
    put_byte(&inner, 0x08);
    put_byte(&inner, 3);
    put_double(&inner, 2, 3.25);
    content.n = 0;
    put_len(&content, 4, inner.b, inner.n);
    expected_event(&event, 3.25, "_hparams_/session_end_info", &content);
    check_last(path, &event, __LINE__);

    CHECK_OK(cti_tb_add_hparams_session_end(w, CT_TB_HP_STATUS_UNKNOWN, 4.0));
    CHECK_OK(cti_tb_flush(w));
    inner.n = 0;
    put_double(&inner, 2, 4.0);
    content.n = 0;
    put_len(&content, 4, inner.b, inner.n);
    expected_event(&event, 4.0, "_hparams_/session_end_info", &content);
    check_last(path, &event, __LINE__);

    /* A session of 40 values, past the 512-byte stack buffer: the map's
     * entries in name order whatever the given order, a group name. */
    enum { NV = 40 };
    cti_tb_hp_value v[NV];
    char names[NV][16];
    for (int i = 0; i < NV; i++) {
        int k = (i * 17) % NV; /* a permutation of 0..39 */
        snprintf(names[i], sizeof names[i], "hparam_%02d", k);
        v[i] = (cti_tb_hp_value){.name = names[i], .kind = CT_TB_HP_NUMBER, .number = k * 0.5};
    }
    CHECK_OK(cti_tb_add_hparams_session_start(w, "group", v, NV, 5.0));
    CHECK_OK(cti_tb_flush(w));
    inner.n = 0;
    for (int k = 0; k < NV; k++) {
        char name[16];
        snprintf(name, sizeof name, "hparam_%02d", k);
        bytes entry = {.n = 0}, value = {.n = 0};
        put_double(&value, 2, k * 0.5);
        put_str(&entry, 1, name);
        put_len(&entry, 2, value.b, value.n);
        put_len(&inner, 1, entry.b, entry.n);
    }
    put_str(&inner, 4, "group");
    put_double(&inner, 5, 5.0);
    CHECK(inner.n > 512);
    content.n = 0;
    put_len(&content, 3, inner.b, inner.n);
    expected_event(&event, 5.0, "_hparams_/session_start_info", &content);
    check_last(path, &event, __LINE__);

    /* The raw piece: a plugin's metadata with an empty content (left out). */
    CHECK_OK(cti_tb_add_plugin_value(w, "t", "p", NULL, 0, 0, 6.0, NULL));
    CHECK_OK(cti_tb_flush(w));
    static const uint8_t raw[] = {0x09, 0, 0, 0, 0, 0, 0, 0x18, 0x40, /* wall_time 6.0 */
                                  0x2A, 0x0C, 0x0A, 0x0A, 0x0A, 0x01, 't', 0x4A, 0x05,
                                  0x0A, 0x03, 0x0A, 0x01, 'p'};
    bytes want = {.n = 0};
    put(&want, raw, sizeof raw);
    check_last(path, &want, __LINE__);
    cti_tb_close(w);
}

/* ---- refused arguments ---------------------------------------------------------- */

#define NUM(x) {.kind = CT_TB_HP_NUMBER, .number = (x)}
#define STR(x) {.kind = CT_TB_HP_STRING, .string = (x)}

static void test_errors(void) {
    char logdir[512];
    snprintf(logdir, sizeof logdir, "%s/errors", dir);
    cti_tb_writer *w = cti_tb_open(logdir, "");
    CHECK(w != NULL);
    if (!w) return;
    const char *path = cti_tb_path(w);
    const long size0 = file_size(path);
    const char *const tags[] = {"validation/validation_accuracy"};

    /* The experiment. */
    CHECK(cti_tb_add_hparams_experiment(NULL, NULL, 0, NULL, 0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "cti_tb_add_hparams_experiment: writer is NULL");
    CHECK(cti_tb_add_hparams_experiment(w, NULL, 0, NULL, 0, NAN) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "cti_tb_add_hparams_experiment: ");
    CHECK(cti_tb_add_hparams_experiment(w, NULL, 0, NULL, 0, -INFINITY) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "wall_time -inf is not finite");
    CHECK(cti_tb_add_hparams_experiment(w, NULL, 1, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hps is NULL (n_hps 1)");
    const cti_tb_hp_info ok = {.name = "lr", .kind = CT_TB_HP_NUMBER};
    CHECK(cti_tb_add_hparams_experiment(w, &ok, 1, NULL, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "metric_tags is NULL (n_metrics 2)");

    cti_tb_hp_info h[2] = {ok, ok};
    h[1].name = NULL;
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam name 1 is NULL");
    h[1].name = "";
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam name 1 is empty");
    h[1].name = "ab\xff";
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "is not valid UTF-8 (byte 2)");
    h[1].name = "lr";
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"lr\" is given twice (0 and 1)");
    h[1] = (cti_tb_hp_info){.name = "x", .kind = (cti_tb_hp_kind)9};
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"x\": kind 9 is not a cti_tb_hp_kind");
    h[1] = (cti_tb_hp_info){.name = "x", .kind = CT_TB_HP_NUMBER, .domain = (cti_tb_hp_domain)5};
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"x\": domain 5 is not a cti_tb_hp_domain");
    h[1] = (cti_tb_hp_info){.name = "x", .kind = CT_TB_HP_STRING, .domain = CT_TB_HP_INTERVAL,
                           .max = 1};
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"x\": an interval is for numbers, not a string");
    h[1] = (cti_tb_hp_info){.name = "x", .kind = CT_TB_HP_NUMBER, .domain = CT_TB_HP_INTERVAL,
                           .min = NAN, .max = 1};
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"x\": interval [nan, 1] is not finite with min <= max");
    h[1].min = 0, h[1].max = INFINITY;
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "interval [0, inf]");
    h[1].min = 2, h[1].max = 1;
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "interval [2, 1] is not finite with min <= max");

    const cti_tb_hp_value mixed[] = {NUM(1), STR("a")};
    const cti_tb_hp_value nan_num[] = {NUM(NAN)};
    const cti_tb_hp_value inf_num[] = {NUM(1), NUM(-INFINITY)};
    const cti_tb_hp_value null_str[] = {STR(NULL)};
    const cti_tb_hp_value bad_str[] = {STR("a\xc0\xaf")};
    h[1] = (cti_tb_hp_info){.name = "x", .kind = CT_TB_HP_NUMBER, .domain = CT_TB_HP_DISCRETE,
                           .values = mixed, .n_values = 0};
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"x\": discrete domain has no values (values set, n_values 0)");
    h[1].values = NULL, h[1].n_values = 2;
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "discrete domain has no values (values NULL, n_values 2)");
    h[1].values = mixed;
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"x\": domain value 1 is a string, not a number");
    h[1].values = nan_num, h[1].n_values = 1;
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"x\": domain value 0 is nan: numbers must be finite");
    h[1].values = inf_num, h[1].n_values = 2;
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "domain value 1 is -inf: numbers must be finite");
    h[1] = (cti_tb_hp_info){.name = "s", .kind = CT_TB_HP_STRING, .domain = CT_TB_HP_DISCRETE,
                           .values = null_str, .n_values = 1};
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"s\": domain value 0 has a NULL string");
    h[1].values = bad_str;
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"s\": domain value 0 is not valid UTF-8 (byte 1)");
    h[1].values = mixed, h[1].n_values = 1; /* a number in a string's domain */
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "domain value 0 is a number, not a string");
    h[1].kind = CT_TB_HP_BOOL, h[1].values = mixed + 1;
    CHECK(cti_tb_add_hparams_experiment(w, h, 2, tags, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "domain value 0 is a string, not a bool");

    const char *bad_tags[3][2] = {{"a", NULL}, {"", "a"}, {"a", "a"}};
    const char *needles[3] = {"metric tag 1 is NULL", "metric tag 0 is empty",
                              "metric tag \"a\" is given twice (0 and 1)"};
    for (int i = 0; i < 3; i++) {
        CHECK(cti_tb_add_hparams_experiment(w, &ok, 1, bad_tags[i], 2, 0) == CT_EINVAL);
        CHECK_ERR(CT_EINVAL, needles[i]);
    }
    const char *utf8_tag[] = {"\xe2\x82"};
    CHECK(cti_tb_add_hparams_experiment(w, &ok, 1, utf8_tag, 1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "metric tag 0 \"\xe2\x82\" is not valid UTF-8 (byte 0)");

    /* The session's start. */
    cti_tb_hp_value v[2] = {NUM(0.1), STR("sgd")};
    v[0].name = "lr", v[1].name = "optimizer";
    CHECK(cti_tb_add_hparams_session_start(NULL, NULL, v, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "cti_tb_add_hparams_session_start: writer is NULL");
    CHECK(cti_tb_add_hparams_session_start(w, NULL, v, 2, INFINITY) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "cti_tb_add_hparams_session_start: ");
    CHECK(cti_tb_add_hparams_session_start(w, NULL, v, 2, NAN) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "start_time nan is not finite");
    CHECK(cti_tb_add_hparams_session_start(w, NULL, NULL, 3, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "values is NULL (n 3)");
    CHECK(cti_tb_add_hparams_session_start(w, "g\xff", v, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "group_name \"g\xff\" is not valid UTF-8 (byte 1)");
    v[1].name = NULL;
    CHECK(cti_tb_add_hparams_session_start(w, NULL, v, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam name 1 is NULL");
    v[1].name = "";
    CHECK(cti_tb_add_hparams_session_start(w, NULL, v, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam name 1 is empty");
    v[1].name = "\xed\xa0\x80"; /* a surrogate */
    CHECK(cti_tb_add_hparams_session_start(w, NULL, v, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "is not valid UTF-8 (byte 0)");
    v[1].name = "lr";
    CHECK(cti_tb_add_hparams_session_start(w, NULL, v, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"lr\" is given twice (0 and 1)");
    v[1].name = "optimizer";
    v[1].kind = (cti_tb_hp_kind)-1;
    CHECK(cti_tb_add_hparams_session_start(w, NULL, v, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"optimizer\": kind -1 is not a cti_tb_hp_kind");
    v[1].kind = CT_TB_HP_STRING;
    v[1].string = NULL;
    CHECK(cti_tb_add_hparams_session_start(w, NULL, v, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"optimizer\": value 1 has a NULL string");
    v[1].string = "\x80";
    CHECK(cti_tb_add_hparams_session_start(w, NULL, v, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"optimizer\": value 1 is not valid UTF-8 (byte 0)");
    v[1].string = "sgd";
    v[0].number = NAN;
    CHECK(cti_tb_add_hparams_session_start(w, NULL, v, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"lr\": value 0 is nan: numbers must be finite");
    v[0].number = INFINITY;
    CHECK(cti_tb_add_hparams_session_start(w, NULL, v, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "hparam \"lr\": value 0 is inf: numbers must be finite");
    v[0].number = 0.1;

    /* The session's end. */
    CHECK(cti_tb_add_hparams_session_end(NULL, CT_TB_HP_STATUS_SUCCESS, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "cti_tb_add_hparams_session_end: writer is NULL");
    CHECK(cti_tb_add_hparams_session_end(w, CT_TB_HP_STATUS_SUCCESS, NAN) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "cti_tb_add_hparams_session_end: ");
    CHECK(cti_tb_add_hparams_session_end(w, CT_TB_HP_STATUS_SUCCESS, INFINITY) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "end_time inf is not finite");
    CHECK(cti_tb_add_hparams_session_end(w, (cti_tb_hp_status)4, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "status 4 is not 0 (unknown), 1 (success), 2 (failure) or 3 (running)");
    CHECK(cti_tb_add_hparams_session_end(w, (cti_tb_hp_status)-1, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "status -1 is not");

    /* The raw piece. */
    CHECK(cti_tb_add_plugin_value(w, "t", NULL, NULL, 0, 0, 0, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "cti_tb_add_plugin_value: ");
    CHECK(cti_tb_add_plugin_value(w, "t", "", NULL, 0, 0, 0, "caller") == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "caller: ");
    CHECK(cti_tb_add_plugin_value(w, "t", "p\xff", NULL, 0, 0, 0, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "plugin name is not valid UTF-8 (tag \"t\")");
    CHECK(cti_tb_add_plugin_value(w, "t", "p", NULL, 3, 0, 0, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "content is NULL (tag \"t\")");
    CHECK(cti_tb_add_plugin_value(w, "", "p", NULL, 0, 0, 0, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "tag is empty");

    /* Nothing was written, and the writer still works. */
    CHECK_OK(cti_tb_flush(w));
    CHECK(file_size(path) == size0);
    CHECK_OK(cti_tb_add_hparams_session_start(w, NULL, v, 2, 0));
    CHECK_OK(cti_tb_add_hparams_session_end(w, CT_TB_HP_STATUS_SUCCESS, 0));
    CHECK_OK(cti_tb_flush(w));
    CHECK(file_size(path) > size0);
    cti_tb_close(w);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ct_tb_hparams_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    test_bytes();
    test_errors();
    int rc = ct_test_result("tb_hparams_unit");
    if (rc == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    return rc;
}
