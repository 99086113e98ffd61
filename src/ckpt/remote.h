/* src/ckpt/remote.h — checkpoints kept in object storage (S3) as well as
 * on disk. Internal to ctrial.
 *
 * A run writes and commits every checkpoint on disk first (ckpt.h), then
 * uploads it to s3://BUCKET/PREFIX/<name>/: its files, and metadata.json
 * last. The commit rule is the disk's: a checkpoint in the store counts
 * only when its metadata.json is there, sealed, and lists files that are
 * all there with their sizes; an upload cut off (a crash, kill -9, a store
 * that stopped answering) leaves no metadata.json and so no checkpoint,
 * and the next run removes what it left. Deleting one removes its
 * metadata.json first, so a deletion cut off leaves no checkpoint either.
 *
 *     cti_ckpt_remote *r = cti_ckpt_remote_open("s3://ckpts/run1", &s3opts);
 *     cti_ckpt_remote_upload(r, "out/checkpoints/ckpt-000100-1a2b3c4d");
 *     cti_ckpt_remote_prune(r, 1, 1, "validation_loss", true, "ckpt-000100-1a2b3c4d");
 *     cti_ckpt_remote_latest(r, name, sizeof name, &none);
 *     cti_ckpt_remote_fetch(r, name, "out/checkpoints", path, sizeof path);
 *     cti_ckpt_remote_free(r);
 *
 * Layout as Determined's S3 storage (s3://bucket/prefix/<storage id>/<file>),
 * the storage id being the checkpoint's name. */
#ifndef CTRIAL_CKPT_REMOTE_H
#define CTRIAL_CKPT_REMOTE_H

#include <stdbool.h>
#include <stddef.h>

#include "ckpt/ckpt.h"
#include "store/s3.h"

typedef struct cti_ckpt_remote cti_ckpt_remote;

/* Whether path names a store ("s3://..."). */
bool cti_ckpt_is_remote(const char *path);

/* The checkpoints under url, "s3://BUCKET[/PREFIX]" (other schemes:
 * "gs://", "az://" and the like are CT_ENOTSUP naming S3-compatible stores
 * as the way), with the client options `opts` (NULL: defaults and the
 * environment's credentials; its bucket is the URL's). Nothing is sent yet.
 * NEW, or NULL + error. */
cti_ckpt_remote *cti_ckpt_remote_open(const char *url, const cti_s3_opts *opts);
void cti_ckpt_remote_free(cti_ckpt_remote *r);
/* "s3://BUCKET/PREFIX[/name]" for messages (name may be NULL); a buffer per
 * thread. */
const char *cti_ckpt_remote_where(const cti_ckpt_remote *r, const char *name);

/* Uploads the committed checkpoint in dir (its files as its metadata.json
 * lists them, then metadata.json) under its directory's name. On failure
 * nothing of it counts in the store. Returns a status. */
int cti_ckpt_remote_upload(cti_ckpt_remote *r, const char *dir);

/* The store's checkpoints: committed ones (*intact, ordered and ranked by
 * `metric` as on disk) and ckpt-* names with objects but no valid
 * checkpoint (*damaged: an upload cut off, a file missing; their `damaged`
 * says why). NEW arrays (free with cti_ckpt_remote_listing_free). Returns a
 * status. */
int cti_ckpt_remote_list(cti_ckpt_remote *r, const char *metric, cti_ckpt_listed **intact, size_t *n,
                         cti_ckpt_listed **damaged, size_t *nd);
void cti_ckpt_remote_listing_free(cti_ckpt_listed *l, size_t n);

/* ct_ckpt_latest (metric NULL) and ct_ckpt_best on a store's URL,
 * "s3://BUCKET[/PREFIX]", with the environment's credentials and endpoint:
 * the committed checkpoint the store's listing puts first, in commit order
 * or by `metric`, as "s3://BUCKET/PREFIX/<name>" into buf (*value: its
 * metric). Changes nothing in the store (a resume's listing removes cut-off
 * uploads; this one passes over them). Returns a status. */
int cti_ckpt_remote_pick(const char *url, const char *metric, bool smaller_is_better, char *buf, size_t len,
                         double *value);

/* For a resume: first removes what uploads cut off left (ckpt-* names
 * without metadata.json), then the latest committed checkpoint in commit
 * order (as on disk): its name into name, or *none when the store holds
 * none. One listing. Returns a status. */
int cti_ckpt_remote_latest(cti_ckpt_remote *r, char *name, size_t len, bool *none);
/* The checkpoint `name` on disk in parent/name: kept when it is there and
 * verifies, else downloaded into parent/.tmp-<name>-<pid> (metadata.json
 * last), verified and renamed; several processes may fetch the same one
 * into one folder at once (ranks sharing a disk). *path gets parent/name.
 * Returns a status (CT_ECHECKPOINT for one the store does not hold
 * whole). */
int cti_ckpt_remote_fetch(cti_ckpt_remote *r, const char *name, const char *parent, char *path, size_t len);

/* The checkpoint at url ("s3://BUCKET/PREFIX/<name>") on disk in
 * parent/<name>, as cti_ckpt_remote_fetch does it. Returns a status. */
int cti_ckpt_fetch_url(const char *url, const cti_s3_opts *opts, const char *parent, char *path, size_t len);

/* Retention in the store, as cti_ckpt_prune on disk. Returns a status. */
int cti_ckpt_remote_prune(cti_ckpt_remote *r, int keep_latest, int keep_best, const char *metric,
                          bool smaller_is_better, const char *protect);
/* How many checkpoints the store holds, committed or not. */
int cti_ckpt_remote_count(cti_ckpt_remote *r, size_t *n);
/* Deletes every checkpoint in the store (--overwrite). Returns a status. */
int cti_ckpt_remote_remove_all(cti_ckpt_remote *r);

#endif
