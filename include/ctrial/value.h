/*
 * ctrial/value.h — nested values shaped like Python objects: the currency of
 * state dicts.
 *
 * A model's, optimizer's or scheduler's state_dict in PyTorch is a tree of
 * dicts, lists, tuples, numbers, strings, None and tensors. ct_value holds
 * exactly that tree so that it can be written to and read from PyTorch's file
 * format unchanged, and compared with what Python produces.
 *
 *     ct_value *group = ct_value_dict();
 *     ct_value_dict_set(group, "lr", ct_value_float(0.1));
 *     ct_value_dict_set(group, "nesterov", ct_value_bool(false));
 *     ct_value *params = ct_value_list();
 *     ct_value_list_append(params, ct_value_int(0));
 *     ct_value_dict_set(group, "params", params);
 *     ...
 *     ct_value_free(group);                      // frees the whole tree
 *
 * Ownership: a tree has one owner. The *_set / *_append functions steal the
 * value they are given (also when they fail: it is freed), and getters return
 * borrowed references valid while the container lives and is not changed.
 * A tensor leaf owns its own ct_tensor handle (outside any scope).
 * Dict keys are strings or integers (optimizer state is keyed by parameter
 * index); insertion order is kept, as in Python.
 */
#ifndef CTRIAL_VALUE_H
#define CTRIAL_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_value ct_value;

typedef enum {
    CT_VALUE_NONE = 0,
    CT_VALUE_BOOL,
    CT_VALUE_INT,
    CT_VALUE_FLOAT,
    CT_VALUE_STR,
    CT_VALUE_TENSOR,
    CT_VALUE_LIST,
    CT_VALUE_TUPLE,
    CT_VALUE_DICT,
} ct_value_kind;

/* Constructors: each returns a new value (NULL only when out of memory). */
CT_API ct_value *ct_value_none(void);
CT_API ct_value *ct_value_bool(bool b);
CT_API ct_value *ct_value_int(int64_t i);
CT_API ct_value *ct_value_float(double d);
CT_API ct_value *ct_value_str(const char *s); /* copies s */
/* ct_value_tensor(t), a tensor leaf, is tensor.h's (the shim makes it). */
CT_API ct_value *ct_value_list(void);
CT_API ct_value *ct_value_tuple(void);
CT_API ct_value *ct_value_dict(void);

CT_API void ct_value_free(ct_value *v); /* the whole tree; accepts NULL */
/* A deep copy; tensors are cloned when clone_tensors, else shared. New. */
CT_API ct_value *ct_value_copy(const ct_value *v, bool clone_tensors);

CT_API ct_value_kind ct_value_kind_of(const ct_value *v);
CT_API const char *ct_value_kind_name(ct_value_kind k); /* "dict", "tensor", ... */

/* Scalar getters: 0 on success, CT_EFORMAT when v is not of that kind (int
 * converts to float; bool does not convert). */
CT_API int ct_value_get_bool(const ct_value *v, bool *out);
CT_API int ct_value_get_int(const ct_value *v, int64_t *out);
CT_API int ct_value_get_float(const ct_value *v, double *out);
/* Borrowed string / tensor, or NULL when v is not of that kind. */
CT_API const char *ct_value_get_str(const ct_value *v);
CT_API ct_tensor *ct_value_get_tensor(const ct_value *v);

/* Lists and tuples. append steals item. */
CT_API size_t ct_value_len(const ct_value *v); /* list, tuple, dict; else 0 */
CT_API int ct_value_list_append(ct_value *list, ct_value *item);
CT_API ct_value *ct_value_list_get(const ct_value *list, size_t i); /* borrowed */

/* Dicts. set steals item and replaces an existing key in place. */
CT_API int ct_value_dict_set(ct_value *dict, const char *key, ct_value *item);
CT_API int ct_value_dict_set_int(ct_value *dict, int64_t key, ct_value *item);
CT_API ct_value *ct_value_dict_get(const ct_value *dict, const char *key); /* borrowed */
CT_API ct_value *ct_value_dict_get_int(const ct_value *dict, int64_t key); /* borrowed */
/* The i-th entry in insertion order: its value (borrowed) and key; *skey is
 * set for a string key (else NULL) and *ikey for an integer key. */
CT_API ct_value *ct_value_dict_at(const ct_value *dict, size_t i, const char **skey,
                                  int64_t *ikey);

/* Structural equality: same kinds, keys in the same order, equal scalars;
 * tensors equal in dtype, shape and values (bitwise). */
CT_API bool ct_value_equal(const ct_value *a, const ct_value *b);

#ifdef __cplusplus
}
#endif
#endif
