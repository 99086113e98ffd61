/* src/fit/report.c — the reporter (report.h): metrics.jsonl lines,
 * TensorBoard scalars, console lines, time accounting and the final
 * summary. */
#define _POSIX_C_SOURCE 200809L
#include "fit/report.h"

#include "base/clock.h"
#include "base/files.h"
#include "base/launch.h"
#include "base/json_write.h"
#include "ctrial/ctrial.h" /* ct_version, ckpt.h */
#include "ctrial/cuda.h"
#include "formats/tbevents.h"
#include "metrics/metrics.h"
#include "base/value_json.h"
#include "ckpt/ckpt.h" /* cti_ckpt_find_latest */
#include "config/period.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct cti_reporter {
    /* What cti_reporter_new was told (report.h's cti_reporter_opts). */
    const ct_fit_opts *opts;
    const cti_position *pos;
    const bool *tensorboard;
    const ct_device *device;
    int rank, size;
    FILE *metrics_log;           /* metrics.jsonl (rank 0) */
    struct cti_tb_writer *tb;    /* TensorBoard events in output_dir (rank 0) */
    bool resumed;                /* this run continues a checkpoint's (cti_report_open) */
    double start_time, last_report_time;
    int64_t last_report_bt, last_report_records;
    /* The ETA is measured from the first training report: the time, the
     * batches trained (-1 before it), the validations' seconds and count. */
    double eta_since, eta_since_val_secs;
    int64_t eta_since_bt, eta_since_vals;
    bool live;                   /* stdout is a terminal: a live progress line */
    bool live_drawn;             /* the live line is on screen (no newline yet) */
    double last_tick;
    char latest[512];            /* the latest training metrics, for the live line */
    char latest_time[160];       /* the latest report's time shares, for the live line */
    /* Host seconds on this rank since the last training report, and since
     * the start. */
    double time_in[CT_TIME_KINDS], time_total[CT_TIME_KINDS], time_since;
};

cti_reporter *cti_reporter_new(const cti_reporter_opts *o) {
    cti_reporter *r = calloc(1, sizeof *r);
    if (!r) {
        ct_set_error(CT_ENOMEM, "ct_fit: out of host memory");
        return NULL;
    }
    r->opts = o->opts;
    r->pos = o->pos;
    r->tensorboard = o->tensorboard;
    r->device = o->device;
    r->rank = o->rank;
    r->size = o->size;
    r->start_time = cti_clock_monotonic();
    r->time_since = r->start_time;
    r->last_report_time = r->start_time; /* the rates' baseline position is cti_report_open's */
    r->eta_since_bt = -1;
    /* A live line (redrawn with \r and escape codes) only for a person at a
     * terminal: plain lines into a file or pipe, and under mpirun, which
     * hands ranks a pseudo-terminal whatever its own output is. */
    r->live = !r->opts->quiet && o->rank == 0 && isatty(STDOUT_FILENO) && !cti_launch_by_launcher();
    r->last_tick = r->start_time;
    return r;
}

void cti_reporter_free(cti_reporter *r) {
    if (!r) return;
    if (r->metrics_log) fclose(r->metrics_log);
    cti_tb_close(r->tb);
    free(r);
}

void cti_time_add(cti_reporter *r, cti_time_kind kind, double since) {
    if (!r) return;
    double dt = cti_clock_monotonic() - since;
    r->time_in[kind] += dt;
    r->time_total[kind] += dt;
}

/* The caching allocator's counters for the trial's GPU (host-side, no
 * device sync): bytes held by tensors now and at peak since the last
 * report. False off a GPU. */
static bool gpu_memory(const cti_reporter *r, int64_t *now, int64_t *peak) {
    if (r->device->type != CT_CUDA) return false;
    return ct_cuda_memory_allocated(r->device->index, now) == CT_OK &&
           ct_cuda_max_memory_allocated(r->device->index, peak) == CT_OK;
}

/* The shares of wall time the loop spent, by kind: compute is train_batch
 * less the waits for gradients and the optimizer step inside it; other is
 * what is left (metric reduction, reporting, callbacks, scheduler steps). */
typedef struct {
    double wall, data, compute, comm, optim, validation, checkpoint, other;
} time_split;

