"""Stop signals, end to end (issue 17, items 5 and 6): tests/dist_fit/dist_trial
(a ct_main program) without mpirun and under `mpirun -np 2`.

    test_signals.py DIST_TRIAL [SIGNAL_PRELOAD]

1. SIGTERM to rank 1 alone: every rank stops after the same batch, rank 0
   commits one checkpoint there and says that it stopped and how to resume
   (not "done:"), every rank's ct_main returns 0 and ct_fit_stop_signal()
   is SIGTERM on both ranks; `--resume latest` ends where an uninterrupted
   run ends.
2. A second SIGTERM 0, 20 or 60 ms after the checkpoint the first one asked
   for is committed (while ct_fit and then the process wind down), one
   process and two ranks: exit 0, one committed checkpoint that loads. And
   deterministically: SIGTERM raised by the program right after ct_main
   returned, after a finished run and after a stopped one: exit 0.
3. SIGTERM as early as the process catches it (its SigCgt in /proc shows
   SIGTERM: ct_main's first line), before MPI and flags, one process and
   rank 1 of two: exit 0, "stopped by SIGTERM before training: nothing to
   save; resume with --resume latest", no checkpoint; then --resume latest
   trains to the end (one process may also get as far as its first batch
   before the signal lands: then a checkpoint after it). SIGTERM raised
   inside MPI_Init_thread on rank 1 (SIGNAL_PRELOAD, an LD_PRELOAD library):
   the same, deterministically. SIGTERM during the set-up (raised in init
   on rank 1): the same, after the start-up summary, without training a
   batch.

Every run has a generous timeout (a hang is a failure). Exits 77 (skipped)
without mpirun.
"""
import glob
import json
import os
import re
import signal
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import check, exit_with_report, mpirun_cmd, need_mpirun, single_config, spawn, wait_or_kill  # noqa: E402

TRIAL = os.path.abspath(sys.argv[1])
PRELOAD = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] else None
MPIRUN = need_mpirun()

WORK = tempfile.mkdtemp(prefix="dist_signals_")
T0 = time.time()
LIMIT = 120  # seconds for any one run: far beyond what one takes


def config(name, max_len):
    return single_config(os.path.join(WORK, name + ".json"), "dist_signals", 12, max_len, val=1000, ckpt=1000)


LONG = config("long", 200)
SHORT = config("short", 10)


def command(out, np, args, cfg):
    return mpirun_cmd(np, [TRIAL, "--config", cfg, "--output", out, "--threads", "1", *args])


def start(out, np, args=(), cfg=LONG, env=None):
    os.makedirs(out, exist_ok=True)
    e = dict(os.environ, OMP_NUM_THREADS="1", DIST_FIT_OUT=out, **(env or {}))
    return spawn(command(out, np, args, cfg), e, merge=True)


def finish(p):
    """(exit code, output); a run past LIMIT is killed and fails (exit code None)."""
    code, text, _ = wait_or_kill(p, LIMIT)
    return code, text


def run(out, np, args=(), cfg=LONG, env=None):
    return finish(start(out, np, args, cfg, env))


def per_rank(out, prefix):
    found = {}
    for f in glob.glob(os.path.join(out, prefix + "_rank*")):
        found[int(re.search(r"rank(\d+)$", f).group(1))] = int(open(f).read())
    return found


def checkpoints(out):
    """{steps: dir} of committed checkpoints."""
    found = {}
    for d in glob.glob(os.path.join(out, "checkpoints", "ckpt-*")):
        meta = json.load(open(os.path.join(d, "metadata.json")))
        found[meta["steps_completed"]] = d
    return found


def loads(ckpt_dir):
    try:
        torch.load(os.path.join(ckpt_dir, "state_dict.pth"), weights_only=True)
        return True
    except Exception as e:  # noqa: BLE001 -- any failure to load is the finding
        print(f"    {ckpt_dir}: {e}")
        return False


def wait_for(cond, p, limit=LIMIT):
    deadline = time.time() + limit
    while time.time() < deadline and p.poll() is None and not cond():
        time.sleep(0.002)
    return cond()


