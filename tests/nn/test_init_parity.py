"""Default initialisation parity: for each case of nn_init_dump.c, the same
seed and the same constructors in torch must give bit-identical state dicts,
with the same names in the same order.

usage: test_init_parity.py NN_INIT_DUMP"""
import sys

import torch
import torch.nn as nn

from nn_parity import Net, compare_state, mlp, run_program


def mixed():
    return nn.Sequential(
        nn.Embedding(30, 6, padding_idx=0), nn.LayerNorm(6), nn.Linear(6, 12), nn.GELU(),
        nn.Conv1d(12, 4, 3), nn.SiLU(), nn.BatchNorm1d(4), nn.Tanh(), nn.Dropout(0.1),
        nn.Conv2d(2, 3, 2), nn.Sigmoid(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3, 1, bias=False))


# name -> (seed, constructor); in step with CASES in nn_init_dump.c
CASES = {
    "linear": (0, lambda: nn.Linear(20, 30)),
    "linear_nobias": (1, lambda: nn.Linear(7, 5, bias=False)),
    "linear_large": (2, lambda: nn.Linear(784, 128)),
    "conv1d": (3, lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1)),
    "conv1d_groups_nobias": (4, lambda: nn.Conv1d(4, 6, 5, groups=2, bias=False)),
    "conv2d": (5, lambda: nn.Conv2d(3, 8, 5)),
    "conv2d_groups": (6, lambda: nn.Conv2d(4, 8, 3, groups=4, dilation=2, padding=2)),
    "bn1d": (7, lambda: nn.BatchNorm1d(10)),
    "bn2d_noaffine": (8, lambda: nn.BatchNorm2d(8, affine=False)),
    "bn2d_notrack": (9, lambda: nn.BatchNorm2d(8, track_running_stats=False)),
    "layernorm": (10, lambda: nn.LayerNorm(16)),
    "embedding_pad": (11, lambda: nn.Embedding(50, 8, padding_idx=3)),
    "embedding": (12, lambda: nn.Embedding(10, 4)),
    "mlp": (13, lambda: mlp(0.5)),
    "cnn": (14, Net),
    "mixed": (15, mixed),
    "big_seed": (123456789012, lambda: nn.Linear(20, 30)),
}


def main():
    data = run_program(sys.argv[1])
    failures = 0
    seen = []
    for case in data["cases"]:
        name = case["name"]
        seen.append(name)
        seed, make = CASES[name]
        torch.manual_seed(seed)
        m = make()
        f, _ = compare_state(name, case["state"], m)
        failures += f
        py_params = [n for n, _ in m.named_parameters()]
        if case["parameters"] != py_params:
            print(f"{name}: parameter names {case['parameters']} != Python {py_params}")
            failures += 1
        n_elem = sum(p.numel() for p in m.parameters())
        if case["num_param_elements"] != n_elem:
            print(f"{name}: {case['num_param_elements']} parameter elements != Python {n_elem}")
            failures += 1
        if case["type"] != type(m).__name__:
            print(f"{name}: type {case['type']} != Python {type(m).__name__}")
            failures += 1
        entries = sum(len(e["values"]) for e in case["state"])
        print(f"{name}: {len(case['state'])} state entries, {entries} values compared")
    if sorted(seen) != sorted(CASES):
        print(f"cases differ: C {seen}, Python {list(CASES)}")
        failures += 1
    print("init parity:", "FAILED" if failures else "bit-identical", f"({failures} failures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
