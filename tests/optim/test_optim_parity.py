"""Optimizer parity: ctrial's optimizers against torch.optim (torch 2.11).

For every run in RUNS, the C program (optim_parity) and torch train the same
parameters with the same gradients for STEPS steps; then
  * the initial parameters must be identical (both draw from libtorch's RNG),
  * final parameters and every state tensor must agree within 1e-6 relative,
  * the state_dict structure must be exactly Python's: keys and their order,
    int vs float vs bool vs None vs tuple, hyperparameter values.
Resumed runs check Python -> C: torch trains for START steps, its state_dict
goes to C through JSON, C loads it and continues, and must end where torch
ends. Every final C state_dict is also loaded back into torch (C -> Python)
and both continue a few steps in step.

Runs with model=True train a small MLP on fresh data each step through
step(closure) (ct_optim_step_closure in C; LBFGS needs it) and compare the
loss every step returned as well. The optimizers added after the first five
(Adadelta, Adamax, NAdam, RAdam, LBFGS) run LONG steps.

    test_optim_parity.py OPTIM_PARITY_EXE [TYPE,TYPE,...]

With a list of optimizer types, only their runs (tests.cmake splits the runs
into a few tests that ctest can run side by side).
"""

import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctjson import Deviation, decode, encode, plain, same  # noqa: E402

torch.set_num_threads(1)

SHAPES = [[4, 3], [5], [2, 3]]
MODEL_SHAPES = [[4, 3], [4], [2, 4], [2]]  # W1, b1, W2, b2 of the model runs
STEPS = 20
LONG = 100  # steps of the runs of Adadelta, Adamax, NAdam, RAdam and LBFGS
START = 10  # where resumed runs pick up
EXTRA = 5   # steps after loading C's state back into torch
# Parameter 0 has no gradient at step 0 (its state appears after the others'),
# parameter 2 none every third step: both exercise "skip params without grad".
SKIP = [[0, 0]] + [[2, t] for t in range(LONG + EXTRA) if t % 3 == 1]
# Python's fused SGD fails when some momentum buffers exist and others not.
SKIP_LATE = SKIP[1:]

