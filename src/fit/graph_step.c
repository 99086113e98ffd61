/* src/fit/graph_step.c — the training step as a CUDA graph: warm-up on a side
 * stream, capture, replay with static inputs and outputs, re-capture when
 * the optimizers' hyperparameters move (graph_step.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/cuda.h"
#include "fit/graph_step.h"

struct cti_graph_step {
    ct_cuda_graph *graph;
    int device;
    int warmup;              /* warm-up batches to run before the capture */
    int warmed;              /* warm-up batches run so far */
    bool captured;           /* graph, static_batch and outputs are current */
    ct_value *static_batch;  /* the inputs the graph reads (device copies) */
    ct_value *outputs;       /* the metrics the graph writes */
    double *hyper;           /* optimizer hyperparameters at capture (walk_hyper) */
    size_t n_hyper;
    int64_t captures;        /* captures so far */
    int64_t last_change;     /* batch at which a change last re-captured */
};

/* ---- messages ----------------------------------------------------------------- */

/* Where a value sits in the batch: "x", "[0]", "inputs[1]", "a.b". */
typedef struct {
    char s[256];
    size_t n;
} path_buf;

static size_t push_index(path_buf *p, size_t i) {
    size_t old = p->n;
    snprintf(p->s + p->n, sizeof p->s - p->n, "[%zu]", i);
    p->n = strlen(p->s);
    return old;
}

static size_t push_key(path_buf *p, const char *skey, int64_t ikey) {
    size_t old = p->n;
    if (skey) snprintf(p->s + p->n, sizeof p->s - p->n, "%s%s", p->n ? "." : "", skey);
    else snprintf(p->s + p->n, sizeof p->s - p->n, "[%lld]", (long long)ikey);
    p->n = strlen(p->s);
    return old;
}

static void pop(path_buf *p, size_t old) {
    p->n = old;
    p->s[old] = '\0';
}

/* "leaf 'x'", or "batch" for the root itself. */
static const char *where(const path_buf *p, char *buf, size_t len) {
    if (p->n == 0) snprintf(buf, len, "batch");
    else snprintf(buf, len, "leaf '%s'", p->s);
    return buf;
}

/* "[17,784]" */
static void shape_text(const ct_tensor *t, char *buf, size_t len) {
    int64_t sh[64];
    int n = ct_shape(t, sh, 64);
    size_t at = 0;
    at += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < n && i < 64 && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? "," : "", (long long)sh[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
}

static void scalar_text(const ct_value *v, char *buf, size_t len) {
    bool b;
    int64_t i;
    double d;
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_NONE: snprintf(buf, len, "None"); break;
    case CT_VALUE_BOOL: ct_value_get_bool(v, &b); snprintf(buf, len, "%s", b ? "True" : "False"); break;
    case CT_VALUE_INT: ct_value_get_int(v, &i); snprintf(buf, len, "%lld", (long long)i); break;
    case CT_VALUE_FLOAT: ct_value_get_float(v, &d); snprintf(buf, len, "%.9g", d); break;
    case CT_VALUE_STR: snprintf(buf, len, "'%s'", ct_value_get_str(v)); break;
    default: snprintf(buf, len, "a %s", ct_value_kind_name(ct_value_kind_of(v))); break;
    }
}

typedef struct {
    int code;
    char msg[2048];
} saved_error;

static void save_error(saved_error *e) {
    e->code = ct_last_code();
    snprintf(e->msg, sizeof e->msg, "%s", ct_last_error());
}

static int restore_error(const saved_error *e) {
    if (e->code == CT_OK) {
        ct_clear_error();
        return CT_OK;
    }
    return ct_set_error(e->code, "%s", e->msg);
}

/* Prefixes the last error with the batch whose capture failed. */
static ct_value *capture_failed(int64_t batch_idx) {
    saved_error e;
    save_error(&e);
    ct_set_error(e.code != CT_OK ? e.code : CT_ETORCH, "CUDA graphs: capturing the training step at batch %lld: %s",
                 (long long)batch_idx, e.msg);
    return NULL;
}

