/* src/fit/context.c — the context a trial sees (trial.h's ct_ctx_* functions,
 * all of them): wrapping models, optimizers, schedulers, reducers and
 * callbacks; backward and the optimizer step with gradient aggregation,
 * clipping and closures; AMP and the profiler; hyperparameters; position
 * queries; and the context's life, from cti_context_new to ct_ctx_free. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "fit/context.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/json_write.h"
#include "base/value_json.h"
#include "ctrial/dist.h"
#include "dist/grad_sync.h"
#include "dist/shard.h"
#include "fit/graph_step.h"
#include "fit/report.h"
#include "metrics/metrics.h"
#include "ctrial/summary.h"

/* ---- lifetime -------------------------------------------------------------- */

ct_context *cti_context_new(const ct_trial *trial, const ct_fit_opts *o) {
    ct_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        ct_set_error(CT_ENOMEM, "ct_fit: out of host memory");
        return NULL;
    }
    ctx->trial = trial;
    ctx->opts = *o;
    ctx->size = 1;
    ctx->aggregation_frequency = o->aggregation_frequency > 0 ? o->aggregation_frequency : 1;
    ctx->pos = cti_position_start();
    ctx->auto_to_device = true;
    ctx->repro_checks = true;
    ctx->tensorboard = o->tensorboard;
    return ctx;
}

int cti_context_trial_failed(const char *what) {
    if (ct_last_code() == CT_OK) return ct_set_error(CT_ETRIAL, "%s returned NULL without an error", what);
    return ct_set_error(ct_last_code(), "%s: %s", what, ct_last_error());
}

/* The state of a simple-mode trial without init: something non-NULL to hand
 * the trial's functions, which ct_ctx_self and ct_ctx_free know is not the
 * trial's. */
static char g_no_state;

/* Each call into the trial's code starts with the thread's error cleared
 * (error.h, "Errors and your code"). */
int cti_context_build_trial(ct_context *ctx) {
    const ct_trial *t = ctx->trial;
    ct_manual_seed(ctx->trial_seed);
    ct_clear_error();
    if (!t->build_model) {
        ctx->self = t->init(ctx);
        return ctx->self ? CT_OK : cti_context_trial_failed("init");
    }
    ctx->simple_mode = true;
    ctx->self = t->init ? t->init(ctx) : &g_no_state;
    if (!ctx->self) return cti_context_trial_failed("init");
    ct_clear_error();
    ct_module *model = ct_ctx_wrap_model(ctx, t->build_model(ctx->self, ctx));
    if (!model) return cti_context_trial_failed("build_model");
    ct_clear_error();
    ct_optim *opt = ct_ctx_wrap_optimizer(ctx, t->optimizer(ctx->self, ctx, model));
    if (!opt) return cti_context_trial_failed("optimizer");
    if (t->create_lr_scheduler) {
        ct_step_mode mode = CT_STEP_EVERY_EPOCH;
        ct_clear_error();
        ct_sched *s = t->create_lr_scheduler(ctx->self, ctx, opt, &mode);
        if (!s && ct_last_code() != CT_OK) return cti_context_trial_failed("create_lr_scheduler"); /* NULL alone: none */
        if (s && !ct_ctx_wrap_lr_scheduler(ctx, s, mode, 1)) return ct_last_code();
    }
    return CT_OK;
}

void *ct_ctx_self(const ct_context *ctx) { return ctx && ctx->self != (void *)&g_no_state ? ctx->self : NULL; }

/* The trial's state first (its destroy may still use what it wrapped), then
 * in reverse dependency order: schedulers and optimizers refer to models'
 * parameters, so they go before the models. */
void ct_ctx_free(ct_context *ctx) {
    if (!ctx) return;
    if (ctx->trial->destroy && ctx->self && ctx->self != (void *)&g_no_state) ctx->trial->destroy(ctx->self);
    for (size_t i = ctx->n_callbacks; i-- > 0;) {
        ct_callback *cb = &ctx->callbacks[i];
        if (cb->free) cb->free(cb->self);
        free((char *)cb->name);
    }
    for (size_t i = 0; i < ctx->n_reducers; i++) cti_reducer_free(ctx->reducers[i]);
    for (size_t i = 0; i < ctx->n_syncs; i++) cti_grad_sync_free(ctx->syncs[i]);
    free(ctx->syncs);
    for (size_t i = 0; ctx->shards && i < ctx->n_optims; i++) cti_shard_free(ctx->shards[i]);
    free(ctx->shards);
    ct_grad_scaler_free(ctx->scaler);
    for (size_t i = 0; i < ctx->n_scheds; i++) ct_sched_free(ctx->scheds[i].sched);
    for (size_t i = 0; i < ctx->n_optims; i++) ct_optim_free(ctx->optims[i]);
    for (size_t i = 0; i < ctx->n_models; i++) ct_nn_free(ctx->models[i]);
    free(ctx->callbacks);
    free(ctx->emas);
    for (size_t i = 0; i < ctx->n_val_loaders; i++) {
        ct_loader_free(ctx->val_loaders[i].loader);
        free(ctx->val_loaders[i].name);
    }
    free(ctx->val_loaders);
    free(ctx->reducers);
    free(ctx->scheds);
    free(ctx->optims);
    free(ctx->models);
    ct_value_free(ctx->saved_hparams);
    ct_value_free(ctx->saved_config);
    ct_summary_close(ctx->summary);
    free(ctx);
}

/* Appends p to a growable array of pointers-sized items. */
static bool push(void **array, size_t *n, size_t item_size, const void *item) {
    void *grown = realloc(*array, (*n + 1) * item_size);
    if (!grown) return false;
    memcpy((char *)grown + *n * item_size, item, item_size);
    *array = grown;
    (*n)++;
    return true;
}

