/*
 * ctrial/optim.h — optimizers with Python's update rules and Python's
 * state_dict layout.
 *
 * SGD (momentum, dampening, nesterov, weight decay), Adam, AdamW (amsgrad),
 * RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam and LBFGS compute exactly
 * what torch.optim computes, and their state_dict() has torch.optim's layout:
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
 * LBFGS re-evaluates the loss several times per step: give it a closure
 * (ct_optim_step_closure below), as Python's optimizer.step(closure).
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

typedef struct {
    double lr;           /* 1.0 */
    double rho;          /* 0.9 */
    double eps;          /* 1e-6 */
    double weight_decay; /* 0 */
    bool maximize;       /* false */
} ct_adadelta_opts;

typedef struct {
    double lr;           /* 2e-3 */
    double beta1, beta2; /* 0.9, 0.999 */
    double eps;          /* 1e-8 */
    double weight_decay; /* 0 */
    bool maximize;       /* false */
} ct_adamax_opts;

typedef struct {
    double lr;                   /* 2e-3 */
    double beta1, beta2;         /* 0.9, 0.999 */
    double eps;                  /* 1e-8 */
    double weight_decay;         /* 0 */
    double momentum_decay;       /* 4e-3 */
    bool decoupled_weight_decay; /* false */
    bool maximize;               /* false */
} ct_nadam_opts;

typedef struct {
    double lr;                   /* 1e-3 */
    double beta1, beta2;         /* 0.9, 0.999 */
    double eps;                  /* 1e-8 */
    double weight_decay;         /* 0 */
    bool decoupled_weight_decay; /* false */
    bool maximize;               /* false */
} ct_radam_opts;

typedef struct {
    double lr;                  /* 1 */
    int64_t max_iter;           /* 20: iterations per step */
    int64_t max_eval;           /* 0: Python's None, max_iter * 5 / 4 */
    double tolerance_grad;      /* 1e-7 */
    double tolerance_change;    /* 1e-9 */
    int64_t history_size;       /* 100 */
    const char *line_search_fn; /* NULL (None) or "strong_wolfe" */
} ct_lbfgs_opts;

CT_API ct_sgd_opts ct_sgd_defaults(void);
CT_API ct_adam_opts ct_adam_defaults(void);
CT_API ct_adam_opts ct_adamw_defaults(void);
CT_API ct_rmsprop_opts ct_rmsprop_defaults(void);
CT_API ct_adagrad_opts ct_adagrad_defaults(void);
CT_API ct_adadelta_opts ct_adadelta_defaults(void);
CT_API ct_adamax_opts ct_adamax_defaults(void);
CT_API ct_nadam_opts ct_nadam_defaults(void);
CT_API ct_radam_opts ct_radam_defaults(void);
CT_API ct_lbfgs_opts ct_lbfgs_defaults(void);

/* Each returns a new optimizer over all parameters of `params` (one group),
 * or over none when params is NULL (add groups then). opts may be NULL for
 * the defaults. NULL + error on bad hyperparameters (the message names the
 * value, as Python's ValueError does). */
CT_API ct_optim *ct_optim_sgd(const ct_module *params, const ct_sgd_opts *opts);
CT_API ct_optim *ct_optim_adam(const ct_module *params, const ct_adam_opts *opts);
CT_API ct_optim *ct_optim_adamw(const ct_module *params, const ct_adam_opts *opts);
CT_API ct_optim *ct_optim_rmsprop(const ct_module *params, const ct_rmsprop_opts *opts);
CT_API ct_optim *ct_optim_adagrad(const ct_module *params, const ct_adagrad_opts *opts);
CT_API ct_optim *ct_optim_adadelta(const ct_module *params, const ct_adadelta_opts *opts);
CT_API ct_optim *ct_optim_adamax(const ct_module *params, const ct_adamax_opts *opts);
CT_API ct_optim *ct_optim_nadam(const ct_module *params, const ct_nadam_opts *opts);
CT_API ct_optim *ct_optim_radam(const ct_module *params, const ct_radam_opts *opts);
/* LBFGS has one parameter group (Python refuses more): add it once when
 * params is NULL. Python checks only lr; ctrial also refuses max_iter,
 * max_eval (when not 0) and history_size below 1, and a line_search_fn other
 * than NULL or "strong_wolfe" (which Python refuses at its first step). */
CT_API ct_optim *ct_optim_lbfgs(const ct_module *params, const ct_lbfgs_opts *opts);

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
 * a first step. LBFGS needs a closure: CT_EINVAL (use ct_optim_step_closure). */
