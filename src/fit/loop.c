/* src/fit/loop.c — ct_fit: Determined's training loop.
 *
 * After every batch the boundaries are checked in Determined's order: TRAIN
 * (max_length), VALIDATE, CHECKPOINT, REPORT. A workload is the run of
 * batches until one fires; its training metrics are averaged and reported,
 * then the fired boundaries are handled: validate unless current, checkpoint
 * unless current (and as the checkpoint policy says after a validation), then
 * a stop request. At max_length: validate if not current, checkpoint if not
 * current, whatever the policy. docs/design.md ("Determined's rules")
 * lists each rule with the test that asserts it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>

/* Includes by layer, bottom up (docs/design.md, "Layers"), each with what
 * this file takes from it. */
/* base: errors, clocks, files, the heap */
#include "base/clock.h"           /* defines: cti_clock_monotonic */
#include "base/cpus.h"            /* defines: cti_cpus_default_threads */
#include "base/files.h"           /* defines: cti_make_dirs, cti_remove_tree */
#include "base/heap.h"            /* defines: cti_heap_tune_for_training */
#include "base/json_write.h"      /* defines: cti_json_dumps (reals as Python writes them) */
#include "base/value_json.h"      /* defines: cti_json_from_value */

/* config: periods and their rules */
#include "config/period.h"        /* defines: cti_period_fires, cti_period_in_batches, CT_SEED_MAX */

/* the shim, through the public API */
#include "ctrial/cuda.h"          /* defines: ct_cuda_device_count */
#include "ctrial/dist.h"          /* defines: ct_dist_* (ranks, collectives) */
#include "ctrial/ops.h"           /* defines: ct_call (the loader seed draw: aten::random_) */

/* data: the loaders */
#include "data/loader.h"          /* defines: cti_loader_use_* (the training chain, shards, device) */

/* dist: ranks, collectives, gradient averaging */
#include "dist/agree.h"           /* defines: cti_ranks_agree */
#include "dist/grad_sync.h"       /* defines: cti_grad_sync_* (gradients averaged during backward) */
#include "dist/host.h"            /* defines: cti_dist_host_cpus */
#include "dist/shard.h"           /* defines: cti_shard_is_spilled (what a background snapshot may share) */
#include "dist/watch.h"           /* defines: cti_dist_watch_progress */

/* metrics: reducing a workload's metrics */
#include "metrics/metrics.h"      /* defines: cti_metrics_training, cti_metrics_validation */
#include "metrics/per_batch.h"    /* defines: cti_metric_doubles */

/* ckpt: checkpoint directories */
#include "ckpt/ckpt.h"            /* defines: CT_CKPT_STATE_FILE, cti_ckpt_read_metadata */
#include "ckpt/pth_tensors.h"     /* defines: cti_pth_load_mapped (a checkpoint read without a second copy) */
#include "ckpt/remote.h"          /* defines: cti_ckpt_is_remote, cti_ckpt_fetch_url (checkpoints in S3) */

/* fit: this module */
#include "fit/checkpointer.h"     /* defines: cti_checkpointer (directory, resume source, latest, best) */
#include "fit/context.h"          /* defines: struct ct_context (what the trial sees) */
#include "fit/ema.h"              /* defines: cti_ema_* (ct_ctx_add_ema's averages) */
#include "fit/graph_step.h"       /* defines: cti_graph_step (the step as a CUDA graph) */
#include "fit/outcome.h"          /* defines: cti_fit_ex */
#include "fit/report.h"           /* defines: cti_reporter (metrics.jsonl, console, time) */
#include "fit/run.h"              /* defines: cti_run (this file's state of one ct_fit) */
#include "fit/snapshot.h"         /* defines: cti_snapshot (a checkpoint's state in host memory of its own) */
#include "fit/state.h"            /* defines: cti_run_state, cti_run_metadata, cti_run_restore_* */
#include "fit/stop.h"             /* defines: cti_fit_catch_stop_signals_until_exit, cti_fit_block_stop_signals */
#include "fit/warm_start.h"       /* defines: cti_context_warm_start */

/* ---- callbacks ------------------------------------------------------------- */

/* Calls `hook` of every callback in registration order while rc is CT_OK;
 * the first failure sets rc to an error naming the callback and the hook.
 * (CALL_HOOKS0 for hooks that take only self and ctx.) Like every call into
 * the trial's code, each starts with the thread's error cleared (error.h,
 * "Errors and your code"), so a failure's message is the hook's own. */
