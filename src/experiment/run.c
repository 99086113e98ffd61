/* src/experiment/run.c — a search, step by step (experiment.h).
 *
 * The searcher hands out operations: CREATE a trial, TRAIN it to a length,
 * CLOSE it. They are carried out in order, one TRAIN at a time in one
 * process; under mpirun every rank runs the same searcher, and each round
 * hands every queued TRAIN round-robin to the groups of slots_per_trial
 * ranks. Each TRAIN is a ct_fit of the trial resumed from its own latest
 * checkpoint, and its last validation goes back to the searcher, in queue
 * order, which may hand out more. Everything that happens is an event in experiment.jsonl,
 * which is also the search's state: a resumed search runs the searcher
 * again from the start and takes each TRAIN's result from the log while
 * the log has one, so it reaches exactly the state it was in, and trains
 * on from there. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "experiment/experiment.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/json_write.h"
#include "base/value_json.h"
#include "ckpt/ckpt.h"
#include "ctrial/dist.h"
#include "dist/agree.h"
#include "dist/group.h"
#include "experiment/events.h"
#include "experiment/summary.h"
#include "fit/outcome.h"
#include "fit/report.h"

#define PATH_LEN 4096

typedef struct {
    const ct_trial *trial;
    const cti_config *cfg;
    cti_searcher *s;
    cti_search_ops q;   /* every operation so far; done ones are marked */
    bool *done;
    size_t cap_done, head;
    cti_exp_trial *t;
    int64_t cap_t;
    cti_exp_log log;
    json_t *replay;    /* {"<trial>": [its recorded results, in order]} from a resumed log */
    char dir[PATH_LEN - 200]; /* room for /trials/<id>/... after it */
    int world_rank, world, slots; /* groups of `slots` ranks train a trial each; rank 0 writes the log */
    bool stopped;      /* a stop signal ended a TRAIN: the search stops too */
    bool resumed;      /* the folder held this search's log: it goes on */
    bool logged_start; /* that log holds the search's start (an empty one does not) */
    bool logged_end;   /* and its end (experiment_completed): a resume has nothing to do */
} run;

static int oom(void) { return ct_set_error(CT_ENOMEM, "search: out of memory"); }

/* The HParams dashboard's summaries are written once, by rank 0, with the
 * event that ends or starts the trial (never again on a resume). */
static bool tensorboard(const run *r) { return r->world_rank == 0 && r->cfg->fit.tensorboard; }

