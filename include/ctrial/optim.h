/*
 * ctrial/optim.h — optimizers with Python's update rules and Python's
 * state_dict layout.
 *
 * SGD (momentum, dampening, nesterov, weight decay), Adam, AdamW (amsgrad),
 * RMSprop and Adagrad compute exactly what torch.optim computes, and their
 * state_dict() has torch.optim's layout:
 *
 *     {"state": {0: {"step": tensor(3.), "exp_avg": ..., "exp_avg_sq": ...}, ...},
 *      "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999), ..., "params": [0, 1]}]}
 *
 * so a Python optimizer of the same kind loads it, and the reverse.
 *
 *     ct_adam_opts o = ct_adamw_defaults();
 *     o.lr = 3e-4;
 *     ct_optim *opt = ct_optim_adamw(net, &o);     // all of net's parameters
 *     for (...) {
 *         ct_optim_zero_grad(opt, true);
 *         ct_backward(loss);
 *         ct_optim_step(opt);
 *     }
 *     ct_optim_free(opt);
 *
 * Parameter groups with their own hyperparameters: create the optimizer with
 * a NULL module and add groups (Python's list-of-dicts form):
 *
 *     ct_optim *opt = ct_optim_sgd(NULL, &o);
 *     int g = ct_optim_add_param_group(opt, n_decay, decay_params);
 *     int h = ct_optim_add_param_group(opt, n_rest, rest_params);
 *     ct_optim_set_option(opt, h, "weight_decay", 0.0);
 *
 * On CUDA the updates use libtorch's foreach/fused kernels where they exist.
 * An optimizer refers to its parameters, it does not own them: free the
 * optimizer before the module. No internal lock.
 */
#ifndef CTRIAL_OPTIM_H
#define CTRIAL_OPTIM_H

#include "nn.h"
#include "tensor.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_optim ct_optim;

typedef struct {
    double lr;           /* 1e-3 */
    double momentum;     /* 0 */
    double dampening;    /* 0 */
    double weight_decay; /* 0 */
    bool nesterov;       /* false */
    bool maximize;       /* false */
} ct_sgd_opts;

typedef struct {
    double lr;           /* 1e-3 */
    double beta1, beta2; /* 0.9, 0.999 */
    double eps;          /* 1e-8 */
    double weight_decay; /* Adam 0, AdamW 1e-2 */
    bool amsgrad;        /* false */
    bool maximize;       /* false */
} ct_adam_opts;

typedef struct {
    double lr;           /* 1e-2 */
    double alpha;        /* 0.99 */
    double eps;          /* 1e-8 */
    double weight_decay; /* 0 */
    double momentum;     /* 0 */
    bool centered;       /* false */
    bool maximize;       /* false */
} ct_rmsprop_opts;

typedef struct {
    double lr;                        /* 1e-2 */
    double lr_decay;                  /* 0 */
    double weight_decay;              /* 0 */
    double initial_accumulator_value; /* 0 */
    double eps;                       /* 1e-10 */
    bool maximize;                    /* false */
} ct_adagrad_opts;

CT_API ct_sgd_opts ct_sgd_defaults(void);
CT_API ct_adam_opts ct_adam_defaults(void);
CT_API ct_adam_opts ct_adamw_defaults(void);
CT_API ct_rmsprop_opts ct_rmsprop_defaults(void);
CT_API ct_adagrad_opts ct_adagrad_defaults(void);

/* Each returns a new optimizer over all parameters of `params` (one group),
 * or over none when params is NULL (add groups then). opts may be NULL for
 * the defaults. NULL + error on bad hyperparameters (the message names the
 * value, as Python's ValueError does). */
CT_API ct_optim *ct_optim_sgd(const ct_module *params, const ct_sgd_opts *opts);
CT_API ct_optim *ct_optim_adam(const ct_module *params, const ct_adam_opts *opts);
CT_API ct_optim *ct_optim_adamw(const ct_module *params, const ct_adam_opts *opts);
CT_API ct_optim *ct_optim_rmsprop(const ct_module *params, const ct_rmsprop_opts *opts);
CT_API ct_optim *ct_optim_adagrad(const ct_module *params, const ct_adagrad_opts *opts);

