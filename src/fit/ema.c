/* src/fit/ema.c — an exponential moving average of a model's weights as a
 * stock callback (callback.h): torch.optim.swa_utils.AveragedModel with
 * get_ema_avg_fn, driven as Lightning's EMAWeightAveraging drives it.
 *
 * The average is a copy of the model's state-dict entries (parameters and
 * persistent buffers). After each batch that steps the optimizer (ema.h,
 * called by the loop) it moves towards the model's weights; around each
 * validation the model and the average trade values (ema.h), so the trial
 * validates the averaged weights; its state goes into checkpoints as the
 * callback's, the averaged state dict beside the model's. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/callback.h"
#include "ctrial/error.h"
#include "ctrial/nn.h"
#include "ctrial/tensor.h"
#include "ctrial/value.h"
#include "fit/context.h"
#include "fit/ema.h"

struct cti_ema {
    ct_ema_opts o;
    ct_module *model;            /* the averaged model (borrowed: the context owns it) */
    ct_value *avg;               /* its averaged state dict: NEW clones, in the model's order */
    bool *is_param;              /* per entry: a parameter (always averaged) or a buffer */
    size_t n;
    int64_t n_averaged;          /* AveragedModel.n_averaged */
    int64_t latest_update_step;  /* Lightning's _latest_update_step: optimizer steps when last updated */
    char name[32];               /* the callback's name: "ema", "ema_1", ... */
};

ct_ema_opts ct_ema_defaults(void) {
    return (ct_ema_opts){.decay = 0.999, .use_buffers = true, .update_every_n_steps = 1, .validate_with_average = true};
}

/* The averaged copy of the model's state, made once (when training starts,
 * or before, to load a checkpoint's average into): clones of every entry,
 * as AveragedModel deep-copies the module. */
static int ensure_average(cti_ema *e) {
    if (e->avg) return CT_OK;
    ct_value *sd = ct_nn_state_dict(e->model);
    e->avg = sd ? ct_value_copy(sd, true) : NULL;
    ct_value_free(sd);
    if (!e->avg) return ct_set_error(ct_last_code(), "%s: copying the model's state: %s", e->name, ct_last_error());
    e->n = ct_value_len(e->avg);
    e->is_param = calloc(e->n ? e->n : 1, sizeof *e->is_param);
    if (!e->is_param) return ct_set_error(CT_ENOMEM, "%s: out of memory", e->name);
    for (size_t i = 0; i < e->n; i++) {
        const ct_tensor *t = ct_nn_state_at(e->model, i, NULL);
        for (size_t p = 0; p < ct_nn_num_params(e->model) && !e->is_param[i]; p++)
            e->is_param[i] = ct_nn_param_at(e->model, p, NULL) == t;
    }
    return CT_OK;
}

static ct_tensor *avg_at(const cti_ema *e, size_t i) {
    return ct_value_get_tensor(ct_value_dict_at(e->avg, i, NULL, NULL));
}

/* AveragedModel.update_parameters with avg_fn = get_ema_avg_fn(decay): the
 * first update copies the model; later ones set each averaged entry to
 * decay * avg + (1 - decay) * current, buffers too with use_buffers (else
 * the buffers are copied). */
static int update(cti_ema *e) {
    int rc = ensure_average(e);
    if (rc != CT_OK) return rc;
    ct_guard *g = ct_no_grad();
    for (size_t i = 0; i < e->n && rc == CT_OK; i++) {
        ct_scope *s = ct_scope_begin();
        ct_tensor *avg = avg_at(e, i);
        const ct_tensor *cur = ct_nn_state_at(e->model, i, NULL);
        if (e->n_averaged == 0 || (!e->is_param[i] && !e->o.use_buffers)) {
            rc = ct_copy_(avg, cur);
        } else {
            ct_tensor *next = ct_add(ct_mul_scalar(avg, e->o.decay), ct_mul_scalar(cur, 1 - e->o.decay));
            rc = next ? ct_copy_(avg, next) : ct_last_code();
        }
        ct_scope_end(s);
    }
    ct_guard_end(g);
    if (rc != CT_OK) return ct_set_error(rc, "%s: updating the average: %s", e->name, ct_last_error());
    e->n_averaged++;
    return CT_OK;
}

int cti_ema_after_step(ct_context *ctx, int64_t steps) {
    for (size_t k = 0; k < ctx->n_emas; k++) {
        cti_ema *e = ctx->emas[k];
        /* Lightning's should_update(step_idx): from update_starting_at_step,
         * every update_every_n_steps-th optimizer step (zero-based). */
        int64_t step_idx = steps - 1;
        if (steps <= e->latest_update_step || step_idx < e->o.update_starting_at_step ||
            step_idx % e->o.update_every_n_steps != 0)
            continue;
        int rc = update(e);
        if (rc != CT_OK) return rc;
        e->latest_update_step = steps;
    }
    return CT_OK;
}

