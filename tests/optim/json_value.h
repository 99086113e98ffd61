/* tests/optim/json_value.h — ct_value <-> JSON for the Python parity tests.
 *
 * The encoding keeps every distinction a state dict makes, so that the
 * Python side can compare structure exactly:
 *   None, bools, ints, floats, strings  -> the JSON scalar (1.0 stays a real)
 *   list                                -> array
 *   tuple                               -> {"tuple": [...]}
 *   dict                                -> {"dict": [[key, value], ...]}  (key: string or int, in order)
 *   tensor                              -> {"tensor": nested lists, "dtype": "float32", "shape": [...]}
 * JSON has no NaN or infinity: a non-finite float is the dict {"float":
 * "nan" | "inf" | "-inf"} (as sched_parity.c passes ReduceLROnPlateau's
 * inf), and a non-finite tensor element or loss the string "nan", "inf"
 * or "-inf" (an LBFGS that diverges on some CPUs has NaN in its state).
 * tests/optim/ctjson.py is the Python half.
 */
#ifndef CT_TEST_JSON_VALUE_H
#define CT_TEST_JSON_VALUE_H

#include <jansson.h>

#include <ctrial/ctrial.h>

/* New JSON (NULL on failure, with a ct error set). */
json_t *value_to_json(const ct_value *v);
/* x as a JSON number, or "nan", "inf", "-inf". New. */
json_t *real_to_json(double x);
/* A tensor alone, as {"tensor": ...}. */
json_t *tensor_to_json(const ct_tensor *t);
/* New value (NULL on failure, with a ct error set). */
ct_value *value_from_json(const json_t *j);
/* New tensor from {"tensor": ...}, caller-owned. */
ct_tensor *tensor_from_json(const json_t *j);

#endif
