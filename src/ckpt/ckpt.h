/* src/ckpt/ckpt.h — checkpoint directories on disk: writing, committing,
 * verifying, finding and pruning them (dir.c). What goes into one is the
 * context's business (fit/state.h). Internal to ctrial.
 *
 * Writing one checkpoint:
 *
 *     cti_ckpt_writer w;
 *     cti_ckpt_begin(&w, checkpoint_dir, steps);       // <dir>/.tmp-ckpt-000140-1a2b3c4d/
 *     cti_ckpt_write_pth(&w, "state_dict.pth", state); // streamed, fsync'd, CRC recorded
 *     cti_ckpt_commit(&w, metadata);                   // metadata.json, fsync, rename, fsync dir
 *     // on any failure in between: cti_ckpt_abort(&w)
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
#define CT_CKPT_PREFIX "ckpt-"   /* a committed checkpoint's directory: ckpt-<steps>-<tag> */
/* metadata.json's commit order and seal (docs/api/ckpt.md, "metadata.json"):
 * commit_sequence is one more than the highest in the folder at commit;
 * metadata_crc32, its last key, is the CRC-32 of the file's bytes with its
 * own 8 hex digits read as "00000000". */
#define CT_CKPT_SEQ_KEY "commit_sequence"
#define CT_CKPT_CRC_KEY "metadata_crc32"
#define CT_CKPT_METADATA_MAX ((size_t)256 << 20) /* a larger metadata.json is refused */

typedef struct {
    char name[64];     /* ckpt-000140-1a2b3c4d */
    char tmp[4096];    /* <checkpoint_dir>/.tmp-<name> */
    char final[4096];  /* <checkpoint_dir>/<name> */
    char parent[4096]; /* checkpoint_dir */
    json_t *files;     /* {"state_dict.pth": {"size": n, "crc32": "1a2b3c4d"}} */
} cti_ckpt_writer;

int cti_ckpt_begin(cti_ckpt_writer *w, const char *checkpoint_dir, int64_t steps);
/* Saves v as `file` in the temporary directory with fsync; records its sum. */
int cti_ckpt_write_pth(cti_ckpt_writer *w, const char *file, const ct_value *v);
/* Adds "files", "commit_sequence" (one more than the highest among the
 * committed checkpoints in the folder), "time" and, last, the seal
 * "metadata_crc32" to metadata (stolen), writes metadata.json, fsyncs and
 * renames the directory to its final name, fsyncs the parent. */
int cti_ckpt_commit(cti_ckpt_writer *w, json_t *metadata);
/* Removes the temporary directory; safe after a failed begin or commit. */
void cti_ckpt_abort(cti_ckpt_writer *w);
/* Removes what crashed runs left in checkpoint_dir (.tmp-* and .del-*). */
void cti_ckpt_remove_leftovers(const char *checkpoint_dir);
/* Retention after a commit: keeps the keep_latest most recent checkpoints
 * (in commit order: commit_sequence, then steps, then name; never the
 * clock),
 * the keep_best best by `metric` (at least the single best one), and
 * `protect` (the one just written); deletes the rest. */
int cti_ckpt_prune(const char *checkpoint_dir, int keep_latest, int keep_best, const char *metric,
                  bool smaller_is_better, const char *protect);
/* metadata.json's text (len bytes; text is changed and restored while the
 * seal is checked), parsed, sealed and checked for ctrial's keys and their
 * types: NEW json and its commit sequence in *seq (0: an earlier version's
 * checkpoint), or NULL with why (without any place) in `why`. */
json_t *cti_ckpt_parse_metadata(char *text, size_t len, int64_t *seq, char *why, size_t why_len);

/* One checkpoint in a listing (a folder's, or a store's: ckpt/remote.h),
 * for ordering and retention. */
typedef struct {
    char name[256];
    int64_t seq;   /* commit_sequence; 0 for an earlier version's checkpoint */
    int64_t steps; /* steps_completed; for a damaged one what its name says (INT64_MAX: nothing) */
    bool has_metric;
    double metric;
    char *damaged; /* why (owned), NULL when intact */
} cti_ckpt_listed;
/* Fills c's order and metric from its metadata m (seq: its commit
 * sequence; metric: the validation metric to rank by, NULL for none). */
void cti_ckpt_listed_fill(cti_ckpt_listed *c, const json_t *m, int64_t seq, const char *metric);
/* Sorts n checkpoints newest first, in commit order: the commit sequence,
 * then the steps trained, then the name (never the clock). */
void cti_ckpt_sort_newest(cti_ckpt_listed *l, size_t n);
/* Sorts n checkpoints best first by their metric (those without a finite
 * one last), equal ones newest first: ct_ckpt_best's and retention's
 * order. */
void cti_ckpt_sort_best(cti_ckpt_listed *l, size_t n, bool smaller_is_better);
/* Retention's choice over n committed checkpoints (sorted newest first
 * here): the keep_latest newest, the keep_best best by their metric (at
 * least the best one) and `protect`. NEW array of n flags, true for those
 * kept (free it), or NULL + CT_ENOMEM. */
bool *cti_ckpt_retain(cti_ckpt_listed *all, size_t n, int keep_latest, int keep_best, bool smaller_is_better,
                      const char *protect);

/* metadata.json of dir, a regular file, parsed, its seal checked (files
 * of earlier versions have none) and checked for ctrial's keys and their
 * types: NEW json, or NULL with CT_ECHECKPOINT "checkpoint DIR: why". */
json_t *cti_ckpt_read_metadata(const char *dir);
/* How many checkpoints checkpoint_dir holds, committed or damaged (a ckpt-*
 * directory whose metadata.json is missing or invalid); 0 when it does not
 * exist. Returns a status. */
int cti_ckpt_count(const char *checkpoint_dir, size_t *n);
/* Deletes every checkpoint in checkpoint_dir, committed or damaged, each
 * renamed out of sight first (as retention deletes them). Returns a status. */
int cti_ckpt_remove_all(const char *checkpoint_dir);

/* What cti_ckpt_find_latest saw besides its answer. */
typedef struct {
    bool empty;           /* no checkpoint at all, committed or damaged: the CT_ECHECKPOINT means "none yet" */
    size_t intact, damaged;
    char skipped[2048];   /* damaged ones passed over, their names saying they trained less than the
                           * latest: "DIR/NAME (why); ...", "" when none */
} cti_ckpt_scan;
/* ct_ckpt_latest (ctrial/ckpt.h), telling apart "none yet" (scan->empty)
 * from a damaged checkpoint that may be the latest (CT_ECHECKPOINT naming it
 * and the latest intact one), and naming the damaged ones it passed over.
 * scan may be NULL. */
int cti_ckpt_find_latest(const char *checkpoint_dir, char *buf, size_t len, cti_ckpt_scan *scan);
/* ct_ckpt_verify of `path`, the latest checkpoint of checkpoint_dir; when it
 * fails, the CT_ECHECKPOINT message also names the latest older one that
 * verifies (or says there is none) and how to resume it. */
int cti_ckpt_verify_latest(const char *checkpoint_dir, const char *path);

#endif