/* ---- wrapping -------------------------------------------------------------- */

static bool wrap_arg_ok(const void *p, const char *fn, const char *what) {
    if (p) return true;
    if (ct_last_code() == CT_OK) ct_set_error(CT_EINVAL, "%s: %s is NULL", fn, what);
    return false;
}

ct_module *ct_ctx_wrap_model(ct_context *ctx, ct_module *model) {
    if (!ctx || !wrap_arg_ok(model, __func__, "model")) {
        if (!ctx) ct_set_error(CT_EINVAL, "ct_ctx_wrap_model: ctx is NULL");
        ct_nn_free(model);
        return NULL;
    }
    for (size_t i = 0; i < ctx->n_models; i++)
        if (ctx->models[i] == model) {
            ct_set_error(CT_EINVAL, "ct_ctx_wrap_model: this model is already wrapped");
            return NULL;
        }
    if (ctx->device.type != CT_CPU && ct_nn_to_device(model, ctx->device) != 0) {
        ct_nn_free(model);
        return NULL;
    }
    if (!push((void **)&ctx->models, &ctx->n_models, sizeof model, &model)) {
        ct_nn_free(model);
        ct_set_error(CT_ENOMEM, "ct_ctx_wrap_model: out of host memory");
        return NULL;
    }
    return model;
}

ct_optim *ct_ctx_wrap_optimizer(ct_context *ctx, ct_optim *opt) {
    if (!ctx || !wrap_arg_ok(opt, __func__, "optimizer")) {
        if (!ctx) ct_set_error(CT_EINVAL, "ct_ctx_wrap_optimizer: ctx is NULL");
        ct_optim_free(opt);
        return NULL;
    }
    for (size_t i = 0; i < ctx->n_optims; i++)
        if (ctx->optims[i] == opt) {
            ct_set_error(CT_EINVAL, "ct_ctx_wrap_optimizer: this optimizer is already wrapped");
            return NULL;
        }
    if (!push((void **)&ctx->optims, &ctx->n_optims, sizeof opt, &opt)) {
        ct_optim_free(opt);
        ct_set_error(CT_ENOMEM, "ct_ctx_wrap_optimizer: out of host memory");
        return NULL;
    }
    return opt;
}

ct_sched *ct_ctx_wrap_lr_scheduler(ct_context *ctx, ct_sched *s, ct_step_mode mode, int frequency) {
    if (!ctx || !wrap_arg_ok(s, __func__, "scheduler")) {
        if (!ctx) ct_set_error(CT_EINVAL, "ct_ctx_wrap_lr_scheduler: ctx is NULL");
        ct_sched_free(s);
        return NULL;
    }
    int m = (int)mode;
    if (m < CT_STEP_EVERY_BATCH || m > CT_STEP_MANUAL || frequency < 1) {
        ct_sched_free(s);
        ct_set_error(CT_EINVAL, "ct_ctx_wrap_lr_scheduler: bad step mode %d or frequency %d", m, frequency);
        return NULL;
    }
    if (!strcmp(ct_sched_type(s), "ReduceLROnPlateau") && mode != CT_STEP_MANUAL) {
        ct_sched_free(s);
        ct_set_error(CT_EINVAL, "ct_ctx_wrap_lr_scheduler: ReduceLROnPlateau needs CT_STEP_MANUAL "
                                "(it steps on a metric the trial chooses)");
        return NULL;
    }
    cti_wrapped_sched w = {s, mode, frequency};
    if (!push((void **)&ctx->scheds, &ctx->n_scheds, sizeof w, &w)) {
        ct_sched_free(s);
        ct_set_error(CT_ENOMEM, "ct_ctx_wrap_lr_scheduler: out of host memory");
        return NULL;
    }
    return s;
}

/* Determined's wrap_reducer refuses the same reducer twice: the same fn +
 * fn_ctx, or the same self (an object and its free would be shared). Two
 * reducers reporting the same name in the same kind of workload are
 * refused too (one would hide the other). */
static bool reducer_wrappable(const ct_context *ctx, const char *api, const char *name, ct_reduce_fn fn,
                              const void *fn_ctx, const ct_metric_reducer_ops *ops, const void *self,
                              bool for_training, bool for_validation) {
    for (size_t i = 0; i < ctx->n_reducers; i++) {
        const ct_reducer *r = ctx->reducers[i];
        bool same = fn ? !r->is_class && r->fn == fn && r->fn_ctx == fn_ctx
                       : r->is_class && r->self == self && (self || r->ops.per_slot_reduce == ops->per_slot_reduce);
        if (same) {
            ct_set_error(CT_EINVAL, "%s: this reducer (%s) is already wrapped", api, name ? name : "unnamed");
            return false;
        }
        if (name && r->name && !strcmp(name, r->name) &&
            ((for_training && r->for_training) || (for_validation && r->for_validation))) {
            ct_set_error(CT_EINVAL, "%s: a reducer named '%s' is already wrapped", api, name);
            return false;
        }
    }
    return true;
}

/* Registers r (NULL: its error, prefixed). On failure a class reducer's
 * free is never called: self stays the caller's. */
static ct_reducer *keep_reducer(ct_context *ctx, const char *api, ct_reducer *r) {
    if (!r) {
        ct_set_error(ct_last_code(), "%s: %s", api, ct_last_error());
        return NULL;
    }
    if (!push((void **)&ctx->reducers, &ctx->n_reducers, sizeof r, &r)) {
        r->ops.free = NULL;
        cti_reducer_free(r);
        ct_set_error(CT_ENOMEM, "%s: out of host memory", api);
        return NULL;
    }
    return r;
}