CT_API int ct_optim_step(ct_optim *o);

/* A closure re-evaluates the model: it zeroes the gradients, computes the
 * loss, calls ct_backward on it and returns it (a one-element tensor), or
 * NULL with an error set to stop the step.
 *
 *     static ct_tensor *closure(void *user) {
 *         Batch *b = user;
 *         ct_optim_zero_grad(b->opt, true);
 *         ct_tensor *loss = ct_mse_loss(ct_nn_forward(b->net, b->x), b->y, CT_REDUCE_MEAN);
 *         return loss && ct_backward(loss) == 0 ? loss : NULL;
 *     }
 *
 * Each call runs with grad enabled inside a scope of its own: the tensors
 * the closure makes (the loss too) are freed once its value has been read,
 * unless it ct_keep()s them. The returned tensor is read, never freed by the
 * optimizer when it was made outside that scope. */
typedef ct_tensor *(*ct_closure_fn)(void *user);

/* optimizer.step(closure): calls the closure (any optimizer: once, then the
 * step, as Python; LBFGS: as often as its iterations and line search need)
 * and stores float(loss) of the first call, Python's return value, in *loss
 * (may be NULL). A closure that returns NULL, or a loss that is not one
 * element, fails the step with the closure's error: parameters may have
 * moved already (an LBFGS step changes them as it goes, as in Python). */
CT_API int ct_optim_step_closure(ct_optim *o, ct_closure_fn closure, void *user, double *loss);
/* optimizer.zero_grad(set_to_none). */
CT_API int ct_optim_zero_grad(ct_optim *o, bool set_to_none);

CT_API const char *ct_optim_type(const ct_optim *o); /* "SGD", "Adam", "AdamW", ..., "LBFGS" */
CT_API size_t ct_optim_num_groups(const ct_optim *o);
CT_API double ct_optim_get_lr(const ct_optim *o, size_t group);
CT_API int ct_optim_set_lr(ct_optim *o, size_t group, double lr);
/* Any numeric or boolean hyperparameter of a group by Python's key ("lr",
 * "momentum", "weight_decay", "nesterov", "eps", ...; "beta1"/"beta2" for the
 * two halves of "betas"); booleans read as 0/1. CT_EINVAL names an unknown
 * key. Values are checked as Python's constructor checks them ("Invalid
 * learning rate: -1.0"). LBFGS's "line_search_fn" reads and takes 0 (None)
 * or 1 ("strong_wolfe"); its "max_iter", "max_eval" and "history_size" take
 * whole numbers >= 1.
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

/* Restricts optimizer.step() to some parameters: a parameter whose
 * stepped[i] (state_dict index order, ct_optim_num_params entries) is false
 * is skipped as one without a gradient is: it keeps its value and gets no
 * state. Everything else (zero_grad, a GradScaler's unscale and inf checks,
 * state dicts) still covers every parameter. NULL steps every parameter
 * again; parameters added later are stepped. The array is copied. What a
 * sharded optimizer does on each rank (ct_fit's shard_optimizer: each rank
 * steps its share of the parameters and keeps only their state). LBFGS:
 * CT_ENOTSUP (one state spans all its parameters). */
CT_API int ct_optim_set_stepped(ct_optim *o, const bool *stepped);

/* optimizer.state_dict(): a new value with Python's layout; tensors share
 * storage with the optimizer's state (clone to snapshot). */
CT_API ct_value *ct_optim_state_dict(const ct_optim *o);
/* optimizer.load_state_dict(sd): checks group and parameter counts and state
 * shapes first (changes nothing on a mismatch; the message names it), then
 * copies hyperparameters and state (cast to each parameter's device/dtype as
 * Python does). The optimizer keeps copies: sd may be freed or changed after.
 * "step" becomes a float32 scalar on the CPU (on the parameter's device for
 * fused groups). Also refused: state keys the optimizer type does not use,
 * state for no parameter, capturable/differentiable=True, and an entry that
 * lacks a key its type keeps for every parameter it has stepped (Python
 * would fail at the next step). LBFGS's state (state[0]: func_evals, n_iter,
 * d, t, old_dirs, old_stps, ro, H_diag, prev_flat_grad, prev_loss, al) is
 * checked the same way: types, lengths, and sizes against the parameters'
 * total numel. */
CT_API int ct_optim_load_state_dict(ct_optim *o, const ct_value *sd);

CT_API void ct_optim_free(ct_optim *o); /* accepts NULL */

#ifdef __cplusplus
}
#endif
#endif
