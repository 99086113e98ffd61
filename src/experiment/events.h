/* src/experiment/events.h — experiment.jsonl, the search's record of what
 * happened to each trial, and its one line per event on the console
 * (events.c). Internal to ctrial.
 *
 * One JSON object per line, in the order things happened:
 *
 *     {"event": "trial_created", "time": 1795552739.43, "trial": 3,
 *      "hparams": {...}, "trial_seed": 1224821422, "request_id": "...", "bracket": 0}
 *     {"event": "trial_validated", "trial": 3, "length": 58, "batches": 58,
 *      "metric": 0.91, "metrics": {...}}
 *
 * The log is also the search's state: `--resume latest` runs the searcher
 * again from the start and takes each result from the log instead of
 * training, up to where the log ends (run.c). An event already in the log
 * (same event, trial and length) is therefore not written twice. */
#ifndef CTRIAL_EXPERIMENT_EVENTS_H
#define CTRIAL_EXPERIMENT_EVENTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#define CT_EXPERIMENT_LOG "experiment.jsonl"

typedef struct {
    FILE *f;          /* NULL on ranks other than 0: nothing is written */
    bool quiet;       /* no console lines */
    double t0;        /* the monotonic clock at the start, for the console's times */
    json_t *recorded; /* owned: keys of the events already in the log ("validated/3/58") */
} cti_exp_log;

/* Opens `path` for appending (rank 0 only; other ranks get a log that
 * writes nothing). `recorded` (stolen, may be NULL) holds the keys of the
 * events the file has. 0 or CT_EIO naming the path. */
int cti_exp_log_open(cti_exp_log *l, const char *path, bool write, bool quiet, json_t *recorded);
void cti_exp_log_close(cti_exp_log *l);

/* Appends `event` (stolen) with "event": name and "time" added, flushed
 * and fsync'd, unless the log has it already (its key, name/trial/length
 * with a trial < 0 or length < 0 left out, is in `recorded`); then prints `line` (printf-style) on
 * the console as "[search 12.3s] line". 0 or CT_EIO. */
#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
int cti_exp_log_event(cti_exp_log *l, const char *name, int64_t trial, int64_t length, json_t *event,
                     const char *line, ...);

/* Whether the log has that event already (it would not be written again). */
bool cti_exp_log_has(const cti_exp_log *l, const char *name, int64_t trial, int64_t length);

/* The lines of a JSON-lines file, in order: NEW JSON array of objects, or
 * NULL + CT_ECHECKPOINT naming the file and line of a damaged one (with
 * `events`, also a line without "event"). A last line cut short by a
 * crash is dropped; *n_bytes receives the length of the intact part (the
 * caller cuts the file there). */
json_t *cti_exp_log_read(const char *path, bool events, long *n_bytes);
/* The same for the file's text (`path` names it in messages). */
json_t *cti_exp_log_parse(const char *text, size_t len, const char *path, bool events, long *n_bytes);

/* The key an event has in `recorded`. */
void cti_exp_event_key(char *buf, size_t len, const char *name, int64_t trial, int64_t length);

#endif