static time_split split_time(const double *in, double wall) {
    time_split t = {.wall = wall, .data = in[CT_TIME_DATA], .comm = in[CT_TIME_COMM], .optim = in[CT_TIME_OPTIM],
                    .validation = in[CT_TIME_VALIDATION], .checkpoint = in[CT_TIME_CHECKPOINT]};
    t.compute = fmax(0.0, in[CT_TIME_TRAIN] - t.comm - t.optim);
    t.other = fmax(0.0, wall - t.data - in[CT_TIME_TRAIN] - t.validation - t.checkpoint);
    return t;
}

/* "data 3%  compute 81%  comm 6%  optim 7%  val 2%  ckpt 0%  other 1%" */
static void format_shares(const time_split *t, char *buf, size_t len) {
    double w = t->wall > 0 ? 100.0 / t->wall : 0;
    snprintf(buf, len, "data %.0f%%  compute %.0f%%  comm %.0f%%  optim %.0f%%  val %.0f%%  ckpt %.0f%%  other %.0f%%",
             t->data * w, t->compute * w, t->comm * w, t->optim * w, t->validation * w, t->checkpoint * w,
             t->other * w);
}

/* The "timings" object of a training line (NEW), and resets the interval. */
static json_t *take_timings(cti_reporter *r) {
    double now = cti_clock_monotonic();
    time_split t = split_time(r->time_in, now - r->time_since);
    format_shares(&t, r->latest_time, sizeof r->latest_time);
    memset(r->time_in, 0, sizeof r->time_in);
    r->time_since = now;
    json_t *j = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "wall_s", t.wall, "data_s", t.data, "compute_s",
                          t.compute, "comm_s", t.comm, "optimizer_s", t.optim, "validation_s", t.validation,
                          "checkpoint_s", t.checkpoint, "other_s", t.other);
    /* On a GPU also its memory (torch.cuda.memory_allocated and the peak
     * since the previous training line; cti_report restarts the peak). */
    int64_t mem = 0, peak = 0;
    if (j && gpu_memory(r, &mem, &peak)) {
        json_object_set_new(j, "gpu_memory_allocated_bytes", json_integer(mem));
        json_object_set_new(j, "gpu_memory_peak_bytes", json_integer(peak));
    }
    return j;
}

/* A resumed run continues the log of the run it resumes: lines after the
 * checkpoint's batch (written after it, by a run that went on and was
 * lost) and a torn last line are dropped, through a temporary file and a
 * rename. Every line at or before the checkpoint was written before it. */
static int keep_log_until(const char *path, int64_t batches) {
    FILE *in = fopen(path, "r");
    if (!in) return CT_OK; /* nothing to continue */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return ct_set_error(CT_EIO, "cannot create %s", tmp);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, in)) > 0) {
        json_t *j = line[n - 1] == '\n' ? json_loads(line, 0, NULL) : NULL;
        json_t *b = json_object_get(j, "batches");
        if (json_is_integer(b) && json_integer_value(b) <= batches) fputs(line, out);
        json_decref(j);
    }
    free(line);
    fclose(in);
    bool bad = fflush(out) != 0 || ferror(out);
    bad = fclose(out) != 0 || bad;
    if (bad || rename(tmp, path) != 0) return ct_set_error(CT_EIO, "cannot rewrite %s", path);
    return CT_OK;
}

int cti_report_event_files(const char *dir, bool remove) {
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : ct_set_error(CT_EIO, "cannot read %s: %s", dir, strerror(errno));
    int n = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20) != 0) continue;
        n++;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (remove && unlink(path) != 0 && rc == 0) rc = ct_set_error(CT_EIO, "cannot remove %s: %s", path, strerror(errno));
    }
    closedir(d);
    return rc ? rc : n;
}

