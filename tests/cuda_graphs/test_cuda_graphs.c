/* tests/cuda_graphs/test_cuda_graphs.c — the training step as a CUDA graph
 * (ct_fit_opts.cuda_graphs) and the graph API under it (cuda.h).
 *
 * Everywhere: what is refused before any GPU work (a CPU device, warm-up 0,
 * gradient aggregation, optimizers whose step cannot be captured), the
 * graph API's argument and no-GPU errors, and how capture errors read.
 * With a GPU: a small MLP (with dropout) trained 30 batches with graphs
 * matches eager training, with SGD (foreach), fused Adam, fused Adam under
 * fp16 AMP (autocast and GradScaler in the graph) and in simple mode; a
 * short batch is CT_ESHAPE naming the leaf and both shapes; non-fused Adam
 * is refused;
 * a scheduler that moves the lr once re-captures once, one that moves it
 * every batch is refused; ct_item inside train_batch gives the host-sync
 * message; a closure (ct_step_opts.closure) is refused at the first batch,
 * and trains eagerly. Without a GPU it prints a SKIP line for that part
 * and passes. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctrial/callback.h>
#include <ctrial/ckpt.h>
#include <ctrial/cuda.h>
#include <ctrial/trial.h>

#include "ct_test.h"

/* ---- a small MLP trial ------------------------------------------------------- */

enum { IN = 8, HID = 32, OUT = 4, MAX_PARAMS = 4096, MAX_BATCHES = 64 };

typedef struct {
    ct_module *net;
    ct_optim *opt;
    bool item;     /* read the loss on the host inside train_batch */
    bool closure;  /* step(closure) */
} Mlp;

/* What the last run left behind. */
static struct {
    float params[MAX_PARAMS];
    size_t n_params;
    double losses[MAX_BATCHES];
    int n_losses;
    int64_t captures;
} g_run;

static ct_module *build_net(ct_context *ctx) {
    double p = ct_ctx_hparam_double(ctx, "dropout", 0.0);
    ct_module *layers[] = {ct_nn_linear(IN, HID, true), ct_nn_relu(), ct_nn_dropout(p), ct_nn_linear(HID, OUT, true)};
    return ct_nn_sequential(4, layers);
}

/* The optimizer named by the "opt" hparam over net. */
static ct_optim *build_opt(ct_context *ctx, ct_module *net) {
    const char *opt = ct_ctx_hparam_str(ctx, "opt", "sgd");
    ct_optim *o = NULL;
    if (strcmp(opt, "sgd") == 0) {
        ct_sgd_opts so = ct_sgd_defaults();
        so.lr = 0.05;
        so.momentum = 0.9;
        so.weight_decay = 1e-4;
        o = ct_optim_sgd(net, &so);
    } else if (strcmp(opt, "rmsprop") == 0) {
        o = ct_optim_rmsprop(net, NULL);
    } else {
        ct_adam_opts ao = ct_adam_defaults();
        ao.lr = 1e-3;
        o = ct_optim_adam(net, &ao);
        if (o && strcmp(opt, "adam_fused") == 0 && ct_optim_set_option(o, 0, "fused", 1) != 0) {
            ct_optim_free(o);
            o = NULL;
        }
    }
    return o;
}

static void *mlp_init(ct_context *ctx) {
    Mlp *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->net = ct_ctx_wrap_model(ctx, build_net(ctx));
    t->opt = t->net ? ct_ctx_wrap_optimizer(ctx, build_opt(ctx, t->net)) : NULL;
    if (t->opt && strcmp(ct_ctx_hparam_str(ctx, "amp", "none"), "fp16") == 0) {
        ct_amp_opts a = ct_amp_defaults(); /* float16 with a GradScaler */
        if (ct_ctx_use_amp(ctx, &a) != 0) t->opt = NULL;
    }
    /* "every_batch": StepLR(1, 0.9) each batch; "once": StepLR(15, 0.5)
     * each batch, so the lr moves once in 30 batches. */
    const char *sched = ct_ctx_hparam_str(ctx, "sched", "none");
    if (t->opt && strcmp(sched, "every_batch") == 0)
        ct_ctx_wrap_lr_scheduler(ctx, ct_sched_step_lr(t->opt, 1, 0.9), CT_STEP_EVERY_BATCH, 1);
    else if (t->opt && strcmp(sched, "once") == 0)
        ct_ctx_wrap_lr_scheduler(ctx, ct_sched_step_lr(t->opt, 15, 0.5), CT_STEP_EVERY_BATCH, 1);
    t->item = ct_ctx_hparam_bool(ctx, "item", false);
    t->closure = ct_ctx_hparam_bool(ctx, "closure", false);
    if (!t->net || !t->opt) {
        free(t);
        return NULL;
    }
    return t;
}

