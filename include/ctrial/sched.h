/*
 * ctrial/sched.h — learning-rate schedulers with torch.optim.lr_scheduler's
 * formulas and state_dict layout.
 *
 * A scheduler drives the lr of every parameter group of one optimizer,
 * exactly as its Python namesake: created at "epoch" 0 (which sets each
 * group's initial_lr and applies the first lr), then stepped. Python's
 * chainable formulas are used, so the lr sequence is Python's to the last
 * bits, not a closed form that drifts.
 *
 *     ct_optim *opt = ct_optim_sgd(net, &sgd);
 *     ct_sched *warmup = ct_sched_linear(opt, 0.1, 1.0, 5);
 *     ct_sched *decay = ct_sched_cosine_annealing(opt, 95, 0.0);
 *     ct_sched *sched = ct_sched_sequential(opt, 2, (ct_sched *[]){warmup, decay},
 *                                           (int64_t[]){5});
 *     for (int epoch = 0; epoch < 100; epoch++) {
 *         train_one_epoch(...);
 *         ct_sched_step(sched);
 *     }
 *     ct_sched_free(sched);   // frees warmup and decay too
 *
 * How often step() is called (per batch, per epoch, per optimizer step)
 * is the caller's choice; the trial context can do it for you (trial.h).
 * A scheduler refers to its optimizer and must be freed before it. No
 * internal lock.
 */
#ifndef CTRIAL_SCHED_H
#define CTRIAL_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "optim.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_sched ct_sched;

/* Each constructor returns a new scheduler, or NULL + error for bad
 * arguments (messages as Python's ValueError). */

/* StepLR: lr = base_lr * gamma ** (epoch // step_size). (Named _step_lr:
 * ct_sched_step is the step() call.) */
CT_API ct_sched *ct_sched_step_lr(ct_optim *opt, int64_t step_size, double gamma);
/* MultiStepLR: multiply by gamma at each milestone (sorted, may repeat). */
CT_API ct_sched *ct_sched_multistep(ct_optim *opt, int n, const int64_t *milestones, double gamma);
/* ExponentialLR. */
CT_API ct_sched *ct_sched_exponential(ct_optim *opt, double gamma);
/* CosineAnnealingLR(T_max, eta_min). */
CT_API ct_sched *ct_sched_cosine_annealing(ct_optim *opt, int64_t t_max, double eta_min);
/* CosineAnnealingWarmRestarts(T_0, T_mult, eta_min). */
CT_API ct_sched *ct_sched_cosine_warm_restarts(ct_optim *opt, int64_t t_0, int64_t t_mult,
                                               double eta_min);
/* LinearLR(start_factor, end_factor, total_iters). */
CT_API ct_sched *ct_sched_linear(ct_optim *opt, double start_factor, double end_factor,
                                 int64_t total_iters);
/* ConstantLR(factor, total_iters). */
CT_API ct_sched *ct_sched_constant(ct_optim *opt, double factor, int64_t total_iters);

/* LambdaLR: lr = base_lr * lambda(epoch, group). The callback's state is
 * not saved in state_dict (as in Python, where lambdas are skipped). */
typedef double (*ct_lr_lambda)(int64_t epoch, size_t group, void *ctx);
CT_API ct_sched *ct_sched_lambda(ct_optim *opt, ct_lr_lambda fn, void *ctx);

typedef enum { CT_ANNEAL_COS = 0, CT_ANNEAL_LINEAR } ct_anneal;
typedef struct {
    double max_lr;            /* required (> 0) */
    int64_t total_steps;      /* required (> 0) */
    double pct_start;         /* 0.3 */
    ct_anneal anneal_strategy;/* cos */
    bool cycle_momentum;      /* true (needs momentum or betas in the optimizer) */
    double base_momentum;     /* 0.85 */
    double max_momentum;      /* 0.95 */
    double div_factor;        /* 25 */
    double final_div_factor;  /* 1e4 */
    bool three_phase;         /* false */
} ct_onecycle_opts;
CT_API ct_onecycle_opts ct_onecycle_defaults(void);
/* OneCycleLR (per batch). As in Python it writes initial_lr, max_lr,
 * min_lr (and max_momentum, base_momentum) into every param group and
 * reads them back at each step, so they travel with the optimizer's state
 * dict. Step total_steps extrapolates past the cycle's end; where a linear
 * anneal would then go below 0 (Python stores it) the lr stops at 0. */
CT_API ct_sched *ct_sched_onecycle(ct_optim *opt, const ct_onecycle_opts *o);

typedef struct {
    bool maximize;        /* mode "max" (false: "min") */
    double factor;        /* 0.1 */
    int64_t patience;     /* 10 */
    double threshold;     /* 1e-4 */
    bool threshold_abs;   /* threshold_mode "abs" (false: "rel") */
    int64_t cooldown;     /* 0 */
    double min_lr;        /* 0 (all groups) */
    double eps;           /* 1e-8 */
} ct_plateau_opts;
CT_API ct_plateau_opts ct_plateau_defaults(void);
/* ReduceLROnPlateau: stepped with ct_sched_step_metric only. */
CT_API ct_sched *ct_sched_reduce_on_plateau(ct_optim *opt, const ct_plateau_opts *o);

/* SequentialLR(schedulers, milestones): takes ownership of the n schedulers
 * (also on failure; do not free them yourself); they must drive the same
 * optimizer. n - 1 milestones. A SequentialLR inside another is CT_ENOTSUP. */
CT_API ct_sched *ct_sched_sequential(ct_optim *opt, int n, ct_sched *const *scheds,
                                     const int64_t *milestones);

/* scheduler.step(). CT_ENOTSUP for ReduceLROnPlateau (use _step_metric). */
CT_API int ct_sched_step(ct_sched *s);
/* ReduceLROnPlateau's step(metric); CT_ENOTSUP for the others. */
CT_API int ct_sched_step_metric(ct_sched *s, double metric);

CT_API const char *ct_sched_type(const ct_sched *s); /* "StepLR", ... */
/* get_last_lr()[group]; NAN + error for a bad group. */
CT_API double ct_sched_get_last_lr(const ct_sched *s, size_t group);
/* last_epoch. */
CT_API int64_t ct_sched_last_epoch(const ct_sched *s);
/* state_dict(): a new dict with Python's keys (last_epoch, base_lrs,
 * _last_lr, _step_count, the scheduler's own fields, ...). */
CT_API ct_value *ct_sched_state_dict(const ct_sched *s);
/* load_state_dict(sd): checks kind and group count first and changes nothing
 * on a mismatch. As in Python it restores the scheduler's own state only; the
 * optimizer's current lr comes back with the optimizer's state dict. */
CT_API int ct_sched_load_state_dict(ct_sched *s, const ct_value *sd);
CT_API void ct_sched_free(ct_sched *s); /* accepts NULL */

#ifdef __cplusplus
}
#endif
#endif