ct_reducer *ct_ctx_wrap_reducer(ct_context *ctx, const char *name, ct_reduce_fn fn, void *fn_ctx) {
    return ct_ctx_wrap_reducer_ex(ctx, name, fn, fn_ctx, true, true);
}

ct_reducer *ct_ctx_wrap_reducer_ex(ct_context *ctx, const char *name, ct_reduce_fn fn, void *fn_ctx,
                                   bool for_training, bool for_validation) {
    if (!ctx || !fn) {
        ct_set_error(CT_EINVAL, "ct_ctx_wrap_reducer: %s is NULL", ctx ? "fn" : "ctx");
        return NULL;
    }
    if (!reducer_wrappable(ctx, "ct_ctx_wrap_reducer", name, fn, fn_ctx, NULL, NULL, for_training, for_validation))
        return NULL;
    return keep_reducer(ctx, "ct_ctx_wrap_reducer",
                        cti_reducer_new(name, fn, fn_ctx, for_training, for_validation));
}

ct_reducer *ct_ctx_wrap_metric_reducer(ct_context *ctx, const char *name, const ct_metric_reducer_ops *ops,
                                       void *self, bool for_training, bool for_validation) {
    static const char api[] = "ct_ctx_wrap_metric_reducer";
    if (!ctx || !ops) {
        ct_set_error(CT_EINVAL, "%s: %s is NULL", api, ctx ? "ops" : "ctx");
        return NULL;
    }
    if (!reducer_wrappable(ctx, api, name, NULL, NULL, ops, self, for_training, for_validation)) return NULL;
    return keep_reducer(ctx, api, cti_reducer_new_class(name, ops, self, for_training, for_validation));
}

int ct_ctx_add_callback(ct_context *ctx, const ct_callback *cb) {
    if (!ctx || !cb || !cb->name || !cb->name[0])
        return ct_set_error(CT_EINVAL, "ct_ctx_add_callback: a callback needs a name");
    for (size_t i = 0; i < ctx->n_callbacks; i++)
        if (!strcmp(ctx->callbacks[i].name, cb->name))
            return ct_set_error(CT_EINVAL, "ct_ctx_add_callback: a callback named '%s' is already registered",
                                cb->name);
    ct_callback copy = *cb;
    copy.name = strdup(cb->name);
    if (!copy.name || !push((void **)&ctx->callbacks, &ctx->n_callbacks, sizeof copy, &copy)) {
        free((char *)copy.name);
        return ct_set_error(CT_ENOMEM, "ct_ctx_add_callback: out of host memory");
    }
    return CT_OK;
}

/* ---- backward and the optimizer step --------------------------------------- */

int ct_ctx_backward(ct_context *ctx, const ct_tensor *loss) {
    return ct_ctx_backward_ex(ctx, loss, NULL, false, false);
}

int ct_ctx_backward_ex(ct_context *ctx, const ct_tensor *loss, const ct_tensor *gradient, bool retain_graph,
                       bool create_graph) {
    if (!ctx) return ct_set_error(CT_EINVAL, "ct_ctx_backward: ctx is NULL");
    if (!loss) {
        if (ct_last_code() == CT_OK) ct_set_error(CT_EINVAL, "ct_ctx_backward: loss is NULL");
        return ct_last_code();
    }
    /* Under mpirun the gradients of an optimizer-step batch are all-reduced
     * in buckets while backward runs, and are averages when it returns (as
     * with DistributedDataParallel); accumulation batches stay local. */
    bool step = cti_context_is_step_batch(ctx, ctx->pos.current_batch);
    /* fp16 AMP: scaler.scale(loss).backward() (a NEW tensor in the batch's
     * scope). A wrapped (manual) scaler is the trial's to apply. */
    const ct_tensor *scaled = ctx->scaler && !ctx->manual_scaler ? ct_grad_scaler_scale(ctx->scaler, loss) : loss;
    if (!scaled) return ct_last_code();
    for (size_t i = 0; i < ctx->n_syncs; i++) cti_grad_sync_arm(ctx->syncs[i], step);
    int rc = ct_backward_ex(scaled, gradient, retain_graph, create_graph);
    double t0 = cti_clock_monotonic();
    for (size_t i = 0; i < ctx->n_syncs; i++) {
        cti_grad_sync_after_backward(ctx->syncs[i]);
        /* Every rank finishes, even after a failed backward: the ranks run
         * the same collectives and agree on the failure afterwards. */
        int frc = step ? cti_grad_sync_finish(ctx->syncs[i]) : CT_OK;
        if (rc == CT_OK) rc = frc;
    }
    if (step && ctx->size > 1) cti_time_add(ctx->reporter, CT_TIME_COMM, t0);
    return rc;
}

bool cti_context_is_step_batch(const ct_context *ctx, int64_t batch_idx) {
    return (batch_idx + 1) % ctx->aggregation_frequency == 0;
}

int cti_context_shard_optimizers(ct_context *ctx) {
    if (!ctx->opts.shard_optimizer || ctx->size == 1 || ctx->n_optims == 0) return CT_OK;
    ctx->shards = calloc(ctx->n_optims, sizeof *ctx->shards);
    if (!ctx->shards) return ct_set_error(CT_ENOMEM, "shard_optimizer: out of host memory");
    for (size_t i = 0; i < ctx->n_optims; i++)
        if (!(ctx->shards[i] = cti_shard_new(ctx->optims[i], ctx->rank, ctx->size)))
            return ct_set_error(ct_last_code(), "optimizations.shard_optimizer: optimizer %zu (%s): %s", i,
                                ct_optim_type(ctx->optims[i]), ct_last_error());
    return CT_OK;
}

