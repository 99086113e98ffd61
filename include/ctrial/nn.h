/*
 * ctrial/nn.h — modules: named parameters, buffers and children, built-in
 * layers, and user modules whose forward is a C function: on one tensor
 * (ct_nn_module, ct_nn_forward), or on value trees in and out, like
 * Python's forward(*args, **kwargs) (ct_nn_module_value, ct_nn_call; in one
 * line with a format, ct_nn_callf and ct_nn_forwardf).
 *
 * A module mirrors torch.nn.Module: it owns parameters (tensors with grad),
 * buffers (running statistics) and child modules, each under a name, and its
 * state is addressed by PyTorch's dotted names ("fc1.weight",
 * "bn.running_mean", "0.bias" inside a Sequential). Built-in layers are
 * initialised exactly as PyTorch initialises them, so the same seed gives
 * bit-identical weights to Python's `torch.manual_seed(s); nn.Linear(...)`.
 *
 *     typedef struct { ct_module *fc1, *fc2; } Net;
 *
 *     static ct_tensor *net_forward(ct_module *self, const ct_tensor *x) {
 *         Net *n = ct_nn_user(self);
 *         x = ct_flatten(x, 1, -1);
 *         x = ct_relu(ct_nn_forward(n->fc1, x));
 *         return ct_nn_forward(n->fc2, x);
 *     }
 *
 *     Net *n = calloc(1, sizeof *n);
 *     ct_module *net = ct_nn_module("Net", net_forward, n, free);
 *     n->fc1 = ct_nn_add_module(net, "fc1", ct_nn_linear(784, 128, true));
 *     n->fc2 = ct_nn_add_module(net, "fc2", ct_nn_linear(128, 10, true));
 *     ...
 *     ct_nn_free(net);                         // children, parameters, user
 *
 * Value modules take positional and keyword arguments as Python's do; the
 * arguments are written after a format ("t" a tensor, "b" a bool, ...):
 *
 *     // y = enc(x, src_key_padding_mask=pad)
 *     ct_tensor *y = ct_nn_forwardf(enc, "t, src_key_padding_mask=t", x, pad);
 *     // out, _ = mha(q, k, v, key_padding_mask=pad, need_weights=False)
 *     ct_value *r = ct_nn_callf(mha, "t, t, t, key_padding_mask=t, need_weights=b", q, k, v, pad, false);
 *     ct_tensor *out = ct_value_get_tensor(ct_value_list_get(r, 0));   // borrowed from r
 *     ...
 *     ct_value_free(r);
 *
 * Ownership: a module owns its parameters, buffers, children and user data.
 * Getters return borrowed references valid while the module lives. Handles
 * have no internal lock; don't use one module from two threads at once.
 */
#ifndef CTRIAL_NN_H
#define CTRIAL_NN_H

#include "tensor.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_module ct_module;

/* forward(self, x) returns a new tensor, or NULL with an error set. */
typedef ct_tensor *(*ct_forward_fn)(ct_module *self, const ct_tensor *x);

/* Python's forward(self, *args, **kwargs) over value trees (value.h): args
 * is a tuple of the positional arguments, kwargs a dict of the keyword ones
 * (both borrowed, never NULL, possibly empty). Returns a NEW value — a
 * tensor leaf, a tuple, a dict of losses, None — or NULL with an error set.
 * Tensors in args are borrowed: use them, or ct_alias one to keep it. */
typedef ct_value *(*ct_forward_value_fn)(ct_module *self, const ct_value *args, const ct_value *kwargs);

/* ---- building modules -------------------------------------------------- */

/* A user module. type_name is shown in messages ("Net"); forward may be NULL
 * for a pure container; user_free(user) runs when the module is freed (may be
 * NULL). Returns a new module; on failure user_free is never called. */
CT_API ct_module *ct_nn_module(const char *type_name, ct_forward_fn forward, void *user,
                               void (*user_free)(void *user));
