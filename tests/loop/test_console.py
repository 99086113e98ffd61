"""What a run shows on the console (issue 16), through a user's program
(console_trial.c: OneVar with flags of its own and batches that sleep a
known time):

- the start-up summary: version, trial, device, threads, ranks, models and
  parameters; records, batches per epoch and global batch size; the plan
  (length, periods, output); and on resume the checkpoint and batch, and
  a first progress line whose records/s is the batch size times its
  batches/s, also after a stop signal inside a reporting period;
- plain lines when stdout is not a terminal: no carriage returns or escape
  codes, records/s never 0;
- the last line names the latest and the best checkpoint, checked against
  every checkpoint's metadata.json;
- the ETA follows the run's real remaining time within a tenth of the run
  (and the rounding to whole seconds), although validations make the
  intervals between reports alternate between fast and slow: a rate over the
  last interval misses by about 2.5 s of a 6.5 s run, and the average rate
  since the start (validations at the share they had so far) by 2.4 s;
- on a terminal (a pseudo-terminal here), the live line's records/s is never
  0 between reports.

    test_console.py CONSOLE_TRIAL
"""
import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import time

TRIAL = sys.argv[1]
WORK = os.path.join(os.environ.get("CTRIAL_BUILD_DIR", "."), "tests", "console")
failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += 0 if ok else 1


def config(name, max_batches, validation=10, checkpoint=20, policy="best"):
    path = os.path.join(WORK, name + ".json")
    with open(path, "w") as f:
        json.dump({"hyperparameters": {"global_batch_size": 4},
                   "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True,
                                "max_length": {"batches": max_batches}},
                   "min_validation_period": {"batches": validation},
                   "min_checkpoint_period": {"batches": checkpoint},
                   "checkpoint_policy": policy, "scheduling_unit": 5}, f)
    return path


def command(cfg, out, *extra):
    return [TRIAL, "--config", cfg, "--output", out, "--threads", "1", *extra]


def run(cfg, out, *extra):
    """Runs to the end with stdout on a pipe; returns (stdout lines, their
    arrival times, the end time)."""
    p = subprocess.Popen(command(cfg, out, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines, times = [], []
    for line in p.stdout:
        times.append(time.monotonic())
        lines.append(line.rstrip("\n"))
    err = p.stderr.read()
    p.wait(timeout=120)
    end = time.monotonic()
    print("\n".join(lines))
    if err:
        print(err)
    check(p.returncode == 0, f"exit code {p.returncode}")
    return lines, times, end


def checkpoints(out):
    d = os.path.join(out, "checkpoints")
    found = []
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name, "metadata.json")) as f:
            found.append((os.path.join(d, name), json.load(f)))
    return found


PROGRESS = re.compile(r"^\[(\d+)/(\d+) +[\d.]+%\] epoch [\d.]+  ([\d.]+) batches/s  (\d+) records/s  ETA (\S+)")


def seconds(eta):
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(\d+)s|(\d+)h(\d+)m", eta)
    if not m:
        return None
    if m.group(4):
        return int(m.group(4)) * 3600 + int(m.group(5)) * 60
    return int(m.group(1) or 0) * 3600 + int(m.group(2) or 0) * 60 + int(m.group(3))


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

# ---- the summary, plain lines, the checkpoints' line --------------------------------------
out = os.path.join(WORK, "summary")
cfg = config("summary", 40)
lines, _, _ = run(cfg, out)
text = "\n".join(lines)
check("\r" not in text and "\x1b" not in text, "plain lines on a pipe: no carriage return, no escape code")
check(re.fullmatch(r"ctrial \d+\.\d+\.\d+: trial console on cpu, 1 intra-op thread per rank \(num_threads\), 1 rank; "
                   r"1 model, 1 parameter", lines[0]) is not None, f"summary line 1: {lines[0]!r}")
check(lines[1] == "data: training 64 records, 16 batches per epoch (global batch size 4); validation 32 records",
      f"summary line 2: {lines[1]!r}")
check(lines[2] == f"plan: 40 batches (2.50 epochs); validation every 10 batches, checkpoint every 20 batches and "
                  f"after every validation that improves validation_loss; output in {out}",
      f"summary line 3 (the period and the policy best): {lines[2]!r}")
