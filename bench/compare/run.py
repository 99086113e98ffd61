#!/usr/bin/env python3
"""Issue 8's comparison on one machine in one run: ctrial, a hand-written
libtorch C++ loop (not written yet), plain PyTorch, Determined's
PyTorchTrial (det.pytorch.Trainer) and PyTorch Lightning's Trainer, on the
same three workloads, data, hyperparameters and seed; a markdown table of
steps/s, ratios, final losses and peak RSS.

    .venv/bin/python bench/compare/run.py [--runs 5] [--threads 1] [--out bench/compare/RESULTS.md]
    .venv/bin/python bench/compare/run.py --smoke --out /tmp/compare_smoke.md

Needs the example programs built (BIN/mnist/mnist, BIN/charlm/charlm; the
default BIN is build/examples, else build-ddp/examples) and
`bash tools/bench-setup.sh` (determined and lightning in .venv). Nothing
is built here.

Every system runs as its own process, `--runs` times, interleaved (one
process of each system for each workload, then the next round; the
systems' order rotates each round). Each process trains
(warm-up + windows) x window steps and reports `windows` timed windows
after dropping the warm-up ones:

  ctrial      the example program through ct_main (bench/gpu/run.py's
              run_ctrial: a derived config with a report every `window`
              batches, no validation or checkpoint before the end; windows
              are metrics.jsonl training lines' timings.wall_s)
  pytorch     eager_runner.py (bench/gpu/torch_eager.py's workloads and
              loop, plus the MLP)
  determined  det_runner.py
  lightning   lightning_runner.py

Peak RSS is the same measurement for every system: ru_maxrss of the child
process from os.wait4() (the kernel's high-water mark of its resident set
from start to exit, which includes the Python interpreter and imported
packages for the Python systems, and their interpreter shutdown, which
here adds about 120 MB after training). Not RUSAGE_CHILDREN: that is a
maximum over all children so far, not a per-child figure, so deltas of it
say nothing. The Python runners also report their own ru_maxrss right
after training (shown in parentheses); ctrial has no such figure.

See bench/compare/README.md for the columns.
"""
import argparse
import datetime
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

import common  # noqa: E402  (bench/compare, on sys.path as the script's folder)


def _load_gpu_run():
    spec = importlib.util.spec_from_file_location("bench_gpu_run", os.path.join(ROOT, "bench", "gpu", "run.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gr = _load_gpu_run()

# The workloads: common.WORKLOADS (config, data, hyperparameter overrides,
# shared by the Python runners) registered with bench/gpu/run.py so that its
# Plan.config / run_ctrial derive ctrial's config from the same overrides.
# window: steps per timed window on the CPU (full run, smoke run).
WINDOWS = {"mlp": (100, 20), "cnn": (40, 5), "charlm": (40, 5)}
BINARY = {"mlp": "mnist", "cnn": "mnist", "charlm": "charlm"}
TITLES = {
    "mlp": "digits MLP 64-256-10 (examples/mnist mnist_mlp.json), batch 32, Adam, no StepLR",
    "cnn": "digits CNN with BatchNorm (mnist_cnn.json), batch 128, Adam, no StepLR",
    "charlm": "char LM GPT, 2 layers, n_embd 128, block 64 (charlm.json), batch 16, AdamW + clipping",
}
for _wl, _w in common.WORKLOADS.items():
    gr.WORKLOADS[_wl] = dict(binary=BINARY[_wl], config=_w["config"],
                             data=os.path.relpath(os.path.join(ROOT, _w["data"]), os.path.join(ROOT, "examples", "data")),
                             kind="", title=TITLES[_wl], hparams=dict(_w["hparams"]), window=WINDOWS[_wl][0], smoke={})

SYSTEMS = ["ctrial", "libtorch", "pytorch", "determined", "lightning"]
LABELS = {"ctrial": "ctrial (ct_main)", "libtorch": "libtorch C++ loop", "pytorch": "plain PyTorch",
          "determined": "Determined PyTorchTrial", "lightning": "Lightning Trainer"}
RUNNERS = {"pytorch": "eager_runner.py", "determined": "det_runner.py", "lightning": "lightning_runner.py"}
NOT_YET = {"libtorch"}   # no runner yet: a marked empty row and ratio column

# End-of-run loss agreement: every system's final loss (the last timed
# window's mean training loss, median over runs) against plain PyTorch's.
# See LOSS_WHY (printed under the table).
LOSS_RTOL = 1e-3
LOSS_WHY = (
    "All systems build the model right after torch.manual_seed(seed) and see the same batches in the same "
    "order (numpy RandomState shuffle), with the same dropout masks; on the CPU with 1 thread the Python "
    "systems are bit-identical (parity.py) and ctrial runs the same libtorch kernels through the C++ API, so "
    "only float rounding (e.g. how a window's mean is summed) can separate them. 1e-3 relative leaves room "
    "for that rounding growing over a few hundred steps and is far below what a real difference does "
    "(another seed, batch order or dropout mask moves the loss by percents; an untrained model stays at "
    "ln(10) = 2.3 / ln(65) = 4.2). With more threads or on a GPU reductions are reordered and the "
    "difference grows with the steps: use --loss-rtol 0.05 there.")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Plan(gr.Plan):
    """bench/gpu/run.py's Plan with this benchmark's window sizes, the seed,
    and a run() that records the child's peak RSS (os.wait4)."""

    def steps(self, wl):
        window = self.a.window or WINDOWS[wl][1 if self.a.smoke else 0]
        return window, self.a.windows, self.a.warmup_windows

    def hparams(self, wl, small=False):
        return dict(gr.WORKLOADS[wl]["hparams"])

    def config(self, wl, name, small=False):
        path = super().config(wl, name, small)
        with open(path) as f:
            cfg = json.load(f)
        cfg.setdefault("reproducibility", {})["experiment_seed"] = self.a.seed
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)
        return path

    def run(self, cmd, what):
        self.count += 1
        self.last_maxrss_mb = None
        t0 = time.monotonic()
        with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
            p = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True, cwd=ROOT, env=self.env)
            killed = []
            timer = threading.Timer(self.a.run_timeout, lambda: (killed.append(1), p.kill()))
            timer.start()
            try:
                _, status, ru = os.wait4(p.pid, 0)
            except BaseException:   # Ctrl-C: leave no training process behind
                p.kill()
                os.waitpid(p.pid, 0)
                raise
            finally:
                timer.cancel()
            p.returncode = os.waitstatus_to_exitcode(status)
            fo.seek(0)
            fe.seek(0)
            out, err = fo.read(), fe.read()
        secs = time.monotonic() - t0
        self.last_maxrss_mb = ru.ru_maxrss / 1024.0   # Linux: kilobytes
        rc = "timeout" if killed else p.returncode
        if killed:
            err += f"\nkilled after {self.a.run_timeout} s"
        if rc != 0:
            log(f"  $ {' '.join(cmd)}\n{(out or '')[-1500:]}{(err or '')[-1500:]}")
        return rc, out, err, secs