/* A user module whose forward takes and returns value trees: several
 * inputs, keyword arguments, None, tuples or dicts out (an LSTM's
 * (out, (h, c)), attention's masks, a detector's loss dict). Called with
 * ct_nn_call; ct_nn_forward(m, x) calls it with the single argument x and
 * needs a tensor back. Otherwise as ct_nn_module. */
CT_API ct_module *ct_nn_module_value(const char *type_name, ct_forward_value_fn forward, void *user,
                                     void (*user_free)(void *user));
/* The user pointer given at creation (borrowed). */
CT_API void *ct_nn_user(const ct_module *m);

/* self.name = nn.Parameter(t): steals t (also on failure), makes it a leaf
 * that requires grad, and returns it (borrowed), or NULL on failure.
 * Names follow Python's rules (non-empty, no '.'); a name already used by a
 * parameter, buffer or child of m is refused (CT_EINVAL). A handle that is
 * already registered in m's tree, or freed, is refused and not freed. To tie
 * weights, register ct_alias(t): named_parameters() lists a tensor once. */
CT_API ct_tensor *ct_nn_add_parameter(ct_module *m, const char *name, ct_tensor *t);
/* self.register_buffer(name, t, persistent): steals t; returns it borrowed.
 * Non-persistent buffers are left out of the state dict. */
CT_API ct_tensor *ct_nn_add_buffer(ct_module *m, const char *name, ct_tensor *t, bool persistent);
/* self.name = child: steals child (also on failure); returns it borrowed.
 * A child that already has a parent (or is m's root) is refused and left
 * alone: a module has one owner. */
CT_API ct_module *ct_nn_add_module(ct_module *m, const char *name, ct_module *child);

/* ---- built-in layers (new modules, initialised like PyTorch's) --------- */

CT_API ct_module *ct_nn_linear(int64_t in_features, int64_t out_features, bool bias);

typedef struct {
    int64_t stride, padding, dilation, groups; /* 1, 0, 1, 1 */
    bool bias;                                 /* true */
} ct_conv_opts;
CT_API ct_conv_opts ct_conv_defaults(void);
/* opts may be NULL for the defaults. */
CT_API ct_module *ct_nn_conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                               const ct_conv_opts *opts);
CT_API ct_module *ct_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                               const ct_conv_opts *opts);

typedef struct {
    double eps;                /* 1e-5 */
    double momentum;           /* 0.1; NAN means None (cumulative average) */
    bool affine;               /* true */
    bool track_running_stats;  /* true */
} ct_norm_opts;
CT_API ct_norm_opts ct_norm_defaults(void);
CT_API ct_module *ct_nn_batchnorm1d(int64_t num_features, const ct_norm_opts *opts);
CT_API ct_module *ct_nn_batchnorm2d(int64_t num_features, const ct_norm_opts *opts);
/* LayerNorm over the last dim of size `normalized`; eps and affine from opts. */
CT_API ct_module *ct_nn_layernorm(int64_t normalized, const ct_norm_opts *opts);
/* padding_idx < 0: none. */
CT_API ct_module *ct_nn_embedding(int64_t num_embeddings, int64_t embedding_dim,
                                  int64_t padding_idx);
CT_API ct_module *ct_nn_dropout(double p);
/* Stateless layers, for Sequential. */
CT_API ct_module *ct_nn_relu(void);
CT_API ct_module *ct_nn_gelu(void);
CT_API ct_module *ct_nn_silu(void);
CT_API ct_module *ct_nn_tanh(void);
CT_API ct_module *ct_nn_sigmoid(void);
CT_API ct_module *ct_nn_flatten(int start_dim, int end_dim);
CT_API ct_module *ct_nn_max_pool2d(int64_t kernel, int64_t stride, int64_t padding);

/* More convolutions. Conv3d takes ct_conv_opts (the same value on every
 * axis). ConvTranspose: weight [in, out / groups, k...], initialised as
 * PyTorch's (fan-in from dim 1). */
