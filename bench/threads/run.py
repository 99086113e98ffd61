#!/usr/bin/env python3
"""The default intra-op thread count against fixed ones, idle and busy, in
one run, as ratios to the best.

    .venv/bin/python bench/threads/run.py [BUILD_DIR] [--rounds 3] [--batches 150] [--loads 0,1,2]

BUILD_DIR (or $CTRIAL_BUILD_DIR, else build) holds examples/mnist/mnist;
this script builds nothing. It trains the mnist example's CNN and MLP
(examples/mnist/*.json on the bundled digits, --batches batches for the
CNN and 5 times as many for the MLP, no validation or checkpoint until the
end) with:

    1        --threads 1
    all      --threads <CPUs>: libtorch's own default (one per core)
    default  no --threads and no OMP_NUM_THREADS: ctrial's default (the
             CPUs other programs leave idle, base/cpus.c)

while --loads other programs keep CPUs busy (each load is that many
processes spinning in a loop, started a second before and stopped after).
Every round runs each setting once, in turn. The table gives the median
wall time of the whole program, its ratio to the best setting at that load
(1.00 = the best), and the threads the default chose.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from hostinfo import ROOT, load, machine  # noqa: E402

# The model's config, and batches per run as a multiple of --batches (the
# MLP's batches are short: more of them, so that start-up is not the run).
MODELS = {"cnn": ("examples/mnist/mnist_cnn.json", 1), "mlp": ("examples/mnist/mnist_mlp.json", 5)}


def spinners(n):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def run(exe, config, batches, setting, cpus, out):
    cmd = [exe, "--config", config, "--output", out, "--overwrite", "--max-length", str(batches),
           "--validation-period", "never", "--checkpoint-period", "never"]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if setting == "1":
        cmd += ["--threads", "1"]
    elif setting == "all":
        cmd += ["--threads", str(cpus)]
    start = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    secs = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stdout}{p.stderr}")
    m = re.search(r"(\d+) intra-op threads? per rank", p.stdout)
    return secs, int(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.environ.get("CTRIAL_BUILD_DIR", "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=150)
    ap.add_argument("--loads", default=None, help="comma-separated spinner counts (0..CPUs)")
    a = ap.parse_args()
    cpus, model = machine()
    loads = [int(x) for x in a.loads.split(",")] if a.loads else list(range(cpus + 1))
    exe = os.path.join(os.path.abspath(a.build), "examples", "mnist", "mnist")
    out = os.path.join("/tmp", f"ctrial_bench_threads_{os.getpid()}")
    print(f"# {cpus} CPUs ({model}); load average before: {load()}; {a.rounds} rounds, {a.batches} batches")
    print(f"{'model':5} {'busy':>4} {'setting':8} {'median s':>9} {'vs best':>8} {'threads':>8}")
    worst_default = 0.0
    for name, (config, scale) in MODELS.items():
        for busy in loads:
            procs = spinners(busy)
            time.sleep(1.0)
            times = {s: [] for s in ("1", "all", "default")}
            chosen = []
            try:
                for r in range(a.rounds):
                    order = list(times) if r % 2 == 0 else list(reversed(times))
                    for s in order:
                        secs, threads = run(exe, config, a.batches * scale, s, cpus, out)
                        times[s].append(secs)
                        if s == "default":
                            chosen.append(threads)
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
            med = {s: statistics.median(v) for s, v in times.items()}
            best = min(med.values())
            for s, v in med.items():
                th = {"1": "1", "all": str(cpus), "default": ",".join(map(str, chosen))}[s]
                print(f"{name:5} {busy:>4} {s:8} {v:9.2f} {v / best:8.2f} {th:>8}")
            worst_default = max(worst_default, med["default"] / best)
    print(f"# the default's worst ratio to the best: {worst_default:.2f}; load average after: {load()}")


if __name__ == "__main__":
    main()
