"""ctrial's loader vs torch.utils.data.DataLoader, side by side in one run.

Throughput: MNIST-shaped data (60000 float32 [1, 28, 28] + int64 labels),
batch size 64, shuffle on, 0 and 2 workers. ctrial's loader reads a
ct_dataset_tensors; torch's DataLoader a TensorDataset of the same shapes
(persistent workers, so that worker start-up is not counted per epoch). One
warm-up epoch, then --epochs timed epochs each; the table shows the median.
Twice: with libtorch's default intra-op threads in the calling process, and
with 1 (the calling thread does the loading with 0 workers; workers run
single-threaded in both libraries either way).

Overlap: a training loop with 2 workers whose per-batch compute is longer
than a batch load; the time ct_loader_next waited should be ~0 after the
first batch (0 workers shown for contrast: then every load is waited for).

usage: python bench/loader/run.py [--build build] [--epochs 5] [--threads T,1] [--json PATH]

--threads: the intra-op thread counts to measure at (default: torch's default,
then 1); --json PATH also writes every epoch's records/s and the overlap
figures to PATH as one JSON object ({"benchmark": "loader", "rows", "overlap",
"meta"}).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

N, BATCH = 60000, 64


def ctrial_throughput(prog, workers, epochs, threads):
    out = subprocess.run([prog, "throughput", str(workers), str(epochs), str(threads)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["records_per_s"]


def torch_throughput(workers, epochs, threads):
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.rand(N, 1, 28, 28, generator=g), torch.randint(0, 10, (N,), generator=g))
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers,
                        persistent_workers=workers > 0)
    rates = []
    for e in range(epochs + 1):  # epoch 0 warms up (and starts the workers)
        t0 = time.perf_counter()
        records = sum(len(y) for _, y in loader)
        dt = time.perf_counter() - t0
        assert records == N
        if e > 0:
            rates.append(records / dt)
    del loader
    return rates


def overlap(prog, workers, batches, sample_us, compute_ms):
    out = subprocess.run([prog, "overlap", str(workers), str(batches), str(sample_us), str(compute_ms)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("CTRIAL_BUILD_DIR", "build"))
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--threads", help="comma-separated intra-op thread counts (default: torch's default, then 1)")
    ap.add_argument("--json", metavar="PATH", help="also write every epoch's figures to PATH as one JSON object")
    args = ap.parse_args()
    prog = os.path.join(args.build, "bench", "loader", "bench_loader")
    if not os.path.exists(prog):
        sys.exit(f"{prog} not found: build the project first (ninja -C {args.build} bench_loader)")

    default_threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; {N} samples [1, 28, 28] float32 + "
          f"int64 labels, batch {BATCH}, shuffle; median of {args.epochs} epochs after a warm-up "
          f"epoch\n")
    print(f"{'threads':>7}  {'workers':>7}  {'ctrial rec/s':>13}  {'torch rec/s':>12}  {'ratio':>7}")
    ratios, rows, overlaps = {}, [], []
    thread_counts = [int(t) for t in args.threads.split(",") if t] if args.threads else (default_threads, 1)
    for threads in thread_counts:
        for workers in (0, 2):
            cs = ctrial_throughput(prog, workers, args.epochs, threads)
            ts = torch_throughput(workers, args.epochs, threads)
            c, t = statistics.median(cs), statistics.median(ts)
            ratios[threads, workers] = c / t
            rows.append({"threads": threads, "workers": workers, "ctrial_records_per_s": cs,
                         "torch_records_per_s": ts, "ratio": c / t})
            print(f"{threads:>7}  {workers:>7}  {c:>13,.0f}  {t:>12,.0f}  {c / t:>6.1f}x")
    torch.set_num_threads(default_threads)

    print("\ntraining-loop simulation: 300 batches, per batch 64 gets of 20 us busy work "
          "(1.3 ms) + collate, then 4 ms of busy compute")
    print(f"{'workers':>7}  {'total s':>8}  {'waited s':>9}  {'first batch s':>13}  {'after first s':>13}")
    for workers in (0, 2):
        r = overlap(prog, workers, 300, 20, 4)
        overlaps.append(r)
        print(f"{workers:>7}  {r['total_s']:>8.3f}  {r['wait_s']:>9.4f}  {r['wait_first_s']:>13.4f}  "
              f"{r['wait_after_first_s']:>13.4f}")
    print()
    for (threads, workers), r in ratios.items():
        print(f"threads {threads}, workers {workers}: ctrial >= 5x torch: {'yes' if r >= 5 else 'NO'}")
    if args.json:
        out = {"benchmark": "loader", "rows": rows, "overlap": overlaps, "meta": {
            "torch_version": torch.__version__, "cpus": os.cpu_count(), "samples": N, "sample_shape": [1, 28, 28],
            "batch": BATCH, "shuffle": True, "epochs": args.epochs, "warmup_epochs": 1,
            "default_threads": default_threads, "overlap_setup": {"batches": 300, "sample_us": 20, "compute_ms": 4},
            "notes": {"records_per_s": "one value per timed epoch, after one warm-up epoch (ctrial: one "
                                       "bench_loader process per row; torch: in this process)",
                      "ratio": "median(ctrial_records_per_s) / median(torch_records_per_s), as the table"}}}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