CT_API ct_module *ct_nn_conv3d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                               const ct_conv_opts *opts);
typedef struct {
    int64_t stride, padding, output_padding, groups, dilation; /* 1, 0, 0, 1, 1 */
    bool bias;                                                 /* true */
} ct_conv_transpose_opts;
CT_API ct_conv_transpose_opts ct_conv_transpose_defaults(void);
CT_API ct_module *ct_nn_conv_transpose1d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                         const ct_conv_transpose_opts *opts);
CT_API ct_module *ct_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                         const ct_conv_transpose_opts *opts);

/* More normalisations. GroupNorm reads eps and affine from opts.
 * InstanceNorm with opts NULL has PyTorch's defaults, which differ from
 * ct_norm_defaults(): affine false, track_running_stats false.
 * LayerNorm over the last `ndims` dims of sizes `normalized_shape`
 * (nn.LayerNorm([C, H, W])). */
CT_API ct_module *ct_nn_groupnorm(int64_t num_groups, int64_t num_channels, const ct_norm_opts *opts);
CT_API ct_module *ct_nn_instancenorm1d(int64_t num_features, const ct_norm_opts *opts);
CT_API ct_module *ct_nn_instancenorm2d(int64_t num_features, const ct_norm_opts *opts);
CT_API ct_module *ct_nn_layernorm_nd(int ndims, const int64_t *normalized_shape, const ct_norm_opts *opts);

/* Pooling. stride 0 means stride = kernel, as in PyTorch. */
CT_API ct_module *ct_nn_avg_pool1d(int64_t kernel, int64_t stride, int64_t padding);
CT_API ct_module *ct_nn_avg_pool2d(int64_t kernel, int64_t stride, int64_t padding);
CT_API ct_module *ct_nn_adaptive_avg_pool1d(int64_t output_size);
CT_API ct_module *ct_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w);
CT_API ct_module *ct_nn_adaptive_max_pool2d(int64_t out_h, int64_t out_w);

/* nn.Upsample: either an output size (ndims > 0: the spatial sizes) or a
 * scale factor; mode "nearest", "linear", "bilinear", "bicubic" or
 * "trilinear" (also "nearest-exact" and "area"; NULL: "nearest");
 * align_corners only for the interpolating modes; ndims must equal the
 * input's spatial dims. Bad combinations fail at construction (CT_EINVAL). */
typedef struct {
    int ndims;                 /* 0: use scale_factor */
    int64_t size[3];
    double scale_factor;       /* 0: use size */
    const char *mode;          /* "nearest" */
    bool align_corners;        /* false */
} ct_upsample_opts;
CT_API ct_upsample_opts ct_upsample_defaults(void);
CT_API ct_module *ct_nn_upsample(const ct_upsample_opts *opts);

/* More stateless layers. Dropout1d/2d zero whole channels. */
CT_API ct_module *ct_nn_dropout1d(double p);
CT_API ct_module *ct_nn_dropout2d(double p);
CT_API ct_module *ct_nn_identity(void);
CT_API ct_module *ct_nn_softmax(int dim);
CT_API ct_module *ct_nn_log_softmax(int dim);
CT_API ct_module *ct_nn_leaky_relu(double negative_slope); /* 0.01 in PyTorch */
CT_API ct_module *ct_nn_elu(double alpha);                 /* 1.0 */
CT_API ct_module *ct_nn_mish(void);
CT_API ct_module *ct_nn_hardswish(void);
/* nn.PReLU(num_parameters, init): a learned slope, "weight" [num_parameters]. */
CT_API ct_module *ct_nn_prelu(int64_t num_parameters, double init); /* 1, 0.25 */

/* nn.EmbeddingBag(num_embeddings, embedding_dim, mode): a value module,
 * forward(input, offsets=None, per_sample_weights=None) -> tensor (also
 * through ct_nn_forward with a 2-D input). mode "sum", "mean" (PyTorch's
 * default; also NULL) or "max"; per_sample_weights only with "sum". */