static cti_exp_trial *rec(run *r, int64_t id) {
    if (id >= r->cap_t) {
        int64_t cap = r->cap_t ? 2 * r->cap_t : 64;
        while (cap <= id) cap *= 2;
        cti_exp_trial *v = realloc(r->t, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        memset(v + r->cap_t, 0, (size_t)(cap - r->cap_t) * sizeof *v);
        r->t = v;
        r->cap_t = cap;
    }
    return &r->t[id];
}

static void trial_dir(const run *r, int64_t id, char *buf, size_t len) {
    snprintf(buf, len, "%s/trials/%lld", r->dir, (long long)id);
}

static const char *metric_name(const run *r) { return r->cfg->fit.searcher_metric; }

/* ---- the trial's validation -------------------------------------------------- */

/* The validation at `batches` from the trial's metrics.jsonl: a TRAIN
 * whose run found its length already trained and validated (a resume
 * right after the rung's checkpoint) has no validation of its own. NEW
 * dict, or NULL. */
static ct_value *logged_validation(const char *tdir, int64_t batches) {
    char path[PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/metrics.jsonl", tdir);
    long n = 0;
    json_t *lines = cti_exp_log_read(path, false, &n);
    ct_value *found = NULL;
    size_t i;
    json_t *e;
    json_array_foreach(lines, i, e) {
        const char *group = json_string_value(json_object_get(e, "group"));
        if (group && strcmp(group, "validation") == 0 && json_integer_value(json_object_get(e, "batches")) == batches) {
            ct_value_free(found);
            found = cti_value_from_json(json_object_get(e, "metrics"));
        }
    }
    json_decref(lines);
    return found;
}

/* The searcher metric in `metrics`, or CT_ECONFIG naming what is there. */
static int searcher_metric(const run *r, const ct_value *metrics, double *out) {
    const ct_value *v = ct_value_dict_get(metrics, metric_name(r));
    if (v && ct_value_get_float(v, out) == 0) return 0;
    json_t *j = cti_json_from_value(metrics);
    char names[512] = "";
    const char *k;
    json_t *x;
    json_object_foreach(j, k, x) {
        size_t n = strlen(names);
        snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", k);
    }
    json_decref(j);
    return ct_set_error(CT_ECONFIG, "searcher.metric '%s' is %s the validation metrics (%s)", metric_name(r),
                        v ? "not a number in" : "not among", names);
}

/* ---- one TRAIN ----------------------------------------------------------------- */

typedef struct {
    bool replayed;      /* taken from the log of a resumed search */
    int rc;             /* 0: validated; else the trial failed for good */
    double metric;
    int64_t batches;
    json_t *metrics;    /* owned */
    bool stopped;       /* a stop signal ended it: the search stops */
    char error[512];    /* why it failed */
    int first_restart;  /* restarts spent before (a resumed search's) */
    json_t *restarts;   /* owned: the errors of the restarts it took */
} train_result;

/* One ct_fit of trial `id` to `length`, from its latest checkpoint. */
static int fit_once(run *r, int64_t id, int64_t length, train_result *res) {
    const cti_config *c = r->cfg;
    char tdir[PATH_LEN], cdir[PATH_LEN], store[PATH_LEN];
    trial_dir(r, id, tdir, sizeof tdir);
    ct_fit_opts o = c->fit;
    o.output_dir = tdir;
    if (c->fit.checkpoint_dir) {
        snprintf(cdir, sizeof cdir, "%s/trials/%lld", c->fit.checkpoint_dir, (long long)id);
        o.checkpoint_dir = cdir;
    }
    if (c->fit.checkpoint_storage) { /* each trial under a prefix of its own in the store */
        snprintf(store, sizeof store, "%s/trials/%lld", c->fit.checkpoint_storage, (long long)id);
        o.checkpoint_storage = store;
    }
    o.max_length = (ct_period){.unit = c->fit.max_length.unit, .n = length};
    o.seed = cti_searcher_trial_seed(r->s, id);
    o.trial_id = id;
    o.resume = "latest";
    o.overwrite = false;
    o.quiet = true;
    ct_value *hp = cti_value_from_json(cti_searcher_hparams(r->s, id));
    if (!hp) return oom();
    o.hparams = hp;
    cti_fit_outcome out;
    int rc = cti_fit_ex(r->trial, &o, &out);
    ct_value_free(hp);
    res->batches = out.batches_trained;
    if (rc == CT_OK && ct_fit_stop_signal()) res->stopped = true;
    if (rc == CT_OK && !res->stopped) {
        ct_value *m = out.last_validation && out.last_validation_bt == out.batches_trained
                          ? out.last_validation
                          : logged_validation(tdir, out.batches_trained);
        if (m != out.last_validation) ct_value_free(out.last_validation);
        out.last_validation = NULL;
        if (!m) rc = ct_set_error(CT_ETRIAL, "trial %lld ended at %lld batches without a validation there",
                                  (long long)id, (long long)out.batches_trained);
        else if ((rc = searcher_metric(r, m, &res->metric)) == CT_OK)
            res->metrics = cti_json_from_value(m);
        ct_value_free(m);
    }
    ct_value_free(out.last_validation);
    return rc;
}

/* A recorded result of trial `id` (resume): the next one in its list.
 * 1 when there was one (res filled), 0 when the log has none left. */
static int replayed(run *r, int64_t id, int64_t length, train_result *res) {
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)id);
    json_t *list = json_object_get(r->replay, key);
    json_t *e = json_array_get(list, 0);
    if (!e) return 0;
    if (json_integer_value(json_object_get(e, "length")) != length)
        return ct_set_error(CT_ECONFIG, "%s/%s: trial %lld trained to %lld, but the searcher now asks for %lld: the "
                            "config changed since the experiment started (resume it with the config it started with)",
                            r->dir, CT_EXPERIMENT_LOG, (long long)id,
                            (long long)json_integer_value(json_object_get(e, "length")), (long long)length);
    const char *event = json_string_value(json_object_get(e, "event"));
    res->batches = json_integer_value(json_object_get(e, "batches"));
    if (strcmp(event, "trial_validated") == 0) {
        res->rc = 0;
        res->metric = json_is_number(json_object_get(e, "metric")) ? json_number_value(json_object_get(e, "metric"))
                                                                   : NAN;
        res->metrics = json_incref(json_object_get(e, "metrics"));
    } else {
        res->rc = CT_ETRIAL;
        const char *why = json_string_value(json_object_get(e, "error"));
        snprintf(res->error, sizeof res->error, "%s", why ? why : "");
    }
    json_array_remove(list, 0);
    res->replayed = true;
    return 1;
}

/* Restarts already spent on trial `id` at `length` (resume). */
static int recorded_restarts(run *r, int64_t id, int64_t length) {
    char key[128];
    int n = 0;
    for (;;) {
        cti_exp_event_key(key, sizeof key, "trial_restarted", id, length * 1000 + n);
        if (!json_object_get(r->log.recorded, key)) return n;
        n++;
    }
}

/* TRAIN where this group trains it: ct_fit, retried from the latest
 * checkpoint up to max_restarts times (a config error is not retried: it
 * would fail again). The restarts are logged once the round is over, by
 * rank 0 (res->restarts). */
static int train_here(run *r, int64_t id, int64_t length, train_result *res) {
    int restarts = res->first_restart = recorded_restarts(r, id, length);
    if (!(res->restarts = json_array())) return oom();
    int rc;
    for (;;) {
        rc = fit_once(r, id, length, res);
        if (rc == CT_OK || res->stopped) break;
        snprintf(res->error, sizeof res->error, "%s: %s", ct_strerror(rc), ct_last_error());
        if (rc == CT_ECONFIG || rc == CT_ENOMEM || rc == CT_EDIST || restarts >= r->cfg->max_restarts) break;
        restarts++;
        json_array_append_new(res->restarts, json_string(res->error));
    }
    res->rc = rc;
    return 0;
}

