"""The optimizer state sharded across ranks (shard_optimizer) against the
same job unsharded: samples/s and memory per rank, at 2 and 4 ranks.

Two workloads, each run sharded and unsharded in every round, the order
alternating from round to round:

- `mlp`: bench_dist's training part (`bench_dist train`: the MLP
  784-1024-1024-10 at global batch 128, one fixed batch, no data loading),
  with Adam (`--optim adam`) and with SGD, the bench's own optimizer, which
  keeps no state: what sharding costs where it saves nothing. Figures:
  samples/s of the timed steps, and the most optimizer state a rank holds.
- `charlm`: charlm's GPT (examples/charlm, 6 layers of width 384: 10.8M
  parameters, AdamW, gradient clipping) through ct_main, `--shard-optimizer`
  or not, global batch 16, 60 batches: samples/s from metrics.jsonl
  (records over the training lines' wall_s, reported every 10 batches, the
  first 10 left out) and each rank's peak resident memory (/usr/bin/time's
  %M).

    .venv/bin/python bench/dist/shard.py build --rounds 3

The table gives medians over the rounds and the ratio sharded/unsharded
(the goal: samples/s within 5%).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def run(cmd, env=None):
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}\nfailed ({p.returncode}): {(p.stdout + p.stderr)[-3000:]}")
    return p.stdout


def mlp(build, np, optim, shard, steps):
    out = run(MPI + ["-np", str(np), os.path.join(build, "bench/dist/bench_dist"), "train", "--optim", optim,
                     "--shard", str(int(shard)), "--steps", str(steps)])
    row = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    return {"samples_per_s": row["samples_per_s"], "state_mb": row["state_bytes_max"] / 2**20}


def charlm(build, np, shard, batches, work):
    out = os.path.join(work, f"charlm_np{np}_{int(shard)}")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    exe = os.path.join(build, "examples/charlm/charlm")
    # charlm's config, reporting every 10 batches (the first line, which
    # holds the start-up, is left out).
    with open(os.path.join(ROOT, "examples/charlm/charlm.json")) as f:
        cfg = json.load(f)
    cfg["scheduling_unit"] = 10
    cfg["data"]["path"] = os.path.join(ROOT, cfg["data"]["path"])
    cfg_path = os.path.join(out, "charlm.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    cmd = [exe, "--config", cfg_path, "--output", out, "--quiet",
           "--threads", "1", "--max-length", str(batches), "--validation-period", "never",
           "--checkpoint-policy", "none", "--checkpoint-period", "never", "--hparam", "n_layer=6",
           "--hparam", "n_embd=384", "--hparam", "n_head=6", "--hparam", "sample_tokens=0"] + \
        (["--shard-optimizer"] if shard else [])
    wrapped = ["bash", "-c", f'exec /usr/bin/time -f %M -o {out}/rss.$OMPI_COMM_WORLD_RANK "$@"', "rank", *cmd]
    run(MPI + ["-np", str(np), *wrapped], env=dict(os.environ, OMP_NUM_THREADS="1"))
    with open(os.path.join(out, "metrics.jsonl")) as f:
        train = [r for r in map(json.loads, f) if r["group"] == "training"]
    records = cfg["hyperparameters"]["global_batch_size"] * (train[-1]["batches"] - train[0]["batches"])
    wall = sum(r["timings"]["wall_s"] for r in train[1:])
    rss = [int(open(os.path.join(out, f"rss.{r}")).read().split()[-1]) / 1024 for r in range(np)]
    return {"samples_per_s": records / wall if wall else 0.0, "rss_mb": max(rss)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--steps", type=int, default=60, help="bench_dist's timed steps")
    ap.add_argument("--batches", type=int, default=60, help="charlm's batches (the first 10 untimed)")
    ap.add_argument("--parts", default="mlp,charlm")
    ap.add_argument("--json")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    work = tempfile.mkdtemp(prefix="bench_shard_")
    ranks = [int(x) for x in a.ranks.split(",")]
    parts = a.parts.split(",")
    results = {}  # (workload, np, shard) -> [dict]
    for rnd in range(a.rounds):
        for np in ranks:
            for shard in ((False, True) if rnd % 2 == 0 else (True, False)):
                if "mlp" in parts:
                    for optim in ("adam", "sgd"):
                        results.setdefault((f"mlp {optim}", np, shard), []).append(mlp(build, np, optim, shard,
                                                                                       a.steps))
                if "charlm" in parts:
                    results.setdefault(("charlm gpt", np, shard), []).append(charlm(build, np, shard, a.batches,
                                                                                    work))
        print(f"round {rnd + 1} of {a.rounds} done", file=sys.stderr)
    print("| workload | ranks | samples/s unsharded | sharded | ratio | memory per rank unsharded | sharded |")
    print("|---|---|---|---|---|---|---|")
    for (wl, np, shard) in sorted(results):
        if shard:
            continue
        u, s = results[(wl, np, False)], results[(wl, np, True)]
        su = statistics.median(r["samples_per_s"] for r in u)
        ss = statistics.median(r["samples_per_s"] for r in s)
        key, unit = ("state_mb", "MB of optimizer state") if "state_mb" in u[0] else ("rss_mb", "MB peak RSS")
        mu = statistics.median(r[key] for r in u)
        ms = statistics.median(r[key] for r in s)
        print(f"| {wl} | {np} | {su:.0f} | {ss:.0f} | {ss / su:.3f} | {mu:.1f} {unit} | {ms:.1f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"workload": k[0], "ranks": k[1], "shard": k[2], "runs": v} for k, v in results.items()], f,
                      indent=1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
