/* src/formats/tbevents.h — TensorBoard event files, written without a protobuf
 * library. Internal to ctrial: the training loop logs its training and
 * validation scalars through it so that `tensorboard --logdir DIR` shows them.
 *
 *     cti_tb_writer *w = cti_tb_open("runs/exp1", "");
 *     if (!w) return ct_last_code();              // message names the path
 *     int rc = cti_tb_add_scalar(w, "training/loss", loss, batches, 0);
 *     if (rc == 0) rc = cti_tb_flush(w);           // after each report
 *     cti_tb_close(w);
 *
 * The file is a sequence of TFRecords, each holding one serialized
 * tensorboard.Event protobuf:
 *
 *     uint64 length, little-endian
 *     uint32 masked CRC32C of those 8 length bytes
 *     length bytes of data (the Event)
 *     uint32 masked CRC32C of the data
 *
 * The first record is Event{wall_time, file_version: "brain.Event:2"}; each
 * scalar is Event{wall_time, step, summary: Summary{value: [Value{tag,
 * simple_value}]}}, field for field what torch.utils.tensorboard's
 * SummaryWriter.add_scalar writes by default, in protobuf's canonical
 * encoding (fields in number order, a zero step left out as proto3 does).
 * Histograms, images (PNG) and text are the Values SummaryWriter's
 * add_histogram, add_image and add_text write (below); the public
 * ct_summary_* functions (ctrial/summary.h, src/summary/) feed them from
 * tensors.
 *
 * Scalars are stored as simple_value, a 32-bit float: the double given is
 * rounded to the nearest float (0.1 reads back as 0.100000001490116...), and
 * magnitudes beyond float's range become +-inf, as a C cast or numpy's
 * float32() would. TensorBoard shows what it reads, so values that need more
 * than 7 significant digits belong in metrics.jsonl, not here.
 *
 * Errors: functions that return int give 0 or a negative CT_E* code, with
 * ct_last_error() describing the failure (the file's path and the errno text
 * for I/O). After a failed write the writer refuses further records (the
 * file may end in a partial record, which readers treat as its end).
 *
 * Threads: a writer has no internal locking; use it from one thread at a
 * time. Writes go through stdio's buffer; cti_tb_flush hands them to the
 * kernel (enough for a TensorBoard reading the growing file) but does not
 * fsync. No heap allocation happens per scalar.
 */
#ifndef CTRIAL_FORMATS_TBEVENTS_H
#define CTRIAL_FORMATS_TBEVENTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct cti_tb_writer cti_tb_writer;

/* Creates `logdir` and its missing parents (mode 0777 less the umask) and a
 * new event file in it named as TensorBoard's and PyTorch's writers name
 * theirs:
 *
 *     events.out.tfevents.<unix seconds, 10 digits>.<hostname>.<pid><suffix>
 *
 * `suffix` may be NULL or "" and must not contain '/'. The file is created
 * exclusively: if that name is taken (two writers in one second), ".1",
 * ".2", ... is appended to the pid. Writes the file_version record and
 * flushes it, so TensorBoard sees the run at once.
 *
 * Returns a new writer, owned by the caller (free with cti_tb_close), or NULL
 * with CT_EINVAL (NULL or empty logdir, bad suffix), CT_EIO (a directory or
 * the file cannot be created; the message names the path and errno's text)
 * or CT_ENOMEM. */
cti_tb_writer *cti_tb_open(const char *logdir, const char *suffix);

/* The event file's path. Borrowed: valid until cti_tb_close(w). NULL for a
 * NULL writer. */
const char *cti_tb_path(const cti_tb_writer *w);

/* Appends one scalar: `tag` (non-empty UTF-8, any length; TensorBoard groups
 * tags by the part before the first '/'), `value` rounded to float as said
 * above, `step` (any int64; negative steps are written as protobuf does,
 * in 10 bytes), `wall_time` in Unix seconds (<= 0 means now; NaN or inf is
 * an error). Buffered: call cti_tb_flush to make it visible.
 * Returns 0, CT_EINVAL (NULL writer or tag, empty or non-UTF-8 tag, bad
 * wall_time), CT_ESTATE (an earlier write failed) or CT_EIO. */