#define CALL_HOOKS(rc, ctx, hook, ...)                                                        \
    do {                                                                                      \
        for (size_t i_ = 0; (rc) == CT_OK && i_ < (ctx)->n_callbacks; i_++) {                 \
            const ct_callback *cb_ = &(ctx)->callbacks[i_];                                   \
            if (!cb_->hook) continue;                                                         \
            ct_clear_error();                                                                 \
            if (cb_->hook(cb_->self, (ctx), __VA_ARGS__) != 0) (rc) = hook_failed(cb_, #hook); \
        }                                                                                     \
    } while (0)
#define CALL_HOOKS0(rc, ctx, hook)                                                            \
    do {                                                                                      \
        for (size_t i_ = 0; (rc) == CT_OK && i_ < (ctx)->n_callbacks; i_++) {                 \
            const ct_callback *cb_ = &(ctx)->callbacks[i_];                                   \
            if (!cb_->hook) continue;                                                         \
            ct_clear_error();                                                                 \
            if (cb_->hook(cb_->self, (ctx)) != 0) (rc) = hook_failed(cb_, #hook);             \
        }                                                                                     \
    } while (0)

static int hook_failed(const ct_callback *cb, const char *hook) {
    int code = ct_last_code() != CT_OK ? ct_last_code() : CT_ETRIAL;
    return ct_set_error(code, "callback '%s' %s: %s", cb->name, hook,
                        ct_last_error()[0] ? ct_last_error() : "failed");
}

/* ---- preemption -------------------------------------------------------------- */

/* SIGTERM / SIGINT become a stop request (Determined's preemption): the
 * batch finishes, the loop checkpoints and returns 0; before training
 * starts, ct_fit returns 0 at once with nothing to save. The handler only
 * records the signal; the loop reads it after each batch, and every rank
 * agrees on it (the largest signal number any rank got), so every rank
 * stops after the same batch and says the same, whichever rank got it.
 *
 * Who catches them when. ct_fit catches them while it runs. ct_main
 * catches them from its first line until the process exits
 * (cti_fit_catch_stop_signals_until_exit): a signal before ct_fit (during
 * MPI's start, flag parsing) stops the run before training, and one after
 * ct_fit returned (a repeated SIGTERM while the program ends) is recorded
 * instead of killing the process with 143 after its clean stop. A bare
 * ct_fit gives the program's own handlers back when it returns; where the
 * program had the default action (terminate) and a stop signal came during
 * the fit, the handler stays, for the same reason: the process was asked
 * to end, and a repeated signal while it does must not turn a clean stop
 * into 143. */
static volatile sig_atomic_t g_stop_signal; /* caught and not yet taken by a ct_fit (0: none) */
static int g_agreed_signal;                 /* the signal this ct_fit stops on, the same on every rank */
static int g_fit_signal;                    /* what ct_fit_stop_signal answers */

static void on_stop_signal(int sig) { g_stop_signal = sig; }

int ct_fit_stop_signal(void) { return g_fit_signal; }

static bool catching(int sig) {
    struct sigaction cur;
    return sigaction(sig, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_stop_signal;
}

/* SA_RESTART: a read or write the signal lands in goes on instead of
 * failing with EINTR (the loop looks at the signal after the batch). */
static void install_handler(int sig, struct sigaction *old) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, old);
}

void cti_fit_catch_stop_signals_until_exit(void) {
    if (!catching(SIGTERM)) install_handler(SIGTERM, NULL);
    if (!catching(SIGINT)) install_handler(SIGINT, NULL);
}

typedef struct {
    struct sigaction term, intr;
} saved_signals;

/* At ct_fit's start. A signal caught before, while the handler was already
 * ours (ct_main's, or kept by an earlier ct_fit), stands: it stops this run
 * before training. */
static void catch_stop_signals(saved_signals *saved) {
    if (!catching(SIGTERM) || !catching(SIGINT)) g_stop_signal = 0;
    install_handler(SIGTERM, &saved->term);
    install_handler(SIGINT, &saved->intr);
    g_agreed_signal = 0;
    g_fit_signal = 0;
}

/* At ct_fit's end: the signal that stopped it, or one that came after
 * training had ended, is taken (ct_fit_stop_signal); the program's own
 * handlers (or SIG_IGN) come back, and the default action too unless such
 * a signal came. */
static void restore_signals(const saved_signals *saved) {
    g_fit_signal = g_agreed_signal ? g_agreed_signal : g_stop_signal;
    g_stop_signal = 0;
    bool asked_to_end = g_fit_signal != 0;
    if (!(asked_to_end && saved->term.sa_handler == SIG_DFL && !(saved->term.sa_flags & SA_SIGINFO)))
        sigaction(SIGTERM, &saved->term, NULL);
    if (!(asked_to_end && saved->intr.sa_handler == SIG_DFL && !(saved->intr.sa_flags & SA_SIGINFO)))
        sigaction(SIGINT, &saved->intr, NULL);
}

/* The stop signal caught on any rank, the same on every rank: sets
 * run->preempted and g_agreed_signal when there is one. Collective. */
static int agree_on_preemption(cti_run *run) {
    int64_t sig = g_agreed_signal ? g_agreed_signal : g_stop_signal;
    int rc = run->ctx->size == 1 ? CT_OK
                                 : cti_dist_allreduce_i64_as(&sig, 1, CT_DIST_MAX, "the agreement on a stop signal");
    if (rc == CT_OK && sig) {
        run->preempted = true;
        g_agreed_signal = (int)sig;
    }
    return rc;
}

/* ---- periods --------------------------------------------------------------- */

/* ct_fit's periods in records become batches of the global batch size
 * (config/period.h), as the config's do. */
static int records_to_batches(ct_context *ctx, ct_period *p, const char *what) {
    if (cti_period_in_batches(p, ctx->global_batch_size)) return CT_OK;
    return ct_set_error(CT_ECONFIG, "%s is in records but global_batch_size is not set", what);
}

/* ---- checks before anything runs ------------------------------------------- */

static int check_trial(const ct_trial *t) {
    const char *name = t->name ? t->name : "trial";
    bool simple = t->build_model != NULL;
    if (!t->init && !simple) return ct_set_error(CT_ETRIAL, "%s: init is required", name);
    if (simple && !t->optimizer) return ct_set_error(CT_ETRIAL, "%s: simple mode needs optimizer with build_model", name);
    if (!t->train_batch) return ct_set_error(CT_ETRIAL, "%s: train_batch is required", name);
    if (!t->build_training_data_loader)
        return ct_set_error(CT_ETRIAL, "%s: build_training_data_loader is required", name);
    if (t->evaluate_batch && t->evaluate_full_dataset)
        return ct_set_error(CT_ETRIAL, "%s: define evaluate_batch or evaluate_full_dataset, not both", name);
    if (!t->evaluate_batch && !t->evaluate_full_dataset)
        return ct_set_error(CT_ETRIAL, "%s: evaluate_batch or evaluate_full_dataset is required", name);
    if (!t->build_validation_data_loader)
        return ct_set_error(CT_ETRIAL, "%s: build_validation_data_loader is required", name);
    return CT_OK;
}

static int check_opts(const ct_fit_opts *o) {
    int mu = (int)o->max_length.unit;
    if ((mu != CT_BATCHES && mu != CT_EPOCHS && mu != CT_RECORDS) || o->max_length.num_points > 0 ||
        o->max_length.n < 1)
        return ct_set_error(CT_ECONFIG, "max_length must be a positive number of batches, epochs or records "
                                        "(not a schedule)");
    int pol = (int)o->checkpoint_policy;
    if (pol < CT_CKPT_BEST || pol > CT_CKPT_NONE)
        return ct_set_error(CT_ECONFIG, "unknown checkpoint policy %d", pol);
    if (o->checkpoint_policy == CT_CKPT_BEST && (!o->searcher_metric || !o->searcher_metric[0]))
        return ct_set_error(CT_ECONFIG, "checkpoint_policy best needs searcher.metric");
    if (o->seed > (uint64_t)CT_SEED_MAX)
        return ct_set_error(CT_ECONFIG, "seed %llu is out of range: experiment seeds are 0 to %lld, as Determined's",
                            (unsigned long long)o->seed, (long long)CT_SEED_MAX);
    return CT_OK;
}

/* ---- metrics --------------------------------------------------------------- */

/* train_batch's answer as a dict of metrics (a lone tensor is "loss").
 * Steals `returned`; NEW dict or NULL + error. */
static ct_value *as_metrics(ct_value *returned, const char *what) {
    if (ct_value_kind_of(returned) == CT_VALUE_TENSOR) {
        ct_value *d = ct_value_dict();
        ct_value_dict_set(d, "loss", returned);
        returned = d;
    }
    if (ct_value_kind_of(returned) != CT_VALUE_DICT) {
        ct_set_error(CT_ETRIAL, "%s must return a tensor or a dict of metrics, not a %s", what,
                     ct_value_kind_name(ct_value_kind_of(returned)));
        ct_value_free(returned);
        return NULL;
    }
    return returned;
}

/* Kept metrics must not keep their autograd graphs alive until the report. */
static void detach_metrics(ct_value *metrics) {
    for (size_t i = 0; i < ct_value_len(metrics); i++) {
        const char *key = NULL;
        const ct_value *v = ct_value_dict_at(metrics, i, &key, NULL);
        ct_tensor *t = ct_value_kind_of(v) == CT_VALUE_TENSOR ? ct_value_get_tensor(v) : NULL;
        if (t && key && ct_requires_grad(t)) ct_value_dict_set(metrics, key, ct_value_tensor(ct_detach(t)));
    }
}

/* ---- ranks agreeing ------------------------------------------------------------- */

/* Determined's _stop_requested() after each boundary: a preemption or a
 * stop request (ct_ctx_set_stop_requested, still standing) on any rank.
 * Sets *stop. */
static int stop_at_boundary(cti_run *run, bool *stop) {
    ct_context *ctx = run->ctx;
    /* One all-reduce for both: the signal (agreed as agree_on_preemption
     * does) and the request. */
    int64_t flags[2] = {g_agreed_signal ? g_agreed_signal : g_stop_signal, ctx->stop_requested};
    int rc = ctx->size == 1 ? CT_OK : cti_dist_allreduce_i64_as(flags, 2, CT_DIST_MAX, "the agreement on stopping");
    if (rc == CT_OK && flags[0]) {
        run->preempted = true;
        g_agreed_signal = (int)flags[0];
    }
    *stop = rc == CT_OK && (flags[0] != 0 || flags[1] != 0);
    return rc;
}

/* Rank 0's parameters and buffers on every rank (Determined broadcasts
 * them at the start so every rank begins identical); with buffers_only,
 * what the optimizer does not keep equal: the buffers (BatchNorm's running
 * statistics, which each rank updates from its own shard) and frozen
 * parameters. */
static int broadcast_models(ct_context *ctx, bool buffers_only) {
    if (ctx->size == 1) return CT_OK;
    for (size_t m = 0; m < ctx->n_models; m++)
        for (size_t i = 0; i < ct_nn_state_size(ctx->models[m]); i++) {
            const char *name = NULL;
            ct_tensor *t = ct_nn_state_at(ctx->models[m], i, &name);
            if (buffers_only && ct_requires_grad(t)) continue;
            if (ct_dist_broadcast(t, 0) != CT_OK)
                return ct_set_error(ct_last_code(), "broadcasting model %zu '%s': %s", m, name, ct_last_error());
        }
    return CT_OK;
}

static int param_owner(const ct_tensor *param, void *owners) { return cti_param_owner(owners, param); }

/* A gradient sync per model from now on: under mpirun each averages its
 * model's gradients across ranks, in buckets of bucket_cap_mb (after the
 * broadcast: hooks see final weights); on one rank each does nothing.
 * With sharded optimizers each parameter's gradient is reduced to the
 * rank that steps it (cti_grad_sync_new_owned). */
static int start_grad_sync(ct_context *ctx) {
    if (ctx->n_models == 0) return CT_OK;
    ctx->syncs = calloc(ctx->n_models, sizeof *ctx->syncs);
    if (!ctx->syncs) return ct_set_error(CT_ENOMEM, "out of host memory");
    size_t bucket = (size_t)(ctx->opts.bucket_cap_mb > 0 ? ctx->opts.bucket_cap_mb : 25) << 20;
    cti_param_owners *owners = ctx->shards ? cti_context_param_owners(ctx) : NULL;
    if (ctx->shards && !owners) return ct_last_code();
    int rc = CT_OK;
    for (size_t m = 0; rc == CT_OK && m < ctx->n_models; m++) {
        if (!(ctx->syncs[m] = owners ? cti_grad_sync_new_owned(ctx->models[m], bucket, param_owner, owners)
                                     : cti_grad_sync_new(ctx->models[m], bucket)))
            rc = ct_last_code();
        else
            ctx->n_syncs = m + 1;
    }
    cti_param_owners_free(owners);
    return rc;
}

/* ---- checkpoints ----------------------------------------------------------- */

/* Stop signals wait while a checkpoint is written (they are delivered, and
 * become a stop request, right after): a second SIGTERM mid-write changes
 * nothing. kill -9 cannot be blocked; the atomic commit covers it. */
void cti_fit_block_stop_signals(sigset_t *old) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

/* A background snapshot shares, instead of copying, the optimizer state
 * rank 0 received from other ranks into its spill file (shard.h). */
static bool spilled(const ct_tensor *t) { return ct_is_contiguous(t) && cti_shard_is_spilled(ct_data_ptr(t)); }

/* After a checkpoint's write, on every rank: on_checkpoint_write_end (rank
 * 0), the outcome agreed, the committed directory shared,
 * on_checkpoint_upload_end, the console's line. */
static int checkpoint_written(cti_run *run, int rc, int64_t bt, cti_ckpt_why why, bool background) {
    ct_context *ctx = run->ctx;
    if (ctx->rank == 0) CALL_HOOKS(rc, ctx, on_checkpoint_write_end, cti_checkpointer_last(run->ckpt));
    rc = cti_ranks_agree(rc);
    if (rc == CT_OK) rc = cti_checkpointer_share_last(run->ckpt);
    CALL_HOOKS(rc, ctx, on_checkpoint_upload_end, cti_checkpointer_last(run->ckpt));
    if (rc == CT_OK) cti_report_checkpoint(run->report, bt, cti_ckpt_why_name(why), background);
    return rc;
}

/* The checkpoint written in the background (background_checkpoints), once
 * its writer is done: at once with `wait` (the next checkpoint, the end of
 * training), else only when rank 0's writer has returned, which every rank
 * learns from rank 0 at the boundary. Its failure fails the run here, with
 * its reason; what it left uncommitted never counts (ckpt.h). */
static int finish_background(cti_run *run, bool wait) {
    ct_context *ctx = run->ctx;
    if (!run->bg_writing) return CT_OK;
    uint8_t done = wait || (ctx->rank == 0 && cti_checkpointer_written(run->ckpt));
    int rc = !wait && ctx->size > 1 ? ct_dist_broadcast_bytes(&done, 1, 0) : CT_OK;
    if (rc != CT_OK || !done) return rc;
    double t0 = cti_clock_monotonic();
    rc = ctx->rank == 0 ? cti_checkpointer_finish(run->ckpt) : CT_OK;
    run->bg_writing = false;
    rc = checkpoint_written(run, rc, run->bg_bt, run->bg_why, true);
    cti_time_add(run->report, CT_TIME_CHECKPOINT, t0); /* the wait, if any */
    return rc;
}

/* Every checkpoint decision goes through here: the state of models,
 * optimizers, schedulers, callbacks and RNG, and on rank 0, which writes
 * it, on_checkpoint_save_start (callbacks may add to the state), a fresh
 * directory committed atomically and on_checkpoint_write_end (Determined's
 * _save runs on the chief only); then on_checkpoint_upload_end on every
 * rank with the committed directory. */
static int checkpoint(cti_run *run, cti_ckpt_why why) {
    ct_context *ctx = run->ctx;
    int rc = finish_background(run, true); /* one in flight at most: the next waits */
    if (rc != CT_OK) return rc;
    double t0 = cti_clock_monotonic();
    int64_t bt = ctx->pos.batches_trained;
    ctx->pos.last_checkpoint_bt = bt;
    run->why = why;
    /* In the background while training goes on; the run's last checkpoint
     * (at max_length, whatever fired it) and one before a stop are written
     * at once, as nothing trains after them. */
    bool background = ctx->opts.background_checkpoints && why != CT_WHY_END && why != CT_WHY_STOP &&
                      bt < ctx->pos.max_length_batches && !ctx->opts.test_mode;
    ct_value *state = cti_run_state(run);
    rc = state ? CT_OK : ct_last_code();
    if (ctx->rank == 0) CALL_HOOKS(rc, ctx, on_checkpoint_save_start, state);
    /* Every rank has finished this step before rank 0 commits it. */
    rc = cti_ranks_agree(rc);
    if (rc == CT_OK && ctx->rank == 0 && background) {
        ct_value *snap = cti_snapshot(state, spilled);
        rc = snap ? cti_checkpointer_write_background(run->ckpt, bt, snap, cti_run_metadata(run)) : ct_last_code();
    } else if (rc == CT_OK && ctx->rank == 0) {
        sigset_t old;
        cti_fit_block_stop_signals(&old);
        rc = cti_checkpointer_write(run->ckpt, bt, state, cti_run_metadata(run));
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    ct_value_free(state);
    if (background) {
        rc = cti_ranks_agree(rc);
        run->bg_writing = rc == CT_OK;
        run->bg_bt = bt;
        run->bg_why = why;
    } else {
        rc = checkpoint_written(run, rc, bt, why, false);
    }
    cti_time_add(run->report, CT_TIME_CHECKPOINT, t0);
    return rc;
}

/* Checkpointing as a boundary: skipped when the latest checkpoint is current. */
static int checkpoint_boundary(cti_run *run, cti_ckpt_why why) {
    const cti_position *pos = &run->ctx->pos;
    return pos->last_checkpoint_bt == pos->batches_trained ? CT_OK : checkpoint(run, why);
}

/* The checkpoint policy after a validation: best (strictly better than the
 * best of the run, none yet counts as better), all, or none. */
static void format_names(const ct_value *m, char *buf, size_t len); /* below, with validation */

static int apply_policy(cti_run *run, const ct_value *metrics) {
    const ct_context *ctx = run->ctx;
    if (ctx->opts.checkpoint_policy == CT_CKPT_NONE) return CT_OK;
    if (ctx->opts.checkpoint_policy == CT_CKPT_ALL) return checkpoint_boundary(run, CT_WHY_POLICY);
    const char *name = ctx->opts.searcher_metric;
    const ct_value *v = ct_value_dict_get(metrics, name);
    double m;
    if (!v) { /* most likely misspelled in the config: name the ones there are */
        char names[1024];
        format_names(metrics, names, sizeof names);
        return ct_set_error(CT_ECONFIG,
                            "searcher.metric '%s' is not among the validation metrics %s (checkpoint policy best "
                            "compares it)", name, names);
    }
    if (ct_value_get_float(v, &m) != 0)
        return ct_set_error(CT_ETRIAL, "searcher metric '%s' is not a scalar in the validation metrics (checkpoint "
                                       "policy best)", name);
    /* Strictly better than the best of the run (checkpointer.h). */
    return cti_checkpointer_improves(run->ckpt, m) ? checkpoint_boundary(run, CT_WHY_POLICY) : CT_OK;
}

/* ---- validation ------------------------------------------------------------ */

static void set_train_mode(ct_context *ctx, bool on) {
    for (size_t i = 0; i < ctx->n_models; i++) ct_nn_train(ctx->models[i], on);
}

/* The trial's own code under AMP runs in an autocast region of the
 * trial's device type (enter/exit; no-ops without AMP). */
static int amp_enter(ct_context *ctx) { return ctx->amp ? ct_autocast_enter(ctx->device.type, ctx->amp_dtype) : CT_OK; }
static void amp_exit(ct_context *ctx) {
    if (ctx->amp) ct_autocast_exit();
}

/* Whether a metrics dict has exactly the names of `first` (as Python
 * compares dict keys: the same set, in any order). */
static bool same_names(const ct_value *first, const ct_value *m) {
    if (ct_value_len(first) != ct_value_len(m)) return false;
    for (size_t i = 0; i < ct_value_len(m); i++) {
        const char *key = NULL;
        ct_value_dict_at(m, i, &key, NULL);
        if (!key || !ct_value_dict_get(first, key)) return false;
    }
    return true;
}

/* "{a, b}" for messages. */
static void format_names(const ct_value *m, char *buf, size_t len) {
    size_t at = (size_t)snprintf(buf, len, "{");
    for (size_t i = 0; i < ct_value_len(m) && at < len; i++) {
        const char *key = NULL;
        ct_value_dict_at(m, i, &key, NULL);
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", key ? key : "?");
    }
    if (at < len) snprintf(buf + at, len - at, "}");
}

/* torch's DataLoader draws its workers' _base_seed, one int64 random_()
 * from the global CPU generator, each time an iterator is made
 * (_BaseDataLoaderIter.__init__), whatever its num_workers. Determined's
 * loop makes the training iterator once per process, after building both
 * loaders and before restoring a checkpoint (whose RNG state then replaces
 * the draw), and one validation iterator per evaluate_batch validation; a
 * trial's evaluate_full_dataset iterates the loader on rank 0. ctrial's
 * loader needs no such seed, but draws it where Determined's loop does, so
 * that the dropout masks (and any other draw from the global generator) of
 * a trial ported from Determined are the same, step for step. */
static int draw_iterator_seed(void) {
    ct_scope *s = ct_scope_begin();
    ct_tensor *seed = ct_empty(0, NULL, &(ct_topts){.dtype = CT_I64});
    ct_tensor *drawn = seed ? ct_call("aten::random_", 1, (ct_arg[]){CT_T(seed)}) : NULL;
    int rc = drawn ? CT_OK : ct_set_error(ct_last_code(), "the data loader's seed: %s", ct_last_error());
    ct_scope_end(s);
    return rc;
}

/* evaluate_batch over one pass of this rank's shard of the validation
 * loader; outputs receives the per-batch metric dicts. Like Determined,
 * every batch must report the same metric names as the first. */
static int evaluate_pass(cti_run *run, ct_loader *loader, ct_value *outputs) {
    ct_context *ctx = run->ctx;
    ct_value *batch = NULL;
    int rc = ct_loader_reset(loader);
    if (rc == CT_OK) rc = draw_iterator_seed();
    for (int64_t i = 0; rc == CT_OK; i++) {
        int got = ct_loader_next(loader, &batch);
        if (got <= 0) return got;
        ct_scope *s = ct_scope_begin();
        rc = amp_enter(ctx);
        if (rc == CT_OK) ct_clear_error(); /* the trial's code starts with no error pending (error.h) */
        ct_value *m = rc == CT_OK ? ctx->trial->evaluate_batch(ctx->self, ctx, batch, i) : NULL;
        if (rc == CT_OK) amp_exit(ctx);
        ct_scope_end(s);
        ct_value_free(batch);
        if (rc != CT_OK) return rc;
        if (!m) return cti_context_trial_failed("evaluate_batch");
        if (ct_value_kind_of(m) != CT_VALUE_DICT) {
            ct_value_free(m);
            return ct_set_error(CT_ETRIAL, "evaluate_batch must return a dict of metrics");
        }
        const ct_value *first = ct_value_list_get(outputs, 0);
        if (first && !same_names(first, m)) {
            char a[512], b[512];
            format_names(first, a, sizeof a);
            format_names(m, b, sizeof b);
            ct_value_free(m);
            return ct_set_error(CT_ETRIAL,
                                "evaluate_batch: metric names must match across batches: batch 0 returned %s, "
                                "batch %lld returned %s (rank %d)", a, (long long)i, b, ctx->rank);
        }
        rc = ct_value_list_append(outputs, m);
        if (ctx->opts.test_mode) break; /* the first validation batch only */
    }
    return rc;
}

/* evaluate_pass on every rank; the ranks agree on its outcome before they
 * count batches, so a failure on one rank never leaves the others waiting. */
static int evaluate_batches(cti_run *run, ct_loader *loader, ct_value *outputs) {
    const ct_context *ctx = run->ctx;
    int rc = cti_ranks_agree(evaluate_pass(run, loader, outputs));
    /* A rank may get no validation batches (a small set over many ranks);
     * all ranks together must get some. */
    int64_t total = (int64_t)ct_value_len(outputs);
    if (rc == CT_OK && ctx->size > 1) rc = ct_dist_allreduce_i64(&total, 1, CT_DIST_SUM);
    if (rc == CT_OK && total == 0) return ct_set_error(CT_ETRIAL, "the validation loader yielded no batches");
    return rc;
}

/* evaluate_full_dataset on rank 0, over a fresh pass of the whole
 * (unsharded) validation loader, as Python's `for batch in loader` starts
 * one each call. NEW dict, or NULL + error. */
static ct_value *evaluate_full(cti_run *run, ct_loader *loader) {
    ct_context *ctx = run->ctx;
    int rc = ct_loader_reset(loader);
    if (rc == CT_OK) rc = draw_iterator_seed(); /* the trial's `for batch in loader` */
    ct_scope *s = ct_scope_begin();
    if (rc == CT_OK) rc = amp_enter(ctx);
    if (rc == CT_OK) ct_clear_error();
    ct_value *mine = rc == CT_OK ? ctx->trial->evaluate_full_dataset(ctx->self, ctx, loader) : NULL;
    if (rc == CT_OK) amp_exit(ctx);
    ct_scope_end(s);
    if (rc == CT_OK) rc = mine ? CT_OK : cti_context_trial_failed("evaluate_full_dataset");
    if (rc == CT_OK && ct_value_kind_of(mine) != CT_VALUE_DICT)
        rc = ct_set_error(CT_ETRIAL, "evaluate_full_dataset must return a dict of metrics");
    if (rc == CT_OK) return mine;
    ct_value_free(mine);
    return NULL;
}

/* evaluate_batch's outputs reduced: by the trial's evaluation_reducer (NULL:
 * the mean) and its wrapped reducers. NEW dict, or NULL + error. */
static ct_value *reduce_outputs(ct_context *ctx, const ct_value *outputs) {
    ct_clear_error();
    ct_value *spec = ctx->trial->evaluation_reducer ? ctx->trial->evaluation_reducer(ctx->self, ctx) : NULL;
    if (!spec && ct_last_code() != CT_OK) {
        ct_set_error(ct_last_code(), "evaluation_reducer: %s", ct_last_error());
        return NULL;
    }
    ct_value *metrics = cti_metrics_validation(outputs, spec, ctx->reducers, ctx->n_reducers);
    ct_value_free(spec);
    return metrics;
}

/* evaluate_full_dataset on rank 0 over `loader`; every rank gets its answer
 * (or its error). NEW dict, or NULL + error. */
static ct_value *full_dataset_metrics(cti_run *run, ct_loader *loader) {
    ct_context *ctx = run->ctx;
    ct_value *mine = ctx->rank == 0 ? evaluate_full(run, loader) : NULL;
    ct_value *metrics = cti_metrics_full_dataset(mine, ctx->reducers, ctx->n_reducers);
    ct_value_free(mine);
    return metrics;
}

/* The trial's other validation loaders (ct_ctx_add_validation_loader), one
 * after the other, as the main one but without the validation-epoch hooks:
 * each pass reduced on its own, its metrics added to `metrics` under
 * "<name>/<metric>". */
static int validate_named(cti_run *run, ct_value *metrics) {
    ct_context *ctx = run->ctx;
    int rc = CT_OK;
    for (size_t k = 0; rc == CT_OK && k < ctx->n_val_loaders; k++) {
        cti_named_loader *v = &ctx->val_loaders[k];
        ctx->val_name = v->name;
        cti_reducers_reset(ctx->reducers, ctx->n_reducers);
        ct_value *mine = NULL;
        if (ctx->trial->evaluate_batch) {
            ct_value *outputs = ct_value_list();
            rc = outputs ? evaluate_batches(run, v->loader, outputs) : ct_last_code();
            mine = rc == CT_OK ? reduce_outputs(ctx, outputs) : NULL;
            ct_value_free(outputs);
        } else {
            mine = full_dataset_metrics(run, v->loader);
        }
        if (!mine && rc == CT_OK) rc = ct_last_code();
        for (size_t i = 0; rc == CT_OK && i < ct_value_len(mine); i++) {
            const char *key = NULL;
            const ct_value *m = ct_value_dict_at(mine, i, &key, NULL);
            char name[512];
            snprintf(name, sizeof name, "%s/%s", v->name, key);
            ct_value *copy = ct_value_copy(m, false);
            rc = copy ? ct_value_dict_set(metrics, name, copy) : ct_last_code();
        }
        if (rc != CT_OK) ct_set_error(rc, "validation loader '%s': %s", v->name, ct_last_error());
        ct_value_free(mine);
        ctx->val_name = NULL;
    }
    return rc;
}

/* Determined's _validate: on_validation_start; with evaluate_batch the
 * validation-epoch hooks around the main loader's pass (evaluate_full_dataset
 * has no batches to hand them, and Determined calls them only for
 * evaluate_batch); the trial's named loaders; the reduced metrics;
 * on_validation_end. */
static int run_validation(cti_run *run) {
    ct_context *ctx = run->ctx;
    cti_reducers_reset(ctx->reducers, ctx->n_reducers);
    /* Every rank validates with rank 0's buffers, the ones a checkpoint
     * saves (DistributedDataParallel's broadcast_buffers, here before the
     * forwards that read running statistics): the reported metrics are the
     * checkpointed model's, and a resumed run validates as an
     * uninterrupted one. */
    int rc = broadcast_models(ctx, true);
    if (rc != CT_OK) return rc;
    bool batches = ctx->trial->evaluate_batch != NULL;
    CALL_HOOKS0(rc, ctx, on_validation_start);
    if (batches) CALL_HOOKS0(rc, ctx, on_validation_epoch_start);
    if (rc != CT_OK) return rc;
    set_train_mode(ctx, false);
    ct_guard *g = ct_no_grad();
    ct_value *outputs = ct_value_list();
    ct_value *metrics = NULL;
    if (batches) {
        rc = evaluate_batches(run, run->val_loader, outputs);
        if (rc == CT_OK) CALL_HOOKS(rc, ctx, on_validation_epoch_end, outputs);
        if (rc == CT_OK) metrics = reduce_outputs(ctx, outputs);
    } else {
        metrics = full_dataset_metrics(run, run->val_loader);
    }
    if (!metrics && rc == CT_OK) rc = ct_last_code();
    if (rc == CT_OK) rc = validate_named(run, metrics);
    ct_guard_end(g);
    set_train_mode(ctx, true);
    ct_value_free(outputs);
    if (rc == CT_OK) {
        ctx->pos.last_validation_bt = ctx->pos.batches_trained;
        /* ct_evaluate writes its own line (evaluation.jsonl), not the run's */
        if (!run->evaluate) rc = cti_report(run->report, "validation", metrics);
    }
    CALL_HOOKS(rc, ctx, on_validation_end, metrics);
    if (rc != CT_OK) {
        ct_value_free(metrics);
        return rc;
    }
    ct_value_free(run->last_validation);
    run->last_validation = metrics;
    return CT_OK;
}

static int validate(cti_run *run) {
    double t0 = cti_clock_monotonic();
    /* The weight averages (ct_ctx_add_ema) validate in the models' place,
     * and give it back whatever the validation's outcome. */
    int rc = cti_ema_swap(run->ctx);
    if (rc == CT_OK) {
        rc = run_validation(run);
        int back = cti_ema_swap(run->ctx);
        if (rc == CT_OK) rc = back;
    }
    cti_time_add(run->report, CT_TIME_VALIDATION, t0);
    run->ctx->pos.validations_run++;
    return rc;
}

/* Validation as a boundary: skipped when current; may checkpoint by policy. */
static int validate_boundary(cti_run *run, bool with_policy) {
    const cti_position *pos = &run->ctx->pos;
    if (pos->last_validation_bt == pos->batches_trained) return CT_OK;
    int rc = validate(run);
    return rc == CT_OK && with_policy ? apply_policy(run, run->last_validation) : rc;
}

/* ---- training -------------------------------------------------------------- */

/* Determined's _auto_step_lr_scheduler_per_batch, after every batch.
 * Schedulers only move on batches that step the optimizer; then
 * - every batch: one step per batch of the aggregation window whose count
 *   is a multiple of the frequency (batches are counted, not steps);
 * - every optimizer step: when the batch count is a multiple of it;
 * - every epoch: one step per epoch end before the next steppable batch. */
static int auto_step_schedulers(ct_context *ctx, int64_t batch_idx) {
    if (!cti_context_is_step_batch(ctx, batch_idx)) return CT_OK;
    int agg = ctx->aggregation_frequency;
    for (size_t k = 0; k < ctx->n_scheds; k++) {
        const cti_wrapped_sched *w = &ctx->scheds[k];
        int64_t steps = 0;
        if (w->mode == CT_STEP_EVERY_BATCH) {
            for (int64_t i = batch_idx - agg + 1; i <= batch_idx; i++) steps += (i + 1) % w->frequency == 0;
        } else if (w->mode == CT_STEP_EVERY_OPTIMIZER_STEP) {
            steps = (batch_idx + 1) % w->frequency == 0;
        } else if (w->mode == CT_STEP_EVERY_EPOCH) {
            int64_t e0 = batch_idx / ctx->pos.epoch_len, e1 = (batch_idx + agg) / ctx->pos.epoch_len;
            for (int64_t e = e0; e < e1; e++) steps += (e + 1) % w->frequency == 0;
        }
        for (int64_t s = 0; s < steps; s++)
            if (ct_sched_step(w->sched) != 0) return ct_last_code();
    }
    return CT_OK;
}

/* Simple mode: the core does backward, the step and zero-grad. */
static int simple_mode_step(ct_context *ctx, const ct_value *metrics) {
    ct_tensor *loss = ct_value_get_tensor(ct_value_dict_get(metrics, "loss"));
    if (!loss) return ct_set_error(CT_ETRIAL, "in simple mode train_batch must return the loss tensor (or \"loss\")");
    int rc = ct_ctx_backward(ctx, loss);
    for (size_t i = 0; rc == CT_OK && i < ctx->n_optims; i++) rc = ct_ctx_step_optimizer(ctx, ctx->optims[i], NULL, NULL);
    return rc;
}

/* The training step as the trial defines it: train_batch (under AMP's
 * autocast, with simple mode's backward and step, and scaler.update()).
 * NEW metrics dict, detached, or NULL + error. With cuda_graphs the
 * CUDA-graph step (graph_step.h) runs it to warm up and to capture, and
 * replays it after. */
static ct_value *eager_step(ct_context *ctx, const ct_value *batch, int64_t epoch, int64_t idx) {
    int rc = amp_enter(ctx);
    if (rc == CT_OK) ct_clear_error(); /* the trial's code starts with no error pending (error.h) */
    ct_value *m = rc == CT_OK ? ctx->trial->train_batch(ctx->self, ctx, batch, epoch, idx) : NULL;
    if (rc == CT_OK) {
        amp_exit(ctx);
        rc = m ? CT_OK : cti_context_trial_failed("train_batch");
    }
    if (rc == CT_OK) {
        m = as_metrics(m, "train_batch");
        rc = m ? CT_OK : ct_last_code();
    }
    if (rc == CT_OK && ctx->simple_mode) rc = simple_mode_step(ctx, m);
    /* scaler.update(): once per optimizer-step batch, after every step. */
    if (rc == CT_OK && ctx->scaler_stepped) {
        rc = ct_grad_scaler_update(ctx->scaler);
        ctx->scaler_stepped = false;
    }
    if (rc != CT_OK) {
        ct_value_free(m);
        return NULL;
    }
    detach_metrics(m);
    return m;
}

/* One batch: train_batch in a scope, its metrics kept (detached) for the
 * workload, schedulers stepped by mode. */
static int train_one(cti_run *run, const ct_value *batch, ct_value *workload) {
    ct_context *ctx = run->ctx;
    int64_t idx = ctx->pos.batches_trained;
    int64_t epoch = ctx->pos.epoch_len > 0 ? idx / ctx->pos.epoch_len : 0;
    ct_scope *s = ct_scope_begin();
    double t0 = cti_clock_monotonic();
    ct_value *m = ctx->graph ? cti_graph_step_run(ctx->graph, ctx, batch, epoch, idx, eager_step)
                             : eager_step(ctx, batch, epoch, idx);
    int rc = m ? CT_OK : ct_last_code() != CT_OK ? ct_last_code() : ct_set_error(CT_ETRIAL, "train_batch failed");
    cti_time_add(run->report, CT_TIME_TRAIN, t0);
    ct_scope_end(s);
    if (rc == CT_OK) rc = ct_value_list_append(workload, m);
    else ct_value_free(m);
    if (rc == CT_OK) {
        ct_clear_error();
        int64_t records = ctx->trial->get_batch_length ? ctx->trial->get_batch_length(ctx->self, batch)
                                                       : ct_batch_length(batch);
        if (records < 0) rc = cti_context_trial_failed("get_batch_length");
        else ctx->pos.records_pending += records;
    }
    ctx->pos.batches_trained = idx + 1;
    if (rc == CT_OK) rc = cti_context_hparam_failure(ctx); /* read in train_batch with the wrong type */
    if (rc != CT_OK) return rc;
    int64_t n = idx + 1;
    if (ctx->n_emas && cti_context_is_step_batch(ctx, idx)) rc = cti_ema_after_step(ctx, n / ctx->aggregation_frequency);
    if (rc == CT_OK) rc = auto_step_schedulers(ctx, idx);
    if (ctx->pos.epoch_len > 0 && n % ctx->pos.epoch_len == 0) CALL_HOOKS(rc, ctx, on_training_epoch_end, epoch);
    return rc;
}

/* ---- hyperparameters ----------------------------------------------------------- */

/* Once, after the first training report (the trial has read what it reads
 * by then: in init, the loader builders, train_batch): a top-level
 * hyperparameter the trial never read is most likely misspelled (a
 * --hparam typo). Rank 0, on stderr. */
static void warn_unread_hparams(cti_run *run) {
    const ct_context *ctx = run->ctx;
    if (run->hparams_warned || ctx->rank != 0 || ctx->opts.quiet || ctx->hparams_all_read) return;
    run->hparams_warned = true;
    for (size_t k = 0; k < ct_value_len(ctx->opts.hparams); k++) {
        const char *key = NULL;
        const ct_value *v = ct_value_dict_at(ctx->opts.hparams, k, &key, NULL);
        bool read = key && !strcmp(key, "global_batch_size"); /* ctrial's own */
        for (size_t i = 0; i < ctx->n_hparams_read && !read; i++) read = ctx->hparams_read[i] == v;
        if (!read && key)
            fprintf(stderr, "ctrial: warning: hyperparameter '%s' was never read by the trial (misspelled?)\n", key);
    }
}

/* On resume, rank 0 lists each hyperparameter that differs from the
 * checkpoint's (a resumed run with other settings is a different run). */
static void warn_changed_hparams(cti_run *run) {
    const ct_context *ctx = run->ctx;
    if (ctx->rank != 0 || ctx->opts.quiet) return;
    json_t *saved = json_object_get(cti_checkpointer_resume_meta(run->ckpt), "hparams");
    json_t *now = cti_json_from_value(ctx->opts.hparams);
    if (!json_is_object(saved)) saved = NULL;
    char line[2048] = "";
    size_t at = 0;
    const char *key;
    json_t *v;
    for (int pass = 0; pass < 2; pass++) { /* keys of now, then keys only the checkpoint has */
        json_t *from = pass ? saved : now;
        json_object_foreach(from, key, v) {
            json_t *other = json_object_get(pass ? now : saved, key);
            if (pass && other) continue;
            if (other && json_equal(v, other)) continue;
            char *a = cti_json_dumps(pass ? other : v, JSON_ENCODE_ANY | JSON_COMPACT);
            char *b = cti_json_dumps(pass ? v : other, JSON_ENCODE_ANY | JSON_COMPACT);
            if (at < sizeof line)
                at += (size_t)snprintf(line + at, sizeof line - at, "%s%s %s (checkpoint: %s)", at ? "; " : "", key,
                                       a ? a : "absent", b ? b : "absent");
            free(a);
            free(b);
        }
    }
    json_decref(now);
    if (line[0])
        fprintf(stderr, "ctrial: warning: resuming with hyperparameters that differ from the checkpoint's: %s\n", line);
}

/* --stop-on-nan: a workload whose reported loss is not finite stops the
 * trial, naming the first batch (of this rank's) whose loss was not. */
static int check_finite_loss(ct_context *ctx, const ct_value *workload, const ct_value *avg) {
    double loss;
    if (ct_value_get_float(ct_value_dict_get(avg, "loss"), &loss) != 0 || isfinite(loss)) return CT_OK;
    int64_t first = ctx->pos.batches_trained - (int64_t)ct_value_len(workload);
    for (size_t i = 0; i < ct_value_len(workload); i++) {
        const ct_value *v = ct_value_dict_get(ct_value_list_get(workload, i), "loss");
        double *x = NULL;
        bool array;
        int64_t n = v ? cti_metric_doubles(v, &x, &array) : 0;
        bool bad = n == 1 && !isfinite(x[0]);
        double value = n == 1 ? x[0] : 0;
        free(x);
        if (bad)
            return ct_set_error(CT_ENAN, "training loss is %g in batch %lld (batch_idx %lld; the report after batch %lld "
                                         "averages %g)",
                                value, (long long)(first + (int64_t)i + 1), (long long)(first + (int64_t)i),
                                (long long)ctx->pos.batches_trained, loss);
    }
    ct_clear_error();
    return ct_set_error(CT_ENAN, "training loss is %g at batch %lld (on another rank)", loss,
                        (long long)ctx->pos.batches_trained);
}

/* Lightning's LearningRateMonitor (ct_ctx_add_lr_monitor): every wrapped
 * optimizer's learning rate per parameter group into the training report,
 * named as Lightning names them: "lr-Adam", "lr-Adam/pg1" and "lr-Adam/pg2"
 * for several groups, "lr-Adam-1" for a second optimizer of the same type. */
static int add_learning_rates(const ct_context *ctx, ct_value *metrics) {
    for (size_t i = 0; i < ctx->n_optims; i++) {
        const ct_optim *o = ctx->optims[i];
        const char *type = ct_optim_type(o);
        int same = 0; /* earlier optimizers of this type */
        for (size_t j = 0; j < i; j++) same += strcmp(ct_optim_type(ctx->optims[j]), type) == 0;
        size_t groups = ct_optim_num_groups(o);
        for (size_t g = 0; g < groups; g++) {
            char key[160], suffix[24] = "", pg[24] = "";
            if (same) snprintf(suffix, sizeof suffix, "-%d", same);
            if (groups > 1) snprintf(pg, sizeof pg, "/pg%zu", g + 1);
            snprintf(key, sizeof key, "lr-%s%s%s", type, suffix, pg);
            if (ct_value_dict_set(metrics, key, ct_value_float(ct_optim_get_lr(o, g))) != CT_OK)
                return ct_last_code();
        }
    }
    return CT_OK;
}

/* Whether any callback has an on_training_workload_end. */
static bool any_workload_hook(const ct_context *ctx) {
    for (size_t i = 0; i < ctx->n_callbacks; i++)
        if (ctx->callbacks[i].on_training_workload_end) return true;
    return false;
}

/* Averages the workload's metrics, adds wrapped reducers' results, reports;
 * then on_training_workload_end on every rank with the reported metrics and
 * the per-batch metrics averaged across ranks (Determined's
 * average_training_metrics). */
static int report_training(cti_run *run, ct_value *workload) {
    ct_context *ctx = run->ctx;
    if (ct_value_len(workload) == 0) return CT_OK;
    /* Records trained by all ranks in this workload. */
    int64_t records = ctx->pos.records_pending;
    int rc = ct_dist_allreduce_i64(&records, 1, CT_DIST_SUM);
    if (rc != CT_OK) return rc;
    ctx->pos.records_trained += records;
    ctx->pos.records_pending = 0;
    ct_value *avg = cti_metrics_training(workload, ctx->reducers, ctx->n_reducers);
    if (!avg) return ct_last_code();
    if (rc == CT_OK && ctx->opts.stop_on_nan) rc = check_finite_loss(ctx, workload, avg);
    if (rc == CT_OK && ctx->lr_monitor) rc = add_learning_rates(ctx, avg);
    if (rc == CT_OK) rc = cti_report(run->report, "training", avg);
    if (rc == CT_OK) warn_unread_hparams(run);
    if (rc == CT_OK && any_workload_hook(ctx)) {
        ct_value *per_batch = ctx->size > 1 ? cti_metrics_batches_across_ranks(workload) : NULL;
        if (ctx->size > 1 && !per_batch) rc = ct_last_code();
        CALL_HOOKS(rc, ctx, on_training_workload_end, avg, per_batch ? per_batch : workload);
        ct_value_free(per_batch);
    }
    ct_value_free(avg);
    return rc;
}

/* ct_ctx_set_profiler: one profiler step per training batch of this run,
 * traces under <output_dir>/profiler. */
static int start_profiler(cti_run *run) {
    const ct_context *ctx = run->ctx;
    if (!ctx->profile) return CT_OK;
    char dir[4200], name[32];
    snprintf(dir, sizeof dir, "%s/profiler", ctx->opts.output_dir);
    snprintf(name, sizeof name, "rank%d", ctx->rank);
    run->profiler = ct_profiler_new(&ctx->profiler_opts, dir, name);
    return run->profiler ? CT_OK : ct_set_error(ct_last_code(), "the profiler: %s", ct_last_error());
}

/* After each training batch. Profiling never stops training: a failure is
 * printed (once per kind of failure is enough: the profiler goes on). */
static void step_profiler(cti_run *run) {
    if (run->profiler && ct_profiler_step(run->profiler) != CT_OK) {
        fprintf(stderr, "ctrial: rank %d: the profiler at batch %lld: %s\n", run->ctx->rank,
                (long long)run->ctx->pos.batches_trained, ct_last_error());
        ct_clear_error();
    }
}

/* The training loader's next batch. A chain of the user's own that is not
 * repeating ends its passes: the next pass begins, as Python's
 * `for epoch ...: for batch in loader` would. */
static int next_training_batch(cti_run *run, ct_value **batch) {
    double t0 = cti_clock_monotonic();
    int got = ct_loader_next(run->train_loader, batch);
    if (got == 0) {
        int rc = ct_loader_reset(run->train_loader);
        got = rc == CT_OK ? ct_loader_next(run->train_loader, batch) : rc;
        if (got == 0) got = ct_set_error(CT_ETRIAL, "the training loader yielded an empty pass");
    }
    cti_time_add(run->report, CT_TIME_DATA, t0);
    return got < 0 ? got : CT_OK;
}

/* Trains until a boundary fires; reports the workload. Sets *train_done at
 * max_length and *fired_val / *fired_ckpt / *fired_report for the other
 * boundaries. A preemption ends the training after the batch: a workload
 * it cuts short is not reported but kept in run->workload, which the exit
 * checkpoint saves and a resumed run continues, so that metrics.jsonl
 * reads as if the run had never stopped. */
static int run_workload(cti_run *run, bool *train_done, bool *fired_val, bool *fired_ckpt, bool *fired_report) {
    ct_context *ctx = run->ctx;
    if (!run->workload && !(run->workload = ct_value_list())) return ct_last_code();
    ct_value *workload = run->workload;
    int rc = CT_OK;
    cti_reducers_reset(ctx->reducers, ctx->n_reducers); /* Determined resets reducers at every workload's start */
    *train_done = *fired_val = *fired_ckpt = *fired_report = false;
    while (rc == CT_OK) {
        int64_t idx = ctx->pos.batches_trained;
        /* Determined sets the current batch before the epoch-start hooks. */
        ctx->pos.current_batch = idx;
        /* Epoch starts (not for an epoch a resumed run enters midway). */
        if (ctx->pos.epoch_len > 0 && idx % ctx->pos.epoch_len == 0)
            CALL_HOOKS(rc, ctx, on_training_epoch_start, idx / ctx->pos.epoch_len);
        ct_value *batch = NULL;
        if (rc == CT_OK) rc = next_training_batch(run, &batch);
        if (rc == CT_OK) rc = train_one(run, batch, workload);
        if (rc == CT_OK) step_profiler(run);
        ct_value_free(batch);
        if (rc == CT_OK) cti_report_tick(run->report);
        if (rc != CT_OK) break;
        rc = agree_on_preemption(run);
        if (rc != CT_OK) break;
        int64_t n = ctx->pos.batches_trained;
        *train_done = n >= ctx->pos.max_length_batches || ctx->opts.test_mode;
        *fired_val = cti_period_fires(&ctx->opts.validation_period, n, ctx->pos.epoch_len);
        *fired_ckpt = cti_period_fires(&ctx->opts.checkpoint_period, n, ctx->pos.epoch_len);
        *fired_report = cti_period_fires(&ctx->opts.reporting_period, n, ctx->pos.epoch_len);
        if (*train_done || *fired_val || *fired_ckpt || *fired_report || run->preempted) break;
    }
    if (rc == CT_OK && (*train_done || *fired_val || *fired_ckpt || *fired_report)) {
        rc = report_training(run, workload);
        ct_value_free(run->workload);
        run->workload = NULL;
    }
    return rc;
}

/* Determined's _ShouldExit: a stop at a boundary, a preemption, or
 * ct_ctx_should_exit. Checkpoints unless it is current (or the trial
 * asked to skip it) and ends training cleanly. */
static int exit_training(cti_run *run) {
    int rc = CT_OK;
    if (run->ctx->exit_requested != 2) rc = checkpoint_boundary(run, CT_WHY_STOP);
    if (rc == CT_OK && g_agreed_signal)
        cti_report_preempted(run->report, g_agreed_signal, cti_checkpointer_last(run->ckpt));
    return rc;
}

/* Determined's _train: workloads until max_length; after each, the fired
 * boundaries in its order (TRAIN, VALIDATE, CHECKPOINT, REPORT), each
 * followed by the stop check; at max_length, validation and a checkpoint
 * unless current. */
static int train_workloads(cti_run *run) {
    const cti_position *pos = &run->ctx->pos;
    bool done = pos->batches_trained >= pos->max_length_batches, stop = false;
    int rc = CT_OK;
    while (rc == CT_OK && !done && !stop) {
        bool val = false, ckpt = false, report = false;
        rc = run_workload(run, &done, &val, &ckpt, &report);
        if (rc == CT_OK) rc = finish_background(run, false);
        /* A preemption is a boundary of its own. */
        if (rc == CT_OK && (done || run->preempted)) rc = stop_at_boundary(run, &stop);
        if (rc == CT_OK && !stop && val && (rc = validate_boundary(run, true)) == CT_OK)
            rc = stop_at_boundary(run, &stop);
        if (rc == CT_OK && !stop && ckpt && (rc = checkpoint_boundary(run, CT_WHY_PERIOD)) == CT_OK)
            rc = stop_at_boundary(run, &stop);
        if (rc == CT_OK && !stop && report) rc = stop_at_boundary(run, &stop);
    }
    if (rc != CT_OK) return rc;
    if (stop) return exit_training(run);
    rc = validate_boundary(run, true);
    return rc == CT_OK ? checkpoint_boundary(run, CT_WHY_END) : rc;
}

static int train(cti_run *run) {
    ct_context *ctx = run->ctx;
    int rc = CT_OK;
    CALL_HOOKS0(rc, ctx, on_training_start);
    if (rc == CT_OK && ctx->opts.step_zero_validation && ctx->pos.batches_trained == 0)
        rc = validate(run); /* never checkpoints */
    if (rc == CT_OK) rc = cti_ranks_agree(start_profiler(run));
    if (rc == CT_OK) rc = train_workloads(run);
    /* ct_ctx_should_exit from the trial or a hook ends training cleanly. */
    if (rc == CT_EEXIT && ctx->exit_requested) {
        ct_clear_error();
        rc = exit_training(run);
    }
    /* A checkpoint still being written is one the run has made. */
    if (rc == CT_OK) rc = finish_background(run, true);
    return rc;
}

/* ---- setting up ------------------------------------------------------------ */

/* For a resume, which checkpoint (checkpointer.h: verified, every file's
 * size and CRC) and its trial state restored before anything runs, so a
 * bad checkpoint is refused before training starts. */
static int find_resume(cti_run *run) {
    int rc = cti_checkpointer_find_resume(run->ckpt);
    const char *dir = cti_checkpointer_resume_dir(run->ckpt);
    if (rc != CT_OK || !dir[0]) return rc;
    rc = cti_run_restore_position(run, cti_checkpointer_resume_meta(run->ckpt), dir);
    if (rc != CT_OK && ct_last_code() != CT_ECHECKPOINT) rc = ct_set_error(CT_ECHECKPOINT, "%s", ct_last_error());
    return rc;
}

/* opts.warm_start, fetched first when it is in a store (into
 * output_dir/.warm-start: not one of this run's checkpoints). */
static int warm_start(cti_run *run) {
    ct_context *ctx = run->ctx;
    const char *from = ctx->opts.warm_start;
    if (!cti_ckpt_is_remote(from)) return cti_context_warm_start(ctx, from);
    char parent[4200], local[4400];
    snprintf(parent, sizeof parent, "%s/.warm-start", ctx->opts.output_dir);
    int rc = cti_checkpointer_fetch(run->ckpt, from, parent, local, sizeof local);
    if (rc != CT_OK) return ct_last_code() == CT_ECHECKPOINT ? rc : ct_set_error(CT_ECHECKPOINT, "warm start: %s",
                                                                                 ct_last_error());
    return cti_context_warm_start(ctx, local);
}

/* A checkpoint's state_dict.pth, loaded (its large tensors mapped from the
 * file copy-on-write: what the restore copies into the trial's tensors is
 * never held twice): NEW in *state, or CT_ECHECKPOINT; CT_ENOMEM where
 * memory ran out, which says nothing against the file. */
static int load_state_file(const char *dir, ct_value **state) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, CT_CKPT_STATE_FILE);
    *state = NULL;
    if (cti_pth_load_mapped(path, state) == CT_OK) return CT_OK;
    if (ct_last_code() == CT_ENOMEM)
        return ct_set_error(CT_ENOMEM, "checkpoint %s: not enough memory to load it (the checkpoint is kept): %s", dir,
                            ct_last_error());
    return ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s", dir, ct_last_error());
}