/* With the "short_batch" hparam the training loader's third batch has 8
 * rows instead of 16 (the training chain repeats before it batches, so a
 * loader of its own never yields a short batch: a collate makes one). */
static int g_collated;

static ct_value *short_third(ct_value *const *samples, int64_t n, void *ctx) {
    return ct_collate(samples, ++g_collated == 3 && n > 8 ? 8 : n);
}

/* `records` deterministic samples (no RNG: both runs see the same data). */
static ct_loader *make_loader(ct_context *ctx, int64_t records, bool drop_last, bool short_batch) {
    float *x = malloc((size_t)records * IN * sizeof *x);
    int64_t *y = malloc((size_t)records * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        ct_set_error(CT_ENOMEM, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < records; i++) {
        for (int j = 0; j < IN; j++) x[i * IN + j] = (float)sin(0.37 * (double)(i * IN + j));
        y[i] = (i * 7) % OUT;
    }
    ct_tensor *tx = ct_from_data(x, CT_SHAPE(records, IN), CT_F32);
    ct_tensor *ty = ct_from_data(y, CT_SHAPE(records), CT_I64);
    free(x);
    free(y);
    ct_dataset *ds = ct_dataset_tensors(2, (ct_tensor *[]){tx, ty});
    ct_tensor_free(tx);
    ct_tensor_free(ty);
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.drop_last = drop_last;
    o.device = ct_ctx_device(ctx);
    if (short_batch) {
        g_collated = 0;
        o.collate = short_third;
    }
    return ct_loader_new(ds, &o);
}

static ct_loader *train_loader(void *self, ct_context *ctx) {
    return make_loader(ctx, 480, true, ct_ctx_hparam_bool(ctx, "short_batch", false));
}

static ct_loader *val_loader(void *self, ct_context *ctx) { return make_loader(ctx, 32, false, false); }

static ct_tensor *loss_of(ct_module *net, const ct_value *batch) {
    return ct_cross_entropy(ct_nn_forward(net, ct_batch_at(batch, 0)), ct_batch_at(batch, 1));
}

typedef struct {
    Mlp *t;
    ct_context *ctx;
    const ct_value *batch;
} Closure;

static ct_tensor *closure(void *user) {
    Closure *c = user;
    ct_tensor *loss = ct_optim_zero_grad(c->t->opt, true) == 0 ? loss_of(c->t->net, c->batch) : NULL;
    return ct_ctx_backward(c->ctx, loss) == 0 ? loss : NULL;
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    Mlp *t = self;
    if (t->closure) {
        Closure c = {t, ctx, batch};
        ct_step_opts o = ct_step_defaults();
        double loss;
        o.closure = closure;
        o.closure_user = &c;
        o.closure_loss = &loss;
        if (ct_ctx_step_optimizer_with(ctx, t->opt, &o) != 0) return NULL;
        return ct_value_tensor(ct_scalar_tensor(loss, NULL));
    }
    ct_tensor *loss = loss_of(t->net, batch);
    if (t->item) {
        double v;
        if (ct_item(loss, &v) != 0) return NULL;
    }
    if (ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL)) return NULL;
    return ct_value_tensor(loss);
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(loss_of(ct_ctx_model(ctx, 0), batch)));
    return m;
}

