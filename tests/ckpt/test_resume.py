"""Exact resume, preemption, kill -9, refusals and retention, end to end.

Runs tests/ckpt/ckpt_trial (a ct_main program) and compares, bit for bit:
an uninterrupted run with runs that stop (a stop request, SIGTERM, kill -9)
and resume. "Identical" means the final checkpoint's state_dict.pth
(weights, Adam state, StepLR state, the callback's state, the RNG state) is
equal tensor for tensor and every metrics.jsonl line is equal except "time"
and "timings" (clock readings).

    test_resume.py CKPT_TRIAL CTRIAL_CKPT
"""
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, run_cmd  # noqa: E402

TRIAL, CKPT_TOOL = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="ckpt_resume_")


def config(path, **over):
    """The base experiment: 180 training records in batches of 16 (12 per
    epoch), validation every 6 batches, checkpoints every 8, reports every 4,
    40 batches; keep every checkpoint."""
    c = {
        "name": "ckpt",
        "hyperparameters": {"global_batch_size": 16},
        "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True,
                     "max_length": {"batches": 40}},
        "min_validation_period": {"batches": 6},
        "min_checkpoint_period": {"batches": 8},
        "scheduling_unit": 4,
        "checkpoint_storage": {"save_trial_latest": 100, "save_trial_best": 100},
    }
    for k, v in over.items():
        c[k] = v
    with open(path, "w") as f:
        json.dump(c, f)
    return path


def run(out, *args, cfg=None, expect=0, env=None):
    cmd = [TRIAL, "--config", cfg or config(os.path.join(WORK, "base.json")), "--output", out, "--threads", "1",
           *args]
    p = run_cmd(cmd, None, env=env)
    if p.returncode != expect:
        print(" ".join(cmd), "\n", p.stdout[-3000:], p.stderr[-3000:])
    check(p.returncode == expect, f"exit code {p.returncode} (want {expect}): {' '.join(args)}")
    return p


def checkpoints(out):
    """Committed checkpoints of an output dir: {steps: path} (the latest
    commit per step, by commit_sequence)."""
    found = {}
    for d in sorted(glob.glob(os.path.join(out, "checkpoints", "ckpt-*"))):
        meta = json.load(open(os.path.join(d, "metadata.json")))
        prev = found.get(meta["steps_completed"])
        if prev is None or meta["commit_sequence"] > prev[0]:
            found[meta["steps_completed"]] = (meta["commit_sequence"], d)
    return {k: v[1] for k, v in found.items()}


def metrics(out):
    lines = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    for line in lines:
        del line["time"]
        line.pop("timings", None)  # wall-clock measurements (training lines)
    return lines