/* ---- operations ------------------------------------------------------------------ */

static int create(run *r, int64_t id) {
    cti_exp_trial *t = rec(r, id);
    if (!t) return oom();
    t->state = CT_EXP_ACTIVE;
    const json_t *hp = cti_searcher_hparams(r->s, id);
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)id);
    json_t *was = json_object_get(json_object_get(r->replay, "created"), key);
    if (was && !json_equal(was, (json_t *)hp))
        return ct_set_error(CT_ECONFIG, "%s/%s: trial %lld was created with other hyperparameters than the searcher "
                            "draws now: the config changed since the experiment started (resume it with the config "
                            "it started with)", r->dir, CT_EXPERIMENT_LOG, (long long)id);
    char choice[512];
    cti_exp_describe_hparams(r->cfg->hp_spec, hp, choice, sizeof choice);
    int bracket = cti_searcher_bracket(r->s, id);
    char where[32] = "";
    if (cti_searcher_plan(r->s)) snprintf(where, sizeof where, " (bracket %d)", bracket);
    if (tensorboard(r) && !cti_exp_log_has(&r->log, "trial_created", id, -1)) {
        char tdir[PATH_LEN];
        trial_dir(r, id, tdir, sizeof tdir);
        int rc = id == 1 ? cti_exp_tb_experiment(r->dir, r->cfg->hp_spec, hp, metric_name(r)) : 0;
        if (rc || (rc = cti_exp_tb_session(tdir, hp, true, CT_EXP_ACTIVE))) return rc;
    }
    json_t *e = json_pack("{sIsOsIsssi}", "trial", (json_int_t)id, "hparams", hp, "trial_seed",
                          (json_int_t)cti_searcher_trial_seed(r->s, id), "request_id",
                          cti_searcher_request_id(r->s, id), "bracket", bracket);
    return cti_exp_log_event(&r->log, "trial_created", id, -1, e, "trial %lld created%s: %s", (long long)id, where,
                            choice);
}

/* The trial's session end, with the event that ends it (its name). */
static int session_end(run *r, int64_t id, const char *event) {
    if (!tensorboard(r) || cti_exp_log_has(&r->log, event, id, -1)) return 0;
    char tdir[PATH_LEN];
    trial_dir(r, id, tdir, sizeof tdir);
    return cti_exp_tb_session(tdir, NULL, false, rec(r, id)->state);
}

static int close_trial(run *r, int64_t id, cti_search_ops *out) {
    cti_exp_trial *t = rec(r, id);
    bool full = t->length >= r->cfg->search.max_length;
    t->state = full ? CT_EXP_COMPLETED : CT_EXP_STOPPED;
    json_t *e = json_pack("{sIsIsI}", "trial", (json_int_t)id, "length", (json_int_t)t->length, "batches",
                          (json_int_t)t->batches);
    if (t->has_best) json_object_set_new(e, "best_metric", json_real(t->best));
    int rc = session_end(r, id, full ? "trial_completed" : "trial_stopped");
    if (rc) {
        json_decref(e);
        return rc;
    }
    rc = full ? cti_exp_log_event(&r->log, "trial_completed", id, -1, e, "trial %lld completed: %lld batches, best "
                                     "%s %.6g", (long long)id, (long long)t->batches, metric_name(r), t->best)
                  : cti_exp_log_event(&r->log, "trial_stopped", id, -1, e, "trial %lld stopped by the searcher at %lld "
                                     "batches (best %s %.6g)", (long long)id, (long long)t->batches, metric_name(r),
                                     t->best);
    return rc ? rc : cti_searcher_closed(r->s, id, out);
}

static bool pending(const run *r, int64_t id) {
    for (size_t i = r->head; i < r->q.n; i++)
        if (!r->done[i] && r->q.v[i].trial == id) return true;
    return false;
}

static int grow_done(run *r) {
    if (r->q.n <= r->cap_done) return 0;
    size_t cap = r->cap_done ? r->cap_done : 64;
    while (cap < r->q.n) cap *= 2;
    bool *d = realloc(r->done, cap * sizeof *d);
    if (!d) return oom();
    memset(d + r->cap_done, 0, (cap - r->cap_done) * sizeof *d);
    r->done = d;
    r->cap_done = cap;
    return 0;
}

