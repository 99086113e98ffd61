/* tests/loop/fit_objects.c — the fit module's objects on their own
 * (docs/design.md, "The fit module's objects"), with a fake position and
 * options in place of a run:
 *   - the reporter: metrics.jsonl's lines (group, batches, epochs, metrics,
 *     the timings of the time it was told about, reset after each training
 *     line), a resume cutting the log back to the restored position, the
 *     console's plain lines, a rank other than 0 writing nothing;
 *   - the checkpointer: its directory, the checkpoint policy's best (both
 *     directions, NaN), writing and retention, finding a resume (latest,
 *     none yet, a missing path), and refusing or replacing an earlier
 *     run's results. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "ckpt/ckpt.h"
#include "ct_test.h"
#include "fit/checkpointer.h"
#include "fit/report.h"

static const char *DIR_ = "fit_objects_output";

static void fresh_dir(void) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", DIR_, DIR_);
    CHECK(system(cmd) == 0);
}

/* The lines of DIR_/metrics.jsonl, parsed (NEW array). */
static json_t *log_lines(void) {
    char path[256], *line = NULL;
    size_t cap = 0;
    snprintf(path, sizeof path, "%s/metrics.jsonl", DIR_);
    json_t *all = json_array();
    FILE *f = fopen(path, "r");
    if (!f) return all;
    while (getline(&line, &cap, f) > 0) json_array_append_new(all, json_loads(line, 0, NULL));
    free(line);
    fclose(f);
    return all;
}

/* stdout into a file while `on`; the text written since, NEW. */
static int g_saved_stdout = -1;
static void capture_stdout(void) {
    fflush(stdout);
    g_saved_stdout = dup(STDOUT_FILENO);
    int fd = open("fit_objects_stdout.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    close(fd);
}
static char *captured(void) {
    fflush(stdout);
    dup2(g_saved_stdout, STDOUT_FILENO);
    close(g_saved_stdout);
    return ct_test_slurp("fit_objects_stdout.txt");
}

static ct_value *metrics_of(double loss) {
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "loss", ct_value_float(loss));
    return m;
}

/* ---- the reporter ---------------------------------------------------------------- */

static void test_reporter(void) {
    fresh_dir();
    ct_fit_opts o = ct_fit_defaults();
    o.output_dir = DIR_;
    o.max_length = ct_batches(20);
    cti_position pos = cti_position_start();
    pos.epoch_len = 4;
    pos.max_length_batches = 20;
    bool tensorboard = false;
    ct_device cpu = ct_cpu();
    cti_reporter_opts ro = {.opts = &o, .pos = &pos, .tensorboard = &tensorboard, .device = &cpu, .rank = 0, .size = 1};
    cti_reporter *r = cti_reporter_new(&ro);
    CHECK(r != NULL);
    CHECK_OK(cti_report_open(r, false));

    /* Half a second of waiting for data, told after the fact. */
    cti_time_add(r, CT_TIME_DATA, cti_clock_monotonic() - 0.5);
    cti_time_add(NULL, CT_TIME_DATA, 0); /* a trial outside ct_fit: nothing */
    pos.batches_trained = 10;
    pos.records_trained = 40;
    capture_stdout();
    ct_value *m = metrics_of(0.25);
    CHECK_OK(cti_report(r, "training", m));
    /* "batches" and "epochs" join the metrics. */
    int64_t b = 0;
    CHECK(ct_value_get_int(ct_value_dict_get(m, "batches"), &b) == 0 && b == 10);
    ct_value_free(m);
    pos.batches_trained = 12;
    m = metrics_of(0.125);
    CHECK_OK(cti_report(r, "validation", m));
    ct_value_free(m);
    m = metrics_of(0.5);
    CHECK_OK(cti_report(r, "training", m));
    ct_value_free(m);
    cti_report_checkpoint(r, 12, "period", false);
    cti_report_checkpoint(r, 8, "policy", true);
    char *out = captured();
    /* Plain lines (stdout is a file): progress and metrics, validation,
     * the checkpoint. */
    CHECK(strstr(out, "[10/20  50.0%] epoch 2.50") != NULL);
    CHECK(strstr(out, "  loss 0.25  | data ") != NULL);
    CHECK(strstr(out, "validation at batch 12 (epoch 3.00):  loss 0.125\n") != NULL);
    CHECK(strstr(out, "checkpoint at batch 12 (period)\n") != NULL);
    CHECK(strstr(out, "checkpoint at batch 8 (policy, written in the background)\n") != NULL);
    free(out);

    json_t *lines = log_lines();
    CHECK(json_array_size(lines) == 3);
    json_t *t0 = json_array_get(lines, 0), *v = json_array_get(lines, 1), *t1 = json_array_get(lines, 2);
    CHECK(!strcmp(json_string_value(json_object_get(t0, "group")), "training"));
    CHECK(json_integer_value(json_object_get(t0, "batches")) == 10);
    CHECK(json_real_value(json_object_get(t0, "epochs")) == 2.5);
    CHECK(json_real_value(json_object_get(json_object_get(t0, "metrics"), "loss")) == 0.25);
    json_t *tm = json_object_get(t0, "timings");
    double data = json_real_value(json_object_get(tm, "data_s")), wall = json_real_value(json_object_get(tm, "wall_s"));
    CHECK(data >= 0.5 && data < 0.6);
    CHECK(json_object_size(tm) == 8 && json_real_value(json_object_get(tm, "comm_s")) == 0.0);
    (void)wall;
    /* A validation line has no timings; the next training line's interval
     * starts after the first (the data time was counted once). */
    CHECK(!strcmp(json_string_value(json_object_get(v, "group")), "validation") && !json_object_get(v, "timings"));
    CHECK(json_integer_value(json_object_get(v, "batches")) == 12);
    CHECK(json_real_value(json_object_get(json_object_get(t1, "timings"), "data_s")) == 0.0);
    json_decref(lines);
    cti_reporter_free(r);

    /* A resume at batch 10: the log is cut back to it (the validation at 12
     * and the training line after it were written by a run that went on and
     * was lost), and a torn last line goes too. */
    char path[256];
    snprintf(path, sizeof path, "%s/metrics.jsonl", DIR_);
    FILE *f = fopen(path, "a");
    fputs("{\"group\": \"training\", \"batches\": 9", f); /* torn */
    fclose(f);
    pos = cti_position_start();
    pos.batches_trained = pos.initial_batch = 10;
    pos.records_trained = 40;
    pos.epoch_len = 4;
    pos.max_length_batches = 20;
    r = cti_reporter_new(&ro);
    CHECK_OK(cti_report_open(r, true));
    lines = log_lines();
    CHECK(json_array_size(lines) == 1 && json_integer_value(json_object_get(json_array_get(lines, 0), "batches")) == 10);
    json_decref(lines);
    o.quiet = true;
    pos.batches_trained = 14;
    m = metrics_of(1.0);
    CHECK_OK(cti_report(r, "training", m));
    ct_value_free(m);
    lines = log_lines();
    CHECK(json_array_size(lines) == 2 && json_integer_value(json_object_get(json_array_get(lines, 1), "batches")) == 14);
    json_decref(lines);
    cti_reporter_free(r);

    /* Rank 1 writes nothing (and opens nothing), but its metrics get the
     * same "batches" and "epochs". */
    cti_reporter_opts r1 = ro;
    r1.rank = 1;
    r = cti_reporter_new(&r1);
    m = metrics_of(2.0);
    CHECK_OK(cti_report(r, "training", m));
    CHECK(ct_value_get_int(ct_value_dict_get(m, "batches"), &b) == 0 && b == 14);
    ct_value_free(m);
    lines = log_lines();
    CHECK(json_array_size(lines) == 2);
    json_decref(lines);
    cti_reporter_free(r);
}

