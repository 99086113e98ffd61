/* src/formats/tb_hparams.c — the HParams plugin's summaries (see tb_hparams.h).
 *
 * The plugin data (an HParamsPluginData message) is encoded into one buffer
 * and handed to tbevents.c's cti_tb_add_plugin_value, which wraps it in the
 * Value, Summary, Event and TFRecord. A nested message's length precedes it,
 * so each message is encoded by a function that runs twice on the same
 * data: into a counting encoder (no buffer) to measure it, then into the
 * buffer. The whole content is measured the same way first, which decides
 * between the stack and one heap buffer.
 */
#include "formats/tb_hparams.h"

#include "base/clock.h"

#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/error.h"

/* ---- a protobuf encoder that can only count ------------------------------ */

enum { WIRE_VARINT = 0, WIRE_64BIT = 1, WIRE_LEN = 2 };

typedef struct {
    uint8_t *p; /* NULL: only count */
    size_t n;   /* bytes written (or counted) so far */
} pb;

static void pb_bytes(pb *b, const void *src, size_t n) {
    if (b->p && n > 0) memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void pb_varint(pb *b, uint64_t v) {
    uint8_t tmp[10];
    pb_bytes(b, tmp, cti_tb_put_varint(tmp, v));
}

static void pb_key(pb *b, unsigned field, unsigned wire) {
    pb_varint(b, (uint64_t)field << 3 | wire);
}

/* A double, little-endian whatever the host. */
static void pb_double(pb *b, unsigned field, double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(bits >> (8 * i));
    pb_key(b, field, WIRE_64BIT);
    pb_bytes(b, le, 8);
}

/* A proto3 double with implicit presence: left out when its bits are zero
 * (0.0, not -0.0), as protobuf's serializers do. */
static void pb_double_if_set(pb *b, unsigned field, double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    if (bits) pb_double(b, field, d);
}

static void pb_string(pb *b, unsigned field, const char *s) {
    size_t n = strlen(s);
    pb_key(b, field, WIRE_LEN);
    pb_varint(b, n);
    pb_bytes(b, s, n);
}

/* A nested message: `enc(arg)` measured, then written after its key and
 * length. Written even when empty (a oneof member or a repeated element). */
typedef void (*pb_encoder)(pb *b, const void *arg);

static void pb_message(pb *b, unsigned field, pb_encoder enc, const void *arg) {
    pb count = {NULL, 0};
    enc(&count, arg);
    pb_key(b, field, WIRE_LEN);
    pb_varint(b, count.n);
    if (b->p) {
        pb inner = {b->p + b->n, 0};
        enc(&inner, arg);
    }
    b->n += count.n;
}

/* ---- the messages ---------------------------------------------------------- */

/* Field numbers of tensorboard/plugins/hparams/{api,plugin_data}.proto and
 * google/protobuf/struct.proto. */
enum {
    VALUE_NUMBER = 2, /* google.protobuf.Value, oneof kind */
    VALUE_STRING = 3,
    VALUE_BOOL = 4,
    LIST_VALUES = 1, /* google.protobuf.ListValue */
    INTERVAL_MIN = 1,
    INTERVAL_MAX = 2,
    HPARAM_INFO_NAME = 1,
    HPARAM_INFO_TYPE = 4,
    HPARAM_INFO_DISCRETE = 5, /* oneof domain */
    HPARAM_INFO_INTERVAL = 6,
    METRIC_NAME_TAG = 2,
    METRIC_INFO_NAME = 1,
    EXPERIMENT_TIME_CREATED = 3,
    EXPERIMENT_HPARAM_INFOS = 4,
    EXPERIMENT_METRIC_INFOS = 5,
    MAP_KEY = 1,
    MAP_VALUE = 2,
    START_HPARAMS = 1,
    START_GROUP_NAME = 4,
    START_TIME = 5,
    END_STATUS = 1,
    END_TIME = 2,
    PLUGIN_DATA_EXPERIMENT = 2, /* HParamsPluginData, oneof data; version 0 left out */
    PLUGIN_DATA_SESSION_START = 3,
    PLUGIN_DATA_SESSION_END = 4,
};

/* api.proto's DataType by cti_tb_hp_kind. */
static const uint8_t data_type[3] = {3 /* FLOAT64 */, 1 /* STRING */, 2 /* BOOL */};

/* google.protobuf.Value: the oneof member is written even when zero. */
static void enc_value(pb *b, const void *arg) {
    const cti_tb_hp_value *v = arg;
    switch (v->kind) {
    case CT_TB_HP_NUMBER: pb_double(b, VALUE_NUMBER, v->number); break;
    case CT_TB_HP_STRING: pb_string(b, VALUE_STRING, v->string); break;
    case CT_TB_HP_BOOL:
        pb_key(b, VALUE_BOOL, WIRE_VARINT);
        pb_varint(b, v->boolean != 0);
        break;
    }
}

static void enc_list_value(pb *b, const void *arg) {
    const cti_tb_hp_info *h = arg;
    for (size_t i = 0; i < h->n_values; i++) pb_message(b, LIST_VALUES, enc_value, &h->values[i]);
}

static void enc_interval(pb *b, const void *arg) {
    const cti_tb_hp_info *h = arg;
    pb_double_if_set(b, INTERVAL_MIN, h->min);
    pb_double_if_set(b, INTERVAL_MAX, h->max);
}

static void enc_hparam_info(pb *b, const void *arg) {
    const cti_tb_hp_info *h = arg;
    pb_string(b, HPARAM_INFO_NAME, h->name);
    pb_key(b, HPARAM_INFO_TYPE, WIRE_VARINT);
    pb_varint(b, data_type[h->kind]);
    if (h->domain == CT_TB_HP_DISCRETE) pb_message(b, HPARAM_INFO_DISCRETE, enc_list_value, h);
    if (h->domain == CT_TB_HP_INTERVAL) pb_message(b, HPARAM_INFO_INTERVAL, enc_interval, h);
}

static void enc_metric_name(pb *b, const void *arg) {
    pb_string(b, METRIC_NAME_TAG, arg); /* group "" left out: the session's own run */
}

static void enc_metric_info(pb *b, const void *arg) {
    pb_message(b, METRIC_INFO_NAME, enc_metric_name, arg);
}

typedef struct {
    const cti_tb_hp_info *hps;
    size_t n_hps;
    const char *const *tags;
    size_t n_tags;
    double time;
} experiment_args;

static void enc_experiment(pb *b, const void *arg) {
    const experiment_args *e = arg;
    pb_double_if_set(b, EXPERIMENT_TIME_CREATED, e->time);
    for (size_t i = 0; i < e->n_hps; i++)
        pb_message(b, EXPERIMENT_HPARAM_INFOS, enc_hparam_info, &e->hps[i]);
    for (size_t i = 0; i < e->n_tags; i++)
        pb_message(b, EXPERIMENT_METRIC_INFOS, enc_metric_info, e->tags[i]);
}

/* map<string, Value>'s entry: {key, value}. */
static void enc_map_entry(pb *b, const void *arg) {
    const cti_tb_hp_value *v = arg;
    pb_string(b, MAP_KEY, v->name);
    pb_message(b, MAP_VALUE, enc_value, v);
}

typedef struct {
    const char *group;
    const cti_tb_hp_value *values;
    size_t n;
    double time;
} start_args;

static void enc_session_start(pb *b, const void *arg) {
    const start_args *s = arg;
    /* The entries in ascending byte order of their names (names are unique):
     * each round takes the smallest name above the last one written. A
     * search has tens of hyperparameters, so n^2 comparisons cost nothing
     * and need no sorted copy. */
    const char *last = NULL;
    for (size_t k = 0; k < s->n; k++) {
        const cti_tb_hp_value *next = NULL;
        for (size_t i = 0; i < s->n; i++) {
            const char *name = s->values[i].name;
            if (last && strcmp(name, last) <= 0) continue;
            if (!next || strcmp(name, next->name) < 0) next = &s->values[i];
        }
        pb_message(b, START_HPARAMS, enc_map_entry, next);
        last = next->name;
    }
    if (s->group && *s->group) pb_string(b, START_GROUP_NAME, s->group);
    pb_double_if_set(b, START_TIME, s->time);
}

typedef struct {
    int status;
    double time;
} end_args;

static void enc_session_end(pb *b, const void *arg) {
    const end_args *e = arg;
    if (e->status != 0) {
        pb_key(b, END_STATUS, WIRE_VARINT);
        pb_varint(b, (uint64_t)e->status);
    }
    pb_double_if_set(b, END_TIME, e->time);
}

/* HParamsPluginData{version: 0 (left out), <field>: enc(arg)} in a buffer,
 * then the Value that carries it. */
static int write_plugin_data(cti_tb_writer *w, const char *tag, unsigned field, pb_encoder enc,
                             const void *arg, double wall_time, const char *fn) {
    pb count = {NULL, 0};
    pb_message(&count, field, enc, arg);
    uint8_t stack[512];
    uint8_t *buf = stack;
    if (count.n > sizeof stack && !(buf = malloc(count.n)))
        return ct_set_error(CT_ENOMEM, "%s: %s: out of memory for %zu bytes", fn, cti_tb_path(w),
                            count.n);
    pb out = {buf, 0};
    pb_message(&out, field, enc, arg);
    int rc = cti_tb_add_plugin_value(w, tag, "hparams", buf, out.n, 0, wall_time, fn);
    if (buf != stack) free(buf);
    return rc;
}

/* ---- checks ------------------------------------------------------------------ */

/* CT_EINVAL with "fn: path: " before the message. */
static int fail(cti_tb_writer *w, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(cti_tb_writer *w, const char *fn, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ct_set_error(CT_EINVAL, "%s: %s: %s", fn, cti_tb_path(w), msg);
}

/* The writer and a time (<= 0: now). */
static int check_writer_time(cti_tb_writer *w, double *t, const char *what, const char *fn) {
    if (!w) return ct_set_error(CT_EINVAL, "%s: writer is NULL", fn);
    if (!isfinite(*t)) return fail(w, fn, "%s %g is not finite", what, *t);
    if (*t <= 0) *t = cti_clock_wall();
    return 0;
}

/* A string field: non-NULL, UTF-8, non-empty when `nonempty`. `what` and
 * `index` say which one (SIZE_MAX: `what` alone). */
static int check_string(cti_tb_writer *w, const char *s, bool nonempty, const char *what,
                        size_t index, const char *fn) {
    char label[64];
    if (index == SIZE_MAX) snprintf(label, sizeof label, "%s", what);
    else snprintf(label, sizeof label, "%s %zu", what, index);
    if (!s) return fail(w, fn, "%s is NULL", label);
    size_t n = strlen(s);
    if (nonempty && n == 0) return fail(w, fn, "%s is empty", label);
    size_t bad = cti_tb_utf8_error_at(s, n);
    if (bad < n) return fail(w, fn, "%s \"%s\" is not valid UTF-8 (byte %zu)", label, s, bad);
    return 0;
}

static const char *kind_name(cti_tb_hp_kind k) {
    switch (k) {
    case CT_TB_HP_NUMBER: return "number";
    case CT_TB_HP_STRING: return "string";
    case CT_TB_HP_BOOL: return "bool";
    }
    return "bad kind";
}

static bool bad_kind(cti_tb_hp_kind k) {
    return k != CT_TB_HP_NUMBER && k != CT_TB_HP_STRING && k != CT_TB_HP_BOOL;
}

/* One value of `kind`: `what` and `index` locate it, `name` is its
 * hyperparameter's. */
static int check_value(cti_tb_writer *w, const cti_tb_hp_value *v, cti_tb_hp_kind kind,
                       const char *what, size_t index, const char *name, const char *fn) {
    if (v->kind != kind)
        return fail(w, fn, "hparam \"%s\": %s %zu is a %s, not a %s", name, what, index,
                    kind_name(v->kind), kind_name(kind));
    if (kind == CT_TB_HP_NUMBER && !isfinite(v->number))
        return fail(w, fn, "hparam \"%s\": %s %zu is %g: numbers must be finite", name, what,
                    index, v->number);
    if (kind == CT_TB_HP_STRING) {
        if (!v->string)
            return fail(w, fn, "hparam \"%s\": %s %zu has a NULL string", name, what, index);
        size_t n = strlen(v->string), bad = cti_tb_utf8_error_at(v->string, n);
        if (bad < n)
            return fail(w, fn, "hparam \"%s\": %s %zu is not valid UTF-8 (byte %zu)", name, what,
                        index, bad);
    }
    return 0;
}

/* hps[i]: its name (unique among hps[0..i]), kind and domain. */
static int check_info(cti_tb_writer *w, const cti_tb_hp_info *hps, size_t i, const char *fn) {
    const cti_tb_hp_info *h = &hps[i];
    int rc = check_string(w, h->name, true, "hparam name", i, fn);
    if (rc != 0) return rc;
    for (size_t j = 0; j < i; j++)
        if (strcmp(hps[j].name, h->name) == 0)
            return fail(w, fn, "hparam \"%s\" is given twice (%zu and %zu)", h->name, j, i);
    if (bad_kind(h->kind))
        return fail(w, fn, "hparam \"%s\": kind %d is not a cti_tb_hp_kind", h->name, (int)h->kind);
    switch (h->domain) {
    case CT_TB_HP_ANY: return 0;
    case CT_TB_HP_INTERVAL:
        if (h->kind != CT_TB_HP_NUMBER)
            return fail(w, fn, "hparam \"%s\": an interval is for numbers, not a %s", h->name,
                        kind_name(h->kind));
        if (!isfinite(h->min) || !isfinite(h->max) || h->min > h->max)
            return fail(w, fn, "hparam \"%s\": interval [%g, %g] is not finite with min <= max",
                        h->name, h->min, h->max);
        return 0;
    case CT_TB_HP_DISCRETE:
        if (!h->values || h->n_values == 0)
            return fail(w, fn, "hparam \"%s\": discrete domain has no values (values %s, "
                        "n_values %zu)", h->name, h->values ? "set" : "NULL", h->n_values);
        for (size_t k = 0; k < h->n_values; k++)
            if ((rc = check_value(w, &h->values[k], h->kind, "domain value", k, h->name, fn)) != 0)
                return rc;
        return 0;
    }
    return fail(w, fn, "hparam \"%s\": domain %d is not a cti_tb_hp_domain", h->name,
                (int)h->domain);
}

/* ---- the three summaries -------------------------------------------------- */

int cti_tb_add_hparams_experiment(cti_tb_writer *w, const cti_tb_hp_info *hps, size_t n_hps,
                                 const char *const *metric_tags, size_t n_metrics,
                                 double wall_time) {
    static const char fn[] = "cti_tb_add_hparams_experiment";
    int rc = check_writer_time(w, &wall_time, "wall_time", fn);
    if (rc != 0) return rc;
    if (!hps && n_hps > 0) return fail(w, fn, "hps is NULL (n_hps %zu)", n_hps);
    if (!metric_tags && n_metrics > 0)
        return fail(w, fn, "metric_tags is NULL (n_metrics %zu)", n_metrics);
    for (size_t i = 0; i < n_hps; i++)
        if ((rc = check_info(w, hps, i, fn)) != 0) return rc;
    for (size_t i = 0; i < n_metrics; i++) {
        if ((rc = check_string(w, metric_tags[i], true, "metric tag", i, fn)) != 0) return rc;
        for (size_t j = 0; j < i; j++)
            if (strcmp(metric_tags[j], metric_tags[i]) == 0)
                return fail(w, fn, "metric tag \"%s\" is given twice (%zu and %zu)", metric_tags[i],
                            j, i);
    }
    const experiment_args e = {hps, n_hps, metric_tags, n_metrics, wall_time};
    return write_plugin_data(w, "_hparams_/experiment", PLUGIN_DATA_EXPERIMENT, enc_experiment, &e,
                             wall_time, fn);
}

int cti_tb_add_hparams_session_start(cti_tb_writer *w, const char *group_name,
                                    const cti_tb_hp_value *values, size_t n, double start_time) {
    static const char fn[] = "cti_tb_add_hparams_session_start";
    int rc = check_writer_time(w, &start_time, "start_time", fn);
    if (rc != 0) return rc;
    if (!values && n > 0) return fail(w, fn, "values is NULL (n %zu)", n);
    if (group_name && (rc = check_string(w, group_name, false, "group_name", SIZE_MAX, fn)) != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const cti_tb_hp_value *v = &values[i];
        if ((rc = check_string(w, v->name, true, "hparam name", i, fn)) != 0) return rc;
        for (size_t j = 0; j < i; j++)
            if (strcmp(values[j].name, v->name) == 0)
                return fail(w, fn, "hparam \"%s\" is given twice (%zu and %zu)", v->name, j, i);
        if (bad_kind(v->kind))
            return fail(w, fn, "hparam \"%s\": kind %d is not a cti_tb_hp_kind", v->name,
                        (int)v->kind);
        if ((rc = check_value(w, v, v->kind, "value", i, v->name, fn)) != 0) return rc;
    }
    const start_args s = {group_name, values, n, start_time};
    return write_plugin_data(w, "_hparams_/session_start_info", PLUGIN_DATA_SESSION_START,
                             enc_session_start, &s, start_time, fn);
}

int cti_tb_add_hparams_session_end(cti_tb_writer *w, cti_tb_hp_status status, double end_time) {
    static const char fn[] = "cti_tb_add_hparams_session_end";
    int rc = check_writer_time(w, &end_time, "end_time", fn);
    if (rc != 0) return rc;
    int s = (int)status;
    if (s < CT_TB_HP_STATUS_UNKNOWN || s > CT_TB_HP_STATUS_RUNNING)
        return fail(w, fn, "status %d is not 0 (unknown), 1 (success), 2 (failure) or 3 "
                    "(running)", s);
    const end_args e = {s, end_time};
    return write_plugin_data(w, "_hparams_/session_end_info", PLUGIN_DATA_SESSION_END,
                             enc_session_end, &e, end_time, fn);
}
