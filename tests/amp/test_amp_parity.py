"""AMP parity: ctrial's autocast + GradScaler against torch.autocast +
torch.amp.GradScaler (torch 2.11), on the CPU with bfloat16.

    test_amp_parity.py AMP_PARITY_EXE

The script makes an MLP nn.Sequential(Linear(12, 32), ReLU(), Linear(32, 5)),
20 batches of 16 records, and the runs below; writes them to in.pth; trains
every run itself; runs the C program (tests/amp/amp_parity.c) on in.pth; and
compares what it wrote to out.pth with its own results. Each run is the AMP
recipe with a scaler whose init_scale is small and growth_interval short, so
that 20 steps see the scale grow and back off; infs and NaNs are written
into gradients at the listed steps (after backward, before unscale), so the
skip pattern is known in advance as well.

Compared, per run and step:
  * the loss (bf16-autocast forward, its dtype too), the scale after
    update(), the growth tracker, whether the step ran: exactly;
  * at the end, the model's weights, the optimizer's state_dict and the
    scaler's state_dict: exactly (keys, order, Python types, values; tensors
    bit for bit).
Bit-for-bit is the right bar: both sides run the same libtorch kernels in the
same order on one thread (the autocast casts, linear, cross_entropy, the
backward graph, _amp_foreach_non_finite_check_and_unscale_,
_amp_update_scale_, the optimizers' own kernels); nothing is recomputed by
another route. Also: a fresh scaler's state_dict equals Python's for the same
options (init_scale before first use), a Python state_dict loaded into ctrial
comes back unchanged, and Python's GradScaler loads ctrial's.

Runs cover plain SGD (init_scale 3: the reciprocal is not exact, so the FP64
reciprocal of unscale_ must match), SGD with momentum + unscale_ + clipping
(an inf on the very first step, before any momentum buffer exists), fused
SGD, Adam and AdamW (PyTorch's _step_supports_amp_scaling road: the kernel
gets grad_scale and found_inf; with unscale_ first it gets found_inf only)
and plain Adam.

Work files go to $CTRIAL_BUILD_DIR/tests/amp/parity. Exits 1 on any
difference, after printing each.
"""
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)

EXE = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(os.path.join(os.environ.get("CTRIAL_BUILD_DIR", "."), "tests", "amp", "parity"))
STEPS, B, IN, HIDDEN, CLASSES = 20, 16, 12, 32, 5


def run(name, optim, lr, inf_steps, nan_steps, unscale_clip=False, fused=False, momentum=0.0,
        init_scale=4.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=3):
    return dict(name=name, optim=optim, lr=lr, momentum=momentum, fused=fused,
                init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                growth_interval=growth_interval, inf_steps=inf_steps, nan_steps=nan_steps,
                unscale_clip=unscale_clip)


RUNS = [
    run("sgd", "SGD", 0.1, inf_steps=[2, 9], nan_steps=[5], init_scale=3.0),
    run("sgd_momentum_clip", "SGD", 0.05, momentum=0.9, inf_steps=[0, 10], nan_steps=[11], unscale_clip=True),
    run("sgd_fused", "SGD", 0.1, fused=True, inf_steps=[4], nan_steps=[12], init_scale=3.0),
    run("adam_fused", "Adam", 0.01, fused=True, inf_steps=[0, 6], nan_steps=[13], init_scale=3.0,
        growth_factor=4.0, backoff_factor=0.25),
    run("adamw_fused_clip", "AdamW", 0.01, fused=True, inf_steps=[3], nan_steps=[4], unscale_clip=True,
        init_scale=8.0, growth_interval=2),
    run("adam", "Adam", 0.01, inf_steps=[1], nan_steps=[], growth_interval=4),
]

problems = []


def bad(msg):
    problems.append(msg)
    print("BAD", msg)


def make_model():
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))


def make_optim(r, model):
    kw = {"fused": True} if r["fused"] else {}
    if r["optim"] == "SGD":
        # momentum 0 stays Python's default (the int 0 in state_dict), which
        # is what ctrial writes for a momentum left at 0.
        if r["momentum"]:
            kw["momentum"] = r["momentum"]
        return torch.optim.SGD(model.parameters(), lr=r["lr"], **kw)
    cls = torch.optim.Adam if r["optim"] == "Adam" else torch.optim.AdamW
    return cls(model.parameters(), lr=r["lr"], **kw)


def make_scaler(r):
    return torch.amp.GradScaler("cpu", init_scale=r["init_scale"], growth_factor=r["growth_factor"],
                                backoff_factor=r["backoff_factor"], growth_interval=r["growth_interval"])


