/* src/fit/state.c — what a checkpoint holds for a context, and putting it
 * back (state.h). state_dict.pth follows Determined's layout:
 *
 *     {"models_state_dict":        [model.state_dict(), ...],      wrap order
 *      "optimizers_state_dict":    [optimizer.state_dict(), ...],
 *      "lr_schedulers_state_dict": [scheduler.state_dict(), ...],
 *      "callbacks":                {name: callback.state_dict()},
 *      "rng_state":                {"cpu_rng_state": uint8 tensor,
 *                                   "gpu_rng_states": [one per CUDA device]},
 *      "scaler_state_dict":        GradScaler.state_dict()      only with fp16 AMP
 *      "accumulated_gradients":    [{param name: grad}, ...]}   only mid-aggregation
 *
 * and metadata.json carries the loop's own state ("trial_state") beside
 * Determined's keys, so a resumed run continues exactly where this one was. */
#include "fit/state.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "base/json_write.h"
#include "base/value_json.h"
#include "ckpt/ckpt.h"
#include "dist/shard.h"
#include "dist/value_wire.h"
#include "ctrial/ctrial.h"

/* ---- saving ------------------------------------------------------------------ */

static ct_value *rng_state(void) {
    ct_value *rng = ct_value_dict();
    ct_device cpu = {CT_CPU, 0};
    ct_tensor *t = ct_rng_get_state(cpu);
    if (!t || ct_value_dict_set(rng, "cpu_rng_state", ct_value_tensor(t)) != 0) goto fail;
    int n = ct_cuda_device_count();
    if (n > 0) {
        ct_value *gpus = ct_value_list();
        ct_value_dict_set(rng, "gpu_rng_states", gpus);
        for (int i = 0; i < n; i++) {
            ct_device dev = {CT_CUDA, i};
            ct_tensor *g = ct_rng_get_state(dev);
            if (!g || ct_value_list_append(gpus, ct_value_tensor(g)) != 0) goto fail;
        }
    }
    return rng;
fail:
    ct_value_free(rng);
    return NULL;
}

/* Adds key -> value to dict; false (value freed) when value is NULL. */
static bool put(ct_value *dict, const char *key, ct_value *value) {
    return value && ct_value_dict_set(dict, key, value) == 0;
}

/* Parameter p's accumulated gradient as a NEW tensor for the checkpoint,
 * or NULL (no error) when it has none. One rank: a copy of its .grad.
 * Several: the mean over ranks (zeros for a rank without one), NULL when no
 * rank has one. Each rank accumulated its own gradients since the last step,
 * and the step will average over ranks: mean_r(a_r + g_r) =
 * mean_r(a_r) + mean_r(g_r), so every rank resuming with the mean (on any
 * number of ranks) continues the same step. Collective: every rank calls it
 * for the same parameters in the same order; a local failure ends the job
 * (the others would wait in the collective forever). */
static ct_tensor *accumulated_gradient(ct_context *ctx, ct_tensor *p, const char *name) {
    int64_t has = ct_has_grad(p);
    if (ctx->size == 1) return has ? ct_keep(ct_clone(ct_grad(p))) : NULL;
    if (ct_dist_allreduce_i64(&has, 1, CT_DIST_MAX) != CT_OK) goto abort;
    if (!has) return NULL;
    ct_tensor *g = ct_keep(ct_has_grad(p) ? ct_clone(ct_grad(p)) : ct_zeros_like(p));
    if (g && ct_dist_allreduce(g, CT_DIST_AVG) == CT_OK) return g;
    ct_tensor_free(g);
abort:;
    char why[1024];
    snprintf(why, sizeof why, "averaging the accumulated gradient of '%s' for a checkpoint: %s", name, ct_last_error());
    ct_dist_abort(CT_EXIT_DIST, why);
    return NULL;
}

/* A checkpoint between optimizer steps (gradient aggregation) keeps the
 * gradients accumulated so far, per model by parameter name. Called before
 * anything in the state that may fail on one rank alone (it is
 * collective). */
