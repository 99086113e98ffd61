/* src/fit/checkpointer.c — a run's checkpoints (checkpointer.h): the
 * directory, the resume source, the latest committed, the policy's best. */
#define _POSIX_C_SOURCE 200809L
#include "fit/checkpointer.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"         /* defines: cti_ckpt_* (commit, verify, latest, prune) */
#include "ckpt/remote.h"       /* defines: cti_ckpt_remote_* (the same in object storage) */
#include "ctrial/dist.h"       /* defines: ct_dist_broadcast_bytes */
#include "fit/report.h"        /* defines: cti_report_event_files */
#include "fit/stop.h"          /* defines: cti_fit_block_stop_signals */

struct cti_checkpointer {
    const ct_fit_opts *opts;
    int rank;
    char dir[4096];         /* opts.checkpoint_dir or output_dir/checkpoints */
    char last[4096];        /* the latest committed checkpoint ("" none) */
    char resume_dir[4096];  /* the checkpoint this run resumes ("" none) */
    json_t *resume_meta;    /* its metadata.json */
    bool has_best;
    double best;
    cti_ckpt_remote *remote; /* opts.checkpoint_storage (NULL: the disk alone) */
    /* The checkpoint being written in the background (at most one). */
    struct {
        bool running;           /* a writer thread was started and not yet joined */
        atomic_bool done;       /* it has returned */
        pthread_t thread;
        int64_t bt;
        ct_value *state;        /* the snapshot, the thread's to free */
        json_t *metadata;       /* taken by the write */
        int rc;                 /* its outcome, and its message */
        char msg[2600];
    } bg;
};

/* The S3 client's options from the run's. */
static cti_s3_opts s3_opts(const ct_fit_opts *o) {
    cti_s3_opts s = cti_s3_default_opts();
    s.endpoint_url = o->s3_endpoint_url;
    s.access_key = o->s3_access_key;
    s.secret_key = o->s3_secret_key;
    return s;
}

cti_checkpointer *cti_checkpointer_new(const ct_fit_opts *o, int rank) {
    cti_checkpointer *c = calloc(1, sizeof *c);
    if (!c) {
        ct_set_error(CT_ENOMEM, "ct_fit: out of host memory");
        return NULL;
    }
    c->opts = o;
    c->rank = rank;
    if (o->checkpoint_dir && o->checkpoint_dir[0]) snprintf(c->dir, sizeof c->dir, "%s", o->checkpoint_dir);
    else snprintf(c->dir, sizeof c->dir, "%s/checkpoints", o->output_dir ? o->output_dir : ".");
    return c;
}

int cti_checkpointer_open_storage(cti_checkpointer *c) {
    const ct_fit_opts *o = c->opts;
    if (!o->checkpoint_storage || !o->checkpoint_storage[0] || c->remote) return CT_OK;
    cti_s3_opts so = s3_opts(o);
    c->remote = cti_ckpt_remote_open(o->checkpoint_storage, &so);
    return c->remote ? CT_OK : ct_last_code();
}

void cti_checkpointer_free(cti_checkpointer *c) {
    if (!c) return;
    /* A write still in flight (a run that failed after starting it) ends
     * as it would have: committed, or left uncommitted. */
    if (cti_checkpointer_finish(c) != CT_OK) ct_clear_error();
    json_decref(c->resume_meta);
    cti_ckpt_remote_free(c->remote);
    free(c);
}

const char *cti_checkpointer_dir(const cti_checkpointer *c) { return c->dir; }
const char *cti_checkpointer_resume_dir(const cti_checkpointer *c) { return c->resume_dir; }
const json_t *cti_checkpointer_resume_meta(const cti_checkpointer *c) { return c->resume_meta; }
const char *cti_checkpointer_last(const cti_checkpointer *c) { return c->last; }


/* ---- resuming ------------------------------------------------------------------ */

/* resume "latest" with object storage: the store's latest (rank 0 looks,
 * every rank learns its name), fetched into this rank's checkpoint
 * directory unless it is there already. Collective. */
static int find_remote_latest(cti_checkpointer *c) {
    struct {
        int64_t rc;
        int64_t none;
        char name[256];
        char msg[1024];
    } found = {0};
    if (c->rank == 0) {
        bool none = false; /* what a cut-off upload left goes first */
        int rc = cti_ckpt_remote_latest(c->remote, found.name, sizeof found.name, &none);
        found.rc = rc;
        found.none = none;
        if (rc != CT_OK) snprintf(found.msg, sizeof found.msg, "%s", ct_last_error());
    }
    int rc = ct_dist_size() > 1 ? ct_dist_broadcast_bytes(&found, sizeof found, 0) : CT_OK;
    if (rc != CT_OK) return rc;
    if (found.rc != CT_OK)
        return ct_set_error((int)found.rc, "%s%s", c->rank == 0 ? "" : "rank 0: ", found.msg);
    if (found.none) {
        c->resume_dir[0] = '\0';
        if (!c->opts->quiet && c->rank == 0)
            printf("no checkpoint in %s yet: starting from the beginning\n", cti_ckpt_remote_where(c->remote, NULL));
        return CT_OK;
    }
    return cti_ckpt_remote_fetch(c->remote, found.name, c->dir, c->resume_dir, sizeof c->resume_dir);
}

