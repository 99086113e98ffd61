/* src/base/value_tensor.h — tensor leaves of value trees, without libtorch.
 * Internal to ctrial.
 *
 * A value tree (value.h) may hold tensors, but module base is pure C and
 * never calls the shim. So each tensor leaf carries the functions that look
 * after its tensor, given by whoever made the leaf: the shim's
 * ct_value_tensor hands in its own (shim/value_tensor.cpp). Trees without
 * tensors, and programs that link base without the shim (the config tests,
 * the fuzzers), never reach a tensor function. */
#ifndef CTRIAL_BASE_VALUE_TENSOR_H
#define CTRIAL_BASE_VALUE_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "ctrial/value.h"

typedef struct {
    /* Frees the leaf's handle (the tensor lives on while others hold it). */
    void (*free)(ct_tensor *t);
    /* A NEW handle, owned by no scope: on the same tensor (share) or on a
     * copy of its data (clone). NULL + error on failure. */
    ct_tensor *(*share)(const ct_tensor *t);
    ct_tensor *(*clone)(const ct_tensor *t);
    /* Same dtype, shape and bytes. */
    bool (*equal)(const ct_tensor *a, const ct_tensor *b);
    /* The values as doubles, *out malloc'd (the caller frees it); *is_array
     * unless the tensor holds one element in zero or more dims of size 1
     * (a scalar). Returns the count, or a negative code with an error. */
    int64_t (*to_doubles)(const ct_tensor *t, double **out, bool *is_array);
} cti_value_tensor_ops;

/* A tensor leaf holding t, which it steals (also on failure: ops->free).
 * t must be owned by no scope. NEW value, or NULL + error. */
ct_value *cti_value_tensor_leaf(ct_tensor *t, const cti_value_tensor_ops *ops);

/* The values of a tensor leaf as doubles (ops->to_doubles); CT_EINVAL for
 * another kind. */
int64_t cti_value_tensor_doubles(const ct_value *v, double **out, bool *is_array);

#endif