/* The resumed checkpoint's state: on_checkpoint_load_start, then models,
 * optimizers, schedulers, callbacks and, last, the RNG. */
static int load_resume_state(cti_run *run) {
    const char *dir = cti_checkpointer_resume_dir(run->ckpt);
    ct_value *state = NULL;
    int rc = load_state_file(dir, &state);
    if (rc == CT_OK) CALL_HOOKS(rc, run->ctx, on_checkpoint_load_start, state);
    if (rc == CT_OK) rc = cti_run_restore_state(run, state, dir);
    ct_value_free(state);
    return rc;
}

/* Intra-op threads: num_threads (--threads), else OMP_NUM_THREADS (which
 * libtorch has applied), else the default of base/cpus.h: this rank's share
 * of the CPUs left idle by other programs. The summary says which. */
static int choose_threads(cti_run *run) {
    char *from = run->threads_from;
    size_t len = sizeof run->threads_from;
    int n = run->ctx->opts.num_threads;
    const char *env = getenv("OMP_NUM_THREADS");
    if (n > 0) {
        snprintf(from, len, "num_threads");
    } else if (env && *env) {
        snprintf(from, len, "OMP_NUM_THREADS");
        return CT_OK;
    } else {
        double idle = -1;
        n = cti_cpus_default_threads(ct_dist_local_size(), cti_dist_host_cpus(), &idle);
        if (idle >= 0)
            snprintf(from, len, "default: %.1f of %d CPUs idle, %d rank%s here",
                     idle, cti_cpus_online(), ct_dist_local_size(), ct_dist_local_size() == 1 ? "" : "s");
        else
            snprintf(from, len, "default: %d usable CPUs", cti_cpus_usable());
    }
    return ct_set_num_threads(n) < 0 ? ct_last_code() : CT_OK;
}

