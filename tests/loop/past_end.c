/* tests/loop/past_end.c — Determined's test_max_batches_leq_steps_completed
 * (harness/tests/experiment/pytorch/test_pytorch_trial.py): a trial resumed
 * from a checkpoint at or past its max_length trains nothing and validates
 * nothing, and ends without error. For (max_batches, steps_completed) in
 * (5, 5), (5, 10), (6, 10), OneVar trains steps_completed batches with a
 * validation and a checkpoint at the end; then a run resumes it with
 * max_length max_batches: ct_fit returns 0, no batch trains, nothing
 * validates, no checkpoint is written and metrics.jsonl is as it was. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/trial.h>

#include "ct_test.h"
#include "onevar.h"

static int g_trained, g_validated;

static void *init(ct_context *ctx) { return onevar_parts_init(ctx); }
static ct_loader *train_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, 16); }
static ct_loader *val_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, 8); }

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch, int64_t idx) {
    g_trained++;
    return onevar_parts_train(self, ctx, batch);
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t idx) {
    g_validated++;
    return onevar_parts_eval(self, batch);
}

static const ct_trial trial = {
    .name = "past_end",
    .init = init,
    .destroy = free,
    .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
};

/* The checkpoint directories' names, sorted, in one string. */
static void list_checkpoints(const char *out, char *buf, size_t len) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/checkpoints", out);
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            strncat(buf, names[i]->d_name, len - strlen(buf) - 2);
            strncat(buf, " ", len - strlen(buf) - 1);
        }
        free(names[i]);
    }
    free(names);
}

static void scenario(int64_t max_batches, int64_t steps_completed) {
    char out[] = "/tmp/ct_past_end_XXXXXX";
    if (!mkdtemp(out)) return;
    ct_value *hp = ct_value_dict();
    ct_value_dict_set(hp, "global_batch_size", ct_value_int(2));
    ct_fit_opts o = ct_fit_defaults();
    o.hparams = hp;
    o.quiet = true;
    o.output_dir = out;
    o.max_length = ct_batches(steps_completed);
    o.validation_period = ct_batches(steps_completed);
    o.checkpoint_period = ct_batches(steps_completed);
    o.checkpoint_policy = CT_CKPT_NONE;
    CHECK(ct_fit(&trial, &o) == 0);
    CHECK(g_trained == steps_completed);

    char path[600], before[2048], after[2048];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out);
    char *log_before = ct_test_slurp(path);
    list_checkpoints(out, before, sizeof before);

    g_trained = g_validated = 0;
    o.max_length = ct_batches(max_batches);
    o.validation_period = ct_batches(1);
    o.checkpoint_period = ct_batches(1);
    o.resume = "latest";
    int rc = ct_fit(&trial, &o);
    if (rc) fprintf(stderr, "(%lld, %lld): %s\n", (long long)max_batches, (long long)steps_completed, ct_last_error());
    CHECK(rc == 0);
    CHECK(g_trained == 0);
    CHECK(g_validated == 0);
    char *log_after = ct_test_slurp(path);
    list_checkpoints(out, after, sizeof after);
    CHECK(strcmp(log_before, log_after) == 0);
    CHECK(strcmp(before, after) == 0 && before[0]);
    free(log_before);
    free(log_after);
    ct_value_free(hp);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", out);
    CHECK(system(cmd) == 0);
    g_trained = g_validated = 0;
}

int main(void) {
    scenario(5, 5);
    scenario(5, 10);
    scenario(6, 10);
    return ct_test_result("loop_past_end");
}
