/* src/fit/ema.h — the weight averages of ct_ctx_add_ema (callback.h), as
 * the loop drives them: after each optimizer step, and around each
 * validation. */
#ifndef CTI_FIT_EMA_H
#define CTI_FIT_EMA_H

#include <stdint.h>

#include "ctrial/trial.h"

typedef struct cti_ema cti_ema;

/* ct_ctx_add_ema(ctx, NULL, ...) asked for every model: the averages of the
 * models the trial wrapped, once it has (after init and build_model). */
int cti_ema_start(ct_context *ctx);
/* After a batch that stepped the optimizer; `steps`: the optimizer steps of
 * the trial so far, this one included (Lightning's global_step). Updates
 * the averages whose schedule says so. */
int cti_ema_after_step(ct_context *ctx, int64_t steps);
/* The models' values and their averages trade places (those with
 * validate_with_average): before a validation, and again after it. */
int cti_ema_swap(ct_context *ctx);

#endif
