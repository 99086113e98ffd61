/*
 * ctrial/amp.h — mixed precision: autocast regions and gradient scaling
 * (torch.autocast and torch.amp.GradScaler).
 *
 * Autocast runs the ops of a region that benefit from lower precision
 * (matmul, linear, conv, ...) in bf16 or fp16 and keeps the others in
 * float32, exactly as torch.autocast does: a region only switches
 * libtorch's own per-thread autocast state, so every op of tensor.h and
 * every module's forward follows it. GradScaler multiplies the loss by
 * a scale factor so that small fp16 gradients do not underflow, divides the
 * gradients by it again before the optimizer steps, skips the step when a
 * gradient is inf/NaN, and adapts the scale: it is the PyTorch recipe, call
 * for call:
 *
 *     ct_grad_scaler *scaler = ct_grad_scaler_new(ct_cuda(0), NULL);
 *     size_t n;
 *     ct_tensor *const *params = ct_nn_parameters(net, &n);
 *     for (...) {
 *         ct_scope *s = ct_scope_begin();
 *         ct_optim_zero_grad(opt, true);
 *         ct_autocast_enter(CT_CUDA, CT_F16);          // with torch.autocast("cuda", torch.float16):
 *         ct_tensor *loss = ct_cross_entropy(ct_nn_forward(net, x), y);
 *         ct_autocast_exit();                          // backward runs outside the region
 *         if (ct_backward(ct_grad_scaler_scale(scaler, loss)) != 0 ||  // scaler.scale(loss).backward()
 *             ct_grad_scaler_unscale(scaler, opt) != 0 ||              // scaler.unscale_(opt)
 *             ct_clip_grad_norm(n, params, 1.0, 2.0, NULL) != 0 ||     // clip the true gradients
 *             ct_grad_scaler_step(scaler, opt, NULL) != 0 ||           // scaler.step(opt)
 *             ct_grad_scaler_update(scaler) != 0)                      // scaler.update()
 *             fprintf(stderr, "%s\n", ct_last_error());
 *         ct_scope_end(s);
 *     }
 *     ct_grad_scaler_free(scaler);
 *
 * On the CPU use ct_autocast_enter(CT_CPU, CT_BF16) and
 * ct_grad_scaler_new(ct_cpu(), ...); bf16 rarely needs a scaler, but the
 * scaler works on any device, as PyTorch's does.
 *
 * Threads. Autocast state is per thread (libtorch's): a region covers the
 * calling thread only, and must be exited on the thread that entered it. A
 * scaler has no internal lock: use it from one thread at a time.
 */
#ifndef CTRIAL_AMP_H
#define CTRIAL_AMP_H

#include <stdbool.h>
#include <stdint.h>

#include "optim.h"
#include "tensor.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- autocast ------------------------------------------------------------ */

/* Enters `with torch.autocast(device_type, dtype):` on the calling thread:
 * saves that device type's enabled flag and dtype, then enables autocast to
 * `dtype`. Regions nest (an inner one may use another dtype or device type);
 * end them in reverse order with ct_autocast_exit().
 *
 * Supported: CT_CPU with CT_BF16 or CT_F16, CT_CUDA with CT_F16 or CT_BF16.
 * Another device type is CT_EINVAL (Python's RuntimeError). Another dtype
 * is CT_EDTYPE, and CT_CUDA without a usable GPU CT_EDEVICE: Python only
 * warns there and runs the region without autocast; a C caller gets the
 * error instead. CT_BF16 on a GPU that cannot hold bfloat16 tensors is
 * CT_EDEVICE (Python's RuntimeError). On failure nothing changes.
 *
 * libtorch caches the low-precision copies of parameters (leaf tensors that
 * require grad) until the outermost region exits, keyed by parameter and
 * not by dtype: an inner region with another dtype that reuses a parameter
 * the outer one already cast fails with a dtype mismatch, in PyTorch too.
 * Returns a status. */
CT_API int ct_autocast_enter(ct_device_type device_type, ct_dtype dtype);

/* Leaves the innermost region entered on this thread: restores the enabled
 * flag and dtype it saved. Leaving the outermost region clears libtorch's
 * autocast cache of casted weights (torch.autocast.__exit__). CT_ESTATE when
 * no region is open on this thread. Returns a status. */
CT_API int ct_autocast_exit(void);

/* torch.is_autocast_enabled(device_type) on this thread (false for an
 * unknown device type). */
CT_API bool ct_autocast_is_enabled(ct_device_type device_type);

/* torch.get_autocast_dtype(device_type) on this thread: the dtype autocast
 * uses (also outside a region: CT_BF16 for CPU, CT_F16 for CUDA unless a
 * region changed it). CT_DTYPE_MAX_ENUM_ for an unknown device type. */
CT_API ct_dtype ct_autocast_dtype(ct_device_type device_type);

/* ---- gradient scaling (torch.amp.GradScaler) ---------------------------- */

/* The per-optimizer state of an iteration (PyTorch's READY / UNSCALED /
 * STEPPED stage and inf flags, keyed there by id(optimizer)) is kept in the
 * scaler, keyed by the ct_optim address, from the first unscale/step of an
 * optimizer until the next update. Don't free an optimizer and make another
 * one between those two calls. */

typedef struct ct_grad_scaler ct_grad_scaler;