/* The result of a TRAIN, to the searcher. */
static int report(run *r, int64_t id, int64_t length, train_result *res) {
    cti_exp_trial *t = rec(r, id);
    t->batches = res->batches;
    int rc;
    if (res->rc) {
        t->state = CT_EXP_ERRORED;
        t->code = res->rc;
        snprintf(t->error, sizeof t->error, "%s", res->error);
        json_t *e = json_pack("{sIsIsIss}", "trial", (json_int_t)id, "length", (json_int_t)length, "batches",
                              (json_int_t)res->batches, "error", t->error);
        rc = session_end(r, id, "trial_errored");
        if (rc) json_decref(e);
        else rc = cti_exp_log_event(&r->log, "trial_errored", id, -1, e, "trial %lld errored: %s", (long long)id,
                                   t->error);
        if (!rc) rc = cti_searcher_exited(r->s, id, &r->q);
        for (size_t i = r->head; !rc && i < r->q.n; i++) /* what was queued for it is void */
            if (r->q.v[i].trial == id && (rc = grow_done(r)) == 0) r->done[i] = true;
        return rc;
    }
    t->length = length;
    if (isfinite(res->metric) &&
        (!t->has_best || (r->cfg->fit.smaller_is_better ? res->metric < t->best : res->metric > t->best))) {
        t->has_best = true;
        t->best = res->metric;
    }
    json_t *e = json_pack("{sIsIsIsfsO}", "trial", (json_int_t)id, "length", (json_int_t)length, "batches",
                          (json_int_t)res->batches, "metric", res->metric, "metrics",
                          res->metrics ? res->metrics : json_null());
    rc = cti_exp_log_event(&r->log, "trial_validated", id, length, e, "trial %lld validated at %lld batches: %s %.6g",
                          (long long)id, (long long)res->batches, metric_name(r), res->metric);
    if (!rc) rc = cti_searcher_validated(r->s, id, res->metric, &r->q);
    if (!rc) rc = grow_done(r);
    if (!rc && !pending(r, id)) {
        t->state = CT_EXP_PAUSED;
        e = json_pack("{sIsIsI}", "trial", (json_int_t)id, "length", (json_int_t)length, "batches",
                      (json_int_t)res->batches);
        rc = cti_exp_log_event(&r->log, "trial_paused", id, length, e, "trial %lld paused at %lld batches, "
                              "checkpointed: waits for the rung's other trials", (long long)id,
                              (long long)res->batches);
    }
    return rc;
}

/* "trial 3 promoted: 12 -> 36 batches", before it trains on. */
static int promote(run *r, const cti_search_op *op) {
    cti_exp_trial *t = rec(r, op->trial);
    int rc = 0;
    if (t->length > 0) {
        json_t *e = json_pack("{sIsIsI}", "trial", (json_int_t)op->trial, "from", (json_int_t)t->length, "length",
                              (json_int_t)op->length);
        rc = cti_exp_log_event(&r->log, "trial_promoted", op->trial, op->length, e, "trial %lld promoted: %lld -> %lld "
                              "%s", (long long)op->trial, (long long)t->length, (long long)op->length,
                              cti_exp_unit_name(r->cfg->fit.max_length.unit));
    }
    t->state = CT_EXP_ACTIVE;
    return rc;
}

/* The restarts a TRAIN took, logged in order. */
static int log_restarts(run *r, int64_t id, int64_t length, const train_result *res) {
    size_t i;
    json_t *why;
    json_array_foreach(res->restarts, i, why) {
        int n = res->first_restart + (int)i + 1;
        json_t *e = json_pack("{sIsIsiss}", "trial", (json_int_t)id, "length", (json_int_t)length, "restarts", n,
                              "error", json_string_value(why));
        /* the key's length holds the restart's number too, so each is logged once */
        int rc = cti_exp_log_event(&r->log, "trial_restarted", id, length * 1000 + n - 1, e,
                                  "trial %lld failed (%s); restart %d of %d from its latest checkpoint", (long long)id,
                                  json_string_value(why), n, r->cfg->max_restarts);
        if (rc) return rc;
    }
    return 0;
}

/* ---- rounds: one TRAIN per group of ranks -------------------------------------- */

static json_t *result_to_json(const train_result *res) {
    return json_pack("{sisosIsOsssbsisO}", "rc", res->rc, "metric",
                     isfinite(res->metric) ? json_real(res->metric) : json_null(), "batches",
                     (json_int_t)res->batches, "metrics", res->metrics ? res->metrics : json_null(), "error",
                     res->error, "stopped", res->stopped, "first_restart", res->first_restart, "restarts",
                     res->restarts ? res->restarts : json_null());
}

/* res as the group's leader saw it (what this rank computed itself, as a
 * member of that group, is replaced: the leader's is the one reported). */
static void result_from_json(const json_t *j, train_result *res) {
    json_decref(res->metrics);
    json_decref(res->restarts);
    res->rc = (int)json_integer_value(json_object_get(j, "rc"));
    const json_t *m = json_object_get(j, "metric");
    res->metric = json_is_number(m) ? json_number_value(m) : NAN;
    res->batches = json_integer_value(json_object_get(j, "batches"));
    json_t *metrics = json_object_get(j, "metrics");
    res->metrics = json_is_object(metrics) ? json_incref(metrics) : NULL;
    snprintf(res->error, sizeof res->error, "%s", json_string_value(json_object_get(j, "error")));
    res->stopped = json_is_true(json_object_get(j, "stopped"));
    res->first_restart = (int)json_integer_value(json_object_get(j, "first_restart"));
    json_t *restarts = json_object_get(j, "restarts");
    res->restarts = json_is_array(restarts) ? json_incref(restarts) : NULL;
}