/* ---- the batch ------------------------------------------------------------------ */

/* A deep copy of the batch for the graph to read: every tensor cloned on
 * the device (detached), host values copied. NEW, or NULL + error. */
static ct_value *static_copy(const ct_value *b, ct_device dev, path_buf *p, int64_t batch_idx) {
    char at[300], here[32], want[32];
    ct_value_kind k = ct_value_kind_of(b);
    switch (k) {
    case CT_VALUE_TENSOR: {
        const ct_tensor *t = ct_value_get_tensor(b);
        ct_device d = ct_device_of(t);
        if (d.type != CT_CUDA || d.index != dev.index) {
            ct_device_format(d, here, sizeof here);
            ct_device_format(dev, want, sizeof want);
            ct_set_error(CT_EDEVICE, "CUDA graphs: batch %lld's %s is on %s, but the graph reads its inputs on %s: "
                                     "give the training loader that device (ct_loader_opts.device)",
                         (long long)batch_idx, where(p, at, sizeof at), here, want);
            return NULL;
        }
        ct_tensor *alias = ct_detach(t);
        ct_tensor *c = ct_clone(alias);
        ct_tensor_free(alias);
        return c ? ct_value_tensor(c) : NULL;
    }
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE: {
        ct_value *out = k == CT_VALUE_LIST ? ct_value_list() : ct_value_tuple();
        for (size_t i = 0; out && i < ct_value_len(b); i++) {
            size_t old = push_index(p, i);
            ct_value *item = static_copy(ct_value_list_get(b, i), dev, p, batch_idx);
            pop(p, old);
            if (!item || ct_value_list_append(out, item) != CT_OK) {
                ct_value_free(out);
                return NULL;
            }
        }
        return out;
    }
    case CT_VALUE_DICT: {
        ct_value *out = ct_value_dict();
        for (size_t i = 0; out && i < ct_value_len(b); i++) {
            const char *skey = NULL;
            int64_t ikey = 0;
            const ct_value *child = ct_value_dict_at(b, i, &skey, &ikey);
            size_t old = push_key(p, skey, ikey);
            ct_value *item = static_copy(child, dev, p, batch_idx);
            pop(p, old);
            if (!item || (skey ? ct_value_dict_set(out, skey, item) : ct_value_dict_set_int(out, ikey, item)) != CT_OK) {
                ct_value_free(out);
                return NULL;
            }
        }
        return out;
    }
    default: return ct_value_copy(b, false);
    }
}

/* Checks that batch b is shaped like the static batch s (structure, dtypes,
 * shapes, devices, equal host values) and, with copy, copies its tensors
 * into s's on the current stream. Returns a status. */
