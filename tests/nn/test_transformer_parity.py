#!/usr/bin/env python3
"""tests/nn/test_transformer_parity.py — nn.MultiheadAttention and the
transformer layers of ctrial (src/nn/attention.c, transformer.c) against
torch.nn's.

    test_transformer_parity.py PATH/TO/transformer_dump

Runs transformer_dump on transformer_cases.json (the format is in
transformer_dump.c), then, for every case, builds the same torch.nn module
after torch.manual_seed(1000 + case index) and checks:
  - the initial state dict: the same keys in the same order, every tensor
    bit-identical (the same draws in the same order);
  - C's state dict loads into the Python module with strict=True;
  - training mode (dropout on), after torch.manual_seed(7) on both sides:
    the outputs, the gradients of the inputs and of every parameter, within
    |c - py| <= 1e-7 + 1e-6 * |py|;
  - eval mode under no_grad, with Python's fast path disabled
    (torch.backends.mha.set_fastpath_enabled(False)): within the same
    tolerance. With the fast path on (what Python does by default), the
    largest difference is printed, not checked: those kernels
    (_native_multi_head_attention, _transformer_encoder_layer_fwd, nested
    tensors that zero padded positions) are not the ones C runs.
A case with "autocast" runs its calls under torch.autocast("cpu", dtype)
on both sides (ct_autocast_enter in C, as ct_ctx_use_amp does). Both sides
run the same libtorch with one thread. Prints one line per case
and exits non-zero if any check fails.
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import warnings

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL, ATOL = 1e-6, 1e-7


def build(case):
    """The torch.nn module of a case, as transformer_dump.c builds it."""
    kind, size, o = case["module"], case["size"], case.get("opts", {})
    if kind == "MultiheadAttention":
        return nn.MultiheadAttention(size[0], size[1], dropout=o.get("dropout", 0.0), bias=o.get("bias", True),
                                     kdim=o.get("kdim"), vdim=o.get("vdim"), batch_first=o.get("batch_first", False))
    kw = dict(dim_feedforward=o.get("dim_feedforward", 2048), dropout=o.get("dropout", 0.1),
              activation=o.get("activation", "relu"), layer_norm_eps=o.get("layer_norm_eps", 1e-5),
              batch_first=o.get("batch_first", False), norm_first=o.get("norm_first", False), bias=o.get("bias", True))
    d, h = size[0], size[1]

    def final_norm():
        return nn.LayerNorm(d, eps=kw["layer_norm_eps"], bias=kw["bias"]) if case.get("norm") else None

    if kind == "TransformerEncoderLayer":
        return nn.TransformerEncoderLayer(d, h, **kw)
    if kind == "TransformerDecoderLayer":
        return nn.TransformerDecoderLayer(d, h, **kw)
    if kind == "TransformerEncoder":
        layer = nn.TransformerEncoderLayer(d, h, **kw)
        return nn.TransformerEncoder(layer, size[2], norm=final_norm())
    if kind == "TransformerDecoder":
        layer = nn.TransformerDecoderLayer(d, h, **kw)
        return nn.TransformerDecoder(layer, size[2], norm=final_norm())
    if kind == "Transformer":
        return nn.Transformer(d, h, size[2], size[3], **kw)
    raise ValueError(kind)


def call(m, case, inputs):
    def value(v):
        return inputs[v] if isinstance(v, str) else v
    args = [value(a) for a in case.get("args", [])]
    kwargs = {k: value(v) for k, v in case.get("kwargs", {}).items()}
    amp = case.get("autocast")
    if amp is None:
        return m(*args, **kwargs)
    with torch.autocast("cpu", dtype=torch.bfloat16 if amp == "bf16" else torch.float16):
        return m(*args, **kwargs)


def loss_of(out):
    """The loss transformer_dump.c backpropagates."""
    if isinstance(out, torch.Tensor):
        w = torch.cos(torch.arange(0, out.numel(), 1, dtype=torch.float32)).reshape(out.shape)
        return (out * w).sum()
    total = None
    for e in out if isinstance(out, (tuple, list)) else []:
        term = loss_of(e) if e is not None else None
        if term is not None:
            total = term if total is None else total + term
    return total


def max_diff(c, p):
    """The largest |c - py| over the tensors of two results (inf when their
    structures differ; NaN in the same places counts as equal)."""
    if isinstance(p, torch.Tensor):
        if not isinstance(c, torch.Tensor) or c.shape != p.shape:
            return math.inf
        same_nan = torch.isnan(c) & torch.isnan(p)
        d = (c.double() - p.double()).abs().masked_fill(same_nan, 0)
        return d.max().item() if d.numel() else 0.0
    if isinstance(p, (tuple, list)):
        if not isinstance(c, (tuple, list)) or len(c) != len(p):
            return math.inf
        return max([max_diff(a, b) for a, b in zip(c, p)] + [0.0])
    return 0.0 if c is None and p is None else math.inf


def compare(c, p, where, problems):
    """c within the tolerance of p, of the same structure, dtype and shape."""
    if isinstance(p, torch.Tensor):
        if not isinstance(c, torch.Tensor):
            problems.append(f"{where}: C gave {type(c).__name__}, Python a tensor")
        elif c.dtype != p.dtype or c.shape != p.shape:
            problems.append(f"{where}: C {c.dtype} {list(c.shape)}, Python {p.dtype} {list(p.shape)}")
        else:
            p = p.detach()
            ok = torch.isclose(c, p, rtol=RTOL, atol=ATOL, equal_nan=True)
            if not bool(ok.all()):
                d = (c.double() - p.double()).abs()
                problems.append(f"{where}: {int((~ok).sum())} of {ok.numel()} values differ, max |c - py| = "
                                f"{d.max().item():.3g}")
    elif isinstance(p, (tuple, list)):
        if not isinstance(c, (tuple, list)) or len(c) != len(p):
            problems.append(f"{where}: C gave {c!r:.60}, Python a {type(p).__name__} of {len(p)}")
            return
        for i, (a, b) in enumerate(zip(c, p)):
            compare(a, b, f"{where}[{i}]", problems)
    elif c is not None or p is not None:
        problems.append(f"{where}: C gave {c!r:.60}, Python {p!r:.60}")


def check_init(c_init, m, problems):
    py = m.state_dict()
    if list(c_init.keys()) != list(py.keys()):
        problems.append(f"state dict keys: C {list(c_init.keys())}, Python {list(py.keys())}")
        return
    for k, t in py.items():
        c = c_init[k]
        if c.dtype != t.dtype or c.shape != t.shape or not torch.equal(c, t):
            problems.append(f"initial {k} differs from Python's")


def run_case(i, case, rec):
    problems = []
    torch.manual_seed(1000 + i)
    m = build(case)
    check_init(rec["init"], m, problems)
    try:
        m.load_state_dict(rec["init"], strict=True)
    except RuntimeError as e:
        problems.append(f"load_state_dict(strict=True): {e}")
        return problems, 0.0
    inputs = {}
    for name, spec in case["inputs"].items():
        inputs[name] = rec["inputs"][name].detach().clone().requires_grad_("randn" in spec)

    m.train()
    torch.manual_seed(7)
    out = call(m, case, inputs)
    loss_of(out).backward()
    compare(rec["train"], out, "train output", problems)
    for name, t in inputs.items():
        if t.requires_grad:
            compare(rec["input_grads"][name], t.grad, f"grad of input {name}", problems)
    for name, p in m.named_parameters():
        compare(rec["param_grads"][name], p.grad, f"grad of {name}", problems)

    m.eval()
    with torch.no_grad():
        fast = call(m, case, inputs)
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            slow = call(m, case, inputs)
        finally:
            torch.backends.mha.set_fastpath_enabled(True)
    compare(rec["eval"], slow, "eval output (fast path off)", problems)
    return problems, max_diff(rec["eval"], fast)


def main():
    prog = sys.argv[1]
    cases_path = os.path.join(HERE, "transformer_cases.json")
    with open(cases_path) as f:
        cases = json.load(f)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")  # enable_nested_tensor, mismatched mask types: Python's notes, not failures
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "transformer.pth")
        p = subprocess.run([prog, cases_path, out], capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            print(p.stdout + p.stderr)
            sys.exit(f"transformer_dump failed with exit code {p.returncode}")
        recs = torch.load(out, weights_only=True)
    failed, worst_fast = 0, 0.0
    for i, case in enumerate(cases):
        problems, fast = run_case(i, case, recs[case["name"]])
        worst_fast = max(worst_fast, fast)
        status = "ok" if not problems else "FAIL"
        print(f"{status:4} {case['name']} (eval with Python's fast path: max |c - py| = {fast:.3g})")
        for msg in problems:
            print(f"       {msg}")
        failed += bool(problems)
    print(f"{len(cases)} cases, {failed} failed; Python's fast path differs by at most {worst_fast:.3g}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