progress = [PROGRESS.match(l) for l in lines if l.startswith("[")]
check(len(progress) == 8 and all(progress), f"a progress line every 5 batches: {len(progress)}")
check(all(int(m.group(4)) > 0 and float(m.group(3)) > 0 for m in progress if m),
      "every progress line has records/s and batches/s above 0")
ckpts = checkpoints(out)
latest = max(ckpts, key=lambda c: c[1]["steps_completed"])
scored = [c for c in ckpts if "validation_loss" in c[1]["validation_metrics"]]
best = min(scored, key=lambda c: c[1]["validation_metrics"]["validation_loss"])
m = re.fullmatch(r"checkpoints: latest (\S+); best (\S+) \(validation_loss (\S+)\)", lines[-1])
check(m is not None and m.group(1) == latest[0] and m.group(2) == best[0]
      and abs(float(m.group(3)) - best[1]["validation_metrics"]["validation_loss"]) < 1e-6,
      f"the last line names the latest ({latest[0]}) and the best ({best[0]}) checkpoints: {lines[-1]!r}")

# ---- resumed: the summary says from where ---------------------------------------------------
lines, _, _ = run(cfg, out, "--resume", "latest", "--max-length", "60")
check(lines[2].startswith("plan: 60 batches (3.75 epochs)"), f"resumed plan: {lines[2]!r}")
check(lines[3] == f"resumed from {latest[0]} after batch 40 (epoch 2.50)", f"resumed line: {lines[3]!r}")
ckpts = checkpoints(out)
newest = max(ckpts, key=lambda c: c[1]["steps_completed"])
check(newest[1]["steps_completed"] == 60 and lines[-1].startswith(f"checkpoints: latest {newest[0]}; best "),
      f"after the resume the latest is at 60: {lines[-1]!r}")