def run_python(plan, system, wl):
    a = plan.a
    window, windows, warmup = plan.steps(wl)
    cmd = [a.python, os.path.join(HERE, RUNNERS[system]), "--workload", wl, "--device", "cpu",
           "--threads", str(a.threads), "--seed", str(a.seed),
           "--window", str(window), "--windows", str(windows), "--warmup-windows", str(warmup)]
    rc, out, err, secs = plan.run(cmd, f"{system}_{wl}")
    if rc != 0:
        return {"error": f"exit {rc}: {gr.last_line(err) or gr.last_line(out)}", "seconds": secs}
    r = json.loads(out.strip().splitlines()[-1])
    return {"rates": r["steps_per_s"], "final_loss": r["final_loss"], "losses": r["losses"], "seconds": secs,
            "peak_rss_mb": plan.last_maxrss_mb, "self_peak_rss_mb": r.get("peak_rss_mb"),
            "versions": {k: r[k] for k in ("torch", "determined", "lightning") if k in r}}


def run_one(plan, system, wl, binaries):
    if system == "ctrial":
        r = gr.run_ctrial(plan, wl, "fp32", binaries[BINARY[wl]])
        r["peak_rss_mb"] = plan.last_maxrss_mb
        return r
    return run_python(plan, system, wl)


# ---- the table ---------------------------------------------------------------------------


def pooled(runs):
    good = [r for r in runs if "rates" in r]
    if not good:
        return None
    rates = [x for r in good for x in r["rates"]]
    losses = [r["final_loss"] for r in good]
    return {"median": statistics.median(rates), "min": min(rates), "max": max(rates), "windows": len(rates),
            "processes": len(good), "failed": len(runs) - len(good),
            "final_loss": statistics.median(losses), "final_loss_min": min(losses), "final_loss_max": max(losses),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in good),
            "train_peak_rss_mb": (max(r["self_peak_rss_mb"] for r in good)
                                  if all(r.get("self_peak_rss_mb") for r in good) else None)}


