/* tests/callbacks/es_trial.c — OneVar (tests/onevar.h) with the stock
 * early-stopping callback, whose validation metric "m" follows a sequence
 * the test gives: validation k (after batch k) reports seq[k-1].
 *
 *     es_trial --seq 1,0.5,0.6 --patience 2 --min-delta 0.1 --mode max
 *              --stop-threshold X --div-threshold Y --no-finite-check [ctrial's flags]
 *
 * test_early_stopping.py compares where it stops, and the state it
 * checkpoints, with Lightning's EarlyStopping fed the same sequence. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onevar.h"

static const char *seq = "", *mode = "min";
static double min_delta = 0, stop_threshold = NAN, div_threshold = NAN;
static int64_t patience = 3;
static bool no_finite_check = false;

static void *init(ct_context *ctx) {
    ct_early_stopping_opts es = ct_early_stopping_defaults();
    es.monitor = "m";
    es.patience = (int)patience;
    es.min_delta = min_delta;
    es.maximize = strcmp(mode, "max") == 0;
    es.check_finite = !no_finite_check;
    es.has_stopping_threshold = !isnan(stop_threshold);
    es.stopping_threshold = stop_threshold;
    es.has_divergence_threshold = !isnan(div_threshold);
    es.divergence_threshold = div_threshold;
    if (ct_ctx_add_early_stopping(ctx, &es) != 0) return NULL;
    return onevar_parts_init(ctx);
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch, int64_t idx) {
    return onevar_parts_train(self, ctx, batch);
}

/* seq[k-1] after batch k ("nan" and "inf" read by strtod) */
static double seq_at(int64_t k) {
    const char *p = seq;
    for (int64_t i = 1; i < k && p; i++) {
        p = strchr(p, ',');
        if (p) p++;
    }
    return p && *p ? strtod(p, NULL) : 0.0;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t idx) {
    ct_value *m = onevar_parts_eval(self, batch);
    if (m) ct_value_dict_set(m, "m", ct_value_float(seq_at(ct_ctx_current_batch(ctx) + 1)));
    return m;
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, 64); }
static ct_loader *val_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, 4); }

static const ct_trial trial = {
    .name = "es", .init = init, .destroy = free,
    .build_training_data_loader = train_loader, .build_validation_data_loader = val_loader,
    .train_batch = train_batch, .evaluate_batch = evaluate_batch,
};

static const ct_flag flags[] = {
    {"--seq", CT_FLAG_STRING, &seq, "A,B,...", "the monitored metric at each validation"},
    {"--patience", CT_FLAG_INT, &patience, "N", "EarlyStopping's patience"},
    {"--min-delta", CT_FLAG_DOUBLE, &min_delta, "D", "its min_delta"},
    {"--mode", CT_FLAG_STRING, &mode, "min|max", "its mode"},
    {"--stop-threshold", CT_FLAG_DOUBLE, &stop_threshold, "X", "its stopping_threshold"},
    {"--div-threshold", CT_FLAG_DOUBLE, &div_threshold, "Y", "its divergence_threshold"},
    {"--no-finite-check", CT_FLAG_BOOL, &no_finite_check, NULL, "check_finite=False"},
};

int main(int argc, char **argv) {
    ct_main_params p = ct_main_default_params();
    p.flags = flags;
    p.num_flags = sizeof flags / sizeof *flags;
    p.description = "OneVar with early stopping on a given metric sequence.";
    return ct_main_ex(argc, argv, &trial, &p);
}
