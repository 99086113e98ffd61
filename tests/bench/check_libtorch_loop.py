#!/usr/bin/env python3
"""bench/compare/libtorch_loop against plain PyTorch (bench/compare/
eager_runner.py): for each workload (digits MLP, digits CNN, ResNet-18 on
the digits, char LM GPT, char LM LSTM) the first per-step training losses,
on the CPU, one thread, seed 0: 8 steps, 4 for the ResNet (about 0.5 s a
step on each side), or --steps for all.

    check_libtorch_loop.py LIBTORCH_LOOP [--steps N]

Same weights (built in PyTorch's module order after manual_seed), same
batches (numpy's RandomState shuffle, reproduced in C++), same dropout masks:
the first loss must be equal to the bit and the rest within 1e-5
(torch::optim's Adam rounds its first moment differently from Python's:
about 5e-7 over 20 steps). A wrong layer order, shuffle or hyperparameter
moves the first losses by 1e-2 or more.
"""
import argparse
import os
import sys

ROOT = os.environ.get("CTRIAL_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "compare"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import common  # noqa: E402
from hostinfo import run_json  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("libtorch_loop")
    ap.add_argument("--steps", type=int, default=None, help="steps of every workload (8; resnet 4)")
    a = ap.parse_args()
    bad = 0
    for wl in ("mlp", "cnn", "resnet", "charlm", "lstm"):
        steps = a.steps or (4 if wl == "resnet" else 8)
        hp, data, _ = common.setup(argparse.Namespace(workload=wl, config=None, data=None, hparam=[], threads=1,
                                                      device="cpu"))
        mine = run_json(common.libtorch_cmd(a.libtorch_loop, wl, hp, data, 1, steps, 0, 1, 0))["losses"]
        ref = run_json([sys.executable, os.path.join(ROOT, "bench", "compare", "eager_runner.py"), "--workload", wl,
                         "--threads", "1", "--seed", "0", "--window", "1", "--windows", str(steps),
                         "--warmup-windows", "0"])["losses"]
        diff = max(abs(x - y) for x, y in zip(mine, ref)) if len(mine) == len(ref) else float("inf")
        ok = len(mine) == steps and mine[0] == ref[0] and diff <= 1e-5
        bad += not ok
        print(f"{'ok' if ok else 'FAIL'} {wl}: first loss {mine[0]!r} (PyTorch {ref[0]!r}), "
              f"max |difference| over {steps} steps {diff:.2e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
