#!/usr/bin/env python3
"""Gradient averaging across ranks (src/dist/grad_sync.c) in one run: its
bandwidth beside a bare MPI_Allreduce of the same bytes, on both of its
transports (shared memory between the ranks of one machine, and the ring of
MPI messages); its two message algorithms (the ring and halving-doubling)
beside each other on 4 ranks; the share of its communication hidden behind
backward; and
training throughput at the same global batch size — ctrial's ranks beside
one rank, one rank with two threads, two processes that do not communicate
at all (the ceiling), and torch DistributedDataParallel (gloo) launched by
torchrun on the same model, data and seed, with the final losses checked
equal.

    .venv/bin/python bench/dist/run.py [BUILD_DIR] [--runs 3] [--mb 1,10,100]
        [--parts bandwidth,algorithms,overlap,train]
        [--no-torch] [--json PATH]

BUILD_DIR (or $CTRIAL_BUILD_DIR, else build) holds bench/dist/bench_dist;
this script builds nothing. It prints markdown tables. Each measurement is
a separate mpirun (or torchrun); the variants of one measurement are
interleaved (run i of each back to back) so that a change in load hits
them alike, and each table gives medians over runs with [min, max].
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from hostinfo import load, machine, run_json_lines  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
PHASES = ("forward_ms", "backward_ms", "sync_ms", "optimizer_ms", "zero_grad_ms")
LOSS_RTOL = 1e-5


def env_with(extra=None, threads=1):
    return dict(os.environ, OMP_NUM_THREADS=str(threads), **(extra or {}))


def run_json(cmd, extra_env=None, threads=1):
    """The JSON lines rank 0 printed."""
    return run_json_lines(cmd, env=env_with(extra_env, threads))


def ranks(n, prog, args):
    """prog under mpirun with n ranks (n == 0: a plain process, no mpirun)."""
    return ([prog] if n == 0 else MPIRUN + ["-np", str(n), prog]) + args


def stat(xs):
    return statistics.median(xs), min(xs), max(xs)


def fmt(xs, f="{:.3f}"):
    m, lo, hi = stat(xs)
    return f"{f.format(m)} [{f.format(lo)}, {f.format(hi)}]"


# ---- the training part's variants ---------------------------------------------------


def train_variants(no_torch):
    """(name, system, ranks, threads per rank, zero, environment) in the order of the table. "pair": two
    independent ctrial processes at half the global batch each, started together: the same compute as two
    ranks with no communication at all. "half": one of them alone (what a rank's share of the batch costs
    without a second process beside it)."""
    v = [("ctrial, 1 rank, 1 thread", "ctrial", 1, 1, "none", {}),
         ("ctrial, 1 rank, 2 threads", "ctrial", 1, 2, "none", {}),
         ("ctrial, 2 ranks, shared memory", "ctrial", 2, 1, "none", {}),
         ("ctrial, 2 ranks, ring (MPI messages)", "ctrial", 2, 1, "none", {"CTRIAL_GRAD_SYNC": "ring"}),
         ("ctrial, 2 ranks, shared memory, zero_grad in place", "ctrial", 2, 1, "inplace", {}),
         ("2 independent ctrial processes, half the batch each (no communication)", "pair", 2, 1, "none", {}),
         ("1 ctrial process, half the batch, alone", "half", 1, 1, "none", {})]
    if not no_torch:
        v += [("torch, 1 process, 1 thread", "torch", 1, 1, "none", {}),
              ("torch DDP (gloo), 2 ranks", "torch", 2, 1, "none", {})]
    return v


def run_train_variant(prog, a, system, n, threads, zero, extra):
    common = ["--steps", str(a.steps), "--threads", str(threads), "--width", str(a.width)]
    if system == "ctrial":
        return run_json(ranks(n, prog, ["train", *common, "--global-batch", str(a.global_batch), "--zero", zero]),
                        extra, threads)[-1]
    if system == "torch":
        script = os.path.join(HERE, "ddp_train.py")
        cmd = [sys.executable] + (["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n)]
                                  if n > 1 else []) + [script, *common, "--global-batch", str(a.global_batch)]
        return run_json(cmd, extra, threads)[-1]
    if system == "half":
        r = run_json([prog, "train", *common, "--global-batch", str(a.global_batch // 2)], extra, threads)[-1]
        return dict(r, transport="none")
    # pair: n processes at the same time, each its share of the batch, no MPI
    cmd = [prog, "train", *common, "--global-batch", str(a.global_batch // n)]
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env_with(extra, threads), stdout=subprocess.PIPE, text=True)
             for _ in range(n)]
    rows = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}")
        rows.append(json.loads([l for l in out.splitlines() if l.startswith("{")][-1]))
    slowest = max(rows, key=lambda r: r["ms_per_step"])
    return dict(slowest, ranks=n, samples_per_s=a.global_batch * 1e3 / slowest["ms_per_step"], transport="none")


def losses_agree(x, y):
    return abs(x - y) <= LOSS_RTOL * abs(y)


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
    ap.add_argument("--parts", default="bandwidth,algorithms,overlap,train")
    ap.add_argument("--algo-ranks", type=int, default=4, help="ranks of the algorithms part (a power of two)")
    ap.add_argument("--no-torch", action="store_true", help="train part without the torch / DDP rows")
    ap.add_argument("--json", metavar="PATH", help="also write every run's figures to PATH as one JSON object")
    a = ap.parse_args()

    prog = os.path.join(os.path.abspath(a.build_dir), "bench", "dist", "bench_dist")
    if not os.access(prog, os.X_OK):
        sys.exit(f"run.py: {prog} is not built (ninja -C {a.build_dir} bench_dist)")
    parts = a.parts.split(",")
    ncpu, model = machine()
    load_start = load()

    transports = [("shared memory", {}), ("ring", {"CTRIAL_GRAD_SYNC": "ring"})]
    bw = {}
    for _ in range(a.runs) if "bandwidth" in parts else ():
        for transport, extra in transports:
            for zero in ("none", "inplace"):
                for r in run_json(ranks(2, prog, ["bandwidth", "--mb", a.mb, "--params", str(a.params),
                                                  "--reps", str(a.reps), "--zero", zero]), extra):
                    bw.setdefault((transport, zero, r["mb"]), []).append(r)

    algos = {}
    for _ in range(a.runs) if "algorithms" in parts else ():
        for algo in ("ring", "halving-doubling"):
            for r in run_json(ranks(a.algo_ranks, prog, ["bandwidth", "--mb", a.mb, "--params", str(a.params),
                                                         "--reps", str(a.reps)]), {"CTRIAL_GRAD_SYNC": algo}):
                algos.setdefault((algo, r["mb"]), []).append(r)

    ov = {}
    for _ in range(a.runs) if "overlap" in parts else ():
        for mib in a.overlap_buckets.split(","):
            ov.setdefault(mib, []).extend(run_json(ranks(2, prog, ["overlap", "--steps", str(a.steps),
                                                                  "--bucket-mb", mib])))

    variants = train_variants(a.no_torch)
    tr = {v[0]: [] for v in variants}
    for _ in range(a.runs) if "train" in parts else ():
        for name, system, n, threads, zero, extra in variants:
            tr[name].append(run_train_variant(prog, a, system, n, threads, zero, extra))
    load_end = load()

    print("## ctrial gradient averaging benchmark\n")
    print(f"Machine: {ncpu} CPUs, {model}; load average {load_start} at the start, {load_end} at the end.")
    print(f"{a.runs} invocations of each measurement: median [min, max].\n")

    if bw:
        print("### 1. Bandwidth, 2 ranks: grad_sync vs a bare MPI_Allreduce of the same bytes\n")
        print(f"float32 gradients spread over {a.params} parameters, 25 MiB buckets. grad_sync GB/s: bytes / "
              "((arm + backward + finish) minus the same arm(false) + backward): hooks, staging into the buckets, "
              "the average, gradients pointed at the buckets. bucket only: bucket bytes / summed "
              "launch-to-completion time (grad_sync's stats). MPI_Allreduce: MPI_SUM in place on one flat "
              f"buffer, no average. Medians of {a.reps} repetitions inside each run. transport: shared memory "
              "(the ranks read each other's buckets) or the ring of MPI messages (CTRIAL_GRAD_SYNC=ring). "
              "`zero`: gradients set to None after each step (PyTorch's default: arm lends each parameter its "
              "zeroed bucket slot as .grad) or zeroed in place. Target: ratio >= 0.95.\n")
        print("| transport | zero | MB | buckets | grad_sync GB/s | bucket only GB/s | MPI_Allreduce GB/s | "
              "ratio grad_sync / MPI_Allreduce |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for (transport, zero, mb), rs in sorted(bw.items(), key=lambda kv: (kv[0][0] != "shared memory",) + kv[0][1:]):
            used = {r.get("transport", "?") for r in rs}
            label = transport if used == {transport} else f"{transport} (ran: {', '.join(sorted(used))})"
            print(f"| {label} | {zero} | {mb:g} | {rs[0]['buckets_per_step']:g} | {fmt([r['sync_gbs'] for r in rs])} | "
                  f"{fmt([r['ring_gbs'] for r in rs])} | {fmt([r['allreduce_gbs'] for r in rs])} | "
                  f"{fmt([r['ratio'] for r in rs], '{:.2f}')} |")
        print()

    if algos:
        print(f"### 1b. The message algorithms, {a.algo_ranks} ranks: the ring against halving-doubling\n")
        print("Messages through every rank (CTRIAL_GRAD_SYNC=ring or halving-doubling for every bucket; by "
              "default the bucket's size chooses, halving-doubling only up to 256 KiB a rank), the same "
              "gradients as table 1, zero_grad to None. bucket only GB/s as in table 1. On one machine a "
              "message's latency is small: what halving-doubling saves (2 log2(p) steps a bucket instead of "
              "2(p-1)) shows on a network, not here; this says what it costs where bytes dominate.\n")
        print("| MB | ring GB/s | halving-doubling GB/s | halving-doubling / ring |")
        print("|---:|---:|---:|---:|")
        for mb in sorted({mb for _, mb in algos}):
            ring, hd = algos[("ring", mb)], algos[("halving-doubling", mb)]
            ratio = [h["ring_gbs"] / r["ring_gbs"] for r, h in zip(ring, hd)]
            print(f"| {mb:g} | {fmt([r['ring_gbs'] for r in ring])} | {fmt([r['ring_gbs'] for r in hd])} | "
                  f"{fmt(ratio, '{:.2f}')} |")
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
        train_tables(a, variants, tr)

    if a.json:
        write_json(a, ncpu, model, load_start, load_end, bw, ov, variants, tr, algos)


def base_of(variants, tr, system):
    """The median samples/s of a system's 1 process, 1 thread row (None if absent)."""
    for name, sysname, n, threads, _, _ in variants:
        if sysname == system and n == 1 and threads == 1 and tr[name]:
            return statistics.median(r["samples_per_s"] for r in tr[name])
    return None