def fmt(x):
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def build_table(a, summary, results):
    rows = ["| workload | system | steps/s median (min–max) | ÷ libtorch | ÷ plain PyTorch | final loss | "
            f"loss vs PyTorch (rtol {a.loss_rtol:g}) | peak RSS MB: process (in training) | processes |",
            "|---|---|---|---|---|---|---|---|---|"]
    all_ok = True
    for wl in a.workloads:
        ref = summary[wl].get("pytorch")
        for system in a.systems:
            if system in NOT_YET:
                rows.append(f"| {wl} | {LABELS[system]} | not yet | not yet | not yet | not yet | not yet | "
                            f"not yet | 0 |")
                continue
            s = summary[wl].get(system)
            if s is None:
                errs = sorted({r.get("error", "") for r in results[wl][system]})
                rows.append(f"| {wl} | {LABELS[system]} | failed | — | — | — | — | — | 0 of "
                            f"{len(results[wl][system])} |")
                a.notes.append(f"{wl} {system}: " + "; ".join(errs))
                all_ok = False
                continue
            rate = f"{fmt(s['median'])} ({fmt(s['min'])}–{fmt(s['max'])})"
            ratio = f"{s['median'] / ref['median']:.2f}×" if ref else "—"
            loss = f"{s['final_loss']:.6f}"
            if s["final_loss_max"] != s["final_loss_min"]:
                loss += f" ({s['final_loss_min']:.6f}–{s['final_loss_max']:.6f})"
            if ref:
                rel = abs(s["final_loss"] - ref["final_loss"]) / max(abs(ref["final_loss"]), 1e-12)
                ok = rel <= a.loss_rtol
                all_ok &= ok
                agree = ("ref" if system == "pytorch" else f"{'ok' if ok else 'DIFFERS'} ({rel:.1e})")
                s["loss_rel_diff"], s["loss_ok"] = rel, ok
            else:
                agree = "—"
            procs = f"{s['processes']}" + (f" ({s['failed']} failed)" if s["failed"] else "")
            if s["failed"]:
                errs = sorted({r["error"] for r in results[wl][system] if "error" in r})
                a.notes.append(f"{wl} {system}: " + "; ".join(errs))
            rss = f"{s['peak_rss_mb']:.0f}" + (f" ({s['train_peak_rss_mb']:.0f})" if s["train_peak_rss_mb"] else "")
            rows.append(f"| {wl} | {LABELS[system]} | {rate} | not yet | {ratio} | {loss} | {agree} | "
                        f"{rss} | {procs} |")
    return rows, all_ok


