"""Hyperparameter searches through ct_main, end to end.

Runs tests/ckpt/ckpt_trial (a ct_main program whose dropout, shuffling,
StepLR and callback state all need an exact resume) under the adaptive_asha,
random and grid searchers, and checks:

- a trial that ASHA paused at a rung and promoted later trains exactly as
  the same trial trained straight through (every metrics.jsonl line equal,
  clock readings aside);
- a search stopped by SIGTERM, or killed with SIGKILL, and resumed with
  --resume latest ends exactly as an uninterrupted one (the same events
  with the same metrics, the same trial logs);
- a trial that fails is restarted from its latest checkpoint (max_restarts)
  and ends as if it had not failed; one that keeps failing is recorded as
  errored and the search carries on; when every trial fails, the exit code
  says so;
- grid creates its points from the last; random draws Determined's values;
- bad configs are refused before anything trains, naming the key; keys
  only a cluster uses are named in one warning; an earlier search is not
  overwritten unless asked.

    test_search.py CKPT_TRIAL
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
from harness import FAILURES, check, run_cmd, spawn, wait_or_kill  # noqa: E402
from search_files import events, metrics, outcome, trial_logs  # noqa: E402

TRIAL = sys.argv[1]
CKPT_TOOL = sys.argv[2] if len(sys.argv) > 2 else None
WORK = tempfile.mkdtemp(prefix="search_")
LIMIT = 300


def config(name, **over):
    """8 trials of adaptive ASHA over 36 batches (180 records in batches of
    16: 12 batches an epoch), divisor 3: brackets of rungs [12, 36] (5
    trials) and [36] (3 trials). Validation every 12 batches."""
    c = {
        "name": "search",
        "hyperparameters": {
            "global_batch_size": 16,
            "lr": {"type": "log", "minval": -3, "maxval": -1, "base": 10},
            "dropout": {"type": "double", "minval": 0.0, "maxval": 0.5},
            "hidden": {"type": "int", "minval": 8, "maxval": 32},
        },
        # stop_once false: promotions (Determined before 0.38), which pause and resume trials
        "searcher": {"name": "adaptive_asha", "metric": "validation_loss", "smaller_is_better": True,
                     "max_trials": 8, "divisor": 3, "max_length": {"batches": 36}, "stop_once": False},
        "min_validation_period": {"batches": 12},
        "reproducibility": {"experiment_seed": 7},
    }
    for k, v in over.items():
        c[k] = v
    path = os.path.join(WORK, name + ".json")
    with open(path, "w") as f:
        json.dump(c, f)
    return path


def run(cfg, out, *args, expect=0):
    cmd = [TRIAL, "--config", cfg, "--output", out, "--threads", "1", *args]
    p = run_cmd(cmd, LIMIT)
    if p.returncode != expect:
        print(" ".join(cmd), "\n", p.stdout[-3000:], p.stderr[-3000:])
    check(p.returncode == expect, f"exit code {p.returncode} (want {expect}): {os.path.basename(out)} {' '.join(args)}")
    return p


# ---- a search to its end --------------------------------------------------------------

ref = os.path.join(WORK, "ref")
p = run(config("asha"), ref)
ev = events(ref)
names = [e["event"] for e in ev]
check(names[0] == "experiment_started" and names[-1] == "experiment_completed", "first and last events")
started = ev[0]
check(started["brackets"] == [{"trials": 5, "max_concurrent": 8, "rungs": [12, 36]},
                              {"trials": 3, "max_concurrent": 8, "rungs": [36]}],
      f"Determined's plan for T 8, L 36, d 3: {started['brackets']}")
check(started["stop_once"] is False and "started adaptive_asha: 8 trials of up to 36 batches, promoting (stop_once "
      "false), brackets:" in p.stdout, "the first line and experiment_started say the mode (promotions, as asked)")
created = [e for e in ev if e["event"] == "trial_created"]
check([e["trial"] for e in created] == list(range(1, 9)), "8 trials created, ids 1..8")
# ctrial-ckpt list on the search's folder: each trial's checkpoints, trial by trial
if CKPT_TOOL:
    lp = subprocess.run([CKPT_TOOL, "list", ref], capture_output=True, text=True)
    heads = [l for l in lp.stdout.splitlines() if l.startswith("# trial ")]
    check(lp.returncode == 0 and lp.stdout.startswith(f"# search {ref}: 8 trials")
          and heads == [f"# trial {i}" for i in range(1, 9)] and "ckpt-" in lp.stdout,
          f"ctrial-ckpt list on a search folder lists its 8 trials' checkpoints ({lp.stdout[:200]!r})")

# one best per trial, the same everywhere: the best trial's best validation
# (over all its validations), the metric of the checkpoint named beside it
done = ev[-1]
vals = [json.loads(l)["metrics"]["validation_loss"] for l in open(os.path.join(ref, "trials", str(done["best_trial"]),
                                                                                "metrics.jsonl")) if '"validation"' in l]
ck_meta = json.load(open(os.path.join(done["best_checkpoint"], "metadata.json")))
check(done["best_metric"] == min(vals) == ck_meta["validation_metrics"]["validation_loss"]
      and f"best trial: {done['best_trial']}, validation_loss {min(vals):.6g}" in p.stdout,
      f"the best trial's best, its checkpoint's metric and the summary agree ({done['best_metric']}, {min(vals)}, "
      f"{ck_meta['validation_metrics']['validation_loss']})")
closed = [e for e in ev if e["event"] in ("trial_completed", "trial_stopped")]
check(sorted(e["trial"] for e in closed) == list(range(1, 9)), "every trial closed exactly once")
promoted = [e for e in ev if e["event"] == "trial_promoted"]
paused = {e["trial"] for e in ev if e["event"] == "trial_paused"}
woken = [e for e in promoted if e["trial"] in paused]
check(len(woken) >= 1, f"ASHA promoted {len(promoted)} trial(s), {len(woken)} of them after a pause")
for e in ev:
    if e["event"] == "trial_validated":
        check(e["metric"] == e["metrics"]["validation_loss"] and e["batches"] == e["length"],
              f"trial {e['trial']} validated at its rung {e['length']}")
last = ev[-1]
best = min((e for e in ev if e["event"] == "trial_validated"), key=lambda e: (e["metric"], e["trial"]))
check(last["best_trial"] == best["trial"] and last["best_metric"] == best["metric"],
      f"best trial {last['best_trial']} is the one with the lowest validation_loss")
check(last["best_checkpoint"] and os.path.isdir(last["best_checkpoint"]) and
      f"/trials/{best['trial']}/checkpoints/" in last["best_checkpoint"], "the best trial's checkpoint exists")
check("best trial: %d" % best["trial"] in p.stdout and last["best_checkpoint"] in p.stdout,
      "the summary names the best trial and its checkpoint")
for t in range(1, 9):
    check(os.path.exists(os.path.join(ref, "trials", str(t), "metrics.jsonl")), f"trial {t} has its own metrics.jsonl")
check(sum(line.startswith("[search") for line in p.stdout.splitlines()) == len(ev),
      "one console line per event")

# TensorBoard's HParams dashboard: the experiment at the top, each trial's
# session start and end in its folder (tests/tb_hparams checks the records)
import glob  # noqa: E402
check(len(glob.glob(os.path.join(ref, "*.hparams"))) == 1, "one HParams experiment file in the search's folder")
check(all(len(glob.glob(os.path.join(ref, "trials", str(t), "*.hparams"))) == 2 for t in range(1, 9)),
      "a session start and a session end in each trial's folder")

# ---- a promoted trial trains as if straight through -----------------------------------

t = woken[0]["trial"]
c = created[t - 1]
straight = os.path.join(WORK, "straight")
hp = dict(c["hparams"])
cfg = config("straight", hyperparameters=hp,
             searcher={"name": "single", "metric": "validation_loss", "max_length": {"batches": 36}},
             reproducibility={"experiment_seed": c["trial_seed"]})
run(cfg, straight)
a = metrics(os.path.join(ref, "trials", str(t), "metrics.jsonl"))
b = metrics(os.path.join(straight, "metrics.jsonl"))
check(a == b and len(a) > 4, f"promoted trial {t}: {len(a)} metrics lines equal to the same trial trained straight "
      f"through ({len(b)})")

# ---- stopped by SIGTERM, resumed --------------------------------------------------------

slow = config("slow", hyperparameters={**json.load(open(config("asha")))["hyperparameters"], "sleep_ms": 15})
for how in (signal.SIGTERM, signal.SIGKILL):
    out = os.path.join(WORK, f"stop_{how.name}")
    proc = spawn([TRIAL, "--config", slow, "--output", out, "--threads", "1"])
    log = os.path.join(out, "experiment.jsonl")
    deadline = time.time() + 120
    while time.time() < deadline:
        if os.path.exists(log) and sum(1 for _ in open(log)) >= 9:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, how)
    r = wait_or_kill(proc, 60)
    if how == signal.SIGTERM:
        check(r.returncode == 0 and events(out)[-1]["event"] == "experiment_stopped",
              f"SIGTERM: the search stops cleanly (exit {r.returncode}, last event {events(out)[-1]['event']})")
    else:
        check(r.returncode == -signal.SIGKILL, "SIGKILL: killed")
    run(slow, out, "--resume", "latest")
    want = [dict(e) for e in outcome(ref)]
    got = outcome(out)
    check(got == want, f"{how.name} + --resume latest: the same events and metrics as without a stop "
          f"({len(got)} vs {len(want)})")
    check(trial_logs(out) == trial_logs(ref), f"{how.name}: every trial's metrics.jsonl as without a stop")
    check(sum(e["event"] == "experiment_resumed" for e in events(out)) == 1, f"{how.name}: one experiment_resumed")

    check(all(len(glob.glob(os.path.join(out, "trials", str(t), "*.hparams"))) == 2 for t in range(1, 9)),
          f"{how.name}: each trial's session written once")

# a completed search resumed again changes nothing
n_before = len(events(ref))
p = run(config("asha"), ref, "--resume", "latest")
check(outcome(ref) == outcome(os.path.join(WORK, "stop_SIGTERM")) and len(events(ref)) == n_before
      and events(ref)[-1]["event"] == "experiment_completed" and "is complete: nothing to resume" in p.stdout,
      "resuming a completed search adds nothing: its log still ends with experiment_completed")

# ---- restarts and errored trials ---------------------------------------------------------

base_hp = json.load(open(config("asha")))["hyperparameters"]
rand = {"name": "random", "metric": "validation_loss", "max_trials": 3, "max_length": {"batches": 24}}
ok_run = os.path.join(WORK, "rand_ok")
run(config("rand_ok", searcher=rand), ok_run)
marker = os.path.join(WORK, "failed_once")
once = os.path.join(WORK, "rand_once")
run(config("rand_once", searcher=rand, max_restarts=2,
           hyperparameters={**base_hp, "fail_once_at": 7, "fail_marker": marker}), once)
ev = events(once)
restarted = [e for e in ev if e["event"] == "trial_restarted"]
check(len(restarted) == 1 and restarted[0]["trial"] == 1 and "fail_once_at 7" in restarted[0]["error"],
      "a failing trial is restarted once, the error recorded")
check(trial_logs(once) == trial_logs(ok_run), "the restarted trial ends as if it had not failed")

err = os.path.join(WORK, "rand_err")
hp_err = {**base_hp, "fail_at": {"type": "categorical", "vals": [-1, 5]}}
p = run(config("rand_err", searcher={**rand, "max_trials": 6}, max_restarts=1, hyperparameters=hp_err), err)
ev = events(err)
failing = {e["trial"] for e in ev if e["event"] == "trial_created" and e["hparams"]["fail_at"] == 5}
errored = {e["trial"] for e in ev if e["event"] == "trial_errored"}
check(failing and errored == failing, f"trials that always fail are errored ({sorted(errored)})")
check(all(sum(e["event"] == "trial_restarted" and e["trial"] == t for e in ev) == 1 for t in failing),
      "each was restarted max_restarts (1) times first")
check(ev[-1]["event"] == "experiment_completed" and ev[-1]["errored"] == len(failing) and ev[-1]["trials"] == 6,
      "the search carries on to its end")
check("errored" in p.stdout, "the summary shows the errored trials")
run(config("all_err", searcher=rand, max_restarts=0, hyperparameters={**base_hp, "fail_at": 3}),
    os.path.join(WORK, "all_err"), expect=1)

# ---- grid and random ---------------------------------------------------------------------------

grid = os.path.join(WORK, "grid")
run(config("grid", searcher={"name": "grid", "metric": "validation_loss", "max_length": {"batches": 12}},
           hyperparameters={"global_batch_size": 16, "hidden": {"type": "int", "minval": 8, "maxval": 16, "count": 2},
                            "lr": {"type": "categorical", "vals": [0.01, 0.1]}}), grid)
got = [(e["hparams"]["hidden"], e["hparams"]["lr"]) for e in events(grid) if e["event"] == "trial_created"]
check(got == [(16, 0.1), (16, 0.01), (8, 0.1), (8, 0.01)], f"grid: points from the last, first axis slowest: {got}")

# Determined's draws (master/pkg/searcher, seed 42 over its mnist adaptive.yaml space)
det = os.path.join(WORK, "det")
run(config("det", searcher={"name": "random", "metric": "validation_loss", "max_trials": 2,
                            "max_length": {"batches": 1}},
           reproducibility={"experiment_seed": 42},
           hyperparameters={"global_batch_size": 16,
                            "learning_rate": {"type": "double", "minval": .0001, "maxval": 1.0},
                            "n_filters1": {"type": "int", "minval": 8, "maxval": 64},
                            "n_filters2": {"type": "int", "minval": 8, "maxval": 72},
                            "dropout1": {"type": "double", "minval": .2, "maxval": .8},
                            "dropout2": {"type": "double", "minval": .2, "maxval": .8}}), det)
c1 = [e for e in events(det) if e["event"] == "trial_created"][0]
check(c1["hparams"] == {"global_batch_size": 16, "dropout1": 0.42472407130841755, "dropout2": 0.7704285838459497,
                        "learning_rate": 0.7320207424172239, "n_filters1": 28, "n_filters2": 31}
      and c1["trial_seed"] == 953477463 and c1["request_id"] == "82a0a0a6-9506-4505-b4fd-700e01034cf8",
      f"random: Determined's first trial for seed 42: {c1['hparams']}, {c1['trial_seed']}")

# ---- refusals ------------------------------------------------------------------------------------


def refused(name, want, **over):
    out = os.path.join(WORK, "bad_" + name)
    p = run(config("bad_" + name, **over), out, expect=2)
    check(want in p.stderr and not os.path.exists(os.path.join(out, "trials")),
          f"{name}: refused naming it ({p.stderr.strip()[-160:]})")


asha = json.load(open(config("asha")))["searcher"]
refused("empty_categorical", "hyperparameters.opt", hyperparameters={**base_hp, "opt": {"type": "categorical",
                                                                                         "vals": []}})
refused("minval", "hyperparameters.lr", hyperparameters={**base_hp, "lr": {"type": "double", "minval": 1,
                                                                            "maxval": 0.5}})
refused("base", "hyperparameters.lr", hyperparameters={**base_hp, "lr": {"type": "log", "minval": -3, "maxval": -1,
                                                                          "base": 0}})
refused("max_trials", "searcher.max_trials", searcher={**asha, "max_trials": 0})
refused("grid_max_trials", "'searcher.max_trials' is not a key of searcher 'grid'",
        searcher={"name": "grid", "metric": "x", "max_trials": 3, "max_length": {"batches": 3}})
refused("typo", "searcher.max_trails", searcher={**asha, "max_trails": 3})
refused("slots", "resources.slots_per_trial", resources={"slots_per_trial": 2})
refused("grid_count", "count", searcher={"name": "grid", "metric": "x", "max_length": {"batches": 3}})
# 10^x past x = 308 is infinite (it was CT_ENOMEM, exit 1)
refused("log_overflow", "hyperparameters.lr: base^x overflows a double",
        hyperparameters={**base_hp, "lr": {"type": "log", "minval": 300, "maxval": 400, "base": 10}})
# every trial at the start (max_concurrent_trials 0): past 100,000 refused before any is created (was 3 GB)
refused("at_once", "searcher 'random': 2147483647 trials would be created at the start",
        searcher={**rand, "max_trials": 2147483647, "max_concurrent_trials": 0})
# a max_length past what a search counts (2^63 - 1 epochs; it exited 1)
refused("huge_epochs", "searcher.max_length is 9223372036854775807, more than the 9223372036854774 a search counts",
        searcher={**rand, "max_trials": 2, "max_length": {"epochs": 9223372036854775807}})
# every trial failing on its configuration (a sampled global_batch_size of 0): the exit code is a config error's
gbs0 = os.path.join(WORK, "gbs0")
p = run(config("gbs0", searcher={**rand, "max_trials": 2},
               hyperparameters={**base_hp, "global_batch_size": {"type": "categorical", "vals": [0]}}), gbs0, expect=2)
check("every trial of the search failed on its configuration" in p.stderr and "global_batch_size" in p.stderr,
      f"every trial failing on its configuration: exit 2 naming it ({p.stderr.strip()[-200:]})")

# keys only a cluster uses: one warning naming them, and the search runs
warn = os.path.join(WORK, "warn")
p = run(config("warn", searcher={**rand, "max_trials": 1}, environment={"image": "x"}, bind_mounts=[],
               resources={"resource_pool": "gpu", "slots_per_trial": 1}), warn)
lines = [line for line in p.stderr.splitlines() if "warning" in line]
check(len(lines) == 1 and all(k in lines[0] for k in ("environment", "bind_mounts", "resources.resource_pool")),
      f"one warning names the cluster-only keys: {lines}")

# an empty experiment.jsonl (killed before its first line): --resume latest starts the search, logged as started
empty = os.path.join(WORK, "empty_log")
os.makedirs(empty)
open(os.path.join(empty, "experiment.jsonl"), "w").close()
run(config("empty_log", searcher={**rand, "max_trials": 1}), empty, "--resume", "latest")
names = [e["event"] for e in events(empty)]
check(names[:1] == ["experiment_started"] and "experiment_resumed" not in names and names[-1] == "experiment_completed",
      f"an empty log resumed: started, not resumed ({names[:3]})")

# an earlier search is kept unless --overwrite
p = run(config("warn", searcher={**rand, "max_trials": 1}), warn, expect=2)
check("holds an earlier search" in p.stderr, "a second search in the same folder is refused")
run(config("warn", searcher={**rand, "max_trials": 1}), warn, "--overwrite")
check(len([e for e in events(warn) if e["event"] == "trial_created"]) == 1, "--overwrite starts over")

# checkpoints in checkpoint_storage.host_path: each trial's in <host_path>/trials/<id>; another search
# pointed at the same storage is refused (its trials would resume this one's checkpoints) unless --overwrite
store = os.path.join(WORK, "store")
shared = config("shared", searcher={**rand, "max_trials": 2}, checkpoint_storage={"host_path": store})
run(shared, os.path.join(WORK, "shared_a"))
check(all(os.listdir(os.path.join(store, "trials", t)) for t in ("1", "2")), "trials' checkpoints in host_path/trials/<id>")
p = run(shared, os.path.join(WORK, "shared_b"), expect=2)
check("results of 2 trials of an earlier run" in p.stderr and store in p.stderr,
      "a second search on the same checkpoint storage is refused, naming it")
run(shared, os.path.join(WORK, "shared_b"), "--overwrite")
check(trial_logs(os.path.join(WORK, "shared_b")) == trial_logs(os.path.join(WORK, "shared_a")),
      "--overwrite starts its trials afresh (not from the other search's checkpoints)")
# trial folders without a log (it was deleted) are not resumed as this search's
os.remove(os.path.join(WORK, "shared_a", "experiment.jsonl"))
p = run(config("shared_a2", searcher={**rand, "max_trials": 2}), os.path.join(WORK, "shared_a"), "--resume", "latest",
        expect=2)
check("without its experiment.jsonl" in p.stderr, "trial folders without their log are refused")

shutil.rmtree(WORK, ignore_errors=True)
if FAILURES:
    print(f"{len(FAILURES)} check(s) failed")
    sys.exit(1)
print("all checks passed")