CT_API ct_module *ct_nn_embedding_bag(int64_t num_embeddings, int64_t embedding_dim, const char *mode);

/* Recurrent layers, attention and transformers (nn.RNN, nn.LSTM, nn.GRU,
 * nn.MultiheadAttention, nn.Transformer*) are nn_sequence.h's, which this
 * header includes at its end. */

/* nn.Sequential(m0, m1, ...): steals the modules (also on failure); children
 * are named "0", "1", ... */
CT_API ct_module *ct_nn_sequential(int n, ct_module *const *modules);
/* Appends to a Sequential (steals m); returns m borrowed or NULL. */
CT_API ct_module *ct_nn_sequential_append(ct_module *seq, ct_module *m);

/* ---- using modules ----------------------------------------------------- */

/* m(x): a new tensor (in the current scope), or NULL. NULL-propagating.
 * On a value module (ct_nn_module_value), m(x) whose result must be a
 * tensor (CT_EINVAL otherwise: use ct_nn_call). */
CT_API ct_tensor *ct_nn_forward(ct_module *m, const ct_tensor *x);
/* m(*args, **kwargs) on any module: args a tuple or list of the positional
 * arguments, kwargs a dict of the keyword ones (either may be NULL: none);
 * both borrowed. Returns a NEW value, or NULL + error (NULL-propagating: a
 * NULL module keeps the first failure's message). A module with a tensor forward (built-in layers, ct_nn_module)
 * takes one tensor and no keywords and returns a tensor leaf; a Sequential
 * calls its first child with args and kwargs and each next child with the
 * result before it, as Python's does. */
CT_API ct_value *ct_nn_call(ct_module *m, const ct_value *args, const ct_value *kwargs);
/* m(x, key_padding_mask=pad, need_weights=False) in one line: the arguments
 * are described by a format and passed after it, as printf's are. The
 * format is comma-separated arguments, each a type code or name=code
 * (keywords after the positional ones, each name once, blanks ignored):
 *   t  const ct_tensor *  borrowed: the module sees the caller's tensor
 *                         (another handle on it, ct_alias: no copy)
 *   i  int64_t            cast literals: (int64_t)3
 *   f  double             a literal with a point: 0.5, 1.0
 *   b  bool               (passed as int)
 *   s  const char *       copied; NULL is refused (None is n)
 *   n  None               takes no vararg
 *   v  const ct_value *   borrowed: a tuple such as an LSTM's (h, c), a
 *                         list, a dict (copied, its tensors shared)
 * ct_nn_callf returns m(...) as a NEW value, as ct_nn_call; ct_nn_forwardf
 * a new tensor in the current scope, as ct_nn_forward (CT_EINVAL naming
 * the module when the result is not a tensor: use ct_nn_callf).
 * A malformed format (an unknown code, a positional argument after a
 * keyword, a keyword twice, an empty name or argument) is CT_EINVAL quoting
 * the format with the argument and the character where it went wrong.
 * NULL-propagating: a NULL module, tensor (t) or value (v) keeps a pending
 * error (the first failure). */
CT_API ct_value *ct_nn_callf(ct_module *m, const char *format, ...);
CT_API ct_tensor *ct_nn_forwardf(ct_module *m, const char *format, ...);
/* "Linear", "Sequential", or the user type name. */
CT_API const char *ct_nn_type(const ct_module *m);
/* Child by name or dotted path ("features.0"); borrowed; NULL + error if none. */
CT_API ct_module *ct_nn_child(const ct_module *m, const char *path);
/* Parameter or buffer by dotted name ("fc1.weight"); borrowed; NULL + error. */
CT_API ct_tensor *ct_nn_get(const ct_module *m, const char *name);

/* Parameters in named_parameters() order: the module's own in registration
 * order, then each child's. i < ct_nn_num_params(m). Borrowed; *name (may be
 * NULL) receives the dotted name, valid until the module changes. */
