#!/usr/bin/env python3
"""bench/dist's training part in PyTorch: the same MLP, data, seed, optimizer
and global batch as `bench_dist train`, data parallel with
torch.nn.parallel.DistributedDataParallel (gloo on the CPU), launched by
torchrun. run.py runs it beside ctrial's ranks and checks the final losses.

    torchrun --standalone --nproc-per-node N bench/dist/ddp_train.py \\
        [--steps 30] [--warmup 2] [--global-batch 128] [--width 1024] [--threads 1]

With one process (N = 1, or run without torchrun) the model is trained
without DDP, as bench_dist trains one rank without a sync.

What is the same as bench_dist train (bench_dist.c):
  - the model: torch.manual_seed(0), then Linear(784, W), ReLU, Linear(W, W),
    ReLU, Linear(W, 10) in that order (ctrial's modules draw their initial
    weights as torch.nn's do, from the same generator);
  - the data: each rank torch.manual_seed(1 + rank), then randn(B/N, 784)
    and randint(0, 10, (B/N,)): one fixed batch per rank, no loading;
  - the step: cross-entropy of the forward, backward, SGD(lr=0.01) step,
    zero_grad(set_to_none=True);
  - the timing: --warmup untimed steps, a barrier, --steps timed steps, a
    barrier; samples/s = B * steps / that wall time;
  - DDP's defaults otherwise (25 MiB buckets, the first 1 MiB; gradients
    copied into the buckets: gradient_as_bucket_view=False).
Per step, on rank 0: forward (with the loss), backward (DDP's all-reduce
runs inside it, launched by its hooks; its wait is at the end of
backward), the optimizer step and zero_grad, as bench_dist reports them.

Prints one JSON line on rank 0, with the fields of bench_dist train.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--global-batch", type=int, default=128)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.set_num_threads(a.threads)
    if world > 1:
        dist.init_process_group("gloo")
    if a.global_batch % world:
        raise SystemExit(f"ddp_train.py: global batch {a.global_batch} does not split over {world} ranks")
    local = a.global_batch // world

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, a.width),
                                torch.nn.ReLU(), torch.nn.Linear(a.width, 10))
    net = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    torch.manual_seed(1 + rank)
    x = torch.randn(local, 784)
    y = torch.randint(0, 10, (local,))

    phase = [0.0] * 4  # forward, backward, optimizer, zero_grad
    loss_value = 0.0
    t0 = 0.0
    for i in range(-a.warmup, a.steps):
        if i == 0:
            if world > 1:
                dist.barrier()
            t0 = time.perf_counter()
        t = [time.perf_counter()]
        loss = F.cross_entropy(net(x), y)
        t.append(time.perf_counter())
        loss.backward()
        t.append(time.perf_counter())
        opt.step()
        t.append(time.perf_counter())
        opt.zero_grad(set_to_none=True)
        t.append(time.perf_counter())
        if i == a.steps - 1:
            loss_value = loss.item()
        if i >= 0:
            for k in range(4):
                phase[k] += t[k + 1] - t[k]
    if world > 1:
        dist.barrier()
    wall = time.perf_counter() - t0
    if rank == 0:
        ms = [1e3 * p / a.steps for p in phase]
        print(json.dumps({
            "mode": "train", "system": "torch DDP (gloo)" if world > 1 else "torch", "ranks": world,
            "threads": a.threads, "width": a.width, "global_batch": a.global_batch, "steps": a.steps,
            "samples_per_s": a.global_batch * a.steps / wall, "ms_per_step": 1e3 * wall / a.steps,
            "forward_ms": ms[0], "backward_ms": ms[1], "sync_ms": 0.0, "optimizer_ms": ms[2], "zero_grad_ms": ms[3],
            "final_loss": loss_value, "torch": torch.__version__}), flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
