"""Python half of tests/optim/json_value.h: state dicts <-> JSON, and a
structural comparison that reports the largest numeric deviation.

Encoding: None/bool/int/float/str as JSON scalars (a NaN or infinite
float as the dict {"float": "nan" | "inf" | "-inf"}; in a tensor or a list
of losses the string alone), list as array,
{"tuple": [...]}, {"dict": [[key, value], ...]} (keys str or int, in order),
{"tensor": nested lists, "dtype": "float32", "shape": [...]}.
"""

import math

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "int32": torch.int32}
NAMES = {v: k for k, v in DTYPES.items()}


def real(x):
    """A tensor element as JSON takes it: non-finite as "nan", "inf", "-inf"."""
    return x if math.isfinite(x) else "nan" if math.isnan(x) else "inf" if x > 0 else "-inf"


def reals(j):
    return [reals(v) for v in j] if isinstance(j, list) else real(j)


def plain(j):
    """real()'s strings back to floats, in nested lists."""
    if isinstance(j, list):
        return [plain(v) for v in j]
    return float(j) if isinstance(j, str) else j


def encode(x):
    if isinstance(x, float) and not math.isfinite(x):
        return {"dict": [["float", real(x)]]}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        data = reals(t.tolist()) if t.is_floating_point() else t.tolist()
        return {"tensor": data, "dtype": NAMES[t.dtype], "shape": list(t.shape)}
    if isinstance(x, tuple):
        return {"tuple": [encode(v) for v in x]}
    if isinstance(x, list):
        return [encode(v) for v in x]
    if isinstance(x, dict):
        for k in x:
            assert isinstance(k, (str, int)) and not isinstance(k, bool), f"key {k!r}"
        return {"dict": [[k, encode(v)] for k, v in x.items()]}
    raise TypeError(f"cannot encode {type(x).__name__}")


def decode(j):
    if j is None or isinstance(j, (bool, int, float, str)):
        return j
    if isinstance(j, list):
        return [decode(v) for v in j]
    if "tensor" in j:
        return torch.tensor(plain(j["tensor"]), dtype=DTYPES[j["dtype"]]).reshape(j["shape"])
    if "dict" in j and len(j["dict"]) == 1 and j["dict"][0][0] == "float" and j["dict"][0][1] in ("nan", "inf", "-inf"):
        return float(j["dict"][0][1])  # encode()'s non-finite float
    if "tuple" in j:
        return tuple(decode(v) for v in j["tuple"])
    return {k: decode(v) for k, v in j["dict"]}


class Deviation:
    """Largest absolute and relative difference seen across comparisons."""

    def __init__(self):
        self.abs = 0.0
        self.rel = 0.0
        self.where = ""

    def see(self, a, b, where):
        d = abs(a - b)
        r = d / max(abs(a), abs(b)) if d else 0.0
        if d > self.abs:
            self.abs, self.where = d, where
        self.rel = max(self.rel, r)


def same(c, p, where, dev, rtol=1e-6, atol=1e-12):
    """Asserts that the encoded values c (from C) and p (from Python) match:
    same kinds, keys in the same order, equal scalars; tensors of the same
    dtype and shape whose values agree within rtol (relative) + atol."""
    kind = lambda x: type(x).__name__ if not isinstance(x, dict) else next(iter(x))
    assert kind(c) == kind(p), f"{where}: C has {kind(c)} {str(c)[:80]}, Python has {kind(p)} {str(p)[:80]}"
    if isinstance(p, list):
        assert len(c) == len(p), f"{where}: C has {len(c)} items, Python {len(p)}"
        for i, (a, b) in enumerate(zip(c, p)):
            same(a, b, f"{where}[{i}]", dev, rtol, atol)
    elif isinstance(p, dict) and "dict" in p:
        ck, pk = [k for k, _ in c["dict"]], [k for k, _ in p["dict"]]
        assert ck == pk, f"{where}: C has keys {ck}, Python {pk}"
        for (k, a), (_, b) in zip(c["dict"], p["dict"]):
            same(a, b, f"{where}[{k!r}]", dev, rtol, atol)
    elif isinstance(p, dict) and "tuple" in p:
        same(c["tuple"], p["tuple"], where, dev, rtol, atol)
    elif isinstance(p, dict) and "tensor" in p:
        assert c["dtype"] == p["dtype"], f"{where}: dtype {c['dtype']} vs {p['dtype']}"
        assert c["shape"] == p["shape"], f"{where}: shape {c['shape']} vs {p['shape']}"
        a = torch.tensor(plain(c["tensor"]), dtype=torch.float64).flatten()
        b = torch.tensor(plain(p["tensor"]), dtype=torch.float64).flatten()
        for x, y in zip(a.tolist(), b.tolist()):
            if not (math.isfinite(x) and math.isfinite(y)):  # both NaN, or the same infinity
                assert x == y or (math.isnan(x) and math.isnan(y)), f"{where}: {x!r} vs {y!r}"
                continue
            dev.see(x, y, where)
            assert abs(x - y) <= rtol * max(abs(x), abs(y)) + atol, f"{where}: {x!r} vs {y!r}"
    else:  # scalars: hyperparameters must be exactly Python's
        assert c == p or (isinstance(p, float) and math.isnan(p) and math.isnan(c)), f"{where}: C {c!r}, Python {p!r}"