/* Lightning's _swap_models: the model's and the average's values trade
 * places, entry by entry. */
static int swap(cti_ema *e) {
    int rc = ensure_average(e);
    ct_guard *g = ct_no_grad();
    for (size_t i = 0; i < e->n && rc == CT_OK; i++) {
        ct_scope *s = ct_scope_begin();
        ct_tensor *avg = avg_at(e, i), *cur = ct_nn_state_at(e->model, i, NULL);
        ct_tensor *tmp = ct_clone(avg);
        rc = tmp ? ct_copy_(avg, cur) : ct_last_code();
        if (rc == CT_OK) rc = ct_copy_(cur, tmp);
        ct_scope_end(s);
    }
    ct_guard_end(g);
    return rc == CT_OK ? CT_OK : ct_set_error(rc, "%s: swapping the averaged weights in: %s", e->name, ct_last_error());
}

int cti_ema_swap(ct_context *ctx) {
    for (size_t k = 0; k < ctx->n_emas; k++) {
        if (!ctx->emas[k]->o.validate_with_average) continue;
        int rc = swap(ctx->emas[k]);
        if (rc != CT_OK) return rc;
    }
    return CT_OK;
}

/* ---- checkpoints -------------------------------------------------------- */

/* {"state_dict": the averaged state dict (the model's names),
 *  "n_averaged": AveragedModel's count, "latest_update_step": Lightning's} */
static ct_value *state_dict(void *self) {
    cti_ema *e = self;
    if (ensure_average(e) != CT_OK) return NULL;
    ct_value *d = ct_value_dict();
    ct_value *avg = ct_value_copy(e->avg, false);
    if (!d || !avg || ct_value_dict_set(d, "state_dict", avg) ||
        ct_value_dict_set(d, "n_averaged", ct_value_int(e->n_averaged)) ||
        ct_value_dict_set(d, "latest_update_step", ct_value_int(e->latest_update_step))) {
        ct_value_free(d);
        ct_set_error(CT_ENOMEM, "%s: out of memory", e->name);
        return NULL;
    }
    return d;
}

static int load_state_dict(void *self, const ct_value *state) {
    cti_ema *e = self;
    int64_t n_averaged = 0, latest = 0;
    const ct_value *sd = ct_value_dict_get(state, "state_dict");
    if (!sd || ct_value_kind_of(sd) != CT_VALUE_DICT || ct_value_get_int(ct_value_dict_get(state, "n_averaged"), &n_averaged) ||
        ct_value_get_int(ct_value_dict_get(state, "latest_update_step"), &latest) || n_averaged < 0)
        return ct_set_error(CT_ECHECKPOINT, "%s: its checkpointed state lacks state_dict, n_averaged or "
                            "latest_update_step", e->name);
    int rc = ensure_average(e);
    if (rc != CT_OK) return rc;
    /* every entry present with the model's shape and dtype before any is copied */
    for (size_t i = 0; i < e->n; i++) {
        const char *key = NULL;
        ct_tensor *avg = ct_value_get_tensor(ct_value_dict_at(e->avg, i, &key, NULL));
        const ct_value *v = ct_value_dict_get(sd, key);
        const ct_tensor *saved = v && ct_value_kind_of(v) == CT_VALUE_TENSOR ? ct_value_get_tensor(v) : NULL;
        ct_clear_error();
        if (!saved)
            return ct_set_error(CT_ECHECKPOINT, "%s: the checkpoint's averaged state dict has no tensor '%s'",
                                e->name, key);
        bool same = ct_dtype_of(saved) == ct_dtype_of(avg) && ct_ndim(saved) == ct_ndim(avg);
        for (int d = 0; same && d < ct_ndim(avg); d++) same = ct_size(saved, d) == ct_size(avg, d);
        if (!same)
            return ct_set_error(CT_ECHECKPOINT, "%s: the checkpoint's averaged '%s' differs from the model's in "
                                "shape or dtype", e->name, key);
    }
    if (ct_value_len(sd) != e->n)
        return ct_set_error(CT_ECHECKPOINT, "%s: the checkpoint's averaged state dict has %zu entries, the model "
                            "%zu", e->name, ct_value_len(sd), e->n);
    ct_guard *g = ct_no_grad();
    for (size_t i = 0; i < e->n && rc == CT_OK; i++) {
        const char *key = NULL;
        ct_tensor *avg = ct_value_get_tensor(ct_value_dict_at(e->avg, i, &key, NULL));
        rc = ct_copy_(avg, ct_value_get_tensor(ct_value_dict_get(sd, key)));
    }
    ct_guard_end(g);
    if (rc != CT_OK) return ct_set_error(rc, "%s: loading the average: %s", e->name, ct_last_error());
    e->n_averaged = n_averaged;
    e->latest_update_step = latest;
    return CT_OK;
}

