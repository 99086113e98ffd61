/* tests/loop/reducer_workloads.c — custom reducers through ct_fit, read back
 * from metrics.jsonl (Determined's wrap_reducer(..., for_training,
 * for_validation) and MetricReducer). Runs as one process and under mpirun
 * with 2 ranks; every expected number is written for P ranks.
 *
 * The trial is OneVar (64 records x = y = 1, Linear(1,1) from w = 0, SGD)
 * at global batch size 16, 8 batches, validating every 4:
 *   - "train_idx_sum", a function reducer for training only: train_batch
 *     feeds it batch_idx (the same on every rank), so a training report
 *     over batches 0-3 gives P (0+1+2+3) = 6 P, over 4-7 22 P. evaluate_batch
 *     feeds it 1000 too, which no report may show;
 *   - "val_records", a class reducer for validation only: evaluate_batch adds
 *     the batch's records to its state, per_slot_reduce gives (records,
 *     batches) of this rank, cross_slot_reduce sums the records over the
 *     ranks: 64, an int. train_batch adds 1000 records, which the reset at
 *     every validation's start wipes;
 * so the lines read T4 {train_idx_sum: 6P}, V4 {val_records: 64}, T8 {22P},
 * V8 {64}, and neither metric in the other kind of line. Then wrapping
 * rules (the same object twice, a name taken for the same workload, free
 * never called on failure), and a named reducer returning a dict, which
 * fails the run naming it. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

#include "ct_test.h"
#include "onevar.h"

/* ---- the class reducer: records seen in validation ------------------------------ */

typedef struct {
    int64_t records, batches;
    int per_slot_calls, cross_calls, resets;
    size_t cross_n;
} Records;

static int g_freed;

static void rec_reset(void *self) {
    Records *r = self;
    r->records = r->batches = 0;
    r->resets++;
}

static ct_value *rec_per_slot(void *self) {
    Records *r = self;
    r->per_slot_calls++;
    ct_value *t = ct_value_tuple();
    ct_value_list_append(t, ct_value_int(r->records));
    ct_value_list_append(t, ct_value_int(r->batches));
    return t;
}

static ct_value *rec_cross_slot(void *self, ct_value *const *per_slot, size_t n) {
    Records *r = self;
    r->cross_calls++;
    r->cross_n = n;
    int64_t sum = 0;
    for (size_t k = 0; k < n; k++) {
        int64_t x;
        if (ct_value_get_int(ct_value_list_get(per_slot[k], 0), &x)) return NULL;
        sum += x;
    }
    return ct_value_int(sum);
}

static void rec_free(void *self) {
    g_freed++;
    free(self);
}

static const ct_metric_reducer_ops rec_ops = {rec_reset, rec_per_slot, rec_cross_slot, rec_free};

/* ---- the function reducers ---------------------------------------------------------- */

static ct_value *sum_ints(ct_value *const *values, size_t n, void *ctx) {
    int64_t s = 0, x;
    for (size_t i = 0; i < n; i++)
        if (ct_value_get_int(values[i], &x) == 0) s += x;
    return ct_value_int(s);
}

static ct_value *as_dict(ct_value *const *values, size_t n, void *ctx) {
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "my_metric", ct_value_int(1));
    return d;
}

/* ---- the trial ------------------------------------------------------------------------ */

typedef struct {
    ct_module *lin;
    ct_optim *opt;
    ct_reducer *train_sum;
    ct_reducer *bad;  /* "my_metric" (hparam bad_dict), fed in evaluate_batch */
    Records *rec; /* the context's from wrapping on */
} Trial;

static Records g_rec_seen; /* the last run's state, copied in destroy */
static int g_wrap_checks; /* wrapping rules that held */

static void *init(ct_context *ctx) {
    Trial *t = calloc(1, sizeof *t);
    t->lin = ct_ctx_wrap_model(ctx, onevar_model());
    t->opt = ct_ctx_wrap_optimizer(ctx, onevar_sgd(t->lin));
    t->train_sum = ct_ctx_wrap_reducer_ex(ctx, "train_idx_sum", sum_ints, t, true, false);
    t->rec = calloc(1, sizeof *t->rec);
    if (!t->train_sum || !t->rec || !ct_ctx_wrap_metric_reducer(ctx, "val_records", &rec_ops, t->rec, false, true))
        return NULL;
    /* The same object twice, and a name taken for validations, are refused;
     * free is never called for a refused wrap. The name is free for
     * training reports, though (only a training-only function here). */
    Records other = {0};
    if (!ct_ctx_wrap_metric_reducer(ctx, "again", &rec_ops, t->rec, false, true) && ct_last_code() == CT_EINVAL &&
        strstr(ct_last_error(), "already wrapped"))
        g_wrap_checks++;
    if (!ct_ctx_wrap_metric_reducer(ctx, "val_records", &rec_ops, &other, true, true) &&
        strstr(ct_last_error(), "a reducer named 'val_records' is already wrapped"))
        g_wrap_checks++;
    ct_metric_reducer_ops no_reset = rec_ops;
    no_reset.reset = NULL;
    if (!ct_ctx_wrap_metric_reducer(ctx, "x", &no_reset, &other, true, true) && strstr(ct_last_error(), "ops->reset"))
        g_wrap_checks++;
    if (g_freed == 0) g_wrap_checks++;
    ct_clear_error();
    if (ct_ctx_hparam_bool(ctx, "bad_dict", false) &&
        !(t->bad = ct_ctx_wrap_reducer_ex(ctx, "my_metric", as_dict, NULL, false, true)))
        return NULL;
    return t;
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, 64); }
static ct_loader *val_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, 64); }