/* Simple mode: ctrial does backward and the step (inside the graph too). */
static ct_module *simple_model(void *self, ct_context *ctx) { return build_net(ctx); }
static ct_optim *simple_opt(void *self, ct_context *ctx, ct_module *net) { return build_opt(ctx, net); }
static ct_value *simple_train(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                              int64_t batch_idx) {
    return ct_value_tensor(loss_of(ct_ctx_model(ctx, 0), batch));
}

/* Records each batch's loss and, at the end, the number of captures. */
static int on_workload(void *self, ct_context *ctx, const ct_value *avg, const ct_value *batches) {
    for (size_t i = 0; i < ct_value_len(batches) && g_run.n_losses < MAX_BATCHES; i++) {
        double v = NAN;
        ct_item(ct_value_get_tensor(ct_value_dict_get(ct_value_list_get(batches, i), "loss")), &v);
        g_run.losses[g_run.n_losses++] = v;
    }
    return 0;
}

/* The number of captures and the trained parameters. */
static int on_shutdown(void *self, ct_context *ctx) {
    g_run.captures = ct_ctx_cuda_graph_captures(ctx);
    ct_module *net = ct_ctx_model(ctx, 0);
    g_run.n_params = 0;
    for (size_t i = 0; net && i < ct_nn_num_params(net); i++) {
        ct_tensor *p = ct_nn_param_at(net, i, NULL);
        size_t n = (size_t)ct_numel(p);
        if (g_run.n_params + n > MAX_PARAMS) break;
        if (ct_read(p, g_run.params + g_run.n_params, n * sizeof(float)) == 0) g_run.n_params += n;
    }
    return 0;
}

static int add_recorder(void *self, ct_context *ctx) {
    ct_callback cb = {.name = "recorder", .on_training_workload_end = on_workload, .on_trial_shutdown = on_shutdown};
    return ct_ctx_add_callback(ctx, &cb);
}

static const ct_trial mlp = {
    .name = "mlp",
    .init = mlp_init,
    .destroy = free,
    .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
    .build_callbacks = add_recorder,
};

static const ct_trial mlp_simple = {
    .name = "mlp_simple",
    .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader,
    .train_batch = simple_train,
    .evaluate_batch = evaluate_batch,
    .build_callbacks = add_recorder,
    .build_model = simple_model,
    .optimizer = simple_opt,
};

static char g_out[] = "/tmp/ct_cuda_graphs_XXXXXX";

/* One run of `batches` batches; hparams as "key=value" JSON-free pairs. */
typedef struct {
    const char *device;
    bool graphs;
    int warmup;
    int agg;
    int64_t batches;
    int64_t batch_size;
    const char *opt, *sched, *amp;
    double dropout;
    bool item, short_batch, simple, closure;
} run_opts;

static run_opts defaults(void) {
    run_opts r = {.device = "cpu", .graphs = true, .warmup = 3, .agg = 1, .batches = 30, .batch_size = 16,
                  .opt = "sgd", .sched = "none", .amp = "none"};
    return r;
}

static int fit(const run_opts *r) {
    memset(&g_run, 0, sizeof g_run);
    g_run.captures = -1;
    ct_value *hp = ct_value_dict();
    ct_value_dict_set(hp, "global_batch_size", ct_value_int(r->batch_size));
    ct_value_dict_set(hp, "opt", ct_value_str(r->opt));
    ct_value_dict_set(hp, "sched", ct_value_str(r->sched));
    ct_value_dict_set(hp, "dropout", ct_value_float(r->dropout));
    ct_value_dict_set(hp, "item", ct_value_bool(r->item));
    ct_value_dict_set(hp, "closure", ct_value_bool(r->closure));
    ct_value_dict_set(hp, "short_batch", ct_value_bool(r->short_batch));
    ct_value_dict_set(hp, "amp", ct_value_str(r->amp));
    ct_fit_opts o = ct_fit_defaults();
    o.max_length = ct_batches(r->batches);
    /* Validations and checkpoints between replays: the models switch to
     * eval mode and back, and optimizer state is read, under the graph. */
    o.reporting_period = ct_batches(10);
    o.validation_period = ct_batches(10);
    o.checkpoint_period = ct_batches(15);
    o.checkpoint_policy = CT_CKPT_NONE;
    o.output_dir = g_out;
    o.overwrite = true;
    o.device = r->device;
    o.quiet = true;
    o.seed = 42;
    o.hparams = hp;
    o.cuda_graphs = r->graphs;
    o.cuda_graph_warmup = r->warmup;
    o.aggregation_frequency = r->agg;
    int rc = ct_fit(r->simple ? &mlp_simple : &mlp, &o);
    ct_value_free(hp);
    return rc;
}