static int match(const ct_value *s, const ct_value *b, path_buf *p, int64_t batch_idx, bool copy) {
    char at[300];
    long long bi = (long long)batch_idx;
    ct_value_kind k = ct_value_kind_of(s), kb = ct_value_kind_of(b);
    if (k != kb)
        return ct_set_error(CT_ESHAPE, "CUDA graphs need static batches: batch %lld's %s is a %s, the captured one a %s",
                            bi, where(p, at, sizeof at), ct_value_kind_name(kb), ct_value_kind_name(k));
    switch (k) {
    case CT_VALUE_TENSOR: {
        ct_tensor *ts = ct_value_get_tensor(s);
        const ct_tensor *tb = ct_value_get_tensor(b);
        ct_device ds = ct_device_of(ts), db = ct_device_of(tb);
        if (ds.type != db.type || ds.index != db.index) {
            char here[32], want[32];
            ct_device_format(db, here, sizeof here);
            ct_device_format(ds, want, sizeof want);
            return ct_set_error(CT_EDEVICE, "CUDA graphs: batch %lld's %s is on %s, the captured one on %s", bi,
                                where(p, at, sizeof at), here, want);
        }
        if (ct_dtype_of(ts) != ct_dtype_of(tb))
            return ct_set_error(CT_ESHAPE, "CUDA graphs need static dtypes: batch %lld's %s is %s, captured %s", bi,
                                where(p, at, sizeof at), ct_dtype_name(ct_dtype_of(tb)), ct_dtype_name(ct_dtype_of(ts)));
        int64_t ss[64], sb[64];
        int ns = ct_shape(ts, ss, 64), nb = ct_shape(tb, sb, 64);
        if (ns != nb || (ns > 0 && memcmp(ss, sb, (size_t)(ns < 64 ? ns : 64) * sizeof *ss) != 0)) {
            char has[256], had[256];
            shape_text(tb, has, sizeof has);
            shape_text(ts, had, sizeof had);
            return ct_set_error(CT_ESHAPE, "CUDA graphs need static shapes: batch %lld's %s is %s, captured %s: "
                                           "every batch must have the shapes of the captured one (pad or bucket "
                                           "data of varying size; a batch sampler of your own needs drop_last)",
                                bi, where(p, at, sizeof at), has, had);
        }
        if (copy && ct_copy_(ts, tb) != CT_OK) {
            saved_error e;
            save_error(&e);
            return ct_set_error(e.code, "CUDA graphs: copying batch %lld's %s into the captured input: %s", bi,
                                where(p, at, sizeof at), e.msg);
        }
        return CT_OK;
    }
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
    case CT_VALUE_DICT: {
        size_t n = ct_value_len(s);
        if (ct_value_len(b) != n)
            return ct_set_error(CT_ESHAPE, "CUDA graphs need static batches: batch %lld's %s has %zu items, the "
                                           "captured one %zu",
                                bi, where(p, at, sizeof at), ct_value_len(b), n);
        for (size_t i = 0; i < n; i++) {
            const ct_value *cs, *cb;
            size_t old;
            if (k == CT_VALUE_DICT) {
                const char *ks = NULL, *kb2 = NULL;
                int64_t is = 0, ib = 0;
                cs = ct_value_dict_at(s, i, &ks, &is);
                cb = ct_value_dict_at(b, i, &kb2, &ib);
                bool same = ks ? kb2 && strcmp(ks, kb2) == 0 : !kb2 && is == ib;
                if (!same) {
                    char want[128], got[128];
                    if (ks) snprintf(want, sizeof want, "'%s'", ks);
                    else snprintf(want, sizeof want, "%lld", (long long)is);
                    if (kb2) snprintf(got, sizeof got, "'%s'", kb2);
                    else snprintf(got, sizeof got, "%lld", (long long)ib);
                    return ct_set_error(CT_ESHAPE, "CUDA graphs need static batches: batch %lld's %s has key %s "
                                                   "where the captured one had %s",
                                        bi, where(p, at, sizeof at), got, want);
                }
                old = push_key(p, ks, is);
            } else {
                cs = ct_value_list_get(s, i);
                cb = ct_value_list_get(b, i);
                old = push_index(p, i);
            }
            int rc = match(cs, cb, p, batch_idx, copy);
            pop(p, old);
            if (rc != CT_OK) return rc;
        }
        return CT_OK;
    }
    default:
        if (!ct_value_equal(s, b)) {
            char has[128], had[128];
            scalar_text(b, has, sizeof has);
            scalar_text(s, had, sizeof had);
            return ct_set_error(CT_ENOTSUP, "CUDA graphs: batch %lld's %s is %s, captured %s: train_batch read it on "
                                            "the host when the step was captured, and the graph replays that; put "
                                            "values that change from batch to batch in tensors",
                                bi, where(p, at, sizeof at), has, had);
        }
        return CT_OK;
    }
}

/* ---- the optimizers ----------------------------------------------------------- */

/* Every hyperparameter an update bakes into the graph, for the optimizer
 * types a graph can hold. */
