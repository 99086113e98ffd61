/* Writes the hyperparameter search that test_hp_read.py reads back with
 * TensorBoard's own readers and its HParams plugin. Usage:
 *
 *     hp_write LOGDIR TORCHDIR
 *
 * LOGDIR gets the layout a search writes: the experiment at its top, and
 * two sessions (trials) in LOGDIR/trials/1 and LOGDIR/trials/2, each with
 * validation/validation_accuracy and training/loss scalars. Trial 1 writes
 * everything through one writer; trial 2, as a search beside a training
 * loop would, its start and end through one writer and its scalars through
 * another, in the same directory. TORCHDIR gets an experiment and a session
 * that torch.utils.tensorboard.summary.hparams() can express (no interval,
 * no bool), which the script compares with torch's.
 *
 * Times are binary fractions, so Python compares them exactly. */
#include <stdio.h>
#include <string.h>

#include "ctrial/error.h"
#include "formats/tb_hparams.h"

static int fail(const char *what) {
    fprintf(stderr, "hp_write: %s: %s: %s\n", what, ct_strerror(ct_last_code()), ct_last_error());
    return 1;
}

#define NUM(x) {.kind = CT_TB_HP_NUMBER, .number = (x)}
#define STR(x) {.kind = CT_TB_HP_STRING, .string = (x)}
#define BOOL(x) {.kind = CT_TB_HP_BOOL, .boolean = (x)}
#define N(a) (sizeof(a) / sizeof((a)[0]))

static const char *const metrics[] = {"validation/validation_accuracy", "training/loss"};

static int scalars(cti_tb_writer *w, double acc0, double base_time) {
    for (int i = 1; i <= 3; i++) {
        int64_t step = 100 * i;
        if (cti_tb_add_scalar(w, "training/loss", 2.0 / i, step, base_time + i) ||
            cti_tb_add_scalar(w, "validation/validation_accuracy", acc0 + 0.125 * i, step,
                             base_time + i + 0.5))
            return -1;
    }
    return cti_tb_flush(w);
}

static int search(const char *logdir) {
    static const cti_tb_hp_value lr_domain[] = {NUM(0.001), NUM(0.01), NUM(0.1)};
    static const cti_tb_hp_value opt_domain[] = {STR("adam"), STR("sgd")};
    static const cti_tb_hp_value bn_domain[] = {BOOL(0), BOOL(1)};
    const cti_tb_hp_info hps[] = {
        {.name = "lr", .kind = CT_TB_HP_NUMBER, .domain = CT_TB_HP_DISCRETE, .values = lr_domain,
         .n_values = N(lr_domain)},
        {.name = "optimizer", .kind = CT_TB_HP_STRING, .domain = CT_TB_HP_DISCRETE,
         .values = opt_domain, .n_values = N(opt_domain)},
        {.name = "dropout", .kind = CT_TB_HP_NUMBER, .domain = CT_TB_HP_INTERVAL, .min = 0.0,
         .max = 0.5},
        {.name = "use_bn", .kind = CT_TB_HP_BOOL, .domain = CT_TB_HP_DISCRETE, .values = bn_domain,
         .n_values = N(bn_domain)},
        {.name = "layers", .kind = CT_TB_HP_NUMBER},
        {.name = "note", .kind = CT_TB_HP_STRING},
    };
    cti_tb_writer *e = cti_tb_open(logdir, ".hparams");
    if (!e) return fail("open experiment");
    if (cti_tb_add_hparams_experiment(e, hps, N(hps), metrics, N(metrics), 1700000000.5))
        return fail("experiment");
    cti_tb_close(e);

    /* Trial 1: one writer. Values out of name order (the map is sorted). */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/trials/1", logdir);
    const cti_tb_hp_value v1[] = {
        {.name = "use_bn", .kind = CT_TB_HP_BOOL, .boolean = 7},
        {.name = "lr", .kind = CT_TB_HP_NUMBER, .number = 0.1},
        {.name = "optimizer", .kind = CT_TB_HP_STRING, .string = "sgd"},
        {.name = "dropout", .kind = CT_TB_HP_NUMBER, .number = 0.25},
        {.name = "note", .kind = CT_TB_HP_STRING, .string = "größe €"},
        {.name = "layers", .kind = CT_TB_HP_NUMBER, .number = 3},
    };
    cti_tb_writer *w = cti_tb_open(dir, "");
    if (!w) return fail("open trial 1");
    if (cti_tb_add_hparams_session_start(w, NULL, v1, N(v1), 1700000001.0)) return fail("start 1");
    if (scalars(w, 0.5, 1700000010.0)) return fail("scalars 1");
    if (cti_tb_add_hparams_session_end(w, CT_TB_HP_STATUS_SUCCESS, 1700000100.25))
        return fail("end 1");
    cti_tb_close(w);

    /* Trial 2: the summaries in one file, the scalars in another; a group
     * name; zero, false and "" values, which proto3 writes in a oneof. */
    snprintf(dir, sizeof dir, "%s/trials/2", logdir);
    const cti_tb_hp_value v2[] = {
        {.name = "optimizer", .kind = CT_TB_HP_STRING, .string = "adam"},
        {.name = "note", .kind = CT_TB_HP_STRING, .string = ""},
        {.name = "lr", .kind = CT_TB_HP_NUMBER, .number = 0.01},
        {.name = "dropout", .kind = CT_TB_HP_NUMBER, .number = 0.0},
        {.name = "use_bn", .kind = CT_TB_HP_BOOL, .boolean = 0},
        {.name = "layers", .kind = CT_TB_HP_NUMBER, .number = -1},
    };
    cti_tb_writer *h = cti_tb_open(dir, ".hparams");
    if (!h) return fail("open trial 2");
    if (cti_tb_add_hparams_session_start(h, "trial-2", v2, N(v2), 1700000002.0))
        return fail("start 2");
    if (cti_tb_flush(h)) return fail("flush 2");
    cti_tb_writer *loop = cti_tb_open(dir, "");
    if (!loop) return fail("open trial 2's loop");
    if (scalars(loop, 0.25, 1700000020.0)) return fail("scalars 2");
    cti_tb_close(loop);
    if (cti_tb_add_hparams_session_end(h, CT_TB_HP_STATUS_FAILURE, 1700000200.75))
        return fail("end 2");
    cti_tb_close(h);
    return 0;
}

