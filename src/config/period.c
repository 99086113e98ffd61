/* src/config/period.c — units and periods (Batch(n), Epoch(n), schedules),
 * when they fire (period.h), and the defaults of ct_fit_opts (see trial.h).
 *
 * A constructor given an impossible value returns a CT_NEVER period and
 * records the error instead of returning a status: periods are built inside
 * option initialisers (`o.max_length = ct_epochs(3)`), where a status has
 * nowhere to go. ct_fit refuses a CT_NEVER max_length, so the mistake still
 * surfaces before any training. */
#include "config/period.h"

#include <stddef.h>
#include <stdlib.h>

#include "base/opts.h"

ct_period ct_never(void) {
    ct_period p = {.unit = CT_NEVER};
    return p;
}

static ct_period every(ct_unit unit, int64_t n, const char *fn) {
    /* Determined reads Batch(0) as "every batch"; ctrial refuses it so that
     * a zero that came from a typo or an unset variable is caught. */
    if (n < 1) {
        ct_set_error(CT_EINVAL, "%s: n must be >= 1, got %lld", fn, (long long)n);
        return ct_never();
    }
    ct_period p = {.unit = unit, .n = n};
    return p;
}

ct_period ct_batches(int64_t n) { return every(CT_BATCHES, n, __func__); }
ct_period ct_epochs(int64_t n) { return every(CT_EPOCHS, n, __func__); }
ct_period ct_records(int64_t n) { return every(CT_RECORDS, n, __func__); }

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

ct_period ct_schedule(ct_unit unit, int n, const int64_t *points) {
    /* Determined has schedules of batches and of epochs only; records exist
     * in the config, where schedules do not. */
    if (unit != CT_BATCHES && unit != CT_EPOCHS) {
        ct_set_error(CT_EINVAL, "ct_schedule: unit must be CT_BATCHES or CT_EPOCHS, got %d",
                     (int)unit);
        return ct_never();
    }
    if (n < 1 || n > CT_SCHEDULE_MAX) {
        ct_set_error(CT_EINVAL, "ct_schedule: %d points, expected 1..%d", n, CT_SCHEDULE_MAX);
        return ct_never();
    }
    if (!points) {
        ct_set_error(CT_EINVAL, "ct_schedule: points is NULL");
        return ct_never();
    }
    ct_period p = {.unit = unit};
    for (int i = 0; i < n; i++) {
        if (points[i] < 1) {
            ct_set_error(CT_EINVAL, "ct_schedule: point %d is %lld, expected >= 1", i,
                         (long long)points[i]);
            return ct_never();
        }
        p.points[i] = points[i];
    }
    /* Sorted and without duplicates, so the loop may search it and a
     * repeated point cannot fire twice. */
    qsort(p.points, (size_t)n, sizeof *p.points, cmp_i64);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || p.points[i] != p.points[k - 1]) p.points[k++] = p.points[i];
    p.num_points = k;
    return p;
}

bool cti_period_in_batches(ct_period *p, int64_t global_batch_size) {
    if (p->unit != CT_RECORDS) return true;
    if (global_batch_size < 1) return false;
    int64_t b = p->n / global_batch_size;
    *p = ct_batches(b > 1 ? b : 1);
    return true;
}

static bool in_schedule(const ct_period *p, int64_t x) {
    for (int i = 0; i < p->num_points; i++)
        if (p->points[i] == x) return true;
    return false;
}

bool cti_period_fires(const ct_period *p, int64_t n, int64_t epoch_len) {
    switch ((int)p->unit) {
    case CT_BATCHES:
        if (p->num_points > 0) return in_schedule(p, n);
        return p->n < 1 || n % p->n == 0;
    case CT_EPOCHS: {
        if (epoch_len <= 0 || n % epoch_len != 0) return false;
        int64_t epochs_done = n / epoch_len;
        if (p->num_points > 0) return in_schedule(p, epochs_done);
        return p->n < 1 || epochs_done % p->n == 0;
    }
    default: return false;
    }
}

/* How many multiples of `step` lie in (from, to]. */
static int64_t multiples(int64_t from, int64_t to, int64_t step) { return to / step - from / step; }

int64_t cti_period_count(const ct_period *p, int64_t from, int64_t to, int64_t epoch_len) {
    if (to <= from || p->unit == CT_NEVER || (p->unit == CT_EPOCHS && epoch_len <= 0)) return 0;
    int64_t scale = p->unit == CT_EPOCHS ? epoch_len : 1; /* batches per unit */
    if (p->num_points > 0) {
        int64_t count = 0;
        for (int i = 0; i < p->num_points; i++)
            if (p->points[i] > from / scale && p->points[i] <= to / scale) count++;
        return count;
    }
    if (p->n < 1) return multiples(from, to, scale);
    /* Every n-th unit: multiples of n * scale batches (n alone when that would overflow, as no run gets there). */
    return p->n > INT64_MAX / scale ? 0 : multiples(from, to, p->n * scale);
}