/* ---- everywhere ------------------------------------------------------------------ */

static void test_defaults(void) {
    ct_fit_opts o = ct_fit_defaults();
    CHECK(!o.cuda_graphs);
    CHECK(o.cuda_graph_warmup == 3);
}

static void test_graph_api_errors(void) {
    ct_clear_error();
    if (!ct_cuda_is_available()) {
        CHECK(ct_cuda_graph_new(0) == NULL);
        CHECK_ERR(ct_cuda_is_built() ? CT_EDEVICE : CT_ENOTSUP, "ct_cuda_graph_new");
    }
    if (ct_cuda_is_built()) {
        CHECK(ct_cuda_graph_new(-1) == NULL);
        CHECK_ERR(CT_EDEVICE, "cuda:-1");
        CHECK(ct_cuda_graph_new(ct_cuda_device_count()) == NULL);
        CHECK_ERR(CT_EDEVICE, "ct_cuda_graph_new");
    }
    CHECK(ct_cuda_graph_capture_begin(NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "graph is NULL");
    CHECK(ct_cuda_graph_capture_end(NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_cuda_graph_capture_end");
    CHECK(ct_cuda_graph_replay(NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_cuda_graph_replay");
    CHECK(ct_cuda_graph_side_stream_begin(NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "graph is NULL");
    CHECK(ct_cuda_graph_side_stream_end(NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "graph is NULL");
    ct_cuda_graph_capture_abort(NULL); /* no-ops */
    ct_cuda_graph_free(NULL);
    CHECK(ct_last_code() == CT_OK);
}

/* The wording of capture errors, from the messages CUDA and libtorch give. */
static void test_explain(void) {
    if (!ct_cuda_is_built()) {
        ct_set_error(CT_ETORCH, "x");
        CHECK(ct_cuda_graph_explain_error("train_batch") == CT_ETORCH);
        ct_clear_error();
        return;
    }
    ct_clear_error();
    CHECK(ct_cuda_graph_explain_error("train_batch") == CT_OK);
    ct_set_error(CT_ETORCH, "ct_item: CUDA error: operation not permitted when stream is capturing");
    CHECK(ct_cuda_graph_explain_error("train_batch") == CT_ESTATE);
    CHECK(strstr(ct_last_error(), "train_batch did something that needs the host to wait for the GPU during "
                                  "capture: a .item()/ct_item, printing a CUDA tensor, a copy to the CPU, or an "
                                  "op with a data-dependent output shape (nonzero, masked_select)") ==
          ct_last_error());
    CHECK(strstr(ct_last_error(), "ct_item: CUDA error: operation not permitted") != NULL);
    /* Explaining twice changes nothing. */
    char once[2048];
    snprintf(once, sizeof once, "%s", ct_last_error());
    CHECK(ct_cuda_graph_explain_error("train_batch") == CT_ESTATE);
    CHECK(strcmp(once, ct_last_error()) == 0);
    ct_set_error(CT_ETORCH, "ct_print: Cannot copy between CPU and CUDA tensors during CUDA graph capture "
                            "unless the CPU tensor is pinned.");
    CHECK(ct_cuda_graph_explain_error("train_batch") == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "needs the host to wait for the GPU");
    ct_set_error(CT_ETORCH, "CUDA error: capturing stream has unjoined work");
    CHECK(ct_cuda_graph_explain_error("step") == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "step forked work onto another CUDA stream");
    ct_set_error(CT_ETORCH, "CUDA error: operation failed due to a previous error during capture");
    CHECK(ct_cuda_graph_explain_error("the captured work") == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "the captured work hit an error that invalidated the capture");
    ct_set_error(CT_ETORCH, "CUDAGeneratorImpl::set_current_seed can be called during stream capture only if "
                            "new seed is the same as the original seed.");
    CHECK(ct_cuda_graph_explain_error("train_batch") == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "reseeded the CUDA generator");
    /* Anything else is left alone. */
    ct_set_error(CT_ESHAPE, "ct_matmul: mat1 and mat2 shapes cannot be multiplied (4x8 and 7x3)");
    CHECK(ct_cuda_graph_explain_error("train_batch") == CT_ESHAPE);
    CHECK_ERR(CT_ESHAPE, "ct_matmul: mat1 and mat2");
}

/* Refusals that need no GPU: they come before the device check, except the
 * device check itself. */
static void test_refusals_without_gpu(void) {
    run_opts r = defaults();
    CHECK(fit(&r) == CT_ECONFIG);
    CHECK(strstr(ct_last_error(), "cuda_graphs") != NULL);
    CHECK_ERR(CT_ECONFIG, "the trial runs on cpu");

    r = defaults();
    r.warmup = 0;
    CHECK(fit(&r) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "cuda_graph_warmup must be at least 1, got 0");

    r = defaults();
    r.agg = 2;
    CHECK(fit(&r) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "needs aggregation_frequency 1, got 2");

    r = defaults();
    r.opt = "adam";
    CHECK(fit(&r) == CT_ENOTSUP);
    CHECK(strstr(ct_last_error(), "optimizer 0 (Adam) group 0 is not fused") != NULL);
    CHECK_ERR(CT_ENOTSUP, "step.item()");

    r = defaults();
    r.opt = "rmsprop";
    CHECK(fit(&r) == CT_ENOTSUP);
    CHECK_ERR(CT_ENOTSUP, "optimizer 0 (RMSprop) cannot be captured");

    /* fp16 AMP: the scaler's step decides on the host unless fused. */
    r = defaults();
    r.amp = "fp16";
    CHECK(fit(&r) == CT_ENOTSUP);
    CHECK_ERR(CT_ENOTSUP, "GradScaler decides on the host (found_inf.item()) whether to step optimizer 0 (SGD)");

    /* Off, the same CPU trial trains. */
    r = defaults();
    r.graphs = false;
    r.batches = 3;
    CHECK_OK(fit(&r));
    CHECK(g_run.captures == 0);
}

/* ---- with a GPU ------------------------------------------------------------------- */

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN wins */
    }
    return m;
}

/* Graph training equals eager training: the replays launch the kernels
 * eager training launches, with the same arguments, in the same order, on
 * the same data, and dropout draws the same Philox offsets (the generator
 * is registered with the capture). The results should be bitwise equal;
 * 1e-6 leaves room for cuBLAS choosing another algorithm on the side
 * stream, whose workspace differs from the default stream's. */
static void test_matches_eager(const char *opt, const char *amp, bool simple) {
    static float eager[MAX_PARAMS];
    static double eager_losses[MAX_BATCHES];
    run_opts r = defaults();
    r.device = "cuda:0";
    r.opt = opt;
    r.amp = amp;
    r.simple = simple;
    r.dropout = 0.1;
    r.graphs = false;
    CHECK_OK(fit(&r));
    size_t n = g_run.n_params;
    int nl = g_run.n_losses;
    memcpy(eager, g_run.params, n * sizeof *eager);
    memcpy(eager_losses, g_run.losses, (size_t)nl * sizeof *eager_losses);
    CHECK(n == (size_t)(IN * HID + HID + HID * OUT + OUT));
    CHECK(nl == 30);

    r.graphs = true;
    CHECK_OK(fit(&r));
    CHECK(g_run.captures == 1);
    CHECK(g_run.n_params == n);
    CHECK(g_run.n_losses == nl);
    double d = max_diff(eager, g_run.params, n);
    if (d != 0) printf("%s/%s%s: graph vs eager parameters differ by up to %g\n", opt, amp, simple ? "/simple" : "", d);
    CHECK(d <= 1e-6);
    for (int i = 0; i < nl && i < g_run.n_losses; i++) CHECK_NEAR(g_run.losses[i], eager_losses[i], 1e-6);
}

static void test_gpu_refusals(void) {
    /* Warm-up 1, capture at batch 1, batch 2 is short. */
    run_opts r = defaults();
    r.device = "cuda:0";
    r.warmup = 1;
    r.short_batch = true;
    CHECK(fit(&r) == CT_ESHAPE);
    CHECK(strstr(ct_last_error(), "CUDA graphs need static shapes: batch 2's leaf '[0]' is [8,8], captured [16,8]") !=
          NULL);
    CHECK_ERR(CT_ESHAPE, "drop_last");

    r = defaults();
    r.device = "cuda:0";
    r.opt = "adam";
    CHECK(fit(&r) == CT_ENOTSUP);
    CHECK_ERR(CT_ENOTSUP, "optimizer 0 (Adam) group 0 is not fused");

    /* StepLR every batch: captured at batch 3, the lr moves after it, a
     * re-capture at batch 4, the lr moves again: refused at batch 5. */
    r = defaults();
    r.device = "cuda:0";
    r.sched = "every_batch";
    CHECK(fit(&r) == CT_ENOTSUP);
    CHECK(strstr(ct_last_error(), "changed on batches 4 and 5") != NULL);
    CHECK(strstr(ct_last_error(), "'lr'") != NULL);
    CHECK_ERR(CT_ENOTSUP, "StepLR (stepped every batch)");

    /* ct_item inside train_batch. */
    r = defaults();
    r.device = "cuda:0";
    r.item = true;
    CHECK(fit(&r) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "train_batch did something that needs the host to wait for the GPU during capture: "
                         "a .item()/ct_item");

    /* A closure reads each evaluation's loss on the host: refused at the
     * first (warm-up) batch, naming the mode; without graphs it trains. */
    r = defaults();
    r.device = "cuda:0";
    r.closure = true;
    CHECK(fit(&r) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "a closure with cuda_graphs");
    r.graphs = false;
    CHECK_OK(fit(&r));
    CHECK(g_run.n_losses == r.batches);

    /* After a failed capture the generator works eagerly again: dropout on. */
    r = defaults();
    r.device = "cuda:0";
    r.graphs = false;
    r.dropout = 0.5;
    r.batches = 2;
    CHECK_OK(fit(&r));
}

/* StepLR(15) stepped every batch: the lr halves once (after batch 14), so
 * the step is captured at batch 3 and again at batch 15, and training
 * still equals eager training. */
static void test_recapture_once(void) {
    static float eager[MAX_PARAMS];
    run_opts r = defaults();
    r.device = "cuda:0";
    r.sched = "once";
    r.graphs = false;
    CHECK_OK(fit(&r));
    size_t n = g_run.n_params;
    memcpy(eager, g_run.params, n * sizeof *eager);
    r.graphs = true;
    CHECK_OK(fit(&r));
    CHECK(g_run.captures == 2);
    CHECK(g_run.n_params == n);
    CHECK(max_diff(eager, g_run.params, n) <= 1e-6);
}

int main(void) {
    if (!mkdtemp(g_out)) {
        perror("mkdtemp");
        return 1;
    }
    test_defaults();
    test_graph_api_errors();
    test_explain();
    test_refusals_without_gpu();
    if (ct_cuda_is_available()) {
        test_matches_eager("sgd", "none", false);
        test_matches_eager("adam_fused", "none", false);
        test_matches_eager("adam_fused", "fp16", false); /* autocast + GradScaler captured */
        test_matches_eager("sgd", "none", true);          /* simple mode: ctrial's backward and step */
        test_gpu_refusals();
        test_recapture_once();
    } else {
        printf("SKIP: no GPU (%s): the CPU-side checks ran, the capture/replay checks did not\n",
               ct_cuda_is_built() ? "libtorch has CUDA but no device is visible" : "libtorch was built without CUDA");
    }
    char cmd[64 + sizeof g_out];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_out);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_out);
    return ct_test_result("cuda_graphs");
}