static const char *const k_sgd_keys[] = {"lr", "momentum", "dampening", "weight_decay", "nesterov",
                                         "maximize", "foreach", "fused", NULL};
static const char *const k_adam_keys[] = {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad",
                                          "maximize", "foreach", "fused", "decoupled_weight_decay", NULL};

static const char *const *hyper_keys(const ct_optim *o) {
    const char *t = ct_optim_type(o);
    if (strcmp(t, "SGD") == 0) return k_sgd_keys;
    if (strcmp(t, "Adam") == 0 || strcmp(t, "AdamW") == 0) return k_adam_keys;
    return NULL;
}

/* Whether every wrapped optimizer's step (with fp16 AMP's scaler) runs
 * entirely on the device, so that a replay redoes all of it. */
static int check_optimizers(const ct_context *ctx) {
    for (size_t i = 0; i < ctx->n_optims; i++) {
        const ct_optim *o = ctx->optims[i];
        const char *t = ct_optim_type(o);
        if (strcmp(t, "SGD") == 0) continue;
        if (strcmp(t, "Adam") == 0 || strcmp(t, "AdamW") == 0) {
            for (size_t g = 0; g < ct_optim_num_groups(o); g++) {
                double fused = 0;
                if (ct_optim_get_option(o, g, "fused", &fused) != CT_OK) return ct_last_code();
                if (fused != 1)
                    return ct_set_error(CT_ENOTSUP,
                                        "CUDA graphs: optimizer %zu (%s) group %zu is not fused: its foreach and "
                                        "single-tensor updates read the step count on the host (step.item()) for "
                                        "the bias correction, which a replayed graph would keep at its captured "
                                        "value; make it fused (ct_optim_set_option(opt, %zu, \"fused\", 1), all "
                                        "parameters floating point on the GPU)",
                                        i, t, g, g);
            }
            continue;
        }
        return ct_set_error(CT_ENOTSUP,
                            "CUDA graphs: optimizer %zu (%s) cannot be captured: it keeps its step count in a CPU "
                            "tensor, which a replayed graph would not advance (%s); use SGD, or Adam/AdamW with "
                            "fused=1",
                            i, t,
                            strcmp(t, "Adagrad") == 0 ? "its learning-rate decay reads it on the host"
                            : strcmp(t, "LBFGS") == 0 ? "its step calls a closure and decides on the host"
                                                      : "checkpoints would save the count at capture");
    }
    /* fp16 AMP: GradScaler's step decides on the host (found_inf.item())
     * whether to step an optimizer that is not fused in every group; fused
     * kernels get the scale and the inf flag on the device instead. */
    for (size_t i = 0; ctx->scaler && i < ctx->n_optims; i++)
        for (size_t g = 0; g < ct_optim_num_groups(ctx->optims[i]); g++) {
            double fused = 0;
            if (ct_optim_get_option(ctx->optims[i], g, "fused", &fused) != CT_OK) return ct_last_code();
            if (fused != 1)
                return ct_set_error(CT_ENOTSUP,
                                    "CUDA graphs: fp16 AMP's GradScaler decides on the host (found_inf.item()) "
                                    "whether to step optimizer %zu (%s), whose group %zu is not fused; a replayed "
                                    "graph cannot redo that decision. Make every group fused "
                                    "(ct_optim_set_option(opt, g, \"fused\", 1)) or use bf16, which needs no scaler",
                                    i, ct_optim_type(ctx->optims[i]), g);
        }
    return CT_OK;
}

/* Every optimizer parameter lives on the trial's device: a CPU update
 * would run once, at capture, and never again. */
static int check_param_devices(const ct_context *ctx) {
    for (size_t i = 0; i < ctx->n_optims; i++)
        for (size_t k = 0; k < ct_optim_num_params(ctx->optims[i]); k++) {
            ct_device d = ct_device_of(ct_optim_param(ctx->optims[i], k));
            if (d.type != ctx->device.type || d.index != ctx->device.index) {
                char here[32], want[32];
                ct_device_format(d, here, sizeof here);
                ct_device_format(ctx->device, want, sizeof want);
                return ct_set_error(CT_EDEVICE, "CUDA graphs: optimizer %zu (%s) parameter %zu is on %s, not on "
                                                "the trial's device %s: a graph replays only that device's work",
                                    i, ct_optim_type(ctx->optims[i]), k, here, want);
            }
        }
    return CT_OK;
}

