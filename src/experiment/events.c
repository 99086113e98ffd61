/* src/experiment/events.c — experiment.jsonl and the console's event lines
 * (events.h). */
#define _POSIX_C_SOURCE 200809L
#include "experiment/events.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/files.h"
#include "base/json_write.h"
#include "ctrial/error.h"

void cti_exp_event_key(char *buf, size_t len, const char *name, int64_t trial, int64_t length) {
    int n = snprintf(buf, len, "%s", name);
    if (trial >= 0 && n >= 0 && (size_t)n < len) n += snprintf(buf + n, len - (size_t)n, "/%lld", (long long)trial);
    if (length >= 0 && n >= 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, "/%lld", (long long)length);
}

int cti_exp_log_open(cti_exp_log *l, const char *path, bool write, bool quiet, json_t *recorded) {
    memset(l, 0, sizeof *l);
    l->quiet = quiet;
    l->t0 = cti_clock_monotonic();
    l->recorded = recorded ? recorded : json_object();
    if (!l->recorded) return ct_set_error(CT_ENOMEM, "search: out of memory");
    if (!write) return 0;
    l->f = fopen(path, "a");
    if (!l->f) return ct_set_error(CT_EIO, "cannot open %s: %s", path, strerror(errno));
    return 0;
}

void cti_exp_log_close(cti_exp_log *l) {
    if (l->f) fclose(l->f);
    json_decref(l->recorded);
    memset(l, 0, sizeof *l);
}

bool cti_exp_log_has(const cti_exp_log *l, const char *name, int64_t trial, int64_t length) {
    char key[128];
    cti_exp_event_key(key, sizeof key, name, trial, length);
    return json_object_get(l->recorded, key) != NULL;
}

int cti_exp_log_event(cti_exp_log *l, const char *name, int64_t trial, int64_t length, json_t *event,
                     const char *line, ...) {
    char key[128];
    cti_exp_event_key(key, sizeof key, name, trial, length);
    if (json_object_get(l->recorded, key)) {
        json_decref(event);
        return 0;
    }
    json_object_set_new(l->recorded, key, json_true());
    int rc = 0;
    if (l->f) {
        /* "event" and "time" first, for a reader's eye. */
        json_t *out = json_pack("{sssf}", "event", name, "time", cti_clock_wall());
        if (!out || json_object_update(out, event)) rc = ct_set_error(CT_ENOMEM, "search: out of memory");
        char *text = rc ? NULL : cti_json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(out);
        if (!rc && !text) rc = ct_set_error(CT_ENOMEM, "search: out of memory");
        if (!rc && (fprintf(l->f, "%s\n", text) < 0 || fflush(l->f) != 0 || fsync(fileno(l->f)) != 0))
            rc = ct_set_error(CT_EIO, "cannot write %s: %s", CT_EXPERIMENT_LOG, strerror(errno));
        free(text);
    }
    json_decref(event);
    if (l->f && !l->quiet && line) {
        char msg[1024];
        va_list ap;
        va_start(ap, line);
        vsnprintf(msg, sizeof msg, line, ap);
        va_end(ap);
        printf("[search %7.1fs] %s\n", cti_clock_monotonic() - l->t0, msg);
        fflush(stdout);
    }
    return rc;
}

json_t *cti_exp_log_read(const char *path, bool want_events, long *n_bytes) {
    *n_bytes = 0;
    char *text = NULL;
    size_t len = 0;
    if (cti_read_file_raw(path, (size_t)1 << 30, &text, &len) != CT_OK) return NULL;
    json_t *events = cti_exp_log_parse(text, len, path, want_events, n_bytes);
    free(text);
    return events;
}

json_t *cti_exp_log_parse(const char *text, size_t len, const char *path, bool want_events, long *n_bytes) {
    *n_bytes = 0;
    json_t *events = json_array();
    if (!events) {
        ct_set_error(CT_ENOMEM, "search: out of memory");
        return NULL;
    }
    size_t at = 0;
    for (int line = 1; at < len; line++) {
        const char *end = memchr(text + at, '\n', len - at);
        if (!end) break; /* a last line cut short: the crash came while writing it */
        json_error_t err;
        json_t *e = json_loadb(text + at, (size_t)(end - (text + at)), 0, &err);
        if (!json_is_object(e) || (want_events && !json_is_string(json_object_get(e, "event")))) {
            json_decref(e);
            json_decref(events);
            ct_set_error(CT_ECHECKPOINT, "%s:%d: damaged (%s)%s", path, line, e ? "not an event" : err.text,
                         want_events ? ": the search cannot be resumed from it" : "");
            return NULL;
        }
        json_array_append_new(events, e);
        at = (size_t)(end - text) + 1;
    }
    *n_bytes = (long)at;
    return events;
}
