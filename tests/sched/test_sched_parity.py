"""LR scheduler parity: ctrial's schedulers against torch.optim.lr_scheduler
(torch 2.11).

For every run in RUNS, torch and the C program (sched_parity) build the same
optimizer and scheduler and step it STEPS times; then
  * every group's lr (and momentum / beta1, which OneCycleLR cycles) after
    construction and after every step must agree (the maximum deviation is
    reported; it is expected to be 0: the same chainable formulas in the same
    order),
  * the scheduler's state_dict must be exactly Python's: keys and their
    order, int vs float vs bool vs None, values (at step RESUME and at the
    end), and so must the optimizer's param_groups that schedulers extend
    (initial_lr, OneCycleLR's max_lr, min_lr, ...),
  * resuming at RESUME must continue exactly as the uninterrupted run, for
    C -> C, Python -> C (C loads torch's state dicts) and C -> Python
    (torch loads C's).

    test_sched_parity.py SCHED_PARITY_EXE
"""

import copy
import json
import math
import os
import subprocess
import sys
import tempfile
import warnings

import torch
from torch.optim import lr_scheduler as L

sys.path.insert(0, os.path.join(os.environ.get("CTRIAL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")), "tests", "optim"))
from ctjson import Deviation, decode, encode, same  # noqa: E402

warnings.filterwarnings("ignore")  # "lr_scheduler.step() before optimizer.step()"

STEPS = 100
RESUME = 37
TOL = 1e-9

SGD2 = dict(type="SGD", lrs=[0.1, 0.05], momentum=0.9)
SGD1 = dict(type="SGD", lrs=[0.2], momentum=0.9)
ADAM2 = dict(type="Adam", lrs=[0.01, 0.003])


