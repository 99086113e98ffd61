"""The collective timeout, end to end (issue 17, item 8): tests/dist_fit/dist_trial
(a ct_main program) under mpirun with CTRIAL_DIST_TIMEOUT=3.

    test_timeout.py DIST_TRIAL

1. Rank 1 of 2 sleeps 60 s inside train_batch, before its backward (rank 0
   waits in the gradient all-reduce) or after its optimizer step (rank 0
   waits in the agreement after the batch): the job ends with exit code 5
   (CT_EXIT_DIST) well before the sleep is over, with one line naming rank
   1, the collective and the timeout.
2. Three ranks, rank 0 stuck: rank 1 names rank 0; one line (rank 2, which
   also waits, leaves the report to rank 1).
3. A rank 1.5 s late in one batch is within the timeout: the run completes
   (exit 0) with the weights of a run without the delay.
4. CTRIAL_DIST_TIMEOUT that is not a number of seconds: a config error
   (exit 2) naming the variable.
5. A grid search of two trials over both ranks, rank 1 stuck 60 s in the
   first trial's on_trial_shutdown (after the fit's last collective, so
   rank 0 waits in the search's own exchange between trials), with the
   environment's timeout at 30 minutes and --dist-timeout 3, or the config's
   resources.dist_timeout 3: the job ends with exit code 5 within the bound,
   naming rank 1, as inside a fit.

Exits 77 (skipped) without mpirun.
"""
import glob
import json
import os
import re
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import check, exit_with_report, mpirun_cmd, need_mpirun, run_cmd, single_config  # noqa: E402

TRIAL = os.path.abspath(sys.argv[1])
MPIRUN = need_mpirun()

WORK = tempfile.mkdtemp(prefix="dist_timeout_")
T0 = time.time()
TIMEOUT = 3  # seconds, the collective timeout under test
# A stuck run must end within the timeout, the grace period for answers (1
# s) and mpirun's teardown; 30 s is far more, and far less than the 60 s the
# stuck rank sleeps (the bound shows it ended, not that it was fast).
BOUND = 30

CFG = single_config(os.path.join(WORK, "cfg.json"), "dist_timeout", 12, 20, val=10, ckpt=10, keep_all=False)


def run(name, np, args=(), timeout=str(TIMEOUT), limit=120):
    out = os.path.join(WORK, name)
    os.makedirs(out)
    cmd = mpirun_cmd(np, [TRIAL, "--config", CFG, "--output", out, "--threads", "1", *args])
    env = dict(os.environ, OMP_NUM_THREADS="1", DIST_FIT_OUT=out, CTRIAL_DIST_TIMEOUT=timeout)
    t = time.time()
    code, text, _ = run_cmd(cmd, limit, env=env, merge=True)
    return code, text, time.time() - t, out


def stuck(np, rank, where):
    return ["--hparam", f"stuck_rank={rank}", "--hparam", "stuck_at=3", "--hparam", "stuck_s=60",
            "--hparam", f"stuck_where={where}"]


print(f"work dir {WORK}; mpirun {MPIRUN}", flush=True)

# ---- 1 + 2: a stuck rank ends the job, named --------------------------------------------

for np, rank, where, collective in ((2, 1, "backward", "the gradient all-reduce"),
                                    (2, 1, "step", "the agreement on a stop signal"),
                                    (3, 0, "step", "the agreement on a stop signal")):
    name = f"-np {np}, rank {rank} stuck 60 s ({where})"
    code, text, took, out = run(f"stuck_np{np}_r{rank}_{where}", np, stuck(np, rank, where))
    lines = re.findall(r"^ctrial: rank (\d+): collective timeout: (.*)$", text, re.M)
    if code != 5 or len(lines) != 1:
        print(text[-3000:])
    check(code == 5, f"{name}: exit code 5, CT_EXIT_DIST ({code})")
    check(took < BOUND, f"{name}: the job ended in {took:.1f} s (bound {BOUND} s; the rank sleeps 60 s)")
    check(len(lines) == 1, f"{name}: one collective-timeout line ({len(lines)})")
    if lines:
        reporter, msg = int(lines[0][0]), lines[0][1]
        waited = re.match(r"waited ([\d.]+) s in (.*?) \(collective #\d+ of this rank; (\d+) batches trained\)", msg)
        check(reporter == (1 if rank == 0 else 0), f"{name}: the lowest waiting rank reports (rank {reporter})")
        check(waited is not None and float(waited.group(1)) >= TIMEOUT and waited.group(2) == collective,
              f"{name}: it waited {TIMEOUT} s in {collective} ({msg[:120]!r})")
        check(waited is not None and int(waited.group(3)) in (3, 4),
              f"{name}: in batch 4, the one rank {rank} is stuck in ({waited.group(3) if waited else None} "
              "batches trained)")
        check(re.search(rf"; rank {rank} did not arrive: no answer within 1 s", msg) is not None,
              f"{name}: names rank {rank} as the one that did not arrive")
        check(f"The timeout is {TIMEOUT} s (--dist-timeout, CTRIAL_DIST_TIMEOUT" in msg, f"{name}: says what the timeout is and "
              "where it is set")
        others = [r for r in range(np) if r not in (rank, reporter)]
        check(all(not re.search(rf"\brank {r}\b did not arrive", msg) for r in others),
              f"{name}: names no waiting rank as missing")