/* Every rank learns every group's results: each group leader's results
 * (an object "pick index": result) go to rank 0, which sends them all, as
 * one array by pick, to every rank. */
static int exchange(run *r, train_result *res, int n, int groups) {
    if (r->world == 1) return 0;
    int color = r->world_rank / r->slots;
    char *mine = NULL;
    if (r->world_rank % r->slots == 0) {
        json_t *j = json_object();
        for (int k = color; j && k < n; k += groups) {
            char key[16];
            snprintf(key, sizeof key, "%d", k);
            if (!res[k].replayed) json_object_set_new(j, key, result_to_json(&res[k]));
        }
        mine = j ? cti_json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!mine) return oom();
    }
    void *all = NULL;
    size_t *lens = calloc((size_t)r->world, sizeof *lens);
    int rc = lens ? ct_dist_gather_bytes(mine, mine ? strlen(mine) : 0, 0, &all, lens) : oom();
    free(mine);
    char *text = NULL;
    int64_t len = 0;
    if (rc == 0 && r->world_rank == 0) { /* [result of pick 0, of pick 1, ...] as one JSON text */
        json_t *arr = json_array();
        for (int k = 0; arr && k < n; k++) json_array_append_new(arr, json_null());
        size_t at = 0;
        for (int w = 0; w < r->world && arr; at += lens[w], w++) {
            json_t *x = lens[w] ? json_loadb((char *)all + at, lens[w], 0, NULL) : NULL;
            const char *key;
            json_t *v;
            json_object_foreach(x, key, v) json_array_set(arr, (size_t)atoi(key), v);
            json_decref(x);
        }
        text = arr ? cti_json_dumps(arr, JSON_COMPACT) : NULL;
        json_decref(arr);
        if (!text) rc = oom();
        else len = (int64_t)strlen(text) + 1;
    }
    free(all);
    free(lens);
    if (rc == 0) rc = ct_dist_broadcast_bytes(&len, sizeof len, 0);
    if (rc == 0 && r->world_rank != 0 && !(text = malloc((size_t)len))) rc = oom();
    if (rc == 0) rc = ct_dist_broadcast_bytes(text, (size_t)len, 0);
    json_t *arr = rc == 0 ? json_loads(text, 0, NULL) : NULL;
    for (int k = 0; rc == 0 && k < n; k++)
        if (!res[k].replayed && json_is_object(json_array_get(arr, (size_t)k)))
            result_from_json(json_array_get(arr, (size_t)k), &res[k]);
    json_decref(arr);
    free(text);
    return rc;
}

/* Carries out operations in order up to the next TRAIN (one process), or
 * (under mpirun, several groups) up to every TRAIN that can run now, one of
 * each trial: pick k goes to group k % groups, each group trains its picks
 * in order, side by side, and the results are reported in pick order. The
 * searcher sees the same results in the same order either way: the picked
 * TRAINs were already queued, and what their results add comes behind
 * them. */
static int run_round(run *r) {
    enum { MAX_ROUND = 1024 };
    size_t picked[MAX_ROUND];
    int n = 0, rc = 0;
    bool any = false;
    int groups = r->world / r->slots < MAX_ROUND ? r->world / r->slots : MAX_ROUND;
    int limit = groups == 1 ? 1 : MAX_ROUND;
    while (r->head < r->q.n && r->done[r->head]) r->head++;
    for (size_t i = r->head; !rc && i < r->q.n && n < limit; i++) {
        if (r->done[i]) continue;
        cti_search_op op = r->q.v[i];
        bool busy = false;
        for (int k = 0; k < n; k++) busy |= r->q.v[picked[k]].trial == op.trial;
        if (busy) continue;
        r->done[i] = any = true;
        if (op.kind == CT_SEARCH_TRAIN) picked[n++] = i;
        else if (op.kind == CT_SEARCH_CREATE) rc = create(r, op.trial);
        else rc = close_trial(r, op.trial, &r->q);
        if (!rc) rc = grow_done(r);
    }
    if (rc) return rc;
    if (!any) return ct_set_error(CT_EINVAL, "search: the searcher has no operation left, but its search is not over");
    train_result *res = n ? calloc((size_t)n, sizeof *res) : NULL;
    if (n && !res) return oom();
    for (int k = 0; !rc && k < n; k++) {
        const cti_search_op *op = &r->q.v[picked[k]];
        rc = promote(r, op);
        if (!rc && (rc = replayed(r, op->trial, op->length, &res[k])) > 0) rc = 0;
    }
    int color = r->world_rank / r->slots;
    if (!rc && n > 0) rc = cti_dist_group_begin(color);
    bool stopped = false; /* a stop signal: this group starts no more trials */
    for (int k = color; !rc && k < n; k += groups) {
        if (res[k].replayed) continue;
        if (stopped) res[k].stopped = true;
        else rc = train_here(r, r->q.v[picked[k]].trial, r->q.v[picked[k]].length, &res[k]);
        stopped |= res[k].stopped;
    }
    if (n > 0) {
        int end = cti_dist_group_end();
        if (!rc) rc = end;
    }
    if (!rc && n > 0) rc = exchange(r, res, n, groups);
    for (int k = 0; !rc && k < n; k++) {
        const cti_search_op op = r->q.v[picked[k]];
        rc = log_restarts(r, op.trial, op.length, &res[k]);
        if (!rc && res[k].rc == CT_EDIST)
            rc = ct_set_error(CT_EDIST, "trial %lld: %s", (long long)op.trial, res[k].error);
        if (!rc && res[k].stopped) r->stopped = true;
        else if (!rc) rc = report(r, op.trial, op.length, &res[k]);
    }
    for (int k = 0; k < n; k++) {
        json_decref(res[k].metrics);
        json_decref(res[k].restarts);
    }
    free(res);
    return rc;
}

