"""A model that does not fit a per-rank memory limit on one rank, trained
under that limit on 2 ranks with the optimizer state sharded: trained,
checkpointed, and resumed from that checkpoint.

Each rank runs in a memory cgroup of its own (cgroup v1's memory
controller, or v2's), as a batch scheduler or a container runtime would
put it, with the same limit for every rank. The model is tests/dist_fit's
shard_trial with twelve 2048x2048 layers (50M parameters, 201 MB; Adam's
state 403 MB), global batch 24:

1. one rank, 4 batches, a checkpoint every 2;
2. two ranks without sharding, the same;
3. two ranks, `optimizations.shard_optimizer`, 2 batches and a checkpoint;
4. the same two ranks resumed from that checkpoint (`--resume latest`) to
   batch 4.

    sudo .venv/bin/python bench/dist/memory_limit.py build --limit-mb 1000

Needs root (it makes cgroups). Prints each run's exit code (137: the
kernel's OOM killer ended it) and each rank's peak usage as the cgroup
counts it (memory it could not reclaim, plus page cache it could).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]

# A rank joins a cgroup of its own under this process's, with the limit,
# then becomes the trial; on its way out it prints the cgroup's peak.
WRAPPER = r"""#!/bin/bash
limit=$1; shift
rank=${OMPI_COMM_WORLD_RANK:-0}
if [ -d /sys/fs/cgroup/memory ]; then
  cg=/sys/fs/cgroup/memory$(grep ':memory:' /proc/self/cgroup | cut -d: -f3)/ctrial_bench_$$_$rank
  mkdir "$cg" && echo "$limit" > "$cg/memory.limit_in_bytes" || exit 90
  peak=memory.max_usage_in_bytes
else
  cg=/sys/fs/cgroup$(grep '^0::' /proc/self/cgroup | cut -d: -f3)/ctrial_bench_$$_$rank
  mkdir "$cg" && echo "$limit" > "$cg/memory.max" || exit 90
  peak=memory.peak
fi
echo $$ > "$cg/cgroup.procs" || exit 91
"$@"
rc=$?
echo "PEAK rank $rank $(cat "$cg/$peak" 2>/dev/null || echo 0)"
exit $rc
"""


def config(path, batches, shard):
    cfg = {"name": "memory_limit", "hyperparameters": {"global_batch_size": 24},
           "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True,
                        "max_length": {"batches": batches}},
           "min_checkpoint_period": {"batches": 2}, "scheduling_unit": 1,
           "optimizations": {"shard_optimizer": shard}}
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def run(args, work, name, np, batches, out, *extra, shard=True):
    cmd = MPI + ["-np", str(np), os.path.join(work, "in_cgroup.sh"), str(args.limit_mb << 20),
                 os.path.join(args.build, "tests/shard_trial"), "--config",
                 config(os.path.join(work, "config.json"), batches, shard), "--output", out, "--threads", "1",
                 "--device", "cpu", "--quiet", "--hparam", "optimizer=adam", "--hparam", f"hidden={args.hidden}",
                 "--hparam", f"depth={args.depth}", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1", SHARD_OUT=out))
    text = p.stdout + p.stderr
    if p.returncode in (90, 91):
        sys.exit("cannot make a memory cgroup here (root, and cgroup v1's memory controller or v2's, are needed)")
    peaks = sorted((int(w[2]), int(w[3])) for w in (ln.split() for ln in text.splitlines()) if w[:1] == ["PEAK"])
    killed = p.returncode == 137 or "Killed" in text or "signal 9" in text
    print(f"| {name} | {np} | {'killed (OOM)' if killed else p.returncode} | "
          f"{', '.join(f'{v >> 20} MB' for _, v in peaks) or '-'} |", flush=True)
    return p.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--limit-mb", type=int, default=1000, help="per rank (default 1000)")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--depth", type=int, default=12)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="memory_limit_")
    with open(os.path.join(work, "in_cgroup.sh"), "w") as f:
        f.write(WRAPPER)
    os.chmod(os.path.join(work, "in_cgroup.sh"), 0o755)
    print(f"limit {args.limit_mb} MB per rank; {args.depth} layers of {args.hidden}; work in {work} (removed at the end)\n")
    print("| run | ranks | exit | peak per rank (cgroup) |\n|---|---:|---|---|")
    run(args, work, "one rank", 1, 4, os.path.join(work, "one"))
    run(args, work, "2 ranks, not sharded", 2, 4, os.path.join(work, "unsharded"), shard=False)
    two = os.path.join(work, "two")
    run(args, work, "2 ranks sharded, to batch 2", 2, 2, two)
    run(args, work, "resumed at batch 2, to batch 4", 2, 4, two, "--resume", "latest")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