/* The global batch size: ct_fit_opts.global_batch_size, else
 * hparams["global_batch_size"]. Required, as Determined requires it: each
 * rank's batch is a share of it, and periods in records are divided by it. */
static int choose_global_batch_size(ct_context *ctx) {
    int64_t g = ctx->opts.global_batch_size;
    const char *from = "ct_fit_opts.global_batch_size";
    if (g == 0) {
        const ct_value *h = ctx->opts.hparams ? ct_value_dict_get(ctx->opts.hparams, "global_batch_size") : NULL;
        if (!h)
            return ct_set_error(CT_ECONFIG, "global_batch_size is not set: give hyperparameters.global_batch_size "
                                            "(in the config, or --hparam global_batch_size=N; for ct_fit, "
                                            "ct_fit_opts.global_batch_size or its hparams)");
        from = "hyperparameters.global_batch_size";
        if (ct_value_get_int(h, &g) != 0)
            return ct_set_error(CT_ECONFIG, "%s is a %s, expected a positive integer", from,
                                ct_value_kind_name(ct_value_kind_of(h)));
    }
    if (g < 1 || g > CT_GLOBAL_BATCH_SIZE_MAX)
        return ct_set_error(CT_ECONFIG, "%s is %lld, expected a positive integer (at most %lld)", from, (long long)g,
                            (long long)CT_GLOBAL_BATCH_SIZE_MAX);
    if (g < ctx->size)
        return ct_set_error(CT_ECONFIG, "global_batch_size %lld is smaller than the number of ranks %d", (long long)g,
                            ctx->size);
    ctx->global_batch_size = g;
    return CT_OK;
}

