"""Checkpoints are ordered by commit, never by the clock (issue 17, item 1).

A run's wall clock steps back (an NTP step; rank 0 on a host whose clock is
behind): the checkpoints written after the step carry an earlier "time"
than those before it. ckpt_trial runs under clock_shift (an LD_PRELOAD
library moving clock_gettime(CLOCK_REALTIME) and time() by
CT_TEST_CLOCK_SHIFT seconds):

  A  clock right,        batches 1-24:  checkpoints 8, 16, 24
  B  clock a day behind, resumes 24, batches 25-40: checkpoints 32, 40
  C  clock right,        --resume latest to 48

Retention keeps the 2 latest and the best. After B, `ctrial-ckpt latest`
and the listing's latest mark name 40, and retention kept 32 and 40 (by
time it would have kept 16 and 24 and deleted 32). C resumes from 40 (by
time it would resume from 24 and cut metrics.jsonl back to it): every
line A and B wrote stays as it was, and the run ends at 48.

Then a resume from an earlier checkpoint (by path) is a new branch of the
run: the checkpoints it writes come after every other in commit order, so
`--resume latest` continues the branch, although an abandoned checkpoint
trained further, and metrics.jsonl has no gap.

    test_ckpt_clock.py CKPT_TRIAL CTRIAL_CKPT CLOCK_SHIFT_SO
"""
import glob
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, run_cmd  # noqa: E402

TRIAL, CKPT_TOOL, SHIFT_SO = sys.argv[1], sys.argv[2], sys.argv[3]
WORK = tempfile.mkdtemp(prefix="ckpt_clock_")
DAY = 86400


def config(path, **over):
    """180 training records in batches of 16, checkpoints every 8 batches,
    validation only at the end of a run (max_length), reports every 4;
    retention keeps the 2 latest and the best."""
    c = {
        "name": "ckpt_clock",
        "hyperparameters": {"global_batch_size": 16},
        "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True,
                     "max_length": {"batches": 48}},
        "min_validation_period": {"batches": 1000},
        "min_checkpoint_period": {"batches": 8},
        "scheduling_unit": 4,
        "checkpoint_storage": {"save_trial_latest": 2, "save_trial_best": 1},
    }
    c.update(over)
    with open(path, "w") as f:
        json.dump(c, f)
    return path


CFG = config(os.path.join(WORK, "cfg.json"))


def run(out, *args, shift=0, cfg=CFG, expect=0):
    env = dict(os.environ)
    if shift:
        env["LD_PRELOAD"] = SHIFT_SO
        env["CT_TEST_CLOCK_SHIFT"] = str(shift)
        # An ASan build wants its runtime first; the shim does not use it.
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    cmd = [TRIAL, "--config", cfg, "--output", out, "--threads", "1", *args]
    p = run_cmd(cmd, 300, env=env)
    if p.returncode != expect:
        print(" ".join(cmd), "\n", p.stdout[-3000:], p.stderr[-3000:])
    check(p.returncode == expect, f"exit code {p.returncode} (want {expect}): {' '.join(args)} (clock {shift:+d} s)")
    return p


def checkpoints(out):
    """{steps: (name, metadata)} of the committed checkpoints."""
    found = {}
    for d in glob.glob(os.path.join(out, "checkpoints", "ckpt-*")):
        meta = json.load(open(os.path.join(d, "metadata.json")))
        found[meta["steps_completed"]] = (os.path.basename(d), meta)
    return found


def path_of(out, steps):
    c = checkpoints(out).get(steps)
    return os.path.join(out, "checkpoints", c[0]) if c else None


def lines(out):
    """metrics.jsonl without the clock readings ("time", "timings")."""
    got = []
    for line in open(os.path.join(out, "metrics.jsonl")):
        m = json.loads(line)
        m.pop("time")
        m.pop("timings", None)
        got.append(m)
    return got


def tool_latest(out):
    p = run_cmd([CKPT_TOOL, "latest", os.path.join(out, "checkpoints")], 120)
    return p.returncode, os.path.basename(p.stdout.strip())


def listed_latest(out):
    p = run_cmd([CKPT_TOOL, "list", out], 120)
    rows = [line.split() for line in p.stdout.splitlines() if not line.startswith("#")]
    return p.returncode, [r[0] for r in rows if "latest" in r[4:]]