static bool same_value(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* The hyperparameters as one flat list: per optimizer its group and
 * parameter counts, then each key of each group. With record, stores them
 * (gs->hyper holds room for them); otherwise compares them with the stored
 * list and describes the first difference in why. Returns true on a
 * difference. */
static bool walk_hyper(cti_graph_step *gs, const ct_context *ctx, bool record, char *why, size_t len) {
    size_t c = 0;
    for (size_t i = 0; i < ctx->n_optims; i++) {
        const ct_optim *o = ctx->optims[i];
        const char *t = ct_optim_type(o);
        const char *const *keys = hyper_keys(o);
        double counts[2] = {(double)ct_optim_num_groups(o), (double)ct_optim_num_params(o)};
        for (int j = 0; j < 2; j++, c++) {
            if (record) gs->hyper[c] = counts[j];
            else if (c >= gs->n_hyper || !same_value(gs->hyper[c], counts[j])) {
                snprintf(why, len, "optimizer %zu (%s) has %.0f %s now", i, t, counts[j],
                         j ? "parameters" : "parameter groups");
                return true;
            }
        }
        for (size_t g = 0; keys && g < (size_t)counts[0]; g++)
            for (size_t k = 0; keys[k]; k++, c++) {
                double v = NAN;
                if (ct_optim_get_option(o, g, keys[k], &v) != CT_OK) v = NAN;
                if (record) gs->hyper[c] = v;
                else if (c >= gs->n_hyper || !same_value(gs->hyper[c], v)) {
                    if (c < gs->n_hyper)
                        snprintf(why, len, "optimizer %zu (%s) group %zu '%s' %.9g -> %.9g", i, t, g, keys[k],
                                 gs->hyper[c], v);
                    else snprintf(why, len, "optimizer %zu (%s) group %zu has new options", i, t, g);
                    return true;
                }
            }
    }
    if (!record && c != gs->n_hyper) {
        snprintf(why, len, "the wrapped optimizers changed");
        return true;
    }
    return false;
}

/* Stores the hyperparameters the graph was captured with. */
static int record_hyper(cti_graph_step *gs, const ct_context *ctx) {
    size_t n = 0;
    for (size_t i = 0; i < ctx->n_optims; i++) {
        const char *const *keys = hyper_keys(ctx->optims[i]);
        size_t nk = 0;
        while (keys && keys[nk]) nk++;
        n += 2 + ct_optim_num_groups(ctx->optims[i]) * nk;
    }
    double *h = realloc(gs->hyper, (n ? n : 1) * sizeof *h);
    if (!h) return ct_set_error(CT_ENOMEM, "CUDA graphs: out of host memory");
    gs->hyper = h;
    gs->n_hyper = n;
    walk_hyper(gs, ctx, true, NULL, 0);
    return CT_OK;
}

static void mode_text(const cti_wrapped_sched *w, char *buf, size_t len) {
    static const char *const what[] = {"batch", "optimizer step", "epoch"};
    if (w->mode == CT_STEP_MANUAL || (int)w->mode < 0 || (int)w->mode > CT_STEP_MANUAL) {
        snprintf(buf, len, "stepped by the trial");
        return;
    }
    if (w->frequency == 1) snprintf(buf, len, "stepped every %s", what[w->mode]);
    else snprintf(buf, len, "stepped every %d %ss", w->frequency, what[w->mode]);
}

/* Hyperparameters changed on two batches in a row. */
static int refuse_per_batch(const ct_context *ctx, const char *why, int64_t batch_idx) {
    char scheds[768];
    size_t at = 0;
    if (ctx->n_scheds == 0) {
        snprintf(scheds, sizeof scheds, "No wrapped LR scheduler: the trial changes them itself");
    } else {
        at += (size_t)snprintf(scheds, sizeof scheds, "Wrapped LR scheduler%s:", ctx->n_scheds > 1 ? "s" : "");
        for (size_t k = 0; k < ctx->n_scheds && at < sizeof scheds; k++) {
            char mode[64];
            mode_text(&ctx->scheds[k], mode, sizeof mode);
            at += (size_t)snprintf(scheds + at, sizeof scheds - at, "%s %s (%s)", k ? "," : "",
                                   ct_sched_type(ctx->scheds[k].sched), mode);
        }
    }
    return ct_set_error(CT_ENOTSUP,
                        "CUDA graphs: the optimizer hyperparameters changed on batches %lld and %lld (%s). A "
                        "captured step bakes them in, so each change costs a new capture, and capturing every "
                        "batch costs more than replaying saves. %s. Step the scheduler per epoch "
                        "(CT_STEP_EVERY_EPOCH), raise cuda_graph_warmup past its ramp (warm-up batches run "
                        "eagerly), or turn cuda_graphs off",
                        (long long)batch_idx - 1, (long long)batch_idx, why, scheds);
}

/* ---- warm-up, capture, replay ------------------------------------------------------ */

static ct_value *warm_up(cti_graph_step *gs, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                         int64_t batch_idx, cti_step_fn step) {
    if (ct_cuda_graph_side_stream_begin(gs->graph) != CT_OK) return NULL;
    ct_value *m = step(ctx, batch, epoch_idx, batch_idx);
    saved_error e;
    save_error(&e);
    int rc = ct_cuda_graph_side_stream_end(gs->graph);
    if (!m) {
        restore_error(&e); /* the step's failure is the one to report */
        return NULL;
    }
    if (rc != CT_OK) {
        ct_value_free(m);
        return NULL;
    }
    gs->warmed++;
    return m;
}

/* The step is captured with this batch, then replayed once for it. */
static ct_value *capture(cti_graph_step *gs, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                         int64_t batch_idx, cti_step_fn step) {
    path_buf p = {{0}, 0};
    int rc = check_optimizers(ctx);
    if (rc == CT_OK) rc = check_param_devices(ctx);
    if (rc == CT_OK && !gs->static_batch) {
        gs->static_batch = static_copy(batch, ctx->device, &p, batch_idx);
        if (!gs->static_batch) rc = ct_last_code();
    } else if (rc == CT_OK) {
        rc = match(gs->static_batch, batch, &p, batch_idx, true);
    }
    /* The recipe's zero_grad(set_to_none=True): backward then makes the
     * gradients during capture, in the graph's pool, where every replay
     * finds them again. */
    for (size_t i = 0; rc == CT_OK && i < ctx->n_optims; i++) rc = ct_optim_zero_grad(ctx->optims[i], true);
    if (rc != CT_OK) return NULL;
    gs->captured = false; /* capture_begin drops the previous graph */
    if (ct_cuda_graph_capture_begin(gs->graph) != CT_OK) return capture_failed(batch_idx);
    ct_value *m = step(ctx, gs->static_batch, epoch_idx, batch_idx);
    if (!m) {
        ct_cuda_graph_capture_abort(gs->graph);
        ct_cuda_graph_explain_error("train_batch");
        return capture_failed(batch_idx);
    }
    if (ct_cuda_graph_capture_end(gs->graph) != CT_OK) {
        ct_value_free(m);
        return capture_failed(batch_idx);
    }
    ct_value_free(gs->outputs);
    gs->outputs = m;
    gs->captured = true;
    gs->captures++;
    if (record_hyper(gs, ctx) != CT_OK || ct_cuda_graph_replay(gs->graph) != CT_OK) return NULL;
    return ct_value_copy(gs->outputs, true);
}

ct_value *cti_graph_step_run(cti_graph_step *gs, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                            int64_t batch_idx, cti_step_fn step) {
    if (gs->warmed < gs->warmup) return warm_up(gs, ctx, batch, epoch_idx, batch_idx, step);
    if (!gs->captured) return capture(gs, ctx, batch, epoch_idx, batch_idx, step);
    char why[512];
    if (walk_hyper(gs, ctx, false, why, sizeof why)) {
        if (gs->last_change == batch_idx - 1) {
            refuse_per_batch(ctx, why, batch_idx);
            return NULL;
        }
        gs->last_change = batch_idx;
        return capture(gs, ctx, batch, epoch_idx, batch_idx, step);
    }
    path_buf p = {{0}, 0};
    if (match(gs->static_batch, batch, &p, batch_idx, true) != CT_OK) return NULL;
    if (ct_cuda_graph_replay(gs->graph) != CT_OK) return NULL;
    /* Device clones: the next replay overwrites the outputs. */
    return ct_value_copy(gs->outputs, true);
}

/* ---- lifetime ------------------------------------------------------------------ */

int cti_graph_step_new(ct_context *ctx, cti_graph_step **out) {
    *out = NULL;
    const ct_fit_opts *o = &ctx->opts;
    if (o->cuda_graph_warmup < 1)
        return ct_set_error(CT_ECONFIG, "optimizations.cuda_graph_warmup must be at least 1, got %d: the first "
                                        "batches run eagerly to make what a capture must not (optimizer state, "
                                        "cuBLAS workspaces)",
                            o->cuda_graph_warmup);
    if (ctx->aggregation_frequency > 1)
        return ct_set_error(CT_ECONFIG, "optimizations.cuda_graphs needs aggregation_frequency 1, got %d: the "
                                        "graph replays one whole optimizer step per batch",
                            ctx->aggregation_frequency);
    if (ctx->size > 1)
        return ct_set_error(CT_ENOTSUP, "optimizations.cuda_graphs is not supported under mpirun (%d ranks): "
                                        "the gradient all-reduce decides on the host, during each backward, "
                                        "which buckets to launch and which gradients to lend, and a replayed "
                                        "graph would repeat the captured decisions",
                            ctx->size);
    int rc = check_optimizers(ctx);
    if (rc != CT_OK) return rc;
    if (ctx->device.type != CT_CUDA) {
        char dev[32];
        ct_device_format(ctx->device, dev, sizeof dev);
        return ct_set_error(CT_ECONFIG, "optimizations.cuda_graphs (--cuda-graphs) needs a CUDA device, but the "
                                        "trial runs on %s (set --device cuda or ct_fit_opts.device)",
                            dev);
    }
    rc = check_param_devices(ctx);
    if (rc != CT_OK) return rc;
    cti_graph_step *gs = calloc(1, sizeof *gs);
    if (!gs) return ct_set_error(CT_ENOMEM, "CUDA graphs: out of host memory");
    gs->graph = ct_cuda_graph_new(ctx->device.index);
    if (!gs->graph) {
        free(gs);
        saved_error e;
        save_error(&e);
        return ct_set_error(e.code, "optimizations.cuda_graphs: %s", e.msg);
    }
    gs->device = ctx->device.index;
    gs->warmup = o->cuda_graph_warmup;
    gs->last_change = INT64_MIN;
    *out = gs;
    return CT_OK;
}

void cti_graph_step_free(cti_graph_step *gs) {
    if (!gs) return;
    saved_error e;
    save_error(&e);
    /* A replay may still be running: its pool and tensors go only after it. */
    ct_cuda_synchronize(gs->device);
    ct_value_free(gs->static_batch);
    ct_value_free(gs->outputs);
    ct_cuda_graph_free(gs->graph);
    free(gs->hyper);
    free(gs);
    restore_error(&e);
}

int64_t cti_graph_step_captures(const cti_graph_step *gs) { return gs ? gs->captures : 0; }