int cti_checkpointer_find_resume(cti_checkpointer *c) {
    const ct_fit_opts *o = c->opts;
    if (c->rank == 0) cti_ckpt_remove_leftovers(c->dir);
    if (!o->resume || !o->resume[0]) return CT_OK;
    bool latest = strcmp(o->resume, "latest") == 0;
    if (latest && c->remote) {
        int rc = find_remote_latest(c);
        if (rc != CT_OK || !c->resume_dir[0]) return rc;
        latest = false; /* on disk now: verified as any named checkpoint */
    } else if (cti_ckpt_is_remote(o->resume)) {
        if (cti_checkpointer_fetch(c, o->resume, c->dir, c->resume_dir, sizeof c->resume_dir) != CT_OK)
            return ct_last_code() == CT_ECHECKPOINT ? CT_ECHECKPOINT
                                                     : ct_set_error(CT_ECHECKPOINT, "%s", ct_last_error());
    } else if (latest) {
        /* The latest in commit order. Only a folder without any checkpoint
         * starts from the beginning; a damaged one that may be the latest
         * is refused (CT_ECHECKPOINT naming it and the latest intact one),
         * never passed over silently. */
        cti_ckpt_scan scan;
        if (cti_ckpt_find_latest(c->dir, c->resume_dir, sizeof c->resume_dir, &scan) != CT_OK) {
            c->resume_dir[0] = '\0';
            if (ct_last_code() != CT_ECHECKPOINT || !scan.empty) return ct_last_code();
            if (!o->quiet && c->rank == 0) printf("no checkpoint in %s yet: starting from the beginning\n", c->dir);
            return CT_OK;
        }
        if (scan.skipped[0] && c->rank == 0)
            fprintf(stderr, "ctrial: warning: --resume latest passes over damaged checkpoints that trained less than "
                            "%s: %s\n", c->resume_dir, scan.skipped);
    } else if (!c->resume_dir[0] &&
               snprintf(c->resume_dir, sizeof c->resume_dir, "%s", o->resume) >= (int)sizeof c->resume_dir) {
        return ct_set_error(CT_ECONFIG, "--resume: path too long");
    }
    int rc = latest ? cti_ckpt_verify_latest(c->dir, c->resume_dir) : ct_ckpt_verify(c->resume_dir);
    if (rc == CT_OK) c->resume_meta = cti_ckpt_read_metadata(c->resume_dir);
    if (rc == CT_OK && !c->resume_meta) rc = ct_last_code();
    if (rc != CT_OK && ct_last_code() != CT_ECHECKPOINT) rc = ct_set_error(CT_ECHECKPOINT, "%s", ct_last_error());
    return rc;
}

/* "--resume latest" with no checkpoint yet is the same run starting over
 * (a preemption before its first checkpoint): its log, which no checkpoint
 * holds, is cut as any resume cuts the lines after its checkpoint. */
int cti_checkpointer_guard(cti_checkpointer *c) {
    const ct_fit_opts *o = c->opts;
    if (c->rank != 0 || (o->resume && o->resume[0])) return CT_OK;
    char log[4200];
    snprintf(log, sizeof log, "%s/metrics.jsonl", o->output_dir);
    struct stat st;
    bool has_log = stat(log, &st) == 0 && st.st_size > 0;
    size_t ckpts = 0, stored = 0;
    int rc = cti_ckpt_count(c->dir, &ckpts);
    if (rc == CT_OK && c->remote) rc = cti_ckpt_remote_count(c->remote, &stored);
    int events = rc == CT_OK ? cti_report_event_files(o->output_dir, false) : 0;
    if (rc != CT_OK || events < 0) return rc != CT_OK ? rc : events;
    if (!has_log && ckpts == 0 && events == 0 && stored == 0) return CT_OK;
    if (!o->overwrite) {
        char what[4400], in_store[1700] = "";
        if (stored)
            snprintf(in_store, sizeof in_store, ", %zu in %s", stored, cti_ckpt_remote_where(c->remote, NULL));
        snprintf(what, sizeof what, "%s%zu checkpoint%s in %s%s, %d TensorBoard event file%s",
                 has_log ? "metrics.jsonl, " : "", ckpts, ckpts == 1 ? "" : "s", c->dir, in_store, events,
                 events == 1 ? "" : "s");
        return ct_set_error(CT_ECONFIG,
                            "%s holds an earlier run (%s): continue it with --resume latest, write this run to "
                            "another --output, or replace it with --overwrite (ct_fit_opts resume, output_dir, "
                            "overwrite)",
                            o->output_dir, what);
    }
    if (has_log && unlink(log) != 0) return ct_set_error(CT_EIO, "--overwrite: cannot remove %s", log);
    events = cti_report_event_files(o->output_dir, true);
    if (events < 0) return events;
    rc = cti_ckpt_remove_all(c->dir);
    return rc == CT_OK && c->remote ? cti_ckpt_remote_remove_all(c->remote) : rc;
}

/* ---- writing ------------------------------------------------------------------- */