ALL = [[0, 1, 2]]
RUNS = [
    # SGD
    dict(name="sgd_plain", type="SGD", opts=dict(lr=0.1)),
    dict(name="sgd_momentum", type="SGD", opts=dict(lr=0.1, momentum=0.9), resume=True),
    dict(name="sgd_nesterov", type="SGD", opts=dict(lr=0.05, momentum=0.9, nesterov=True), resume=True),
    dict(name="sgd_dampening", type="SGD", opts=dict(lr=0.1, momentum=0.9, dampening=0.3)),
    dict(name="sgd_weight_decay", type="SGD", opts=dict(lr=0.1, momentum=0.5, weight_decay=0.01)),
    dict(name="sgd_maximize", type="SGD", opts=dict(lr=0.1, momentum=0.9, maximize=True)),
    dict(name="sgd_foreach", type="SGD", opts=dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
         options=[[0, "foreach", True]]),
    dict(name="sgd_foreach_maximize", type="SGD", opts=dict(lr=0.05, momentum=0.9, dampening=0.2, maximize=True, weight_decay=0.01),
         options=[[0, "foreach", True]]),
    dict(name="sgd_fused", type="SGD", opts=dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
         options=[[0, "fused", True]], skip=SKIP_LATE, resume=True),
    dict(name="sgd_fused_plain", type="SGD", opts=dict(lr=0.1, maximize=True), options=[[0, "fused", True]]),
    dict(name="sgd_two_groups", type="SGD", opts=dict(lr=0.1, momentum=0.9), groups=[[0], [1, 2]],
         options=[[1, "lr", 0.02], [1, "weight_decay", 0.1]], lr_changes=[[5, 1, 0.2]], resume=True),
    dict(name="sgd_no_steps", type="SGD", opts=dict(lr=0.1, momentum=0.9), steps=0),
    # Adam / AdamW
    dict(name="adam", type="Adam", opts=dict(lr=0.01), resume=True),
    dict(name="adam_amsgrad", type="Adam", opts=dict(lr=0.01, amsgrad=True, betas=[0.8, 0.99]), resume=True),
    dict(name="adam_weight_decay", type="Adam", opts=dict(lr=0.01, weight_decay=0.1, maximize=True)),
    dict(name="adam_beta_option", type="Adam", opts=dict(lr=0.01), options=[[0, "beta2", 0.95], [0, "eps", 1e-6]]),
    dict(name="adam_foreach", type="Adam", opts=dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True),
         options=[[0, "foreach", True]], resume=True),
    dict(name="adam_fused", type="Adam", opts=dict(lr=0.01, amsgrad=True, weight_decay=0.1),
         options=[[0, "fused", True]], resume=True),
    dict(name="adam_two_groups", type="Adam", opts=dict(lr=0.01), groups=[[0, 1], [2]],
         # initial_lr is what an LR scheduler adds to each group
         options=[[1, "lr", 0.05], [0, "initial_lr", 0.01], [1, "initial_lr", 0.05]],
         lr_changes=[[10, 0, 0.005], [15, 1, 0.001]], resume=True),
    dict(name="adamw", type="AdamW", opts=dict(lr=0.01), resume=True),
    dict(name="adamw_amsgrad", type="AdamW", opts=dict(lr=0.01, amsgrad=True, weight_decay=0.05)),
    dict(name="adamw_foreach", type="AdamW", opts=dict(lr=0.01, amsgrad=True), options=[[0, "foreach", True]]),
    dict(name="adamw_fused", type="AdamW", opts=dict(lr=0.01, amsgrad=True, maximize=True),
         options=[[0, "fused", True]], resume=True),
    dict(name="adam_no_steps", type="Adam", opts=dict(lr=0.01), steps=0),
    # RMSprop
    dict(name="rmsprop", type="RMSprop", opts=dict(lr=0.01)),
    dict(name="rmsprop_centered", type="RMSprop", opts=dict(lr=0.01, centered=True)),
    dict(name="rmsprop_momentum", type="RMSprop", opts=dict(lr=0.01, momentum=0.9), resume=True),
    dict(name="rmsprop_all", type="RMSprop",
         opts=dict(lr=0.01, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.01, maximize=True), resume=True),
    dict(name="rmsprop_foreach", type="RMSprop",
         opts=dict(lr=0.01, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.01, maximize=True),
         options=[[0, "foreach", True]]),
    dict(name="rmsprop_foreach_plain", type="RMSprop", opts=dict(lr=0.01, weight_decay=0.01),
         options=[[0, "foreach", True]]),
    # Adagrad
    dict(name="adagrad", type="Adagrad", opts=dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1), resume=True),
    dict(name="adagrad_wd_max", type="Adagrad", opts=dict(lr=0.1, weight_decay=0.01, maximize=True)),
    dict(name="adagrad_foreach", type="Adagrad", opts=dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, weight_decay=0.01),
         options=[[0, "foreach", True]]),
    dict(name="adagrad_foreach_max", type="Adagrad", opts=dict(lr=0.1, lr_decay=0.01, maximize=True),
         options=[[0, "foreach", True]]),
    dict(name="adagrad_foreach_plain", type="Adagrad", opts=dict(lr=0.1, lr_decay=0.01), options=[[0, "foreach", True]]),
    dict(name="adagrad_fused", type="Adagrad", opts=dict(lr=0.1, lr_decay=0.01, weight_decay=0.01),
         options=[[0, "fused", True]], resume=True),
    dict(name="adagrad_no_steps", type="Adagrad", opts=dict(lr=0.1, initial_accumulator_value=0.5), steps=0),
    # Adadelta
    dict(name="adadelta", type="Adadelta", opts=dict(), steps=LONG, resume=True),
    dict(name="adadelta_wd_max", type="Adadelta", opts=dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.01, maximize=True),
         steps=LONG),
    dict(name="adadelta_foreach", type="Adadelta", opts=dict(lr=0.5, rho=0.8, weight_decay=0.01, maximize=True),
         options=[[0, "foreach", True]], steps=LONG),
    dict(name="adadelta_foreach_plain", type="Adadelta", opts=dict(weight_decay=0.01), options=[[0, "foreach", True]],
         steps=LONG),
    dict(name="adadelta_two_groups", type="Adadelta", opts=dict(lr=0.8), groups=[[0], [1, 2]],
         options=[[1, "lr", 0.3], [1, "rho", 0.95]], lr_changes=[[50, 0, 0.4]], steps=LONG, resume=True),
    dict(name="adadelta_model", type="Adadelta", opts=dict(weight_decay=0.001), model=True, steps=LONG),
    # Adamax
    dict(name="adamax", type="Adamax", opts=dict(), steps=LONG, resume=True),
    dict(name="adamax_wd_max", type="Adamax", opts=dict(lr=0.01, betas=[0.8, 0.99], eps=1e-6, weight_decay=0.05,
                                                        maximize=True), steps=LONG),
    dict(name="adamax_foreach", type="Adamax", opts=dict(lr=0.01, weight_decay=0.05), options=[[0, "foreach", True]],
         steps=LONG),
    dict(name="adamax_foreach_plain", type="Adamax", opts=dict(lr=0.01), options=[[0, "foreach", True]], steps=LONG),
    dict(name="adamax_foreach_max", type="Adamax", opts=dict(lr=0.01, maximize=True), options=[[0, "foreach", True]],
         steps=LONG),
    dict(name="adamax_two_groups", type="Adamax", opts=dict(lr=0.01), groups=[[0, 1], [2]],
         options=[[1, "lr", 0.05], [1, "beta1", 0.5]], lr_changes=[[40, 1, 0.005]], steps=LONG, resume=True),
    dict(name="adamax_model", type="Adamax", opts=dict(lr=0.01), model=True, steps=LONG),
    # NAdam
    dict(name="nadam", type="NAdam", opts=dict(), steps=LONG, resume=True),
    dict(name="nadam_wd_max", type="NAdam", opts=dict(lr=0.01, betas=[0.8, 0.99], weight_decay=0.05,
                                                      momentum_decay=0.01, maximize=True), steps=LONG),
    dict(name="nadam_decoupled", type="NAdam", opts=dict(lr=0.01, weight_decay=0.05, decoupled_weight_decay=True),
         steps=LONG, resume=True),
    dict(name="nadam_foreach", type="NAdam", opts=dict(lr=0.01, weight_decay=0.05, maximize=True),
         options=[[0, "foreach", True]], steps=LONG),
    dict(name="nadam_foreach_decoupled", type="NAdam", opts=dict(lr=0.01, weight_decay=0.05,
                                                                 decoupled_weight_decay=True),
         options=[[0, "foreach", True]], steps=LONG),
    dict(name="nadam_two_groups", type="NAdam", opts=dict(lr=0.01), groups=[[0], [1, 2]],
         options=[[1, "lr", 0.003], [1, "momentum_decay", 0.01]], lr_changes=[[30, 0, 0.02]], steps=LONG,
         resume=True),
    dict(name="nadam_model", type="NAdam", opts=dict(lr=0.01), model=True, steps=LONG),
    # RAdam: rho_t <= 5 for its first steps (unrectified), > 5 after
    dict(name="radam", type="RAdam", opts=dict(), steps=LONG, resume=True),
    dict(name="radam_wd_max", type="RAdam", opts=dict(lr=0.01, betas=[0.8, 0.99], weight_decay=0.05, maximize=True),
         steps=LONG),
    dict(name="radam_decoupled", type="RAdam", opts=dict(lr=0.01, weight_decay=0.05, decoupled_weight_decay=True),
         steps=LONG, resume=True),
    dict(name="radam_foreach", type="RAdam", opts=dict(lr=0.01, weight_decay=0.05, maximize=True),
         options=[[0, "foreach", True]], steps=LONG),
    dict(name="radam_foreach_decoupled", type="RAdam", opts=dict(lr=0.01, weight_decay=0.05,
                                                                 decoupled_weight_decay=True),
         options=[[0, "foreach", True]], steps=LONG),
    dict(name="radam_two_groups", type="RAdam", opts=dict(lr=0.01), groups=[[0, 1], [2]],
         options=[[1, "lr", 0.05], [1, "eps", 1e-6]], lr_changes=[[60, 1, 0.01]], steps=LONG, resume=True),
    dict(name="radam_model", type="RAdam", opts=dict(lr=0.01), model=True, steps=LONG),
    # LBFGS (model runs only: it needs a closure). The defaults take fixed
    # steps of lr=1 (t the int 1); strong_wolfe's line search leaves t an
    # int, a float or a tensor; a short history exercises its shifting.
    dict(name="lbfgs", type="LBFGS", opts=dict(), model=True, steps=LONG, resume=True),
    dict(name="lbfgs_strong_wolfe", type="LBFGS", opts=dict(line_search_fn="strong_wolfe"), model=True, steps=LONG,
         resume=True),
    dict(name="lbfgs_short_history", type="LBFGS", opts=dict(lr=0.5, max_iter=5, history_size=3), model=True,
         steps=LONG, resume=True),
    dict(name="lbfgs_wolfe_short", type="LBFGS",
         opts=dict(line_search_fn="strong_wolfe", history_size=4, max_iter=10, max_eval=12, tolerance_change=1e-6),
         model=True, steps=LONG, resume=True),
    dict(name="lbfgs_one_iter", type="LBFGS", opts=dict(lr=0.1, max_iter=1), model=True, steps=LONG),
    dict(name="lbfgs_no_steps", type="LBFGS", opts=dict(), model=True, steps=0),
]