/* ---- the experiment folder ------------------------------------------------------- */

/* The trial folders under `root` (<root>/<id>) that hold results of an
 * earlier run: metrics.jsonl, TensorBoard files or checkpoints (in `sub`,
 * "checkpoints", or the folder itself when sub is NULL: a
 * checkpoint_storage.host_path). With `remove` (--overwrite) each is
 * deleted. Returns how many held any, or a negative code. */
static int earlier_trials(const char *root, const char *sub, bool remove) {
    DIR *d = opendir(root);
    if (!d) return 0;
    struct dirent *de;
    int rc = 0, n = 0;
    while (rc >= 0 && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char tdir[PATH_LEN + 400], log[PATH_LEN + 500], ckpt[PATH_LEN + 500];
        snprintf(tdir, sizeof tdir, "%s/%s", root, de->d_name);
        snprintf(log, sizeof log, "%s/metrics.jsonl", tdir);
        snprintf(ckpt, sizeof ckpt, "%s%s%s", tdir, sub ? "/" : "", sub ? sub : "");
        struct stat st;
        size_t ckpts = 0;
        int events = sub ? cti_report_event_files(tdir, false) : 0;
        if (events < 0 || (rc = cti_ckpt_count(ckpt, &ckpts)) < 0) {
            rc = events < 0 ? events : rc;
            break;
        }
        bool held = ckpts > 0 || events > 0 || (sub && stat(log, &st) == 0);
        n += held;
        if (!remove || !held) continue;
        if (sub && unlink(log) != 0 && errno != ENOENT) rc = ct_set_error(CT_EIO, "--overwrite: cannot remove %s", log);
        if (rc >= 0 && sub && (rc = cti_report_event_files(tdir, true)) > 0) rc = 0;
        if (rc >= 0) rc = cti_ckpt_remove_all(ckpt);
        if (rc >= 0 && sub) rmdir(ckpt);
        if (rc >= 0) rmdir(tdir);
    }
    closedir(d);
    return rc < 0 ? rc : n;
}

/* Earlier results where this search would write: the trial folders and,
 * with checkpoint_storage.host_path, its trials' checkpoint folders (a
 * trial resumes from the latest checkpoint there, so another search's
 * must not be there). Count, or removed with `remove`. */
static int earlier_results(run *r, bool remove) {
    char root[PATH_LEN + 64];
    snprintf(root, sizeof root, "%s/trials", r->dir);
    int n = earlier_trials(root, "checkpoints", remove), m = 0;
    if (n >= 0 && r->cfg->fit.checkpoint_dir) {
        snprintf(root, sizeof root, "%s/trials", r->cfg->fit.checkpoint_dir);
        m = earlier_trials(root, NULL, remove);
    }
    return n < 0 ? n : m < 0 ? m : n + m;
}

/* Removes an earlier experiment's results (--overwrite): the log, its
 * TensorBoard files, and each trial's metrics, events and checkpoints. */
static int remove_earlier(run *r) {
    char path[PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", r->dir, CT_EXPERIMENT_LOG);
    if (unlink(path) != 0 && errno != ENOENT) return ct_set_error(CT_EIO, "--overwrite: cannot remove %s", path);
    int rc = cti_report_event_files(r->dir, true);
    if (rc >= 0) rc = earlier_results(r, true);
    return rc < 0 ? rc : 0;
}

/* What the log of a resumed search already holds: the keys of its events,
 * each trial's TRAIN results in order, and the hyperparameters each trial
 * was created with. */
static int load_replay(run *r, json_t *events, json_t *recorded) {
    r->replay = json_object();
    json_t *created = json_object();
    if (!r->replay || !created || json_object_set_new(r->replay, "created", created)) return oom();
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) {
        const char *name = json_string_value(json_object_get(e, "event"));
        json_t *trial = json_object_get(e, "trial"), *length = json_object_get(e, "length");
        int64_t id = json_is_integer(trial) ? json_integer_value(trial) : -1;
        char key[128];
        if (strcmp(name, "trial_restarted") == 0)
            cti_exp_event_key(key, sizeof key, name, id,
                             json_integer_value(length) * 1000 + json_integer_value(json_object_get(e, "restarts")) - 1);
        else
            cti_exp_event_key(key, sizeof key, name, id,
                             strcmp(name, "trial_validated") == 0 || strcmp(name, "trial_paused") == 0 ||
                                     strcmp(name, "trial_promoted") == 0
                                 ? json_integer_value(length)
                                 : -1);
        if ((id >= 0 && strncmp(name, "trial_", 6) == 0) || strcmp(name, "experiment_completed") == 0)
            json_object_set_new(recorded, key, json_true());
        if (strcmp(name, "experiment_started") == 0) r->logged_start = true;
        if (strcmp(name, "experiment_completed") == 0) r->logged_end = true;
        char tkey[32];
        snprintf(tkey, sizeof tkey, "%lld", (long long)id);
        if (strcmp(name, "trial_created") == 0) json_object_set(created, tkey, json_object_get(e, "hparams"));
        if (strcmp(name, "trial_validated") == 0 || strcmp(name, "trial_errored") == 0) {
            json_t *list = json_object_get(r->replay, tkey);
            if (!list) json_object_set_new(r->replay, tkey, list = json_array());
            json_array_append(list, e);
        }
    }
    return 0;
}

