/* tests/dist_fit/semantics_trial.c — Determined's multi-rank semantics
 * (issue 15), run by test_semantics.py under `mpirun -np 2` with a timeout.
 *
 *   semantics_trial MODE OUT_DIR [RECORDS PER_SLOT]
 *
 * The trial is OneVar (x = 1, y = 1, bias-free Linear(1,1) from w = 0, SGD
 * lr 0.001, MSE) over RECORDS records (64) at PER_SLOT records per rank and
 * batch (4). Each rank writes OUT_DIR/rank<r>.json when ct_fit returns:
 *   {"rc": ct_fit's status, "error": its message, "epoch_len": ...,
 *    "epoch_ends": [batch counts at each on_training_epoch_end],
 *    "validations": [...], "uploads": [...], "saves": n, "writes": n,
 *    "batch_r": [each per-batch "r" on_training_workload_end got],
 *    "avg_r": [the workloads' reported "r"], "w": the final weight,
 *    "gathered": ..., "allgathered": ..., "broadcast": ...}
 *
 * MODE:
 *   epochs      max_length 2 epochs; validation, checkpoint and reporting
 *               periods 1 epoch (RECORDS and PER_SLOT make the shares uneven)
 *   metrics     train_batch also reports "r" = the rank; 8 batches reported
 *               every 4; object collectives in on_training_start
 *   stop        rank 1 alone requests a stop in batch 3; validation every 4
 *   bare        train_batch calls ct_backward (refused under 2 ranks)
 *   backward    loss x (rank + 1), ct_ctx_backward_ex with gradient 2
 *   names       evaluate_batch on rank 1 alone drops a metric in batch 1
 *   console     as metrics, with the console on (rank 0 prints) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

#include "onevar.h"

static const char *g_mode;
static int64_t g_records = 64, g_per_slot = 4;

/* What each rank saw, written as JSON at the end. */
static struct {
    int64_t epoch_ends[64], validations[64], uploads[64];
    int n_epoch_ends, n_validations, n_uploads, saves, writes;
    double batch_r[256], avg_r[64];
    int n_batch_r, n_avg_r;
    char gathered[256], allgathered[256], broadcast[64];
    int64_t epoch_len;
} g;

static bool mode(const char *m) { return strcmp(g_mode, m) == 0; }

typedef struct {
    ct_module *lin;
    ct_optim *opt;
    int rank;
} OneVar;

static double g_w;

static void *init(ct_context *ctx) {
    OneVar *t = calloc(1, sizeof *t);
    t->lin = ct_ctx_wrap_model(ctx, onevar_model());
    t->opt = ct_ctx_wrap_optimizer(ctx, onevar_sgd(t->lin));
    t->rank = ct_ctx_rank(ctx);
    return t->opt ? t : NULL;
}

static void destroy(void *self) {
    OneVar *t = self;
    ct_item(ct_nn_get(t->lin, "weight"), &g_w);
    free(t);
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, g_records); }
static ct_loader *val_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, g_records); }

static ct_tensor *mse(OneVar *t, const ct_value *batch) { return onevar_mse(t->lin, batch); }

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    OneVar *t = self;
    ct_tensor *loss = mse(t, batch);
    int rc;
    if (mode("bare")) {
        rc = ct_backward(loss);
    } else if (mode("backward")) {
        rc = ct_ctx_backward_ex(ctx, ct_mul_scalar(loss, t->rank + 1), ct_full(0, NULL, 2.0, NULL), false, false);
    } else {
        rc = ct_ctx_backward(ctx, loss);
    }
    if (rc == 0) rc = ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL);
    if (rc != 0) return NULL;
    if (mode("stop") && t->rank == 1 && batch_idx == 3) ct_ctx_set_stop_requested(ctx, true);
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "loss", ct_value_tensor(loss));
    if (mode("metrics")) ct_value_dict_set(m, "r", ct_value_int(t->rank));
    return m;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    OneVar *t = self;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(mse(t, batch)));
    if (!(mode("names") && t->rank == 1 && batch_idx == 1)) ct_value_dict_set(m, "extra", ct_value_float(1));
    return m;
}

/* ---- the recorder ----------------------------------------------------------- */

/* A list of {"rank": r} dicts as "[r0, r1, ...]" ("null" when not a list). */
static void ranks_json(const ct_value *v, char *buf, size_t len) {
    if (ct_value_kind_of(v) != CT_VALUE_LIST) {
        snprintf(buf, len, "null");
        return;
    }
    size_t at = (size_t)snprintf(buf, len, "[");
    for (size_t i = 0; i < ct_value_len(v) && at < len; i++) {
        int64_t r = -1;
        ct_value_get_int(ct_value_dict_get(ct_value_list_get(v, i), "rank"), &r);
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? ", " : "", (long long)r);
    }
    if (at < len) snprintf(buf + at, len - at, "]");
}

static int on_training_start(void *self, ct_context *ctx) {
    g.epoch_len = ct_ctx_epoch_length(ctx);
    if (!mode("metrics")) return 0;
    /* Determined's context.distributed.gather / allgather / broadcast. */
    ct_value *mine = ct_value_dict();
    ct_value_dict_set(mine, "rank", ct_value_int(ct_ctx_rank(ctx)));
    ct_value *gathered = NULL;
    if (ct_dist_gather_value(mine, 0, &gathered) != 0) return ct_last_code();
    ranks_json(gathered, g.gathered, sizeof g.gathered);
    ct_value *all = ct_dist_allgather_value(mine);
    if (!all) return ct_last_code();
    ranks_json(all, g.allgathered, sizeof g.allgathered);
    ct_value *said = ct_value_str(ct_ctx_rank(ctx) == 0 ? "from rank 0" : "not sent");
    ct_value *got = ct_dist_broadcast_value(said, 0);
    if (!got) return ct_last_code();
    snprintf(g.broadcast, sizeof g.broadcast, "%s", ct_value_get_str(got));
    ct_value_free(mine);
    ct_value_free(gathered);
    ct_value_free(all);
    ct_value_free(said);
    ct_value_free(got);
    return 0;
}

