#!/usr/bin/env python3
"""tests/ops/test_dispatch.py — operators called by name from C (ctrial/ops.h)
against the same calls through Python's torch.ops.

    test_dispatch.py PATH/TO/dispatch_dump

Runs dispatch_dump on dispatch_cases.json (the format is in dispatch_dump.c),
then, for every case, calls torch.ops.<ns>.<name>[.<overload>] with the same
arguments — the inputs C drew, loaded from its file — after
torch.manual_seed(7), and compares:
  - the results: the same structure (tuple, list, tensor, number, None),
    dtypes, shapes and strides, values within |c - py| <= 1e-7 + 1e-6 * |py|;
  - the inputs after the call (what an in-place operator changed);
  - with "grad", the gradients of the same loss (dispatch_dump.c) with
    respect to every floating-point input;
  - a case with "error" must fail in C with a message containing it, and
    the same call must fail in Python too (a case that fails only in C, or
    only in Python, fails the test).
Both sides run the same libtorch with one thread. Prints one line per case
and exits non-zero if any fails.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL, ATOL = 1e-6, 1e-7
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8,
          "bool": torch.bool, "int8": torch.int8, "int16": torch.int16}
MEMORY_FORMATS = {"contiguous_format": torch.contiguous_format, "channels_last": torch.channels_last,
                  "channels_last_3d": torch.channels_last_3d, "preserve_format": torch.preserve_format}
LAYOUTS = {"strided": torch.strided}
TENSOR_KEYS = ("randn", "rand", "pos", "bool", "randint", "arange", "spd", "values")


def operator(name):
    """torch.ops' object for "ns::name[.overload]" (aten when no ns)."""
    ns, _, rest = name.rpartition("::")
    op, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, ns or "aten"), op)
    if "." not in rest:
        return packet
    return getattr(packet, overload or "default")


class Inputs:
    """Hands out C's inputs in the order the case's arguments made them."""

    def __init__(self, saved):
        self.saved, self.used, self.wants_grad = saved, [], []

    def next(self, spec):
        t = self.saved[len(self.used)].clone()
        wants_grad = t.is_floating_point() and spec.get("grad", True)
        t.requires_grad_(wants_grad)
        self.used.append(t)
        self.wants_grad.append(wants_grad)  # an in-place operator may make a leaf that did not require grad require it
        return t


def arg(j, inputs):
    if isinstance(j, dict):
        if any(k in j for k in TENSOR_KEYS):
            return inputs.next(j)
        if "dtype" in j:
            return DTYPES[j["dtype"]]
        if "device" in j:
            return torch.device(j["device"])
    if isinstance(j, list) and j and (isinstance(j[0], dict) or j[0] is None):
        return [None if e is None else inputs.next(e) for e in j]
    if isinstance(j, str) and j in MEMORY_FORMATS:
        return MEMORY_FORMATS[j]
    if isinstance(j, str) and j in LAYOUTS:
        return LAYOUTS[j]
    return j


def repeat_ints(op, args, kwargs):
    """One int for an int[N] argument stands for N copies of it: torch.ops
    repeats it for int[N] but not for SymInt[N] (conv2d's stride), which C
    does too (ops.h), so it is repeated here (for an exact overload only)."""
    if not isinstance(op, torch._ops.OpOverload):
        return
    for i, a in enumerate(op._schema.arguments):
        if a.N is None:
            continue
        if i < len(args) and type(args[i]) is int:
            args[i] = [args[i]] * a.N
        elif type(kwargs.get(a.name)) is int:
            kwargs[a.name] = [kwargs[a.name]] * a.N


def loss_of(out):
    """The loss dispatch_dump.c backpropagates."""
    if isinstance(out, torch.Tensor):
        if not out.is_floating_point() or not out.requires_grad:
            return None
        w = torch.cos(torch.arange(0, out.numel(), 1, dtype=out.dtype)).reshape(out.shape)
        return (out * w).sum()
    if isinstance(out, (list, tuple)):
        total = None
        for e in out:
            term = loss_of(e)
            if term is not None:
                total = term if total is None else total + term
        return total
    return None


