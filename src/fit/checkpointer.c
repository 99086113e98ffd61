/* src/fit/checkpointer.c — a run's checkpoints (checkpointer.h): the
 * directory, the resume source, the latest committed, the policy's best. */
#define _POSIX_C_SOURCE 200809L
#include "fit/checkpointer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"         /* defines: cti_ckpt_* (commit, verify, latest, prune) */
#include "ctrial/dist.h"       /* defines: ct_dist_broadcast_bytes */
#include "fit/report.h"        /* defines: cti_report_event_files */

struct cti_checkpointer {
    const ct_fit_opts *opts;
    int rank;
    char dir[4096];         /* opts.checkpoint_dir or output_dir/checkpoints */
    char last[4096];        /* the latest committed checkpoint ("" none) */
    char resume_dir[4096];  /* the checkpoint this run resumes ("" none) */
    json_t *resume_meta;    /* its metadata.json */
    bool has_best;
    double best;
};

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

void cti_checkpointer_free(cti_checkpointer *c) {
    if (!c) return;
    json_decref(c->resume_meta);
    free(c);
}

const char *cti_checkpointer_dir(const cti_checkpointer *c) { return c->dir; }
const char *cti_checkpointer_resume_dir(const cti_checkpointer *c) { return c->resume_dir; }
const json_t *cti_checkpointer_resume_meta(const cti_checkpointer *c) { return c->resume_meta; }
const char *cti_checkpointer_last(const cti_checkpointer *c) { return c->last; }


/* ---- resuming ------------------------------------------------------------------ */

int cti_checkpointer_find_resume(cti_checkpointer *c) {
    const ct_fit_opts *o = c->opts;
    if (c->rank == 0) cti_ckpt_remove_leftovers(c->dir);
    if (!o->resume || !o->resume[0]) return CT_OK;
    bool latest = strcmp(o->resume, "latest") == 0;
    if (latest) {
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
    } else if (snprintf(c->resume_dir, sizeof c->resume_dir, "%s", o->resume) >= (int)sizeof c->resume_dir) {
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
    size_t ckpts = 0;
    int rc = cti_ckpt_count(c->dir, &ckpts);
    int events = rc == CT_OK ? cti_report_event_files(o->output_dir, false) : 0;
    if (rc != CT_OK || events < 0) return rc != CT_OK ? rc : events;
    if (!has_log && ckpts == 0 && events == 0) return CT_OK;
    if (!o->overwrite) {
        char what[4400];
        snprintf(what, sizeof what, "%s%zu checkpoint%s in %s, %d TensorBoard event file%s",
                 has_log ? "metrics.jsonl, " : "", ckpts, ckpts == 1 ? "" : "s", c->dir, events,
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
    return cti_ckpt_remove_all(c->dir);
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
    return cti_ckpt_prune(c->dir, c->opts->save_trial_latest, c->opts->save_trial_best, c->opts->searcher_metric,
                          c->opts->smaller_is_better, w.name);
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
