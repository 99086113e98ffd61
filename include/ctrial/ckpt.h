/*
 * ctrial/ckpt.h — PyTorch's file format (torch.save / torch.load) and
 * ctrial's checkpoint directories.
 *
 * Part 1: .pth files. ct_pth_save writes a ct_value tree in the zip format
 * of torch.save; Python reads it with torch.load(path, weights_only=True).
 * ct_pth_load reads those files and the ones Python writes for a
 * state_dict(), an optimizer's or scheduler's state_dict(), a dict of
 * tensors, or a Determined checkpoint (whose numpy arrays, such as numpy's
 * RNG state, become tensors).
 *
 *     // torch.save({"model": model.state_dict(), "step": 100}, "m.pth")
 *     ct_value *v = ct_value_dict();
 *     ct_value_dict_set(v, "model", ct_nn_state_dict(model));
 *     ct_value_dict_set(v, "step", ct_value_int(100));
 *     if (ct_pth_save("m.pth", v, NULL, NULL) != 0) fprintf(stderr, "%s\n", ct_last_error());
 *     ct_value_free(v);
 *
 *     // sd = torch.load("m.pth", weights_only=True, map_location="cpu")
 *     ct_value *sd = NULL;
 *     if (ct_pth_load("m.pth", &sd) == 0)
 *         ct_nn_load_state_dict(model, ct_value_dict_get(sd, "model"), true);
 *     ct_value_free(sd);
 *
 * Part 2: checkpoint directories (docs/design.md, "Contracts"). The
 * loop writes them (ct_fit with a checkpoint period or policy); these calls
 * read, verify and find them, and build a trial's models from one without
 * training (Determined's load_trial_from_checkpoint_path).
 *
 *     <checkpoint_dir>/<name>/state_dict.pth   models_state_dict, optimizers_state_dict,
 *                                              lr_schedulers_state_dict, callbacks, rng_state
 *     <checkpoint_dir>/<name>/metadata.json    steps_completed, framework, format, ...,
 *                                              files: {name: {size, crc32}}, trial_state
 *
 * Part 3: checkpoints in a store (checkpoint_storage type s3): the same
 * checkpoints under s3://BUCKET/PREFIX/<name>/, listed, found (ct_ckpt_latest
 * and ct_ckpt_best take the URL in place of a folder) and fetched, without
 * changing the store. Credentials, region and endpoint come from the
 * environment as boto3 reads them (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL).
 *
 *     char latest[4096], local[4096];
 *     if (ct_ckpt_latest("s3://ckpts/run1", latest, sizeof latest) == 0 &&    // s3://ckpts/run1/ckpt-...
 *         ct_ckpt_fetch(latest, "/tmp/ckpts", local, sizeof local) == 0)       // /tmp/ckpts/ckpt-...
 *         ...
 *
 * Errors: CT_EIO (the file system, the store), CT_EFORMAT (a file that is
 * not what it should be: the message names the file and the entry, key or
 * opcode), CT_ECHECKPOINT (a checkpoint directory that fails verification).
 */
#ifndef CTRIAL_CKPT_H
#define CTRIAL_CKPT_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"
#include "trial.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Part 1: PyTorch files ================================================ */

typedef struct {
    /* fsync the file before returning (checkpoints need it; torch.save does
     * not do it). Default false. */
    bool fsync;
    /* The folder every entry of the zip lives in; NULL: the file name
     * without directory and extension, as torch.save does ("m" for m.pth). */
    const char *archive_name;
} ct_pth_save_params;

CT_API ct_pth_save_params ct_pth_save_default_params(void);

/* Size and CRC-32 (zlib's) of a whole file. */
typedef struct {
    uint64_t nbytes;
    uint32_t crc32;
} ct_file_sum;

/* torch.save(v, path): dicts (string or integer keys, insertion order),
 * lists, tuples, None, bools, ints, floats, strings and tensors of every
 * dtype, any strides, CPU or CUDA (copied to the host in chunks). Tensors
 * that share a storage share it in the file, as in PyTorch. Tensor bytes
 * stream to the file; the archive is never assembled in memory. The file is
 * written in place (a failure leaves a partial file: callers that need
 * atomicity write to a temporary name and rename). `p` may be NULL
 * (defaults); `sum` (may be NULL) receives the size and CRC-32 of the file
 * written. Returns a status. */
CT_API int ct_pth_save(const char *path, const ct_value *v, const ct_pth_save_params *p, ct_file_sum *sum);

/* torch.load(path, weights_only=True, map_location="cpu"): *out receives a
 * NEW tree (caller frees) with CPU tensors; an OrderedDict becomes a dict
 * (its _metadata is dropped), tensors sharing a storage in the file share
 * it in memory. numpy arrays and scalars (as numpy pickles them) become
 * tensors and numbers, uint16/uint32 widened to int32/int64. Every entry's
 * CRC-32 is checked. Anything else (other
 * Python classes, complex or quantized tensors, ints beyond 64 bits, a
 * damaged archive) is refused with CT_EFORMAT naming what was found; *out
 * is then NULL. A path that is not a regular file (a FIFO, a device, a
 * directory) is refused with CT_EIO "ct_pth_load: PATH: not a regular file
 * (a FIFO)" before anything is read. */
