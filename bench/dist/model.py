#!/usr/bin/env python3
"""The cost of a data-parallel step as ranks grow: a model of step time
against ranks, fitted to measurements at 1, 2 and 4 ranks on this machine,
and its projection to 8-256 ranks for the bench models and a 124M-parameter
GPT. Prints markdown (bench/dist/README.md, "Cost as the job grows").

    .venv/bin/python bench/dist/model.py [BUILD_DIR] [--runs 3] [--json PATH]   # measure, fit, project
    .venv/bin/python bench/dist/model.py --from PATH                            # fit and project saved figures

The model of one optimizer step on n ranks at global batch B (per-rank batch
b = B / n), everything in seconds:

    T(n) = [ c0 + c1 b + O + (1 - h) AR(n, S) ] / share(n)

    c0 + c1 b  forward + backward on one rank's b samples: c0 is what does not
               shrink with the batch (the weight gradients keep their size),
               c1 the cost per sample; fitted to one process alone at b = 128,
               64 and 32 (bench_dist train)
    O          the optimizer step (every rank runs it on every parameter)
    AR(n, S)   averaging S bytes of gradients in k buckets. Ring (MPI
               messages, ranks on several machines): 2(n-1)/n S / beta +
               2(n-1) k alpha, a bandwidth term and a latency term per ring
               step; beta and alpha fitted to grad_sync's own bucket times
               (bench_dist bandwidth, CTRIAL_GRAD_SYNC=ring) at 2 ranks and
               1, 10, 100 MB (relative errors weighed alike); the times at 4
               ranks check the model. Shared memory (ranks of one machine):
               the same form with its own fitted beta and alpha.
    h          the share of AR hidden behind backward: 0 here (a rank's one
               core does both); on a GPU, NCCL's all-reduce runs beside the
               backward kernels: h = min(1, backward / AR) with backward 2/3
               of the compute
    share(n)   the part of a core each rank gets: min(1, cores / n) (4 ranks
               on this machine's 2 cores run at half speed, their
               communication too)

What the model leaves out, and the measurements show: contention between
ranks that share a machine's memory (two processes that do not communicate
run 5% slower each than one alone: bench/dist table 3), which the residuals
at 2 and 4 ranks carry.

Projection (one rank per machine or per GPU, so share = 1, no contention):
the link's beta and alpha are assumptions — typical figures, not measured
here — and so is the GPT's compute:
  10 GbE           beta 1.1 GB/s per direction, alpha 25 us (TCP)
  100 Gb/s IB      beta 11 GB/s, alpha 3 us
  NCCL, H100s      beta 40 GB/s bus bandwidth across nodes (8 x 400 Gb/s
                   NICs per 8 GPUs), alpha 10 us
  GPT-124M         124M parameters, fp32 gradients (497 MB, 20 buckets of
                   25 MiB), 8 sequences of 1024 tokens per GPU, 6 N tokens
                   FLOPs per step at 400 TFLOP/s (40% of an H100's dense
                   bf16): 15.3 ms of compute
Weak scaling (the per-rank batch fixed, the global batch growing with n):
efficiency = T(1) / T(n). The flat ring's latency term grows with n (2(n-1)
steps per bucket); the projection also gives a log-depth all-reduce
(recursive halving-doubling, what MPI_Allreduce and NCCL's trees use):
2 log2(n) k alpha; and, for hosts of L = 8 ranks (one core each),
grad_sync's hierarchical average: shared memory on each host (the fitted
shared-memory beta and alpha at L ranks) plus L all-reduces between the
n / L hosts that run at once, each over 1/L of a bucket, so the host's
link carries 2(H-1)/H S and a bucket pays 2(H-1) latencies (2 log2(H) by
halving-doubling): AR_shm(L, S) + AR(n / L, S). The "ctrial" rows take
grad_sync's choice between the two algorithms, bucket by bucket:
halving-doubling for at most 256 KiB a rank on a power of two of ranks.
"""
import argparse
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from hostinfo import load, machine, run_json_lines  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
GLOBAL_BATCH = 128
GRAD_BYTES_MLP = 4 * (784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10)  # bench_dist train's MLP
GRAD_BYTES_WIDE = 4 * (784 * 2048 + 2048 + 2 * (2048 * 2048 + 2048) + 2048 * 10 + 10)  # the overlap MLP
BUCKET = 25 << 20
PER_HOST = 8  # ranks a host in the hierarchical projection

