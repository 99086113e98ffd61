/* src/fit/early_stopping.c — Lightning's EarlyStopping as a stock callback
 * (callback.h), on the public callback API alone: on_validation_end, and
 * its state under Lightning's keys in checkpoints. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/callback.h"
#include "ctrial/error.h"
#include "ctrial/value.h"

typedef struct {
    ct_early_stopping_opts o;
    char *monitor;       /* o.monitor's copy */
    double best;         /* best_score: +inf (min) or -inf (max) before the first */
    int64_t wait_count;
    int64_t stopped_epoch;
} early_stopping;

ct_early_stopping_opts ct_early_stopping_defaults(void) {
    return (ct_early_stopping_opts){.patience = 3, .strict = true, .check_finite = true};
}

/* Lightning's monitor_op: better than, strictly. */
static bool better(const early_stopping *e, double a, double b) { return e->o.maximize ? a > b : a < b; }

static void say(const early_stopping *e, ct_context *ctx, const char *fmt, double a, double b) {
    if (ct_ctx_rank(ctx) != 0) return;
    printf("early stopping: ");
    printf(fmt, e->monitor, a, b);
    printf("\n");
    fflush(stdout);
}

static int on_validation_end(void *self, ct_context *ctx, const ct_value *metrics) {
    early_stopping *e = self;
    double current = 0;
    const ct_value *v = ct_value_dict_get(metrics, e->monitor);
    if (!v || ct_value_get_float(v, &current) != 0) {
        ct_clear_error();
        if (!e->o.strict) return CT_OK;
        return ct_set_error(CT_ETRIAL, "early stopping: the validation metrics have no number '%s' to monitor "
                            "(set ct_early_stopping_opts.strict = false to skip such validations)", e->monitor);
    }
    /* Lightning: min_delta counts towards the better side */
    double delta = e->o.maximize ? e->o.min_delta : -e->o.min_delta;
    bool stop = false;
    if (e->o.check_finite && !isfinite(current)) {
        stop = true;
        say(e, ctx, "%s = %g is not finite; the best was %g: stopping", current, e->best);
    } else if (e->o.has_stopping_threshold && better(e, current, e->o.stopping_threshold)) {
        stop = true;
        say(e, ctx, "%s = %g is past the stopping threshold %g: stopping", current, e->o.stopping_threshold);
    } else if (e->o.has_divergence_threshold && better(e, -current, -e->o.divergence_threshold)) {
        stop = true;
        say(e, ctx, "%s = %g is past the divergence threshold %g: stopping", current, e->o.divergence_threshold);
    } else if (better(e, current - delta, e->best)) {
        if (e->o.verbose) say(e, ctx, "%s improved to %g (the best was %g)", current, e->best);
        e->best = current;
        e->wait_count = 0;
    } else if (++e->wait_count >= e->o.patience) {
        stop = true;
        if (ct_ctx_rank(ctx) == 0) {
            printf("early stopping: %s did not improve in the last %lld validations; the best is %g: stopping\n",
                   e->monitor, (long long)e->wait_count, e->best);
            fflush(stdout);
        }
    }
    if (stop) {
        e->stopped_epoch = ct_ctx_current_epoch(ctx);
        ct_ctx_request_stop(ctx);
    }
    return CT_OK;
}

static ct_value *state_dict(void *self) {
    const early_stopping *e = self;
    ct_value *d = ct_value_dict();
    if (!d || ct_value_dict_set(d, "wait_count", ct_value_int(e->wait_count)) ||
        ct_value_dict_set(d, "stopped_epoch", ct_value_int(e->stopped_epoch)) ||
        ct_value_dict_set(d, "best_score", ct_value_float(e->best)) ||
        ct_value_dict_set(d, "patience", ct_value_int(e->o.patience))) {
        ct_value_free(d);
        ct_set_error(CT_ENOMEM, "early stopping: out of memory");
        return NULL;
    }
    return d;
}

static int load_state_dict(void *self, const ct_value *state) {
    early_stopping *e = self;
    int64_t wait = 0, stopped = 0;
    double best = 0;
    if (ct_value_get_int(ct_value_dict_get(state, "wait_count"), &wait) != 0 ||
        ct_value_get_int(ct_value_dict_get(state, "stopped_epoch"), &stopped) != 0 ||
        ct_value_get_float(ct_value_dict_get(state, "best_score"), &best) != 0 || wait < 0)
        return ct_set_error(CT_ECHECKPOINT, "early stopping: its checkpointed state lacks wait_count, stopped_epoch "
                            "or best_score");
    e->wait_count = wait;
    e->stopped_epoch = stopped;
    e->best = best;
    return CT_OK; /* patience is the run's own, as Lightning takes it from the checkpoint only when unset */
}

static void free_self(void *self) {
    early_stopping *e = self;
    if (e) free(e->monitor);
    free(e);
}

int ct_ctx_add_early_stopping(ct_context *ctx, const ct_early_stopping_opts *o) {
    if (!ctx || !o) return ct_set_error(CT_EINVAL, "ct_ctx_add_early_stopping: ctx or opts is NULL");
    if (!o->monitor || !o->monitor[0])
        return ct_set_error(CT_EINVAL, "ct_ctx_add_early_stopping: no metric to monitor (opts.monitor)");
    if (o->patience < 0) return ct_set_error(CT_EINVAL, "ct_ctx_add_early_stopping: patience %d < 0", o->patience);
    early_stopping *e = calloc(1, sizeof *e);
    if (!e || !(e->monitor = strdup(o->monitor))) {
        free(e);
        return ct_set_error(CT_ENOMEM, "ct_ctx_add_early_stopping: out of memory");
    }
    e->o = *o;
    e->o.monitor = e->monitor;
    e->best = o->maximize ? -INFINITY : INFINITY;
    ct_callback cb = {.name = "early_stopping",
                      .self = e,
                      .on_validation_end = on_validation_end,
                      .state_dict = state_dict,
                      .load_state_dict = load_state_dict,
                      .free = free_self};
    int rc = ct_ctx_add_callback(ctx, &cb);
    if (rc != CT_OK) free_self(e); /* not registered: its free is never called */
    return rc;
}