/* Determined refuses a DataLoader other than its own while the dataset
 * reproducibility checks are on (its _dataset_repro_warning), saying how to
 * turn them off. */
static int user_sampler_refused(const char *fn) {
    return ct_set_error(CT_ETRIAL,
                        "%s returned a loader over the trial's own sampler chain (ct_loader_opts.sampler), whose "
                        "shuffle, sharding and resume position ctrial cannot vouch for; ctrial's chain "
                        "(ct_loader_opts shuffle and seed) gives all three. To use your own, call "
                        "ct_ctx_disable_dataset_reproducibility_checks(ctx) in init",
                        fn);
}

/* Setting up, in Determined's order: the trial (init), its callbacks,
 * on_trial_startup, the training loader; then (setup_epochs) the epoch
 * length every rank shares; then (setup_rest) the validation loader, the
 * resumed checkpoint's state and the metrics log. The ranks agree between
 * the steps, since the middle one is collective. */
static int setup_trial(cti_run *run) {
    ct_context *ctx = run->ctx;
    const ct_trial *t = ctx->trial;
    if (ctx->opts.device && ct_device_parse(ctx->opts.device, &ctx->device) != 0) return CT_ECONFIG;
    /* "cuda" without an index under mpirun: each local rank takes its own
     * GPU; with more ranks than GPUs they take turns (mpirun -np 2 on one
     * GPU: both on cuda:0, their CUDA tensors through host memory). */
    if (ctx->device.type == CT_CUDA && ctx->opts.device && !strchr(ctx->opts.device, ':')) {
        int gpus = ct_cuda_device_count();
        ctx->device.index = gpus > 0 ? ctx->local_rank % gpus : ctx->local_rank;
    }
    if (choose_threads(run) != CT_OK) return ct_last_code();
    ctx->trial_seed = ctx->opts.seed;
    int rc = choose_global_batch_size(ctx);
    if (rc != CT_OK) return rc;
    ctx->per_slot_batch_size = ctx->global_batch_size / ctx->size;
    rc = records_to_batches(ctx, &ctx->opts.max_length, "max_length");
    if (rc == CT_OK) rc = records_to_batches(ctx, &ctx->opts.validation_period, "validation period");
    if (rc == CT_OK) rc = records_to_batches(ctx, &ctx->opts.checkpoint_period, "checkpoint period");
    if (rc == CT_OK) rc = records_to_batches(ctx, &ctx->opts.reporting_period, "reporting period");
    if (rc == CT_OK && cti_checkpointer_open_storage(run->ckpt) != CT_OK)
        rc = ct_set_error(CT_ECONFIG, "checkpoint_storage: %s", ct_last_error());
    if (rc == CT_OK) rc = find_resume(run);
    if (rc == CT_OK) rc = cti_checkpointer_guard(run->ckpt);
    if (rc == CT_OK && ctx->rank == 0) rc = cti_make_dirs(ctx->opts.output_dir, "output directory");
    if (rc == CT_OK) rc = cti_context_build_trial(ctx);
    /* shard_optimizer: each rank's share of every optimizer's parameters,
     * before any state is loaded into them (a resume, a warm start). */
    if (rc == CT_OK) rc = cti_context_shard_optimizers(ctx);
    /* optimizations.mixed_precision O1: AMP as ct_ctx_use_amp's defaults,
     * unless the trial set AMP up itself in init. */
    if (rc == CT_OK && ctx->opts.mixed_precision && !ctx->amp && !ctx->scaler) rc = ct_ctx_use_amp(ctx, NULL);
    if (rc == CT_OK) rc = cti_ema_start(ctx); /* ct_ctx_add_ema(ctx, NULL, ...): the models are built now */
    if (rc != CT_OK) return rc;
    ct_clear_error(); /* each call into the trial's code starts with no error pending (error.h) */
    if (t->build_callbacks && t->build_callbacks(ctx->self, ctx) != 0) return cti_context_trial_failed("build_callbacks");
    if ((rc = cti_context_hparam_failure(ctx)) != CT_OK) return rc;
    const char *resume_dir = cti_checkpointer_resume_dir(run->ckpt);
    CALL_HOOKS(rc, ctx, on_trial_startup, ctx->pos.batches_trained, resume_dir[0] ? resume_dir : NULL);
    if (rc != CT_OK) return rc;

    ct_clear_error();
    run->train_loader = t->build_training_data_loader(ctx->self, ctx);
    ctx->training = true; /* what belongs in init is refused from now on */
    if (!run->train_loader) return cti_context_trial_failed("build_training_data_loader");
    int64_t records = ct_loader_num_samples(run->train_loader);
    if (ctx->opts.records_per_epoch > 0 && records >= 0 && records != ctx->opts.records_per_epoch && ctx->rank == 0 &&
        !ctx->opts.quiet)
        fprintf(stderr, "ctrial: warning: records_per_epoch is %lld, but the training data holds %lld records: an "
                "epoch here is the data's %lld (Determined would have counted %lld)\n",
                (long long)ctx->opts.records_per_epoch, (long long)records, (long long)records,
                (long long)ctx->opts.records_per_epoch);
    if (ctx->repro_checks && cti_loader_is_iterable(run->train_loader))
        return ct_set_error(CT_ETRIAL, "build_training_data_loader returned an iterable loader, whose resume is "
                                       "only as exact as its iterator is deterministic: call "
                                       "ct_ctx_disable_dataset_reproducibility_checks in init to use it");
    if (ctx->repro_checks && cti_loader_has_user_sampler(run->train_loader))
        return user_sampler_refused("build_training_data_loader");
    if (ctx->auto_to_device) rc = cti_loader_use_device(run->train_loader, ctx->device);
    /* At the chain's start for now: a resumed run's position is checked
     * against max_length first (setup_epochs), then the loader moves there. */
    if (rc == CT_OK) rc = cti_loader_use_training_chain(run->train_loader, ctx->rank, ctx->size, 0);
    if (rc == CT_OK) ctx->pos.epoch_len = ct_loader_len(run->train_loader);
    return rc == CT_OK ? cti_context_hparam_failure(ctx) : rc;
}