/* What torch's hparams() can say: numbers (torch writes ints as numbers)
 * and strings, discrete domains in the order given, the metrics' tags. */
static int torch_like(const char *dir) {
    static const cti_tb_hp_value lr_domain[] = {NUM(0.1), NUM(0.01), NUM(0.001)};
    static const cti_tb_hp_value opt_domain[] = {STR("sgd"), STR("adam")};
    const cti_tb_hp_info hps[] = {
        {.name = "lr", .kind = CT_TB_HP_NUMBER, .domain = CT_TB_HP_DISCRETE, .values = lr_domain,
         .n_values = N(lr_domain)},
        {.name = "optimizer", .kind = CT_TB_HP_STRING, .domain = CT_TB_HP_DISCRETE,
         .values = opt_domain, .n_values = N(opt_domain)},
        {.name = "layers", .kind = CT_TB_HP_NUMBER},
        {.name = "note", .kind = CT_TB_HP_STRING},
    };
    const cti_tb_hp_value v[] = {
        {.name = "lr", .kind = CT_TB_HP_NUMBER, .number = 0.1},
        {.name = "optimizer", .kind = CT_TB_HP_STRING, .string = "sgd"},
        {.name = "layers", .kind = CT_TB_HP_NUMBER, .number = 3},
        {.name = "note", .kind = CT_TB_HP_STRING, .string = "größe €"},
    };
    cti_tb_writer *w = cti_tb_open(dir, "");
    if (!w) return fail("open torch-like");
    if (cti_tb_add_hparams_experiment(w, hps, N(hps), metrics, N(metrics), 1700000300.0) ||
        cti_tb_add_hparams_session_start(w, "", v, N(v), 1700000301.0) ||
        cti_tb_add_hparams_session_end(w, CT_TB_HP_STATUS_SUCCESS, 1700000302.0))
        return fail("torch-like");
    cti_tb_close(w);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: hp_write LOGDIR TORCHDIR\n");
        return 2;
    }
    if (search(argv[1]) || torch_like(argv[2])) return 1;
    return 0;
}
