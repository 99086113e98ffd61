"""Profiler parity: ct_profiler against torch.profiler.profile with
torch.profiler.schedule (torch 2.11), schedule by schedule, on the CPU.

    test_profiler_parity.py PROFILER_PARITY_EXE

Each case below is a schedule and a number of steps. Python runs it through
torch.profiler.profile(activities=[CPU], schedule=schedule(...),
on_trace_ready=handler) with a little work in a record_function("work") per
step and p.step() after it, then leaves the `with` block; the handler exports
each trace. The C program (tests/profiler/profiler_parity.c) runs the same
schedule, steps and work through ct_profiler_new/step/stop. Compared, case
by case, exactly:
  * the moments traces are written: after which step() (the step number it
    moved to) or at stop;
  * in each trace, the ProfilerStep#k ranges (which k, each once) and the
    number of "work" ranges, both as user_annotation events.
And for each C trace: valid JSON with a traceEvents list, the top-level keys
torch's own traces have, traceName = its path, and a file name that
TensorBoard's profiler plugin lists: torch-tb-profiler's WORKER_PATTERN
gives worker "c" and span = the cycle, counting from 0.

The cases walk every transition of torch's action_map that a schedule can
produce: NONE->WARMUP, NONE->RECORD (warmup 0), WARMUP->RECORD(_AND_SAVE),
RECORD_AND_SAVE->NONE/WARMUP/RECORD/RECORD_AND_SAVE, and the exits from
NONE, WARMUP, RECORD and RECORD_AND_SAVE; skip_first, skip_first_wait,
repeat 0 and repeat > 1.

Work files go to $CTRIAL_BUILD_DIR/tests/profiler/parity. Exits 1 on any
difference, after printing each.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import warnings

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

torch.set_num_threads(1)
warnings.simplefilter("ignore")  # "Profiler won't be using warmup", "clears events"

EXE = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(os.path.join(os.environ.get("CTRIAL_BUILD_DIR", "."), "tests", "profiler", "parity"))

# tag: (skip_first, wait, warmup, active, repeat, skip_first_wait, steps)
CASES = {
    "main": (1, 1, 1, 2, 2, 0, 12),          # the C test's schedule
    "defaults": (0, 1, 1, 3, 1, 0, 8),       # ct_profiler_defaults()
    "stop_in_record": (0, 0, 1, 3, 1, 0, 2),  # exit RECORD: written
    "stop_in_warmup": (0, 1, 1, 1, 0, 0, 10),  # repeat 0; exit WARMUP: not written
    "every_step": (0, 0, 0, 1, 0, 0, 4),     # RAS->RAS; exit RAS
    "no_warmup": (2, 3, 0, 2, 2, 0, 15),     # NONE->RECORD
    "skip_first_wait": (5, 3, 1, 2, 2, 1, 20),
    "back_to_back": (0, 0, 2, 1, 3, 0, 10),  # RAS->WARMUP
    "record_record": (0, 0, 0, 2, 0, 0, 7),  # RAS->RECORD; exit RECORD
    "never": (3, 0, 0, 1, 1, 0, 2),          # stopped before the first window
    "after_repeat": (0, 1, 0, 1, 2, 0, 9),   # idle after the last cycle
}

# torch-tb-profiler's consts.WORKER_PATTERN
WORKER_PATTERN = re.compile(r"""^(.*?) # worker name
        (\.\d+)? # optional timestamp like 1619499959628 used as span name
        \.pt\.trace\.json # the ending suffix
        (?:\.gz)?$""", re.X)

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def summary(trace):
    """(sorted ProfilerStep numbers, number of "work" ranges); both must be
    user_annotation events."""
    steps, work = [], 0
    for e in trace["traceEvents"]:
        name = e.get("name", "")
        m = re.fullmatch(r"ProfilerStep#(\d+)", name)
        if m or name == "work":
            if e.get("cat") != "user_annotation":
                fail(f"{name} has category {e.get('cat')!r}")
            if m:
                steps.append(int(m.group(1)))
            else:
                work += 1
    if len(steps) != len(set(steps)):
        fail(f"a ProfilerStep range appears twice: {sorted(steps)}")
    return sorted(steps), work


def torch_run(tag, case):
    skip_first, wait, warmup, active, repeat, skip_first_wait, steps = case
    out, state = [], {"stopping": False}
    path = os.path.join(WORK, "py", f"{tag}.json")

    def handler(p):
        p.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
        out.append(("stop" if state["stopping"] else str(p.step_num), summary(trace), sorted(trace)))

    sched = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first,
                     skip_first_wait=skip_first_wait)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched, on_trace_ready=handler) as p:
        for _ in range(steps):
            with record_function("work"):
                a = torch.randn(8, 8)
                (a @ a).sum()
            p.step()
        state["stopping"] = True
    return out


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(os.path.join(WORK, "py"))
    specs = [f"{tag}:{','.join(map(str, case))}" for tag, case in CASES.items()]
    r = subprocess.run([EXE, WORK] + specs, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        print(f"profiler_parity exited with {r.returncode}")
        return 1
    c_traces = {tag: [] for tag in CASES}
    for line in r.stdout.splitlines():
        if line.startswith("TRACE "):
            _, tag, when, path = line.split(" ", 3)
            c_traces[tag].append((when, path))

    for tag, case in CASES.items():
        want = torch_run(tag, case)
        got = []
        for i, (when, path) in enumerate(c_traces[tag]):
            try:
                with open(path) as f:
                    trace = json.load(f)
            except (OSError, ValueError) as e:
                fail(f"{tag}: {path}: {e}")
                continue
            if not isinstance(trace.get("traceEvents"), list):
                fail(f"{tag}: {path}: no traceEvents list")
                continue
            if trace.get("traceName") != path:
                fail(f"{tag}: {path}: traceName is {trace.get('traceName')!r}")
            m = WORKER_PATTERN.match(os.path.basename(path))
            if not m or m.group(1) != "c" or m.group(2) != f".{i}":
                fail(f"{tag}: {os.path.basename(path)} is not TensorBoard's c.{i}.pt.trace.json")
            if os.path.dirname(path) != os.path.join(WORK, tag):
                fail(f"{tag}: {path} is not in {os.path.join(WORK, tag)}")
            got.append((when, summary(trace), sorted(trace)))
        files = sorted(os.listdir(os.path.join(WORK, tag)))
        if len(files) != len(got):
            fail(f"{tag}: {len(files)} files written ({files}) for {len(got)} traces reported")
        w = [(when, s) for when, s, _ in want]
        g = [(when, s) for when, s, _ in got]
        if w != g:
            fail(f"{tag} {case}: torch wrote {w}, ctrial wrote {g}")
        for (_, _, wk), (_, _, gk) in zip(want, got):
            wk, gk = set(wk) - {"ERROR"}, set(gk) - {"ERROR"}
            if wk != gk:
                fail(f"{tag}: top-level keys differ: torch {sorted(wk)}, ctrial {sorted(gk)}")
                break
        print(f"{tag:16} {case}: {len(got)} traces, " +
              ", ".join(f"after {when}: steps {s[0]}" for when, s in g))

    if failures:
        print(f"{len(failures)} differences")
        return 1
    print(f"profiler parity: {len(CASES)} schedules match torch.profiler")
    return 0


if __name__ == "__main__":
    sys.exit(main())
