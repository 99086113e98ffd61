/* tests/loop/console_trial.c — OneVar (tests/onevar.h) as a user's program
 * with flags of its own (ct_main_ex): what the console shows is checked by
 * test_console.py. Training and validation batches sleep for the given
 * milliseconds, so that the run's timing (and its ETA) is known:
 *
 *     console_trial --train-ms 40 --val-ms 80 --records 64 [ctrial's flags]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <time.h>

#include "onevar.h"

static int64_t train_ms = 0, val_ms = 0, records = 64;

static void sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&ts, &ts) != 0) {
    }
}

static void *init(ct_context *ctx) { return onevar_parts_init(ctx); }

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch, int64_t idx) {
    sleep_ms(train_ms);
    return onevar_parts_train(self, ctx, batch);
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t idx) {
    sleep_ms(val_ms);
    return onevar_parts_eval(self, batch);
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, records); }
static ct_loader *val_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, records / 2); }

static const ct_trial trial = {
    .name = "console", .init = init, .destroy = free,
    .build_training_data_loader = train_loader, .build_validation_data_loader = val_loader,
    .train_batch = train_batch, .evaluate_batch = evaluate_batch,
};

static const ct_flag flags[] = {
    {"--train-ms", CT_FLAG_INT, &train_ms, "MS", "sleep in each training batch"},
    {"--val-ms", CT_FLAG_INT, &val_ms, "MS", "sleep in each validation batch"},
    {"--records", CT_FLAG_INT, &records, "N", "training records (validation: half as many)"},
};

int main(int argc, char **argv) {
    ct_main_params p = ct_main_default_params();
    p.flags = flags;
    p.num_flags = sizeof flags / sizeof *flags;
    p.description = "OneVar with batches of known duration, for the console's tests.";
    return ct_main_ex(argc, argv, &trial, &p);
}