static ct_value *accumulated_gradients(ct_context *ctx) {
    ct_value *models = ct_value_list();
    bool ok = models != NULL;
    for (size_t m = 0; m < ctx->n_models; m++) {
        ct_value *grads = ct_value_dict();
        ok = ok && ct_value_list_append(models, grads) == 0;
        for (size_t i = 0; i < ct_nn_num_params(ctx->models[m]); i++) {
            const char *name = NULL;
            ct_tensor *p = ct_nn_param_at(ctx->models[m], i, &name);
            /* Every rank takes part in every parameter's collective, even
             * after a local failure here. */
            ct_tensor *g = accumulated_gradient(ctx, p, name ? name : "?");
            if (g) ok = ok && ct_value_dict_set(grads, name, ct_value_tensor(g)) == 0;
        }
    }
    if (ok) return models;
    ct_value_free(models);
    return NULL;
}

/* The training metrics of a workload not reported yet (a stop between two
 * reporting boundaries): every rank's per-batch dicts and records, so that
 * the resumed run reports the workload whole, as an uninterrupted run
 * would. Collective under mpirun (every rank holds the same number of
 * batches). NEW {"world_size", "ranks": [{"batches", "records"}...]} on
 * rank 0, NULL elsewhere; NULL + error on failure (*failed set). */
static ct_value *pending_workload(cti_run *run, bool *failed) {
    ct_context *ctx = run->ctx;
    ct_value *mine = ct_value_dict();
    ct_value_dict_set(mine, "batches", ct_value_copy(run->workload, false));
    ct_value_dict_set(mine, "records", ct_value_int(ctx->pos.records_pending));
    ct_value *all = NULL;
    int rc = cti_value_gather(mine, 0, &all);
    ct_value_free(mine);
    *failed = rc != CT_OK;
    if (rc != CT_OK || !all) return NULL;
    ct_value *pending = ct_value_dict();
    ct_value_dict_set(pending, "world_size", ct_value_int(ctx->size));
    ct_value_dict_set(pending, "ranks", all);
    return pending;
}

/* Optimizer i's state_dict(). Sharded (shard_optimizer): the whole of it,
 * every rank's share gathered on rank 0 in torch's layout (the others'
 * tensors in a spill file in the checkpoint directory, shard.h, so that
 * rank 0 holds no more of the state in memory than its share), and None
 * on the other ranks, which write nothing; collective then, so every rank
 * calls it for every optimizer in order. NEW, or NULL + error. */
static ct_value *optimizer_state(cti_run *run, size_t i) {
    ct_context *ctx = run->ctx;
    const struct cti_shard *shard = ctx->shards ? ctx->shards[i] : NULL;
    if (!shard) return ct_optim_state_dict(ctx->optims[i]);
    const char *dir = ctx->rank == 0 ? cti_checkpointer_dir(run->ckpt) : NULL;
    if (dir && cti_make_dirs(dir, "checkpoint directory") != CT_OK) {
        dir = NULL; /* kept in memory: the checkpoint's write says why */
        ct_clear_error();
    }
    ct_value *whole = NULL;
    if (cti_shard_state_dict(shard, ctx->optims[i], 0, dir, &whole) != CT_OK) return NULL;
    return ctx->rank == 0 ? whole : ct_value_none();
}