struct cti_shard *cti_context_shard_of(const ct_context *ctx, const ct_optim *opt) {
    for (size_t i = 0; ctx->shards && i < ctx->n_optims; i++)
        if (ctx->optims[i] == opt) return ctx->shards[i];
    return NULL;
}

/* One parameter of a sharded optimizer: its storage, offset and size (the
 * same for every handle on it), and the rank that steps it. */
typedef struct {
    const void *id;
    int64_t offset, numel;
    int owner;
} owned_param;

struct cti_param_owners {
    size_t n;
    owned_param *p;
};

cti_param_owners *cti_context_param_owners(const ct_context *ctx) {
    cti_param_owners *t = calloc(1, sizeof *t);
    size_t n = 0;
    for (size_t i = 0; ctx->shards && i < ctx->n_optims; i++) n += ctx->shards[i] ? ct_optim_num_params(ctx->optims[i]) : 0;
    if (!t || !(t->p = malloc((n ? n : 1) * sizeof *t->p))) {
        free(t);
        ct_set_error(CT_ENOMEM, "shard_optimizer: out of host memory");
        return NULL;
    }
    for (size_t i = 0; ctx->shards && i < ctx->n_optims; i++)
        for (size_t j = 0; ctx->shards[i] && j < ct_optim_num_params(ctx->optims[i]); j++) {
            const ct_tensor *q = ct_optim_param(ctx->optims[i], j);
            ct_storage_info si;
            if (ct_storage_info_of(q, &si) != CT_OK) {
                cti_param_owners_free(t);
                return NULL;
            }
            t->p[t->n++] = (owned_param){si.id, si.offset, ct_numel(q), cti_shard_owner_of(ctx->shards[i], j)};
        }
    return t;
}

int cti_param_owner(const cti_param_owners *t, const ct_tensor *param) {
    ct_storage_info si;
    if (ct_storage_info_of(param, &si) != CT_OK) {
        ct_clear_error(); /* a storage that cannot be described is nobody's */
        return -1;
    }
    for (size_t k = 0; k < t->n; k++)
        if (t->p[k].id == si.id && t->p[k].offset == si.offset && t->p[k].numel == ct_numel(param)) return t->p[k].owner;
    return -1;
}

void cti_param_owners_free(cti_param_owners *t) {
    if (t) free(t->p);
    free(t);
}

/* ct_set_grad_reduce's function while a sharded optimizer steps: every
 * rank's part of a clip norm (a sum, or the largest) or inf flag (the
 * largest), a float32 on the host. */
static int reduce_across_ranks(ct_tensor *t, bool max, void *unused) {
    (void)unused;
    return ct_dist_allreduce(t, max ? CT_DIST_MAX : CT_DIST_SUM);
}

ct_step_opts ct_step_defaults(void) {
    ct_step_opts o = {.auto_zero_grads = true};
    return o;
}

/* The step on the gradients backward left (no closure): averaged over
 * the aggregation window, unscaled and clipped, stepped through a scaler
 * or not. */
static int step_on_gradients(ct_context *ctx, ct_optim *opt, const ct_step_opts *d) {
    size_t n = ct_optim_num_params(opt);
    ct_tensor **params = malloc((n ? n : 1) * sizeof *params);
    if (!params) return ct_set_error(CT_ENOMEM, "ct_ctx_step_optimizer: out of host memory");
    for (size_t i = 0; i < n; i++) params[i] = ct_optim_param(opt, i);
    int rc = CT_OK;
    /* Accumulated gradients are sums over aggregation_frequency batches:
     * make them a mean, as a single large batch would have given
     * (average_aggregated_gradients, Determined's default; false keeps the
     * sum). */
    if (ctx->aggregation_frequency > 1 && ctx->opts.average_aggregated_gradients) {
        ct_scope *s = ct_scope_begin();
        for (size_t i = 0; i < n && rc == CT_OK; i++) {
            ct_tensor *g = ct_grad(params[i]);
            if (g) rc = ct_mul_scalar_(g, 1.0 / ctx->aggregation_frequency);
        }
        ct_scope_end(s);
    }
    /* The context's own (automatic) scaler, or the one the trial passes. */
    bool auto_amp = ctx->scaler && !ctx->manual_scaler;
    ct_grad_scaler *scaler = d->scaler ? d->scaler : auto_amp ? ctx->scaler : NULL;
    /* Sharded: each rank holds its own parameters' gradients only (the
     * others' are None), so a clip norm and the scaler's inf check combine
     * every rank's part (nn.h, ct_set_grad_reduce). */
    bool split = cti_context_shard_of(ctx, opt) != NULL;
    if (split) ct_set_grad_reduce(reduce_across_ranks, NULL);
    /* fp16 AMP: the clip callback sees true gradients (scaler.unscale_). */
    if (rc == CT_OK && d->clip && auto_amp) rc = ct_grad_scaler_unscale(ctx->scaler, opt);
    if (rc == CT_OK && d->clip) rc = d->clip(params, n, d->clip_ctx);
    free(params);
    if (rc == CT_OK && !scaler) rc = ct_optim_step(opt);
    /* scaler.step: unscales if not yet, skips the step on inf/NaN; the loop
     * updates the context's scale once this batch's steps are done (a
     * trial's own scaler is updated by the trial). */
    if (rc == CT_OK && scaler) {
        rc = ct_grad_scaler_step(scaler, opt, NULL);
        if (scaler == ctx->scaler && auto_amp) ctx->scaler_stepped = true;
    }
    if (split) ct_set_grad_reduce(NULL, NULL);
    return rc;
}