# ---- resumed after a stop signal: the first line's rates -------------------------------------
# SIGTERM after the first progress line stops the run after the current
# batch and saves the workload it cut short (reports every 5 batches) in
# the checkpoint; the resumed run reports those batches with its own, but
# its first progress line counts only the records of the batches it
# trained: records/s is the global batch size (4) times batches/s.
out = os.path.join(WORK, "pending")
cfg = config("pending", 40, validation=100, checkpoint=100, policy="none")
p = subprocess.Popen(command(cfg, out, "--train-ms", "30"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
for line in p.stdout:
    if line.startswith("["):
        time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        break
rest, err = p.communicate(timeout=120)
stopped = re.search(r"stopped by SIGTERM after batch (\d+)", rest)
check(p.returncode == 0 and stopped is not None and int(stopped.group(1)) % 5 != 0,
      f"SIGTERM inside a reporting period: exit 0, a checkpoint ({p.returncode}: {rest.strip()[-200:]} {err[-200:]})")
lines, _, _ = run(cfg, out, "--resume", "latest", "--train-ms", "30")
first = next((PROGRESS.match(l) for l in lines if l.startswith("[")), None)
check(first is not None and abs(int(first.group(4)) - 4 * float(first.group(3))) <= 1.0,
      f"the first line after the resume: records/s = 4 x batches/s ({first.group(0) if first else None!r})")

# ---- the ETA --------------------------------------------------------------------------------
# 40 ms per training batch, a validation (8 batches of 80 ms) every 10: the
# reports every 5 batches alternate between 0.2 s and 0.84 s apart.
out = os.path.join(WORK, "eta")
lines, times, _ = run(config("eta", 60, checkpoint=1000, policy="none"), out, "--train-ms", "40", "--val-ms", "80")
# The ETA counts training and validation to the last batch; the checkpoint
# every run ends with and the program's exit come after it (slow under
# ASan on a busy machine), so the time remaining runs to the last
# validation's line, not to the process's end.
end = next(t for l, t in zip(lines, times) if l.startswith("validation at batch 60 "))
total = end - times[0]
worst = 0.0
for line, t in zip(lines, times):
    m = PROGRESS.match(line)
    if not m or int(m.group(1)) < 20 or int(m.group(1)) == 60:
        continue
    eta, remaining = seconds(m.group(5)), end - t
    worst = max(worst, abs(eta - remaining))
    print(f"     after {m.group(1)} batches: ETA {eta} s, {remaining:.2f} s remained")
allowed = 0.1 * total + 0.6
check(worst <= allowed, f"the ETA is within {worst:.2f} s of the time that remained "
                        f"(allowed {allowed:.2f} s of a {total:.1f} s run)")

# ---- the default thread count -------------------------------------------------------------------
def without_threads_flag(env, prefix=()):
    # command() passes --threads 1: run without it.
    cmd = [c for c in command(config("threads", 5), os.path.join(WORK, "threads"), "--overwrite")]
    i = cmd.index("--threads")
    del cmd[i:i + 2]
    p = subprocess.run([*prefix, *cmd], capture_output=True, text=True, env=env)
    check(p.returncode == 0, f"threads run: exit code {p.returncode} {p.stderr}")
    return p.stdout.splitlines()[0]


THREADS = re.compile(r".* on cpu, (\d+) intra-op threads? per rank \((.*)\), 1 rank;")
env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
online = os.cpu_count()
line = without_threads_flag(env)
m = THREADS.match(line)
idle = re.fullmatch(r"default: ([\d.]+) of (\d+) CPUs idle, 1 rank here", m.group(2)) if m else None
check(idle is not None and int(idle.group(2)) == online, f"no --threads, no OMP_NUM_THREADS: the default: {line!r}")
if idle:
    want = max(1, min(online, int(float(idle.group(1)) + 0.3)))
    check(int(m.group(1)) == want, f"the default is the CPUs at least 70% idle: {m.group(1)} threads for "
                                   f"{idle.group(1)} idle of {online}")
if shutil.which("taskset") and online > 1:
    line = without_threads_flag(env, ("taskset", "-c", "0"))
    m = THREADS.match(line)
    check(m is not None and m.group(1) == "1", f"bound to one CPU (taskset): 1 thread: {line!r}")
line = without_threads_flag(dict(env, OMP_NUM_THREADS="1"))
check(" 1 intra-op thread per rank (OMP_NUM_THREADS)," in line, f"OMP_NUM_THREADS wins over the default: {line!r}")

# ---- a terminal: the live line ----------------------------------------------------------------
out = os.path.join(WORK, "live")
master, slave = pty.openpty()
p = subprocess.Popen(command(config("live", 30, checkpoint=1000, policy="none"), out, "--train-ms", "30"),
                     stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
os.close(slave)
raw = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:  # EIO: the program ended
        break
    if not chunk:
        break
    raw += chunk
os.close(master)
p.wait(timeout=120)
check(p.returncode == 0, f"live run: exit code {p.returncode}")
live = [s for s in raw.decode(errors="replace").split("\r\x1b[K") if s.startswith("[")]
rates = [PROGRESS.match(s) for s in live]
check(len(live) >= 3 and all(rates), f"on a terminal the progress line is redrawn in place ({len(live)} times)")
check(all(int(m.group(4)) > 0 for m in rates if m), "the live line's records/s is never 0: "
      + ", ".join(m.group(4) for m in rates if m))

# ---- Determined's keys that do not fit the run: one warning each --------------------------
# records_per_epoch other than the data's length (epochs are the data's here),
# slots_per_trial more than the ranks of a single trial, and apex's O2.
cfg = config("warnings", 4)
c = json.load(open(cfg))
c["records_per_epoch"] = 50
c["resources"] = {"slots_per_trial": 4}
c["optimizations"] = {"mixed_precision": "O2"}
json.dump(c, open(cfg, "w"))
p = subprocess.run(command(cfg, os.path.join(WORK, "warnings")), capture_output=True, text=True, timeout=120)
check(p.returncode == 0 and "warning: records_per_epoch is 50, but the training data holds 64 records: an epoch here "
      "is the data's 64" in p.stderr and p.stderr.count("records_per_epoch") == 1,
      f"records_per_epoch that disagrees with the data: one warning ({p.stderr.strip()})")
check("resources.slots_per_trial is 4, but this run has 1 rank: it trains on 1" in p.stderr,
      f"slots_per_trial above the ranks: one warning ({p.stderr.strip()})")
check("optimizations.mixed_precision is O2: apex's half-precision weights have no equivalent here, so it runs as O1"
      in p.stderr, f"mixed_precision O2 (which Determined accepts) runs as O1, saying so ({p.stderr.strip()})")

print(f"{failures} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