def rank_pids(out, np):
    """{rank: pid} from the ranks' start files."""
    pids = {}
    for f in glob.glob(os.path.join(out, "rank*_start.json")):
        s = json.load(open(f))
        pids[s["rank"]] = s["pid"]
    return pids


def training(out, np, p):
    """Waits until every rank has started training, and a few batches more."""
    ok = wait_for(lambda: len(glob.glob(os.path.join(out, "rank*_start.json"))) >= max(np, 1), p)
    time.sleep(0.4)
    return ok


def caught(pid, sig=signal.SIGTERM):
    """Whether the process catches sig now (SigCgt in /proc/PID/status)."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except OSError:
        pass
    return False


def rank_processes(p, np):
    """{rank: pid} of mpirun's children (or {0: the process} without mpirun)."""
    if not np:
        return {0: p.pid}
    found = {}
    try:
        kids = [int(x) for x in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()]
    except OSError:
        return found
    for k in kids:
        try:
            for e in open(f"/proc/{k}/environ", "rb").read().split(b"\0"):
                if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                    found[int(e.split(b"=")[1])] = k
        except OSError:
            pass
    return found


print(f"work dir {WORK}; mpirun {MPIRUN}", flush=True)

# ---- 1: SIGTERM to rank 1 alone ------------------------------------------------------

out_ref = os.path.join(WORK, "ref")
code, _ = run(out_ref, 0)
check(code == 0 and 200 in checkpoints(out_ref), f"reference: 200 batches on one rank (exit {code})")

name = "SIGTERM to rank 1 of 2"
out = os.path.join(WORK, "rank1")
p = start(out, 2, ["--hparam", "sleep_ms=30"])
if training(out, 2, p):
    os.kill(rank_pids(out, 2)[1], signal.SIGTERM)
t = time.time()
code, text = finish(p)
ck = checkpoints(out)
print(text[-1500:] if code != 0 or len(ck) != 1 else "", end="")
check(code == 0 and per_rank(out, "exit") == {0: 0, 1: 0},
      f"{name}: mpirun and both ranks' ct_main exit 0 ({code}, {per_rank(out, 'exit')}) in {time.time() - t:.1f} s")
check(per_rank(out, "stop_signal") == {0: 15, 1: 15},
      f"{name}: ct_fit_stop_signal() is SIGTERM on both ranks, also on rank 0, which got none "
      f"({per_rank(out, 'stop_signal')})")
check(len(ck) == 1 and 0 < min(ck) < 200, f"{name}: one checkpoint, mid-run ({sorted(ck)})")
n = min(ck) if ck else -1
line = re.search(r"^stopped by SIGTERM after batch (\d+); resume with --resume (\S+)$", text, re.M)
check(line is not None and int(line.group(1)) == n and ck and os.path.samefile(line.group(2), ck[n]),
      f"{name}: rank 0 says it stopped after batch {n} and how to resume from that checkpoint "
      f"({line.group(0) if line else None!r})")
check(re.search(r"^done:", text, re.M) is None, f"{name}: no 'done:' line: training did not finish")
check(re.search(rf"^stopped after {n} of 200 batches \(.*\) in [\d.]+ s \(SIGTERM\)", text, re.M) is not None,
      f"{name}: the summary says it stopped after {n} of 200 batches, by SIGTERM")
ends = {}
for f in glob.glob(os.path.join(out, "rank*_end.json")):
    ends[json.load(open(f))["rank"]] = json.load(open(f))["batches"]
check(sorted(ends) == [0, 1] and len(set(ends.values())) == 1,
      f"{name}: both ranks stopped after the same batch ({ends})")
code, text = run(out, 2, ["--resume", "latest"])
ref = checkpoints(out_ref)
got = checkpoints(out)
same = False
if 200 in got and 200 in ref:
    a = torch.load(os.path.join(ref[200], "state_dict.pth"), weights_only=True)["models_state_dict"][0]
    b = torch.load(os.path.join(got[200], "state_dict.pth"), weights_only=True)["models_state_dict"][0]
    diff = max((a[k].double() - b[k].double()).abs().max().item() for k in a if a[k].is_floating_point())
    same = diff <= 1e-5