def find_bin_dir():
    for d in ("build/examples", "build-ddp/examples"):
        p = os.path.join(ROOT, d)
        if all(os.path.isfile(os.path.join(p, b, b)) for b in ("mnist", "charlm")):
            return p
    return os.path.join(ROOT, "build", "examples")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default=None, help="folder of the example programs (default: build/examples, "
                    "else build-ddp/examples, whichever has mnist/mnist and charlm/charlm)")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "examples", "data"))
    ap.add_argument("--workloads", default="mlp,cnn,charlm")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated: " + ", ".join(SYSTEMS))
    ap.add_argument("--runs", type=int, default=None,
                    help="processes per system and workload, interleaved (5; smoke 1)")
    ap.add_argument("--window", type=int, default=0,
                    help="steps per timed window (default per workload: mlp 100, cnn 40, charlm 40; smoke 20/5/5)")
    ap.add_argument("--windows", type=int, default=None, help="timed windows per process (5; smoke 2)")
    # 2, not 1: Determined reports metrics at the end of each window, so a
    # report's cost falls in the next window, and its first report costs a
    # one-off ~0.25 s here (74 steps/s against ~900 in that window for the
    # mlp, every run): with one warm-up window that one-off would be the
    # first timed window of every Determined process.
    ap.add_argument("--warmup-windows", type=int, default=2, help="windows dropped first in each process (2)")
    ap.add_argument("--threads", type=int, default=1, help="intra-op CPU threads, every system (1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--loss-rtol", type=float, default=LOSS_RTOL,
                    help=f"final-loss agreement with plain PyTorch, relative ({LOSS_RTOL:g})")
    ap.add_argument("--run-timeout", type=float, default=300, help="seconds one process may run (300)")
    ap.add_argument("--python", default=sys.executable, help="python with torch, determined, lightning")
    ap.add_argument("--smoke", action="store_true", help="tiny windows, --runs 1, 2 windows: checks the path")
    ap.add_argument("--out", default=None, help="table file (default bench/compare/RESULTS.md; with --smoke "
                    "nothing unless given); the raw numbers go beside it as .json")
    a = ap.parse_args()
    if a.smoke:
        a.runs = a.runs or 1
        a.windows = a.windows or 2
    a.runs = a.runs or 5
    a.windows = a.windows or 5
    if a.out is None and not a.smoke:
        a.out = os.path.join(HERE, "RESULTS.md")
    if a.threads < 1:
        raise SystemExit("run.py: --threads must be >= 1 (the same thread count for every system)")
    a.workloads = [w for w in a.workloads.split(",") if w]
    a.systems = [s for s in a.systems.split(",") if s]
    for w in a.workloads:
        if w not in common.WORKLOADS:
            raise SystemExit(f"run.py: unknown workload {w}")
    for s in a.systems:
        if s not in SYSTEMS:
            raise SystemExit(f"run.py: unknown system {s}")
    a.device = "cpu"
    a.bin_dir = a.bin_dir or find_bin_dir()
    a.notes = []

    env, torch = gr.library_env([])
    binaries = {}
    if "ctrial" in a.systems:
        binaries = {b: gr.find_binary(a.bin_dir, b) for b in {BINARY[w] for w in a.workloads}}
    work = tempfile.mkdtemp(prefix="bench_compare_")
    plan = Plan(a, env, work)
    start = time.monotonic()
    load0 = os.getloadavg()
    measured = [s for s in a.systems if s not in NOT_YET]
    results = {wl: {s: [] for s in a.systems} for wl in a.workloads}
    total = a.runs * len(a.workloads) * len(measured)
    n = 0
    for rnd in range(a.runs):
        order = measured[rnd % len(measured):] + measured[:rnd % len(measured)]
        for wl in a.workloads:
            for system in order:
                n += 1
                r = run_one(plan, system, wl, binaries)
                results[wl][system].append(r)
                what = (f"{statistics.median(r['rates']):,.1f} steps/s, final loss {r['final_loss']:.6f}, "
                        f"peak RSS {r['peak_rss_mb']:.0f} MB" if "rates" in r else r["error"])
                log(f"[{n}/{total}, round {rnd + 1}/{a.runs}, {time.monotonic() - start:5.0f} s] "
                    f"{wl} {system}: {what} ({r['seconds']:.1f} s)")
    load1 = os.getloadavg()
    summary = {wl: {s: pooled(results[wl][s]) for s in measured} for wl in a.workloads}
    rows, all_ok = build_table(a, summary, results)

    versions = {}
    for wl in a.workloads:
        for s in measured:
            for r in results[wl][s]:
                versions.update(r.get("versions", {}))
    wins = ", ".join(f"{wl} {plan.steps(wl)[0]}" for wl in a.workloads)
    header = [
        "# bench/compare — ctrial beside libtorch, PyTorch, Determined and Lightning"
        + (" (smoke run)" if a.smoke else ""),
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {gr.machine(torch, 'cpu')}; "
        f"device cpu, {a.threads} intra-op thread(s) in every system; seed {a.seed}; "
        + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + ".",
        f"Load average (1 min) {load0[0]:.2f} at the start, {load1[0]:.2f} at the end; "
        f"{time.monotonic() - start:.0f} s in all.",
        f"Command: `{' '.join([os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)] + sys.argv[1:])}`",
        "",
        f"Steps/s: median (min–max) over the timed windows of all processes pooled: {a.runs} process(es) per "
        f"system and workload, interleaved, each {a.windows} window(s) of N steps (N: {wins}) after "
        f"{a.warmup_windows} warm-up window(s) dropped. Ratios: median over median. Final loss: the last "
        f"window's mean training loss, median over processes (min–max when they differ). Peak RSS: the child "
        f"process's ru_maxrss from os.wait4 (the whole process, start to exit, the same measurement for every "
        f"system), the largest over its processes; in parentheses, for the Python systems, the process's own "
        f"ru_maxrss read right after training (Python's interpreter shutdown, after that, raises the high-water "
        f"mark by about 120 MB here; ctrial has no in-process figure).",
        "",
    ]
    header += [f"- `{wl}`: {TITLES[wl]}" for wl in a.workloads]
    text = "\n".join(header) + "\n\n" + "\n".join(rows) + "\n"
    text += (f"\nLoss agreement: {'every system agrees' if all_ok else 'NOT every system agrees'} with plain "
             f"PyTorch within {a.loss_rtol:g} relative. Why this tolerance: {LOSS_WHY}\n")
    if "libtorch" in a.systems:
        text += "\nThe hand-written libtorch C++ loop (issue 8's system 2) is not written yet: its row and the " \
                "÷ libtorch column are placeholders.\n"
    if a.notes:
        text += "\nNotes:\n" + "".join(f"- {x}\n" for x in a.notes)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
        raw = {"args": {k: v for k, v in vars(a).items() if k != "notes"}, "summary": summary, "results": results,
               "loss_ok": all_ok, "load_avg": [load0, load1]}
        with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
            json.dump(raw, f, indent=1, default=str)
        log(f"wrote {a.out} and {os.path.splitext(a.out)[0] + '.json'}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