/* What a step with a closure cannot go with (trial.h, ct_step_opts): the
 * closure makes the gradients itself at each of its evaluations, as many
 * as the optimizer decides (LBFGS: as its line search needs), with the
 * weights the step has moved so far. Refused on every batch, before
 * anything runs. */
static int refuse_closure(const ct_context *ctx, const ct_step_opts *d) {
    if (d->clip)
        return ct_set_error(CT_EINVAL, "ct_ctx_step_optimizer: a closure with a clip callback: the callback "
                                       "runs before the step, but the closure makes the gradients inside it, "
                                       "at each evaluation; clip inside the closure, after ct_ctx_backward");
    if (d->scaler || (ctx->scaler && !ctx->manual_scaler))
        return ct_set_error(d->scaler ? CT_EINVAL : CT_ECONFIG,
                            "ct_ctx_step_optimizer: a closure with a GradScaler (%s): closure use is not "
                            "supported if GradScaler is enabled, as in PyTorch",
                            d->scaler ? "ct_step_opts.scaler" : "fp16 AMP, ct_ctx_use_amp");
    if (ctx->amp)
        return ct_set_error(CT_ECONFIG, "ct_ctx_step_optimizer: a closure with AMP (ct_ctx_use_amp): train_batch "
                                        "runs in one autocast region, which keeps the weights' low-precision "
                                        "copies until it ends, so evaluations after the optimizer moved the "
                                        "weights would compute with the old ones (LBFGS would not move, as "
                                        "inside torch.autocast in PyTorch); autocast inside the closure instead, "
                                        "ct_autocast_enter / ct_autocast_exit around its forward");
    if (ctx->aggregation_frequency > 1)
        return ct_set_error(CT_ECONFIG, "ct_ctx_step_optimizer: a closure with aggregation_frequency %d: the "
                                        "closure evaluates the step batch alone and zeroes the gradients the "
                                        "other batches of the window accumulated; use aggregation_frequency 1",
                            ctx->aggregation_frequency);
    if (ctx->size > 1)
        return ct_set_error(CT_ECONFIG, "ct_ctx_step_optimizer: a closure with %d ranks: each evaluation's "
                                        "ct_ctx_backward averages the gradients across ranks, and how many "
                                        "evaluations a step makes depends on each rank's data (LBFGS's line "
                                        "search), so the ranks would wait on each other forever; train with "
                                        "one rank",
                            ctx->size);
    if (ctx->opts.cuda_graphs)
        return ct_set_error(CT_ECONFIG, "ct_ctx_step_optimizer: a closure with cuda_graphs: each evaluation "
                                        "reads the loss on the host (float(loss), what step(closure) returns), "
                                        "which a CUDA graph capture cannot do; turn cuda_graphs off");
    return CT_OK;
}

int ct_ctx_step_optimizer_with(ct_context *ctx, ct_optim *opt, const ct_step_opts *o) {
    if (!ctx || !opt) return ct_set_error(CT_EINVAL, "ct_ctx_step_optimizer: %s is NULL", ctx ? "opt" : "ctx");
    ct_step_opts d = o ? *o : ct_step_defaults();
    if (ctx->aggregation_frequency > 1 && !d.auto_zero_grads)
        return ct_set_error(CT_ECONFIG, "ct_ctx_step_optimizer: with aggregation_frequency %d, auto_zero_grads "
                                        "must be true (as in Determined)", ctx->aggregation_frequency);
    int rc = d.closure ? refuse_closure(ctx, &d) : CT_OK;
    if (rc != CT_OK) return rc;
    if (!cti_context_is_step_batch(ctx, ctx->pos.current_batch)) return CT_OK; /* accumulating gradients */
    /* Under mpirun the gradients are averages already (ct_ctx_backward),
     * unless a backward ran outside it: stepping on those would let the
     * ranks' weights drift apart. */
    for (size_t i = 0; i < ctx->n_syncs; i++) {
        char stray[256];
        if (cti_grad_sync_stray(ctx->syncs[i], stray, sizeof stray))
            return ct_set_error(CT_ESTATE,
                                "ct_ctx_step_optimizer: rank %d: parameter '%s' got its gradient from a backward "
                                "outside ct_ctx_backward, which is not averaged across ranks; call "
                                "ct_ctx_backward or ct_ctx_backward_ex",
                                ctx->rank, stray);
    }
    double t0 = cti_clock_monotonic();
    rc = d.closure ? ct_optim_step_closure(opt, d.closure, d.closure_user, d.closure_loss)
                   : step_on_gradients(ctx, opt, &d);
    if (rc == CT_OK && d.auto_zero_grads) rc = ct_optim_zero_grad(opt, true);
    cti_time_add(ctx->reporter, CT_TIME_OPTIM, t0);
    /* A sharded optimizer stepped this rank's share: every parameter comes
     * from the rank that stepped it (also after a failure here: the other
     * ranks wait for this one's parameters). */
    struct cti_shard *shard = cti_context_shard_of(ctx, opt);
    if (shard) {
        double t1 = cti_clock_monotonic();
        /* Through the gradient buckets' shared memory where the step has
         * set the gradients to None (their slots are free then). */
        int src = cti_shard_sync_params(shard, opt, ctx->syncs, d.auto_zero_grads ? ctx->n_syncs : 0);
        if (rc == CT_OK) rc = src;
        cti_time_add(ctx->reporter, CT_TIME_COMM, t1);
    }
    return rc;
}