int cti_report_open(cti_reporter *r, bool resumed) {
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", r->opts->output_dir);
    r->resumed = resumed;
    /* The rates of the first line count this run's batches, and their
     * records only: a resumed workload cut short by a stop signal brings
     * its records in pending (reported with this run's first line). */
    r->last_report_bt = r->pos->batches_trained;
    r->last_report_records = r->pos->records_trained + r->pos->records_pending * r->size;
    /* A FIFO or a device in its place would block or never end. */
    struct stat st;
    if (stat(path, &st) == 0 && cti_check_regular(path, NULL) != CT_OK) return ct_last_code();
    if (resumed && keep_log_until(path, r->pos->batches_trained) != CT_OK) return ct_last_code();
    r->metrics_log = fopen(path, resumed ? "a" : "w");
    if (!r->metrics_log) return ct_set_error(CT_EIO, "cannot open %s for writing", path);
    return CT_OK;
}

static double epochs_of(const cti_reporter *r) {
    return r->pos->epoch_len > 0 ? (double)r->pos->batches_trained / (double)r->pos->epoch_len : 0.0;
}

/* Scalar metrics as TensorBoard scalars "<group>/<name>" at step bt. */
static int add_scalars(cti_reporter *r, const char *group, const ct_value *metrics) {
    for (size_t k = 0; k < ct_value_len(metrics); k++) {
        const char *key = NULL;
        const ct_value *v = ct_value_dict_at(metrics, k, &key, NULL);
        if (!key || !strcmp(key, "batches") || !strcmp(key, "epochs")) continue;
        json_t *j = cti_json_from_value(v);
        int rc = CT_OK;
        if (json_is_number(j)) {
            char tag[512];
            snprintf(tag, sizeof tag, "%s/%s", group, key);
            rc = cti_tb_add_scalar(r->tb, tag, json_number_value(j), r->pos->batches_trained, 0);
        }
        json_decref(j);
        if (rc != CT_OK) return rc;
    }
    return cti_tb_flush(r->tb);
}

/* "loss 0.1234  accuracy 0.9" from the scalar metrics (not batches/epochs). */
static void format_metrics(const ct_value *metrics, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < ct_value_len(metrics) && used < len; k++) {
        const char *key = NULL;
        const ct_value *v = ct_value_dict_at(metrics, k, &key, NULL);
        if (!key || !strcmp(key, "batches") || !strcmp(key, "epochs")) continue;
        /* Scalars only; NaN and infinities print as nan and inf. */
        double *x = NULL;
        bool array = false;
        int64_t n = cti_metric_doubles(v, &x, &array);
        if (n == 1 && !array) used += (size_t)snprintf(buf + used, len - used, "  %s %.6g", key, x[0]);
        if (n < 0) ct_clear_error();
        free(x);
    }
}

/* "42s", "3m07s", "2h05m" (or "?" when unknown); the characters written. */
static int format_duration(double secs, bool known, char *buf, size_t len) {
    if (!known || !isfinite(secs)) return snprintf(buf, len, "?");
    long s = lround(fmax(secs, 0.0));
    if (s < 60) return snprintf(buf, len, "%lds", s);
    if (s < 3600) return snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
    return snprintf(buf, len, "%ldh%02ldm", s / 3600, s % 3600 / 60);
}

/* Validations still to come after batch bt: those the period fires at up
 * to max_length (one at bt itself if it has not run yet: a report comes
 * before the validation of its boundary), and the one at the end unless the
 * period fires there. */
static int64_t validations_left(const cti_reporter *r) {
    const ct_period *p = &r->opts->validation_period;
    int64_t bt = r->pos->batches_trained, end = r->pos->max_length_batches;
    int64_t n = cti_period_count(p, bt, end, r->pos->epoch_len);
    if (cti_period_fires(p, bt, r->pos->epoch_len) && r->pos->last_validation_bt != bt) n++;
    if (end > bt && !cti_period_fires(p, end, r->pos->epoch_len)) n++;
    return n;
}

/* Seconds to the end: the batches left at the training rate, plus the
 * validations left at the average validation's length. Both are measured
 * since the first training report, which leaves out the start (first
 * batches, lazy set-up); the training rate takes in everything but
 * validations (checkpoints, data) at the share they have. Before that
 * report: the batches left at the interval's rate. < 0: unknown. */
