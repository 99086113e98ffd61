#!/usr/bin/env python3
"""Gradient averaging across ranks (src/dist/grad_sync.c) in one run: its
bandwidth beside a bare MPI_Allreduce of the same bytes, the share of its
communication hidden behind backward, and 1-rank vs 2-rank training
throughput at the same global batch size.

    .venv/bin/python bench/dist/run.py [BUILD_DIR] [--runs 3] [--mb 1,10,100] [--parts bandwidth,overlap,train]
        [--json PATH]

BUILD_DIR (or $CTRIAL_BUILD_DIR, else build) holds bench/dist/bench_dist;
this script builds nothing. It prints markdown tables. Each measurement is
a separate mpirun; the variants of one measurement are interleaved (run i of
each back to back) so that a change in load hits them alike, and each table
gives medians over runs with [min, max].
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from hostinfo import load, machine, run_json_lines  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def run_json(cmd):
    """The JSON lines rank 0 printed."""
    return run_json_lines(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"))


def ranks(n, prog, args):
    """prog under mpirun with n ranks (n == 0: a plain process, no mpirun)."""
    return ([prog] if n == 0 else MPIRUN + ["-np", str(n), prog]) + args


def stat(xs):
    return statistics.median(xs), min(xs), max(xs)


def fmt(xs, f="{:.3f}"):
    m, lo, hi = stat(xs)
    return f"{f.format(m)} [{f.format(lo)}, {f.format(hi)}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build_dir", nargs="?", default=os.environ.get("CTRIAL_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--runs", type=int, default=3, help="mpirun invocations of each measurement")
    ap.add_argument("--mb", default="1,10,100", help="gradient sizes of the bandwidth part, MB")
    ap.add_argument("--params", type=int, default=64, help="parameters the gradient bytes are spread over")
    ap.add_argument("--reps", type=int, default=15, help="repetitions inside one bandwidth run (median)")
    ap.add_argument("--overlap-buckets", default="25,4", help="bucket sizes (MiB) of the overlap part")
    ap.add_argument("--steps", type=int, default=30, help="timed steps of the overlap and train parts")
    ap.add_argument("--global-batch", type=int, default=128)
    ap.add_argument("--width", type=int, default=1024, help="hidden width of the train part's MLP")
    ap.add_argument("--parts", default="bandwidth,overlap,train")
    ap.add_argument("--json", metavar="PATH", help="also write every run's figures to PATH as one JSON object")
    a = ap.parse_args()

    prog = os.path.join(os.path.abspath(a.build_dir), "bench", "dist", "bench_dist")
    if not os.access(prog, os.X_OK):
        sys.exit(f"run.py: {prog} is not built (ninja -C {a.build_dir} bench_dist)")
    parts = a.parts.split(",")
    ncpu, model = machine()
    load_start = load()

    bw = {}
    for _ in range(a.runs) if "bandwidth" in parts else ():
        for zero in ("none", "inplace"):
            for r in run_json(ranks(2, prog, ["bandwidth", "--mb", a.mb, "--params", str(a.params),
                                              "--reps", str(a.reps), "--zero", zero])):
                bw.setdefault((zero, r["mb"]), []).append(r)

    ov = {}
    for _ in range(a.runs) if "overlap" in parts else ():
        for mib in a.overlap_buckets.split(","):
            ov.setdefault(mib, []).extend(run_json(ranks(2, prog, ["overlap", "--steps", str(a.steps),
                                                                  "--bucket-mb", mib])))

    variants = [("1 rank, 1 thread", 1, 1, "none"), ("1 rank, 2 threads", 1, 2, "none"),
                ("2 ranks, 1 thread each", 2, 1, "none"), ("2 ranks, 1 thread each, zero_grad in place", 2, 1, "inplace")]
    tr = {v[0]: [] for v in variants}
    for _ in range(a.runs) if "train" in parts else ():
        for name, n, threads, zero in variants:
            tr[name] += run_json(ranks(n, prog, ["train", "--steps", str(a.steps), "--threads", str(threads),
                                                 "--global-batch", str(a.global_batch), "--width", str(a.width),
                                                 "--zero", zero]))
    load_end = load()

    print("## ctrial gradient averaging benchmark\n")
    print(f"Machine: {ncpu} CPUs, {model}; load average {load_start} at the start, {load_end} at the end.")
    print(f"{a.runs} mpirun invocations of each measurement: median [min, max].\n")

    if bw:
        print(f"### 1. Bandwidth, 2 ranks: grad_sync vs a bare MPI_Allreduce of the same bytes\n")
        print(f"float32 gradients spread over {a.params} parameters, 25 MiB buckets. grad_sync GB/s: bytes / "
              "((arm + backward + finish) minus the same arm(false) + backward): hooks, staging into the buckets, "
              "the ring all-reduce with its averaging, gradients pointed at the buckets. ring only: bucket "
              "bytes / summed launch-to-completion time (grad_sync's stats). MPI_Allreduce: MPI_SUM in place on "
              f"one flat buffer, no average. Medians of {a.reps} repetitions inside each run. `zero`: gradients "
              "set to None after each step (PyTorch's default: arm lends each parameter its zeroed bucket slot as "
              ".grad) or zeroed in place; backward accumulates straight into the buckets either way. "
              "Target: ratio >= 0.9.\n")
        print("| zero | MB | buckets | grad_sync GB/s | ring only GB/s | MPI_Allreduce GB/s | "
              "ratio grad_sync / MPI_Allreduce |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for (zero, mb), rs in sorted(bw.items()):
            print(f"| {zero} | {mb:g} | {rs[0]['buckets_per_step']:g} | {fmt([r['sync_gbs'] for r in rs])} | "
                  f"{fmt([r['ring_gbs'] for r in rs])} | {fmt([r['allreduce_gbs'] for r in rs])} | "
                  f"{fmt([r['ratio'] for r in rs], '{:.2f}')} |")
        print()

    if ov:
        r0 = next(iter(ov.values()))[0]
        print(f"### 2. Overlap, 2 ranks: MLP 784-{r0['width']}x3-10, batch {r0['batch']} per rank, "
              f"{r0['grad_mb']:.1f} MB of gradients, forward + backward + finish per step\n")
        print("comm: each bucket's launch to its completion, summed; wait: the part of it spent inside "
              "finish; hidden = 1 - wait / comm (rank 0; the mean over ranks beside it). Step times: "
              "forward + backward (+ finish), median over the steps.\n")
        print("| bucket MiB | buckets | comm ms/step | wait ms/step | hidden share | hidden, mean over ranks | "
              "step ms with sync | step ms without |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for mib, rs in ov.items():
            print(f"| {mib} | {rs[0]['buckets_per_step']:g} | {fmt([r['comm_ms_per_step'] for r in rs], '{:.1f}')} | "
                  f"{fmt([r['wait_ms_per_step'] for r in rs], '{:.1f}')} | "
                  f"{fmt([r['hidden_share'] for r in rs], '{:.2f}')} | "
                  f"{fmt([r['hidden_share_mean_over_ranks'] for r in rs], '{:.2f}')} | "
                  f"{fmt([r['step_ms_with_sync'] for r in rs], '{:.1f}')} | "
                  f"{fmt([r['step_ms_without'] for r in rs], '{:.1f}')} |")
        print()

    if any(tr.values()):
        base = statistics.median(r["samples_per_s"] for r in tr[variants[0][0]])
        print(f"### 3. Training throughput at global batch {a.global_batch}: MLP 784-{a.width}-{a.width}-10, SGD\n")
        print("Each rank trains on global batch / ranks rows; samples/s of the whole job over "
              f"{a.steps} timed steps; threads: libtorch's intra-op threads per rank; gradients set to None "
              "after each step unless zeroed in place. comm / wait: grad_sync's per-step stats (rank 0).\n")
        print("| configuration | samples/s | vs 1 rank, 1 thread | ms/step | comm ms/step | wait ms/step |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, _, _, _ in variants:
            rs = tr[name]
            xs = [r["samples_per_s"] for r in rs]
            print(f"| {name} | {fmt(xs, '{:.0f}')} | {statistics.median(xs) / base:.2f} | "
                  f"{statistics.median(r['ms_per_step'] for r in rs):.1f} | "
                  f"{statistics.median(r['comm_ms_per_step'] for r in rs):.1f} | "
                  f"{statistics.median(r['wait_ms_per_step'] for r in rs):.1f} |")
        print()

    if a.json:
        write_json(a, ncpu, model, load_start, load_end, bw, ov, variants, tr)


def write_json(a, ncpu, model, load_start, load_end, bw, ov, variants, tr):
    """Every run's figures (one per mpirun: rank 0's line) as one JSON object at a.json."""
    med = statistics.median

    def col(rs, key):
        return [r[key] for r in rs]

    bandwidth = []
    for (zero, mb), rs in sorted(bw.items()):
        sync, allreduce = col(rs, "sync_gbs"), col(rs, "allreduce_gbs")
        bandwidth.append({
            "mb": mb, "variant": zero, "params": rs[0]["params"], "buckets_per_step": rs[0]["buckets_per_step"],
            "grad_sync_gb_per_s": sync, "ring_only_gb_per_s": col(rs, "ring_gbs"),
            "mpi_allreduce_gb_per_s": allreduce, "ratio": med(sync) / med(allreduce),
            "ratio_per_run": col(rs, "ratio")})
    overlap = []
    for mib, rs in ov.items():
        overlap.append({
            "bucket_mib": float(mib), "buckets_per_step": rs[0]["buckets_per_step"], "width": rs[0]["width"],
            "batch_per_rank": rs[0]["batch"], "grad_mb": rs[0]["grad_mb"],
            **{k: col(rs, k) for k in ("hidden_share", "hidden_share_mean_over_ranks", "comm_ms_per_step",
                                       "wait_ms_per_step", "step_ms_with_sync", "step_ms_without")}})
    train = []
    if any(tr.values()):
        base = med(r["samples_per_s"] for r in tr[variants[0][0]])
        for name, n, threads, zero in variants:
            rs = tr[name]
            train.append({
                "configuration": name, "ranks": n, "threads": threads, "zero": zero,
                "samples_per_s": col(rs, "samples_per_s"), "vs_1rank_1thread": med(col(rs, "samples_per_s")) / base,
                **{k: col(rs, k) for k in ("ms_per_step", "comm_ms_per_step", "wait_ms_per_step")}})
    out = {"benchmark": "dist", "bandwidth": bandwidth, "overlap": overlap, "train": train, "meta": {
        "cpus": ncpu, "cpu_model": model, "load_average_start": load_start, "load_average_end": load_end,
        "runs": a.runs, "ranks_bandwidth_overlap": 2, "mb": a.mb, "params": a.params, "reps": a.reps, "steps": a.steps,
        "global_batch": a.global_batch, "width": a.width, "overlap_buckets_mib": a.overlap_buckets,
        "parts": a.parts, "notes": {
            "samples": "each list holds one value per mpirun (rank 0's report), in run order; a bandwidth value "
                       "is itself the median of --reps repetitions inside that run",
            "variant": "the table's zero column. none: gradients set to None after each step; inplace: zeroed "
                       "in place",
            "bandwidth_ratio": "median(grad_sync_gb_per_s) / median(mpi_allreduce_gb_per_s); the table prints "
                               "the median of ratio_per_run (each run's grad_sync / MPI_Allreduce)",
            "vs_1rank_1thread": "median(samples_per_s) / the median of the 1 rank, 1 thread row, as the table"}}}
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