ct_value *cti_run_state(cti_run *run) {
    ct_context *ctx = run->ctx;
    /* First: collective under mpirun. The last batch trained did not step
     * the optimizers: the window's gradients are part of the state. */
    ct_value *grads = NULL;
    if (!cti_context_is_step_batch(ctx, ctx->pos.batches_trained - 1)) {
        grads = accumulated_gradients(ctx);
        if (!grads) return NULL;
    }
    bool failed = false;
    ct_value *pending = ct_value_len(run->workload) > 0 ? pending_workload(run, &failed) : NULL;
    if (failed) {
        ct_value_free(grads);
        return NULL;
    }
    ct_value *state = ct_value_dict();
    ct_value *models = ct_value_list(), *optims = ct_value_list(), *scheds = ct_value_list(),
             *callbacks = ct_value_dict();
    bool ok = put(state, "models_state_dict", models) && put(state, "optimizers_state_dict", optims) &&
              put(state, "lr_schedulers_state_dict", scheds) && put(state, "callbacks", callbacks);
    for (size_t i = 0; ok && i < ctx->n_models; i++) ok = ct_value_list_append(models, ct_nn_state_dict(ctx->models[i])) == 0;
    for (size_t i = 0; ok && i < ctx->n_optims; i++) ok = ct_value_list_append(optims, optimizer_state(run, i)) == 0;
    for (size_t i = 0; ok && i < ctx->n_scheds; i++)
        ok = ct_value_list_append(scheds, ct_sched_state_dict(ctx->scheds[i].sched)) == 0;
    for (size_t i = 0; ok && i < ctx->n_callbacks; i++) {
        const ct_callback *cb = &ctx->callbacks[i];
        if (!cb->state_dict) continue;
        ct_clear_error(); /* NULL is "nothing to save" unless the callback set an error (error.h) */
        ct_value *s = cb->state_dict(cb->self);
        if (!s) {
            if (ct_last_code() != CT_OK) {
                ct_set_error(ct_last_code(), "callback '%s' state_dict: %s", cb->name, ct_last_error());
                ok = false;
            }
            continue;
        }
        ok = ct_value_dict_set(callbacks, cb->name, s) == 0;
    }
    if (ok) ok = put(state, "rng_state", rng_state());
    if (ok && ctx->scaler) ok = put(state, "scaler_state_dict", ct_grad_scaler_state_dict(ctx->scaler));
    if (ok && grads) {
        ok = put(state, "accumulated_gradients", grads);
        grads = NULL;
    }
    if (ok && pending) {
        ok = put(state, "pending_training_metrics", pending);
        pending = NULL;
    }
    ct_value_free(grads);
    ct_value_free(pending);
    if (ok) return state;
    ct_value_free(state);
    return NULL;
}

const char *cti_ckpt_why_name(cti_ckpt_why why) {
    static const char *const names[] = {"period", "policy", "end", "stop"};
    return names[why];
}

json_t *cti_run_metadata(cti_run *run) {
    ct_context *ctx = run->ctx;
    double best = 0;
    bool has_best = cti_checkpointer_best(run->ckpt, &best);
    char framework[64];
    snprintf(framework, sizeof framework, "torch-%s", ct_torch_version());
    int64_t bt = ctx->pos.batches_trained;
    bool validated_now = run->last_validation && ctx->pos.last_validation_bt == bt;
    json_t *trial_state = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:b, s:s?, s:I, s:i}",
        "batches_trained", (json_int_t)bt, "records_trained", (json_int_t)ctx->pos.records_trained,
        "epoch_len", (json_int_t)ctx->pos.epoch_len, "last_validation_batches", (json_int_t)ctx->pos.last_validation_bt,
        "last_checkpoint_batches", (json_int_t)bt, "loader_position",
        (json_int_t)(run->train_loader ? ct_loader_position(run->train_loader) : bt), "global_batch_size",
        (json_int_t)ctx->global_batch_size, "best_metric", has_best ? json_real(best) : json_null(),
        "smaller_is_better", ctx->opts.smaller_is_better, "searcher_metric", ctx->opts.searcher_metric,
        "aggregation_frequency", (json_int_t)ctx->aggregation_frequency, "world_size", ctx->size);
    json_object_set_new(trial_state, "reason", json_string(cti_ckpt_why_name(run->why)));
    json_t *meta = json_pack("{s:I, s:s, s:s, s:s, s:I, s:f, s:I, s:o, s:o, s:o}", "steps_completed", (json_int_t)bt,
                     "framework", framework, "format", CT_CKPT_FORMAT, "ctrial_version", ct_version(),
                     "batches_trained", (json_int_t)bt, "epochs_trained",
                     ctx->pos.epoch_len > 0 ? (double)bt / (double)ctx->pos.epoch_len : 0.0, "trial_seed",
                     (json_int_t)ctx->trial_seed, "hparams", cti_json_from_value(ctx->opts.hparams),
                     "validation_metrics", validated_now ? cti_json_from_value(run->last_validation) : json_object(),
                     "trial_state", trial_state);
    /* The whole experiment config (as Determined's load_data.json keeps
     * it), for ct_load_trial_from_checkpoint: a trial's init may read its
     * data or model settings from it (ct_ctx_experiment_config,
     * ct_ctx_data_config). */
    const ct_value *config = ctx->opts.experiment_config;
    if (meta && config && json_object_set_new(meta, "experiment_config", cti_json_from_value(config)) != 0) {
        json_decref(meta);
        return NULL;
    }
    /* ct_fit's own data config (ct_ctx_data_config), when no experiment
     * config holds it. */
    if (meta && !config && ctx->opts.data &&
        json_object_set_new(meta, "data_config", cti_json_from_value(ctx->opts.data)) != 0) {
        json_decref(meta);
        return NULL;
    }
    return meta;
}

