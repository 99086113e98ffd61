#!/usr/bin/env python3
"""ct_pth_save / ct_pth_load beside torch.save / torch.load(weights_only=True)
on the same checkpoints, in one run, as ratios.

    .venv/bin/python bench/ckpt/run.py [BUILD_DIR] [--dir /tmp] [--runs 3] [--rounds 2] [--json PATH]

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
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from hostinfo import load, machine, run_json  # noqa: E402

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.environ.get("CTRIAL_BUILD_DIR", "build"))
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scenarios", default="tensors,adam")
    ap.add_argument("--json", metavar="PATH", help="also write every timed operation's figures to PATH as JSON")
    ap.add_argument("--side", nargs="+", help=argparse.SUPPRESS)  # internal: the torch side
    args = ap.parse_args()
    if args.side:
        return torch_side(args.side[1], args.side[2:])
    prog = os.path.join(os.path.abspath(args.build), "bench", "ckpt", "bench_ckpt")
    if not os.path.exists(prog):
        sys.exit(f"{prog} not found: build it first (ninja -C {args.build} bench_ckpt)")
    import torch
    me = [sys.executable, os.path.abspath(__file__), "--side", "torch"]
    ncpu, model = machine()
    load_start = load()
    print(f"torch {torch.__version__}; {ncpu} CPUs, {model}; files in {args.dir}; median of {args.runs} runs x "
          f"{args.rounds} rounds after a warm-up per process; load average {load_start}\n")
    print("| checkpoint | op | MB | ctrial MB/s | torch MB/s | ratio | ctrial extra mem | torch extra mem |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    verdicts, rows = [], []
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
            cs = [x for r in res["c_" + op] for x in r["seconds"]]
            ts = [x for r in res["t_" + op] for x in r["seconds"]]
            crates, trates = [mb / x for x in cs], [mb / x for x in ts]
            rows.append({"scenario": scenario, "op": op, "mb": mb, "bytes": nbytes,
                         "ctrial_mb_per_s": crates, "torch_mb_per_s": trates,
                         "ratio": statistics.median(crates) / statistics.median(trates),
                         "ctrial_seconds": cs, "torch_seconds": ts,
                         "ctrial_extra_mem_pct": mem("c_save") if op == "save" else None,
                         "torch_extra_mem_pct": mem("t_save") if op == "save" else None})
            verdicts.append(f"{scenario} {op}: ctrial >= 1.0x torch: {'yes' if c >= t else 'NO'}")
        verdicts.append(f"{scenario} save: extra memory < 10%: {'yes' if mem('c_save') < 10 else 'NO'}")
        for f in (cfile, tfile):
            os.remove(f)
    print()
    print("\n".join(verdicts))
    if args.json:
        out = {"benchmark": "ckpt", "rows": rows, "meta": {
            "torch_version": torch.__version__, "cpus": ncpu, "cpu_model": model, "dir": args.dir,
            "runs": args.runs, "rounds": args.rounds, "scenarios": args.scenarios,
            "load_average_start": load_start, "load_average_end": load(),
            "notes": {
                "mb": "checkpoint bytes / 1e6; MB/s: those over one timed operation's seconds",
                "samples": "one per timed operation: --runs per process after its warm-up, --rounds processes "
                           "per side, in round order",
                "ratio": "median(ctrial_mb_per_s) / median(torch_mb_per_s); the table's MB/s are MB / "
                         "median(seconds), the same figures when the sample count is odd (with an even count "
                         "they can differ in the last digits)",
                "extra_mem_pct": "saves only: the largest (peak RSS during a save - RSS before it) over all "
                                 "saves, as a % of the checkpoint bytes; null for loads"}}}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