static void free_self(void *self) {
    cti_ema *e = self;
    if (!e) return;
    ct_value_free(e->avg);
    free(e->is_param);
    free(e);
}

/* AveragedModel's deep copy, made when training starts (Lightning makes it
 * at setup): the model as training begins, after a warm start's weights;
 * a resumed run's average was loaded from its checkpoint before. */
static int on_training_start(void *self, ct_context *ctx) { return ensure_average(self); }

/* The wrapped model's index (n_models: not one of them). */
static size_t model_index(const ct_context *ctx, const ct_module *model) {
    size_t k = 0;
    while (k < ctx->n_models && ctx->models[k] != model) k++;
    return k;
}

static bool averaged(const ct_context *ctx, const ct_module *model) {
    for (size_t i = 0; i < ctx->n_emas; i++)
        if (ctx->emas[i]->model == model) return true;
    return false;
}

/* The average of wrapped model k, registered as the callback "ema" (model
 * 0) or "ema_<k>", which owns it and frees it. */
static int add_one(ct_context *ctx, size_t k, const ct_ema_opts *o) {
    if (averaged(ctx, ctx->models[k]))
        return ct_set_error(CT_EINVAL, "ct_ctx_add_ema: model %zu already has an average", k);
    cti_ema **grown = realloc(ctx->emas, (ctx->n_emas + 1) * sizeof *grown);
    cti_ema *e = calloc(1, sizeof *e);
    if (grown) ctx->emas = grown;
    if (!grown || !e) {
        free(e);
        return ct_set_error(CT_ENOMEM, "ct_ctx_add_ema: out of memory");
    }
    e->o = *o;
    e->model = ctx->models[k];
    if (k == 0) snprintf(e->name, sizeof e->name, "ema");
    else snprintf(e->name, sizeof e->name, "ema_%zu", k);
    ct_callback cb = {.name = e->name, .self = e, .on_training_start = on_training_start,
                      .state_dict = state_dict, .load_state_dict = load_state_dict, .free = free_self};
    int rc = ct_ctx_add_callback(ctx, &cb);
    if (rc != CT_OK) {
        free_self(e);
        return rc;
    }
    ctx->emas[ctx->n_emas++] = e;
    return CT_OK;
}

int ct_ctx_add_ema(ct_context *ctx, ct_module *model, const ct_ema_opts *o) {
    if (!ctx) return ct_set_error(CT_EINVAL, "ct_ctx_add_ema: ctx is NULL");
    ct_ema_opts d = ct_ema_defaults();
    if (!o) o = &d;
    if (!(o->decay >= 0 && o->decay <= 1))
        return ct_set_error(CT_EINVAL, "ct_ctx_add_ema: decay %g is outside [0, 1]", o->decay);
    if (o->update_every_n_steps < 1 || o->update_starting_at_step < 0)
        return ct_set_error(CT_EINVAL, "ct_ctx_add_ema: update_every_n_steps %lld must be >= 1 and "
                            "update_starting_at_step %lld >= 0", (long long)o->update_every_n_steps,
                            (long long)o->update_starting_at_step);
    if (ctx->training) return ct_set_error(CT_ESTATE, "ct_ctx_add_ema: call it in the trial's init, before training");
    if (!model) {
        ctx->ema_all = true; /* every model the trial wraps: cti_ema_start */
        ctx->ema_all_opts = *o;
        return CT_OK;
    }
    size_t k = model_index(ctx, model);
    if (k == ctx->n_models)
        return ct_set_error(CT_EINVAL, "ct_ctx_add_ema: the model is not one the trial wrapped (ct_ctx_wrap_model)");
    return add_one(ctx, k, o);
}

int cti_ema_start(ct_context *ctx) {
    if (!ctx->ema_all) return CT_OK;
    ctx->ema_all = false;
    for (size_t k = 0; k < ctx->n_models; k++) {
        int rc = averaged(ctx, ctx->models[k]) ? CT_OK : add_one(ctx, k, &ctx->ema_all_opts);
        if (rc != CT_OK) return rc;
    }
    return CT_OK;
}
