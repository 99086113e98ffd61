#!/usr/bin/env python3
"""ct_pth_save / ct_pth_load beside torch.save / torch.load(weights_only=True)
on the same checkpoints, in one run, as ratios.

    .venv/bin/python bench/ckpt/run.py [BUILD_DIR] [--dir /tmp] [--runs 3] [--rounds 2]

BUILD_DIR (or $CTRIAL_BUILD_DIR, else build) holds bench/ckpt/bench_ckpt;
this script builds nothing. Two checkpoints, built alike on both sides:
"tensors" (40 float32 tensors of 2 to 32 MB, 533 MB) and "adam" (a 12-layer
transformer-shaped model with its Adam state, 504 MB in 469 tensors).

Each side runs in its own process (ctrial: bench_ckpt; torch: this script
with --side torch): one warm-up, then --runs timed operations; --rounds
repeats both sides, alternating which goes first. Saves write to --dir
(overwriting, fsync off on both sides: torch.save does not fsync); both
sides then load the file torch.save wrote, from the page cache. The table
gives the median MB/s (checkpoint bytes over seconds), the ratio
ctrial/torch (target >= 1.0) and the extra memory a save took: peak RSS
during the save (VmHWM, reset through /proc/self/clear_refs) minus RSS
before it, as a % of the checkpoint (target < 10%).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

TENSOR_MB = [2, 4, 8, 16, 32, 3, 6, 12, 24, 20]
LAYER = [("attn.qkv.weight", (1536, 512)), ("attn.qkv.bias", (1536,)), ("attn.out.weight", (512, 512)),
         ("attn.out.bias", (512,)), ("ln1.weight", (512,)), ("ln1.bias", (512,)),
         ("mlp.fc1.weight", (2048, 512)), ("mlp.fc1.bias", (2048,)), ("mlp.fc2.weight", (512, 2048)),
         ("mlp.fc2.bias", (512,)), ("ln2.weight", (512,)), ("ln2.bias", (512,))]


# ---- the torch side (runs in its own process) --------------------------------------------------


def build(scenario):
    """The checkpoint bench_ckpt.c builds, in Python."""
    import torch
    torch.manual_seed(0)
    if scenario == "tensors":
        return {f"tensor{i:02d}": torch.randn(TENSOR_MB[i % 10] * 256, 1024) for i in range(40)}
    shapes = [("embed.weight", (8192, 512))] + [(f"layers.{l}.{n}", s) for l in range(12) for n, s in LAYER]
    model = {n: torch.randn(s) for n, s in shapes}
    state = {i: {"step": torch.tensor(100.0), "exp_avg": torch.randn(s), "exp_avg_sq": torch.randn(s)}
             for i, (_, s) in enumerate(shapes)}
    group = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "amsgrad": False,
             "params": list(range(len(shapes)))}
    return {"model": model, "optimizer": {"state": state, "param_groups": [group]}, "epoch": 3}


def status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return -1


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def torch_side(op, args):
    import torch
    runs = int(args[-1])
    seconds, extra = [], []
    if op == "save":
        scenario, path = args[0], args[1]
        v = build(scenario)
        nbytes = sum(t.numel() * t.element_size() for t in tensors_of(v))
    for r in range(-1, runs):
        reset_peak()
        before = status_bytes("VmRSS")
        t0 = time.perf_counter()
        if op == "save":
            torch.save(v, path)
        else:
            loaded = torch.load(args[0], weights_only=True)
        dt = time.perf_counter() - t0
        if r >= 0:
            seconds.append(dt)
            extra.append(status_bytes("VmHWM") - before)
        if op == "load":
            del loaded
    out = {"seconds": seconds, "extra_rss": extra}
    if op == "save":
        out.update(bytes=nbytes, file_bytes=os.path.getsize(path))
    print(json.dumps(out))


def tensors_of(v):
    import torch
    if isinstance(v, torch.Tensor):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from tensors_of(x)
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from tensors_of(x)


# ---- the driver -------------------------------------------------------------------------------------


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), model)
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs, {model}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.environ.get("CTRIAL_BUILD_DIR", "build"))
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scenarios", default="tensors,adam")
    ap.add_argument("--side", nargs="+", help=argparse.SUPPRESS)  # internal: the torch side
    args = ap.parse_args()
    if args.side:
        return torch_side(args.side[1], args.side[2:])
    prog = os.path.join(os.path.abspath(args.build), "bench", "ckpt", "bench_ckpt")
    if not os.path.exists(prog):
        sys.exit(f"{prog} not found: build it first (ninja -C {args.build} bench_ckpt)")
    import torch
    me = [sys.executable, os.path.abspath(__file__), "--side", "torch"]
    print(f"torch {torch.__version__}; {machine()}; files in {args.dir}; median of {args.runs} runs x "
          f"{args.rounds} rounds after a warm-up per process; load average "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}\n")
    print("| checkpoint | op | MB | ctrial MB/s | torch MB/s | ratio | ctrial extra mem | torch extra mem |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    verdicts = []
    for scenario in args.scenarios.split(","):
        cfile = os.path.join(args.dir, f"ctrial_{scenario}.pth")
        tfile = os.path.join(args.dir, f"torch_{scenario}.pth")
        res = {k: [] for k in ("c_save", "t_save", "c_load", "t_load")}
        for rnd in range(args.rounds):
            sides = [("c_save", [prog, "save", scenario, cfile, str(args.runs)]),
                     ("t_save", me + ["save", scenario, tfile, str(args.runs)])]
            for key, cmd in sides if rnd % 2 == 0 else sides[::-1]:
                res[key].append(run_json(cmd))
            sides = [("c_load", [prog, "load", tfile, str(args.runs)]),
                     ("t_load", me + ["load", tfile, str(args.runs)])]
            for key, cmd in sides if rnd % 2 == 0 else sides[::-1]:
                res[key].append(run_json(cmd))
        nbytes = res["c_save"][0]["bytes"]
        assert nbytes == res["t_save"][0]["bytes"], "the two sides built different checkpoints"
        mb = nbytes / 1e6

        def rate(key):
            return mb / statistics.median([s for r in res[key] for s in r["seconds"]])

        def mem(key):
            return 100 * max(e for r in res[key] for e in r["extra_rss"]) / nbytes

        for op in ("save", "load"):
            c, t = rate("c_" + op), rate("t_" + op)
            cm = f"{mem('c_save'):.2f}%" if op == "save" else ""
            tm = f"{mem('t_save'):.2f}%" if op == "save" else ""
            print(f"| {scenario} | {op} | {mb:.0f} | {c:,.0f} | {t:,.0f} | {c / t:.2f}x | {cm} | {tm} |")
            verdicts.append(f"{scenario} {op}: ctrial >= 1.0x torch: {'yes' if c >= t else 'NO'}")
        verdicts.append(f"{scenario} save: extra memory < 10%: {'yes' if mem('c_save') < 10 else 'NO'}")
        for f in (cfile, tfile):
            os.remove(f)
    print()
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