/* ---- restoring ------------------------------------------------------------------ */

static int mismatch(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int mismatch(const char *dir, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ct_set_error(CT_ECHECKPOINT, "checkpoint %s: %s", dir, msg);
}

/* state[key] as a list of exactly `want` entries, or an error naming it. */
static const ct_value *group(const ct_value *state, const char *key, size_t want, const char *what,
                             const char *dir, int *rc) {
    const ct_value *list = ct_value_kind_of(state) == CT_VALUE_DICT ? ct_value_dict_get(state, key) : NULL;
    if (!list || ct_value_kind_of(list) != CT_VALUE_LIST) {
        *rc = mismatch(dir, "state_dict.pth has no list '%s'", key);
        return NULL;
    }
    if (ct_value_len(list) != want) {
        *rc = mismatch(dir, "it holds %zu %s, the trial has %zu", ct_value_len(list), what, want);
        return NULL;
    }
    return list;
}

static int restore_rng(const ct_value *state, const char *dir) {
    const ct_value *rng = ct_value_dict_get(state, "rng_state");
    const ct_value *cpu = ct_value_kind_of(rng) == CT_VALUE_DICT ? ct_value_dict_get(rng, "cpu_rng_state") : NULL;
    if (!cpu || ct_value_kind_of(cpu) != CT_VALUE_TENSOR) return mismatch(dir, "rng_state has no cpu_rng_state tensor");
    ct_device dev = {CT_CPU, 0};
    if (ct_rng_set_state(dev, ct_value_get_tensor(cpu)) != 0) return mismatch(dir, "rng_state: %s", ct_last_error());
    const ct_value *gpus = ct_value_dict_get(rng, "gpu_rng_states");
    int n = ct_cuda_device_count();
    for (int i = 0; gpus && i < n && (size_t)i < ct_value_len(gpus); i++) {
        dev.type = CT_CUDA;
        dev.index = i;
        const ct_value *g = ct_value_list_get(gpus, (size_t)i);
        if (ct_value_kind_of(g) != CT_VALUE_TENSOR || ct_rng_set_state(dev, ct_value_get_tensor(g)) != 0)
            return mismatch(dir, "rng_state: gpu_rng_states[%d]: %s", i, ct_last_error());
    }
    return CT_OK;
}

static int restore_callbacks(ct_context *ctx, const ct_value *state, const char *dir) {
    const ct_value *saved = ct_value_dict_get(state, "callbacks");
    if (!saved || ct_value_kind_of(saved) != CT_VALUE_DICT) return mismatch(dir, "state_dict.pth has no dict 'callbacks'");
    for (size_t i = 0; i < ctx->n_callbacks; i++) {
        const ct_callback *cb = &ctx->callbacks[i];
        const ct_value *s = ct_value_dict_get(saved, cb->name);
        if (!s || !cb->load_state_dict) continue; /* a callback new to this run starts fresh */
        ct_clear_error();
        if (cb->load_state_dict(cb->self, s) != 0)
            return mismatch(dir, "callback '%s' load_state_dict: %s", cb->name, ct_last_error());
    }
    return CT_OK;
}

static bool same_shape(const ct_tensor *a, const ct_tensor *b) {
    int64_t sa[16], sb[16];
    int na = ct_shape(a, sa, 16), nb = ct_shape(b, sb, 16);
    return na >= 0 && na == nb && na <= 16 && memcmp(sa, sb, (size_t)na * sizeof sa[0]) == 0;
}

static int restore_gradients(ct_context *ctx, const ct_value *state, const char *dir) {
    const ct_value *saved = ct_value_dict_get(state, "accumulated_gradients");
    /* A checkpoint inside an aggregation window holds the window's
     * gradients; one at its end holds none (cti_run_state). */
    int64_t bt = ctx->pos.batches_trained;
    bool mid_window = !cti_context_is_step_batch(ctx, bt - 1);
    if (mid_window && !saved)
        return mismatch(dir,
                        "state_dict.pth has no accumulated_gradients, but batches_trained %lld is inside an "
                        "aggregation window of %d batches (the gradients of its last %lld batches are missing)",
                        (long long)bt, ctx->aggregation_frequency, (long long)(bt % ctx->aggregation_frequency));
    if (!mid_window && saved)
        return mismatch(dir,
                        "state_dict.pth has accumulated_gradients, but batches_trained %lld ends an aggregation "
                        "window of %d batches (where the optimizers have stepped and nothing is accumulated)",
                        (long long)bt, ctx->aggregation_frequency);
    if (!saved) return CT_OK;
    if (ct_value_kind_of(saved) != CT_VALUE_LIST || ct_value_len(saved) != ctx->n_models)
        return mismatch(dir, "accumulated_gradients does not hold one dict per model");
    for (size_t m = 0; m < ctx->n_models; m++) {
        const ct_value *grads = ct_value_list_get(saved, m);
        for (size_t i = 0; i < ct_nn_num_params(ctx->models[m]); i++) {
            const char *name = NULL;
            ct_tensor *p = ct_nn_param_at(ctx->models[m], i, &name);
            const ct_value *g = ct_value_kind_of(grads) == CT_VALUE_DICT ? ct_value_dict_get(grads, name) : NULL;
            if (!g) continue;
            ct_scope *s = ct_scope_begin();
            ct_tensor *t = ct_value_get_tensor(g);
            int rc = t && same_shape(t, p) ? ct_set_grad(p, ct_to_device(ct_clone(t), ct_device_of(p), false))
                         : CT_ESHAPE;
            ct_scope_end(s);
            if (rc != CT_OK) return mismatch(dir, "accumulated gradient of model %zu '%s' does not fit", m, name);
        }
    }
    return CT_OK;
}

int cti_context_restore_models(ct_context *ctx, const ct_value *state, const char *dir) {
    int rc = CT_OK;
    const ct_value *models = group(state, "models_state_dict", ctx->n_models, "models", dir, &rc);
    if (!models) return rc;
    for (size_t i = 0; i < ctx->n_models; i++)
        if (ct_nn_load_state_dict(ctx->models[i], ct_value_list_get(models, i), true) != 0)
            return mismatch(dir, "model %zu: %s", i, ct_last_error());
    return CT_OK;
}

int cti_context_restore_trained(ct_context *ctx, const ct_value *state, const char *dir) {
    int rc = cti_context_restore_models(ctx, state, dir);
    if (rc != CT_OK) return rc;
    const ct_value *optims = group(state, "optimizers_state_dict", ctx->n_optims, "optimizers", dir, &rc);
    if (!optims) return rc;
    const ct_value *scheds = group(state, "lr_schedulers_state_dict", ctx->n_scheds, "LR schedulers", dir, &rc);
    if (!scheds) return rc;
    for (size_t i = 0; i < ctx->n_optims; i++) {
        /* Sharded, each rank loads only the state of its share (the
         * checkpoint holds the whole, from any number of ranks). */
        const ct_value *sd = ct_value_list_get(optims, i);
        const struct cti_shard *shard = ctx->shards ? ctx->shards[i] : NULL;
        ct_value *own = shard ? cti_shard_own_state(shard, sd) : NULL;
        int lrc = shard && !own ? ct_last_code() : ct_optim_load_state_dict(ctx->optims[i], own ? own : sd);
        ct_value_free(own);
        if (lrc != CT_OK) return mismatch(dir, "optimizer %zu: %s", i, ct_last_error());
    }
    for (size_t i = 0; i < ctx->n_scheds; i++)
        if (ct_sched_load_state_dict(ctx->scheds[i].sched, ct_value_list_get(scheds, i)) != 0)
            return mismatch(dir, "LR scheduler %zu: %s", i, ct_last_error());
    /* A scaler starts from the checkpoint's state when it has one; turning
     * fp16 AMP on (or off) at a resume is allowed, as in Determined. */
    const ct_value *scaler = ct_value_dict_get(state, "scaler_state_dict");
    if (ctx->scaler && scaler && ct_grad_scaler_load_state_dict(ctx->scaler, scaler) != CT_OK)
        return mismatch(dir, "scaler_state_dict: %s", ct_last_error());
    return CT_OK;
}

/* The unreported workload's metrics (pending_workload): this rank's share
 * when the world size is the checkpoint's. On another number of ranks the
 * shares cannot be split again: they are dropped, with a warning, and the
 * first training report covers the batches since the resume. */
static int restore_pending(cti_run *run, const ct_value *state, const char *dir) {
    ct_context *ctx = run->ctx;
    const json_t *resume_meta = cti_checkpointer_resume_meta(run->ckpt);
    const ct_value *pending = ct_value_dict_get(state, "pending_training_metrics");
    if (!pending) return CT_OK;
    int64_t world = 0;
    const ct_value *ranks = ct_value_dict_get(pending, "ranks");
    if (ct_value_get_int(ct_value_dict_get(pending, "world_size"), &world) != 0 || world < 1 || !ranks ||
        ct_value_kind_of(ranks) != CT_VALUE_LIST || ct_value_len(ranks) != (size_t)world)
        return mismatch(dir, "state_dict.pth: pending_training_metrics is malformed");
    /* Written with the checkpoint, on its ranks. */
    json_t *ts = json_object_get(resume_meta, "trial_state");
    if (resume_meta && json_integer_value(json_object_get(ts, "world_size")) != world)
        return mismatch(dir,
                        "state_dict.pth: pending_training_metrics holds %lld ranks' metrics, but metadata.json's "
                        "trial_state.world_size is %lld",
                        (long long)world, (long long)json_integer_value(json_object_get(ts, "world_size")));
    if (world != ctx->size) {
        if (ctx->rank == 0 && !ctx->opts.quiet)
            fprintf(stderr, "ctrial: warning: the checkpoint holds the training metrics of %zu unreported batches from "
                            "%lld ranks, which cannot be split among %d: the first training report covers the batches "
                            "since the resume\n",
                    ct_value_len(ct_value_dict_get(ct_value_list_get(ranks, 0), "batches")), (long long)world,
                    ctx->size);
        return CT_OK;
    }
    const ct_value *mine = ct_value_list_get(ranks, (size_t)ctx->rank);
    const ct_value *batches = ct_value_dict_get(mine, "batches");
    int64_t records = 0;
    if (!batches || ct_value_kind_of(batches) != CT_VALUE_LIST ||
        ct_value_get_int(ct_value_dict_get(mine, "records"), &records) != 0 || records < 0 ||
        (int64_t)ct_value_len(batches) > ctx->pos.batches_trained)
        return mismatch(dir, "state_dict.pth: pending_training_metrics of rank %d is malformed", ctx->rank);
    ct_value_free(run->workload);
    run->workload = ct_value_copy(batches, false);
    ctx->pos.records_pending = records;
    return run->workload ? CT_OK : ct_last_code();
}

int cti_run_restore_state(cti_run *run, const ct_value *state, const char *dir) {
    ct_context *ctx = run->ctx;
    int rc = cti_context_restore_trained(ctx, state, dir);
    if (rc == CT_OK) rc = restore_pending(run, state, dir);
    if (rc == CT_OK) rc = restore_gradients(ctx, state, dir);
    if (rc == CT_OK) rc = restore_callbacks(ctx, state, dir);
    return rc == CT_OK ? restore_rng(state, dir) : rc;
}

/* ---- the loop's position (metadata.json's trial_state) ------------------------------ */

/* A field's value for messages: its JSON text (cut short), or "missing". */
static void shown(const json_t *v, char *buf, size_t len) {
    char *text = v ? cti_json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    if (!text) {
        snprintf(buf, len, "%s", v ? "unprintable" : "missing");
        return;
    }
    if (strlen(text) > 80) snprintf(buf, len, "%.77s...", text);
    else snprintf(buf, len, "%s", text);
    free(text);
}

/* metadata.json's `where`.key is v, which is not `expected`: CT_ECHECKPOINT
 * naming the checkpoint, the field, its value and what was expected. */
static int bad_field(const char *dir, const char *where, const char *key, const json_t *v, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int bad_field(const char *dir, const char *where, const char *key, const json_t *v, const char *fmt, ...) {
    char value[96], expected[1024];
    shown(v, value, sizeof value);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(expected, sizeof expected, fmt, ap);
    va_end(ap);
    return mismatch(dir, "metadata.json: %s%s is %s, expected %s", where, key, value, expected);
}

/* trial_state.key as an integer in [min, max]; `what` says what is
 * expected when it is not. */
static int state_int(const json_t *ts, const char *key, int64_t min, int64_t max, const char *what, int64_t *out,
                     const char *dir) {
    json_t *v = json_object_get(ts, key);
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return bad_field(dir, "trial_state.", key, v, "%s", what);
    *out = (int64_t)json_integer_value(v);
    return CT_OK;
}

/* "'validation_loss' (smaller is better)" for messages. */
static void describe_metric(const char *metric, bool smaller, char *buf, size_t len) {
    snprintf(buf, len, "'%s' (%s is better)", metric, smaller ? "smaller" : "larger");
}

/* The fields that need nothing but the checkpoint and the run's options:
 * each field's type and range, the fields against each other, and what a
 * resume needs to be the same run (global batch size, aggregation, seed,
 * searcher metric). The ones that need the training loader (epoch length,
 * max_length) are cti_run_check_position's. */
int cti_run_restore_position(cti_run *run, const json_t *metadata, const char *dir) {
    ct_context *ctx = run->ctx;
    const json_t *ts = json_object_get(metadata, "trial_state");
    if (!json_is_object(ts)) return bad_field(dir, "", "trial_state", ts, "an object");
    int64_t bt = 0, records = 0, epoch_len = 0, last_val = 0, last_ckpt = 0, position = 0, gbs = 0, agg = 0,
            world = 0;
    char what[256];
    int rc = state_int(ts, "batches_trained", 0, INT64_MAX, "an integer >= 0", &bt, dir);
    if (rc == CT_OK)
        rc = state_int(ts, "records_trained", 0, bt > 0 ? INT64_MAX : 0,
                       bt > 0 ? "an integer >= 0" : "0 (batches_trained is 0)", &records, dir);
    if (rc == CT_OK)
        rc = state_int(ts, "epoch_len", -1, INT64_MAX, "a number of batches >= 1 (or -1: a loader without a length)",
                       &epoch_len, dir);
    if (rc == CT_OK && epoch_len == 0)
        rc = bad_field(dir, "trial_state.", "epoch_len", json_object_get(ts, "epoch_len"),
                       "a number of batches >= 1 (or -1: a loader without a length)");
    snprintf(what, sizeof what, "-1 (none) or a batch count from 0 to batches_trained (%lld)", (long long)bt);
    if (rc == CT_OK) rc = state_int(ts, "last_validation_batches", -1, bt, what, &last_val, dir);
    snprintf(what, sizeof what, "%lld (batches_trained: a checkpoint is written at the batch it has trained)",
             (long long)bt);
    if (rc == CT_OK) rc = state_int(ts, "last_checkpoint_batches", bt, bt, what, &last_ckpt, dir);
    snprintf(what, sizeof what, "%lld (batches_trained: the training loader hands out one batch per batch trained)",
             (long long)bt);
    if (rc == CT_OK) rc = state_int(ts, "loader_position", bt, bt, what, &position, dir);
    if (rc == CT_OK) rc = state_int(ts, "global_batch_size", 1, INT64_MAX, "a positive integer", &gbs, dir);
    if (rc == CT_OK) rc = state_int(ts, "aggregation_frequency", 1, INT_MAX, "a positive integer", &agg, dir);
    if (rc == CT_OK) rc = state_int(ts, "world_size", 1, INT_MAX, "a number of ranks >= 1", &world, dir);
    if (rc != CT_OK) return rc;
    json_t *best = json_object_get(ts, "best_metric");
    if (!json_is_null(best) && !(json_is_number(best) && isfinite(json_number_value(best))))
        return bad_field(dir, "trial_state.", "best_metric", best, "a finite number or null (no best yet)");
    json_t *metric = json_object_get(ts, "searcher_metric");
    if (!json_is_null(metric) && !json_is_string(metric))
        return bad_field(dir, "trial_state.", "searcher_metric", metric, "a metric name (a string) or null");
    if (json_is_number(best) && !json_is_string(metric))
        return bad_field(dir, "trial_state.", "searcher_metric", metric,
                         "the name of the metric whose best_metric is %g (a string)", json_number_value(best));
    json_t *smaller = json_object_get(ts, "smaller_is_better");
    if (!json_is_boolean(smaller)) return bad_field(dir, "trial_state.", "smaller_is_better", smaller, "true or false");
    json_t *reason = json_object_get(ts, "reason");
    const char *why = json_string_value(reason);
    bool known_why = false;
    for (int w = CT_WHY_PERIOD; why && w <= CT_WHY_STOP; w++) known_why |= strcmp(why, cti_ckpt_why_name(w)) == 0;
    if (!known_why) return bad_field(dir, "trial_state.", "reason", reason, "\"period\", \"policy\", \"end\" or \"stop\"");
    /* The top-level counts are the same position. */
    static const char *const counts[] = {"steps_completed", "batches_trained"};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        json_t *n = json_object_get(metadata, counts[i]);
        if (n && (!json_is_integer(n) || json_integer_value(n) != bt))
            return bad_field(dir, "", counts[i], n, "%lld (trial_state.batches_trained)", (long long)bt);
    }
    json_t *seed = json_object_get(metadata, "trial_seed");
    if (!json_is_integer(seed) || json_integer_value(seed) < 0)
        return bad_field(dir, "", "trial_seed", seed, "an integer >= 0");

    /* What makes the resumed run the same run. */
    if (gbs != ctx->global_batch_size)
        return mismatch(dir, "it was trained with global_batch_size %lld, this run has %lld (resuming needs the same)",
                        (long long)gbs, (long long)ctx->global_batch_size);
    if (agg != ctx->aggregation_frequency)
        return mismatch(dir, "it was trained with aggregation_frequency %lld, this run has %d (resuming needs the same)",
                        (long long)agg, ctx->aggregation_frequency);
    if ((uint64_t)json_integer_value(seed) != ctx->trial_seed)
        return mismatch(dir,
                        "it was trained with trial_seed %lld, this run has seed %llu (resuming needs the same: the "
                        "data order and the loader position follow from it)",
                        (long long)json_integer_value(seed), (unsigned long long)ctx->trial_seed);
    const char *run_metric = ctx->opts.searcher_metric;
    bool saved_smaller = json_is_true(smaller);
    if (json_is_string(metric) && run_metric && run_metric[0] &&
        (strcmp(json_string_value(metric), run_metric) != 0 || saved_smaller != ctx->opts.smaller_is_better)) {
        char was[300], now[300];
        describe_metric(json_string_value(metric), saved_smaller, was, sizeof was);
        describe_metric(run_metric, ctx->opts.smaller_is_better, now, sizeof now);
        return mismatch(dir,
                        "it chose its best checkpoints by searcher metric %s, this run by %s (resuming needs the "
                        "same; --warm-start starts a new trial from it)",
                        was, now);
    }
    cti_checkpointer_set_best(run->ckpt, json_is_number(best), json_is_number(best) ? json_number_value(best) : 0.0);
    ctx->pos.batches_trained = ctx->pos.initial_batch = bt;
    ctx->pos.records_trained = records;
    ctx->pos.last_validation_bt = last_val;
    ctx->pos.last_checkpoint_bt = last_ckpt;
    run->resume_position = position;
    return CT_OK;
}

/* Once the training loader is built and max_length is in batches
 * (setup_epochs), before the loader moves to the checkpoint's position: on
 * as many ranks as the checkpoint's the epoch must be as long (else the
 * data or its batching changed and the position names other records; on
 * another number of ranks the shares, and so the length, may differ). A
 * position at or past this run's max_length is no error: the run has
 * nothing to train, as Determined's (test_max_batches_leq_steps_completed). */
int cti_run_check_position(cti_run *run) {
    const ct_context *ctx = run->ctx;
    const char *dir = cti_checkpointer_resume_dir(run->ckpt);
    const json_t *meta = cti_checkpointer_resume_meta(run->ckpt);
    if (!dir[0] || !meta) return CT_OK;
    const json_t *ts = json_object_get(meta, "trial_state");
    json_t *len = json_object_get(ts, "epoch_len"), *world = json_object_get(ts, "world_size");
    if (json_integer_value(world) == ctx->size && json_integer_value(len) != ctx->pos.epoch_len)
        return bad_field(dir, "trial_state.", "epoch_len", len,
                         "%lld, the batches per epoch of this run's training loader on %d rank%s (the data or its "
                         "batching changed since the checkpoint: its loader position would name other records)",
                         (long long)ctx->pos.epoch_len, ctx->size, ctx->size == 1 ? "" : "s");
    return CT_OK;
}