int cti_tb_add_scalar(cti_tb_writer *w, const char *tag, double value, int64_t step,
                     double wall_time);

/* The three functions below check tag, wall_time and the writer's state as
 * cti_tb_add_scalar does and fail with the same codes; each writes one Event
 * whose Summary holds one Value, field for field what
 * torch.utils.tensorboard's SummaryWriter writes for the same data (torch
 * 2.11, tensorboard 2.21). Each allocates what its record needs on the heap
 * (CT_ENOMEM when that fails) and frees it before returning. */

/* SummaryWriter.add_histogram(tag, values, step, bins="tensorflow"): a
 * Value{tag, histo: HistogramProto{min, max, num, sum, sum_squares,
 * bucket_limit, bucket}} over the `n` doubles at `values` (row-major order
 * is what the caller flattened; n >= 1).
 *
 * The buckets are torch's default_bins: the edges
 *
 *     -e[K-1] ... -e[1] -e[0]  0  e[0] e[1] ... e[K-1],
 *     e[0] = 1e-12, e[k+1] = e[k] * 1.1 (rounded as doubles, in that order),
 *     the last e[K-1] = 9.92e19 (the largest below 1e20; K = 774),
 *
 * and numpy.histogram's counting over them: bucket i holds the values v
 * with edge[i] <= v < edge[i+1], the last bucket also v == edge[last].
 * Values outside [-e[K-1], e[K-1]] and NaNs are counted in no bucket (they
 * still count in num, min, max, sum and sum_squares, as in torch). As in
 * torch's make_histogram, only the buckets from the first to the last
 * non-empty one are kept, preceded by one empty bucket; bucket_limit[i] is
 * bucket i's right edge, so the first limit is the left edge of the first
 * non-empty bucket.
 *
 * min and max are NaN when a value is NaN (numpy's min/max); of equal
 * values the first is kept (so the sign of a zero may differ from numpy's,
 * whose SIMD loops pick either). sum is numpy's: 0.0 plus the pairwise sum
 * of numpy's add.reduce (blocks of 8 partial sums below 128 values, halves
 * above), bit for bit. sum_squares is the same pairwise sum of the squares;
 * torch takes it from BLAS's dot, whose order of additions depends on the
 * CPU, so it agrees with torch's to rounding (exactly when every partial
 * sum is exact, e.g. small dyadic values).
 *
 * Returns 0, or CT_EINVAL also for NULL values, n == 0 (torch: "The input
 * has no element.") and no value inside the edges (all NaN or beyond
 * +-9.92e19; torch: "The histogram is empty"), nothing written. */
int cti_tb_add_histogram(cti_tb_writer *w, const char *tag, const double *values, size_t n,
                        int64_t step, double wall_time);

/* SummaryWriter.add_image(tag, img, step, dataformats="HWC") for 8-bit
 * pixels: a Value{tag, image: Image{height, width, colorspace = channels,
 * encoded_image_string = PNG}}. `hwc` holds height * width * channels bytes,
 * row by row, each pixel's channels together; channels 1 (gray), 3 (RGB) or
 * 4 (RGBA, not premultiplied); height and width >= 1. The PNG is 8 bits per
 * channel, non-interlaced, compressed with zlib (deflate level 6, each row's
 * PNG filter chosen by the minimum-sum-of-absolute-differences heuristic
 * libpng uses). Its bytes differ from the PNG that PIL writes for torch,
 * the pixels it decodes to do not.
 *
 * torch itself never writes a one-channel image (it repeats gray into RGB);
 * channels == 1 here writes a grayscale PNG with colorspace 1, which
 * TensorBoard shows as gray. ct_summary_add_image repeats gray as torch
 * does.
 *
 * Returns 0, or CT_EINVAL also for NULL pixels, a bad size or channel
 * count, nothing written. */
int cti_tb_add_image(cti_tb_writer *w, const char *tag, const uint8_t *hwc, int height, int width,
                    int channels, int64_t step, double wall_time);

