/* src/fit/checkpointer.h — a run's checkpoints: where they go, which one a
 * resume continues, the latest committed, and the checkpoint policy's best
 * metric. Internal to ctrial.
 *
 * The loop makes one per run. What a checkpoint holds is the context's and
 * the run's (state.h); writing one atomically, verifying and pruning is
 * the ckpt module's (ckpt/ckpt.h; in object storage ckpt/remote.h). The
 * checkpointer keeps the run's side:
 *
 *     cti_checkpointer *c = cti_checkpointer_new(&opts, rank);
 *     cti_checkpointer_open_storage(c);         // opts.checkpoint_storage: s3://
 *     cti_checkpointer_find_resume(c);          // opts.resume: verified, its metadata read
 *     cti_checkpointer_guard(c);                // an earlier run's results: refused or removed
 *     ...
 *     if (cti_checkpointer_improves(c, val_loss)) ...   // checkpoint policy best
 *     cti_checkpointer_write(c, bt, state, metadata);   // rank 0: commit, then prune
 *     cti_checkpointer_share_last(c);           // every rank learns the committed path
 *     cti_checkpointer_free(c);
 */
#ifndef CTRIAL_FIT_CHECKPOINTER_H
#define CTRIAL_FIT_CHECKPOINTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrial/trial.h"

typedef struct cti_checkpointer cti_checkpointer;

/* The checkpoints of a run with options `o` (borrowed for the
 * checkpointer's life) on `rank`: in o->checkpoint_dir, else
 * output_dir/checkpoints. NEW, or NULL + CT_ENOMEM. */
cti_checkpointer *cti_checkpointer_new(const ct_fit_opts *o, int rank);
void cti_checkpointer_free(cti_checkpointer *c);

/* The directory checkpoints go to. Borrowed. */
const char *cti_checkpointer_dir(const cti_checkpointer *c);

/* Connects to opts.checkpoint_storage when it names a store ("s3://..."):
 * from then on every checkpoint is uploaded there after its commit on disk
 * (metadata.json last), retention applies there too, resume "latest" takes
 * the store's latest (fetched into the directory), and guard counts the
 * store's checkpoints. Nothing is sent yet. Returns a status (CT_EINVAL for
 * no credentials or a bad URL, CT_ENOTSUP for a store other than S3). */
int cti_checkpointer_open_storage(cti_checkpointer *c);
/* A checkpoint in a store ("s3://.../ckpt-...") on disk in parent, with
 * the run's S3 options (whatever its checkpoint_storage). Returns a
 * status. */
int cti_checkpointer_fetch(const cti_checkpointer *c, const char *url, const char *parent, char *path, size_t len);

/* First, on rank 0, removes what an interrupted write left in the
 * directory. Then opts.resume: a checkpoint directory, or "latest" in the
 * directory (none yet: a fresh start, said on the console unless quiet).
 * With a store, "latest" is the store's (rank 0 looks, after removing what
 * cut-off uploads left; collective) and "s3://..." names one there: either
 * is fetched into the directory unless it is there already.
 * The checkpoint is verified (every file's size and CRC) and its metadata
 * read. CT_OK, or CT_ECHECKPOINT naming it; CT_ECONFIG for a path too
 * long. */
int cti_checkpointer_find_resume(cti_checkpointer *c);
/* The checkpoint this run resumes ("" none) and its metadata.json (NULL
 * none). Borrowed. */
const char *cti_checkpointer_resume_dir(const cti_checkpointer *c);
const json_t *cti_checkpointer_resume_meta(const cti_checkpointer *c);

/* A run that does not resume must not destroy an earlier run's results in
 * its directories (metrics.jsonl, TensorBoard event files, checkpoints):
 * refused with CT_ECONFIG naming what is there, unless opts.overwrite,
 * which removes them. Rank 0; CT_OK elsewhere. */
int cti_checkpointer_guard(cti_checkpointer *c);

/* Writes state_dict.pth (`state`) and metadata.json (`metadata`, taken)
 * into a fresh checkpoint for batch `bt`, commits it atomically and prunes
 * by the retention options. Rank 0. On failure nothing new counts as a
 * checkpoint; the error says at which batch. */
int cti_checkpointer_write(cti_checkpointer *c, int64_t bt, const ct_value *state, json_t *metadata);
/* The same on a thread of its own, while training goes on: `state` (a
 * snapshot in host memory, taken) and `metadata` (taken) are written and
 * committed as cti_checkpointer_write does, prune included; the outcome
 * waits for cti_checkpointer_finish. CT_ESTATE when one is already in
 * flight (finish it first). Rank 0. Stop signals are left to the calling
 * thread. */
int cti_checkpointer_write_background(cti_checkpointer *c, int64_t bt, ct_value *state, json_t *metadata);
/* Whether a background write was started and not finished; whether it has
 * returned (finishing it will not wait). */
bool cti_checkpointer_writing(const cti_checkpointer *c);
bool cti_checkpointer_written(cti_checkpointer *c);
/* Waits for the background write (CT_OK when there is none) and returns
 * its outcome, with its message; cti_checkpointer_last names it once
 * committed. */
int cti_checkpointer_finish(cti_checkpointer *c);
/* The latest checkpoint this run committed ("" none). Borrowed. */
const char *cti_checkpointer_last(const cti_checkpointer *c);
/* Rank 0's latest path on every rank. Collective. */
int cti_checkpointer_share_last(cti_checkpointer *c);

/* The checkpoint policy best: whether `metric` is strictly better than the
 * best so far (none counts as worse; NaN and infinities never improve).
 * When it is, it becomes the best. */
bool cti_checkpointer_improves(cti_checkpointer *c, double metric);
/* The best so far: false when none; else *metric (may be NULL) gets it. */
bool cti_checkpointer_best(const cti_checkpointer *c, double *metric);
/* The best a resumed checkpoint had (has false: none). */
void cti_checkpointer_set_best(cti_checkpointer *c, bool has, double metric);

#endif
