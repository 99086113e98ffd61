/*
 * ctrial/fit_opts.h — the options of a run: units and periods (Determined's
 * Batch, Epoch and Records lengths), and ct_fit_opts with its defaults.
 *
 * Module config owns them: it reads an experiment config (JSON or YAML)
 * into these, and ct_fit (trial.h, which includes this header) runs them.
 *
 *     ct_fit_opts o = ct_fit_defaults();
 *     o.max_length = ct_epochs(3);
 *     o.validation_period = ct_batches(500);
 *     o.global_batch_size = 64;
 *     int rc = ct_fit(&trial, &o);
 */
#ifndef CTRIAL_FIT_OPTS_H
#define CTRIAL_FIT_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== units and periods =================================================== */

typedef enum {
    CT_NEVER = 0,   /* no period: never fires */
    CT_BATCHES,     /* every n batches, or at the listed batch counts */
    CT_EPOCHS,      /* at the end of every n-th epoch, or of the listed epochs */
    CT_RECORDS,     /* config only: becomes batches by the global batch size */
    CT_UNIT_MAX_ENUM_ = 0x7fffffff
} ct_unit;

#define CT_SCHEDULE_MAX 64

/* Batch(n), Epoch(n), or an explicit schedule Batch({a, b, c}). */
typedef struct {
    ct_unit unit;
    int64_t n;                          /* the period or length */
    int num_points;                     /* > 0: a schedule, n is ignored */
    int64_t points[CT_SCHEDULE_MAX];
} ct_period;

/* Invalid input (n < 1; a schedule of fewer than 1 or more than
 * CT_SCHEDULE_MAX points, a point < 1, a unit other than CT_BATCHES or
 * CT_EPOCHS, NULL points) records CT_EINVAL and returns a CT_NEVER period,
 * which ct_fit refuses as max_length. Unlike Determined, Batch(0) is not
 * "every batch": use ct_batches(1). */
CT_API ct_period ct_batches(int64_t n);
CT_API ct_period ct_epochs(int64_t n);
CT_API ct_period ct_records(int64_t n);
CT_API ct_period ct_never(void);
/* A schedule of explicit points (sorted or not) in batches or epochs; the
 * period holds them sorted, duplicates removed. */
CT_API ct_period ct_schedule(ct_unit unit, int n, const int64_t *points);

/* ==== the options of a run =============================================== */

/* The alignment that puts a field added to an option struct at or past
 * the size of the struct's previous version. */
#if defined(__cplusplus)
#define CT_NEW_FIELD alignas(8)
#else
#define CT_NEW_FIELD _Alignas(8)
#endif

typedef enum {
    CT_CKPT_BEST = 0, /* checkpoint after a validation that improves searcher.metric */
    CT_CKPT_ALL,      /* after every validation */
    CT_CKPT_NONE,     /* never because of a validation */
    CT_CKPT_MAX_ENUM_ = 0x7fffffff
} ct_ckpt_policy;

/* The options of a run. Make them with ct_fit_defaults() and change what
 * you need: the struct carries its size, so a program built against this
 * header runs with a later libctrial, whose new options then keep their
 * defaults (docs/design.md, "A stable ABI"). */
