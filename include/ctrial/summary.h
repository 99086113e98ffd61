/*
 * ctrial/summary.h — TensorBoard summaries of the trial's own data: scalars,
 * histograms, images and text, from tensors (torch.utils.tensorboard's
 * SummaryWriter; Determined's context.get_tensorboard_writer()).
 *
 * Inside a trial, ask the context for the writer; it is NULL on ranks other
 * than 0 and when TensorBoard logging is off, and every ct_summary_add_* on
 * NULL does nothing and returns 0, so the trial logs unconditionally:
 *
 *     static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch,
 *                                  int64_t epoch_idx, int64_t batch_idx) {
 *         Trial *t = self;
 *         ct_tensor *x = ct_batch_at(batch, 0);
 *         ct_tensor *loss = ct_cross_entropy(ct_nn_forward(t->model, x), ct_batch_at(batch, 1));
 *         if (ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL))
 *             return NULL;
 *         ct_summary_writer *tb = ct_ctx_tensorboard_writer(ctx); // borrowed, maybe NULL
 *         if (batch_idx % 100 == 0 &&
 *             (ct_summary_add_histogram(tb, "weights/fc1", t->fc1_weight, batch_idx) ||
 *              ct_summary_add_image(tb, "inputs/first", ct_select(x, 0, 0), batch_idx) || // CHW
 *              ct_summary_add_text(tb, "notes", "lr **halved**", batch_idx)))
 *             return NULL;                      // ct_last_error() says why; the trial stops
 *         return ct_value_tensor(loss);
 *     }
 *
 * Outside a trial, open one yourself:
 *
 *     ct_summary_writer *w = ct_summary_open("runs/exp1");
 *     if (!w) return fprintf(stderr, "%s\n", ct_last_error()), 1;
 *     for (int64_t step = 0; step < n; step++)
 *         ct_summary_add_scalar(w, "loss", loss_at(step), step);
 *     ct_summary_close(w);                      // flushes; then `tensorboard --logdir runs`
 *
 * Each call appends one record to an event file, the same record
 * SummaryWriter writes for the same data with its defaults (add_histogram's
 * bins="tensorflow", add_image's dataformats="CHW"), so TensorBoard's
 * Scalars, Histograms, Distributions, Images and Text tabs show them. Wall
 * times are the time of the call; steps are any int64 (SummaryWriter's
 * global_step). Scalars are stored as float32, as SummaryWriter does.
 *
 * Records are buffered: ct_summary_flush hands them to the kernel so that a
 * TensorBoard reading the growing file sees them, and ct_summary_close
 * flushes (SummaryWriter flushes every 120 s on a thread of its own; a
 * ct_summary_writer has no thread). The context closes its writer when the
 * run ends.
 *
 * Errors: every function that returns int returns 0 or a negative CT_E*
 * code, with ct_last_error() naming the function, the event file and the
 * tag. Bad arguments (CT_EINVAL) write nothing and leave the
 * writer usable. After a failed write (CT_EIO: disk full, ...) the writer
 * refuses every further record with CT_ESTATE; the file may end in a
 * partial record, which TensorBoard reads as the file's end.
 *
 * Threads: a writer has no lock; use it from one thread at a time.
 */
#ifndef CTRIAL_SUMMARY_H
#define CTRIAL_SUMMARY_H

#include <stdint.h>

#include "error.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_summary_writer ct_summary_writer;

/* SummaryWriter(log_dir=logdir): creates `logdir` and its missing parents
 * and a new event file in it,
 *
 *     events.out.tfevents.<unix seconds>.<hostname>.<pid>.summary
 *
 * The ".summary" suffix keeps it apart from the event file of the training
 * loop's own metrics, which ct_fit writes in the same directory; TensorBoard
 * shows both files' data as one run. Two writers opened in the same second
 * get distinct files (".1", ".2", ... after the pid).
 *
 * Returns a NEW writer, owned by the caller (ct_summary_close), or NULL with
 * CT_EINVAL (NULL or empty logdir), CT_EIO (the directory or the file cannot
 * be created; the message names the path and errno's text) or CT_ENOMEM.
 * A writer from ct_ctx_tensorboard_writer is the context's: never close it. */
CT_API ct_summary_writer *ct_summary_open(const char *logdir);

/* The event file's path (borrowed, valid until ct_summary_close); NULL for
 * a NULL writer. */