static int on_epoch_end(void *self, ct_context *ctx, int64_t e) {
    if (g.n_epoch_ends < 64) g.epoch_ends[g.n_epoch_ends++] = ct_ctx_current_batch(ctx) + 1;
    return 0;
}

static int on_workload(void *self, ct_context *ctx, const ct_value *avg, const ct_value *batches) {
    double d;
    if (ct_value_get_float(ct_value_dict_get(avg, "r"), &d) == 0 && g.n_avg_r < 64) g.avg_r[g.n_avg_r++] = d;
    for (size_t i = 0; i < ct_value_len(batches); i++)
        if (ct_value_get_float(ct_value_dict_get(ct_value_list_get(batches, i), "r"), &d) == 0 && g.n_batch_r < 256)
            g.batch_r[g.n_batch_r++] = d;
    return 0;
}

static int on_val_end(void *self, ct_context *ctx, const ct_value *metrics) {
    int64_t bt = -1;
    ct_value_get_int(ct_value_dict_get(metrics, "batches"), &bt);
    if (g.n_validations < 64) g.validations[g.n_validations++] = bt;
    return 0;
}

static int on_save_start(void *self, ct_context *ctx, ct_value *state) {
    g.saves++;
    return 0;
}
static int on_write_end(void *self, ct_context *ctx, const char *dir) {
    g.writes++;
    return 0;
}
static int on_upload_end(void *self, ct_context *ctx, const char *dir) {
    if (g.n_uploads < 64) g.uploads[g.n_uploads++] = ct_ctx_current_batch(ctx) + 1;
    return 0;
}

static int build_callbacks(void *self, ct_context *ctx) {
    ct_callback cb = {
        .name = "recorder",
        .on_training_start = on_training_start,
        .on_training_epoch_end = on_epoch_end,
        .on_training_workload_end = on_workload,
        .on_validation_end = on_val_end,
        .on_checkpoint_save_start = on_save_start,
        .on_checkpoint_write_end = on_write_end,
        .on_checkpoint_upload_end = on_upload_end,
    };
    return ct_ctx_add_callback(ctx, &cb);
}

static void put_ints(FILE *f, const char *key, const int64_t *v, int n) {
    fprintf(f, "\"%s\": [", key);
    for (int i = 0; i < n; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)v[i]);
    fprintf(f, "], ");
}

static void put_doubles(FILE *f, const char *key, const double *v, int n) {
    fprintf(f, "\"%s\": [", key);
    for (int i = 0; i < n; i++) fprintf(f, "%s%.17g", i ? ", " : "", v[i]);
    fprintf(f, "], ");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: semantics_trial MODE OUT_DIR [RECORDS PER_SLOT]\n");
        return 2;
    }
    g_mode = argv[1];
    if (argc > 4) {
        g_records = atoll(argv[3]);
        g_per_slot = atoll(argv[4]);
    }
    if (ct_dist_init() != 0) return 5;
    int rank = ct_dist_rank(), size = ct_dist_size();
    ct_trial t = {
        .name = "semantics",
        .init = init,
        .destroy = destroy,
        .build_training_data_loader = train_loader,
        .build_validation_data_loader = val_loader,
        .train_batch = train_batch,
        .evaluate_batch = evaluate_batch,
        .build_callbacks = build_callbacks,
    };
    ct_fit_opts o = ct_fit_defaults();
    o.quiet = true;
    o.output_dir = argv[2];
    o.checkpoint_policy = CT_CKPT_NONE;
    o.global_batch_size = g_per_slot * size;
    o.max_length = ct_batches(8);
    if (mode("epochs")) {
        o.max_length = ct_epochs(2);
        o.validation_period = ct_epochs(1);
        o.checkpoint_period = ct_epochs(1);
        o.reporting_period = ct_epochs(1);
    } else if (mode("metrics") || mode("console")) {
        o.reporting_period = ct_batches(4);
        o.quiet = !mode("console");
    } else if (mode("stop")) {
        o.max_length = ct_batches(12);
        o.validation_period = ct_batches(4);
    }
    int rc = ct_fit(&t, &o);
    char path[4200];
    snprintf(path, sizeof path, "%s/rank%d.json", argv[2], rank);
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    char err[2048];
    snprintf(err, sizeof err, "%s", rc ? ct_last_error() : "");
    for (char *c = err; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = '\'';
    fprintf(f, "{\"rc\": %d, \"error\": \"%s\", \"epoch_len\": %lld, ", rc, err, (long long)g.epoch_len);
    put_ints(f, "epoch_ends", g.epoch_ends, g.n_epoch_ends);
    put_ints(f, "validations", g.validations, g.n_validations);
    put_ints(f, "uploads", g.uploads, g.n_uploads);
    put_doubles(f, "batch_r", g.batch_r, g.n_batch_r);
    put_doubles(f, "avg_r", g.avg_r, g.n_avg_r);
    fprintf(f, "\"saves\": %d, \"writes\": %d, \"w\": %.17g, \"gathered\": %s, \"allgathered\": %s, "
               "\"broadcast\": \"%s\"}\n",
            g.saves, g.writes, g_w, g.gathered[0] ? g.gathered : "null", g.allgathered[0] ? g.allgathered : "null",
            g.broadcast);
    fclose(f);
    if (rc != 0) fprintf(stderr, "rank %d: %s\n", rank, ct_last_error());
    ct_dist_finalize();
    return rc == 0 ? 0 : 1;
}
