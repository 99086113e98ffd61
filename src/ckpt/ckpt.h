/* src/ckpt/ckpt.h — checkpoint directories on disk: writing, committing,
 * verifying, finding and pruning them (dir.c). What goes into one is the
 * context's business (fit/state.h). Internal to ctrial.
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
#ifndef CTRIAL_CKPT_CKPT_H
#define CTRIAL_CKPT_CKPT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctrial/ckpt.h"

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
/* How many committed checkpoints checkpoint_dir holds (0 when it does not
 * exist). Returns a status. */
int ct_ckpt_count(const char *checkpoint_dir, size_t *n);
/* Deletes every committed checkpoint in checkpoint_dir, each renamed out of
 * sight first (as retention deletes them). Returns a status. */
int ct_ckpt_remove_all(const char *checkpoint_dir);

#endif
