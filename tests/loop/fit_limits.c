/* tests/loop/fit_limits.c — ct_fit's options at and past their limits
 * (issue 17): a missing or absurd global batch size, a seed beyond
 * Determined's range and a max_length in epochs whose batch count does not
 * fit in 64 bits are CT_ECONFIG before anything trains (they used to fail
 * with CT_EINVAL in the loader, or wrap to "0 batches" and return 0); a
 * batch size near INT64_MAX reaches the loader and the samplers as a named
 * error, not an overflow. And the struct's size (docs/design.md, "A
 * stable ABI"): a program built against an older ctrial, whose ct_fit_opts
 * ends earlier, runs with this library and gets the defaults of what it
 * lacks; one built against a newer ctrial is refused. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ct_test.h"

/* ---- a small trial: y = 2x over 12 records -------------------------------------------- */

typedef struct {
    ct_module *lin;
    ct_optim *opt;
} Trial;

static int64_t g_batches;       /* train_batch calls */
static int64_t g_deterministic; /* of them, under deterministic algorithms */
static int64_t g_scaled;        /* of them, with the context's GradScaler (fp16 AMP) */
static const char *g_own_amp;   /* init's own ct_ctx_use_amp dtype ("bf16"), or NULL */
static ct_dtype g_amp_dtype;    /* the dtype a training step's forward ran in */

static void *init(ct_context *ctx) {
    if (g_own_amp) {
        ct_amp_opts a = ct_amp_defaults();
        a.dtype = CT_BF16;
        if (ct_ctx_use_amp(ctx, &a) != CT_OK) return NULL;
    }
    Trial *t = calloc(1, sizeof *t);
    t->lin = ct_ctx_wrap_model(ctx, ct_nn_linear(1, 1, false));
    ct_sgd_opts o = ct_sgd_defaults();
    o.lr = 0.01;
    t->opt = t->lin ? ct_ctx_wrap_optimizer(ctx, ct_optim_sgd(t->lin, &o)) : NULL;
    if (!t->opt) {
        free(t);
        return NULL;
    }
    return t;
}

static ct_tensor *mse(Trial *t, const ct_value *batch) {
    ct_tensor *d = ct_sub(ct_nn_forward(t->lin, ct_batch_at(batch, 0)), ct_batch_at(batch, 1));
    return ct_mean(ct_mul(d, d));
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    g_batches++;
    g_deterministic += ct_get_deterministic();
    g_scaled += ct_ctx_grad_scaler(ctx) != NULL;
    g_amp_dtype = ct_dtype_of(ct_nn_forward(((Trial *)self)->lin, ct_batch_at(batch, 0)));
    ct_tensor *loss = mse(self, batch);
    if (ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, ((Trial *)self)->opt, NULL, NULL)) return NULL;
    return ct_value_tensor(loss);
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(ct_keep(mse(self, batch))));
    return m;
}

static ct_loader *loader(void *self, ct_context *ctx) {
    float x[12], y[12];
    for (int i = 0; i < 12; i++) {
        x[i] = (float)i / 12.0f;
        y[i] = 2.0f * x[i];
    }
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.shuffle = true;
    o.seed = ct_ctx_trial_seed(ctx);
    ct_tensor *xs = ct_from_data(x, CT_SHAPE(12, 1), CT_F32), *ys = ct_from_data(y, CT_SHAPE(12, 1), CT_F32);
    ct_loader *l = ct_loader_new(ct_dataset_tensors(2, (ct_tensor *[]){xs, ys}), &o);
    ct_tensor_free(xs);
    ct_tensor_free(ys);
    return l;
}

static const ct_trial trial = {
    .name = "limits", .init = init, .destroy = free,
    .build_training_data_loader = loader, .build_validation_data_loader = loader,
    .train_batch = train_batch, .evaluate_batch = evaluate_batch,
};

static ct_fit_opts opts(void) {
    ct_fit_opts o = ct_fit_defaults();
    o.global_batch_size = 4; /* 3 batches an epoch */
    o.max_length = ct_batches(3);
    o.checkpoint_policy = CT_CKPT_NONE;
    o.quiet = true;
    o.tensorboard = false;
    o.output_dir = "fit_limits_output";
    o.overwrite = true;
    return o;
}