def plateau_metrics(kind):
    """A loss that improves in bursts with flat stretches (min), or an
    accuracy that does (max); small wiggles inside the thresholds."""
    out, v = [], 1.0
    for i in range(STEPS):
        if (i // 9) % 3 == 0:
            v *= 0.8
        wiggle = 1e-5 * ((i * 7) % 3)
        out.append(v + wiggle if kind == "min" else 1.0 - v - wiggle)
    return out


RUNS = [
    dict(name="step", optim=SGD2, sched=dict(type="StepLR", step_size=7, gamma=0.5)),
    dict(name="step_1group", optim=SGD1, sched=dict(type="StepLR", step_size=3, gamma=0.9)),
    dict(name="multistep_repeated", optim=SGD2, sched=dict(type="MultiStepLR", milestones=[10, 30, 30, 60], gamma=0.3)),
    dict(name="exponential", optim=SGD2, sched=dict(type="ExponentialLR", gamma=0.95)),
    dict(name="cosine_past_tmax", optim=SGD2, sched=dict(type="CosineAnnealingLR", T_max=30, eta_min=0.001)),
    dict(name="cosine_eta0", optim=SGD1, sched=dict(type="CosineAnnealingLR", T_max=40)),
    dict(name="warm_restarts_mult1", optim=SGD2, sched=dict(type="CosineAnnealingWarmRestarts", T_0=10, T_mult=1, eta_min=1e-4)),
    dict(name="warm_restarts_mult2", optim=SGD2, sched=dict(type="CosineAnnealingWarmRestarts", T_0=5, T_mult=2)),
    dict(name="linear_warmup", optim=SGD2, sched=dict(type="LinearLR", start_factor=0.25, end_factor=1.0, total_iters=20)),
    dict(name="linear_decay", optim=SGD1, sched=dict(type="LinearLR", start_factor=1.0, end_factor=0.1, total_iters=50)),
    dict(name="constant", optim=SGD2, sched=dict(type="ConstantLR", factor=0.5, total_iters=10)),
    dict(name="lambda_exp", optim=SGD2, sched=dict(type="LambdaLR", lr_lambda="exp")),
    dict(name="lambda_per_group", optim=SGD2, sched=dict(type="LambdaLR", lr_lambda="groups")),
    dict(name="lambda_warmup", optim=SGD1, sched=dict(type="LambdaLR", lr_lambda="warmup")),
    # Linear anneals run to total_steps - 1: step total_steps extrapolates
    # below 0, which C stops at 0 (test_sched_api.c).
    dict(name="onecycle_cos_sgd", optim=SGD2, sched=dict(type="OneCycleLR", max_lr=0.5, total_steps=100)),
    dict(name="onecycle_linear_sgd", optim=SGD2, sched=dict(type="OneCycleLR", max_lr=0.3, total_steps=101, anneal_strategy="linear", pct_start=0.25), resume_at=25),
    dict(name="onecycle_three_phase_sgd", optim=SGD1, sched=dict(type="OneCycleLR", max_lr=1.0, total_steps=100, three_phase=True, base_momentum=0.8, max_momentum=0.9)),
    dict(name="onecycle_cos_adam", optim=ADAM2, sched=dict(type="OneCycleLR", max_lr=0.01, total_steps=100)),
    dict(name="onecycle_linear_three_phase_adam", optim=ADAM2, sched=dict(type="OneCycleLR", max_lr=0.02, total_steps=101, anneal_strategy="linear", three_phase=True, div_factor=10.0, final_div_factor=100.0, pct_start=0.4)),
    dict(name="onecycle_no_momentum_adam", optim=ADAM2, sched=dict(type="OneCycleLR", max_lr=0.01, total_steps=120, cycle_momentum=False)),
    # Any optimizer with betas has its beta1 cycled, as Python's "betas" in optimizer.defaults.
    dict(name="onecycle_adamax", optim=dict(type="Adamax", lrs=[0.01]), sched=dict(type="OneCycleLR", max_lr=0.02, total_steps=120)),
    dict(name="onecycle_nadam", optim=dict(type="NAdam", lrs=[0.01, 0.002]), sched=dict(type="OneCycleLR", max_lr=0.02, total_steps=120)),
    dict(name="onecycle_radam", optim=dict(type="RAdam", lrs=[0.01]), sched=dict(type="OneCycleLR", max_lr=0.02, total_steps=120), resume_at=30),
    dict(name="plateau_min_rel", optim=SGD2, sched=dict(type="ReduceLROnPlateau", patience=3), metrics=plateau_metrics("min")),
    dict(name="plateau_min_abs_cooldown_minlr", optim=SGD2, sched=dict(type="ReduceLROnPlateau", factor=0.5, patience=2, threshold=0.01, threshold_mode="abs", cooldown=3, min_lr=0.004), metrics=plateau_metrics("min")),
    dict(name="plateau_max_rel", optim=SGD1, sched=dict(type="ReduceLROnPlateau", mode="max", factor=0.7, patience=1, threshold=0.05, eps=1e-3), metrics=plateau_metrics("max")),
    dict(name="plateau_max_abs_cooldown", optim=ADAM2, sched=dict(type="ReduceLROnPlateau", mode="max", factor=0.5, patience=0, threshold=0.02, threshold_mode="abs", cooldown=2, min_lr=1e-4), metrics=plateau_metrics("max")),
    dict(name="sequential_warmup_cosine", optim=SGD2, sched=dict(type="SequentialLR", milestones=[5], schedulers=[
        dict(type="LinearLR", start_factor=0.1, end_factor=1.0, total_iters=5), dict(type="CosineAnnealingLR", T_max=95)])),
    dict(name="sequential_constant_exponential", optim=SGD2, sched=dict(type="SequentialLR", milestones=[10], schedulers=[
        dict(type="ConstantLR", factor=0.5, total_iters=5), dict(type="ExponentialLR", gamma=0.9)])),
    dict(name="sequential_three", optim=SGD2, sched=dict(type="SequentialLR", milestones=[5, 40], schedulers=[
        dict(type="LinearLR", start_factor=0.5, total_iters=5), dict(type="MultiStepLR", milestones=[10, 20], gamma=0.5),
        dict(type="CosineAnnealingWarmRestarts", T_0=7, T_mult=2)]), resume_at=40),
    dict(name="sequential_step_lambda_onecycle", optim=ADAM2, sched=dict(type="SequentialLR", milestones=[20, 50], schedulers=[
        dict(type="StepLR", step_size=4, gamma=0.8), dict(type="LambdaLR", lr_lambda="exp"),
        dict(type="OneCycleLR", max_lr=0.05, total_steps=60)]), resume_at=50),
]

LAMBDAS = {
    "exp": lambda e: 0.95**e,
    "groups": [lambda e: 0.95**e, lambda e: 1 / (1 + 0.1 * e)],
    "warmup": lambda e: min((e + 1) / 10, 1.0),
}


# ---- torch ------------------------------------------------------------------


def make_optim(spec):
    params = [torch.nn.Parameter(torch.zeros(2)) for _ in spec["lrs"]]
    groups = [{"params": [p], "lr": lr} for p, lr in zip(params, spec["lrs"])]
    if spec["type"] == "SGD":
        return torch.optim.SGD(groups, lr=1e-3, momentum=spec["momentum"])
    return getattr(torch.optim, spec["type"])(groups, lr=1e-3)


def make_sched(opt, spec):
    kw = {k: v for k, v in spec.items() if k != "type"}
    if spec["type"] == "SequentialLR":
        return L.SequentialLR(opt, [make_sched(opt, s) for s in spec["schedulers"]], spec["milestones"])
    if spec["type"] == "LambdaLR":
        return L.LambdaLR(opt, LAMBDAS[spec["lr_lambda"]])
    return getattr(L, spec["type"])(opt, **kw)


def now(opt):
    lrs = [g["lr"] for g in opt.param_groups]
    moms = [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]
    return lrs, moms


def step(sched, run, t):
    if "metrics" in run:
        sched.step(run["metrics"][t - 1])
    else:
        sched.step()


def run_torch(run, resume_from=None):
    """The uninterrupted run, or (resume_from = (optim_sd, sched_sd)) a
    fresh optimizer and scheduler that load them and go on from RESUME."""
    opt = make_optim(run["optim"])
    sched = make_sched(opt, run["sched"])
    out = dict(lrs=[], moms=[])
    first = 1
    if resume_from:
        opt.load_state_dict(resume_from[0])
        sched.load_state_dict(resume_from[1])
        first = run["resume_at"] + 1
    else:
        lrs, moms = now(opt)
        out["lrs"].append(lrs)
        out["moms"].append(moms)
    for t in range(first, run["steps"] + 1):
        step(sched, run, t)
        assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups]
        lrs, moms = now(opt)
        out["lrs"].append(lrs)
        out["moms"].append(moms)
        if t == run["resume_at"] and not resume_from:
            out["state_at"] = copy.deepcopy(sched.state_dict())
            out["optim_at"] = copy.deepcopy(opt.state_dict())
    out["state"] = sched.state_dict()
    return out