/* Every rank counts epochs by rank 0's training loader (Determined
 * broadcasts the chief's length): with records that do not divide evenly
 * among the ranks their own lengths differ, and epoch boundaries (and the
 * periods in epochs that fire there) must fall on the same batch on every
 * rank. */
static int setup_epochs(cti_run *run) {
    ct_context *ctx = run->ctx;
    int rc = ctx->size > 1 ? ct_dist_broadcast_bytes(&ctx->pos.epoch_len, sizeof ctx->pos.epoch_len, 0) : CT_OK;
    if (rc != CT_OK) return rc;
    if (ctx->pos.epoch_len == 0)
        return ct_set_error(CT_ETRIAL, "the training loader has no batches per epoch (rank 0's length is 0)");
    const ct_period *m = &ctx->opts.max_length;
    if (ctx->pos.epoch_len < 0) {
        /* An iterable loader: Determined's epochs never end (sys.maxsize). */
        const char *in_epochs = m->unit == CT_EPOCHS ? "max_length"
                              : ctx->opts.validation_period.unit == CT_EPOCHS ? "the validation period"
                              : ctx->opts.checkpoint_period.unit == CT_EPOCHS ? "the checkpoint period"
                              : ctx->opts.reporting_period.unit == CT_EPOCHS ? "the reporting period" : NULL;
        if (in_epochs)
            return ct_set_error(CT_ECONFIG, "%s is in epochs, but the training loader has no length (an iterable "
                                            "loader): give it in batches or records", in_epochs);
        ctx->pos.max_length_batches = m->n;
    } else if (m->unit == CT_EPOCHS && m->n > INT64_MAX / ctx->pos.epoch_len) {
        return ct_set_error(CT_ECONFIG,
                            "max_length is %lld epochs of %lld batches: more than %lld batches, the most ctrial "
                            "counts", (long long)m->n, (long long)ctx->pos.epoch_len, (long long)INT64_MAX);
    } else {
        ctx->pos.max_length_batches = m->unit == CT_EPOCHS ? m->n * ctx->pos.epoch_len : m->n;
    }
    /* A resumed run: its position checked against this run, then the
     * training loader moved there (unless the checkpoint is at or past
     * max_length: nothing will be trained). */
    rc = cti_run_check_position(run);
    if (ctx->pos.initial_batch >= ctx->pos.max_length_batches) return rc;
    if (rc == CT_OK && run->resume_position > 0) rc = ct_loader_set_position(run->train_loader, run->resume_position);
    /* A user chain with a skip of its own starts there; anywhere but this
     * run's start it would train on other records than an uninterrupted run. */
    if (rc == CT_OK && ct_loader_position(run->train_loader) != run->resume_position)
        rc = ct_set_error(CT_ETRIAL,
                          "the training loader's own sampler chain starts at batch %lld (its ct_sampler_skip), but "
                          "this run starts at batch %lld: skip ct_ctx_initial_batch(ctx) batches (Determined's "
                          "SkipBatchSampler(context.get_initial_batch())), or none and the loop positions the chain",
                          (long long)ct_loader_position(run->train_loader), (long long)run->resume_position);
    return rc;
}