LINKS = {  # name: (beta bytes/s, alpha s) — assumptions, see the docstring
    "10 GbE": (1.1e9, 25e-6),
    "100 Gb/s InfiniBand": (11e9, 3e-6),
    "NCCL across H100 nodes": (40e9, 10e-6),
}


def env(extra=None):
    return dict(os.environ, OMP_NUM_THREADS="1", **(extra or {}))


def measure(build, runs):
    prog = os.path.join(os.path.abspath(build), "bench", "dist", "bench_dist")
    if not os.access(prog, os.X_OK):
        sys.exit(f"model.py: {prog} is not built")
    out = {"alone": {}, "bandwidth": {}, "train": {}, "cores": os.cpu_count(), "load_start": load()}
    ring = {"CTRIAL_GRAD_SYNC": "ring"}
    for _ in range(runs):
        for b in (128, 64, 32):
            r = run_json_lines([prog, "train", "--steps", "40", "--global-batch", str(b)], env())[-1]
            out["alone"].setdefault(str(b), []).append(r)
        # the overlap part's wider MLP (40 MB of gradients), forward + backward at 64 samples, one process
        out.setdefault("wide", []).append(run_json_lines([prog, "overlap", "--steps", "10", "--batch", "64"],
                                                         env())[-1])
        for n in (2, 4):
            for transport, extra in (("ring", ring), ("shared memory", {})):
                for r in run_json_lines(MPIRUN + ["-np", str(n), prog, "bandwidth", "--mb", "1,10,100", "--reps", "9"],
                                        env(extra)):
                    out["bandwidth"].setdefault(f"{transport}|{n}|{r['mb']:g}", []).append(r)
        for n in (1, 2, 4):
            for transport, extra in (("ring", ring), ("shared memory", {})):
                if n == 1 and transport == "ring":
                    continue
                cmd = ([prog] if n == 1 else MPIRUN + ["-np", str(n), prog]) + [
                    "train", "--steps", "40", "--global-batch", str(GLOBAL_BATCH)]
                r = run_json_lines(cmd, env(extra))[-1]
                out["train"].setdefault(f"{transport if n > 1 else 'none'}|{n}", []).append(r)
    out["load_end"] = load()
    return out


def med(xs):
    return statistics.median(xs)


def lstsq(rows, ys):
    """Least squares for y = rows . x (small dense normal equations, no numpy needed)."""
    k = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    v = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(k)]
    for i in range(k):  # Gauss-Jordan
        p = a[i][i]
        for j in range(k):
            a[i][j] /= p
        v[i] /= p
        for m in range(k):
            if m != i:
                f = a[m][i]
                for j in range(k):
                    a[m][j] -= f * a[i][j]
                v[m] -= f * v[i]
    return v


def fit(data):
    cores = data["cores"]
    # compute: one process alone at b = 128, 64, 32
    bs = sorted(int(b) for b in data["alone"])
    comp = {b: med([(r["forward_ms"] + r["backward_ms"]) / 1e3 for r in data["alone"][str(b)]]) for b in bs}
    c0, c1 = lstsq([[1.0, b] for b in bs], [comp[b] for b in bs])
    opt = med([r["optimizer_ms"] / 1e3 for b in bs for r in data["alone"][str(b)]])
    # all-reduce: grad_sync's bucket time (bytes / "bucket only" GB/s) at n ranks, S bytes. beta and alpha
    # are fitted at 2 ranks (one core each), relative errors weighed alike; 4 ranks (two to a core) are the
    # model's check, not its input.
    transports = {}
    for transport in ("ring", "shared memory"):
        rows, ys, points = [], [], []
        for key, rs in data["bandwidth"].items():
            t, n, mb = key.split("|")
            if t != transport:
                continue
            n, s = int(n), float(mb) * 1e6
            k = max(1, math.ceil(s / BUCKET))
            secs = med([s / (r["ring_gbs"] * 1e9) for r in rs])
            points.append((n, s, secs))
            if n == 2:
                w = 1 / secs
                rows.append([w * 2 * (n - 1) / n * s, w * 2 * (n - 1) * k])
                ys.append(w * secs)
        inv_beta, alpha = lstsq(rows, ys)
        transports[transport] = {"beta": 1 / inv_beta, "alpha": max(alpha, 0.0), "points": points}
    return {"c0": c0, "c1": c1, "opt": opt, "compute": comp, "transports": transports, "cores": cores}