/* ---- the checkpointer --------------------------------------------------------------- */

static ct_value *small_state(int64_t x) {
    ct_value *s = ct_value_dict();
    ct_value_dict_set(s, "x", ct_value_int(x));
    return s;
}

/* metadata.json's keys a checkpoint needs (ckpt/dir.c checks them; the
 * run's state writes them all): NEW. */
static json_t *small_metadata(int64_t bt) {
    return json_pack("{s:I, s:I, s:s, s:s, s:{s:I}}", "steps_completed", (json_int_t)bt, "batches_trained",
                     (json_int_t)bt, "framework", "torch", "format", CT_CKPT_FORMAT, "trial_state", "batches_trained",
                     (json_int_t)bt);
}

static void test_checkpointer(void) {
    fresh_dir();
    ct_fit_opts o = ct_fit_defaults();
    o.output_dir = DIR_;
    o.save_trial_latest = 1;
    o.save_trial_best = 0;
    o.quiet = true;
    cti_checkpointer *c = cti_checkpointer_new(&o, 0);
    char want[256];
    snprintf(want, sizeof want, "%s/checkpoints", DIR_);
    CHECK(c && !strcmp(cti_checkpointer_dir(c), want));
    CHECK(cti_checkpointer_last(c)[0] == '\0' && cti_checkpointer_resume_dir(c)[0] == '\0');

    /* The policy's best: strictly better, none yet counts as worse, NaN
     * and infinities never. */
    double best = -1;
    CHECK(!cti_checkpointer_best(c, &best) && best == 0.0);
    CHECK(!cti_checkpointer_improves(c, NAN) && !cti_checkpointer_improves(c, INFINITY));
    CHECK(cti_checkpointer_improves(c, 3.0));
    CHECK(!cti_checkpointer_improves(c, 3.0) && !cti_checkpointer_improves(c, 4.0));
    CHECK(cti_checkpointer_improves(c, 2.0) && cti_checkpointer_best(c, &best) && best == 2.0);
    cti_checkpointer_set_best(c, false, 0);
    CHECK(!cti_checkpointer_best(c, NULL));

    /* Nothing to resume yet: "latest" starts from the beginning. */
    o.resume = "latest";
    CHECK_OK(cti_checkpointer_find_resume(c));
    CHECK(cti_checkpointer_resume_dir(c)[0] == '\0' && cti_checkpointer_resume_meta(c) == NULL);

    /* Two checkpoints; retention keeps the latest one. */
    ct_value *s = small_state(5);
    CHECK_OK(cti_checkpointer_write(c, 5, s, small_metadata(5)));
    ct_value_free(s);
    CHECK(strstr(cti_checkpointer_last(c), "/ckpt-000005-") != NULL);
    char first[4096];
    snprintf(first, sizeof first, "%s", cti_checkpointer_last(c));
    s = small_state(7);
    CHECK_OK(cti_checkpointer_write(c, 7, s, small_metadata(7)));
    ct_value_free(s);
    CHECK(strstr(cti_checkpointer_last(c), "/ckpt-000007-") != NULL);
    size_t n = 0;
    CHECK_OK(cti_ckpt_count(cti_checkpointer_dir(c), &n));
    CHECK(n == 1);
    struct stat st;
    CHECK(stat(first, &st) != 0); /* pruned */
    CHECK_OK(cti_checkpointer_share_last(c)); /* one rank: nothing to send */

    /* In the background: the snapshot is the writer's; a second write
     * waits for finish (CT_ESTATE); finish gives the outcome and the last
     * checkpoint, pruned as a synchronous write prunes. */
    CHECK(!cti_checkpointer_writing(c) && cti_checkpointer_finish(c) == CT_OK);
    CHECK_OK(cti_checkpointer_write_background(c, 9, small_state(9), small_metadata(9)));
    CHECK(cti_checkpointer_writing(c));
    CHECK(cti_checkpointer_write_background(c, 10, small_state(10), small_metadata(10)) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "already being written in the background");
    CHECK_OK(cti_checkpointer_finish(c));
    CHECK(!cti_checkpointer_writing(c) && strstr(cti_checkpointer_last(c), "/ckpt-000009-") != NULL);
    CHECK_OK(cti_ckpt_count(cti_checkpointer_dir(c), &n));
    CHECK(n == 1);
    cti_checkpointer_free(c);

    /* A background write that fails (the checkpoint folder under a file)
     * says so at finish, with its batch and reason, and leaves nothing that
     * counts. */
    char blocker[256], bad_dir[300];
    snprintf(blocker, sizeof blocker, "%s/a-file", DIR_);
    FILE *bf = fopen(blocker, "w");
    fclose(bf);
    snprintf(bad_dir, sizeof bad_dir, "%s/ckpts", blocker);
    ct_fit_opts bad = o;
    bad.checkpoint_dir = bad_dir;
    c = cti_checkpointer_new(&bad, 0);
    CHECK_OK(cti_checkpointer_write_background(c, 11, small_state(11), small_metadata(11)));
    CHECK(cti_checkpointer_finish(c) != CT_OK);
    CHECK_ERR(ct_last_code(), "writing a checkpoint at batch 11");
    CHECK(cti_checkpointer_last(c)[0] == '\0' && !cti_checkpointer_writing(c));
    cti_checkpointer_free(c);

    /* A new run resuming "latest" finds it, verified, with its metadata. */
    c = cti_checkpointer_new(&o, 0);
    CHECK_OK(cti_checkpointer_find_resume(c));
    CHECK(strstr(cti_checkpointer_resume_dir(c), "/ckpt-000009-") != NULL);
    CHECK(json_integer_value(json_object_get(cti_checkpointer_resume_meta(c), "batches_trained")) == 9);
    cti_checkpointer_free(c);
    /* A path that is no checkpoint: CT_ECHECKPOINT naming it. */
    o.resume = "fit_objects_output/nowhere";
    c = cti_checkpointer_new(&o, 0);
    CHECK(cti_checkpointer_find_resume(c) == CT_ECHECKPOINT);
    CHECK_ERR(CT_ECHECKPOINT, "nowhere");
    cti_checkpointer_free(c);

    /* An earlier run's results: refused without overwrite, naming what is
     * there; with overwrite removed. */
    char path[256];
    snprintf(path, sizeof path, "%s/metrics.jsonl", DIR_);
    FILE *f = fopen(path, "w");
    fputs("{\"group\": \"training\", \"batches\": 1}\n", f);
    fclose(f);
    o.resume = NULL;
    c = cti_checkpointer_new(&o, 0);
    CHECK(cti_checkpointer_guard(c) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "holds an earlier run (metrics.jsonl, 1 checkpoint in fit_objects_output/checkpoints");
    CHECK(stat(path, &st) == 0);
    cti_checkpointer_free(c);
    cti_checkpointer *other_rank = cti_checkpointer_new(&o, 1);
    CHECK_OK(cti_checkpointer_guard(other_rank)); /* rank 0's business */
    cti_checkpointer_free(other_rank);
    o.overwrite = true;
    c = cti_checkpointer_new(&o, 0);
    CHECK_OK(cti_checkpointer_guard(c));
    CHECK(stat(path, &st) != 0);
    CHECK_OK(cti_ckpt_count(cti_checkpointer_dir(c), &n));
    CHECK(n == 0);
    cti_checkpointer_free(c);
}

int main(void) {
    test_reporter();
    test_checkpointer();
    return ct_test_result("loop_fit_objects");
}