def resumed_from(p):
    """The checkpoint the start-up summary says the run resumed from."""
    for line in p.stdout.splitlines():
        if line.startswith("resumed from "):
            return os.path.basename(line.split()[2])
    return None


# ---- A, B: the clock steps back a day between batch 24 and batch 32 ----------------

out = os.path.join(WORK, "out")
run(out, "--max-length", "24")
times_a = {s: m["time"] for s, (_, m) in checkpoints(out).items()}
run(out, "--resume", "latest", "--max-length", "40", shift=-DAY)
ck = checkpoints(out)
t40, t24 = ck[40][1]["time"] if 40 in ck else None, times_a.get(24)
check(t40 is not None and t24 is not None and t40 < t24 - DAY / 2,
      f"the shim moved the clock: checkpoint 40's time is a day before 24's ({t40} vs {t24})")
seqs = {s: m.get("commit_sequence", 0) for s, (_, m) in ck.items()}
check(seqs.get(40, 0) == seqs.get(32, 0) + 1 and seqs.get(32, 0) > 3,
      f"commit_sequence grows with every commit, across the resume: {dict(sorted(seqs.items()))}")
rc, latest = tool_latest(out)
check(rc == 0 and latest == (ck[40][0] if 40 in ck else "?"), f"ctrial-ckpt latest names 40: {latest}")
rc, marked = listed_latest(out)
check(rc == 0 and marked == [ck[40][0]] if 40 in ck else False, f"ctrial-ckpt list marks 40 latest: {marked}")
validated = {m["batches"]: m["metrics"]["validation_loss"] for m in lines(out) if m["group"] == "validation"}
best = min(validated, key=lambda b: validated[b])
want = sorted({32, 40, best})
check(sorted(validated) == [24, 40] and sorted(ck) == want,
      f"retention kept the 2 latest by commit (32, 40) and the best ({best}): {sorted(ck)}")
before = lines(out)
check(max(m["batches"] for m in before) == 40, "metrics.jsonl reaches batch 40")

# ---- C: the clock is right again; --resume latest continues from 40 --------------

p = run(out, "--resume", "latest", "--max-length", "48")
check(resumed_from(p) == (ck[40][0] if 40 in ck else "?"), f"--resume latest resumed from 40: {resumed_from(p)}")
after = lines(out)
check(after[:len(before)] == before, f"metrics.jsonl kept every line up to batch 40 ({len(before)} lines)")
train = [m["batches"] for m in after if m["group"] == "training"]
check(train == list(range(4, 49, 4)), f"training lines every 4 batches to 48, once each: {train}")
ck = checkpoints(out)
check(48 in ck and 40 in ck, f"retention kept 40 and 48 after C: {sorted(ck)}")
rc, latest = tool_latest(out)
check(rc == 0 and 48 in ck and latest == ck[48][0], f"ctrial-ckpt latest names 48: {latest}")

# ---- a branch: resumed from an earlier checkpoint by path ------------------------------

cfg_all = config(os.path.join(WORK, "keep_all.json"),
                 checkpoint_storage={"save_trial_latest": 100, "save_trial_best": 100})
out = os.path.join(WORK, "branch")
run(out, "--max-length", "24", cfg=cfg_all)
ck8 = path_of(out, 8)
run(out, "--resume", ck8 or "?", "--max-length", "16", cfg=cfg_all)
names = {s: n for s, (n, _) in checkpoints(out).items()}
branch = [os.path.basename(d) for d in glob.glob(os.path.join(out, "checkpoints", "ckpt-000016-*"))]
newest16 = max(branch, key=lambda n: json.load(open(os.path.join(out, "checkpoints", n, "metadata.json")))
               .get("commit_sequence", 0)) if branch else None
rc, latest = tool_latest(out)
check(len(branch) == 2 and latest == newest16,
      f"after a resume from 8 to 16, the latest is the branch's 16, not the abandoned 24: {latest} ({names})")
p = run(out, "--resume", "latest", "--max-length", "24", cfg=cfg_all)
check(resumed_from(p) == newest16, f"--resume latest continues the branch from its 16: {resumed_from(p)}")
train = [m["batches"] for m in lines(out) if m["group"] == "training"]
check(train == list(range(4, 25, 4)), f"metrics.jsonl of the branch, no gap and no repeat: {train}")

if FAILURES:
    print(f"{len(FAILURES)} failure(s); work dir kept: {WORK}")
    sys.exit(1)
shutil.rmtree(WORK)
print("all passed")
