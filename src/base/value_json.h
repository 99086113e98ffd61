/* src/base/value_json.h — ct_value trees <-> JSON (jansson), for metrics.jsonl and
 * checkpoint metadata. Internal to ctrial.
 *
 * To JSON, a tensor becomes its value (one element) or a flat list of
 * numbers, non-finite floats become null, tuples become arrays and integer
 * dict keys become strings: the lossy view a log or metadata file shows.
 * From JSON, objects become dicts, arrays lists, integers ints and reals
 * floats. */
#ifndef CTRIAL_BASE_VALUE_JSON_H
#define CTRIAL_BASE_VALUE_JSON_H

#include <jansson.h>

#include "ctrial/value.h"

/* NEW JSON reference (json_null() for NULL or an unconvertible value). */
json_t *cti_json_from_value(const ct_value *v);
/* NEW value, or NULL + CT_ENOMEM. */
ct_value *cti_value_from_json(const json_t *j);

#endif
