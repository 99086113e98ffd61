"""Two ranks' scaling efficiency by global batch size: bench_dist's training
part (the MLP 784-1024-1024-10, SGD, one fixed batch) at global batch 64
to 1024, on one rank and on two (shared memory), and as two independent
processes that each train half the batch with no communication (what two
ranks would reach if averaging cost nothing).

Efficiency = samples/s of two ranks / (2 x one rank's samples/s). Each
round runs every batch size's three configurations back to back; the
table gives medians over the rounds.

    .venv/bin/python bench/dist/curve.py build --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPI = ["mpirun", "--allow-run-as-root", "--bind-to", "none"]


def samples(prog, np, gbs, steps):
    """samples/s of the job: np ranks (0: one process without mpirun)."""
    cmd = ([*MPI, "-np", str(np)] if np else []) + [prog, "train", "--global-batch", str(gbs), "--steps", str(steps)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {(p.stdout + p.stderr)[-2000:]}")
    return json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])["samples_per_s"]


def pair(prog, gbs, steps):
    """Two processes at once, half the batch each, no communication: the
    slower one's samples/s, times two."""
    cmd = [prog, "train", "--global-batch", str(gbs // 2), "--steps", str(steps)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    ps = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    rates = [json.loads([ln for ln in p.communicate()[0].splitlines() if ln.startswith("{")][-1])["samples_per_s"]
             for p in ps]
    return 2 * min(rates)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="64,128,256,512,1024")
    ap.add_argument("--samples", type=int, default=5120, help="samples per timed run (steps = samples / batch)")
    a = ap.parse_args()
    prog = os.path.join(os.path.abspath(a.build), "bench/dist/bench_dist")
    sizes = [int(x) for x in a.sizes.split(",")]
    got = {}
    for rnd in range(a.rounds):
        for gbs in sizes:
            steps = max(10, a.samples // gbs)
            got.setdefault((gbs, "one"), []).append(samples(prog, 0, gbs, steps))
            got.setdefault((gbs, "two"), []).append(samples(prog, 2, gbs, steps))
            got.setdefault((gbs, "pair"), []).append(pair(prog, gbs, steps))
        print(f"round {rnd + 1} of {a.rounds} done", file=sys.stderr)
    print("| global batch | 1 rank samples/s | 2 ranks samples/s | efficiency | 2 independent processes | their efficiency |")
    print("|---:|---:|---:|---:|---:|---:|")
    for gbs in sizes:
        one, two, pr = (statistics.median(got[(gbs, k)]) for k in ("one", "two", "pair"))
        print(f"| {gbs} | {one:.0f} | {two:.0f} | {two / (2 * one):.0%} | {pr:.0f} | {pr / (2 * one):.0%} |")


if __name__ == "__main__":
    main()
