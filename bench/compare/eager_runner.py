#!/usr/bin/env python3
"""Issue 8's workloads in a plain PyTorch Python loop, timed in the same
steady-state windows as det_runner.py and lightning_runner.py.

    eager_runner.py --workload mlp|cnn|charlm|resnet|lstm [--config CONFIG.json] [--data PATH]
                    [--hparam K=V ...] [--device cpu|cuda] [--window N]
                    [--windows R] [--warmup-windows K] [--threads T] [--seed S]

The loop is bench/gpu/torch_eager.py's eager loop, with its own workload
code (common.build_workload: te.Digits / te.ResNet / te.CharLM, and
common.DigitsMLP for the MLP that torch_eager.py lacks): x, y = W.batch()
(numpy RandomState order, gathered from memory), moved to the device, then
W.step(x, y) (forward, loss, backward, [clipping], optimizer step,
zero_grad(set_to_none=True)); each step ends with timer.step_end(loss).
torch_eager.py itself has no MLP and does not report peak RSS, so the
driver (run.py) runs this file for all the workloads, with the same
window timer (common.Windows) and JSON line as the framework runners.

Prints one JSON line on stdout: {"system": "pytorch", "workload",
"steps_per_s": [R], "final_loss", "peak_rss_mb" (ru_maxrss of this
process), "losses", ...}.
"""
import sys

import torch

import common


def main():
    a = common.arg_parser(__doc__).parse_args()
    timer = common.Windows(a.window, a.windows, a.warmup_windows, a.device)
    hp, data, fused = common.setup(a)
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    W = common.build_workload(a.workload, hp, data, a.seed, device, fused)
    W.model.train()

    def to_device(t):
        return t.pin_memory().to(device, non_blocking=True) if cuda else t

    for _ in range(timer.total_steps):
        x, y = W.batch()
        loss = W.step(to_device(x), to_device(y))[0]
        timer.step_end(loss)
    res = timer.result("pytorch", a.workload, {"device": a.device, "fused": fused})
    print(common.json.dumps(res), flush=True)


if __name__ == "__main__":
    sys.exit(main())