int ct_ctx_step_optimizer_ex(ct_context *ctx, ct_optim *opt, ct_clip_fn clip, void *clip_ctx,
                             bool auto_zero_grads) {
    ct_step_opts o = {.clip = clip, .clip_ctx = clip_ctx, .auto_zero_grads = auto_zero_grads};
    return ct_ctx_step_optimizer_with(ctx, opt, &o);
}

ct_grad_scaler *ct_ctx_wrap_scaler(ct_context *ctx, ct_grad_scaler *scaler) {
    const char *why = !ctx ? "ctx is NULL" : !scaler ? "scaler is NULL"
                    : ctx->amp || ctx->scaler ? "AMP is already configured (ct_ctx_use_amp or ct_ctx_wrap_scaler)"
                    : ctx->n_models > 0 ? "call it before ct_ctx_wrap_model (as Determined's wrap_scaler)"
                    : ctx->training ? "call it in the trial's init, before training" : NULL;
    if (why) {
        if (scaler || ct_last_code() == CT_OK) ct_set_error(scaler && ctx ? CT_ESTATE : CT_EINVAL, "ct_ctx_wrap_scaler: %s", why);
        ct_grad_scaler_free(scaler);
        return NULL;
    }
    ctx->scaler = scaler;
    ctx->manual_scaler = true;
    return scaler;
}

ct_amp_opts ct_amp_defaults(void) {
    ct_amp_opts o = {.dtype = CT_F16, .scaler = ct_grad_scaler_defaults()};
    return o;
}

int ct_ctx_use_amp(ct_context *ctx, const ct_amp_opts *o) {
    if (!ctx) return ct_set_error(CT_EINVAL, "ct_ctx_use_amp: ctx is NULL");
    ct_amp_opts d = o ? *o : ct_amp_defaults();
    if (ctx->training) return ct_set_error(CT_ESTATE, "ct_ctx_use_amp: call it in the trial's init, before training");
    if (ctx->amp || ctx->scaler)
        return ct_set_error(CT_ESTATE, "ct_ctx_use_amp: AMP is already configured (ct_ctx_use_amp or ct_ctx_wrap_scaler)");
    if (d.dtype != CT_F16 && d.dtype != CT_BF16)
        return ct_set_error(CT_EDTYPE, "ct_ctx_use_amp: dtype %s: AMP runs in float16 or bfloat16",
                            ct_dtype_name(d.dtype));
    /* Proves the device can autocast to dtype now, rather than at the first batch. */
    int rc = ct_autocast_enter(ctx->device.type, d.dtype);
    if (rc != CT_OK) return rc;
    ct_autocast_exit();
    if (d.dtype == CT_F16 && d.scaler.enabled) {
        ctx->scaler = ct_grad_scaler_new(ctx->device, &d.scaler);
        if (!ctx->scaler) return ct_last_code();
    }
    ctx->amp = true;
    ctx->amp_dtype = d.dtype;
    return CT_OK;
}

ct_grad_scaler *ct_ctx_grad_scaler(const ct_context *ctx) { return ctx ? ctx->scaler : NULL; }

int ct_ctx_add_lr_monitor(ct_context *ctx) {
    if (!ctx) return ct_set_error(CT_EINVAL, "ct_ctx_add_lr_monitor: ctx is NULL");
    if (ctx->training)
        return ct_set_error(CT_ESTATE, "ct_ctx_add_lr_monitor: call it in the trial's init, before training");
    ctx->lr_monitor = true;
    return CT_OK;
}

int ct_ctx_set_profiler(ct_context *ctx, const ct_profiler_opts *o) {
    if (!ctx) return ct_set_error(CT_EINVAL, "ct_ctx_set_profiler: ctx is NULL");
    if (ctx->training)
        return ct_set_error(CT_ESTATE, "ct_ctx_set_profiler: call it in the trial's init, before training");
    /* The options are checked when the profiler starts, right before the
     * run's first batch (ct_profiler_new's errors; training does not start). */
    ctx->profiler_opts = o ? *o : ct_profiler_defaults();
    ctx->profile = true;
    return CT_OK;
}

int ct_ctx_step_optimizer(ct_context *ctx, ct_optim *opt, ct_clip_fn clip, void *clip_ctx) {
    ct_step_opts o = {.clip = clip, .clip_ctx = clip_ctx, .auto_zero_grads = true};
    return ct_ctx_step_optimizer_with(ctx, opt, &o);
}

/* ---- hyperparameters ------------------------------------------------------- */

/* hparams[name], remembered as read (for the warning about hyperparameters
 * the trial never reads). */
static const ct_value *hparam(ct_context *ctx, const char *name) {
    const ct_value *v = ctx && ctx->opts.hparams && name ? ct_value_dict_get(ctx->opts.hparams, name) : NULL;
    if (v && ctx->n_hparams_read < CT_HPARAMS_TRACKED) {
        bool seen = false;
        for (size_t i = 0; i < ctx->n_hparams_read && !seen; i++) seen = ctx->hparams_read[i] == v;
        if (!seen) ctx->hparams_read[ctx->n_hparams_read++] = v;
    }
    return v;
}

/* A value of the wrong type is an error naming the key, the value and the
 * type wanted: recorded now (the getter returns the default), and kept in
 * the context, which fails the trial with it (CT_ECONFIG) as soon as the
 * trial function that read it returns. */