def same(a, b, path="state"):
    """Exact structural equality of two torch.load results; returns the first
    difference or None."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{path}: tensor vs {type(b).__name__}"
        if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
            return f"{path}: tensors differ"
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a.keys()) != list(b.keys()):
            return f"{path}: keys {list(a.keys())} vs {list(b.keys())}"
        for k in a:
            d = same(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            return f"{path}: {type(a).__name__}[{len(a)}] vs {type(b).__name__}[{len(b)}]"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b and type(a) is type(b) else f"{path}: {a!r} vs {b!r}"


def load_state(ckpt_dir):
    return torch.load(os.path.join(ckpt_dir, "state_dict.pth"), weights_only=True)


def compare_runs(name, ref_out, out, steps=40):
    ref, got = checkpoints(ref_out), checkpoints(out)
    check(steps in got, f"{name}: a checkpoint at {steps}")
    if steps not in got:
        return
    diff = same(load_state(ref[steps]), load_state(got[steps]))
    check(diff is None, f"{name}: state at {steps} equals the uninterrupted run's ({diff})")
    m_ref, m_got = metrics(ref_out), metrics(out)
    first = next((i for i, (x, y) in enumerate(zip(m_ref, m_got)) if x != y), None)
    check(len(m_ref) == len(m_got) and first is None,
          f"{name}: metrics.jsonl equal ({len(m_got)} vs {len(m_ref)} lines"
          + (f"; line {first}: {m_got[first]} vs {m_ref[first]}" if first is not None else "") + ")")


def tb_steps(out, tag):
    """The steps of `tag` as TensorBoard shows them (its reader, which drops
    what a SessionLog START supersedes), in order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(out, size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


def compare_tb(name, ref_out, out, tag="training/loss"):
    want, got = tb_steps(ref_out, tag), tb_steps(out, tag)
    check(got == want, f"{name}: TensorBoard's {tag} steps {got} equal the uninterrupted run's {want}")


def resume_line(stdout):
    for line in stdout.splitlines():
        if "resume with --resume" in line:
            return line.split("--resume ", 1)[1].strip()
    return None


# ---- the uninterrupted reference runs ------------------------------------------

ref = os.path.join(WORK, "ref")
run(ref)
check({8, 16, 24, 32, 40} <= set(checkpoints(ref)), f"reference checkpoints at {sorted(checkpoints(ref))}")

# 1. Mid-epoch stop request (batch 20 of 12-batch epochs), then resume.
out = os.path.join(WORK, "stop")
run(out, "--hparam", "stop_at=19")
check(20 in checkpoints(out) and 24 not in checkpoints(out), "stop request checkpoints at 20 and exits")
run(out, "--resume", checkpoints(out)[20])
compare_runs("mid-epoch resume", ref, out)

# 2. Resume after a validation (24: validated and checkpointed) from a copy of
#    the finished reference: lines after 24 are dropped and written again.
out = os.path.join(WORK, "after_val")
shutil.copytree(ref, out)
for steps, d in checkpoints(out).items():
    if steps > 24:
        shutil.rmtree(d)
run(out, "--resume", "latest")
compare_runs("resume after a validation (latest)", ref, out)

# 3. SIGTERM inside batch 19: the batch finishes, a checkpoint at 20, exit 0
#    with the resume command; with 2 loader workers on the resumed side.
out = os.path.join(WORK, "sigterm")
p = run(out, "--hparam", "sigterm_at=19")
path = resume_line(p.stdout + p.stderr)
check(path is not None and os.path.isdir(path), f"SIGTERM prints how to resume ({path})")
run(out, "--resume", path or "latest", "--hparam", "workers=2")
compare_runs("SIGTERM + resume with loader workers", ref, out)

# 3b. SIGTERM between two reports (after batch 21; reports every 4): the cut
#     workload is not reported at the stop but saved in the checkpoint, and
#     the resumed run reports it whole at 24, so metrics.jsonl (and what
#     TensorBoard shows) equal the uninterrupted run's.
out = os.path.join(WORK, "sigterm_mid")
run(out, "--hparam", "sigterm_at=20")
check(21 in checkpoints(out), f"SIGTERM after batch 21 checkpoints at 21 ({sorted(checkpoints(out))})")
run(out, "--resume", "latest")
compare_runs("SIGTERM between reports + resume", ref, out)
compare_tb("SIGTERM between reports + resume", ref, out)

# 4. Gradient aggregation 2, stopped mid-window (21 batches: one accumulated
#    gradient pending) and after a full window.
agg_cfg = config(os.path.join(WORK, "agg.json"), optimizations={"aggregation_frequency": 2}, scheduling_unit=1)
ref_agg = os.path.join(WORK, "ref_agg")
run(ref_agg, cfg=agg_cfg)
for stop in (19, 20):
    out = os.path.join(WORK, f"agg_{stop}")
    run(out, "--hparam", f"stop_at={stop}", cfg=agg_cfg)
    run(out, "--resume", "latest", cfg=agg_cfg)
    compare_runs(f"aggregation 2, stopped after {stop + 1} batches", ref_agg, out)

# 5. Mixed precision (ct_ctx_use_amp). fp16 with a GradScaler (init_scale
#    64, no growth within the run), inf injected into a gradient in batch 7:
#    that step is skipped (Adam counts 39 steps) and the scale backs off once
#    (32, then 32 finite updates); the clip callback sees unscaled gradients
#    (the norms of the fp32 run, not 64 times them); a SIGTERM-and-resume run
#    equals the uninterrupted one, the scaler's state and every reported
#    scale included. bf16: autocast without a scaler changes the numbers.
AMP = ("--hparam", "amp=fp16", "--hparam", "inf_at=7", "--hparam", "clip=true")
ref_fp32, ref_fp16 = os.path.join(WORK, "ref_fp32"), os.path.join(WORK, "ref_fp16")
run(ref_fp32, "--hparam", "clip=true")
run(ref_fp16, *AMP)
st = load_state(checkpoints(ref_fp16)[40]) if 40 in checkpoints(ref_fp16) else {}
scaler = st.get("scaler_state_dict", {})
check(scaler == {"scale": 32.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 1000,
                 "_growth_tracker": 32}, f"fp16: the scaler backed off once and counted 32 finite steps ({scaler})")
steps = st["optimizers_state_dict"][0]["state"][0]["step"].item() if st else None
check(steps == 39, f"fp16: the step with an inf gradient was skipped (Adam took {steps} of 40 steps)")
norms32 = [m["metrics"]["grad_norm"] for m in metrics(ref_fp32) if m["group"] == "training"]
norms16 = [m["metrics"]["grad_norm"] for m in metrics(ref_fp16) if m["group"] == "training"]
check(norms16[0] is not None and abs(norms16[0] / norms32[0] - 1) < 0.05,
      f"fp16: the clip callback sees unscaled gradients (norm {norms16[0]:.4g} vs fp32's {norms32[0]:.4g})")
check(any(n is None for n in norms16), "fp16: the workload with the inf gradient reports a non-finite norm")
out = os.path.join(WORK, "amp_sigterm")
p = run(out, *AMP, "--hparam", "sigterm_at=19")
run(out, "--resume", resume_line(p.stdout + p.stderr) or "latest", *AMP)
compare_runs("fp16 AMP: SIGTERM + resume", ref_fp16, out)
ref_bf16 = os.path.join(WORK, "ref_bf16")
run(ref_bf16, "--hparam", "amp=bf16")
st16 = load_state(checkpoints(ref_bf16)[40]) if 40 in checkpoints(ref_bf16) else {}
val = lambda out: [m["metrics"]["validation_loss"] for m in metrics(out) if m["group"] == "validation"]
check("scaler_state_dict" not in st16 and val(ref_bf16) != val(ref) and abs(val(ref_bf16)[-1] - val(ref)[-1]) < 0.05,
      f"bf16: autocast without a scaler changes the losses a little ({val(ref_bf16)[-1]:.5f} vs {val(ref)[-1]:.5f})")

# 6. ct_ctx_set_profiler: batches 2 and 3 of the run (wait 1, warm-up 1,
#    active 2) traced into output/profiler, one file for rank 0.
out = os.path.join(WORK, "profile")
run(out, "--hparam", "profile=true")
traces = sorted(glob.glob(os.path.join(out, "profiler", "*.pt.trace.json")))
steps = []
if len(traces) == 1:
    events = json.load(open(traces[0])).get("traceEvents", [])
    steps = sorted({e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")})
ops = len(traces) == 1 and any(e.get("name") == "aten::addmm" for e in events)
check([os.path.basename(t) for t in traces] == ["rank0.0.pt.trace.json"] and steps == ["ProfilerStep#2", "ProfilerStep#3"]
      and ops, f"profiler: one trace of batches 2 and 3 with their ops ({traces}, {steps})")

# ---- preemption while writing --------------------------------------------------

# A second SIGTERM (and a SIGINT) while the checkpoint is being written changes
# nothing: one committed checkpoint, verified, resumable.
out = os.path.join(WORK, "double_signal")
cfg = config(os.path.join(WORK, "ballast.json"), hyperparameters={"global_batch_size": 16, "ballast_mb": 300})
proc = subprocess.Popen([TRIAL, "--config", cfg, "--output", out, "--threads", "1", "--hparam", "sigterm_at=3"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
deadline = time.time() + 60
while time.time() < deadline and not glob.glob(os.path.join(out, "checkpoints", ".tmp-*")) and proc.poll() is None:
    time.sleep(0.005)
saw_tmp = proc.poll() is None
proc.send_signal(signal.SIGTERM) if saw_tmp else None
proc.send_signal(signal.SIGINT) if proc.poll() is None else None
stdout, stderr = proc.communicate(timeout=120)
check(proc.returncode == 0, f"signals during the write: exit {proc.returncode} {stderr[-500:]}")
got = checkpoints(out)
check(list(got) == [4], f"one checkpoint, at 4 (got {sorted(got)}; signals sent mid-write: {saw_tmp})")
if 4 in got:
    v = subprocess.run([CKPT_TOOL, "verify", got[4]], capture_output=True, text=True)
    check(v.returncode == 0 and "OK" in v.stdout, f"ctrial-ckpt verify after the signals: {v.stdout}{v.stderr}")
    run(out, "--resume", got[4], "--max-length", "6", cfg=cfg)

# ---- kill -9 at random moments ------------------------------------------------

# Checkpoint after every batch (each 40 MB, fsync'd), reports every batch; kill
# the process at random moments, check every committed checkpoint, resume with
# `latest` until the run completes; the result equals an uninterrupted run.
kill_cfg = config(os.path.join(WORK, "kill.json"),
                  hyperparameters={"global_batch_size": 16, "ballast_mb": 40, "sleep_ms": 80},
                  min_checkpoint_period={"batches": 1}, scheduling_unit=1,
                  searcher={"name": "single", "metric": "validation_loss", "smaller_is_better": True,
                            "max_length": {"batches": 30}},
                  checkpoint_storage={"save_trial_latest": 2, "save_trial_best": 1})
ref_kill = os.path.join(WORK, "ref_kill")
run(ref_kill, cfg=kill_cfg)
out = os.path.join(WORK, "killed")
rng = random.Random(1234)
kills, done = 0, False
for attempt in range(40):
    proc = subprocess.Popen([TRIAL, "--config", kill_cfg, "--output", out, "--threads", "1", "--resume", "latest",
                             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.wait(timeout=rng.uniform(0.2, 1.2) if kills < 12 else 120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        kills += 1
    if proc.returncode == 0:
        done = True
        break
    check(proc.returncode == -signal.SIGKILL, f"run {attempt} ended by kill -9 (return code {proc.returncode}) "
          f"{proc.stderr.read()[-500:]}")
    for steps, d in checkpoints(out).items():
        v = subprocess.run([CKPT_TOOL, "verify", d], capture_output=True, text=True)
        if v.returncode != 0:
            check(False, f"after kill {kills}: checkpoint {d} fails verification: {v.stderr}")
check(done and kills >= 5, f"the killed run completed after {kills} kills")
if done:
    compare_runs(f"{kills} times kill -9 and resume", ref_kill, out, steps=30)
    compare_tb(f"{kills} times kill -9 and resume", ref_kill, out)
    left = glob.glob(os.path.join(out, "checkpoints", ".*"))
    check(not left, f"no temporary directories left behind ({left})")

# ---- kill -9 during background writes ---------------------------------------------
# The same run, 32 batches, with checkpoints written in the background (a
# snapshot, then a thread writes and commits it while the next batches
# train). Uninterrupted, the console says which checkpoints were written in
# the background (all but the last) and the result is the synchronous run's,
# bit for bit. Then killed at 30 or more random points inside background
# writes (after a random number of the writes, a random moment after a
# write's temporary directory appears): every committed checkpoint stays
# intact, and resuming from the latest until the run completes gives the
# synchronous run's checkpoints and metrics, bit for bit.
bg_hp = {"global_batch_size": 16, "ballast_mb": 40, "sleep_ms": 80}
bg_search = {"name": "single", "metric": "validation_loss", "smaller_is_better": True, "max_length": {"batches": 32}}
bg_keep = {"save_trial_latest": 2, "save_trial_best": 1}
sync_cfg = config(os.path.join(WORK, "sync32.json"), hyperparameters=bg_hp, min_checkpoint_period={"batches": 1},
                  scheduling_unit=1, searcher=bg_search, checkpoint_storage=bg_keep)
bg_cfg = config(os.path.join(WORK, "kill_bg.json"), hyperparameters=bg_hp, min_checkpoint_period={"batches": 1},
                scheduling_unit=1, searcher=bg_search, checkpoint_storage=bg_keep,
                optimizations={"background_checkpoints": True})
ref_sync = os.path.join(WORK, "ref_sync32")
run(ref_sync, "--quiet", cfg=sync_cfg)
out = os.path.join(WORK, "uninterrupted_bg")
p = run(out, cfg=bg_cfg)
bg_lines = re.findall(r"checkpoint at batch (\d+) \((?:period|policy), written in the background\)", p.stdout)
check(bg_lines == [str(b) for b in range(1, 32)] and re.search(r"checkpoint at batch 32 \((period|policy)\)\n", p.stdout),
      f"checkpoints 1 to 31 written in the background ({len(bg_lines)}), the last one at once")
compare_runs("background checkpoints, uninterrupted", ref_sync, out, steps=32)

# Campaigns of kills until the run completes, as many as it takes to have
# killed 30 times in all (how many writes a run gets through before its kill
# depends on the machine's load).
rng = random.Random(4321)
kills, campaigns = 0, 0
while kills < 30 and campaigns < 6:
    campaigns += 1
    out = os.path.join(WORK, f"killed_bg_{campaigns}")
    tmp_glob = os.path.join(out, "checkpoints", ".*")
    done = False
    for attempt in range(200):
        proc = subprocess.Popen([TRIAL, "--config", bg_cfg, "--output", out, "--threads", "1", "--resume", "latest",
                                 "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Kill inside the target-th write this process starts (while its
        # temporary directory exists), a random moment into it.
        target, seen, last = rng.randint(1, 3), 0, set(glob.glob(tmp_glob))
        while proc.poll() is None:
            now = set(glob.glob(tmp_glob))
            seen += len(now - last)
            last = now
            if seen >= target:
                time.sleep(rng.uniform(0.0, 0.03))
                proc.kill()
                break
            time.sleep(0.002)
        proc.wait()
        if proc.returncode == 0:
            done = True
            break
        kills += 1
        check(proc.returncode == -signal.SIGKILL, f"background run {attempt} ended by kill -9 (return code "
              f"{proc.returncode}) {proc.stderr.read()[-500:]}")
        for steps, d in checkpoints(out).items():
            v = subprocess.run([CKPT_TOOL, "verify", d], capture_output=True, text=True)
            if v.returncode != 0:
                check(False, f"after background kill {kills}: checkpoint {d} fails verification: {v.stderr}")
    check(done, f"campaign {campaigns}: the run with background checkpoints completed")
    if done:
        compare_runs(f"campaign {campaigns}, kill -9 during background writes and resume", ref_sync, out, steps=32)
        left = glob.glob(tmp_glob)
        check(not left, f"no temporary directories left behind ({left})")
check(kills >= 30, f"{kills} kills during background writes in {campaigns} campaign(s)")

# ---- refusals: exit code 3 before training, naming the problem ----------------

def refused(name, args, want, mutate=None):
    out = os.path.join(WORK, "refuse_" + name)
    shutil.copytree(ref, out)
    ckpt = checkpoints(out)[16]
    if mutate:
        mutate(ckpt)
    before = open(os.path.join(out, "metrics.jsonl")).read()
    p = run(out, "--resume", ckpt, *args, expect=3)
    check(want in p.stderr, f"{name}: message names it ({p.stderr.strip()[-300:]})")
    check(open(os.path.join(out, "metrics.jsonl")).read() == before, f"{name}: metrics.jsonl untouched")


def flip_byte(ckpt):
    path = os.path.join(ckpt, "state_dict.pth")
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x40]))


refused("shape", ["--hparam", "hidden=17"], "0.weight")
refused("crc", [], "CRC", flip_byte)
refused("missing", [], "state_dict.pth is missing", lambda d: os.remove(os.path.join(d, "state_dict.pth")))
refused("metadata", [], "metadata.json", lambda d: open(os.path.join(d, "metadata.json"), "w").write("{\"steps"))
refused("batch size", ["--hparam", "global_batch_size=8"], "global_batch_size")

# ---- retention -----------------------------------------------------------------

# Policy all with validation every 4 batches: checkpoints at 4, 8, ... 40. Keep
# the 2 latest and the best one by validation_loss.
out = os.path.join(WORK, "retention")
cfg = config(os.path.join(WORK, "keep.json"), min_validation_period={"batches": 4},
             min_checkpoint_period={"batches": 1000}, checkpoint_policy="all",
             checkpoint_storage={"save_trial_latest": 2, "save_trial_best": 1},
             hyperparameters={"global_batch_size": 16, "lr": 0.2})
run(out, cfg=cfg)
vals = {m["batches"]: m["metrics"]["validation_loss"] for m in metrics(out) if m["group"] == "validation"}
best = min(vals, key=lambda b: vals[b])
want = sorted({36, 40, best})
check(sorted(checkpoints(out)) == want, f"retention keeps {want} (latest 2 + best {best}): {sorted(checkpoints(out))}")

# ---- max_restarts: a single trial restarted from its latest checkpoint ------------
# As Determined restarts a failed trial. fail_once_at: batch 20 fails the first
# time only (it leaves a marker file); the restart resumes from the latest
# checkpoint before it and the run ends equal to the uninterrupted one. Without max_restarts in
# the config a single trial fails at once; with a failure that comes back every
# time it fails after max_restarts restarts.

marker = os.path.join(WORK, "failed_once")
restart_cfg = config(os.path.join(WORK, "restarts.json"), max_restarts=2,
                     hyperparameters={"global_batch_size": 16, "fail_once_at": 19, "fail_marker": marker})
out = os.path.join(WORK, "restarted")
p = run(out, cfg=restart_cfg)
check("ctrial: the trial failed (CT_ETRIAL: train_batch: ckpt_trial: fail_once_at 19)" in p.stderr and "(restart 1 of 2)" in p.stderr
      and "restart 2 of 2" not in p.stderr, f"max_restarts 2: one failure, one restart ({p.stderr.strip()[-300:]})")
before = max(k for k in checkpoints(ref) if k < 20)
check(re.search(rf"resumed from \S+ckpt-{before:06d}-\S+ after batch {before}", p.stdout) is not None,
      f"the restart resumes from the latest checkpoint before the failure ({before})")
compare_runs("restarted after a failure", ref, out)
os.remove(marker)
out = os.path.join(WORK, "no_restarts")
p = run(out, cfg=config(os.path.join(WORK, "no_restarts.json"),
                        hyperparameters={"global_batch_size": 16, "fail_once_at": 19, "fail_marker": marker}),
        expect=1)
check("restarting" not in p.stderr, "without max_restarts in the config a single trial is not restarted")
out = os.path.join(WORK, "always_fails")
p = run(out, cfg=config(os.path.join(WORK, "always.json"), max_restarts=1,
                        hyperparameters={"global_batch_size": 16, "fail_at": 19}), expect=1)
check(p.stderr.count("restarting it from its latest checkpoint") == 1 and "(restart 1 of 1)" in p.stderr,
      f"a failure that comes back: one restart, then exit 1 ({p.stderr.strip()[-200:]})")

# ---- ctrial-ckpt ---------------------------------------------------------------

d = checkpoints(ref)[40]
p = subprocess.run([CKPT_TOOL, "list", d], capture_output=True, text=True)
check(p.returncode == 0 and "models_state_dict[0].0.weight" in p.stdout and "[16, 8] float32" in p.stdout
      and "steps_completed" in p.stdout, "ctrial-ckpt list shows keys, dtypes, shapes and metadata")
p = subprocess.run([CKPT_TOOL, "latest", os.path.join(ref, "checkpoints")], capture_output=True, text=True)
check(p.returncode == 0 and p.stdout.strip() == d, f"ctrial-ckpt latest: {p.stdout.strip()}")
p = subprocess.run([CKPT_TOOL, "latest", ref], capture_output=True, text=True)
check(p.returncode == 0 and p.stdout.strip() == d, f"ctrial-ckpt latest on the output folder: {p.stdout.strip()}")
# best: by the run's searcher metric, with its value written as Python's repr writes it
by_metric = {path: json.load(open(os.path.join(path, "metadata.json"))).get("validation_metrics", {}).get("validation_loss")
             for path in checkpoints(ref).values()}
best_path = min((v, k) for k, v in by_metric.items() if v is not None)[1]
p = subprocess.run([CKPT_TOOL, "best", ref], capture_output=True, text=True)
check(p.returncode == 0 and p.stdout.strip() == f"{best_path}\tvalidation_loss {by_metric[best_path]!r}",
      f"ctrial-ckpt best: {p.stdout.strip()!r} (want {best_path}, {by_metric[best_path]!r})")
flip_dir = os.path.join(WORK, "flipped")
shutil.copytree(d, flip_dir)
flip_byte(flip_dir)
p = subprocess.run([CKPT_TOOL, "verify", flip_dir], capture_output=True, text=True)
check(p.returncode == 1 and "CRC" in p.stderr, f"ctrial-ckpt verify finds the damage: {p.stderr.strip()}")

if FAILURES:
    print(f"{len(FAILURES)} failure(s); work dir kept: {WORK}")
    sys.exit(1)
shutil.rmtree(WORK)
print("all passed")