def ar_time(n, s, beta, alpha, tree=False):
    if n == 1:
        return 0.0
    k = max(1, math.ceil(s / BUCKET))
    steps = 2 * math.log2(n) if tree else 2 * (n - 1)
    return 2 * (n - 1) / n * s / beta + steps * k * alpha


HD_MAX_SHARE = 256 << 10  # src/dist/allreduce_steps.h: CT_AR_HD_MAX_SHARE


def halving(p, bucket_bytes):
    """cti_ar_choose: halving-doubling for a bucket over p ranks (a power of two, 4 or more) when its share a rank is
    at most 256 KiB."""
    return p >= 4 and p & (p - 1) == 0 and bucket_bytes / p <= HD_MAX_SHARE


def ar_ctrial(n, s, beta, alpha):
    """grad_sync's messages through n ranks: each bucket by the ring, or by halving-doubling (halving)."""
    k = max(1, math.ceil(s / BUCKET))
    return ar_time(n, s, beta, alpha, halving(n, s / k))


def ar_hier(n, per_host, s, beta, alpha, shm):
    """grad_sync on hosts of per_host ranks: shared memory on each, then between the hosts each local rank's share
    of every bucket as ar_ctrial chooses (all local ranks at once: the host's link carries the whole bucket)."""
    h = max(1, n // per_host)
    k = max(1, math.ceil(s / BUCKET))
    return ar_time(min(n, per_host), s, shm["beta"], shm["alpha"]) + ar_time(h, s, beta, alpha,
                                                                             halving(h, s / k / per_host))


def step_here(m, n, transport):
    """The model of bench_dist train on this machine at n ranks (global batch 128)."""
    tr = m["transports"][transport]
    share = min(1.0, m["cores"] / n)
    b = GLOBAL_BATCH / n
    return (m["c0"] + m["c1"] * b + m["opt"] + ar_time(n, GRAD_BYTES_MLP, tr["beta"], tr["alpha"])) / share


def report(data, m):
    print("## Cost as the job grows\n")
    print(f"Fitted on this machine ({m['cores']} cores; load {data.get('load_start')} -> {data.get('load_end')}):\n")
    print(f"- compute (forward + backward of one rank's b samples, one core): c0 + c1 b with c0 = "
          f"{m['c0'] * 1e3:.2f} ms, c1 = {m['c1'] * 1e6:.1f} us a sample (measured alone: " +
          ", ".join(f"b = {b}: {t * 1e3:.2f} ms" for b, t in sorted(m["compute"].items())) + ")")
    print(f"- optimizer step: O = {m['opt'] * 1e3:.2f} ms (SGD over 1.9M parameters, on every rank)")
    for t, tr in m["transports"].items():
        pts = "; ".join(f"{n} ranks {s / 1e6:g} MB {secs * 1e3:.2f} ms (model {ar_time(n, s, tr['beta'], tr['alpha']) / min(1, m['cores'] / n) * 1e3:.2f})"
                        for n, s, secs in sorted(tr["points"]))
        print(f"- averaging, {t}: beta = {tr['beta'] / 1e9:.2f} GB/s, alpha = {tr['alpha'] * 1e6:.1f} us a step "
              f"(fitted at 2 ranks; a bucket's time measured, and the model's in parentheses: {pts})")
    print()
    print(f"Measured against the model, bench_dist train (MLP 784-1024-1024-10, global batch {GLOBAL_BATCH}, one "
          "thread a rank; 4 ranks share 2 cores):\n")
    print("| ranks | transport | measured ms/step | model ms/step | model / measured |")
    print("|---:|---|---:|---:|---:|")
    for key, rs in sorted(data["train"].items(), key=lambda kv: (int(kv[0].split("|")[1]), kv[0])):
        transport, n = key.split("|")
        n = int(n)
        meas = med([r["ms_per_step"] for r in rs])
        model = step_here(m, n, transport if n > 1 else "ring") * 1e3
        print(f"| {n} | {transport} | {meas:.2f} | {model:.2f} | {model / meas:.2f} |")
    print()
    # projections
    per_rank_b = 64
    t1 = m["c0"] + m["c1"] * per_rank_b + m["opt"]
    print(f"Projection, weak scaling (each rank {per_rank_b} samples a step on a core of its own, one rank per "
          f"machine but in the rows of {PER_HOST} ranks a host, the compute and optimizer fitted above, the link "
          "assumed: see model.py), efficiency T(1) / T(n). ring and log-depth: one algorithm for every bucket; "
          "ctrial: what grad_sync does, halving-doubling for buckets of at most 256 KiB a rank on a power of two "
          "of ranks, else the ring; with several ranks a host, shared memory on each host first:\n")
    ns = [8, 16, 32, 64, 128, 256]
    print("| model | gradients | link | all-reduce | " + " | ".join(f"{n}" for n in ns) + " |")
    print("|---|---:|---|---|" + "---:|" * len(ns))
    rows = [("bench MLP 784-1024-1024-10", GRAD_BYTES_MLP, t1)]
    if data.get("wide"):
        # forward + backward measured; its SGD step taken as the small one's, scaled by the parameters
        wide = med([r["step_ms_without"] / 1e3 for r in data["wide"]]) + m["opt"] * GRAD_BYTES_WIDE / GRAD_BYTES_MLP
        rows.append(("overlap MLP 784-2048x3-10", GRAD_BYTES_WIDE, wide))
    links = [("10 GbE", *LINKS["10 GbE"]), ("100 Gb/s InfiniBand", *LINKS["100 Gb/s InfiniBand"])]
    shm = m["transports"].get("shared memory")
    for name, s, comp in rows:
        for lname, beta, alpha in links:
            ars = {"ring": lambda n: ar_time(n, s, beta, alpha), "log-depth": lambda n: ar_time(n, s, beta, alpha, True),
                   "ctrial, one rank a host": lambda n: ar_ctrial(n, s, beta, alpha)}
            if shm:
                ars[f"ctrial, {PER_HOST} ranks a host"] = lambda n: ar_hier(n, PER_HOST, s, beta, alpha, shm)
            for how, ar in ars.items():
                effs = [comp / (comp + ar(n)) for n in ns]
                print(f"| {name} ({comp * 1e3:.1f} ms of compute) | {s / 1e6:.1f} MB | {lname} | {how} | " +
                      " | ".join(f"{e:.0%}" for e in effs) + " |")
    # the GPT on GPUs: NCCL overlaps backward
    gpt_bytes = 124e6 * 4
    comp = 6 * 124e6 * 8 * 1024 / 400e12
    beta, alpha = LINKS["NCCL across H100 nodes"]
    for tree in (False, True):
        effs = []
        for n in ns:
            ar = ar_time(n, gpt_bytes, beta, alpha, tree)
            exposed = max(0.0, ar - 2 / 3 * comp)
            effs.append(comp / (comp + exposed))
        print(f"| GPT-124M on H100s ({comp * 1e3:.1f} ms of compute, backward overlaps) | {gpt_bytes / 1e6:.0f} MB | "
              f"NCCL across nodes | {'log-depth' if tree else 'ring'} | " + " | ".join(f"{e:.0%}" for e in effs) + " |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir", nargs="?", default=os.environ.get("CTRIAL_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", metavar="PATH", help="write the measurements to PATH")
    ap.add_argument("--from", dest="src", metavar="PATH", help="fit and project measurements saved with --json")
    a = ap.parse_args()
    if a.src:
        with open(a.src) as f:
            data = json.load(f)
    else:
        data = measure(a.build_dir, a.runs)
        data["machine"] = machine()
        if a.json:
            with open(a.json, "w") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
    report(data, fit(data))


if __name__ == "__main__":
    main()