static double eta_seconds(const cti_reporter *r, double now, double interval_rate) {
    int64_t left = r->pos->max_length_batches - r->pos->batches_trained;
    int64_t batches = r->pos->batches_trained - r->eta_since_bt;
    double val_secs = r->time_total[CT_TIME_VALIDATION] - r->eta_since_val_secs;
    double train_secs = now - r->eta_since - val_secs;
    if (r->eta_since_bt < 0 || batches <= 0 || train_secs <= 0)
        return interval_rate > 0 ? (double)left / interval_rate : -1;
    int64_t vals = r->pos->validations_run - r->eta_since_vals;
    double per_val = vals > 0 ? val_secs / (double)vals
                   : r->pos->validations_run > 0 ? r->time_total[CT_TIME_VALIDATION] / (double)r->pos->validations_run
                   : 0;
    return (double)left * train_secs / (double)batches + (double)validations_left(r) * per_val;
}

/* "[200/1000  20.0%] epoch 1.33  35.2 batches/s  2253 records/s  ETA 23s"
 * (+ "  gpu 1.2/3.4 GiB" on a GPU: allocated now / peak). The rates are
 * since the last report. Between reports the records trained are counted
 * by this rank and scaled by the ranks (they are summed across ranks at
 * each report). */
static void format_progress(cti_reporter *r, double now, char *buf, size_t len) {
    double dt = now - r->last_report_time;
    int64_t batches = r->pos->batches_trained - r->last_report_bt;
    int64_t records = r->pos->records_trained + r->pos->records_pending * r->size - r->last_report_records;
    int64_t total = r->pos->max_length_batches;
    double rate = dt > 0 ? (double)batches / dt : 0;
    double eta = eta_seconds(r, now, rate);
    int n = snprintf(buf, len, "[%lld/%lld %5.1f%%] epoch %.2f  %.1f batches/s  %.0f records/s  ETA ",
                     (long long)r->pos->batches_trained, (long long)total,
                     total > 0 ? 100.0 * (double)r->pos->batches_trained / (double)total : 0.0, epochs_of(r), rate,
                     dt > 0 ? (double)records / dt : 0.0);
    if (n > 0 && (size_t)n < len) n += format_duration(eta, eta >= 0, buf + n, len - (size_t)n);
    int64_t mem = 0, peak = 0;
    if (n > 0 && (size_t)n < len && gpu_memory(r, &mem, &peak))
        snprintf(buf + n, len - (size_t)n, "  gpu %.2f/%.2f GiB", (double)mem / (1 << 30), (double)peak / (1 << 30));
}

/* A full line on the console; on a terminal it replaces the live line. */
static void print_line(cti_reporter *r, const char *text) {
    if (r->live_drawn) printf("\r\033[K");
    r->live_drawn = false;
    printf("%s\n", text);
    fflush(stdout);
}

void cti_report_tick(cti_reporter *r) {
    if (!r->live) return;
    double now = cti_clock_monotonic();
    if (now - r->last_tick < 0.25) return;
    char line[1024];
    format_progress(r, now, line, sizeof line);
    printf("\r\033[K%s%s%s%s", line, r->latest, r->latest_time[0] ? "  | " : "", r->latest_time);
    fflush(stdout);
    r->live_drawn = true;
    r->last_tick = now;
}

/* A training report: on a terminal it updates the live line's metrics; as
 * plain output (a file, a pipe) it is a line of its own. Rates are over the
 * batches since the last report. */
static void print_training(cti_reporter *r, const ct_value *metrics) {
    double now = cti_clock_monotonic();
    format_metrics(metrics, r->latest, sizeof r->latest);
    if (r->live) {
        r->last_tick = 0; /* redraw now */
        cti_report_tick(r);
    } else {
        char line[1024], full[1800];
        format_progress(r, now, line, sizeof line);
        snprintf(full, sizeof full, "%s%s  | %s", line, r->latest, r->latest_time);
        print_line(r, full);
    }
    r->last_report_time = now;
    r->last_report_bt = r->pos->batches_trained;
    r->last_report_records = r->pos->records_trained;
    if (r->eta_since_bt < 0) {
        r->eta_since = now;
        r->eta_since_bt = r->pos->batches_trained;
        r->eta_since_val_secs = r->time_total[CT_TIME_VALIDATION];
        r->eta_since_vals = r->pos->validations_run;
    }
}