# ---- JSON without inf (ReduceLROnPlateau's best and mode_worse) ---------------------------------------------------------


def enfloat(j):
    """Encoded value -> JSON-safe: a non-finite float becomes the encoded
    dict {"float": repr} (value_from_json reads it as a dict; the C side
    maps it back)."""
    if isinstance(j, float) and not math.isfinite(j):
        return {"dict": [["float", repr(j)]]}
    if isinstance(j, list):
        return [enfloat(v) for v in j]
    if isinstance(j, dict):
        return {k: enfloat(v) for k, v in j.items()}
    return j


def unfloat(j):
    if isinstance(j, dict) and j.get("dict") and len(j["dict"]) == 1 and j["dict"][0][0] == "float":
        return float(j["dict"][0][1])
    if isinstance(j, list):
        return [unfloat(v) for v in j]
    if isinstance(j, dict):
        return {k: unfloat(v) for k, v in j.items()}
    return j


def pyenc(x):
    return enfloat(encode(x))


# ---- comparison ----------------------------------------------------------------


def compare_trace(c, p, where, dev):
    for key in ("lrs", "moms"):
        assert len(c[key]) == len(p[key]), f"{where}.{key}: C has {len(c[key])} steps, Python {len(p[key])}"
        for t, (a, b) in enumerate(zip(c[key], p[key])):
            assert len(a) == len(b), f"{where}.{key}[{t}]: group counts differ"
            for g, (x, y) in enumerate(zip(a, b)):
                dev.see(x, y, f"{where}.{key}[{t}][{g}]")
                assert abs(x - y) <= TOL, f"{where}.{key}[{t}][{g}]: C {x!r}, Python {y!r}"


def main():
    exe = sys.argv[1]
    for run in RUNS:
        run.setdefault("steps", STEPS)
        run.setdefault("resume_at", RESUME)
    py = {run["name"]: run_torch(run) for run in RUNS}
    cfg = []
    for run in RUNS:
        r = dict(run)
        r["py_state"] = pyenc(py[run["name"]]["state_at"])
        r["py_optim"] = pyenc(py[run["name"]]["optim_at"])
        cfg.append(r)
    with tempfile.TemporaryDirectory() as tmp:
        cin, cout = os.path.join(tmp, "config.json"), os.path.join(tmp, "out.json")
        with open(cin, "w") as f:
            json.dump(cfg, f)
        subprocess.run([exe, cin, cout], check=True)
        with open(cout) as f:
            results = json.load(f)

    dev_all = Deviation()
    failures = 0
    for run, c in zip(RUNS, results):
        name = run["name"]
        p = py[name]
        dev = Deviation()
        try:
            assert c["name"] == name
            compare_trace(c, p, name, dev)
            same(c["state"], pyenc(p["state"]), f"{name}.state", dev)
            same(c["state_at"], pyenc(p["state_at"]), f"{name}.state_at", dev)
            c_groups = dict(c["optim_at"]["dict"])["param_groups"]
            same(c_groups, pyenc(p["optim_at"]["param_groups"]), f"{name}.optim_at.param_groups", dev)
            at = run["resume_at"]
            tail = dict(lrs=p["lrs"][at + 1:], moms=p["moms"][at + 1:])
            compare_trace(c["resumed_c"], tail, f"{name}.resumed C->C", dev)
            compare_trace(c["resumed_py"], tail, f"{name}.resumed Python->C", dev)
            # C -> Python: torch loads C's state dicts and goes on.
            c_optim, c_state = decode(unfloat(c["optim_at"])), decode(unfloat(c["state_at"]))
            compare_trace(run_torch(run, (c_optim, c_state)), tail, f"{name}.resumed C->Python", dev)
        except AssertionError as e:
            failures += 1
            print(f"FAIL {name}: {e}")
            continue
        print(f"ok   {name}: max |lr - torch| = {dev.abs:.3g}")
        dev_all.see(dev.abs, 0.0, f"{name} ({dev.where})") if dev.abs else None
    print(f"{len(RUNS) - failures}/{len(RUNS)} runs match; max lr deviation from torch: {dev_all.abs!r}"
          + (f" at {dev_all.where}" if dev_all.abs else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
