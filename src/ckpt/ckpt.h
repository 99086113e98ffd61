/* src/ckpt_internal.h — writing, committing and pruning checkpoint
 * directories (ckpt_dir.c) and turning a context into checkpoint state and
 * back (ckpt_state.c). Internal to ctrial.
 *
 * Writing one checkpoint:
 *
 *     ct_ckpt_writer w;
 *     ct_ckpt_begin(&w, checkpoint_dir, steps);       // <dir>/.tmp-ckpt-000140-1a2b3c4d/
 *     ct_ckpt_write_pth(&w, "state_dict.pth", state); // streamed, fsync'd, CRC recorded
 *     ct_ckpt_commit(&w, metadata);                   // metadata.json, fsync, rename, fsync dir
 *     // on any failure in between: ct_ckpt_abort(&w)
 *
 * A directory is visible under its final name only once complete: a crash
 * at any moment leaves either nothing new or a whole checkpoint (plus a
 * .tmp-* directory the next run removes). */
#ifndef CT_CKPT_INTERNAL_H
#define CT_CKPT_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctrial/ckpt.h"
#include "fit/context.h"

#define CT_CKPT_STATE_FILE "state_dict.pth"
#define CT_CKPT_METADATA_FILE "metadata.json"
#define CT_CKPT_FORMAT "pickle" /* Determined's word for torch.save files */

typedef struct {
    char name[64];     /* ckpt-000140-1a2b3c4d */
    char tmp[4096];    /* <checkpoint_dir>/.tmp-<name> */
    char final[4096];  /* <checkpoint_dir>/<name> */
    char parent[4096]; /* checkpoint_dir */
    json_t *files;     /* {"state_dict.pth": {"size": n, "crc32": "1a2b3c4d"}} */
} ct_ckpt_writer;

/* ckpt_dir.c */
int ct_ckpt_begin(ct_ckpt_writer *w, const char *checkpoint_dir, int64_t steps);
/* Saves v as `file` in the temporary directory with fsync; records its sum. */
int ct_ckpt_write_pth(ct_ckpt_writer *w, const char *file, const ct_value *v);
/* Adds "files" and "time" to metadata (stolen), writes metadata.json, fsyncs
 * and renames the directory to its final name, fsyncs the parent. */
int ct_ckpt_commit(ct_ckpt_writer *w, json_t *metadata);
/* Removes the temporary directory; safe after a failed begin or commit. */
void ct_ckpt_abort(ct_ckpt_writer *w);
/* Removes what crashed runs left in checkpoint_dir (.tmp-* and .del-*). */
void ct_ckpt_remove_leftovers(const char *checkpoint_dir);
/* Retention after a commit: keeps the keep_latest most recent checkpoints,
 * the keep_best best by `metric` (at least the single best one), and
 * `protect` (the one just written); deletes the rest. */
int ct_ckpt_prune(const char *checkpoint_dir, int keep_latest, int keep_best, const char *metric,
                  bool smaller_is_better, const char *protect);
/* metadata.json of dir, parsed and checked for ctrial's keys: NEW json. */
json_t *ct_ckpt_read_metadata(const char *dir);

/* ckpt_state.c */
/* The checkpoint's state_dict.pth contents for ctx (models, optimizers,
 * schedulers, callbacks, rng_state). NEW value. */
ct_value *ct_ckpt_state_from_ctx(ct_context *ctx);
/* metadata.json for ctx's current position. NEW json. */
json_t *ct_ckpt_metadata_from_ctx(ct_context *ctx);
/* Restores models (and, unless models_only, optimizers, schedulers,
 * callbacks and RNG) from a loaded state_dict.pth; checks counts, names
 * and shapes first. CT_ECHECKPOINT naming the mismatch. */
int ct_ckpt_restore_state(ct_context *ctx, const ct_value *state, const char *dir, bool models_only);
/* Restores the loop's position and decisions from metadata's trial_state. */
int ct_ckpt_restore_trial_state(ct_context *ctx, const json_t *metadata, const char *dir);

#endif