static int report(cti_reporter *r, const char *group, ct_value *metrics) {
    if (!ct_value_dict_get(metrics, "batches")) ct_value_dict_set(metrics, "batches", ct_value_int(r->pos->batches_trained));
    if (!ct_value_dict_get(metrics, "epochs")) ct_value_dict_set(metrics, "epochs", ct_value_float(epochs_of(r)));
    if (r->rank != 0) return CT_OK;
    bool training = !strcmp(group, "training");
    json_t *timings = training ? take_timings(r) : NULL;
    if (r->metrics_log) {
        json_t *line = json_pack("{s:s, s:I, s:f, s:o, s:f, s:o*}", "group", group, "batches",
                                 (json_int_t)r->pos->batches_trained, "epochs", epochs_of(r), "metrics",
                                 cti_json_from_value(metrics), "time", cti_clock_wall(), "timings", timings);
        timings = NULL; /* json_pack took it, even on failure */
        char *text = line ? cti_json_dumps(line, JSON_COMPACT) : NULL;
        json_decref(line);
        if (!text) return ct_set_error(CT_ENOMEM, "cannot format a metrics.jsonl line");
        int bad = fprintf(r->metrics_log, "%s\n", text) < 0 || fflush(r->metrics_log) != 0;
        free(text);
        if (bad) return ct_set_error(CT_EIO, "writing %s/metrics.jsonl failed", r->opts->output_dir);
    }
    /* TensorBoard's event file opens with the first report it gets (none
     * with TensorBoard logging off). */
    if (r->metrics_log && *r->tensorboard && !r->tb) {
        if (!(r->tb = cti_tb_open(r->opts->output_dir, ""))) return ct_last_code();
        /* A resumed run: TensorBoard drops what the interrupted run logged
         * after the checkpoint (steps above its batch), as metrics.jsonl
         * was cut back; also a --resume latest that found no checkpoint,
         * which starts the interrupted run over from batch 0. */
        bool resumed = r->resumed || (r->opts->resume && r->opts->resume[0]);
        if (resumed && cti_tb_add_session_start(r->tb, r->pos->initial_batch + 1, 0) != CT_OK)
            return ct_last_code();
    }
    if (r->tb && *r->tensorboard) {
        int rc = add_scalars(r, group, metrics);
        if (rc != CT_OK) return rc;
    }
    json_decref(timings);
    if (r->opts->quiet) return CT_OK;
    if (training) {
        print_training(r, metrics);
    } else {
        char m[1024], line[1200];
        format_metrics(metrics, m, sizeof m);
        snprintf(line, sizeof line, "validation at batch %lld (epoch %.2f):%s", (long long)r->pos->batches_trained,
                 epochs_of(r), m);
        print_line(r, line);
    }
    return CT_OK;
}

int cti_report(cti_reporter *r, const char *group, ct_value *metrics) {
    int rc = report(r, group, metrics);
    /* The GPU's peak restarts with each training line, once that line and
     * the progress line have both shown it (the progress line reads the
     * counters after the metrics.jsonl line is written). */
    if (r->rank == 0 && !strcmp(group, "training") && r->device->type == CT_CUDA)
        ct_cuda_reset_peak_memory_stats(r->device->index);
    return rc;
}

void cti_report_checkpoint(cti_reporter *r, int64_t bt, const char *reason, bool background) {
    if (r->rank != 0 || r->opts->quiet) return;
    char line[256];
    snprintf(line, sizeof line, "checkpoint at batch %lld (%s%s)", (long long)bt, reason,
             background ? ", written in the background" : "");
    print_line(r, line);
}

/* "every 2 epochs", "every 100 batches", "at batches 10, 20, 30", "never". */
static void format_period(const ct_period *p, char *buf, size_t len) {
    const char *unit = p->unit == CT_EPOCHS ? "epoch" : "batch";
    if (p->unit == CT_NEVER) {
        snprintf(buf, len, "never");
    } else if (p->num_points > 0) {
        int n = snprintf(buf, len, "at %s %lld", p->unit == CT_EPOCHS ? "epochs" : "batches", (long long)p->points[0]);
        for (int i = 1; i < p->num_points && n > 0 && (size_t)n < len; i++)
            n += snprintf(buf + n, len - (size_t)n, ",%lld", (long long)p->points[i]);
    } else if (p->n == 1) {
        snprintf(buf, len, "every %s", unit);
    } else {
        snprintf(buf, len, "every %lld %s%s", (long long)p->n, unit, p->unit == CT_EPOCHS ? "s" : "es");
    }
}