CT_API const char *ct_summary_path(const ct_summary_writer *w);

/* add_scalar(tag, value, step). `tag`: non-empty UTF-8 (TensorBoard groups
 * tags by the part before the first '/'); `value` is stored as float32
 * (rounded to nearest; beyond float's range it becomes +-inf; NaN and inf
 * are stored as they are).
 * Returns 0 (also for a NULL writer), CT_EINVAL (NULL, empty or non-UTF-8
 * tag), CT_ESTATE (an earlier write failed) or CT_EIO. */
CT_API int ct_summary_add_scalar(ct_summary_writer *w, const char *tag, double value, int64_t step);

/* add_histogram(tag, values, step) with bins="tensorflow": `values` (any
 * shape, dtype and device; borrowed, not changed, not part of autograd) is
 * flattened in row-major order and converted to float64, and TensorBoard's
 * fixed exponential buckets (+-1e-12 * 1.1^k up to +-9.92e19, and 0) count
 * it, trimmed to the non-empty range as torch trims them. min, max, num and
 * sum are torch's bit for bit; sum_squares agrees with torch's to rounding
 * (torch takes it from BLAS, whose order of additions varies by CPU).
 * Values beyond +-9.92e19, infinities and NaNs fall in no bucket but count
 * in num, min, max and sum, as in torch. bfloat16 goes through float16 on
 * the way, as torch's make_np does (values beyond +-65504 become +-inf, tiny
 * ones lose precision). A GPU tensor is copied to the host (a sync). See
 * src/formats/tbevents.h for the exact bucket rules.
 * Returns 0 (also for a NULL writer), CT_EINVAL (bad tag; NULL values; no
 * element; no element inside the buckets, e.g. all NaN: torch raises
 * there too), CT_ENOMEM, CT_ESTATE, CT_EIO, or libtorch's error from the
 * conversion or copy. */
CT_API int ct_summary_add_histogram(ct_summary_writer *w, const char *tag,
                                    const ct_tensor *values, int64_t step);

/* add_image(tag, img, step) with dataformats="CHW": `img` (borrowed, any
 * device) is C x H x W with C = 1 (gray), 3 (RGB) or 4 (RGBA); a 2-D tensor
 * is read as H x W gray (torch's dataformats="HW"). Pixels, as torch
 * computes them:
 *   - uint8: as they are;
 *   - any other dtype (float, bool, integers): converted to float32
 *     (bfloat16 through float16, as torch does), times
 *     255 (in float32), clipped to [0, 255] and truncated toward zero
 *     (numpy's astype(uint8)), so 1.0 is 255, 0.5 is 127 and 0.999 is 254;
 *     NaN becomes 0.
 * Gray is written as RGB with three equal channels (colorspace 3), as torch
 * repeats it. The image is stored as a PNG (8 bits per channel, written with
 * zlib; see tbevents.h); H and W are at least 1.
 * Returns 0 (also for a NULL writer), CT_EINVAL (bad tag; NULL img; a
 * shape that is not 2-D or 3-D with 1, 3 or 4 channels; an empty image),
 * CT_ENOMEM, CT_ESTATE, CT_EIO, or libtorch's error from the conversion or
 * copy. */
CT_API int ct_summary_add_image(ct_summary_writer *w, const char *tag, const ct_tensor *img,
                                int64_t step);

/* add_text(tag, text, step): `text` (NUL-terminated UTF-8, copied; may be
 * empty) is stored under the tag "<tag>/text_summary" for TensorBoard's Text
 * tab, which renders it as Markdown.
 * Returns 0 (also for a NULL writer), CT_EINVAL (bad tag; NULL or
 * non-UTF-8 text), CT_ESTATE or CT_EIO. */
CT_API int ct_summary_add_text(ct_summary_writer *w, const char *tag, const char *text,
                               int64_t step);

/* Hands buffered records to the kernel (no fsync). Returns 0 (also for a
 * NULL writer), CT_ESTATE (an earlier write failed) or CT_EIO. */
CT_API int ct_summary_flush(ct_summary_writer *w);

/* Flushes, closes the file and frees the writer. Accepts NULL (returns 0).
 * Returns 0, or the flush's CT_ESTATE / CT_EIO: the writer is freed either
 * way, so w is invalid after the call. Only for a writer from
 * ct_summary_open. */
CT_API int ct_summary_close(ct_summary_writer *w);

#ifdef __cplusplus
}
#endif
#endif
