/* src/fit/warm_start.h — starting a fresh trial from another run's
 * checkpoint, ctrial's or Determined's (warm_start.c). Internal to ctrial.
 *
 * Determined's searcher.source_checkpoint_uuid: the new trial takes the
 * checkpoint's models, optimizers and LR schedulers (and the grad scaler
 * when both have one), and nothing of its position, RNG, callbacks or trial
 * state (Determined's _load_state starts a fresh _TrialState when the
 * trial id differs: a warm start is a new trial, at batch 0). */
#ifndef CTRIAL_FIT_WARM_START_H
#define CTRIAL_FIT_WARM_START_H

#include "fit/context.h"

/* Loads the trained state of checkpoint directory `dir` into ctx, whose
 * trial is built (everything wrapped) and which has not been resumed. The
 * file is the first of dir/state_dict.pth, dir/determined/state_dict.pth,
 * dir/pedl/state_dict.pth and dir/checkpoint.pt that exists (Determined's
 * _load order); a ctrial checkpoint (metadata.json with "files") is
 * verified first. Either layout of Determined's is read: the lists
 * models_state_dict / optimizers_state_dict / lr_schedulers_state_dict, or
 * the older model_state_dict / optimizer_state_dict / lr_scheduler (one of
 * each). Model state dicts saved from DistributedDataParallel ("module."
 * before every key) are taken without the prefix. Counts must equal the
 * trial's; names and shapes must fit.
 *
 * On rank 0, unless ctx->opts.quiet, prints one line: what was loaded and
 * which of the checkpoint's entries were skipped, e.g.
 *     warm start from DIR: 1 model, 1 optimizer, 1 scheduler; skipped rng_state, callbacks, trial_state.pkl
 *
 * Returns 0, or CT_ECHECKPOINT naming the directory, the entry and the
 * problem (no file, an unreadable file, a count or a state dict that does
 * not fit); an error can leave models loaded and optimizers not. */
int cti_context_warm_start(ct_context *ctx, const char *dir);

#endif