static ct_tensor *mse(Trial *t, const ct_value *batch) { return onevar_mse(t->lin, batch); }

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    Trial *t = self;
    ct_tensor *loss = mse(t, batch);
    if (ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL)) return NULL;
    if (ct_reducer_update(t->train_sum, ct_value_int(batch_idx))) return NULL;
    t->rec->records += 1000; /* never seen: validations start with a reset */
    return ct_value_tensor(loss);
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    Trial *t = self;
    t->rec->records += ct_size(ct_batch_at(batch, 0), 0);
    t->rec->batches++;
    if (ct_reducer_update(t->train_sum, ct_value_int(1000))) return NULL; /* never reported */
    if (t->bad && ct_reducer_update(t->bad, ct_value_int(1))) return NULL;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(mse(t, batch)));
    return m;
}

static void destroy(void *self) {
    Trial *t = self;
    g_rec_seen = *t->rec; /* the context frees it after destroy */
    free(t);
}

/* ---- reading metrics.jsonl ------------------------------------------------------------- */

static int64_t jint(json_t *metrics, const char *key) {
    json_t *v = json_object_get(metrics, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

int main(void) {
    CHECK_OK(ct_dist_init());
    int R = ct_dist_rank(), P = ct_dist_size();
    char out[64], log_path[128];
    snprintf(out, sizeof out, "reducer_workloads_np%d", P); /* the 1- and 2-rank runs may overlap */
    snprintf(log_path, sizeof log_path, "%s/metrics.jsonl", out);
    ct_trial t = {
        .name = "reducer_workloads", .init = init, .destroy = destroy,
        .build_training_data_loader = train_loader, .build_validation_data_loader = val_loader,
        .train_batch = train_batch, .evaluate_batch = evaluate_batch,
    };
    ct_value *hp = ct_value_dict();
    ct_value_dict_set(hp, "global_batch_size", ct_value_int(16));
    ct_fit_opts o = ct_fit_defaults();
    o.hparams = hp;
    o.quiet = true;
    o.output_dir = out;
    o.overwrite = true; /* each run replaces the last one's */
    o.checkpoint_policy = CT_CKPT_NONE;
    o.max_length = ct_batches(8);
    o.validation_period = ct_batches(4);
    int rc = ct_fit(&t, &o);
    if (rc) fprintf(stderr, "ct_fit: %s\n", ct_last_error());
    CHECK(rc == 0);
    CHECK(g_wrap_checks == 4);
    CHECK(g_freed == 1); /* ops->free once, when the context ended */
    /* per_slot_reduce at each validation on every rank; cross_slot_reduce
     * on rank 0 only, over P partials; the reset at least at each training
     * workload's start and each validation's. */
    CHECK(g_rec_seen.per_slot_calls == 2);
    CHECK(g_rec_seen.cross_calls == (R == 0 ? 2 : 0));
    if (R == 0) CHECK(g_rec_seen.cross_n == (size_t)P);
    CHECK(g_rec_seen.resets >= 4);

    if (R == 0) {
        FILE *f = fopen(log_path, "r");
        CHECK(f != NULL);
        char line[8192];
        const char *want_groups[] = {"training", "validation", "training", "validation"};
        int64_t want_batches[] = {4, 4, 8, 8};
        int n = 0;
        while (f && fgets(line, sizeof line, f)) {
            json_error_t err;
            json_t *j = json_loads(line, 0, &err);
            CHECK(j != NULL);
            json_t *m = json_object_get(j, "metrics");
            const char *group = json_string_value(json_object_get(j, "group"));
            if (n < 4 && group) {
                CHECK(!strcmp(group, want_groups[n]));
                CHECK(json_integer_value(json_object_get(j, "batches")) == want_batches[n]);
                if (!strcmp(group, "training")) {
                    CHECK(jint(m, "train_idx_sum") == (n == 0 ? 6 : 22) * P);
                    CHECK(json_object_get(m, "val_records") == NULL);
                    CHECK(json_object_get(m, "loss") != NULL);
                } else {
                    CHECK(jint(m, "val_records") == 64); /* an int, all ranks' records */
                    CHECK(json_object_get(m, "train_idx_sum") == NULL);
                    CHECK(json_object_get(m, "validation_loss") != NULL);
                }
            }
            json_decref(j);
            n++;
        }
        CHECK(n == 4);
        if (f) fclose(f);
    }

    /* A named reducer whose function returns a dict fails the run at the
     * first validation, naming it (Determined refuses it too). */
    g_freed = 0;
    ct_value_dict_set(hp, "bad_dict", ct_value_bool(true));
    rc = ct_fit(&t, &o);
    CHECK(rc == CT_ETRIAL);
    CHECK_ERR(CT_ETRIAL, "reducer 'my_metric': the reduce function returned a dict");
    CHECK(g_freed == 1);

    ct_value_free(hp);
    CHECK(ct_tensor_live_count() == 0);
    char name[64];
    snprintf(name, sizeof name, "loop_reducer_workloads (rank %d of %d)", R, P);
    rc = ct_test_result(name);
    ct_dist_finalize();
    return rc;
}