def complete(run, seed):
    run = dict(run)
    if run.get("model"):
        run["shapes"] = MODEL_SHAPES
    run.setdefault("groups", ALL)
    run.setdefault("options", [])
    run.setdefault("lr_changes", [])
    run.setdefault("skip", SKIP)
    run["seed"] = seed
    return run


# ---- torch's side -----------------------------------------------------------

def make_torch(run, params):
    opts = dict(run["opts"])
    if "betas" in opts:
        opts["betas"] = tuple(opts["betas"])
    groups = [{"params": [params[i] for i in g]} for g in run["groups"]]
    opt = getattr(torch.optim, run["type"])(groups, **opts)
    for g, key, value in run["options"]:
        group = opt.param_groups[g]
        if key in ("beta1", "beta2"):
            betas = list(group["betas"])
            betas[key == "beta2"] = value
            group["betas"] = tuple(betas)
        else:
            group[key] = value
    return opt


def torch_step(run, opt, params, t):
    """One step; returns the loss of a model run's step(closure)."""
    for step, g, lr in run["lr_changes"]:
        if step == t:
            opt.param_groups[g]["lr"] = lr
    torch.manual_seed(run["seed"] * 1000 + t)
    if run.get("model"):
        x, y = torch.randn(16, 3), torch.randn(16, 2)

        def closure():
            opt.zero_grad()
            loss = F.mse_loss(F.linear(torch.tanh(F.linear(x, params[0], params[1])), params[2], params[3]), y)
            loss.backward()
            return loss

        return opt.step(closure).detach().item()
    opt.zero_grad(set_to_none=True)
    for k, p in enumerate(params):
        if [k, t] not in run["skip"]:
            p.grad = torch.randn(p.shape) + 0.1 * p.detach()
    opt.step()
    return None