int cti_checkpointer_write(cti_checkpointer *c, int64_t bt, const ct_value *state, json_t *metadata) {
    cti_ckpt_writer w;
    int rc = cti_ckpt_begin(&w, c->dir, bt);
    if (rc == CT_OK) rc = cti_ckpt_write_pth(&w, CT_CKPT_STATE_FILE, state);
    if (rc == CT_OK) {
        rc = cti_ckpt_commit(&w, metadata); /* takes metadata */
        metadata = NULL;
    }
    json_decref(metadata);
    if (rc != CT_OK) {
        int code = ct_last_code();
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        cti_ckpt_abort(&w);
        return ct_set_error(code, "writing a checkpoint at batch %lld: %s", (long long)bt, msg);
    }
    json_decref(w.files);
    snprintf(c->last, sizeof c->last, "%s", w.final);
    const ct_fit_opts *o = c->opts;
    /* The store: uploaded (metadata.json last) before anything is pruned,
     * so the newest checkpoint is always somewhere. */
    if (c->remote && (rc = cti_ckpt_remote_upload(c->remote, w.final)) != CT_OK) {
        char msg[2600];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        return ct_set_error(rc, "checkpoint at batch %lld (committed on disk in %s): %s", (long long)bt, w.final,
                            msg);
    }
    rc = cti_ckpt_prune(c->dir, o->save_trial_latest, o->save_trial_best, o->searcher_metric, o->smaller_is_better,
                        w.name);
    if (rc == CT_OK && c->remote)
        rc = cti_ckpt_remote_prune(c->remote, o->save_trial_latest, o->save_trial_best, o->searcher_metric,
                                   o->smaller_is_better, w.name);
    return rc;
}

int cti_checkpointer_fetch(const cti_checkpointer *c, const char *url, const char *parent, char *path, size_t len) {
    cti_s3_opts so = s3_opts(c->opts);
    return cti_ckpt_fetch_url(url, &so, parent, path, len);
}

int cti_checkpointer_share_last(cti_checkpointer *c) {
    return ct_dist_size() > 1 ? ct_dist_broadcast_bytes(c->last, sizeof c->last, 0) : CT_OK;
}

/* ---- the policy's best ------------------------------------------------------------ */

bool cti_checkpointer_improves(cti_checkpointer *c, double m) {
    /* A NaN or infinite metric is never better (not even as the first). */
    bool better = isfinite(m) && (!c->has_best || (c->opts->smaller_is_better ? m < c->best : m > c->best));
    if (better) {
        c->has_best = true;
        c->best = m;
    }
    return better;
}

bool cti_checkpointer_best(const cti_checkpointer *c, double *metric) {
    if (metric) *metric = c->has_best ? c->best : 0.0;
    return c->has_best;
}

void cti_checkpointer_set_best(cti_checkpointer *c, bool has, double metric) {
    c->has_best = has;
    c->best = has ? metric : 0.0;
}

/* ---- writing in the background -------------------------------------------------- */

static void *write_in_background(void *arg) {
    cti_checkpointer *c = arg;
    int rc = cti_checkpointer_write(c, c->bg.bt, c->bg.state, c->bg.metadata);
    c->bg.metadata = NULL;
    c->bg.rc = rc;
    if (rc != CT_OK) snprintf(c->bg.msg, sizeof c->bg.msg, "%s", ct_last_error());
    ct_value_free(c->bg.state);
    c->bg.state = NULL;
    atomic_store(&c->bg.done, true);
    return NULL;
}

int cti_checkpointer_write_background(cti_checkpointer *c, int64_t bt, ct_value *state, json_t *metadata) {
    if (c->bg.running) {
        ct_value_free(state);
        json_decref(metadata);
        return ct_set_error(CT_ESTATE, "a checkpoint is already being written in the background");
    }
    c->bg.bt = bt;
    c->bg.state = state;
    c->bg.metadata = metadata;
    c->bg.rc = CT_OK;
    c->bg.msg[0] = '\0';
    atomic_store(&c->bg.done, false);
    /* The writer never takes a stop signal (it inherits this mask): the
     * thread that trains does. */
    sigset_t old;
    cti_fit_block_stop_signals(&old);
    int err = pthread_create(&c->bg.thread, NULL, write_in_background, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        c->bg.state = NULL;
        c->bg.metadata = NULL;
        ct_value_free(state);
        json_decref(metadata);
        return ct_set_error(CT_ENOMEM, "writing a checkpoint at batch %lld: cannot start its thread (%s)",
                            (long long)bt, strerror(err));
    }
    c->bg.running = true;
    return CT_OK;
}

bool cti_checkpointer_writing(const cti_checkpointer *c) { return c->bg.running; }

bool cti_checkpointer_written(cti_checkpointer *c) { return c->bg.running && atomic_load(&c->bg.done); }

int cti_checkpointer_finish(cti_checkpointer *c) {
    if (!c->bg.running) return CT_OK;
    pthread_join(c->bg.thread, NULL);
    c->bg.running = false;
    return c->bg.rc == CT_OK ? CT_OK : ct_set_error(c->bg.rc, "%s", c->bg.msg);
}