/* SummaryWriter.add_text(tag, text, step): a Value{tag: tag + "/text_summary",
 * tensor: TensorProto{dtype: DT_STRING, tensor_shape: [1], string_val:
 * [text]}, metadata: SummaryMetadata{plugin_data: {plugin_name: "text"}}}
 * (TextPluginData's version 0 serializes to nothing). TensorBoard's text
 * plugin renders `text` as Markdown. `text` is NUL-terminated UTF-8 of any
 * length, possibly empty.
 *
 * Returns 0, or CT_EINVAL also for NULL or non-UTF-8 text (the message
 * names the byte), nothing written. */
int cti_tb_add_text(cti_tb_writer *w, const char *tag, const char *text, int64_t step,
                   double wall_time);

/* Appends Event{wall_time, step, session_log: SessionLog{status: START}}:
 * TensorBoard (purge_orphaned_data, its default) then drops every event of
 * the same run with a step >= `step` written before this one, which is how
 * a resumed run replaces what the interrupted one logged after its
 * checkpoint. wall_time as for scalars. Returns 0, CT_EINVAL, CT_ESTATE or
 * CT_EIO. */
int cti_tb_add_session_start(cti_tb_writer *w, int64_t step, double wall_time);

/* Hands buffered records to the kernel. Returns 0, CT_EINVAL (NULL),
 * CT_ESTATE (an earlier write failed) or CT_EIO. */
int cti_tb_flush(cti_tb_writer *w);

/* Flushes, closes and frees the writer. Accepts NULL. Reports nothing: call
 * cti_tb_flush first where a lost final record must be noticed. */
void cti_tb_close(cti_tb_writer *w);

/* ---- the encoding pieces, exposed for the tests ------------------------- */

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of n bytes, continuing
 * from `crc` (0 to start), like zlib's crc32(): crc32c(0, "123456789", 9) ==
 * 0xE3069283. */
uint32_t cti_tb_crc32c(uint32_t crc, const void *data, size_t n);

/* TFRecord's masking of a CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8,
 * modulo 2^32. It keeps a CRC stored next to its data from being a valid
 * CRC of data that embeds CRCs. */
uint32_t cti_tb_mask_crc(uint32_t crc);

/* The K = 774 positive edges e[0..K-1] of torch's default histogram bins
 * (above) into out, which has room for CT_TB_HIST_EDGES doubles; returns K. */
enum { CT_TB_HIST_EDGES = 774 };
int cti_tb_hist_edges(double *out);

/* Writes `v` as a protobuf base-128 varint into out (room for 10 bytes) and
 * returns the number of bytes written (1 to 10). An int64 field passes its
 * two's complement: negative values take 10 bytes. */
size_t cti_tb_put_varint(uint8_t *out, uint64_t v);

/* Offset of the first byte of s[0..n) that is not valid UTF-8 (overlong
 * forms, surrogates and code points past U+10FFFF count as invalid), or n.
 * Protobuf's readers refuse a string field that is not UTF-8. */
size_t cti_tb_utf8_error_at(const void *s, size_t n);

/* ---- for the module's other writers (tb_hparams.c) ----------------------- */

/* Appends Event{wall_time, step, summary: Summary{value: [Value{tag,
 * metadata: SummaryMetadata{plugin_data: {plugin_name, content}}}]}}: a
 * Value with no data of its own (no simple_value, no tensor), only a
 * plugin's metadata, which is how the hparams plugin's summaries are
 * written (torch's summary.hparams()). `content` is `content_len` bytes,
 * already serialized, borrowed for the call (NULL only when content_len is
 * 0; an empty content is left out, as proto3 does). `plugin_name` is
 * non-empty UTF-8; tag, step and wall_time as in cti_tb_add_scalar.
 * `caller` names the function in error messages (NULL: this one).
 * Returns 0, CT_EINVAL (nothing written), CT_ESTATE or CT_EIO. */
int cti_tb_add_plugin_value(cti_tb_writer *w, const char *tag, const char *plugin_name,
                           const void *content, size_t content_len, int64_t step,
                           double wall_time, const char *caller);

#endif
