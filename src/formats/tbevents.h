/* src/formats/tbevents.h — TensorBoard event files, written without a protobuf
 * library. Internal to ctrial: the training loop logs its training and
 * validation scalars through it so that `tensorboard --logdir DIR` shows them.
 *
 *     ct_tb_writer *w = ct_tb_open("runs/exp1", "");
 *     if (!w) return ct_last_code();              // message names the path
 *     int rc = ct_tb_add_scalar(w, "training/loss", loss, batches, 0);
 *     if (rc == 0) rc = ct_tb_flush(w);           // after each report
 *     ct_tb_close(w);
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
 * time. Writes go through stdio's buffer; ct_tb_flush hands them to the
 * kernel (enough for a TensorBoard reading the growing file) but does not
 * fsync. No heap allocation happens per scalar.
 */
#ifndef CTRIAL_FORMATS_TBEVENTS_H
#define CTRIAL_FORMATS_TBEVENTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ct_tb_writer ct_tb_writer;

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
 * Returns a new writer, owned by the caller (free with ct_tb_close), or NULL
 * with CT_EINVAL (NULL or empty logdir, bad suffix), CT_EIO (a directory or
 * the file cannot be created; the message names the path and errno's text)
 * or CT_ENOMEM. */
ct_tb_writer *ct_tb_open(const char *logdir, const char *suffix);

/* The event file's path. Borrowed: valid until ct_tb_close(w). NULL for a
 * NULL writer. */
const char *ct_tb_path(const ct_tb_writer *w);

/* Appends one scalar: `tag` (non-empty UTF-8, any length; TensorBoard groups
 * tags by the part before the first '/'), `value` rounded to float as said
 * above, `step` (any int64; negative steps are written as protobuf does,
 * in 10 bytes), `wall_time` in Unix seconds (<= 0 means now; NaN or inf is
 * an error). Buffered: call ct_tb_flush to make it visible.
 * Returns 0, CT_EINVAL (NULL writer or tag, empty or non-UTF-8 tag, bad
 * wall_time), CT_ESTATE (an earlier write failed) or CT_EIO. */
int ct_tb_add_scalar(ct_tb_writer *w, const char *tag, double value, int64_t step,
                     double wall_time);

/* Hands buffered records to the kernel. Returns 0, CT_EINVAL (NULL),
 * CT_ESTATE (an earlier write failed) or CT_EIO. */
int ct_tb_flush(ct_tb_writer *w);

/* Flushes, closes and frees the writer. Accepts NULL. Reports nothing: call
 * ct_tb_flush first where a lost final record must be noticed. */
void ct_tb_close(ct_tb_writer *w);

/* ---- the encoding pieces, exposed for the tests ------------------------- */

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of n bytes, continuing
 * from `crc` (0 to start), like zlib's crc32(): crc32c(0, "123456789", 9) ==
 * 0xE3069283. */
uint32_t ct_tb_crc32c(uint32_t crc, const void *data, size_t n);

/* TFRecord's masking of a CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8,
 * modulo 2^32. It keeps a CRC stored next to its data from being a valid
 * CRC of data that embeds CRCs. */
uint32_t ct_tb_mask_crc(uint32_t crc);

/* Writes `v` as a protobuf base-128 varint into out (room for 10 bytes) and
 * returns the number of bytes written (1 to 10). An int64 field passes its
 * two's complement: negative values take 10 bytes. */
size_t ct_tb_put_varint(uint8_t *out, uint64_t v);

#endif