check(code == 0 and same, f"{name}: --resume latest on 2 ranks ends at 200 with the uninterrupted run's weights "
      f"(exit {code})")

# ---- 2: a second SIGTERM while the process winds down ------------------------------------

for np in (0, 2):
    for gap in (0, 0.02, 0.06):
        name = f"{'-np 2' if np else 'one process'}: a second SIGTERM {int(gap * 1000)} ms after the checkpoint"
        out = os.path.join(WORK, f"again_np{np}_{int(gap * 1000)}")
        p = start(out, np, ["--hparam", "sleep_ms=30"])
        sent = 0
        if training(out, np, p):
            pids = rank_pids(out, np)
            for pid in pids.values():
                os.kill(pid, signal.SIGTERM)
            # The checkpoint is committed: its directory is renamed into place.
            if wait_for(lambda: bool(glob.glob(os.path.join(out, "checkpoints", "ckpt-*"))), p):
                time.sleep(gap)
                for pid in pids.values():
                    try:
                        os.kill(pid, signal.SIGTERM)
                        sent += 1
                    except ProcessLookupError:
                        pass
        code, text = finish(p)
        ck = checkpoints(out)
        print(text[-1500:] if code != 0 else "", end="")
        check(code == 0 and per_rank(out, "exit") == {r: 0 for r in range(max(np, 1))},
              f"{name}: exit 0, every rank's ct_main 0 ({code}, {per_rank(out, 'exit')}; second signals delivered: "
              f"{sent})")
        check(len(ck) == 1 and all(loads(d) for d in ck.values()),
              f"{name}: one committed checkpoint, which loads ({sorted(ck)})")

name = "SIGTERM raised right after ct_main returned"
out = os.path.join(WORK, "after_main_done")
code, text = run(out, 0, cfg=SHORT, env={"DIST_FIT_SIGNAL_AFTER_MAIN": "1"})
check(code == 0 and per_rank(out, "exit") == {0: 0} and 10 in checkpoints(out),
      f"{name}, after a finished run: exit 0 ({code}; {per_rank(out, 'exit')})")
check(re.search(r"^done: 10 batches", text, re.M) is not None, f"{name}: the finished run says done: 10 batches")
out = os.path.join(WORK, "after_main_stopped")
p = start(out, 0, ["--hparam", "sleep_ms=30"], env={"DIST_FIT_SIGNAL_AFTER_MAIN": "1"})
if training(out, 0, p):
    p.send_signal(signal.SIGTERM)
code, text = finish(p)
check(code == 0 and per_rank(out, "exit") == {0: 0} and len(checkpoints(out)) == 1,
      f"{name}, after a stopped run: exit 0 and its checkpoint ({code}; {sorted(checkpoints(out))})")

# ---- 3: SIGTERM before training ---------------------------------------------------------

EARLY_LINE = r"^stopped by SIGTERM before training: nothing to save; resume with --resume latest$"


def check_early(name, out, np, code, text, before_training=True):
    print(text[-1500:] if code != 0 else "", end="")
    check(code == 0 and per_rank(out, "exit") == {r: 0 for r in range(max(np, 1))},
          f"{name}: exit 0, every rank's ct_main 0 ({code}, {per_rank(out, 'exit')})")
    check(per_rank(out, "stop_signal") == {r: 15 for r in range(max(np, 1))},
          f"{name}: ct_fit_stop_signal() is SIGTERM on every rank ({per_rank(out, 'stop_signal')})")
    if before_training:
        check(re.search(EARLY_LINE, text, re.M) is not None and "done:" not in text,
              f"{name}: one clear line, nothing saved")
        check(not checkpoints(out) and not glob.glob(os.path.join(out, "rank*_start.json")),
              f"{name}: no checkpoint, no training")
    code, text = run(out, np, ["--resume", "latest"], cfg=SHORT)
    check(code == 0 and 10 in checkpoints(out) and re.search(r"^done: 10 batches", text, re.M) is not None,
          f"{name}: --resume latest then trains to the end (exit {code})")