def train(inp, r):
    model = make_model()
    model.load_state_dict(inp["model"])
    opt = make_optim(r, model)
    scaler = make_scaler(r)
    out = dict(losses=[], scales=[], stepped=[], trackers=[])
    for t in range(STEPS):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(inp["x"][t]), inp["y"][t])
        scaler.scale(loss).backward()
        with torch.no_grad():
            if t in r["inf_steps"]:
                model[0].weight.grad.view(-1)[0] = math.inf
            if t in r["nan_steps"]:
                model[2].bias.grad.view(-1)[1] = math.nan
        if r["unscale_clip"]:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        before = [p.detach().clone() for p in model.parameters()]
        scaler.step(opt)
        # What PyTorch decided: the unscaling road steps when the found_inf
        # sum is 0; the fused kernels skip when it is exactly 1.
        found = sum(v.item() for v in scaler._found_inf_per_device(opt).values())
        stepped = found != 1.0 if getattr(opt, "_step_supports_amp_scaling", False) else found == 0
        if not stepped and any(not torch.equal(a, p.detach()) for a, p in zip(before, model.parameters())):
            bad(f"{r['name']} step {t}: python's skipped step changed the parameters (test bug)")
        scaler.update()
        out["losses"].append(loss.detach().clone())
        out["scales"].append(scaler.get_scale())
        out["stepped"].append(stepped)
        out["trackers"].append(scaler._get_growth_tracker())
    out["model"] = model.state_dict()
    out["optim"] = opt.state_dict()
    out["scaler"] = scaler.state_dict()
    return out


def bits(t):
    """The bit patterns of a floating tensor (NaN equals NaN, -0 differs from 0)."""
    if not t.is_floating_point():
        return t
    return t.contiguous().view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def same(a, b, where):
    """Exact structural equality: Python types, keys in order, tensors bit for bit."""
    if isinstance(b, torch.Tensor):
        if not isinstance(a, torch.Tensor):
            return bad(f"{where}: ctrial has {type(a).__name__}, python a tensor")
        if a.dtype != b.dtype or a.shape != b.shape:
            return bad(f"{where}: ctrial {a.dtype} {list(a.shape)}, python {b.dtype} {list(b.shape)}")
        if not torch.equal(bits(a), bits(b)):
            diff = (a.double() - b.double()).abs().max().item()
            return bad(f"{where}: tensors differ (max |diff| {diff:.3g}):\n  ctrial {a}\n  python {b}")
        return
    if isinstance(b, dict) and isinstance(a, dict):
        pass  # a state_dict() is an OrderedDict; torch.load of ctrial's gives a dict
    elif type(a) is not type(b):
        return bad(f"{where}: ctrial has {type(a).__name__} {a!r}, python {type(b).__name__} {b!r}")
    if isinstance(b, dict):
        if list(a.keys()) != list(b.keys()):
            return bad(f"{where}: keys differ: ctrial {list(a.keys())}, python {list(b.keys())}")
        for k in b:
            same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return bad(f"{where}: length {len(a)} vs python {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(b, float) and math.isnan(b):
        if not math.isnan(a):
            bad(f"{where}: ctrial {a!r}, python nan")
    elif a != b:
        bad(f"{where}: ctrial {a!r}, python {b!r}")


def main():
    os.makedirs(WORK, exist_ok=True)
    torch.manual_seed(1234)
    model = make_model()
    inp = {
        "model": model.state_dict(),
        "x": torch.randn(STEPS, B, IN) * 2,
        "y": torch.randint(0, CLASSES, (STEPS, B)),
        "runs": RUNS,
    }
    py = {r["name"]: train(inp, r) for r in RUNS}
    inp["py_scaler_state"] = py["sgd"]["scaler"]
    in_path, out_path = os.path.join(WORK, "in.pth"), os.path.join(WORK, "out.pth")
    torch.save(inp, in_path)

    proc = subprocess.run([EXE, in_path, out_path], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr)
        print(f"FAIL: amp_parity exited {proc.returncode}")
        sys.exit(1)
    c = torch.load(out_path, weights_only=True)

    for r in RUNS:
        name, p, k = r["name"], py[r["name"]], c["runs"][r["name"]]
        poisoned = set(r["inf_steps"]) | set(r["nan_steps"])
        expected = [t not in poisoned for t in range(STEPS)]
        if p["stepped"] != expected:
            bad(f"{name}: python's skip pattern {p['stepped']} is not the injected one (test bug)")
        for key in ("losses", "scales", "stepped", "trackers", "model", "optim", "scaler"):
            same(k[key], p[key], f"{name}.{key}")
        same(c["fresh"][name], make_scaler(r).state_dict(), f"{name}.fresh_state_dict")
        # Python's GradScaler takes ctrial's state_dict as it is.
        s = torch.amp.GradScaler("cpu")
        s.load_state_dict(k["scaler"])
        same(k["scaler"], s.state_dict(), f"{name}.scaler loaded into python")
        skipped = [t for t in range(STEPS) if not p["stepped"][t]]
        print(f"{name}: {STEPS} steps, skipped {skipped}, scales {p['scales']}, "
              f"final scaler {p['scaler']}")
    same(c["py_scaler_state"], py["sgd"]["scaler"], "python state_dict loaded into ctrial")

    if problems:
        print(f"FAIL: {len(problems)} difference(s)")
        sys.exit(1)
    print(f"OK: {len(RUNS)} runs bit-for-bit equal to torch.autocast + torch.amp.GradScaler")


if __name__ == "__main__":
    main()
