"""What the Python test drivers share: check() and FAILURES, mpirun,
running a program under a time limit, an experiment config for one trial
(single_config), and fail() / run_example() for the drivers that stop at
their first failure (the example programs' checks).

A driver imports it from this folder, with its own folder as the anchor:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from harness import FAILURES, check, run_cmd  # noqa: E402

Every run here has a session, and so a process group, of its own: past its
limit the whole group is killed (mpirun and its ranks, a trial and its loader
workers), never only the process started, and the run counts as a hang.
"""
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import time

FAILURES = []  # what check() found false, in order
MPIRUN = shutil.which("mpirun")

Result = collections.namedtuple("Result", "returncode stdout stderr")
Result.__doc__ = """A finished run: returncode (None: killed at its limit, a hang), stdout and
stderr as text ("" for stderr when merged into stdout)."""


def check(ok, what):
    """Prints `ok   WHAT` or `FAIL WHAT`; a failure is added to FAILURES. Returns ok."""
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)
    return ok


def need_mpirun():
    """mpirun's path; without mpirun on PATH, exits 77 (the tests' SKIP_RETURN_CODE)."""
    if MPIRUN is None:
        print("skipped: no mpirun on PATH")
        sys.exit(77)
    return MPIRUN


def mpirun_cmd(np, cmd, oversubscribe=True):
    """cmd under `mpirun -np NP` as root (CI runs as root) and, with
    oversubscribe, more ranks than cores (CI has 2); np 0: cmd alone."""
    if not np:
        return list(cmd)
    return [MPIRUN, "--allow-run-as-root", *(["--oversubscribe"] if oversubscribe else []), "-np", str(np), *cmd]


def spawn(cmd, env=None, merge=False, stdin=None):
    """Starts cmd in a session of its own, its output captured as text; with
    merge, stderr goes into stdout. env: the whole environment (None: ours)."""
    return subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if merge else subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def wait_or_kill(p, limit):
    """Waits for p (from spawn) up to limit seconds (None: no limit); past it,
    kills p's whole process group. Returns a Result; a killed run's output
    ends with a note saying so."""
    try:
        out, err = p.communicate(timeout=limit)
        return Result(p.returncode, out, err or "")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        note = f"\n[killed after {limit} s: a hang]"
        return Result(None, out + note, "") if err is None else Result(None, out, err + note)


def run_cmd(cmd, limit, env=None, merge=False, stdin=None):
    """spawn(cmd, env, merge, stdin), then wait_or_kill(limit): a Result."""
    return wait_or_kill(spawn(cmd, env, merge, stdin), limit)


def single_config(path, name, gbs, batches, val=None, ckpt=None, keep_all=True, **more):
    """Writes at path the experiment config of one trial (searcher single on
    validation_loss, smaller is better) of `batches` batches at global batch
    size gbs; val and ckpt: the validation and checkpoint periods in batches
    (None: none); keep_all: every checkpoint kept (retention 100 and 100);
    more: other top-level keys. Returns path."""
    cfg = {"name": name, "hyperparameters": {"global_batch_size": gbs},
           "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True,
                        "max_length": {"batches": batches}}}
    if val is not None:
        cfg["min_validation_period"] = {"batches": val}
    if ckpt is not None:
        cfg["min_checkpoint_period"] = {"batches": ckpt}
    if keep_all:
        cfg["checkpoint_storage"] = {"save_trial_latest": 100, "save_trial_best": 100}
    cfg.update(more)
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def exit_with_report(t0, work):
    """Ends a driver of checks: the count and every failure, the work
    folder removed when all passed (kept to look at otherwise); exits 1 on
    any failure."""
    print(f"{len(FAILURES)} failures; {time.time() - t0:.1f} s; work dir {work}")
    for f in FAILURES:
        print("FAILED: " + f)
    if not FAILURES:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if FAILURES else 0)


def fail(msg):
    """Stops the driver: prints the failure and exits 1."""
    print("FAIL:", msg)
    sys.exit(1)


def run_example(cmd, cwd, timeout, expect=0):
    """Runs cmd in cwd to its end (subprocess.run's timeout), printing the
    command and its exit code and time; fail()s, with the tail of its output,
    unless it exits with `expect`. Returns the CompletedProcess (text)."""
    print("$", " ".join(cmd))
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    print(f"exit code {p.returncode} after {time.monotonic() - t0:.1f} s")
    if p.returncode != expect:
        sys.stdout.write(p.stdout[-3000:] + p.stderr[-3000:])
        fail(f"exit code {p.returncode}, expected {expect}")
    return p