static ct_fit_opts fit_defaults(void) {
    ct_fit_opts o = {
        .size = sizeof(ct_fit_opts),
        .max_length = ct_never(), /* required: ct_fit refuses CT_NEVER */
        .validation_period = ct_never(),
        .checkpoint_period = ct_never(),
        .reporting_period = {.unit = CT_BATCHES, .n = 100},
        .checkpoint_policy = CT_CKPT_BEST,
        .searcher_metric = "validation_loss",
        .smaller_is_better = true,
        .aggregation_frequency = 1,
        .average_aggregated_gradients = true,
        .bucket_cap_mb = 25,
        .cuda_graph_warmup = 3,
        .tune_malloc = true,
        .output_dir = "output",
        .save_trial_latest = 1,
        .save_trial_best = 1,
        .experiment_id = 1,
        .trial_id = 1,
        .tensorboard = true,
    };
    return o;
}

/* The sizes ct_fit_opts has had (docs/design.md, "A stable ABI"). Version
 * 1, the first with a size field, ends at `overwrite`. A field added later
 * goes at the end, at or past the size of the version before it (declared
 * with CT_NEW_FIELD), so that an older program's padding never lands in a
 * new field: the last assertion trips when the struct grows, to have the
 * new version's size written here with an assertion that its first field
 * starts at or past the previous version's size. */
#define ROUND_UP(n, a) (((n) + (a) - 1) / (a) * (a))
#define FIT_OPTS_V1_SIZE ROUND_UP(offsetof(ct_fit_opts, overwrite) + sizeof(bool), _Alignof(ct_fit_opts))
/* Version 2 adds `deterministic`. */
_Static_assert(offsetof(ct_fit_opts, deterministic) >= FIT_OPTS_V1_SIZE,
               "ct_fit_opts.deterministic must start past version 1 (CT_NEW_FIELD)");
#define FIT_OPTS_V2_SIZE ROUND_UP(offsetof(ct_fit_opts, deterministic) + sizeof(bool), _Alignof(ct_fit_opts))
/* Version 3 adds checkpoint_storage and the S3 client's three strings,
 * mixed_precision, average_aggregated_gradients and records_per_epoch. */
_Static_assert(offsetof(ct_fit_opts, checkpoint_storage) >= FIT_OPTS_V2_SIZE,
               "ct_fit_opts.checkpoint_storage must start past version 2 (CT_NEW_FIELD)");
#define FIT_OPTS_V3_SIZE \
    ROUND_UP(offsetof(ct_fit_opts, records_per_epoch) + sizeof(int64_t), _Alignof(ct_fit_opts))
/* Version 4 adds background_checkpoints. */
_Static_assert(offsetof(ct_fit_opts, background_checkpoints) >= FIT_OPTS_V3_SIZE,
               "ct_fit_opts.background_checkpoints must start past version 3 (CT_NEW_FIELD)");
#define FIT_OPTS_V4_SIZE ROUND_UP(offsetof(ct_fit_opts, background_checkpoints) + sizeof(bool), _Alignof(ct_fit_opts))
/* Version 5 adds shard_optimizer. */
_Static_assert(offsetof(ct_fit_opts, shard_optimizer) >= FIT_OPTS_V4_SIZE,
               "ct_fit_opts.shard_optimizer must start past version 4 (CT_NEW_FIELD)");
#define FIT_OPTS_V5_SIZE ROUND_UP(offsetof(ct_fit_opts, shard_optimizer) + sizeof(bool), _Alignof(ct_fit_opts))
_Static_assert(sizeof(ct_fit_opts) == FIT_OPTS_V5_SIZE,
               "ct_fit_opts grew: record its version 6 size here (see the comment above)");

void ct_fit_opts_init(ct_fit_opts *o, size_t size) {
    ct_fit_opts d = fit_defaults();
    cti_opts_init(o, size, &d, sizeof d);
}

int cti_fit_opts_take(const ct_fit_opts *o, ct_fit_opts *out) {
    ct_fit_opts d = fit_defaults();
    /* The smallest accepted: the size field and the one required field. */
    size_t min_size = offsetof(ct_fit_opts, max_length) + sizeof(ct_period);
    return cti_opts_take(out, o, &d, sizeof d, min_size, "ct_fit_opts", "ct_fit_defaults");
}