/* ct_fit(o) fails with CT_ECONFIG naming `needle`, having trained nothing. */
static void refused(int line, ct_fit_opts o, const char *needle) {
    g_batches = 0;
    int rc = ct_fit(&trial, &o);
    ct_test_checks++;
    if (rc != CT_ECONFIG || ct_last_code() != CT_ECONFIG || !strstr(ct_last_error(), needle) || g_batches != 0) {
        ct_test_failures++;
        fprintf(stderr, "%s:%d: expected CT_ECONFIG with \"%s\" and no batch, got %s (%d batches): \"%s\"\n",
                __FILE__, line, needle, ct_strerror(rc), (int)g_batches, ct_last_error());
    }
    ct_clear_error();
}

static void test_fit_options(void) {
    ct_fit_opts o = opts();
    g_batches = 0;
    CHECK_OK(ct_fit(&trial, &o));
    CHECK(g_batches == 3);

    /* No global batch size: the loader's batch size 0 failed (CT_EINVAL,
     * exit 1); Determined requires one. */
    o = opts();
    o.global_batch_size = 0;
    refused(__LINE__, o, "global_batch_size is not set");
    ct_value *hp = ct_value_dict();
    ct_value_dict_set(hp, "global_batch_size", ct_value_str("16"));
    o.hparams = hp;
    refused(__LINE__, o, "hyperparameters.global_batch_size is a str, expected a positive integer");
    ct_value_dict_set(hp, "global_batch_size", ct_value_int(4));
    g_batches = 0;
    CHECK_OK(ct_fit(&trial, &o)); /* from the hparams */
    CHECK(g_batches == 3);
    ct_value_free(hp);

    /* A batch of 2^63 - 1 records overflowed in the loader. */
    o = opts();
    o.global_batch_size = INT64_MAX;
    refused(__LINE__, o,
            "ct_fit_opts.global_batch_size is 9223372036854775807, expected a positive integer (at most "
            "1099511627776)");
    o.global_batch_size = -4;
    refused(__LINE__, o, "ct_fit_opts.global_batch_size is -4, expected a positive integer");

    /* Seeds: Determined's are 0 to 2^31 - 1; 2^32 failed in the shuffle. */
    o = opts();
    o.seed = (uint64_t)1 << 32;
    refused(__LINE__, o, "seed 4294967296 is out of range: experiment seeds are 0 to 2147483647, as Determined's");
    o.seed = UINT64_MAX;
    refused(__LINE__, o, "seed 18446744073709551615 is out of range");
    o.seed = 2147483647;
    g_batches = 0;
    CHECK_OK(ct_fit(&trial, &o));
    CHECK(g_batches == 3);

    /* max_length in epochs x 3 batches an epoch past INT64_MAX wrapped
     * negative: "done" after 0 batches, a checkpoint, 0. */
    o = opts();
    o.max_length = ct_epochs((int64_t)1 << 62);
    refused(__LINE__, o,
            "max_length is 4611686018427387904 epochs of 3 batches: more than 9223372036854775807 batches, the "
            "most ctrial counts");
    o.max_length = ct_epochs(INT64_MAX / 3 + 1);
    refused(__LINE__, o, "max_length is 3074457345618258603 epochs of 3 batches");
}

/* ---- the struct's size: an older and a newer caller ------------------------------------ */

/* A struct of `size` bytes as an older program has it: made by the
 * library's init for that size, then given the first `size` bytes of
 * `values` (its fields). On the heap at exactly that size, so that ASan
 * sees a read past its end; raw bytes, as the older program's fields are
 * all this program can name. */
static unsigned char *older_struct(size_t size, void (*init_at)(void *, size_t), const void *values) {
    unsigned char *p = malloc(size);
    init_at(p, size);
    uint32_t got;
    memcpy(&got, p, sizeof got);
    CHECK(got == size);
    memcpy(p + sizeof got, (const unsigned char *)values + sizeof got, size - sizeof got);
    return p;
}

static void init_fit_opts(void *p, size_t size) { ct_fit_opts_init(p, size); }

/* ct_fit_opts.mixed_precision (optimizations.mixed_precision O1): the
 * trial trains under fp16 autocast with the context's GradScaler, as if its
 * init had called ct_ctx_use_amp; a trial that sets AMP up itself keeps its
 * own (bf16 here, no scaler). */
static void test_mixed_precision(void) {
    ct_fit_opts o = opts();
    o.mixed_precision = true;
    g_batches = g_scaled = 0;
    CHECK_OK(ct_fit(&trial, &o));
    CHECK(g_batches == 3 && g_scaled == 3 && g_amp_dtype == CT_F16);
    g_own_amp = "bf16";
    g_batches = g_scaled = 0;
    CHECK_OK(ct_fit(&trial, &o));
    CHECK(g_batches == 3 && g_scaled == 0 && g_amp_dtype == CT_BF16);
    g_own_amp = NULL;
    o.mixed_precision = false;
    CHECK_OK(ct_fit(&trial, &o));
    CHECK(g_amp_dtype == CT_F32);
}

