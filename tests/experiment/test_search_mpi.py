"""Hyperparameter searches under mpirun: the ranks split into groups of
resources.slots_per_trial, each group training one trial at a time.

- random, 2 ranks in groups of 1: every trial trains exactly as in one
  process (its metrics.jsonl equal, clock readings aside);
- random, 4 ranks in groups of 2: every trial trains exactly as with 2 ranks
  in one group (data parallel within the group);
- adaptive_asha, 2 groups: every trial's events, decisions and metrics as in
  one process (the groups take every queued TRAIN, and the searcher gets
  the results in queue order); a paused and promoted trial equal to the
  same trial trained straight through;
  stopped by SIGTERM and resumed, the same events as uninterrupted;
- slots_per_trial that does not divide the ranks is refused before training.

    test_search_mpi.py CKPT_TRIAL
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, mpirun_cmd, need_mpirun, run_cmd, spawn, wait_or_kill  # noqa: E402
from search_files import events, metrics, outcome, per_trial, trial_logs  # noqa: E402

need_mpirun()
TRIAL = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="search_mpi_")
LIMIT = 300
SPACE = {"global_batch_size": 16,
         "lr": {"type": "log", "minval": -3, "maxval": -1, "base": 10},
         "dropout": {"type": "double", "minval": 0.0, "maxval": 0.5},
         "hidden": {"type": "int", "minval": 8, "maxval": 32}}


def config(name, searcher, slots=1, hp=None):
    c = {"name": "search", "hyperparameters": hp or SPACE, "searcher": searcher,
         "min_validation_period": {"batches": 12}, "reproducibility": {"experiment_seed": 7},
         "resources": {"slots_per_trial": slots}}
    path = os.path.join(WORK, name + ".json")
    with open(path, "w") as f:
        json.dump(c, f)
    return path


def run(np, cfg, out, *args, expect=0):
    cmd = mpirun_cmd(np, [TRIAL, "--config", cfg, "--output", out, "--threads", "1", *args])
    p = run_cmd(cmd, LIMIT)
    if p.returncode != expect:
        print(" ".join(cmd), "\n", p.stdout[-3000:], p.stderr[-3000:])
    check(p.returncode == expect, f"exit code {p.returncode} (want {expect}): {np} ranks, {os.path.basename(out)} "
          f"{' '.join(args)}")
    return p


rand = {"name": "random", "metric": "validation_loss", "max_trials": 4, "max_length": {"batches": 24}}
one, two = os.path.join(WORK, "one"), os.path.join(WORK, "two")
run(0, config("r1", rand), one)
run(2, config("r1", rand), two)
check(trial_logs(one) == trial_logs(two) and len(trial_logs(two)) == 4,
      "random, 2 groups of 1 rank: every trial as in one process")
check(per_trial(outcome(one)) == per_trial(outcome(two)),
      "random, 2 groups: the same events for each trial (two trials train in each round)")

dp2, dp4 = os.path.join(WORK, "dp2"), os.path.join(WORK, "dp4")
run(2, config("r2", rand, slots=2), dp2)
run(4, config("r2", rand, slots=2), dp4)
meta = json.load(open(os.path.join(dp4, "trials", "1", "checkpoints",
                                   os.listdir(os.path.join(dp4, "trials", "1", "checkpoints"))[0], "metadata.json")))
check(meta["trial_state"]["world_size"] == 2, "4 ranks, slots_per_trial 2: each trial trains on 2 ranks")
check(trial_logs(dp2) == trial_logs(dp4), "4 ranks in 2 groups of 2: every trial as with 2 ranks in one group")

# promotions (stop_once false): trials pause and are promoted later, across groups
asha = {"name": "adaptive_asha", "metric": "validation_loss", "max_trials": 8, "divisor": 3,
        "max_length": {"batches": 36}, "stop_once": False}
ref = os.path.join(WORK, "asha")
run(2, config("asha", asha), ref)
solo = os.path.join(WORK, "asha_solo")
run(0, config("asha", asha), solo)
check(per_trial(outcome(ref)) == per_trial(outcome(solo)) and trial_logs(ref) == trial_logs(solo),
      "adaptive_asha, 2 groups: every trial's events, decisions and metrics as in one process")
ev = events(ref)
closed = sorted(e["trial"] for e in ev if e["event"] in ("trial_completed", "trial_stopped"))
check(closed == list(range(1, 9)) and ev[-1]["event"] == "experiment_completed",
      "adaptive_asha, 2 groups: every trial closed exactly once")
paused = {e["trial"] for e in ev if e["event"] == "trial_paused"}
woken = [e["trial"] for e in ev if e["event"] == "trial_promoted" and e["trial"] in paused]
check(len(woken) >= 1, f"a paused trial was promoted ({woken})")
if woken:
    t = woken[0]
    c = [e for e in ev if e["event"] == "trial_created" and e["trial"] == t][0]
    straight = os.path.join(WORK, "straight")
    cfg = config("straight", {"name": "single", "metric": "validation_loss", "max_length": {"batches": 36}},
                 hp=c["hparams"])
    spec = json.load(open(cfg))
    spec["reproducibility"]["experiment_seed"] = c["trial_seed"]
    json.dump(spec, open(cfg, "w"))
    run(0, cfg, straight)
    check(metrics(os.path.join(ref, "trials", str(t), "metrics.jsonl")) ==
          metrics(os.path.join(straight, "metrics.jsonl")),
          f"promoted trial {t} trained in a group equals it trained straight through in one process")

# SIGTERM to mpirun mid-search, then --resume latest
slow = config("slow", asha, hp={**SPACE, "sleep_ms": 15})
out = os.path.join(WORK, "stopped")
proc = spawn(mpirun_cmd(2, [TRIAL, "--config", slow, "--output", out, "--threads", "1"]))
log = os.path.join(out, "experiment.jsonl")
deadline = time.time() + 120
while time.time() < deadline and not (os.path.exists(log) and sum(1 for _ in open(log)) >= 8):
    time.sleep(0.05)
# SIGTERM to every rank, as a batch scheduler sends it (mpirun signalled
# itself exits 1 whatever its ranks do: tests/dist_fit)
ranks = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
for pid in ranks:
    os.kill(int(pid), signal.SIGTERM)
r = wait_or_kill(proc, 60)
check(len(ranks) == 2 and r.returncode == 0 and events(out)[-1]["event"] == "experiment_stopped",
      f"SIGTERM to the {len(ranks)} ranks: the search stops cleanly (exit {r.returncode})")
run(2, slow, out, "--resume", "latest")
check(per_trial(outcome(out)) == per_trial(outcome(ref)) and trial_logs(out) == trial_logs(ref),
      "stopped and resumed under mpirun: every trial's events and metrics as uninterrupted")

p = run(2, config("bad", rand, slots=3), os.path.join(WORK, "bad"), expect=2)
check("'resources.slots_per_trial' is 3, which does not divide the 2 ranks" in p.stderr,
      "slots_per_trial 3 with 2 ranks: refused naming the key")

shutil.rmtree(WORK, ignore_errors=True)
if FAILURES:
    print(f"{len(FAILURES)} check(s) failed")
    sys.exit(1)
print("all checks passed")