static int setup_rest(cti_run *run) {
    ct_context *ctx = run->ctx;
    const ct_trial *t = ctx->trial;
    int rc = CT_OK;
    ct_clear_error();
    run->val_loader = t->build_validation_data_loader(ctx->self, ctx);
    if (!run->val_loader) return cti_context_trial_failed("build_validation_data_loader");
    if (ctx->repro_checks && cti_loader_is_iterable(run->val_loader))
        return ct_set_error(CT_ETRIAL, "build_validation_data_loader returned an iterable loader: call "
                                       "ct_ctx_disable_dataset_reproducibility_checks in init to use it");
    if (ctx->repro_checks && cti_loader_has_user_sampler(run->val_loader))
        return user_sampler_refused("build_validation_data_loader");
    ctx->val_loaders_closed = true;
    for (size_t k = 0; k <= ctx->n_val_loaders && rc == CT_OK; k++) {
        ct_loader *l = k == 0 ? run->val_loader : ctx->val_loaders[k - 1].loader;
        if (ctx->repro_checks && k > 0 && (cti_loader_is_iterable(l) || cti_loader_has_user_sampler(l)))
            return ct_set_error(CT_ETRIAL, "validation loader '%s' is an iterable loader or has its own sampler: "
                                "call ct_ctx_disable_dataset_reproducibility_checks in init to use it",
                                ctx->val_loaders[k - 1].name);
        if (t->evaluate_batch && ctx->auto_to_device) rc = cti_loader_use_device(l, ctx->device);
        if (rc == CT_OK && t->evaluate_batch) rc = cti_loader_use_validation_shard(l, ctx->rank, ctx->size);
    }
    if (rc == CT_OK) rc = draw_iterator_seed(); /* Determined's iter(self.training_loader) */
    if (rc != CT_OK) return rc;
    bool resumed = cti_checkpointer_resume_dir(run->ckpt)[0] != '\0';
    if (resumed) rc = load_resume_state(run);
    /* A warm start is a fresh trial from another run's trained state (a
     * resume of this run's own checkpoints wins: it is the same trial). */
    else if (ctx->opts.warm_start && ctx->opts.warm_start[0]) rc = warm_start(run);
    if (rc == CT_OK) rc = cti_context_hparam_failure(ctx);
    if (rc == CT_OK && resumed) warn_changed_hparams(run);
    /* The metrics log is opened (and, on resume, cut back to the checkpoint)
     * only once the checkpoint has been accepted. */
    if (rc == CT_OK && ctx->rank == 0 && !run->evaluate) rc = cti_report_open(run->report, resumed);
    return rc;
}

static int setup(cti_run *run) {
    int rc = cti_ranks_agree(setup_trial(run));
    if (rc == CT_OK) rc = cti_ranks_agree(setup_epochs(run));
    if (rc == CT_OK) rc = cti_ranks_agree(setup_rest(run));
    return rc;
}

/* The start-up summary (report.h) from what the set-up found. */
static void report_setup(cti_run *run) {
    const ct_context *ctx = run->ctx;
    char transport[256] = "";
    /* Under mpirun, how the first model's gradients are averaged. */
    if (ctx->size > 1 && ctx->n_syncs > 0) {
        char why[200];
        const char *how = cti_grad_sync_transport(ctx->syncs[0], why, sizeof why);
        snprintf(transport, sizeof transport, " (gradients: %s%s%s%s)", how, why[0] ? ", " : "", why,
                 ctx->shards ? "; optimizer state sharded" : "");
    }
    int64_t params = 0;
    for (size_t m = 0; m < ctx->n_models; m++) params += ct_nn_num_param_elements(ctx->models[m]);
    cti_setup_info si = {
        .trial_name = ctx->trial->name,
        .threads_from = run->threads_from,
        .transport = transport,
        .n_models = ctx->n_models,
        .parameters = params,
        .global_batch_size = ctx->global_batch_size,
        .train_records = run->train_loader ? ct_loader_num_samples(run->train_loader) : -1,
        .val_records = run->val_loader ? ct_loader_num_samples(run->val_loader) : -1,
        .resume_dir = cti_checkpointer_resume_dir(run->ckpt),
        .deterministic = ct_get_deterministic(),
    };
    cti_report_setup(run->report, &si);
}

/* ---- evaluating a checkpoint (ct_evaluate) ---------------------------------- */

/* ct_evaluate(..., "best"): the checkpoint of the checkpoint directory whose
 * searcher metric is best, as ctrial-ckpt best finds it. */
static int find_best(cti_run *run) {
    const ct_fit_opts *o = &run->ctx->opts;
    const char *metric = o->searcher_metric ? o->searcher_metric : "validation_loss";
    if (ct_ckpt_best(cti_checkpointer_dir(run->ckpt), metric, o->smaller_is_better, run->best_path,
                     sizeof run->best_path, NULL) != CT_OK)
        return ct_set_error(CT_ECHECKPOINT, "ct_evaluate: best: %s", ct_last_error());
    run->ctx->opts.resume = run->best_path;
    return CT_OK;
}

/* One validation of the restored checkpoint: its metrics printed, and, on
 * rank 0, one line appended to evaluation.jsonl (the run's metrics.jsonl,
 * TensorBoard files and checkpoints stay as they are). */
static int evaluate_checkpoint(cti_run *run) {
    ct_context *ctx = run->ctx;
    int rc = validate(run);
    if (rc != CT_OK || ctx->rank != 0) return rc;
    const char *ckpt = cti_checkpointer_resume_dir(run->ckpt);
    json_t *line = json_object();
    json_t *metrics = cti_json_from_value(run->last_validation);
    if (!line || !metrics || json_object_set_new(line, "checkpoint", json_string(ckpt)) ||
        json_object_set_new(line, "batches", json_integer(ctx->pos.batches_trained)) ||
        json_object_set_new(line, "metrics", metrics)) {
        json_decref(line);
        return ct_set_error(CT_ENOMEM, "ct_evaluate: out of memory");
    }
    char *text = cti_json_dumps(line, JSON_COMPACT);
    json_decref(line);
    char path[4200];
    snprintf(path, sizeof path, "%s/evaluation.jsonl", ctx->opts.output_dir);
    FILE *f = text ? fopen(path, "a") : NULL;
    bool ok = f && fprintf(f, "%s\n", text) > 0;
    if (f && fclose(f) != 0) ok = false;
    free(text);
    if (!ok) return ct_set_error(CT_EIO, "ct_evaluate: cannot append to %s", path);
    printf("evaluation of %s (batch %lld):", ckpt, (long long)ctx->pos.batches_trained);
    for (size_t i = 0; i < ct_value_len(run->last_validation); i++) {
        const char *key = NULL;
        double v = 0;
        const ct_value *m = ct_value_dict_at(run->last_validation, i, &key, NULL);
        if (ct_value_get_float(m, &v) == CT_OK) printf(" %s %.6g", key, v);
        ct_clear_error();
    }
    printf("\n");
    fflush(stdout);
    return CT_OK;
}

/* ---- the entry point ------------------------------------------------------- */

static int fit_run(const ct_trial *trial, const ct_fit_opts *o, const char *evaluate, cti_fit_outcome *out);

int ct_fit(const ct_trial *trial, const ct_fit_opts *o) { return fit_run(trial, o, NULL, NULL); }

int cti_fit_ex(const ct_trial *trial, const ct_fit_opts *o, cti_fit_outcome *out) {
    return fit_run(trial, o, NULL, out);
}