/* ct_fit_opts.deterministic: deterministic algorithms while the fit runs
 * (uninitialised memory NaN-filled, as PyTorch's), given back after. */
static void test_deterministic(void) {
    CHECK(!ct_get_deterministic());
    ct_fit_opts o = opts();
    o.deterministic = true;
    g_batches = g_deterministic = 0;
    CHECK_OK(ct_fit(&trial, &o));
    CHECK(g_batches == 3 && g_deterministic == 3);
    CHECK(!ct_get_deterministic());
    CHECK_OK(ct_set_deterministic(true));
    CHECK(ct_get_deterministic());
    ct_tensor *e = ct_empty(CT_SHAPE(4), NULL);
    float v[4] = {0};
    CHECK(e && ct_read(e, v, sizeof v) == CT_OK && isnan(v[0]) && isnan(v[3]));
    ct_tensor_free(e);
    o.deterministic = false; /* a fit that does not ask leaves the process's mode alone */
    g_deterministic = 0;
    CHECK_OK(ct_fit(&trial, &o));
    CHECK(g_deterministic == 3 && ct_get_deterministic());
    CHECK_OK(ct_set_deterministic(false));
    CHECK(!ct_get_deterministic());
}

static void test_abi(void) {
    /* An older program's ct_fit_opts: today's fields up to `overwrite`,
     * which it does not have. */
    size_t old_size = offsetof(ct_fit_opts, overwrite);
    unsigned char *bare = malloc(old_size);
    ct_fit_opts_init((ct_fit_opts *)bare, old_size);
    int freq = 0, latest = 0;
    bool tb = false;
    memcpy(&freq, bare + offsetof(ct_fit_opts, aggregation_frequency), sizeof freq);
    memcpy(&latest, bare + offsetof(ct_fit_opts, save_trial_latest), sizeof latest);
    memcpy(&tb, bare + offsetof(ct_fit_opts, tensorboard), sizeof tb);
    CHECK(freq == 1 && latest == 1 && tb); /* the defaults */
    free(bare);

    /* A fresh directory: the first run trains. */
    ct_fit_opts o = opts();
    o.output_dir = "fit_limits_abi_output";
    o.max_length = ct_batches(1);
    CHECK_OK(ct_fit(&trial, &o)); /* overwrites whatever an earlier test run left */
    /* The older struct has no `overwrite`: false, its default, so the
     * directory's earlier results are kept and the run refused. */
    o.max_length = ct_batches(3);
    unsigned char *old = older_struct(old_size, init_fit_opts, &o);
    g_batches = 0;
    CHECK(ct_fit(&trial, (const ct_fit_opts *)old) == CT_ECONFIG && g_batches == 0);
    CHECK_ERR(CT_ECONFIG, "fit_limits_abi_output");
    free(old);

    /* An older struct that trains: its fields taken, the rest defaults
     * (into a directory no earlier test run left). */
    CHECK(system("rm -rf fit_limits_abi_output_2") == 0);
    o.output_dir = "fit_limits_abi_output_2";
    o.max_length = ct_batches(2);
    old = older_struct(old_size, init_fit_opts, &o);
    g_batches = 0;
    CHECK_OK(ct_fit(&trial, (const ct_fit_opts *)old));
    CHECK(g_batches == 2);
    free(old);

    /* A newer program's struct: bigger than this library's, refused with
     * what to do (the tail is what this library does not know; init zeroes
     * it). */
    size_t new_size = sizeof(ct_fit_opts) + 16;
    unsigned char *newer = malloc(new_size);
    ct_fit_opts_init((ct_fit_opts *)newer, new_size);
    uint32_t got;
    memcpy(&got, newer, sizeof got);
    CHECK(got == new_size && newer[sizeof(ct_fit_opts)] == 0 && newer[new_size - 1] == 0);
    o = opts();
    memcpy(newer + sizeof got, (const unsigned char *)&o + sizeof got, sizeof o - sizeof got);
    g_batches = 0;
    CHECK(ct_fit(&trial, (const ct_fit_opts *)newer) == CT_EINVAL && g_batches == 0);
    CHECK_ERR(CT_EINVAL, "the program was built against a newer ctrial than this library");
    free(newer);

    /* Version 1 (before `deterministic`): its fields taken, deterministic
     * off. */
    o = opts();
    old = older_struct(offsetof(ct_fit_opts, deterministic), init_fit_opts, &o);
    g_batches = g_deterministic = 0;
    CHECK_OK(ct_fit(&trial, (const ct_fit_opts *)old));
    CHECK(g_batches == 3 && g_deterministic == 0);
    free(old);

    /* Version 2 (before checkpoint_storage, allocated at its own size, so
     * ASan sees any read past it): its fields taken, deterministic too, and
     * no store. */
    o = opts();
    o.deterministic = true;
    old = older_struct(offsetof(ct_fit_opts, checkpoint_storage), init_fit_opts, &o);
    g_batches = g_deterministic = 0;
    CHECK_OK(ct_fit(&trial, (const ct_fit_opts *)old));
    CHECK(g_batches == 3 && g_deterministic == 3);
    free(old);

    /* A struct that did not come from ct_fit_defaults(). */
    o = opts();
    o.size = 0;
    CHECK(ct_fit(&trial, &o) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_fit_opts.size is 0: make the struct with ct_fit_defaults(), which sets it");
    o.size = 4;
    CHECK(ct_fit(&trial, &o) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_fit_opts.size is 4: no ctrial made a ct_fit_opts that small");
}

static void init_loader_opts(void *p, size_t size) { ct_loader_opts_init(p, size); }

/* ---- the loader and the samplers ------------------------------------------------------ */

static void test_loader_limits(void) {
    float x[10] = {0};
    ct_tensor *xs = ct_from_data(x, CT_SHAPE(10, 1), CT_F32);
    /* batch_size near INT64_MAX: its index lists cannot be allocated; said
     * so (len(DataLoader) rounded up used to overflow first). */
    for (int drop = 0; drop < 2; drop++) {
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = INT64_MAX;
        o.drop_last = drop;
        ct_loader *l = ct_loader_new(ct_dataset_tensors(1, (ct_tensor *[]){xs}), &o);
        CHECK(l == NULL);
        CHECK_ERR(CT_ENOMEM, "ct_loader_new: a batch of up to 9223372036854775807 indices, 2 at a time, is more "
                             "than this machine can address (batch_size too large)");
        ct_loader_free(l);
    }
    /* A batch bigger than the data set is one short batch a pass. */
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = 1 << 20;
    ct_loader *l = ct_loader_new(ct_dataset_tensors(1, (ct_tensor *[]){xs}), &o);
    CHECK(l && ct_loader_len(l) == 1);
    ct_loader_free(l);
    o.drop_last = true;
    l = ct_loader_new(ct_dataset_tensors(1, (ct_tensor *[]){xs}), &o);
    CHECK(l && ct_loader_len(l) == 0);
    ct_loader_free(l);

    /* An older program's loader options (the struct without `sampler`):
     * taken, the rest defaults. Size 0: refused. */
    o = ct_loader_defaults();
    o.batch_size = 3;
    unsigned char *old = older_struct(offsetof(ct_loader_opts, sampler), init_loader_opts, &o);
    l = ct_loader_new(ct_dataset_tensors(1, (ct_tensor *[]){xs}), (const ct_loader_opts *)old);
    CHECK(l && ct_loader_len(l) == 4);
    ct_loader_free(l);
    free(old);
    o = ct_loader_defaults();
    o.size = 0;
    CHECK(ct_loader_new(ct_dataset_tensors(1, (ct_tensor *[]){xs}), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_loader_new: ct_loader_opts.size is 0: make the struct with ct_loader_defaults()");
    ct_tensor_free(xs);

    /* Batches of batches: the index count of an item must be an int64_t. */
    ct_sampler *s = ct_sampler_batch(ct_sampler_batch(ct_sampler_sequential(10), 4, false), INT64_MAX / 2, false);
    CHECK(s == NULL);
    CHECK_ERR(CT_EINVAL, "ct_sampler_batch: batch_size 4611686018427387903 of items of up to 4 indices is more "
                         "indices than an int64_t counts");
    s = ct_sampler_batch(ct_sampler_batch(ct_sampler_sequential(10), 4, false), INT64_MAX / 4, false);
    CHECK(s && ct_sampler_max_item(s) == INT64_MAX / 4 * 4 && ct_sampler_len(s) == 1);
    ct_sampler_free(s);
}

int main(void) {
    test_fit_options();
    test_abi();
    test_deterministic();
    test_mixed_precision();
    test_loader_limits();
    return ct_test_result("loop_fit_limits");
}
