#!/usr/bin/env python3
"""tests/ops/parity.py — forward and gradient parity of tensor.h with PyTorch.

    parity.py PATH/TO/ops_parity_prog [CASE...]

Runs the C program (see parity.h), recomputes every case with torch (the
cases_*.py twins) and compares each recorded tensor: dtype, shape,
requires_grad, strides where the case marks a view, and values. Both sides run
the same libtorch with one thread, so results are expected to be bit-identical;
the tolerance allowed is |c - py| <= 1e-7 + 1e-6 * |py| (NaN == NaN). Prints
the largest deviation per case and exits non-zero if any case fails.
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import pyharness  # noqa: E402
from pyharness import CASES, Rec  # noqa: E402
import cases_create, cases_shape, cases_math, cases_nn, cases_autograd  # noqa: E402,F401

RTOL, ATOL = 1e-6, 1e-7
FLOAT_DTYPES = {"float32", "float64"}
HALF_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def as_float(v):
    return float(v)  # a number, or "nan", "inf", "-inf"


def half_to_float(bits, dtype):
    signed = [b - 65536 if b >= 32768 else b for b in bits]
    return torch.tensor(signed, dtype=torch.int16).view(HALF_DTYPES[dtype]).to(torch.float64).tolist()


class Stats:
    def __init__(self):
        self.compared = 0
        self.max_abs = 0.0
        self.max_rel = 0.0

    def add(self, c, p):
        d = abs(c - p)
        self.max_abs = max(self.max_abs, d)
        if p != 0:
            self.max_rel = max(self.max_rel, d / abs(p))


def compare_floats(key, cs, ps, stats):
    bad = []
    for i, (c, p) in enumerate(zip(cs, ps)):
        if math.isnan(p) or math.isnan(c):
            if not (math.isnan(p) and math.isnan(c)):
                bad.append((i, c, p))
            continue
        if math.isinf(p) or math.isinf(c):
            if c != p:
                bad.append((i, c, p))
            continue
        stats.add(c, p)
        if abs(c - p) > ATOL + RTOL * abs(p):
            bad.append((i, c, p))
    if bad:
        shown = ", ".join(f"[{i}] C {c!r} vs torch {p!r}" for i, c, p in bad[:4])
        return [f"{key}: {len(bad)} of {len(ps)} values differ: {shown}"]
    return []


def compare_tensor(key, c, p, stats):
    if c is None:
        return [f"{key}: C recorded no tensor (no gradient?), torch has {p.dtype} {p.shape}"]
    errs = []
    if c["dtype"] != p.dtype:
        errs.append(f"{key}: dtype {c['dtype']}, torch gives {p.dtype}")
    if c["shape"] != p.shape:
        return errs + [f"{key}: shape {c['shape']}, torch gives {p.shape}"]
    if c["requires_grad"] != p.requires_grad:
        errs.append(f"{key}: requires_grad {c['requires_grad']}, torch gives {p.requires_grad}")
    if p.strides is not None and c["strides"] != p.strides:
        errs.append(f"{key}: strides {c['strides']}, torch gives {p.strides} (a view must stay a view)")
    if p.data is None or errs:
        return errs
    stats.compared += 1
    cd = c["data"]
    if p.dtype in HALF_DTYPES and c["dtype"] == p.dtype:
        return compare_floats(key, half_to_float(cd, p.dtype), half_to_float(p.data, p.dtype), stats)
    if p.dtype in FLOAT_DTYPES:
        return compare_floats(key, [as_float(v) for v in cd], p.data, stats)
    if cd != p.data:
        diff = [(i, a, b) for i, (a, b) in enumerate(zip(cd, p.data)) if a != b]
        shown = ", ".join(f"[{i}] C {a} vs torch {b}" for i, a, b in diff[:4])
        return [f"{key}: {len(diff)} of {len(cd)} values differ: {shown}"]
    return []


def compare_value(key, c, p, stats):
    if isinstance(p, bool):
        return [] if c is p else [f"{key}: C gives {c!r}, torch {p!r}"]
    if isinstance(p, int):
        return [] if c == p and not isinstance(c, bool) else [f"{key}: C gives {c!r}, torch {p!r}"]
    if isinstance(p, float):
        return compare_floats(key, [as_float(c)], [p], stats) if c is not None else [f"{key}: missing"]
    return [] if c == p else [f"{key}: C gives {c!r}, torch {p!r}"]


def compare_case(name, c_case, expected):
    stats = Stats()
    errs = [f"C error: {e}" for e in c_case["errors"]]
    if c_case["leaked"] != 0:
        errs.append(f"{c_case['leaked']} tensor handle(s) outlived the case's scope")
    c_all = {**c_case["t"], **c_case["v"]}
    for key, p in expected.items():
        if key not in c_all:
            if not any(e.startswith(f"C error: {key}") for e in errs):
                errs.append(f"{key}: not recorded by the C program")
            continue
        c = c_all[key]
        if isinstance(p, torch.Tensor):
            p = Rec(p)
        if isinstance(p, Rec):
            errs += compare_tensor(key, c, p, stats)
        elif p is None:
            if c is not None:
                errs.append(f"{key}: C has a tensor, torch has None")
        else:
            errs += compare_value(key, c, p, stats)
    for key in c_all:
        if key not in expected:
            errs.append(f"{key}: recorded by C but not checked by the Python twin")
    return stats, errs


def self_check():
    """The comparator must reject each of these changes to a matching record."""
    import copy
    from pyharness import V
    good = {"t": {"a": {"dtype": "float32", "shape": [3], "strides": [1], "requires_grad": True,
                        "contiguous": True, "data": [1.0, 2.0, "nan"]},
                  "h": {"dtype": "float16", "shape": [1], "strides": [1], "requires_grad": False,
                        "contiguous": True, "data": [0x3C00]},
                  "g": None},
            "v": {"n": 3, "ok": True, "f": 0.5}, "errors": [], "leaked": 0}
    expected = {"a": V(torch.tensor([1.0, 2.0, NAN_], requires_grad=True)), "h": torch.ones(1, dtype=torch.float16),
                "g": None, "n": 3, "ok": True, "f": 0.5}
    if compare_case("self", good, expected)[1]:
        return ["a matching record was rejected: " + "; ".join(compare_case("self", good, expected)[1])]
    mutations = {
        "value off by 2e-6 relative": lambda c: c["t"]["a"]["data"].__setitem__(1, 2.0 * (1 + 2e-6)),
        "nan replaced": lambda c: c["t"]["a"]["data"].__setitem__(2, 1.0),
        "half bits": lambda c: c["t"]["h"]["data"].__setitem__(0, 0x3C01),
        "dtype": lambda c: c["t"]["a"].__setitem__("dtype", "float64"),
        "shape": lambda c: c["t"]["a"].__setitem__("shape", [3, 1]),
        "strides": lambda c: c["t"]["a"].__setitem__("strides", [2]),
        "requires_grad": lambda c: c["t"]["a"].__setitem__("requires_grad", False),
        "grad present": lambda c: c["t"].__setitem__("g", c["t"]["h"]),
        "int value": lambda c: c["v"].__setitem__("n", 4),
        "bool as int": lambda c: c["v"].__setitem__("ok", 1),
        "float value": lambda c: c["v"].__setitem__("f", 0.5001),
        "missing key": lambda c: c["v"].pop("n"),
        "extra key": lambda c: c["v"].__setitem__("extra", 1),
        "C error": lambda c: c["errors"].append("x: failed"),
        "leak": lambda c: c.__setitem__("leaked", 1),
    }
    missed = []
    for what, mutate in mutations.items():
        c = copy.deepcopy(good)
        mutate(c)
        if not compare_case("self", c, expected)[1]:
            missed.append(what)
    return [f"the comparator accepts a changed record ({m})" for m in missed]


NAN_ = float("nan")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    prog, only = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "parity.json")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        run = subprocess.run([prog, path, *only], capture_output=True, text=True, env=env, timeout=300)
        if run.returncode != 0:
            print(f"FAIL: {prog} exited {run.returncode}\n{run.stdout}\n{run.stderr}")
            return 1
        with open(path) as f:
            doc = json.load(f)
    failures = 0
    for problem in self_check():
        print(f"FAIL self-check: {problem}")
        failures += 1
    if doc["threads"] != torch.get_num_threads():
        print(f"FAIL: C runs {doc['threads']} threads, torch {torch.get_num_threads()}")
        failures += 1
    if doc["torch_version"] != torch.__version__.split("+")[0]:
        print(f"WARNING: C links libtorch {doc['torch_version']}, Python has {torch.__version__}")
    names = only or list(CASES)
    for extra in sorted(set(doc["cases"]) - set(CASES)):
        print(f"FAIL {extra}: C case without a Python twin")
        failures += 1
    print(f"{'case':28} {'tensors':>7} {'max |dev|':>11} {'max rel':>11}")
    for name in names:
        if name not in CASES:
            print(f"FAIL {name}: no such case")
            failures += 1
            continue
        if name not in doc["cases"]:
            print(f"FAIL {name}: not run by the C program")
            failures += 1
            continue
        torch.manual_seed(0)
        try:
            expected = CASES[name]()
        except Exception:  # a broken twin is a failure, not a crash of the whole run
            print(f"FAIL {name}: the Python twin raised\n{traceback.format_exc()}")
            failures += 1
            continue
        stats, errs = compare_case(name, doc["cases"][name], expected)
        status = "ok" if not errs else "FAIL"
        print(f"{name:28} {stats.compared:7d} {stats.max_abs:11.3g} {stats.max_rel:11.3g}  {status}")
        for e in errs:
            print(f"    {e}")
        failures += bool(errs)
    print(f"{len(names) - failures} of {len(names)} cases agree with torch {torch.__version__}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