/* add_param_group({"params": params}) with the optimizer's defaults; returns
 * the new group's index or a negative code (a parameter already in another
 * group or a non-leaf tensor is refused, as in Python; so is one listed twice,
 * which Python only warns about). The tensors must outlive the optimizer.
 * Adagrad makes the new parameters' state here (Python: in its constructor). */
CT_API int ct_optim_add_param_group(ct_optim *o, size_t n, ct_tensor *const *params);

/* optimizer.step(): skips parameters without a gradient. Where Python would
 * fail on a state that lacks a buffer the options now need (amsgrad or
 * RMSprop's momentum/centered switched on after the first step, fused SGD
 * with only some momentum buffers), the buffer starts as Python starts it on
 * a first step. */
CT_API int ct_optim_step(ct_optim *o);
/* optimizer.zero_grad(set_to_none). */
CT_API int ct_optim_zero_grad(ct_optim *o, bool set_to_none);

CT_API const char *ct_optim_type(const ct_optim *o); /* "SGD", "Adam", "AdamW", ... */
CT_API size_t ct_optim_num_groups(const ct_optim *o);
CT_API double ct_optim_get_lr(const ct_optim *o, size_t group);
CT_API int ct_optim_set_lr(ct_optim *o, size_t group, double lr);
/* Any numeric or boolean hyperparameter of a group by Python's key ("lr",
 * "momentum", "weight_decay", "nesterov", "eps", ...; "beta1"/"beta2" for the
 * two halves of "betas"); booleans read as 0/1. CT_EINVAL names an unknown
 * key. Values are checked as Python's constructor checks them ("Invalid
 * learning rate: -1.0").
 *
 * "foreach" and "fused" read and take -1 (None, Python's default: foreach
 * kernels when every parameter of the group is on CUDA), 0 or 1, and pick the
 * implementation as in Python: fused=1 runs libtorch's fused kernel (SGD,
 * Adam, AdamW on CPU/CUDA; Adagrad on CPU). "capturable" and
 * "differentiable" can only be 0 (CT_ENOTSUP). "initial_lr" (what LR
 * schedulers add to each group) may be set; it and any other key a loaded
 * state dict brought along are kept and written back after Python's keys.
 *
 * Python writes a hyperparameter whose default is the int 0 (SGD's momentum,
 * weight_decay, ...) as an int; so does state_dict() while it keeps that
 * default or was loaded as an int. A value set here is a float, as assigning
 * one in Python is. */
CT_API int ct_optim_get_option(const ct_optim *o, size_t group, const char *key, double *out);
CT_API int ct_optim_set_option(ct_optim *o, size_t group, const char *key, double value);

/* Every parameter across groups, in state_dict index order (borrowed). */
CT_API size_t ct_optim_num_params(const ct_optim *o);
CT_API ct_tensor *ct_optim_param(const ct_optim *o, size_t i);

/* optimizer.state_dict(): a new value with Python's layout; tensors share
 * storage with the optimizer's state (clone to snapshot). */
CT_API ct_value *ct_optim_state_dict(const ct_optim *o);
/* optimizer.load_state_dict(sd): checks group and parameter counts and state
 * shapes first (changes nothing on a mismatch; the message names it), then
 * copies hyperparameters and state (cast to each parameter's device/dtype as
 * Python does). The optimizer keeps copies: sd may be freed or changed after.
 * "step" becomes a float32 scalar on the CPU (on the parameter's device for
 * fused groups). Also refused: state keys the optimizer type does not use,
 * state for no parameter, capturable/differentiable=True. */
CT_API int ct_optim_load_state_dict(ct_optim *o, const ct_value *sd);

CT_API void ct_optim_free(ct_optim *o); /* accepts NULL */

#ifdef __cplusplus
}
#endif
#endif