typedef struct {
    double init_scale;       /* 65536.0 (2**16) */
    double growth_factor;    /* 2.0; must be > 1 */
    double backoff_factor;   /* 0.5; must be < 1 */
    int64_t growth_interval; /* 2000: finite steps in a row before growing */
    bool enabled;            /* true; false: every call is a pass-through */
} ct_grad_scaler_opts;

CT_API ct_grad_scaler_opts ct_grad_scaler_defaults(void);

/* GradScaler(device.type, ...): a new scaler; opts NULL means the defaults.
 * An enabled scaler checks growth_factor > 1 and backoff_factor < 1
 * (PyTorch's assertions, CT_EINVAL; NaN is refused as well); a disabled one
 * checks nothing, as in PyTorch. `device` must be CPU or an available CUDA
 * device (CT_EDEVICE otherwise, where PyTorch disables the scaler with a
 * warning); only its type matters after that: the scale tensor is made on
 * the device of the first loss given to ct_grad_scaler_scale, as PyTorch
 * makes it. NULL + error on failure. */
CT_API ct_grad_scaler *ct_grad_scaler_new(ct_device device, const ct_grad_scaler_opts *opts);
CT_API void ct_grad_scaler_free(ct_grad_scaler *s); /* accepts NULL */

/* scaler.scale(loss): a new tensor loss * scale (scope-owned like an op
 * result; the scale and growth tracker are made on loss's device on first
 * use). Disabled: a new handle to loss itself. NULL + error on failure; a
 * NULL loss gives NULL and keeps the pending error, as ops do in a chain. */
CT_API ct_tensor *ct_grad_scaler_scale(ct_grad_scaler *s, const ct_tensor *loss);

/* scaler.unscale_(opt): multiplies the gradients of opt's parameters by
 * 1/scale in place (per device and dtype, one foreach kernel each) and
 * records per device whether any was inf/NaN, without a host sync. Call it
 * at most once per optimizer between updates, after backward, when the true
 * gradients are needed (clipping); ct_grad_scaler_step does it otherwise.
 * CT_ESTATE: nothing was scaled yet, or unscale/step already ran for opt
 * since the last update (PyTorch's RuntimeError). CT_EDTYPE: a float16
 * gradient (PyTorch refuses them here: keep fp32 parameters under autocast).
 * Disabled: does nothing. Returns a status. */
CT_API int ct_grad_scaler_unscale(ct_grad_scaler *s, ct_optim *opt);

/* scaler.step(opt): unscales opt's gradients unless ct_grad_scaler_unscale
 * did, then runs ct_optim_step(opt) unless a gradient of opt was inf/NaN
 * (a host sync, as in PyTorch). Each optimizer's step depends only on its
 * own gradients. *stepped (may be NULL) says whether the parameters were
 * updated.
 *
 * An optimizer whose every group has fused=1 (SGD, Adam, AdamW: the ones
 * PyTorch marks _step_supports_amp_scaling) takes PyTorch's other road: the
 * gradients are only checked, and the fused kernel gets the scale and the
 * inf flag, divides by the scale itself and leaves the parameters alone on
 * inf/NaN (Adam's state is still created, its step count not advanced).
 * There *stepped costs a host sync; pass NULL to avoid it.
 *
 * CT_ESTATE: nothing was scaled yet, step already ran for opt since the last
 * update, or opt has no gradient at all ("No inf checks were recorded").
 * Disabled: just ct_optim_step(opt). Returns a status. */
CT_API int ct_grad_scaler_step(ct_grad_scaler *s, ct_optim *opt, bool *stepped);

/* scaler.update(): once per iteration, after every optimizer's step. If any
 * optimizer unscaled or stepped since the last update found inf/NaN, the
 * scale is multiplied by backoff_factor and the growth tracker reset; else
 * the tracker counts one more finite iteration and, reaching
 * growth_interval, the scale grows by growth_factor and the tracker resets
 * (libtorch's _amp_update_scale_, no host sync). Forgets every optimizer's
 * per-iteration state. CT_ESTATE: nothing was scaled yet, or no optimizer
 * was unscaled or stepped since the last update. Disabled: does nothing.
 * Returns a status. */
CT_API int ct_grad_scaler_update(ct_grad_scaler *s);

/* scaler.get_scale(): the current scale (a device sync on a GPU); init_scale
 * before the first ct_grad_scaler_scale; 1.0 when disabled; NaN when s is
 * NULL. */
CT_API double ct_grad_scaler_get_scale(const ct_grad_scaler *s);
CT_API bool ct_grad_scaler_is_enabled(const ct_grad_scaler *s);

/* scaler.state_dict(): a new dict with PyTorch's keys and Python types,
 *     {"scale": float, "growth_factor": float, "backoff_factor": float,
 *      "growth_interval": int, "_growth_tracker": int}
 * ("scale" is init_scale before first use; reading it syncs on a GPU), or an
 * empty dict when disabled. Call it after ct_grad_scaler_update(). NULL +
 * error only when out of memory or s is NULL. */
CT_API ct_value *ct_grad_scaler_state_dict(const ct_grad_scaler *s);

/* scaler.load_state_dict(state): takes the five keys (ints are accepted
 * where floats are expected, as Python's float() would; extra keys are
 * ignored). Checks every key first and changes nothing on failure:
 * CT_EFORMAT names the missing or mistyped key, or says the dict is empty
 * (saved from a disabled scaler, PyTorch's message). Disabled: does nothing.
 * Returns a status. */
CT_API int ct_grad_scaler_load_state_dict(ct_grad_scaler *s, const ct_value *state);

#ifdef __cplusplus
}
#endif
#endif