def torch_run(run, steps):
    torch.manual_seed(run["seed"])
    params = [torch.randn(s).requires_grad_() for s in run.get("shapes", SHAPES)]
    initial = [p.detach().clone() for p in params]
    opt = make_torch(run, params)
    losses = [torch_step(run, opt, params, t) for t in range(steps)]
    return initial, params, opt, losses


# ---- the comparison ---------------------------------------------------------

def main():
    exe = sys.argv[1]
    types = sys.argv[2].split(",") if len(sys.argv) > 2 else None
    unknown = set(types or []) - {r["type"] for r in RUNS}
    assert not unknown, f"no runs of {sorted(unknown)}"
    dev = Deviation()
    checks = 0
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for i, r in enumerate(RUNS):
            if types and r["type"] not in types:
                continue
            run = complete(r, seed=100 + i)
            runs.append(run)
            if r.get("resume"):  # Python trains to START; C continues from there
                _, params, opt, _ = torch_run(run, START)
                path = os.path.join(tmp, run["name"] + ".json")
                with open(path, "w") as f:
                    json.dump({"params": [encode(p) for p in params], "state_dict": encode(opt.state_dict())}, f)
                resumed = dict(run, name=run["name"] + "_resumed", load=path, start=START)
                runs.append(resumed)
        cfg = os.path.join(tmp, "config.json")
        out = os.path.join(tmp, "out.json")
        with open(cfg, "w") as f:
            json.dump({"shapes": SHAPES, "steps": STEPS, "runs": runs}, f)
        subprocess.run([exe, cfg, out], check=True)
        with open(out) as f:
            results = json.load(f)

    for run in runs:
        name = run["name"]
        steps = run.get("steps", STEPS)
        c = results[name]
        initial, params, opt, losses = torch_run(run, steps)
        # Same generator, same numbers: exact, not within a tolerance.
        same(c["initial_params"], encode(initial), f"{name}.initial_params", Deviation(), rtol=0, atol=0)
        same(c["params"], encode([p.detach() for p in params]), f"{name}.params", dev)
        same(c["state_dict"], encode(opt.state_dict()), f"{name}.state_dict", dev)
        checks += 3
        if run.get("model"):  # what each step(closure) returned, from where C started
            ran = losses[run.get("start", 0):]
            same(encode(torch.tensor(plain(c["losses"]), dtype=torch.float64)), encode(torch.tensor(ran, dtype=torch.float64)),
                 f"{name}.losses", dev)
            checks += 1

        # C -> Python: torch loads C's state over C's parameters and keeps
        # training in step with the torch optimizer that never left Python.
        c_params = [decode(p).requires_grad_() for p in c["params"]]
        c_opt = make_torch(run, c_params)
        c_opt.load_state_dict(decode(c["state_dict"]))
        same(encode(c_opt.state_dict()), encode(opt.state_dict()), f"{name}.reloaded_state_dict", dev)
        for t in range(steps, steps + EXTRA):
            torch_step(run, c_opt, c_params, t)
            torch_step(run, opt, params, t)
        same(encode([p.detach() for p in c_params]), encode([p.detach() for p in params]),
             f"{name}.continued_in_torch", dev)
        checks += 2

    print(f"optim parity: {len(runs)} runs, {checks} comparisons; max deviation from torch: "
          f"abs {dev.abs:.3g} rel {dev.rel:.3g}" + (f" (at {dev.where})" if dev.abs else ""))


if __name__ == "__main__":
    main()