static void wrong_type(ct_context *ctx, const char *name, const char *want, const ct_value *v) {
    json_t *j = cti_json_from_value(v);
    char *text = cti_json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
    json_decref(j);
    ct_set_error(CT_ECONFIG, "hyperparameter '%s' is %s (%s), but the trial reads it as %s", name,
                 text ? text : "?", ct_value_kind_name(ct_value_kind_of(v)), want);
    free(text);
    if (ctx && !ctx->hparam_error[0]) snprintf(ctx->hparam_error, sizeof ctx->hparam_error, "%s", ct_last_error());
}

double ct_ctx_hparam_double(ct_context *ctx, const char *name, double def) {
    const ct_value *v = hparam(ctx, name);
    double d;
    if (!v) return def;
    if (ct_value_get_float(v, &d) == 0) return d;
    wrong_type(ctx, name, "a number", v);
    return def;
}

/* An int, or a float with an integral value (YAML and JSON writers turn
 * 128 into 128.0), as Python's int(128.0) reads it. */
static bool as_int(const ct_value *v, int64_t *out) {
    double d;
    if (ct_value_get_int(v, out) == 0) return true;
    if (ct_value_kind_of(v) != CT_VALUE_FLOAT || ct_value_get_float(v, &d) != 0) return false;
    if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0) || d != (double)(int64_t)d) return false;
    *out = (int64_t)d;
    return true;
}

int64_t ct_ctx_hparam_int(ct_context *ctx, const char *name, int64_t def) {
    const ct_value *v = hparam(ctx, name);
    int64_t i;
    if (!v) return def;
    if (as_int(v, &i)) return i;
    wrong_type(ctx, name, "an integer", v);
    return def;
}

bool ct_ctx_hparam_bool(ct_context *ctx, const char *name, bool def) {
    const ct_value *v = hparam(ctx, name);
    bool b;
    if (!v) return def;
    if (ct_value_get_bool(v, &b) == 0) return b;
    wrong_type(ctx, name, "a bool", v);
    return def;
}

const char *ct_ctx_hparam_str(ct_context *ctx, const char *name, const char *def) {
    const ct_value *v = hparam(ctx, name);
    if (!v) return def;
    if (ct_value_get_str(v)) return ct_value_get_str(v);
    wrong_type(ctx, name, "a string", v);
    return def;
}

int ct_ctx_hparam_double_req(ct_context *ctx, const char *name, double *out) {
    const ct_value *v = hparam(ctx, name);
    if (!v) return ct_set_error(CT_ECONFIG, "hyperparameter '%s' is required but not set", name ? name : "(null)");
    if (ct_value_get_float(v, out) != 0) {
        wrong_type(ctx, name, "a number", v);
        return CT_ECONFIG;
    }
    return CT_OK;
}

int ct_ctx_hparam_int_req(ct_context *ctx, const char *name, int64_t *out) {
    const ct_value *v = hparam(ctx, name);
    if (!v) return ct_set_error(CT_ECONFIG, "hyperparameter '%s' is required but not set", name ? name : "(null)");
    if (!as_int(v, out)) {
        wrong_type(ctx, name, "an integer", v);
        return CT_ECONFIG;
    }
    return CT_OK;
}

int cti_context_hparam_failure(const ct_context *ctx) {
    return ctx->hparam_error[0] ? ct_set_error(CT_ECONFIG, "%s", ctx->hparam_error) : CT_OK;
}

/* The whole dict: the trial may read any of it, so none is warned about. */
const ct_value *ct_ctx_hparams(const ct_context *ctx) {
    if (ctx) ((ct_context *)ctx)->hparams_all_read = true;
    return ctx ? ctx->opts.hparams : NULL;
}
const ct_value *ct_ctx_data_config(const ct_context *ctx) { return ctx ? ctx->opts.data : NULL; }

/* ---- queries --------------------------------------------------------------- */

int64_t ct_ctx_cuda_graph_captures(const ct_context *ctx) { return ctx ? cti_graph_step_captures(ctx->graph) : 0; }
ct_module *ct_ctx_model(const ct_context *ctx, size_t i) { return ctx && i < ctx->n_models ? ctx->models[i] : NULL; }
ct_optim *ct_ctx_optimizer(const ct_context *ctx, size_t i) { return ctx && i < ctx->n_optims ? ctx->optims[i] : NULL; }

int64_t ct_ctx_global_batch_size(const ct_context *ctx) { return ctx ? ctx->global_batch_size : 0; }
int64_t ct_ctx_per_slot_batch_size(const ct_context *ctx) { return ctx ? ctx->per_slot_batch_size : 0; }
int ct_ctx_rank(const ct_context *ctx) { return ctx ? ctx->rank : 0; }
int ct_ctx_size(const ct_context *ctx) { return ctx ? ctx->size : 1; }
int ct_ctx_local_rank(const ct_context *ctx) { return ctx ? ctx->local_rank : 0; }
ct_device ct_ctx_device(const ct_context *ctx) { return ctx ? ctx->device : ct_cpu(); }
uint64_t ct_ctx_trial_seed(const ct_context *ctx) { return ctx ? ctx->trial_seed : 0; }
int ct_ctx_aggregation_frequency(const ct_context *ctx) { return ctx ? ctx->aggregation_frequency : 1; }
int64_t ct_ctx_initial_batch(const ct_context *ctx) { return ctx ? ctx->pos.initial_batch : 0; }
/* Determined raises "Training hasn't started" before the first batch of
 * this run; here the answer is -1 (false) with CT_ESTATE recorded. */
static bool started(const ct_context *ctx, const char *fn) {
    if (ctx && ctx->pos.current_batch >= 0) return true;
    ct_set_error(CT_ESTATE, "%s: training hasn't started (no batch of this run yet)", fn);
    return false;
}