# ---- 3: a late rank within the timeout ---------------------------------------------------

code, text, took, ref = run("ref", 2)
check(code == 0, f"reference run, 2 ranks: exit {code}")
code, text, took, out = run("late", 2, ["--hparam", "stuck_rank=1", "--hparam", "stuck_at=3", "--hparam", "stuck_s=1",
                                        "--hparam", "stuck_where=backward"])
# stuck_s is whole seconds: 1 s late, within 3 s.
print(text[-2000:] if code != 0 else "", end="")
same = False
try:
    a = torch.load(glob.glob(os.path.join(ref, "checkpoints", "ckpt-000020-*", "state_dict.pth"))[0], weights_only=True)
    b = torch.load(glob.glob(os.path.join(out, "checkpoints", "ckpt-000020-*", "state_dict.pth"))[0], weights_only=True)
    same = all(torch.equal(a["models_state_dict"][0][k], b["models_state_dict"][0][k]) for k in a["models_state_dict"][0])
except (IndexError, OSError) as e:
    print(f"    {e}")
check(code == 0 and same and "collective timeout" not in text,
      f"rank 1 of 2 one second late in batch 4: the run completes with the same weights (exit {code})")

# ---- 4: a bad CTRIAL_DIST_TIMEOUT -----------------------------------------------------------

code, text, took, out = run("bad_env", 2, timeout="3 minutes")
check(code == 2 and "CTRIAL_DIST_TIMEOUT is '3 minutes'" in text,
      f"CTRIAL_DIST_TIMEOUT='3 minutes': exit 2 naming the variable ({code}: {text.strip()[-300:]!r})")

# ---- 5: a search: the timeout covers the exchanges between trials ----------------------------


def search_cfg(name, timeout_key):
    path = os.path.join(WORK, name + ".json")
    cfg = {"name": name, "hyperparameters": {"global_batch_size": 12, "hidden": {"type": "categorical",
                                                                                  "vals": [8, 16]}},
           "searcher": {"name": "grid", "metric": "validation_loss", "smaller_is_better": True,
                        "max_length": {"batches": 4}},
           "resources": {"slots_per_trial": 2}}
    if timeout_key:
        cfg["resources"]["dist_timeout"] = TIMEOUT
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


for how in ("--dist-timeout", "resources.dist_timeout"):
    name = f"a search, rank 1 stuck 60 s between trials, {how} {TIMEOUT}"
    out = os.path.join(WORK, "search_" + how.strip("-").replace(".", "_"))
    os.makedirs(out)
    cfg = search_cfg("search_" + how.strip("-").replace(".", "_"), how != "--dist-timeout")
    flags = ["--dist-timeout", str(TIMEOUT)] if how == "--dist-timeout" else []
    cmd = mpirun_cmd(2, [TRIAL, "--config", cfg, "--output", out, "--threads", "1", *flags,
                         "--hparam", "stuck_rank=1", "--hparam", "stuck_s=60", "--hparam", "stuck_where=shutdown"])
    env = dict(os.environ, OMP_NUM_THREADS="1", DIST_FIT_OUT=out, CTRIAL_DIST_TIMEOUT="1800")
    t = time.time()
    code, text, _ = run_cmd(cmd, 120, env=env, merge=True)
    took = time.time() - t
    lines = re.findall(r"^ctrial: rank (\d+): collective timeout: (.*)$", text, re.M)
    if code != 5 or len(lines) != 1:
        print(text[-3000:])
    check(code == 5 and took < BOUND, f"{name}: exit code 5 ({code}) in {took:.1f} s (bound {BOUND} s)")
    check(len(lines) == 1 and lines[0][0] == "0" and "rank 1 did not arrive" in lines[0][1]
          and f"The timeout is {TIMEOUT} s" in lines[0][1],
          f"{name}: rank 0 names rank 1 ({lines[0][1][:160] if lines else None!r})")

exit_with_report(T0, WORK)
