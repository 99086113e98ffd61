/* src/base/json_write.h — JSON text with numbers as Python writes them.
 * Internal to ctrial.
 *
 * jansson writes a real with 17 significant digits (0.003 becomes
 * 0.0030000000000000001, 1e-05 becomes 1.0000000000000001e-5, 1e16
 * 10000000000000000.0); Python's
 * json.dumps writes float.__repr__: the shortest digits that read back as
 * the same double. Every JSON text ctrial writes (metrics.jsonl,
 * experiment.jsonl, checkpoints' metadata.json, messages quoting a value)
 * goes through cti_json_dumps, so its reals read as Python's would, and
 * jansson and Python read each back to the same double. */
#ifndef CTRIAL_BASE_JSON_WRITE_H
#define CTRIAL_BASE_JSON_WRITE_H

#include <jansson.h>

/* Room for any cti_float_repr ("-2.2250738585072014e-308" is 24 bytes). */
#define CTI_FLOAT_REPR_LEN 32

/* Python's repr(x) into buf; returns buf. The shortest digits that read back
 * as x (the nearest such when several do), positional when the decimal
 * exponent is in [-4, 16) and with ".0" on integral values ("0.003",
 * "100.0", "-0.0"), scientific otherwise with a sign and at least two
 * exponent digits ("1e-05", "1.5e+16"); "nan", "inf", "-inf". Independent
 * of the locale. */
const char *cti_float_repr(double x, char buf[CTI_FLOAT_REPR_LEN]);

/* json_dumps(j, flags) with every real written as cti_float_repr writes it;
 * all else byte for byte as jansson writes it (strings escaped by jansson
 * itself). Takes jansson's JSON_INDENT(n), JSON_COMPACT, JSON_SORT_KEYS,
 * JSON_ENSURE_ASCII, JSON_ESCAPE_SLASH, JSON_ENCODE_ANY and JSON_EMBED;
 * JSON_PRESERVE_ORDER and JSON_REAL_PRECISION change nothing (keys are in
 * insertion order, reals always shortest). jansson holds no NaN or
 * infinity (json_real refuses them; value trees give null for them), so
 * none is written. NEW text (free()), or NULL where json_dumps fails: out
 * of memory, a loop, a string that is not UTF-8, a scalar without
 * JSON_ENCODE_ANY. */
char *cti_json_dumps(const json_t *j, size_t flags);

#endif
