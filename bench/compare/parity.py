#!/usr/bin/env python3
"""Same model, same data: the first STEPS training losses of
det_runner.py, lightning_runner.py and the hand-written libtorch loop
(libtorch_loop, when built) against plain PyTorch
(bench/gpu/torch_eager.py) for each workload, on the CPU, seed 0, one
thread.

    parity.py [--steps 20] [--workloads mlp,cnn,charlm,resnet,lstm] [--tol 1e-5] [--libtorch-loop PATH]

cnn, charlm, resnet and lstm: torch_eager.py itself is run (--window 1;
its workloads digits, charlm, resnet, and charlm with charlm_lstm.json).
mlp: torch_eager.py has no MLP, so the reference is its own loop and step
code (te.Digits.step) with examples/mnist's MLP (common.DigitsMLP), in
this process. Every
runner is run with --window 1 --warmup-windows 0, so its "losses" are the
per-step losses. Prints one JSON line per workload and exits 1 when a
difference exceeds --tol. The Python frameworks are bit-identical to plain
PyTorch; so is the libtorch loop on resnet (SGD), and on the other
workloads it differs in the last bits (torch::optim's Adam/AdamW round the
first moment differently from Python's), about 5e-7 over 20 steps.
"""
import argparse
import json
import os
import sys

import torch

import common

sys.path.insert(0, os.path.join(common.ROOT, "bench"))
from hostinfo import run_json  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def eager_mlp(steps):
    torch.set_num_threads(1)
    a = argparse.Namespace(workload="mlp", config=None, data=None, hparam=[], threads=1, device="cpu")
    hp, data, fused = common.setup(a)
    W = common.build_workload("mlp", hp, data, 0, torch.device("cpu"), fused)
    W.model.train()
    return [W.step(*W.batch())[0].item() for _ in range(steps)]


def find_libtorch_loop():
    for d in ("build", "build-ddp"):
        p = os.path.join(common.ROOT, d, "bench", "compare", "libtorch_loop")
        if os.path.isfile(p):
            return p
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--workloads", default=",".join(common.WORKLOADS))
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--libtorch-loop", default=None, help="the libtorch_loop program (default: build/bench/compare/"
                    "libtorch_loop, else build-ddp/...; skipped when neither is built)")
    a = ap.parse_args()
    a.libtorch_loop = a.libtorch_loop or find_libtorch_loop()
    py = sys.executable
    bad = False
    for wl in a.workloads.split(","):
        w = common.WORKLOADS[wl]
        if wl == "mlp":
            ref = eager_mlp(a.steps)
        else:
            cmd = [py, os.path.join(common.ROOT, "bench/gpu/torch_eager.py"),
                   "--workload", w["eager"],
                   "--config", os.path.join(common.ROOT, w["config"]), "--data", os.path.join(common.ROOT, w["data"]),
                   "--device", "cpu", "--threads", "1", "--seed", "0",
                   "--window", "1", "--windows", str(a.steps), "--warmup-windows", "0"]
            for k, v in w["hparams"].items():
                cmd += ["--hparam", f"{k}={json.dumps(v)}"]
            ref = run_json(cmd)["losses"]
        row = {"workload": wl, "steps": a.steps, "eager_first": ref[0], "eager_last": ref[-1]}
        runs = [(system, [py, os.path.join(HERE, script), "--workload", wl, "--device", "cpu", "--threads", "1",
                          "--seed", "0", "--window", "1", "--windows", str(a.steps), "--warmup-windows", "0"])
                for system, script in (("determined", "det_runner.py"), ("lightning", "lightning_runner.py"))]
        if a.libtorch_loop:
            hp, data, _ = common.setup(argparse.Namespace(workload=wl, config=None, data=None, hparam=[],
                                                          threads=1, device="cpu"))
            runs.append(("libtorch", common.libtorch_cmd(a.libtorch_loop, wl, hp, data, 1, a.steps, 0, 1, 0)))
        for system, cmd in runs:
            out = run_json(cmd)
            got = out["losses"]
            diff = max(abs(x - y) for x, y in zip(ref, got)) if len(got) == len(ref) else float("inf")
            row[system + "_first"] = got[0]
            row[system + "_max_abs_diff"] = diff
            bad |= not diff <= a.tol
        print(json.dumps(row), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
