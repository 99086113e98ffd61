/* src/nn/layer.h — what the composite layers of module nn share (recurrent
 * layers, attention, transformers: torch.nn's layers that Python builds
 * out of other layers and functional calls, written here in C on the
 * public API: nn.h's modules, tensor.h's and ops.h's operators). Internal
 * to ctrial.
 *
 * Parameters are made and initialised as torch.nn.init does, drawing from
 * the default generator in the order Python's constructors draw, so the
 * same seed gives bit-identical weights. */
#ifndef CTRIAL_NN_LAYER_H
#define CTRIAL_NN_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "ctrial/nn.h"
#include "ctrial/ops.h"

/* A new parameter `name` of m, of `shape`, filled by `init` (the tensor,
 * not yet requiring grad, and `a`, `b`), then registered
 * (ct_nn_add_parameter). Returns it (borrowed), or NULL + error. */
typedef int (*cti_layer_init_fn)(ct_tensor *t, double a, double b);
ct_tensor *cti_layer_param(ct_module *m, const char *name, int ndim, const int64_t *shape, cti_layer_init_fn init,
                          double a, double b);

/* torch.nn.init's functions, in place (statuses). */
int cti_layer_init_uniform(ct_tensor *t, double low, double high);  /* uniform_(t, low, high) */
int cti_layer_init_constant(ct_tensor *t, double value, double unused); /* constant_(t, value) */
/* xavier_uniform_(t, gain): U(-b, b), b = sqrt(3) * gain * sqrt(2 / (fan_in + fan_out)),
 * computed in Python's order so the bound is the same double. */
int cti_layer_init_xavier_uniform(ct_tensor *t, double gain, double unused);

/* Python's argument binding for a value forward. */

/* The value given for argument `pos` of args, else the keyword `name` of
 * kwargs; NULL when neither gives it. Borrowed. */
const ct_value *cti_layer_arg(const ct_value *args, const ct_value *kwargs, size_t pos, const char *name);

/* forward(*args, **kwargs) bound to the parameters names[0..n): got[i] is
 * the value given for names[i] (borrowed), NULL when none was; rc is the
 * first failure (too many positional arguments, an unknown keyword or one
 * given twice, as Python's TypeError; then a wrong kind or a missing
 * argument from the readers below), messages prefixed with `type`. */
#define CT_LAYER_MAX_ARGS 12
typedef struct {
    const char *type;
    const ct_value *got[CT_LAYER_MAX_ARGS];
    const char *const *names;
    int rc;
} cti_layer_args;
cti_layer_args cti_layer_bind(const char *type, const ct_value *args, const ct_value *kwargs, size_t n,
                            const char *const *names);
/* Argument i as a tensor: NULL when absent or None (then a->rc is set when
 * `required`), or when it is not a tensor (a->rc set). */
const ct_tensor *cti_layer_tensor_at(cti_layer_args *a, size_t i, bool required);
/* Argument i as a flag: 1 or 0, -1 for None, `dflt` when absent (a->rc set
 * when it is not a bool). */
int cti_layer_flag_at(cti_layer_args *a, size_t i, int dflt);
/* The pending error, prefixed with `type` once ("MultiheadAttention: ...").
 * Returns NULL, for `return cti_layer_failed(type);`. */
void *cti_layer_failed(const char *type);

/* A value holding t (a new alias of it), for results; NULL when t is NULL. */
ct_value *cti_layer_value(const ct_tensor *t);

#endif