CT_API int ct_pth_load(const char *path, ct_value **out);

/* Size and CRC-32 of the regular file at path (streamed; anything else is
 * CT_EIO "not a regular file"). Returns a status. */
CT_API int ct_file_checksum(const char *path, ct_file_sum *out);

/* ==== Part 2: checkpoint directories ======================================== */

/* Checks a checkpoint directory: metadata.json is a regular file, parses,
 * its own CRC-32 (metadata_crc32) matches and it has what ctrial writes;
 * every file it lists is a regular file with that size and CRC-32 (a FIFO
 * or a device is refused, never read). Returns 0, or CT_ECHECKPOINT naming
 * the directory and the problem. */
CT_API int ct_ckpt_verify(const char *dir);

/* The checkpoint's metadata.json as a NEW ct_value dict (numbers as ints or
 * floats, objects as dicts, arrays as lists), or NULL + error. */
CT_API ct_value *ct_ckpt_metadata(const char *dir);

/* The latest committed checkpoint in checkpoint_dir, in commit order
 * (metadata.json's commit_sequence, then steps_completed, then the name;
 * never the clock; checkpoints of earlier versions, without a sequence,
 * come before the others), what --resume latest resumes: its path is
 * written to buf. Unfinished temporary directories are ignored. A damaged
 * ckpt-* directory (metadata.json missing, unreadable or invalid) whose
 * name does not say it trained less than that one may itself be the
 * latest: CT_ECHECKPOINT naming it and the latest intact checkpoint.
 * Returns 0, or CT_ECHECKPOINT when there is none ("no checkpoint in DIR")
 * or a damaged one may be the latest, or another error.
 * checkpoint_dir may be a store's "s3://BUCKET[/PREFIX]" (Part 3): the
 * latest of its committed checkpoints (in the same order) as
 * "s3://BUCKET/PREFIX/<name>", as --resume latest finds it there; a damaged
 * one or an upload cut off never counts, and nothing is removed. */
CT_API int ct_ckpt_latest(const char *checkpoint_dir, char *buf, size_t len);
/* The committed checkpoint in checkpoint_dir whose validation metric
 * `metric` (metadata.json's validation_metrics) is best: the smallest when
 * smaller_is_better, else the largest; NaN and infinities never count; of
 * equal ones the latest in commit order. Its path is written to buf and, when value is
 * not NULL, its metric to *value. Returns 0, or CT_ECHECKPOINT when no
 * checkpoint has a finite value of the metric, or another error. A store's
 * URL is taken as by ct_ckpt_latest. */
CT_API int ct_ckpt_best(const char *checkpoint_dir, const char *metric, bool smaller_is_better, char *buf, size_t len,
                        double *value);

/* ==== Part 3: checkpoints in a store ========================================= */

/* The checkpoints under url, "s3://BUCKET[/PREFIX]", as a NEW list of
 * dicts, one per ckpt-* name in the store: the committed ones in commit
 * order (as ct_ckpt_latest orders them: the latest is the last of them),
 * then the others by name:
 *   {"name": "ckpt-000100-1a2b3c4d", "state": "committed", "metadata": {...}}
 *   {"name": ..., "state": "damaged", "why": "state_dict.pth is missing"}
 *   {"name": ..., "state": "uncommitted", "why": "no metadata.json: ..."}
 * A checkpoint is committed when its metadata.json is there, sealed, valid,
 * and lists files that are all there at their sizes (the rule --resume
 * applies); "metadata" is its metadata.json as ct_ckpt_metadata gives it.
 * "uncommitted" is what an upload cut off (or still under way) leaves: no
 * metadata.json; "damaged" any other failure. Only the metadata.json files
 * are downloaded. NULL + error (CT_EIO naming the store and the request,
 * CT_EINVAL for a URL that is not s3://, CT_ENOTSUP for gs:// and az://). */
CT_API ct_value *ct_ckpt_store_list(const char *url);

/* The committed checkpoint at url, "s3://BUCKET[/PREFIX]/ckpt-<steps>-<tag>",
 * downloaded into parent/<name> (parent is made; metadata.json last), every
 * file checked against metadata.json (ct_ckpt_verify), and its path written
 * to buf. A whole copy already there is kept. Returns 0, CT_ECHECKPOINT for
 * one the store does not hold whole, or another error. */
CT_API int ct_ckpt_fetch(const char *url, const char *parent, char *buf, size_t len);

/* ct_load_trial_from_checkpoint (Determined's load_trial_from_checkpoint_path)
 * builds a trial from a checkpoint: it is the trial's (module fit), so it
 * is declared in trial.h, which this header includes. */

#ifdef __cplusplus
}
#endif
#endif