int64_t ct_ctx_current_batch(const ct_context *ctx) { return started(ctx, __func__) ? ctx->pos.current_batch : -1; }

int64_t ct_ctx_current_epoch(const ct_context *ctx) {
    if (!started(ctx, __func__)) return -1;
    return ctx->pos.epoch_len > 0 ? ctx->pos.current_batch / ctx->pos.epoch_len : 0;
}

bool ct_ctx_is_epoch_start(const ct_context *ctx) {
    return started(ctx, __func__) && ctx->pos.epoch_len > 0 && ctx->pos.current_batch % ctx->pos.epoch_len == 0;
}

bool ct_ctx_is_epoch_end(const ct_context *ctx) {
    return started(ctx, __func__) && ctx->pos.epoch_len > 0 && ctx->pos.current_batch % ctx->pos.epoch_len == ctx->pos.epoch_len - 1;
}

int64_t ct_ctx_epoch_length(const ct_context *ctx) { return ctx ? ctx->pos.epoch_len : -1; }

void ct_ctx_set_stop_requested(ct_context *ctx, bool stop) {
    if (ctx) ctx->stop_requested = stop;
}
bool ct_ctx_get_stop_requested(const ct_context *ctx) { return ctx && ctx->stop_requested; }
void ct_ctx_request_stop(ct_context *ctx) { ct_ctx_set_stop_requested(ctx, true); }

int ct_ctx_should_exit(ct_context *ctx, bool skip_checkpoint) {
    if (!ctx) return ct_set_error(CT_EINVAL, "ct_ctx_should_exit: ctx is NULL");
    ctx->exit_requested = skip_checkpoint ? 2 : 1;
    return ct_set_error(CT_EEXIT, "the trial asked to exit (ct_ctx_should_exit%s)",
                        skip_checkpoint ? ", without a checkpoint" : "");
}

/* ---- the trial's surroundings ------------------------------------------------ */

const ct_value *ct_ctx_experiment_config(const ct_context *ctx) { return ctx ? ctx->opts.experiment_config : NULL; }
void *ct_ctx_user_data(const ct_context *ctx) { return ctx ? ctx->opts.user : NULL; }
int64_t ct_ctx_experiment_id(const ct_context *ctx) { return ctx ? ctx->opts.experiment_id : 0; }
int64_t ct_ctx_trial_id(const ct_context *ctx) { return ctx ? ctx->opts.trial_id : 0; }
const char *ct_ctx_tensorboard_path(const ct_context *ctx) { return ctx ? ctx->opts.output_dir : NULL; }

ct_summary_writer *ct_ctx_tensorboard_writer(ct_context *ctx) {
    if (!ctx || ctx->rank != 0 || !ctx->tensorboard) return NULL;
    if (!ctx->summary) ctx->summary = ct_summary_open(ctx->opts.output_dir);
    return ctx->summary;
}

void ct_ctx_set_enable_tensorboard_logging(ct_context *ctx, bool on) {
    if (ctx) ctx->tensorboard = on;
}
bool ct_ctx_get_enable_tensorboard_logging(const ct_context *ctx) { return ctx && ctx->tensorboard; }

/* ---- data ------------------------------------------------------------------- */

void ct_ctx_disable_auto_to_device(ct_context *ctx) {
    if (ctx) ctx->auto_to_device = false;
}

ct_value *ct_ctx_to_device(ct_context *ctx, const ct_value *v) {
    if (!ctx || !v) {
        if (!ctx || ct_last_code() == CT_OK) ct_set_error(CT_EINVAL, "ct_ctx_to_device: %s is NULL", ctx ? "value" : "ctx");
        return NULL;
    }
    return ct_value_to_device(v, ctx->device, false);
}

void ct_ctx_disable_dataset_reproducibility_checks(ct_context *ctx) {
    if (ctx) ctx->repro_checks = false;
}

int ct_ctx_add_validation_loader(ct_context *ctx, const char *name, ct_loader *loader) {
    int rc = CT_OK;
    if (!ctx || !loader) rc = ct_set_error(CT_EINVAL, "ct_ctx_add_validation_loader: %s is NULL", ctx ? "loader" : "ctx");
    else if (ctx->val_loaders_closed)
        rc = ct_set_error(CT_ESTATE, "ct_ctx_add_validation_loader: call it in build_validation_data_loader or init");
    else if (!name || !name[0] || strlen(name) > 200 || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                                     "0123456789_-.") != strlen(name))
        rc = ct_set_error(CT_EINVAL, "ct_ctx_add_validation_loader: the name '%s' must be 1 to 200 letters, digits, "
                          "'_', '-' or '.'", name ? name : "(null)");
    for (size_t i = 0; rc == CT_OK && i < ctx->n_val_loaders; i++)
        if (!strcmp(ctx->val_loaders[i].name, name))
            rc = ct_set_error(CT_EINVAL, "ct_ctx_add_validation_loader: '%s' is already a validation loader", name);
    cti_named_loader v = {.loader = loader};
    if (rc == CT_OK && !(v.name = strdup(name))) rc = ct_set_error(CT_ENOMEM, "ct_ctx_add_validation_loader: out of memory");
    if (rc == CT_OK && !push((void **)&ctx->val_loaders, &ctx->n_val_loaders, sizeof v, &v))
        rc = ct_set_error(CT_ENOMEM, "ct_ctx_add_validation_loader: out of memory");
    if (rc != CT_OK) {
        free(v.name);
        ct_loader_free(loader);
    }
    return rc;
}

const char *ct_ctx_validation_loader_name(const ct_context *ctx) { return ctx ? ctx->val_name : NULL; }
