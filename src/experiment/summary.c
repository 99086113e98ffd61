/* src/experiment/summary.c — the summary table and the best trial
 * (summary.h). */
#include "experiment/summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_write.h"
#include "ctrial/ckpt.h"
#include "ctrial/error.h"
#include "experiment/events.h"

const char *cti_exp_state_name(cti_exp_state s) {
    switch (s) {
    case CT_EXP_NONE: return "-";
    case CT_EXP_ACTIVE: return "active";
    case CT_EXP_PAUSED: return "paused";
    case CT_EXP_COMPLETED: return "completed";
    case CT_EXP_STOPPED: return "stopped";
    case CT_EXP_ERRORED: return "errored";
    }
    return "?";
}

const char *cti_exp_unit_name(ct_unit u) {
    return u == CT_EPOCHS ? "epochs" : u == CT_RECORDS ? "records" : "batches";
}

/* "k=v k=v" of a trial's hyperparameters that the searcher chose (their
 * spec samples), nested as group.name; all of them when none samples. */
static void flatten(const json_t *spec, const json_t *point, const char *prefix, bool all, char *buf, size_t len) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)point, k, v) {
        const json_t *sp = json_object_get(spec, k);
        const char *type = json_string_value(json_object_get(sp, "type"));
        char name[256];
        snprintf(name, sizeof name, "%s%s", prefix, k);
        if (json_is_object(v) && (!type || strcmp(type, "const") != 0) && !json_object_get(sp, "vals")) {
            char sub[260];
            snprintf(sub, sizeof sub, "%s.", name);
            flatten(sp, v, sub, all, buf, len);
            continue;
        }
        if (!all && !(type && strcmp(type, "const") != 0)) continue;
        size_t n = strlen(buf);
        if (n + 1 >= len) return;
        if (json_is_real(v)) snprintf(buf + n, len - n, "%s%s=%.4g", n ? " " : "", name, json_real_value(v));
        else {
            char *text = cti_json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            snprintf(buf + n, len - n, "%s%s=%s", n ? " " : "", name, text ? text : "?");
            free(text);
        }
    }
}

void cti_exp_describe_hparams(const json_t *spec, const json_t *point, char *buf, size_t len) {
    buf[0] = '\0';
    flatten(spec, point, "", false, buf, len);
    if (!buf[0]) flatten(spec, point, "", true, buf, len);
}

/* A trial's best validation metric over every validation it logged (its
 * metrics.jsonl), the searcher's rungs and the validations between them
 * alike: what its best checkpoint holds (checkpoint policy best), so the
 * summary pairs a trial's best with the checkpoint of that best. *out
 * keeps the rungs' best (`rung`, may be NAN) when the log has none. */
static bool trial_best(const char *dir, int64_t id, const char *metric, bool smaller, bool has_rung, double rung,
                       double *out) {
    char path[4200];
    snprintf(path, sizeof path, "%s/trials/%lld/metrics.jsonl", dir, (long long)id);
    long n = 0;
    json_t *lines = cti_exp_log_read(path, false, &n);
    bool has = has_rung;
    double best = rung;
    size_t i;
    json_t *e;
    json_array_foreach(lines, i, e) {
        const char *group = json_string_value(json_object_get(e, "group"));
        json_t *v = json_object_get(json_object_get(e, "metrics"), metric);
        if (!group || strcmp(group, "validation") != 0 || !json_is_number(v) || !isfinite(json_number_value(v)))
            continue;
        double x = json_number_value(v);
        if (!has || (smaller ? x < best : x > best)) best = x;
        has = true;
    }
    json_decref(lines);
    ct_clear_error(); /* a trial that never wrote a log (errored at once): the rungs' best, if any */
    *out = best;
    return has;
}

