"""Helpers shared by the nn parity scripts: run a C program, load its JSON,
rebuild the reference models in torch, compare state dicts."""
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F


def run_program(exe, *args):
    """Runs a C dump program writing JSON to a temporary file; returns the JSON."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        proc = subprocess.run([exe, out, *args], capture_output=True, text=True)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            raise SystemExit(f"{exe} failed with exit code {proc.returncode}")
        with open(out) as f:
            return json.load(f)


def mlp(p):
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Dropout(p), nn.Linear(128, 10))


class Net(nn.Module):
    """The CNN of nn_util.h, attribute for attribute."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.fc = nn.Linear(16 * 11 * 11, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64"}


def as_list(t):
    return t.detach().double().flatten().tolist() if t.is_floating_point() else t.flatten().tolist()


def rel_dev(a, b):
    """|a - b| relative to |b| (0 when bitwise equal)."""
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(b), 1e-30)


def compare_state(label, c_state, module, rtol=0.0):
    """Compares a dumped state (list of entries) with module.state_dict().
    Names, order, shapes and dtypes must match exactly; values bit for bit
    when rtol == 0, else within rtol relative. Returns (#failures, max rel dev)."""
    failures = 0
    worst = 0.0
    sd = module.state_dict()
    names_c = [e["name"] for e in c_state]
    names_py = list(sd.keys())
    if names_c != names_py:
        print(f"{label}: state names differ:\n  C:      {names_c}\n  Python: {names_py}")
        return 1, float("inf")
    for e in c_state:
        t = sd[e["name"]]
        where = f"{label}: {e['name']}"
        if e["shape"] != list(t.shape):
            print(f"{where}: shape {e['shape']} != Python {list(t.shape)}")
            failures += 1
            continue
        if e["dtype"] != DTYPES.get(t.dtype):
            print(f"{where}: dtype {e['dtype']} != Python {t.dtype}")
            failures += 1
            continue
        ref = as_list(t)
        got = e["values"]
        if rtol == 0.0:
            bad = [i for i, (a, b) in enumerate(zip(got, ref)) if a != b]
            if bad:
                i = bad[0]
                print(f"{where}: {len(bad)} of {len(ref)} values differ, first at {i}: C {got[i]!r} Python {ref[i]!r}")
                failures += 1
        else:
            entry_worst = max((rel_dev(a, b) for a, b in zip(got, ref)), default=0.0)
            worst = max(worst, entry_worst)
            if entry_worst > rtol:
                print(f"{where}: max relative deviation {entry_worst:.3g} > {rtol}")
                failures += 1
    return failures, worst