int ct_evaluate(const ct_trial *trial, const ct_fit_opts *o, const char *checkpoint, ct_value **metrics) {
    if (metrics) *metrics = NULL;
    if (!checkpoint || !checkpoint[0]) return ct_set_error(CT_EINVAL, "ct_evaluate: no checkpoint to evaluate");
    cti_fit_outcome out;
    int rc = fit_run(trial, o, checkpoint, &out);
    if (rc == CT_OK && metrics) *metrics = out.last_validation;
    else ct_value_free(out.last_validation);
    return rc;
}

/* What a run owns beside the context, freed after it (the trial's destroy
 * runs first, as it always has: it may still use what it wrapped). */
static void free_run(cti_run *run) {
    cti_reporter_free(run->report);
    cti_checkpointer_free(run->ckpt);
    ct_loader_free(run->train_loader);
    ct_loader_free(run->val_loader);
    ct_value_free(run->last_validation);
    ct_value_free(run->workload);
}

/* ct_fit, or with `evaluate` (a checkpoint) ct_evaluate: the same set-up
 * from that checkpoint, then one validation instead of training. */
static int fit_run(const ct_trial *trial, const ct_fit_opts *o, const char *evaluate, cti_fit_outcome *out) {
    if (out) *out = (cti_fit_outcome){.last_validation_bt = -1};
    if (!trial || !o) return ct_set_error(CT_EINVAL, "ct_fit: %s is NULL", trial ? "opts" : "trial");
    /* The caller's options as this library's struct: a program built
     * against an older ctrial gets the defaults of the options it lacks. */
    ct_fit_opts opts;
    int rc = cti_fit_opts_take(o, &opts);
    if (rc != CT_OK) return rc;
    if (evaluate) {
        opts.resume = evaluate; /* restored as a resume restores it; "best" is found below */
        opts.overwrite = false;
    }
    o = &opts;
    rc = check_trial(trial);
    if (rc == CT_OK) rc = check_opts(o);
    if (rc != CT_OK) return rc;
    rc = ct_dist_init();
    if (rc != CT_OK) return rc;
    cti_run run_ = {0}, *run = &run_;
    ct_context *ctx = run->ctx = cti_context_new(trial, o);
    if (!ctx) return ct_last_code();
    ctx->rank = ct_dist_rank();
    ctx->size = ct_dist_size();
    ctx->local_rank = ct_dist_local_rank();
    /* The context's options from here on: the periods in records become
     * batches in them during the set-up. */
    run->ckpt = cti_checkpointer_new(&ctx->opts, ctx->rank);
    run->report = cti_reporter_new(&(cti_reporter_opts){.opts = &ctx->opts, .pos = &ctx->pos,
                                                        .tensorboard = &ctx->tensorboard, .device = &ctx->device,
                                                        .rank = ctx->rank, .size = ctx->size});
    if (!run->ckpt || !run->report) {
        rc = ct_last_code();
        free_run(run);
        ct_ctx_free(ctx);
        return rc;
    }
    ctx->reporter = run->report;
    run->evaluate = evaluate;
    if (evaluate && !strcmp(evaluate, "best")) rc = find_best(run);
    saved_signals saved;
    catch_stop_signals(&saved);
    /* The collective timeout for this fit (0: as it is: CTRIAL_DIST_TIMEOUT
     * or the default), and what the loop is at for its message. */
    double timeout_before = ct_dist_timeout();
    if (o->dist_timeout != 0 && ct_dist_set_timeout(o->dist_timeout) != CT_OK)
        rc = ct_set_error(CT_ECONFIG, "ct_fit_opts.dist_timeout is %g: expected seconds, a number >= 0 (0: "
                          "CTRIAL_DIST_TIMEOUT or 30 minutes; infinity: none)", o->dist_timeout);
    /* Deterministic algorithms for this fit (process-wide: given back at
     * its end, as the collective timeout). */
    bool deterministic_before = ct_get_deterministic();
    if (rc == CT_OK && o->deterministic) rc = ct_set_deterministic(true);
    cti_dist_watch_progress(&ctx->pos.batches_trained);
    if (o->tune_malloc) cti_heap_tune_for_training(); /* src/base/heap.c says why */
    /* A stop signal before training (caught by ct_main since its start, or
     * during the set-up) stops the run there: nothing to save, and a resume
     * goes on from where the run was. Agreed before the set-up and again
     * after it. */
    bool set_up = false;
    if (rc == CT_OK) rc = agree_on_preemption(run);
    if (rc == CT_OK && !run->preempted) {
        set_up = true;
        rc = setup(run);
        if (rc == CT_OK && run->evaluate && !cti_checkpointer_resume_dir(run->ckpt)[0])
            rc = ct_set_error(CT_ECHECKPOINT, "ct_evaluate: no checkpoint in %s to evaluate",
                              cti_checkpointer_dir(run->ckpt));
        if (rc == CT_OK) rc = cti_ranks_agree(broadcast_models(ctx, false));
        if (rc == CT_OK) rc = cti_ranks_agree(start_grad_sync(ctx));
        if (rc == CT_OK && ctx->opts.cuda_graphs) rc = cti_ranks_agree(cti_graph_step_new(ctx, &ctx->graph));
        if (rc == CT_OK && !run->evaluate) report_setup(run);
        if (rc == CT_OK) rc = agree_on_preemption(run);
    }
    if (rc == CT_OK && run->preempted)
        cti_report_stopped_before_training(run->report, g_agreed_signal, cti_checkpointer_resume_dir(run->ckpt));
    else if (rc == CT_OK) rc = run->evaluate ? evaluate_checkpoint(run) : train(run);
    ct_profiler_free(run->profiler); /* writes a window still recording */
    run->profiler = NULL;
    /* Shutdown hooks run in reverse, also after a failure; the first
     * failure is the one reported (its message kept across the hooks, each
     * of which starts with the error cleared). */
    char failure[2048] = "";
    if (rc != CT_OK) snprintf(failure, sizeof failure, "%s", ct_last_error());
    for (size_t i = ctx->n_callbacks; i-- > 0;) {
        const ct_callback *cb = &ctx->callbacks[i];
        if (!cb->on_trial_shutdown) continue;
        ct_clear_error();
        if (cb->on_trial_shutdown(cb->self, ctx) != 0 && rc == CT_OK) rc = hook_failed(cb, "on_trial_shutdown");
    }
    if (failure[0]) ct_set_error(rc, "%s", failure);
    /* The last lines say whether training ran to its end, and if not, why. */
    if (rc == CT_OK && set_up && !run->evaluate) {
        cti_summary_info si = {.signal = g_agreed_signal, .exit_requested = ctx->exit_requested != 0,
                               .checkpoint_dir = cti_checkpointer_dir(run->ckpt)};
        si.has_best = cti_checkpointer_best(run->ckpt, &si.best_metric);
        cti_report_summary(run->report, &si);
    }
    char saved_msg[2048];
    snprintf(saved_msg, sizeof saved_msg, "%s", ct_last_error());
    if (out && set_up) {
        out->batches_trained = ctx->pos.batches_trained;
        out->last_validation_bt = run->last_validation ? ctx->pos.last_validation_bt : -1;
        out->last_validation = run->last_validation; /* taken */
        run->last_validation = NULL;
    }
    cti_graph_step_free(ctx->graph); /* before the models and optimizers its graph uses */
    ctx->graph = NULL;
    cti_dist_watch_progress(NULL);
    ctx->reporter = NULL;
    ct_ctx_free(ctx);
    free_run(run);
    ct_dist_set_timeout(timeout_before);
    if (o->deterministic && !deterministic_before) ct_set_deterministic(false);
    restore_signals(&saved);
    if (rc != CT_OK) ct_set_error(rc, "%s", saved_msg);
    return rc;
}

/* ---- using a checkpoint without training ------------------------------------ */

int ct_load_trial_from_checkpoint(const char *dir, const ct_trial *trial, const ct_value *hparams,
                                  const char *device, ct_context **out) {
    if (out) *out = NULL;
    if (!dir || !trial || !out) return ct_set_error(CT_EINVAL, "ct_load_trial_from_checkpoint: an argument is NULL");
    if (!trial->init && !trial->build_model)
        return ct_set_error(CT_ETRIAL, "%s: init is required", trial->name ? trial->name : "trial");
    if (cti_ckpt_is_remote(dir)) {
        /* In a store: fetched into a folder of its own for the load, then removed. */
        const char *tmpdir = getenv("TMPDIR");
        char parent[4096], local[4400];
        snprintf(parent, sizeof parent, "%s/ctrial-ckpt-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
        if (!mkdtemp(parent)) return ct_set_error(CT_EIO, "ct_load_trial_from_checkpoint: cannot make %s", parent);
        int rc = cti_ckpt_fetch_url(dir, NULL, parent, local, sizeof local);
        if (rc == CT_OK) rc = ct_load_trial_from_checkpoint(local, trial, hparams, device, out);
        cti_remove_tree(parent);
        return rc;
    }
    int rc = ct_ckpt_verify(dir);
    json_t *meta = rc == CT_OK ? cti_ckpt_read_metadata(dir) : NULL;
    if (!meta) return ct_last_code();
    ct_value *saved_hparams = cti_value_from_json(json_object_get(meta, "hparams"));
    /* The experiment config, or ct_fit's own data config, it trained with. */
    json_t *config_json = json_object_get(meta, "experiment_config");
    json_t *data_json = config_json ? NULL : json_object_get(meta, "data_config");
    ct_value *saved_config = config_json ? cti_value_from_json(config_json)
                           : data_json   ? cti_value_from_json(data_json)
                                         : NULL;
    if ((config_json || data_json) && !saved_config) rc = ct_last_code();
    ct_fit_opts o = ct_fit_defaults();
    o.hparams = hparams ? hparams : saved_hparams;
    o.experiment_config = config_json ? saved_config : NULL;
    o.data = config_json ? ct_value_dict_get(saved_config, "data") : saved_config;
    o.device = device;
    o.quiet = true;
    o.seed = (uint64_t)json_integer_value(json_object_get(meta, "trial_seed"));
    ct_context *ctx = rc == CT_OK ? cti_context_new(trial, &o) : NULL;
    if (!ctx && rc == CT_OK) rc = ct_last_code();
    if (rc == CT_OK) {
        ctx->saved_hparams = saved_hparams; /* o.hparams may point into it */
        saved_hparams = NULL;
        ctx->saved_config = saved_config;  /* ctx->opts.experiment_config or .data */
        saved_config = NULL;
        ctx->trial_seed = o.seed;
        if (o.device && ct_device_parse(o.device, &ctx->device) != 0) rc = CT_ECONFIG;
    }
    if (rc == CT_OK) rc = cti_context_build_trial(ctx);
    if (rc == CT_OK) rc = cti_context_hparam_failure(ctx);
    ct_value *state = NULL;
    if (rc == CT_OK) rc = load_state_file(dir, &state);
    if (rc == CT_OK) rc = cti_context_restore_models(ctx, state, dir);
    ct_value_free(state);
    if (rc == CT_OK) set_train_mode(ctx, false);
    json_decref(meta);
    ct_value_free(saved_hparams);
    ct_value_free(saved_config);
    if (rc != CT_OK) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        ct_ctx_free(ctx);
        return ct_set_error(rc, "%s", msg);
    }
    *out = ctx;
    return CT_OK;
}