def compare(c, p, where, problems, strides=True):
    if isinstance(p, torch.Tensor):
        if not isinstance(c, torch.Tensor):
            problems.append(f"{where}: C gave {type(c).__name__}, Python a tensor")
            return
        c, p = c.detach(), p.detach()
        if c.dtype != p.dtype or c.shape != p.shape:
            problems.append(f"{where}: C {c.dtype} {list(c.shape)}, Python {p.dtype} {list(p.shape)}")
            return
        if strides and c.stride() != p.stride():  # a memory format, a view's layout
            problems.append(f"{where}: C strides {c.stride()}, Python {p.stride()}")
        if p.is_complex() or not (p.is_floating_point()):
            if not torch.equal(c, p):
                problems.append(f"{where}: values differ")
            return
        cd, pd = c.double(), p.double()
        both_nan = torch.isnan(cd) & torch.isnan(pd)
        diff = (cd - pd).abs().masked_fill(both_nan, 0)
        bad = diff > ATOL + RTOL * pd.abs()
        bad |= torch.isnan(cd) != torch.isnan(pd)
        if bad.any():
            problems.append(f"{where}: {int(bad.sum())} of {p.numel()} values differ, max |diff| "
                            f"{float(diff.masked_fill(torch.isnan(diff), math.inf).max()):.3g}")
        return
    if isinstance(p, (list, tuple)):
        if not isinstance(c, (list, tuple)) or len(c) != len(p) or isinstance(c, tuple) != isinstance(p, tuple):
            problems.append(f"{where}: C gave {type(c).__name__} of {len(c) if hasattr(c, '__len__') else '-'}, "
                            f"Python {type(p).__name__} of {len(p)}")
            return
        for i, (ce, pe) in enumerate(zip(c, p)):
            compare(ce, pe, f"{where}[{i}]", problems, strides)
        return
    if isinstance(p, float) and isinstance(c, float):
        if not (c == p or (math.isnan(c) and math.isnan(p)) or abs(c - p) <= ATOL + RTOL * abs(p)):
            problems.append(f"{where}: C {c}, Python {p}")
        return
    if c != p or type(c) is not type(p):
        problems.append(f"{where}: C {c!r}, Python {p!r}")


def run_case(i, case, rec):
    """The problems with case i (an empty list when it passes)."""
    problems = []
    inputs = Inputs(rec["inputs"])
    args = [arg(a, inputs) for a in case.get("args", [])]
    kwargs = {k: arg(v, inputs) for k, v in case.get("kw", {}).items()}
    torch.manual_seed(7)
    try:
        op = operator(case["op"])
        repeat_ints(op, args, kwargs)
        out = op(*args, **kwargs)
        py_error = None
    except Exception as e:  # noqa: BLE001 — any failure of the operator is the expected kind here
        out, py_error = None, str(e).splitlines()[0]
    if "error" in case:
        c_error = rec.get("error")
        if c_error is None or case["error"] not in c_error:
            problems.append(f"C should fail with '{case['error']}', got {c_error!r}")
        if case.get("python_fails", True) and py_error is None:
            problems.append("Python does not fail on the same call")
        return problems
    if "error" in rec:
        return [f"C failed: {rec['error']}" + (f" (Python: {py_error})" if py_error else " (Python did not)")]
    if py_error:
        return [f"Python failed: {py_error} (C did not)"]
    compare(rec["out"], out, "out", problems)
    for k, t in enumerate(inputs.used):
        compare(rec["after"][k], t, f"input {k} after the call", problems)
    if case.get("grad"):
        loss = loss_of(out)
        leaves = [t for t, wants in zip(inputs.used, inputs.wants_grad) if wants]
        grads = torch.autograd.grad(loss, leaves, allow_unused=True) if loss is not None else []
        py = iter(grads)
        for k, wants in enumerate(inputs.wants_grad):
            if not wants:
                continue
            g, c = next(py), rec["grads"][k]
            if g is None or c is None:  # no gradient on one side: the other's must be none or zeros
                other = c if g is None else g
                if other is not None and other.any():
                    problems.append(f"grad of input {k}: only {'C' if g is None else 'Python'} has one")
                continue
            compare(c, g, f"grad of input {k}", problems, strides=False)  # .grad's layout is AccumulateGrad's
    return problems


def main():
    prog = sys.argv[1]
    cases_path = os.path.join(HERE, "dispatch_cases.json")
    with open(cases_path) as f:
        cases = json.load(f)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "dispatch.pth")
        p = subprocess.run([prog, cases_path, out], capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            print(p.stdout + p.stderr)
            sys.exit(f"dispatch_dump failed with exit code {p.returncode}")
        recs = torch.load(out, weights_only=True)
    failed, ops = 0, set()
    for i, case in enumerate(cases):
        problems = run_case(i, case, recs[f"{i:03d}"])
        name = case["op"] + (" (error)" if "error" in case else "") + (" +grad" if case.get("grad") else "")
        ops.add(case["op"].partition(".")[0])
        print(("ok   " if not problems else "FAIL ") + f"{i:03d} {name}" + "".join("\n       " + p for p in problems))
        failed += bool(problems)
    print(f"{len(cases)} cases over {len(ops)} operators, "
          f"{sum(bool(c.get('grad')) for c in cases)} with gradients; {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