typedef struct {
    uint32_t size;                 /* sizeof(ct_fit_opts) where it was made: set by ct_fit_defaults(),
                                    * never by hand */
    ct_period max_length;          /* required: Batch(n) or Epoch(n) */
    ct_period validation_period;   /* never */
    ct_period checkpoint_period;   /* never */
    ct_period reporting_period;    /* Batch(100) */
    ct_ckpt_policy checkpoint_policy; /* best */
    const char *searcher_metric;   /* "validation_loss" */
    bool smaller_is_better;        /* true */
    bool step_zero_validation;     /* false */
    bool test_mode;                /* false */
    int64_t global_batch_size;     /* 0: from hparams' global_batch_size */
    int aggregation_frequency;     /* 1 */
    int64_t bucket_cap_mb;         /* gradient all-reduce bucket size under mpirun (25) */
    double dist_timeout;           /* seconds a rank waits in a collective before the job ends
                                    * naming the ranks that did not arrive (0: CTRIAL_DIST_TIMEOUT,
                                    * else 30 minutes; INFINITY: no timeout); see dist.h */
    bool cuda_graphs;              /* capture the training step in a CUDA graph, replay it (false) */
    int cuda_graph_warmup;         /* eager batches before the capture, >= 1 (3) */
    bool tune_malloc;              /* glibc's heap thresholds set for training, process-wide (true) */
    uint64_t seed;                 /* experiment seed (0) */
    const char *output_dir;        /* metrics.jsonl, events, checkpoints ("output") */
    const char *checkpoint_dir;    /* checkpoint_storage.host_path (NULL: output_dir/checkpoints) */
    int save_trial_latest;         /* checkpoints kept by recency (1) */
    int save_trial_best;           /* checkpoints kept by searcher metric (1) */
    bool stop_on_nan;              /* a non-finite training loss stops the trial (false) */
    const char *resume;            /* checkpoint dir or "latest" (NULL) */
    const char *device;            /* "cpu", "cuda:N" (NULL: cpu) */
    int num_threads;               /* intra-op threads per rank (0: OMP_NUM_THREADS if set, else the idle CPUs' share: docs/api/trial.md) */
    bool quiet;                    /* only errors on the console */
    const ct_value *hparams;       /* borrowed dict (NULL: none) */
    const ct_value *data;          /* borrowed data config (NULL) */
    const ct_value *experiment_config; /* borrowed: the whole config, for ct_ctx_experiment_config (NULL) */
    void *user;                    /* the program's own pointer, for ct_ctx_user_data (NULL) */
    int64_t experiment_id;         /* ct_ctx_experiment_id (1) */
    int64_t trial_id;              /* ct_ctx_trial_id; recorded in checkpoints (1) */
    bool tensorboard;              /* TensorBoard event files in output_dir (true) */
    const char *warm_start;        /* a checkpoint (ctrial's or Determined's) whose models,
                                    * optimizers and schedulers start a fresh trial (NULL) */
    bool overwrite;                /* replace an earlier run's results in output_dir instead of
                                    * refusing to start (false) */
    /* ---- version 2: fields added later start at or past the previous
     * version's size (CT_NEW_FIELD), so an older program's padding never
     * lands in one (docs/design.md, "A stable ABI"). */
    CT_NEW_FIELD bool deterministic; /* deterministic algorithms while the fit runs (ct_set_deterministic;
                                    * Lightning's Trainer(deterministic=True)) (false) */
    /* ---- version 3: checkpoints in object storage (docs/api/ckpt.md, "Object storage") */
    CT_NEW_FIELD const char *checkpoint_storage; /* "s3://BUCKET[/PREFIX]": every checkpoint is also uploaded
                                    * there (metadata.json last), retention applies there too, and
                                    * resume "latest" takes the latest there; checkpoint_dir keeps
                                    * the local copies. NULL: the disk alone */
    const char *s3_endpoint_url;   /* an S3-compatible store, "http(s)://host[:port]" (NULL:
                                    * AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL if set, else AWS) */
    const char *s3_access_key;     /* NULL: AWS_ACCESS_KEY_ID */
    const char *s3_secret_key;     /* NULL: AWS_SECRET_ACCESS_KEY */
    bool mixed_precision;          /* AMP in float16 with a GradScaler (ct_ctx_use_amp's defaults) unless
                                    * the trial set up AMP itself: optimizations.mixed_precision O1
                                    * (false) */
    bool average_aggregated_gradients; /* with aggregation_frequency > 1, the step sees the mean of
                                    * the window's gradients; false: their sum (true) */
    int64_t records_per_epoch;     /* Determined's records_per_epoch: epochs here are the training
                                    * data's; a value that differs from its length is warned about
                                    * (0: not given) */
    /* ---- version 4: checkpoints that do not stop training (docs/api/ckpt.md) */
    CT_NEW_FIELD bool background_checkpoints; /* a checkpoint during training is a snapshot in host
                                    * memory, written and committed by a thread while training goes
                                    * on (the run's last one, and one before it stops, are written
                                    * at once) (false) */
    /* ---- version 5: optimizer state sharded across ranks (docs/api/trial.md) */
    CT_NEW_FIELD bool shard_optimizer; /* under mpirun each rank steps, and keeps the optimizer state
                                    * of, its share of the parameters, then broadcasts them (ZeRO
                                    * stage 1, torch's ZeroRedundancyOptimizer); checkpoints hold the
                                    * whole state in torch's layout (false) */
} ct_fit_opts;

/* Fills the first `size` bytes of *o with the defaults noted above and
 * sets o->size. Called through ct_fit_defaults(), which passes the size the
 * program was compiled with. */
CT_API void ct_fit_opts_init(ct_fit_opts *o, size_t size);
/* The defaults (the comments above): a struct of this program's size. */
static inline ct_fit_opts ct_fit_defaults(void) {
    ct_fit_opts o;
    ct_fit_opts_init(&o, sizeof o);
    return o;
}

#ifdef __cplusplus
}
#endif
#endif
