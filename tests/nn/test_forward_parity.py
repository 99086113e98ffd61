"""Forward/backward parity of every built-in layer (train and eval, BatchNorm
running statistics, momentum=None, float64 models), and gradient clipping
against torch.nn.utils.clip_grad_norm_ / clip_grad_value_ on the same
gradients. Values must agree within 1e-6 relative (the largest deviation is
printed; expected 0).

usage: test_forward_parity.py NN_FORWARD_DUMP"""
import math
import sys

import torch
import torch.nn as nn

from nn_parity import Net, as_list, compare_state, mlp, rel_dev, run_program

RTOL = 1e-6


def stack():
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.GELU(), nn.MaxPool2d(2), nn.SiLU(), nn.ReLU(),
                         nn.Flatten(), nn.Linear(64, 6), nn.Tanh(), nn.Sigmoid())


# name -> constructor; in step with CASES in nn_forward_dump.c (which also
# carries the seed, the input and the train/eval schedule)
CASES = {
    "linear": lambda: nn.Linear(20, 30),
    "linear_3d_nobias": lambda: nn.Linear(20, 5, bias=False),
    "conv1d": lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1),
    "conv1d_groups": lambda: nn.Conv1d(4, 6, 3, groups=2, dilation=2, bias=False),
    "conv2d_groups": lambda: nn.Conv2d(4, 8, 3, groups=4, dilation=2, padding=2, stride=2),
    "bn1d_train": lambda: nn.BatchNorm1d(10),
    "bn1d_train_3d": lambda: nn.BatchNorm1d(10),
    "bn2d_eval": lambda: nn.BatchNorm2d(3),
    "bn2d_cumulative": lambda: nn.BatchNorm2d(3, momentum=None),
    "bn2d_notrack_eval": lambda: nn.BatchNorm2d(3, track_running_stats=False),
    "bn2d_noaffine": lambda: nn.BatchNorm2d(3, affine=False, momentum=0.3, eps=1e-3),
    "layernorm": lambda: nn.LayerNorm(16),
    "embedding_pad": lambda: nn.Embedding(50, 8, padding_idx=3),
    "dropout_train": lambda: nn.Dropout(0.3),
    "dropout_eval": lambda: nn.Dropout(0.3),
    "stack": stack,
    "mlp_eval": lambda: mlp(0.5),
    "mlp_f64": lambda: mlp(0.5),
    "cnn_f64_eval": Net,
}

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def compare_tensor(label, entry, t):
    if entry["shape"] != list(t.shape):
        print(f"{label}: shape {entry['shape']} != Python {list(t.shape)}")
        return 1, math.inf
    ref = as_list(t)
    dev = max((rel_dev(a, b) for a, b in zip(entry["values"], ref)), default=0.0)
    if dev > RTOL:
        print(f"{label}: max relative deviation {dev:.3g}")
        return 1, dev
    return 0, dev


def forward_case(case):
    name = case["name"]
    torch.manual_seed(case["seed"])
    m = CASES[name]()
    inp = case["input"]
    dtype = DTYPES[inp["dtype"]]
    if dtype != torch.float32:
        m = m.to(dtype)
    if inp["kind"] == "randint":
        x = torch.randint(0, inp["high"], inp["shape"])
    else:
        x = torch.randn(inp["shape"], dtype=dtype, requires_grad=True)
    for _ in range(case["pre"]):
        m(x)
    if case["eval"]:
        m.eval()
    y = m(x)
    w = torch.randn(y.shape, dtype=y.dtype)
    (y * w).sum().backward()

    failures, worst = compare_tensor(f"{name}: output", case["output"], y)
    params = list(m.named_parameters())
    if [g["name"] for g in case["grads"]] != [n for n, _ in params]:
        print(f"{name}: parameter names differ")
        failures += 1
    else:
        for g, (pname, p) in zip(case["grads"], params):
            f, d = compare_tensor(f"{name}: grad of {pname}", g, p.grad)
            failures += f
            worst = max(worst, d)
    if "input_grad" in case:
        f, d = compare_tensor(f"{name}: grad of the input", case["input_grad"], x.grad)
        failures += f
        worst = max(worst, d)
    f, d = compare_state(name, case["state"], m, rtol=RTOL)
    failures += f
    worst = max(worst, d)
    if "eval_identity" in case and not case["eval_identity"]:
        print(f"{name}: Dropout in eval mode is not the identity")
        failures += 1
    print(f"{name}: max relative deviation {worst:.3g}")
    return failures, worst


def clip_case(case):
    label = f"clip_{case['kind']}(max={case['max']}, norm_type={case['norm_type']})"
    if case["rc"] != 0:
        print(f"{label}: failed in C")
        return 1, math.inf
    params = []
    for g in case["before"]:
        if g is None:
            params.append(torch.zeros(1, requires_grad=True))
            continue
        t = torch.tensor(g["values"], dtype=DTYPES[g["dtype"]]).reshape(g["shape"])
        p = torch.zeros_like(t, requires_grad=True)
        p.grad = t
        params.append(p)
    if case["kind"] == "norm":
        norm_type = float(case["norm_type"])
        total = torch.nn.utils.clip_grad_norm_(params, case["max"], norm_type).item()
        failures = 0 if rel_dev(case["total"], total) <= RTOL else 1
        worst = rel_dev(case["total"], total)
        if failures:
            print(f"{label}: total norm C {case['total']!r} Python {total!r}")
    else:
        torch.nn.utils.clip_grad_value_(params, case["max"])
        failures, worst = 0, 0.0
    for i, (g, p) in enumerate(zip(case["after"], params)):
        if g is None:
            if p.grad is not None:
                failures += 1
            continue
        f, d = compare_tensor(f"{label}: grad {i}", g, p.grad)
        failures += f
        worst = max(worst, d)
    print(f"{label}: max relative deviation {worst:.3g}")
    return failures, worst


def main():
    data = run_program(sys.argv[1])
    failures = 0
    overall = 0.0
    names = [c["name"] for c in data["forward"]]
    if sorted(names) != sorted(CASES):
        print(f"forward cases differ: C {names}, Python {list(CASES)}")
        failures += 1
    for case in data["forward"]:
        f, d = forward_case(case)
        failures += f
        overall = max(overall, d)
    for case in data["clip"]:
        f, d = clip_case(case)
        failures += f
        overall = max(overall, d)
    print(f"forward/clip parity: max relative deviation {overall:.3g} (tolerance {RTOL}), {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