/* A loader's records, for the summary: "60000 records", or "an iterable
 * loader" when it has no length (-1). */
static void format_records(int64_t n, char *buf, size_t len) {
    if (n >= 0) snprintf(buf, len, "%lld records", (long long)n);
    else snprintf(buf, len, "an iterable loader");
}

void cti_report_setup(cti_reporter *r, const cti_setup_info *si) {
    if (r->rank != 0 || r->opts->quiet) return;
    char dev[32], line[4608];
    ct_device_format(*r->device, dev, sizeof dev);
    int64_t params = si->parameters;
    snprintf(line, sizeof line, "ctrial %s: trial %s on %s, %d intra-op thread%s per rank (%s), %d rank%s%s; %zu model%s, "
                                "%lld parameter%s",
             ct_version(), si->trial_name ? si->trial_name : "(unnamed)", dev, ct_get_num_threads(),
             ct_get_num_threads() == 1 ? "" : "s", si->threads_from, r->size, r->size == 1 ? "" : "s",
             si->transport, si->n_models, si->n_models == 1 ? "" : "s", (long long)params, params == 1 ? "" : "s");
    print_line(r, line);
    if (si->deterministic)
        print_line(r, "deterministic algorithms only (torch.use_deterministic_algorithms, cuDNN's deterministic "
                      "kernels): an operator without one fails");
    char train[64], val[64], epoch[96];
    format_records(si->train_records, train, sizeof train);
    format_records(si->val_records, val, sizeof val);
    if (r->pos->epoch_len > 0)
        snprintf(epoch, sizeof epoch, "%lld batches per epoch", (long long)r->pos->epoch_len);
    else
        snprintf(epoch, sizeof epoch, "epochs of unknown length");
    snprintf(line, sizeof line, "data: training %s%s, %s (global batch size %lld); validation %s", train,
             r->size > 1 ? " (rank 0's share)" : "", epoch, (long long)si->global_batch_size, val);
    print_line(r, line);
    char vp[128], cp[128], policy[320] = "", store[1200] = "";
    format_period(&r->opts->validation_period, vp, sizeof vp);
    format_period(&r->opts->checkpoint_period, cp, sizeof cp);
    /* The checkpoint policy adds checkpoints after validations. */
    bool validates = r->opts->validation_period.unit != CT_NEVER;
    if (validates && r->opts->checkpoint_policy == CT_CKPT_BEST)
        snprintf(policy, sizeof policy, "%s after every validation that improves %s",
                 r->opts->checkpoint_period.unit == CT_NEVER ? "only" : "and", r->opts->searcher_metric);
    else if (validates && r->opts->checkpoint_policy == CT_CKPT_ALL)
        snprintf(policy, sizeof policy, "%s after every validation",
                 r->opts->checkpoint_period.unit == CT_NEVER ? "only" : "and");
    if (policy[0] && r->opts->checkpoint_period.unit == CT_NEVER) cp[0] = '\0';
    if (r->opts->checkpoint_storage && r->opts->checkpoint_storage[0])
        snprintf(store, sizeof store, " (kept in %s too)", r->opts->checkpoint_storage);
    snprintf(line, sizeof line, "plan: %lld batches (%.2f epochs); validation %s, checkpoint %s%s%s%s; output in %s",
             (long long)r->pos->max_length_batches,
             r->pos->epoch_len > 0 ? (double)r->pos->max_length_batches / (double)r->pos->epoch_len : 0.0, vp, cp,
             cp[0] && policy[0] ? " " : "", policy, store, r->opts->output_dir);
    print_line(r, line);
    if (si->resume_dir && si->resume_dir[0]) {
        snprintf(line, sizeof line, "resumed from %s after batch %lld (epoch %.2f)", si->resume_dir,
                 (long long)r->pos->initial_batch, epochs_of(r));
        print_line(r, line);
        if (r->pos->initial_batch >= r->pos->max_length_batches) {
            snprintf(line, sizeof line, "nothing to train: the checkpoint is at batch %lld, at or past this run's "
                     "max_length of %lld batches", (long long)r->pos->initial_batch, (long long)r->pos->max_length_batches);
            print_line(r, line);
        }
    }
}