int cti_exp_finish(cti_exp_log *log, const cti_searcher *s, const cti_config *c, const char *dir,
                  const cti_exp_trial *trials, int64_t n_trials) {
    const char *metric = c->fit.searcher_metric;
    bool smaller = c->fit.smaller_is_better;
    int64_t best = 0, errored = 0, created = cti_searcher_created(s);
    /* one best per trial, the same in the table, the best trial, its checkpoint and experiment_completed */
    double *bests = calloc((size_t)(created > 0 ? created + 1 : 1), sizeof *bests);
    bool *has = calloc((size_t)(created > 0 ? created + 1 : 1), sizeof *has);
    if (!bests || !has) {
        free(bests);
        free(has);
        return ct_set_error(CT_ENOMEM, "search: out of memory");
    }
    for (int64_t id = 1; id <= created && id < n_trials; id++) {
        const cti_exp_trial *t = &trials[id];
        errored += t->state == CT_EXP_ERRORED;
        has[id] = trial_best(dir, id, metric, smaller, t->has_best, t->has_best ? t->best : NAN, &bests[id]);
        if (has[id] && (!best || (smaller ? bests[id] < bests[best] : bests[id] > bests[best]))) best = id;
    }
    char ckpt[4096] = "", cdir[4096];
    if (best) {
        if (c->fit.checkpoint_dir) snprintf(cdir, sizeof cdir, "%s/trials/%lld", c->fit.checkpoint_dir, (long long)best);
        else snprintf(cdir, sizeof cdir, "%s/trials/%lld/checkpoints", dir, (long long)best);
        double v;
        if (ct_ckpt_best(cdir, metric, smaller, ckpt, sizeof ckpt, &v) != CT_OK &&
            ct_ckpt_latest(cdir, ckpt, sizeof ckpt) != CT_OK)
            ckpt[0] = '\0';
        ct_clear_error();
    }
    if (log->f && !log->quiet) {
        int w = (int)strlen(metric) > 10 ? (int)strlen(metric) : 10;
        printf("\n%-6s %-10s %-*s %-10s %s\n", "trial", "state", w, metric, "batches", "hyperparameters");
        for (int64_t id = 1; id <= created && id < n_trials; id++) {
            const cti_exp_trial *t = &trials[id];
            char hp[1024] = "", m[32] = "-";
            cti_exp_describe_hparams(c->hp_spec, cti_searcher_hparams(s, id), hp, sizeof hp);
            if (has[id]) snprintf(m, sizeof m, "%.6g", bests[id]);
            printf("%-6lld %-10s %-*s %-10lld %s%s\n", (long long)id, cti_exp_state_name(t->state), w, m,
                   (long long)t->batches, hp, id == best ? "   <- best" : "");
        }
        if (best)
            printf("\nbest trial: %lld, %s %.6g\ncheckpoint: %s\n", (long long)best, metric, bests[best],
                   ckpt[0] ? ckpt : "(none kept)");
        else
            printf("\nno trial reported a finite %s\n", metric);
        fflush(stdout);
    }
    json_t *e = json_pack("{sIsIsI}", "trials", (json_int_t)created, "errored", (json_int_t)errored, "best_trial",
                          (json_int_t)best);
    if (best) {
        json_object_set_new(e, "best_metric", json_real(bests[best]));
        json_object_set_new(e, "best_hparams", json_deep_copy(cti_searcher_hparams(s, best)));
        json_object_set_new(e, "best_checkpoint", ckpt[0] ? json_string(ckpt) : json_null());
    }
    free(bests);
    free(has);
    int rc = cti_exp_log_event(log, "experiment_completed", -1, -1, e, "completed: %lld trials, %lld errored",
                              (long long)created, (long long)errored);
    if (rc) return rc;
    /* Every trial failed on the config (max_length past what ctrial counts,
     * a global_batch_size below the ranks): the experiment's config is the
     * error, and the exit code says so (2), as for a single trial. */
    bool all_config = true;
    for (int64_t id = 1; id <= created && id < n_trials; id++) all_config &= trials[id].code == CT_ECONFIG;
    if (created > 0 && errored == created)
        return ct_set_error(all_config ? CT_ECONFIG : CT_ETRIAL, "every trial of the search failed%s (the first: %s); "
                            "see %s/%s", all_config ? " on its configuration" : "", trials[1].error, dir,
                            CT_EXPERIMENT_LOG);
    return 0;
}