def efficiency(variants, tr, name, system, n, threads):
    """samples/s / (n x the same system's 1-rank, 1-thread samples/s); the pair row against ctrial's."""
    base = base_of(variants, tr, "ctrial" if system == "pair" else system)
    if not base:
        return None
    return statistics.median(r["samples_per_s"] for r in tr[name]) / (n * base)


def train_tables(a, variants, tr):
    med = statistics.median
    print(f"### 3. Training throughput at global batch {a.global_batch}: MLP 784-{a.width}-{a.width}-10, SGD\n")
    print("Each rank trains on global batch / ranks rows of one fixed batch; samples/s of the whole job over "
          f"{a.steps} timed steps; threads: intra-op threads per rank. ctrial as ct_fit runs it (gradients set to "
          "None after each step unless zeroed in place; glibc's malloc tuned as ct_fit tunes it); torch as "
          "bench/dist/ddp_train.py runs it (plain PyTorch, DistributedDataParallel's defaults, glibc's defaults). "
          "Scaling efficiency: samples/s / (ranks x the same system's 1-rank, 1-thread samples/s). The pair row: "
          "two ctrial processes started together, each training half the batch with no communication at all — "
          "what two ranks could reach if averaging cost nothing; the half row: one such process alone (its "
          "samples/s are of its half of the batch).\n")
    print("| configuration | samples/s | vs ctrial 1 rank, 1 thread | scaling efficiency | ms/step | transport |")
    print("|---|---:|---:|---:|---:|---|")
    base = base_of(variants, tr, "ctrial")
    for name, system, n, threads, _, _ in variants:
        rs = tr[name]
        xs = [r["samples_per_s"] for r in rs]
        eff = efficiency(variants, tr, name, system, n, threads) if n > 1 and system != "half" else None
        print(f"| {name} | {fmt(xs, '{:.0f}')} | {med(xs) / base:.2f} | {'' if eff is None else f'{eff:.0%}'} | "
              f"{med(r['ms_per_step'] for r in rs):.2f} | {rs[0].get('transport', '')} |")
    print()
    print("Where a step's time goes (rank 0, ms per step, medians over runs). forward: from arm (which lends "
          "the bucket slots) to the loss; backward: with the hooks that stage gradients and launch buckets "
          "(DDP: its all-reduce too, launched and waited for inside backward); sync: after_backward + finish "
          "(launching what is left, waiting for every bucket, pointing .grad at the averages); optimizer; "
          "zero_grad. No data time: the batch is fixed.\n")
    print("| configuration | forward | backward | sync | optimizer | zero_grad | sum |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, *_ in variants:
        rs = tr[name]
        ph = [med(r.get(k, 0.0) for r in rs) for k in PHASES]
        print(f"| {name} | " + " | ".join(f"{x:.2f}" for x in ph) + f" | {sum(ph):.2f} |")
    print()
    checks = loss_checks(variants, tr)
    for line in checks["lines"]:
        print(f"- {line}")
    ddp = next((n for n, s, k, *_ in variants if s == "torch" and k == 2), None)
    shm = next((n for n, s, k, _, z, e in variants if s == "ctrial" and k == 2 and not e and z == "none"), None)
    if ddp and shm and tr[ddp]:
        print(f"- ctrial's 2 ranks over torch DDP's: "
              f"{med(r['samples_per_s'] for r in tr[shm]) / med(r['samples_per_s'] for r in tr[ddp]):.2f}x "
              "(goal >= 1.5x)")
    print()


def loss_checks(variants, tr):
    """The last step's loss on rank 0: every ctrial configuration with n ranks against torch's with n."""
    lines, ok = [], True
    torch_loss = {n: tr[name][0]["final_loss"] for name, s, n, *_ in variants if s == "torch" and tr[name]}
    for name, system, n, *_ in variants:
        if system != "ctrial" or n not in torch_loss or not tr[name]:
            continue
        mine = [r["final_loss"] for r in tr[name]]
        agree = all(losses_agree(x, torch_loss[n]) for x in mine)
        ok &= agree
        lines.append(f"final loss, {name}: {mine[0]:.9g} against torch's {torch_loss[n]:.9g} with {n} rank(s): "
                     f"{'equal' if agree else 'DIFFERENT'} (rtol {LOSS_RTOL:g})")
    return {"ok": ok, "lines": lines}


def write_json(a, ncpu, model, load_start, load_end, bw, ov, variants, tr, algos):
    """Every run's figures (one per mpirun: rank 0's line) as one JSON object at a.json."""
    med = statistics.median

    def col(rs, key):
        return [r.get(key) for r in rs]

    bandwidth = []
    for (transport, zero, mb), rs in sorted(bw.items()):
        sync, allreduce = col(rs, "sync_gbs"), col(rs, "allreduce_gbs")
        bandwidth.append({
            "mb": mb, "transport": transport, "variant": zero, "params": rs[0]["params"],
            "buckets_per_step": rs[0]["buckets_per_step"], "grad_sync_gb_per_s": sync,
            "bucket_only_gb_per_s": col(rs, "ring_gbs"), "mpi_allreduce_gb_per_s": allreduce,
            "ratio": med(sync) / med(allreduce), "ratio_per_run": col(rs, "ratio"),
            "transport_used": col(rs, "transport")})
    algorithms = [{"mb": mb, "algorithm": algo, "ranks": a.algo_ranks, "bucket_only_gb_per_s": col(rs, "ring_gbs"),
                   "transport_used": col(rs, "transport")} for (algo, mb), rs in sorted(algos.items())]
    overlap = []
    for mib, rs in ov.items():
        overlap.append({
            "bucket_mib": float(mib), "buckets_per_step": rs[0]["buckets_per_step"], "width": rs[0]["width"],
            "batch_per_rank": rs[0]["batch"], "grad_mb": rs[0]["grad_mb"],
            **{k: col(rs, k) for k in ("hidden_share", "hidden_share_mean_over_ranks", "comm_ms_per_step",
                                       "wait_ms_per_step", "step_ms_with_sync", "step_ms_without")}})
    train = []
    base = base_of(variants, tr, "ctrial")
    for name, system, n, threads, zero, extra in variants:
        rs = tr[name]
        if not rs:
            continue
        train.append({
            "configuration": name, "system": system, "ranks": n, "threads": threads, "zero": zero,
            "environment": extra, "samples_per_s": col(rs, "samples_per_s"),
            "vs_1rank_1thread": med(col(rs, "samples_per_s")) / base if base else None,
            "scaling_efficiency": efficiency(variants, tr, name, system, n, threads) if n > 1 else None,
            "transport": rs[0].get("transport"), "final_loss": col(rs, "final_loss"),
            **{k: col(rs, k) for k in ("ms_per_step", "comm_ms_per_step", "wait_ms_per_step") + PHASES}})
    checks = loss_checks(variants, tr) if train else {"ok": True, "lines": []}
    out = {"benchmark": "dist", "bandwidth": bandwidth, "algorithms": algorithms, "overlap": overlap, "train": train,
           "loss_checks": checks, "meta": {
               "cpus": ncpu, "cpu_model": model, "load_average_start": load_start, "load_average_end": load_end,
               "runs": a.runs, "ranks_bandwidth_overlap": 2, "mb": a.mb, "params": a.params, "reps": a.reps,
               "steps": a.steps, "global_batch": a.global_batch, "width": a.width,
               "overlap_buckets_mib": a.overlap_buckets, "parts": a.parts, "notes": {
                   "samples": "each list holds one value per invocation (rank 0's report), in run order; a "
                              "bandwidth value is itself the median of --reps repetitions inside that run",
                   "variant": "the table's zero column. none: gradients set to None after each step; inplace: "
                              "zeroed in place",
                   "bandwidth_ratio": "median(grad_sync_gb_per_s) / median(mpi_allreduce_gb_per_s); the table "
                                      "prints the median of ratio_per_run (each run's grad_sync / MPI_Allreduce)",
                   "vs_1rank_1thread": "median(samples_per_s) / the median of ctrial's 1 rank, 1 thread row",
                   "scaling_efficiency": "median(samples_per_s) / (ranks x the same system's 1-rank 1-thread "
                                         "median); the pair row against ctrial's"}}}
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
