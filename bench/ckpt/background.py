"""Training time lost per checkpoint: written at once against written in the
background (ct_fit_opts.background_checkpoints), on the examples' own
programs as a user runs them.

For each workload, each round runs three modes, in an order that rotates
from round to round: `none` (checkpoints only at the end), `sync`
(checkpoints every --every batches, written at once) and `background` (the
same checkpoints from a snapshot, written by a thread while training goes
on). Each run trains --batches batches with validation off; the figure is
its wall time, and the loop's own account of the seconds training stood
still for checkpoints (metrics.jsonl's timings.checkpoint_s: the write
itself when sync; the snapshot and any wait for the writer in the
background). Per checkpoint (those every --every batches before the end;
the end's is in all three and in no training line), the table gives the
medians over the rounds of both: the time training stood still, with the
ratio background/sync (the goal: at most 0.10), and the wall time lost,
(mode - none) / checkpoints, which also counts the writer thread's share of
the CPUs and is at the mercy of a noisy machine.

    .venv/bin/python bench/ckpt/background.py build --rounds 3

Workloads: charlm's GPT (examples/charlm, 6 layers of width 384: 10.8M
parameters, 130 MB with AdamW's state) and examples/resnet (ResNet-18 on
the digits: 11.2M parameters, 90 MB with SGD's momentum).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORKLOADS = {
    "charlm_gpt": ("examples/charlm/charlm", "examples/charlm/charlm.json",
                   ["--hparam", "n_layer=6", "--hparam", "n_embd=384", "--hparam", "n_head=6",
                    "--hparam", "sample_tokens=0"]),
    "resnet": ("examples/resnet/resnet", "examples/resnet/resnet.json", []),
}


def run_once(build, workload, mode, batches, every, work):
    exe, cfg, extra = WORKLOADS[workload]
    out = os.path.join(work, f"{workload}_{mode}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [os.path.join(build, exe), "--config", os.path.join(ROOT, cfg), "--output", out, "--quiet",
           "--threads", "1", "--max-length", str(batches), "--validation-period", "never",
           "--checkpoint-policy", "none", "--checkpoint-period", str(every) if mode != "none" else "never", *extra]
    if mode == "background":
        cmd.append("--background-checkpoints")
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}\nfailed ({p.returncode}): {p.stderr[-2000:]}")
    # The loop's own account: the seconds training stood still for the
    # checkpoints before the end (each training line's checkpoint_s; the
    # end's comes after the last line).
    with open(os.path.join(out, "metrics.jsonl")) as f:
        stood = sum(json.loads(l).get("timings", {}).get("checkpoint_s", 0.0) for l in f if '"training"' in l)
    shutil.rmtree(out, ignore_errors=True)
    return dt, stood


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=24)
    ap.add_argument("--every", type=int, default=6)
    ap.add_argument("--workloads", default="charlm_gpt,resnet")
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--json", metavar="PATH")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    work = tempfile.mkdtemp(prefix="bench_bg_ckpt_", dir=a.dir)
    n_ckpt = (a.batches - 1) // a.every  # every --every batches, before the end
    modes = ["none", "sync", "background"]
    rows = []
    for w in a.workloads.split(","):
        times = {m: [] for m in modes}
        stood = {m: [] for m in modes}
        for r in range(a.rounds):
            order = modes[r % 3:] + modes[:r % 3]
            for m in order:
                dt, st = run_once(build, w, m, a.batches, a.every, work)
                times[m].append(dt)
                stood[m].append(st / n_ckpt)
        lost = {m: [(t - n) / n_ckpt for t, n in zip(times[m], times["none"])] for m in ("sync", "background")}
        sync, bg = statistics.median(lost["sync"]), statistics.median(lost["background"])
        s_sync, s_bg = statistics.median(stood["sync"]), statistics.median(stood["background"])
        rows.append({"workload": w, "wall_s": {m: statistics.median(times[m]) for m in modes},
                     "lost_per_checkpoint_s": {"sync": sync, "background": bg},
                     "stood_per_checkpoint_s": {"sync": s_sync, "background": s_bg},
                     "ratio": s_bg / s_sync if s_sync > 0 else None, "rounds": times, "stood": stood})
    shutil.rmtree(work, ignore_errors=True)
    print(f"{a.batches} batches, a checkpoint every {a.every} ({n_ckpt} before the end), {a.rounds} rounds; "
          f"medians")
    print("| workload | training stood per checkpoint: sync | background | background/sync | wall none / sync / "
          "background | wall lost per checkpoint: sync / background |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        wall, lost, stood = row["wall_s"], row["lost_per_checkpoint_s"], row["stood_per_checkpoint_s"]
        ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "n/a"
        print(f"| {row['workload']} | {stood['sync'] * 1000:.0f} ms | {stood['background'] * 1000:.1f} ms | {ratio} | "
              f"{wall['none']:.2f} / {wall['sync']:.2f} / {wall['background']:.2f} s | "
              f"{lost['sync'] * 1000:.0f} / {lost['background'] * 1000:.0f} ms |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"benchmark": "ckpt_background", "rows": rows, "meta": vars(a)}, f, indent=1)


if __name__ == "__main__":
    main()