/* Rank 0's look at the folder: a new search refuses an earlier one's
 * results (unless --overwrite, which removes them); a resumed one reads its
 * log (*text, *len) and cuts a line a crash left half-written. */
static int check_folder(run *r, bool resume, char **text, int64_t *len) {
    const ct_fit_opts *o = &r->cfg->fit;
    char path[PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", r->dir, CT_EXPERIMENT_LOG);
    struct stat st;
    bool exists = stat(path, &st) == 0;
    int rc = 0;
    if (exists && resume) {
        size_t n = 0;
        long keep = 0;
        if (cti_read_file_raw(path, (size_t)1 << 30, text, &n) != CT_OK) return ct_last_code();
        json_t *events = cti_exp_log_parse(*text, n, path, true, &keep);
        if (!events) return ct_last_code();
        json_decref(events);
        *len = keep;
        if (keep != st.st_size && truncate(path, keep) != 0)
            return ct_set_error(CT_EIO, "cannot cut the half-written last line of %s: %s", path, strerror(errno));
    } else if (exists && st.st_size > 0 && !o->overwrite) {
        return ct_set_error(CT_ECONFIG, "%s holds an earlier search (%s): continue it with --resume latest, write "
                            "this one to another --output, or replace it with --overwrite", r->dir, CT_EXPERIMENT_LOG);
    } else if (o->overwrite) {
        rc = remove_earlier(r);
    } else if ((rc = earlier_results(r, false)) > 0) {
        char where[2 * PATH_LEN];
        snprintf(where, sizeof where, "%s/trials%s%s%s", r->dir, o->checkpoint_dir ? " and " : "",
                 o->checkpoint_dir ? o->checkpoint_dir : "", o->checkpoint_dir ? "/trials" : "");
        return ct_set_error(CT_ECONFIG, "%s hold the results of %d trial%s of an earlier run without its %s: write "
                            "this search to another --output (and checkpoint_storage.host_path), or replace them "
                            "with --overwrite", where, rc, rc == 1 ? "" : "s", CT_EXPERIMENT_LOG);
    }
    return rc ? rc : cti_make_dirs(r->dir, "output directory");
}

/* Opens the experiment folder. Rank 0 looks at it and hands every rank the
 * log of a resumed search, so that every rank replays the same state. */
static int open_folder(run *r) {
    const ct_fit_opts *o = &r->cfg->fit;
    bool resume = o->resume && o->resume[0];
    if (resume && strcmp(o->resume, "latest") != 0)
        return ct_set_error(CT_ECONFIG, "--resume %s: a search resumes as a whole, from its folder: use --resume "
                            "latest (each trial goes on from its own latest checkpoint)", o->resume);
    char *text = NULL;
    int64_t len = -1; /* -1: nothing to resume */
    int rc = cti_ranks_agree(r->world_rank == 0 ? check_folder(r, resume, &text, &len) : 0);
    if (rc == 0) rc = ct_dist_broadcast_bytes(&len, sizeof len, 0);
    if (rc == 0 && len >= 0 && r->world_rank != 0 && !(text = malloc((size_t)len + 1))) rc = oom();
    if (rc == 0 && len > 0) rc = ct_dist_broadcast_bytes(text, (size_t)len, 0);
    json_t *recorded = rc == 0 ? json_object() : NULL;
    if (rc == 0 && !recorded) rc = oom();
    char path[PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", r->dir, CT_EXPERIMENT_LOG);
    if (rc == 0 && len >= 0) {
        long keep = 0;
        json_t *events = cti_exp_log_parse(text ? text : "", (size_t)len, path, true, &keep);
        rc = events ? load_replay(r, events, recorded) : ct_last_code();
        json_decref(events);
        r->resumed = true;
    }
    free(text);
    if (rc == 0 && !r->replay && !(r->replay = json_object())) rc = oom();
    if (rc) {
        json_decref(recorded);
        return rc;
    }
    return cti_exp_log_open(&r->log, path, r->world_rank == 0, o->quiet, recorded);
}

/* ---- the search ------------------------------------------------------------------- */

static int started(run *r, bool resumed) {
    const cti_config *c = r->cfg;
    const cti_searcher_opts *so = &c->search;
    json_t *e = json_pack("{sssssbsIsIsIsssO*}", "searcher", cti_searcher_kind_name(so->kind), "metric", metric_name(r),
                          "smaller_is_better", c->fit.smaller_is_better, "seed", (json_int_t)so->seed, "trials",
                          (json_int_t)cti_searcher_total(r->s), "max_length", (json_int_t)so->max_length, "unit",
                          cti_exp_unit_name(c->fit.max_length.unit), "hyperparameters", c->hp_spec);
    const cti_asha_plan *plan = cti_searcher_plan(r->s);
    if (plan) json_object_set_new(e, "stop_once", json_boolean(so->stop_once));
    if (plan) {
        json_t *brackets = json_array();
        for (int b = 0; b < plan->n; b++) {
            json_t *units = json_array();
            for (int k = 0; k < plan->b[b].rungs; k++) json_array_append_new(units, json_integer(plan->b[b].units[k]));
            json_array_append_new(brackets, json_pack("{sIsIso}", "trials", (json_int_t)plan->b[b].max_trials,
                                                      "max_concurrent", (json_int_t)plan->b[b].max_concurrent, "rungs",
                                                      units));
        }
        json_object_set_new(e, "brackets", brackets);
    }
    char rungs[320] = "";
    if (plan) /* the mode, which changed in Determined 0.38: said first */
        snprintf(rungs, sizeof rungs, ", %s", so->stop_once ? "stopping early (stop_once)" : "promoting (stop_once false)");
    for (int b = 0; plan && b < plan->n; b++) {
        size_t n = strlen(rungs);
        snprintf(rungs + n, sizeof rungs - n, "%s%lld trials at", b ? "; " : ", brackets: ",
                 (long long)plan->b[b].max_trials);
        for (int k = 0; k < plan->b[b].rungs; k++) {
            n = strlen(rungs);
            snprintf(rungs + n, sizeof rungs - n, "%s%lld", k ? "/" : " ", (long long)plan->b[b].units[k]);
        }
    }
    /* a resumed search's start is an event of its own each time; a log
     * without the start itself (empty: killed before its first line was
     * written) starts the search now */
    if (resumed && !r->logged_start) resumed = false;
    /* a finished search resumed: nothing runs, and its log keeps ending with experiment_completed */
    if (resumed && r->logged_end) {
        json_decref(e);
        if (r->world_rank == 0 && !c->fit.quiet)
            printf("the search in %s is complete: nothing to resume (its results follow)\n", r->dir);
        return CT_OK;
    }
    return cti_exp_log_event(&r->log, resumed ? "experiment_resumed" : "experiment_started", -1,
                            -1, e, "%s %s: %lld trials of up to %lld %s%s, "
                            "%s %s, seed %u", resumed ? "resumed" : "started", cti_searcher_kind_name(so->kind),
                            (long long)cti_searcher_total(r->s), (long long)so->max_length,
                            cti_exp_unit_name(c->fit.max_length.unit), rungs, c->fit.smaller_is_better ? "minimizing"
                                                                                                   : "maximizing",
                            metric_name(r), so->seed);
}

int cti_experiment_run(const ct_trial *trial, const cti_config *c) {
    run r;
    memset(&r, 0, sizeof r);
    r.trial = trial;
    r.cfg = c;
    r.world_rank = ct_dist_rank();
    r.world = ct_dist_size();
    r.slots = c->slots_per_trial ? c->slots_per_trial : 1;
    snprintf(r.dir, sizeof r.dir, "%s", c->fit.output_dir ? c->fit.output_dir : "output");
    int rc = 0;
    /* The collective timeout (--dist-timeout, resources.dist_timeout) for
     * the whole search: the ranks also meet between trials, outside every
     * ct_fit (which sets it for its own run and gives it back). */
    double timeout_before = ct_dist_timeout();
    if (c->fit.dist_timeout != 0 && ct_dist_set_timeout(c->fit.dist_timeout) != CT_OK)
        rc = ct_set_error(CT_ECONFIG, "the collective timeout is %g: expected seconds, a number >= 0",
                          c->fit.dist_timeout);
    if (!rc && !(r.s = cti_searcher_new(&c->search, c->space))) rc = ct_last_code();
    if (!rc) rc = open_folder(&r);
    if (!rc) rc = started(&r, r.resumed);
    if (!rc) rc = cti_searcher_start(r.s, &r.q);
    if (!rc) rc = grow_done(&r);
    while (!rc && !r.stopped && !cti_searcher_done(r.s)) rc = run_round(&r);
    if (!rc && r.stopped) {
        json_t *e = json_pack("{si}", "signal", ct_fit_stop_signal());
        rc = cti_exp_log_event(&r.log, "experiment_stopped", -1, -1, e,
                              "stopped by a signal; every trial is checkpointed: continue with --resume latest");
    } else if (!rc) {
        rc = cti_exp_finish(&r.log, r.s, c, r.dir, r.t, r.cap_t);
    }
    cti_exp_log_close(&r.log);
    json_decref(r.replay);
    free(r.q.v);
    free(r.done);
    free(r.t);
    cti_searcher_free(r.s);
    ct_dist_set_timeout(timeout_before);
    return rc;
}