static const char *signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

void cti_report_preempted(cti_reporter *r, int sig, const char *last_checkpoint) {
    if (r->rank != 0 || r->opts->quiet) return;
    char line[4608];
    snprintf(line, sizeof line, "stopped by %s after batch %lld; resume with --resume %s", signal_name(sig),
             (long long)r->pos->batches_trained, last_checkpoint[0] ? last_checkpoint : "latest");
    print_line(r, line);
}

void cti_report_stopped_before_training(cti_reporter *r, int sig, const char *resume_dir) {
    if (r->rank != 0 || r->opts->quiet) return;
    /* The checkpoint the run resumed (after the set-up), else the --resume
     * it was given, else latest: none yet starts from the beginning. */
    const char *resume = resume_dir[0]                           ? resume_dir
                       : r->opts->resume && r->opts->resume[0] ? r->opts->resume
                                                                : "latest";
    char line[4608];
    if (r->pos->batches_trained > 0)
        snprintf(line, sizeof line, "stopped by %s before training (at batch %lld, as resumed): nothing new to save; "
                 "resume with --resume %s", signal_name(sig), (long long)r->pos->batches_trained, resume);
    else
        snprintf(line, sizeof line, "stopped by %s before training: nothing to save; resume with --resume %s",
                 signal_name(sig), resume);
    print_line(r, line);
}

/* The last line: where the best and the latest checkpoints are (of the
 * run's checkpoint directory, earlier runs' resumed checkpoints included). */
static void print_checkpoints(cti_reporter *r, const char *checkpoint_dir) {
    char latest[4096], best[4096], line[8400];
    cti_ckpt_scan scan;
    if (cti_ckpt_find_latest(checkpoint_dir, latest, sizeof latest, &scan) != CT_OK) {
        /* None yet, or a damaged one that may be the latest (named). */
        if (scan.empty) snprintf(line, sizeof line, "checkpoints: none in %s", checkpoint_dir);
        else snprintf(line, sizeof line, "checkpoints: no latest: %s", ct_last_error());
        ct_clear_error();
        print_line(r, line);
        return;
    }
    double value = 0;
    int n = snprintf(line, sizeof line, "checkpoints: latest %s", latest);
    if (ct_ckpt_best(checkpoint_dir, r->opts->searcher_metric, r->opts->smaller_is_better, best, sizeof best,
                     &value) == CT_OK)
        snprintf(line + n, sizeof line - (size_t)n, "; best %s (%s %.6g)", best, r->opts->searcher_metric, value);
    else
        ct_clear_error();
    print_line(r, line);
}

void cti_report_summary(cti_reporter *r, const cti_summary_info *si) {
    if (r->rank != 0 || r->opts->quiet) return;
    int sig = si->signal;
    double secs = cti_clock_monotonic() - r->start_time;
    char line[1024];
    bool finished = !sig && (r->pos->batches_trained >= r->pos->max_length_batches || r->opts->test_mode);
    const char *why = sig ? signal_name(sig) : si->exit_requested ? "ct_ctx_should_exit" : "a stop request";
    int n = finished ? snprintf(line, sizeof line, "done: %lld batches (%.2f epochs) in %.1f s",
                                (long long)r->pos->batches_trained, epochs_of(r), secs)
                     : snprintf(line, sizeof line, "stopped after %lld of %lld batches (%.2f epochs) in %.1f s (%s)",
                                (long long)r->pos->batches_trained, (long long)r->pos->max_length_batches, epochs_of(r),
                                secs, why);
    if (si->has_best && n > 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, "; best %s %.6g", r->opts->searcher_metric, si->best_metric);
    if (n > 0 && (size_t)n < sizeof line) snprintf(line + n, sizeof line - (size_t)n, "; output in %s", r->opts->output_dir);
    print_line(r, line);
    char shares[160], tline[200];
    time_split t = split_time(r->time_total, secs);
    format_shares(&t, shares, sizeof shares);
    snprintf(tline, sizeof tline, "time: %s", shares);
    print_line(r, tline);
    print_checkpoints(r, si->checkpoint_dir);
}
