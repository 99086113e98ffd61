"""tests/ops/pyharness.py — the Python half of the harness in parity.h.

A case is a function registered under the name of its C twin; it draws the
same inputs (the harness seeds 0 before it), runs the same ops with torch and
returns {key: value}. A value is a tensor (compared by dtype, shape,
requires_grad and values), V(t) (strides too: views must be views), M(t)
(no values: torch.empty), snap(t) (a tensor frozen now, for values that later
in-place ops change), None (no gradient), or a bool/int/float/str.
"""
import torch

torch.set_num_threads(1)

f32, f64, f16, bf16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
i64, i32, u8, tbool = torch.int64, torch.int32, torch.uint8, torch.bool
ALL_DTYPES = [f32, f64, f16, bf16, i64, i32, u8, tbool]
DTYPE_NAMES = {f32: "float32", f64: "float64", f16: "float16", bf16: "bfloat16",
               i64: "int64", i32: "int32", u8: "uint8", tbool: "bool"}
INF = float("inf")
NAN = float("nan")

CASES = {}


def case(name):
    def register(fn):
        assert name not in CASES, name
        CASES[name] = fn
        return fn
    return register


# ---- inputs (the C macros of the same names) --------------------------------

def rn(*s):
    return torch.randn(s, dtype=f32)


def rng(*s):
    return torch.randn(s, dtype=f32, requires_grad=True)


def rn64(*s):
    return torch.randn(s, dtype=f64)


def rn64g(*s):
    return torch.randn(s, dtype=f64, requires_grad=True)


def G(t):
    return t.requires_grad_()


# ---- backward ---------------------------------------------------------------

def bw(*outs):
    """Seeds 1, draws w_i ~ randn(outs[i]) in order, backprops sum((o*w).sum())."""
    torch.manual_seed(1)
    loss = None
    for o in outs:
        w = torch.randn(o.shape, dtype=o.dtype)
        term = (o * w).sum()
        loss = term if loss is None else loss + term
    loss.backward()


def grads(r, **tensors):
    """Adds "<name>.grad" for each named input to the result dict r."""
    for name, t in tensors.items():
        r[name + ".grad"] = t.grad
    return r


# ---- frozen records ---------------------------------------------------------

class Rec:
    """A tensor's dtype, shape, strides, requires_grad and values, taken now."""

    def __init__(self, t, strides=False, meta=False):
        self.dtype = DTYPE_NAMES.get(t.dtype, str(t.dtype))
        self.shape = list(t.shape)
        self.strides = list(t.stride()) if strides else None
        self.contiguous = t.is_contiguous()
        self.requires_grad = t.requires_grad
        self.data = None if meta else values(t)


def values(t):
    t = t.detach().contiguous()
    if t.dtype in (f16, bf16):
        return (t.view(torch.int16).to(torch.int32) & 0xFFFF).flatten().tolist()
    if t.dtype.is_floating_point:
        return t.to(f64).flatten().tolist()
    if t.dtype == tbool:
        return t.to(i64).flatten().tolist()
    return t.flatten().tolist()


def V(t):
    return Rec(t, strides=True)


def M(t):
    return Rec(t, meta=True)


def snap(t):
    return Rec(t)