CT_API size_t ct_nn_num_params(const ct_module *m);
CT_API ct_tensor *ct_nn_param_at(const ct_module *m, size_t i, const char **name);
/* All parameters as a borrowed array (valid until the module changes). */
CT_API ct_tensor *const *ct_nn_parameters(const ct_module *m, size_t *n);
/* Total number of parameter elements. */
CT_API int64_t ct_nn_num_param_elements(const ct_module *m);

/* State-dict entries in Python's order (per module: parameters, then
 * persistent buffers, then children). Borrowed, like ct_nn_param_at. */
CT_API size_t ct_nn_state_size(const ct_module *m);
CT_API ct_tensor *ct_nn_state_at(const ct_module *m, size_t i, const char **name);

/* module.state_dict(): a new dict value of detached tensors sharing storage
 * with the module (clone them to snapshot). */
CT_API ct_value *ct_nn_state_dict(const ct_module *m);
/* module.load_state_dict(sd, strict): copies values in (no grad). Checks every
 * name and shape first and changes nothing on a mismatch; the message names
 * the missing, unexpected or mis-shaped keys (in Python's words). Returns
 * CT_EFORMAT for missing/unexpected keys (strict) or non-tensor values,
 * CT_ESHAPE when only shapes are wrong. Without strict, missing and
 * unexpected keys are ignored. */
CT_API int ct_nn_load_state_dict(ct_module *m, const ct_value *sd, bool strict);

/* module.train(mode) / module.eval(): recursive. */
CT_API void ct_nn_train(ct_module *m, bool mode);
CT_API bool ct_nn_is_training(const ct_module *m);
/* module.to(device) and module.to(dtype) (floating tensors only), in place:
 * parameters keep their identity, as in PyTorch. */
CT_API int ct_nn_to_device(ct_module *m, ct_device device);
CT_API int ct_nn_to_dtype(ct_module *m, ct_dtype dtype);
/* module.zero_grad(set_to_none). */
CT_API int ct_nn_zero_grad(ct_module *m, bool set_to_none);

/* Frees a root module with its children, tensors and user data (user_free
 * runs first, while the children are alive). A module that belongs to a
 * parent is not freed (CT_ESTATE): free the root. Accepts NULL. */
CT_API void ct_nn_free(ct_module *m);

/* ---- utilities (torch.nn.utils) ---------------------------------------- */

/* clip_grad_norm_(params, max_norm, norm_type); total_norm (may be NULL)
 * receives the norm before clipping. norm_type may be INFINITY. */
CT_API int ct_clip_grad_norm(size_t n, ct_tensor *const *params, double max_norm,
                             double norm_type, double *total_norm);
CT_API int ct_clip_grad_value(size_t n, ct_tensor *const *params, double clip_value);

/* Gradients split across processes (a sharded optimizer's: each process
 * holds the gradients of its own parameters only, the others' are None).
 * While a reduce function is set on this thread, ct_clip_grad_norm
 * combines its partial norm with every process's before it clips (the
 * sum of |g|^p over all of them, or the largest |g| for INFINITY), and a
 * GradScaler combines its inf/NaN flag with every process's before it
 * decides to step (found_inf: the largest), so that every process clips by
 * and skips on the whole model's gradients. fn(t, max, ctx) must replace
 * the float32 tensor t (the partial sum, or the flag) in place by its sum
 * (max false) or its largest value (max true) over the processes, and
 * return a status; every process then calls it the same number of times.
 * ct_fit sets one around a sharded optimizer's step (optimizations.
 * shard_optimizer); NULL unsets it. */
typedef int (*ct_grad_reduce_fn)(ct_tensor *t, bool max, void *ctx);
CT_API void ct_set_grad_reduce(ct_grad_reduce_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#include "nn_sequence.h" /* recurrent layers, attention, transformers (module nn) */
#endif