# As soon as the process catches SIGTERM (ct_main's first line). Under
# mpirun rank 1 is then about to start MPI, which takes far longer than the
# signal takes to land: it stops before training. One process goes from
# ct_main's first line to its first batch in milliseconds, so there the
# signal may also land in the first batch: then it stops after that batch
# with a checkpoint, as in training. Each batch sleeps 30 ms, so that the
# 10 batches cannot all be over before the signal lands (on a loaded
# machine this script polls the process's signal mask slowly; without the
# sleep the run once finished first).
for np, target in ((0, 0), (2, 1)):
    name = f"{'-np 2, rank 1' if np else 'one process'}: SIGTERM as soon as the process catches it"
    out = os.path.join(WORK, f"early_np{np}")
    p = start(out, np, ["--hparam", "sleep_ms=30"], cfg=SHORT)
    t = time.time()
    pid = None
    while p.poll() is None and time.time() - t < LIMIT and pid is None:
        pid = rank_processes(p, np).get(target)
        if pid is not None and not caught(pid):
            pid = None
        time.sleep(0.001)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
    took = time.time() - t
    code, text = finish(p)
    check(pid is not None, f"{name}: SIGTERM caught {took:.2f} s after the start (the dynamic loader and libtorch's "
          "initialisers come first)")
    early = re.search(EARLY_LINE, text, re.M) is not None
    if not np and not early:
        ck = checkpoints(out)
        check(len(ck) == 1 and re.search(rf"^stopped by SIGTERM after batch {min(ck)}; resume with --resume ", text,
                                         re.M) is not None,
              f"{name}: it landed in the first batches: stopped after batch {min(ck) if ck else None}, checkpointed")
    check_early(name, out, np, code, text, before_training=bool(np) or early)

# Deterministic: raised inside MPI_Init_thread on rank 1 (an LD_PRELOAD
# library), before ct_fit runs.
if PRELOAD:
    name = "-np 2: SIGTERM inside MPI_Init_thread on rank 1"
    out = os.path.join(WORK, "in_mpi_init")
    code, text = run(out, 2, cfg=SHORT, env={"LD_PRELOAD": PRELOAD, "DIST_FIT_SIGTERM_IN_MPI_INIT": "1"})
    check_early(name, out, 2, code, text)
else:
    print("skip SIGTERM inside MPI_Init_thread: no preload library (sanitizer build)")

for np in (0, 2):
    name = f"{'-np 2' if np else 'one process'}: SIGTERM during the set-up (in init, rank {1 if np else 0})"
    out = os.path.join(WORK, f"setup_np{np}")
    code, text = run(out, np, ["--hparam", f"sigterm_init_rank={1 if np else 0}"], cfg=SHORT)
    print(text[-1500:] if code != 0 else "", end="")
    check(code == 0 and per_rank(out, "exit") == {r: 0 for r in range(max(np, 1))},
          f"{name}: exit 0 ({code}, {per_rank(out, 'exit')})")
    check(re.search(r"^plan: .*\nstopped by SIGTERM before training: nothing to save; resume with --resume latest\n"
                    r"stopped after 0 of 10 batches", text, re.M) is not None,
          f"{name}: after the start-up summary, stopped before training, nothing saved")
    check(not checkpoints(out) and not glob.glob(os.path.join(out, "rank*_start.json")),
          f"{name}: no checkpoint, no on_training_start")
    ends = {json.load(open(f))["rank"]: json.load(open(f))["batches"]
            for f in glob.glob(os.path.join(out, "rank*_end.json"))}
    check(ends == {r: -1 for r in range(max(np, 1))} or ends == {r: 0 for r in range(max(np, 1))},
          f"{name}: on_trial_shutdown still ran on every rank, no batch trained ({ends})")

exit_with_report(T0, WORK)
