/* src/dist/value_wire.h — ct_value trees as bytes, and the collectives that
 * send them between ranks. Internal to ctrial.
 *
 * Unlike the JSON view (value_json.h), the encoding is faithful: every kind
 * (tuples stay tuples, bools stay bools), dict keys with their kind (string
 * or integer) and insertion order, floats bit for bit, and tensors as dtype,
 * shape and C-contiguous element bytes copied to the host from any device.
 * Decoded tensors live on the CPU.
 *
 * Layout: the 4-byte magic "CTV1", then one node. A node is a kind byte and
 * its payload; counts, lengths, integers and dims are little-endian 64-bit,
 * tensor elements are in the host's byte order (ranks of one job share it).
 *
 *   none                 -
 *   bool                 u8 (0 or 1)
 *   int / float          8 bytes (the float's bits)
 *   str                  u64 length, bytes (no NUL)
 *   tensor               u8 dtype, u8 ndim, ndim x i64 sizes, the elements
 *   list / tuple         u64 count, count nodes
 *   dict                 u64 count, count x (u8 key kind 0=str 1=int, key, node)
 *
 * The bytes may come from another process, so decoding trusts nothing: every
 * length is checked against what is left before it is used, nesting is
 * bounded, and nothing may follow the root. */
#ifndef CTRIAL_DIST_VALUE_WIRE_H
#define CTRIAL_DIST_VALUE_WIRE_H

#include <stddef.h>

#include "ctrial/value.h"

/* v as bytes (layout above). *out is malloc'd (the caller frees it) and
 * *len is its size. Returns a status; *out is NULL on failure. */
int cti_value_to_bytes(const ct_value *v, void **out, size_t *len);

/* The tree back (tensors on the CPU): a NEW value, or NULL + CT_EFORMAT
 * naming the offset when buf is malformed (never reads past len). */
ct_value *cti_value_from_bytes(const void *buf, size_t len);

/* ---- collectives -------------------------------------------------------------
 * Trees between ranks in the encoding above, so nothing is lost on the way
 * (metrics, reducer values, rank 0's decisions). Every rank calls them;
 * with one rank they copy and do not communicate. A failure on any rank
 * (no value to send, out of memory, bytes that do not decode) fails the
 * call on every rank, so ranks never disagree about what they hold. */

/* Root's tree on every rank: a NEW copy (root too decodes what it sent), or
 * NULL + error on every rank. `v` is read on root only; a NULL `v` there
 * means root failed, and its error (ct_last_code() and ct_last_error())
 * becomes every rank's. */
ct_value *cti_value_broadcast(const ct_value *v, int root);

/* Every rank's tree on root: *out receives a NEW list of ct_dist_size()
 * trees in rank order on root, NULL elsewhere. A NULL `v` means this rank
 * failed (it still takes part). Returns a status, the same on every rank. */
int cti_value_gather(const ct_value *v, int root, ct_value **out);

#endif
