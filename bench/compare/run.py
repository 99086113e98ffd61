#!/usr/bin/env python3
"""Issue 8's comparison on one machine in one run: ctrial, a hand-written
libtorch C++ loop, plain PyTorch, Determined's PyTorchTrial
(det.pytorch.Trainer) and PyTorch Lightning's Trainer, on the same five
workloads, data, hyperparameters and seed (a markdown table of steps/s,
ratios, final losses and peak RSS), then ctrial's data loader, checkpoint
save/load and gradient all-reduce beside torch's DataLoader,
torch.save/torch.load and a bare MPI_Allreduce, 2 ranks beside 1, and
models exported from Python (exported.py: resnet18 and the charlm GPT as
.pt2 archives) beside the same models in ct_nn_* layers and in PyTorch; a
PNG chart of the ratios.

    .venv/bin/python bench/compare/run.py [--runs 5] [--threads 1] [--readme]
    .venv/bin/python bench/compare/run.py --smoke --out /tmp/compare_smoke.md
    # before/after a change: ctrial against another build of it, interleaved
    .venv/bin/python bench/compare/run.py --parts training --systems ctrial,libtorch \
        --baseline-build ../base/build --out /tmp/ab.md

Needs the build's programs that the run uses (BUILD/examples/{mnist,resnet,
charlm}, BUILD/bench/*: the default BUILD is build, else build-ddp,
whichever has them all; MPI on for the all-reduce part) and `bash
tools/bench-setup.sh` (determined, lightning and matplotlib in .venv).
Nothing is built here. --readme also replaces the README's Performance
section with the new tables and chart.

Every system runs as its own process, `--runs` times, interleaved (one
process of each system for each workload, then the next round; the
systems' order rotates each round). Each process trains
(warm-up + windows) x window steps and reports `windows` timed windows
after dropping the warm-up ones:

  ctrial      the example program through ct_main (bench/gpu/run.py's
              run_ctrial: a derived config with a report every `window`
              batches, no validation or checkpoint before the end; windows
              are metrics.jsonl training lines' timings.wall_s)
  libtorch    libtorch_loop (libtorch_loop.cpp: the same models, order and
              step in the C++ API, timed as common.Windows)
  pytorch     eager_runner.py (bench/gpu/torch_eager.py's workloads and
              loop, plus the MLP)
  determined  det_runner.py
  lightning   lightning_runner.py
  baseline    with --baseline-build DIR: ctrial's programs from another
              build (DIR/examples/...), run exactly as `ctrial` is, so a
              change is measured against the code before it in one run;
              the table then also gives ctrial / baseline per workload

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
WINDOWS = {"mlp": (100, 20), "cnn": (40, 5), "charlm": (40, 5), "resnet": (5, 2), "lstm": (20, 5)}
BINARY = {"mlp": "mnist", "cnn": "mnist", "charlm": "charlm", "resnet": "resnet", "lstm": "charlm"}
TITLES = {
    "mlp": "digits MLP 64-256-10 (examples/mnist mnist_mlp.json), batch 32, Adam, no StepLR",
    "cnn": "digits CNN with BatchNorm (mnist_cnn.json), batch 128, Adam, no StepLR",
    "charlm": "char LM GPT, 2 layers, n_embd 128, block 64 (charlm.json), batch 16, AdamW + clipping",
    "resnet": "torchvision's ResNet-18 on the digits upsampled to 32x32 (examples/resnet resnet.json), batch 32, "
              "SGD with momentum and weight decay",
    "lstm": "char LM LSTM, 2 layers, hidden 128, n_embd 64, block 64 (charlm_lstm.json), batch 32, "
            "AdamW + clipping",
}
for _wl, _w in common.WORKLOADS.items():
    gr.WORKLOADS[_wl] = dict(binary=BINARY[_wl], config=_w["config"],
                             data=os.path.relpath(os.path.join(ROOT, _w["data"]), os.path.join(ROOT, "examples", "data")),
                             kind="", title=TITLES[_wl], hparams=dict(_w["hparams"]), window=WINDOWS[_wl][0], smoke={})

SYSTEMS = ["ctrial", "libtorch", "pytorch", "determined", "lightning"]
PARTS = ["training", "loader", "checkpoint", "allreduce", "exported"]
LABELS = {"ctrial": "ctrial (ct_main)", "baseline": "ctrial, baseline build", "libtorch": "libtorch C++ loop",
          "pytorch": "plain PyTorch",
          "determined": "Determined PyTorchTrial", "lightning": "Lightning Trainer"}
RUNNERS = {"pytorch": "eager_runner.py", "determined": "det_runner.py", "lightning": "lightning_runner.py"}

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
    "difference grows with the steps: use --loss-rtol 0.05 there. The libtorch loop's Adam/AdamW round the "
    "first moment differently from Python's (mul_ + add_ against lerp_), about 5e-7 in the loss over 20 "
    "steps (parity.py).")


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


def run_libtorch(plan, wl, binary):
    a = plan.a
    window, windows, warmup = plan.steps(wl)
    hp, data, _ = common.setup(argparse.Namespace(workload=wl, config=None, data=None, hparam=[],
                                                  threads=a.threads, device="cpu"))
    cmd = common.libtorch_cmd(binary, wl, hp, data, window, windows, warmup, a.threads, a.seed)
    rc, out, err, secs = plan.run(cmd, f"libtorch_{wl}")
    if rc != 0:
        return {"error": f"exit {rc}: {gr.last_line(err) or gr.last_line(out)}", "seconds": secs}
    r = json.loads(out.strip().splitlines()[-1])
    return {"rates": r["steps_per_s"], "final_loss": r["final_loss"], "losses": r["losses"], "seconds": secs,
            "peak_rss_mb": plan.last_maxrss_mb, "self_peak_rss_mb": r.get("peak_rss_mb")}


def run_one(plan, system, wl, binaries):
    if system in ("ctrial", "baseline"):
        programs = binaries if system == "ctrial" else plan.a.baseline_binaries
        r = gr.run_ctrial(plan, wl, "fp32", programs[BINARY[wl]])
        r["peak_rss_mb"] = plan.last_maxrss_mb
        return r
    if system == "libtorch":
        return run_libtorch(plan, wl, binaries["libtorch_loop"])
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
        floor = summary[wl].get("libtorch")
        for system in a.systems:
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
            ratio_floor = f"{s['median'] / floor['median']:.2f}×" if floor else "—"
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
            rows.append(f"| {wl} | {LABELS[system]} | {rate} | {ratio_floor} | {ratio} | {loss} | {agree} | "
                        f"{rss} | {procs} |")
    if "baseline" in a.systems and "ctrial" in a.systems:
        ab = [f"{wl} {summary[wl]['ctrial']['median'] / summary[wl]['baseline']['median']:.3f}×"
              for wl in a.workloads if summary[wl].get("ctrial") and summary[wl].get("baseline")]
        rows += ["", f"ctrial ÷ baseline build ({a.baseline_build}), median over median: {', '.join(ab)}"]
    return rows, all_ok


# The build's programs that the systems and parts run (ctrial's: each
# workload's example program, BINARY).
PROGRAMS = {"libtorch": "bench/compare/libtorch_loop", "loader": "bench/loader/bench_loader",
            "checkpoint": "bench/ckpt/bench_ckpt", "allreduce": "bench/dist/bench_dist"}


def needed(a):
    """The programs this run uses: its workloads' example programs (ctrial),
    the libtorch loop, its parts' programs."""
    names = []
    if "training" in a.parts:
        if "ctrial" in a.systems:
            names += sorted({f"examples/{BINARY[wl]}/{BINARY[wl]}" for wl in a.workloads})
        if "libtorch" in a.systems:
            names.append(PROGRAMS["libtorch"])
    if "exported" in a.parts:  # exported.py: the model in ct_nn_* layers, and exported
        names += ["examples/resnet/resnet", "examples/exported/exported", "examples/charlm/charlm"]
    return names + [PROGRAMS[p] for p in a.parts if p in PROGRAMS]


def find_build_dir(names):
    for d in ("build", "build-ddp"):
        if all(os.path.isfile(os.path.join(ROOT, d, n)) for n in names):
            return os.path.join(ROOT, d)
    return os.path.join(ROOT, "build")


# ---- the other side-by-side measurements ------------------------------------------------
#
# bench/loader, bench/ckpt and bench/dist each measure one of ctrial's parts
# beside its reference and write every sample with --json; they run here, after
# the training part, on the same machine in the same run.


def part_cmd(a, part, json_path, scratch):
    py, build = a.python, a.build_dir
    if part == "loader":
        return [py, os.path.join(ROOT, "bench/loader/run.py"), "--build", build, "--threads", str(a.threads),
                "--epochs", "2" if a.smoke else "5", "--json", json_path]
    if part == "checkpoint":
        return [py, os.path.join(ROOT, "bench/ckpt/run.py"), build, "--dir", scratch, "--json", json_path]\
            + (["--runs", "1", "--rounds", "1", "--scenarios", "adam"] if a.smoke else ["--runs", "3", "--rounds", "2"])
    if part == "exported":
        return [py, os.path.join(HERE, "exported.py"), build, "--threads", str(a.threads), "--seed", str(a.seed),
                "--json", json_path] + (["--runs", "1", "--windows", "2"] if a.smoke else ["--runs", "3"])
    return [py, os.path.join(ROOT, "bench/dist/run.py"), build, "--parts", "bandwidth,train", "--json", json_path]\
        + (["--runs", "1", "--mb", "1,10", "--reps", "5", "--steps", "10"] if a.smoke else ["--runs", "3"])


def run_part(a, part, work):
    json_path = os.path.join(work, f"{part}.json")
    cmd = part_cmd(a, part, json_path, work)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    secs = time.monotonic() - t0
    if p.returncode != 0 or not os.path.isfile(json_path):
        err = gr.last_line(p.stderr) or gr.last_line(p.stdout)
        log(f"  $ {' '.join(cmd)}\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
        return {"error": f"exit {p.returncode}: {err}", "seconds": secs, "command": cmd}
    with open(json_path) as f:
        r = json.load(f)
    r["seconds"], r["command"] = secs, cmd
    return r


def spread(xs, digits="{:,.0f}"):
    return f"{digits.format(statistics.median(xs))} ({digits.format(min(xs))}–{digits.format(max(xs))})"


def part_rows(parts):
    """One dict per comparison: part, what (the table's text), label (the
    chart's), unit, ctrial and reference (their samples) and ref_name; the
    ratio is median over median."""
    rows = []

    def row(part, what, label, unit, ctrial, reference, ref_name):
        rows.append(dict(part=part, what=what, label=f"{part}: {label}", unit=unit, ctrial=ctrial,
                         reference=reference, ref_name=ref_name))

    ld = parts.get("loader")
    if ld and "rows" in ld:
        for r in ld["rows"]:
            workers = f"{r['workers']} workers, {r['threads']} thread(s)"
            row("data loader", f"{workers}, MNIST-shaped, batch {ld['meta']['batch']}", workers, "records/s",
                r["ctrial_records_per_s"], r["torch_records_per_s"], "torch DataLoader")
    ck = parts.get("checkpoint")
    if ck and "rows" in ck:
        for r in ck["rows"]:
            what = f"{r['op']} {r['scenario']} ({r['mb']:.0f} MB)"
            row("checkpoint", what, what, "MB/s", r["ctrial_mb_per_s"], r["torch_mb_per_s"],
                "torch.save" if r["op"] == "save" else "torch.load")
    ds = parts.get("allreduce")
    if ds and "bandwidth" in ds:
        for r in ds["bandwidth"]:
            zero = "grads set to None" if r["variant"] == "none" else "grads zeroed in place"
            how = r.get("transport", "ring")
            row("gradient all-reduce", f"{r['mb']:g} MB, 2 ranks, {how}, {zero}", f"{r['mb']:g} MB [{how}, {zero}]",
                "GB/s", r["grad_sync_gb_per_s"], r["mpi_allreduce_gb_per_s"], "MPI_Allreduce")
    if ds and ds.get("train"):
        ctrial = [r for r in ds["train"] if r.get("system", "ctrial") == "ctrial"]
        base = next(r for r in ctrial if r["ranks"] == 1 and r["threads"] == 1)
        gb = ds["meta"]["global_batch"]
        for r in ctrial:
            if r is not base:
                row("ranks", f"{r['configuration']}, global batch {gb}", r["configuration"], "samples/s",
                    r["samples_per_s"], base["samples_per_s"], "1 rank, 1 thread")
        # the same job in PyTorch: one process, and DistributedDataParallel (gloo) on as many ranks
        torch = {r["ranks"]: r for r in ds["train"] if r.get("system") == "torch"}
        for r in ctrial:
            ref = torch.get(r["ranks"])
            if ref and r["threads"] == 1 and r["zero"] == "none" and not r.get("environment"):
                row("ranks", f"{r['configuration']} vs {ref['configuration']}, global batch {gb}",
                    f"{r['configuration']} vs torch", "samples/s", r["samples_per_s"], ref["samples_per_s"],
                    ref["configuration"])
    ex = parts.get("exported")
    if ex and "rows" in ex:
        for r in ex["rows"]:
            name = {"resnet": "resnet18", "charlm": "charlm GPT"}.get(r["workload"], r["workload"])
            row("exported model", f"{name} from a .pt2 archive, trained by ct_main ({r['title']})",
                f"{name} vs ct_nn_* layers", "steps/s", r["exported"], r["layers"], "the same model in ct_nn_* layers")
            row("exported model", f"{name} from a .pt2 archive, trained by ct_main ({r['title']})",
                f"{name} vs PyTorch", "steps/s", r["exported"], r["pytorch"], "plain PyTorch (eager)")
    return rows


def ratio_of_medians(r):
    return statistics.median(r["ctrial"]) / statistics.median(r["reference"])


def part_table(parts):
    lines = ["| part | measurement | ctrial median (min–max) | reference | reference median (min–max) | "
             "ctrial ÷ reference |", "|---|---|---|---|---|---|"]
    for r in part_rows(parts):
        fmtd = "{:,.2f}" if r["unit"] in ("GB/s", "steps/s") else "{:,.0f}"
        lines.append(f"| {r['part']} | {r['what']} | {spread(r['ctrial'], fmtd)} {r['unit']} | {r['ref_name']} | "
                     f"{spread(r['reference'], fmtd)} {r['unit']} | **{ratio_of_medians(r):.2f}×** |")
    for name, r in parts.items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error']} | | | | |")
    return lines


# ---- the chart --------------------------------------------------------------------------


def chart(a, summary, parts, path):
    """Left: training steps/s of every system ÷ plain PyTorch's, per workload
    (bars: median; whiskers: the slowest and fastest window). Right: each of
    ctrial's parts ÷ its reference (log scale)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = part_rows(parts)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1, 1.25]})
    systems = [s for s in a.systems if s != "pytorch"]
    colors = {"ctrial": "#d62728", "libtorch": "#7f7f7f", "determined": "#1f77b4", "lightning": "#9467bd"}
    width = 0.8 / max(len(systems), 1)
    for k, system in enumerate(systems):
        xs, ys, lo, hi = [], [], [], []
        for j, wl in enumerate(a.workloads):
            s, ref = summary.get(wl, {}).get(system), summary.get(wl, {}).get("pytorch")
            if not s or not ref:
                continue
            xs.append(j + (k - (len(systems) - 1) / 2) * width)
            ys.append(s["median"] / ref["median"])
            lo.append(ys[-1] - s["min"] / ref["median"])
            hi.append(s["max"] / ref["median"] - ys[-1])
        ax1.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=LABELS[system], color=colors.get(system))
        for x, y in zip(xs, ys):
            ax1.text(x, 0.03, f"{y:.2f}", ha="center", va="bottom", fontsize=7, rotation=90, color="white")
    ax1.axhline(1.0, color="black", lw=0.8, ls="--")
    ax1.set_xticks(range(len(a.workloads)), [f"{wl}" for wl in a.workloads])
    ax1.set_ylabel("training steps/s ÷ plain PyTorch (higher is faster)")
    ax1.set_title(f"Training, CPU, {a.threads} thread(s)")
    ax1.legend(fontsize=8, loc="upper right")

    labels = [r["label"] for r in rows]
    vals = [ratio_of_medians(r) for r in rows]
    refs = [r["ref_name"] for r in rows]
    ys = range(len(rows))[::-1]
    ax2.barh(list(ys), vals, color=["#d62728" if v >= 1 else "#ff9896" for v in vals])
    for y, v, ref in zip(ys, vals, refs):
        ax2.text(v * 1.05, y, f"{v:.2f}× {ref}", va="center", fontsize=7)
    ax2.axvline(1.0, color="black", lw=0.8, ls="--")
    ax2.set_xscale("log")
    ax2.set_yticks(list(ys), labels, fontsize=7)
    ax2.set_xlim(min(vals + [1]) / 1.5, max(vals + [1]) * 6)
    ax2.set_xlabel("ctrial ÷ reference, median over median (log scale; > 1: ctrial faster)")
    ax2.set_title("Loader, checkpoint, all-reduce, ranks, exported models")
    fig.suptitle(f"ctrial side by side — {gr.machine(__import__('torch'), 'cpu')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- the README section -----------------------------------------------------------------

README_BEGIN = "<!-- bench/compare/run.py --readme: begin -->"
README_END = "<!-- bench/compare/run.py --readme: end -->"


def update_readme(text):
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        readme = f.read()
    if README_BEGIN not in readme or README_END not in readme:
        raise SystemExit(f"run.py --readme: README.md has no {README_BEGIN} ... {README_END} block")
    head, rest = readme.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    with open(path, "w") as f:
        f.write(head + README_BEGIN + "\n" + text.rstrip() + "\n" + README_END + tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=None, help="the build (default: build, else build-ddp, whichever "
                    "has the programs the run uses: example programs, libtorch_loop, bench/{loader,ckpt,dist})")
    ap.add_argument("--baseline-build", default=None, metavar="DIR",
                    help="another build of ctrial (the example programs of the workloads: examples/mnist, "
                         "examples/resnet, examples/charlm) to run beside this one as the system 'baseline', "
                         "interleaved: before/after comparisons")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "examples", "data"))
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    ap.add_argument("--workloads", default=",".join(common.WORKLOADS))
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated: " + ", ".join(SYSTEMS))
    ap.add_argument("--runs", type=int, default=None,
                    help="processes per system and workload, interleaved (5; smoke 1)")
    ap.add_argument("--window", type=int, default=0,
                    help="steps per timed window (default per workload: "
                         + ", ".join(f"{wl} {n}" for wl, (n, _) in WINDOWS.items())
                         + "; smoke " + "/".join(str(n) for _, n in WINDOWS.values()) + ")")
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
                    "nothing unless given); the raw numbers go beside it as .json, the chart as .png")
    ap.add_argument("--env", action="append", default=[], metavar="K=V",
                    help="an environment variable for every system's training processes (repeatable), e.g. "
                         "glibc's MALLOC_TOP_PAD_=16777216: ctrial then leaves malloc as the environment sets it")
    ap.add_argument("--readme", action="store_true", help="also put the tables and the chart in README.md's "
                    "Performance section")
    a = ap.parse_args()
    if a.smoke:
        a.runs = a.runs or 1
        a.windows = a.windows or 2
    a.runs = a.runs or 5
    a.windows = a.windows or 5
    if a.out is None and not a.smoke:
        a.out = os.path.join(HERE, "RESULTS.md")
    if a.readme and not a.out:
        raise SystemExit("run.py: --readme needs --out (the chart the README shows is written beside it)")
    if a.threads < 1:
        raise SystemExit("run.py: --threads must be >= 1 (the same thread count for every system)")
    a.workloads = [w for w in a.workloads.split(",") if w]
    a.systems = [s for s in a.systems.split(",") if s]
    a.parts = [p for p in a.parts.split(",") if p]
    for w in a.workloads:
        if w not in common.WORKLOADS:
            raise SystemExit(f"run.py: unknown workload {w}")
    if a.baseline_build:
        a.baseline_build = os.path.abspath(a.baseline_build)
        a.baseline_binaries = {b: os.path.join(a.baseline_build, "examples", b, b)
                               for b in {BINARY[wl] for wl in a.workloads}}
        for path in a.baseline_binaries.values():
            if not os.path.isfile(path):
                raise SystemExit(f"run.py: --baseline-build: {path} not found")
        if "baseline" not in a.systems:
            a.systems.insert(a.systems.index("ctrial") + 1 if "ctrial" in a.systems else 0, "baseline")
    for s in a.systems:
        if s not in SYSTEMS and not (s == "baseline" and a.baseline_build):
            raise SystemExit(f"run.py: unknown system {s}" + (" (baseline needs --baseline-build)"
                                                             if s == "baseline" else ""))
    for p in a.parts:
        if p not in PARTS:
            raise SystemExit(f"run.py: unknown part {p} (parts: {', '.join(PARTS)})")
    a.device = "cpu"
    programs = needed(a)
    a.build_dir = os.path.abspath(a.build_dir or find_build_dir(programs))
    a.notes = []
    for n in programs:
        if not os.path.isfile(os.path.join(a.build_dir, n)):
            raise SystemExit(f"run.py: {os.path.join(a.build_dir, n)} not found: build first "
                             f"(cmake -S . -B build -G Ninja && ninja -C build)")

    env, torch = gr.library_env([])
    for kv in a.env:
        k, eq, v = kv.partition("=")
        if not eq or not k:
            raise SystemExit(f"run.py: --env {kv}: expected K=V")
        env[k] = v
    # The programs checked above: the example programs and the floor.
    binaries = {os.path.basename(n): os.path.join(a.build_dir, n) for n in programs}
    work = tempfile.mkdtemp(prefix="bench_compare_")
    plan = Plan(a, env, work)
    start = time.monotonic()
    load0 = os.getloadavg()
    results = {wl: {s: [] for s in a.systems} for wl in a.workloads}
    training = "training" in a.parts
    total = a.runs * len(a.workloads) * len(a.systems) if training else 0
    n = 0
    for rnd in range(a.runs if training else 0):
        order = a.systems[rnd % len(a.systems):] + a.systems[:rnd % len(a.systems)]
        for wl in a.workloads:
            for system in order:
                n += 1
                r = run_one(plan, system, wl, binaries)
                results[wl][system].append(r)
                what = (f"{statistics.median(r['rates']):,.1f} steps/s, final loss {r['final_loss']:.6f}, "
                        f"peak RSS {r['peak_rss_mb']:.0f} MB" if "rates" in r else r["error"])
                log(f"[{n}/{total}, round {rnd + 1}/{a.runs}, {time.monotonic() - start:5.0f} s] "
                    f"{wl} {system}: {what} ({r['seconds']:.1f} s)")
    parts = {}
    for part in [p for p in a.parts if p != "training"]:
        log(f"[{time.monotonic() - start:5.0f} s] {part} ...")
        parts[part] = run_part(a, part, work)
        if "error" in parts[part]:
            a.notes.append(f"{part}: {parts[part]['error']}")
        log(f"[{time.monotonic() - start:5.0f} s] {part}: {parts[part].get('error', 'done')} "
            f"({parts[part]['seconds']:.0f} s)")
    load1 = os.getloadavg()
    summary = {wl: {s: pooled(results[wl][s]) for s in a.systems} for wl in a.workloads} if training else {}
    all_ok = True

    versions = {}
    for wl in a.workloads:
        for s in a.systems:
            for r in results[wl][s]:
                versions.update(r.get("versions", {}))
    wins = ", ".join(f"{wl} {plan.steps(wl)[0]}" for wl in a.workloads)
    when = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    machine = gr.machine(torch, "cpu")
    command = " ".join([os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)] + sys.argv[1:])
    header = [
        "# bench/compare — ctrial beside libtorch, PyTorch, Determined and Lightning"
        + (" (smoke run)" if a.smoke else ""),
        "",
        f"Measured {when} on {machine}; device cpu, {a.threads} intra-op thread(s) in every system; seed {a.seed}; "
        + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + ".",
        f"Load average (1 min) {load0[0]:.2f} at the start, {load1[0]:.2f} at the end; "
        f"{time.monotonic() - start:.0f} s in all.",
        f"Command: `{command}`",
    ] + ([f"Environment of every training process: {', '.join(f'`{kv}`' for kv in a.env)}."] if a.env else []) + [
        "",
    ]
    text = "\n".join(header)
    train_text = ""
    if training:
        rows, all_ok = build_table(a, summary, results)
        train_text = "\n".join(rows) + "\n"
        text += (
            f"\n## Training\n\nSteps/s: median (min–max) over the timed windows of all processes pooled: {a.runs} "
            f"process(es) per system and workload, interleaved, each {a.windows} window(s) of N steps (N: {wins}) "
            f"after {a.warmup_windows} warm-up window(s) dropped. Ratios: median over median. Final loss: the last "
            f"window's mean training loss, median over processes (min–max when they differ). Peak RSS: the child "
            f"process's ru_maxrss from os.wait4 (the whole process, start to exit, the same measurement for every "
            f"system), the largest over its processes; in parentheses, the process's own ru_maxrss read right "
            f"after training (for the Python systems, interpreter shutdown after that raises the high-water mark "
            f"by about 120 MB; ctrial has no in-process figure).\n\n"
            + "".join(f"- `{wl}`: {TITLES[wl]}\n" for wl in a.workloads) + "\n" + train_text
            + f"\nLoss agreement: {'every system agrees' if all_ok else 'NOT every system agrees'} with plain "
              f"PyTorch within {a.loss_rtol:g} relative. Why this tolerance: {LOSS_WHY}\n")
    part_text = ""
    if parts:
        part_text = "\n".join(part_table(parts)) + "\n"
        text += (
            "\n## Data loader, checkpoint, gradient all-reduce, ranks, exported models\n\n"
            "Each measured by its own script in the same run (bench/loader, bench/ckpt, bench/dist, "
            "bench/compare/exported.py; their "
            "READMEs say how), every sample kept; median (min–max) over the samples, the ratio median over "
            "median. Loader: records/s per epoch after a warm-up epoch, ctrial's loader vs torch's DataLoader "
            "on the same tensors. Checkpoint: a 533 MB set of tensors and a 504 MB transformer with its Adam "
            "state, ct_pth_save/ct_pth_load vs torch.save/torch.load(weights_only=True) on the same data, page "
            "cache, no fsync on either side. All-reduce: ctrial's gradient buckets (grad_sync: hooks, "
            "buckets, averaging) vs a bare MPI_Allreduce of the same bytes, 2 ranks on this machine. Ranks: "
            "an MLP's training throughput at the same global batch, vs 1 rank with 1 thread. Exported "
            "models: the module exported by tools/export_model.py and trained through ct_main "
            "(ct_nn_load_exported) vs the example's own model in ct_nn_* layers and vs plain PyTorch, the "
            "same weights, data and steps, steps/s per window.\n\n" + part_text)
    if a.notes:
        text += "\nNotes:\n" + "".join(f"- {x}\n" for x in a.notes)
    print(text)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        png = os.path.splitext(a.out)[0] + ".png"
        try:
            chart(a, summary, parts, png)
            text += f"\n![ctrial side by side]({os.path.basename(png)})\n"
        except ImportError as e:
            a.notes.append(f"no chart: {e} (bash tools/bench-setup.sh installs matplotlib)")
            png = None
        with open(a.out, "w") as f:
            f.write(text)
        raw = {"args": {k: v for k, v in vars(a).items() if k != "notes"}, "summary": summary, "results": results,
               "parts": parts, "loss_ok": all_ok, "load_avg": [load0, load1]}
        with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
            json.dump(raw, f, indent=1, default=str)
        log(f"wrote {a.out}, {os.path.splitext(a.out)[0] + '.json'}" + (f" and {png}" if png else ""))
        if a.readme:
            rel_png = os.path.relpath(png, ROOT) if png else None
            update_readme(
                f"Measured {when} on {machine}, {a.threads} intra-op thread(s), load average {load0[0]:.2f} at "
                f"the start and {load1[0]:.2f} at the end. Reproduce (after `bash tools/setup.sh`, `bash "
                f"tools/bench-setup.sh` and the build above):\n\n```sh\n.venv/bin/python {command}\n```\n\n"
                + (f"![ctrial side by side]({rel_png})\n\n" if rel_png else "")
                + ("Training steps/s on the CPU (the same models, data, hyperparameters and seed in every "
                   "system; how each is timed, and all raw numbers: "
                   f"[{os.path.relpath(a.out, ROOT)}]({os.path.relpath(a.out, ROOT)})):\n\n"
                   + "".join(f"- `{wl}`: {TITLES[wl]}\n" for wl in a.workloads) + "\n" + train_text
                   if training else "")
                + ("\nctrial's parts beside the reference each would be replaced by:\n\n" + part_text
                   if part_text else ""))
            log("updated README.md's Performance section")
    shutil.rmtree(work, ignore_errors=True)
    parts_ok = all("error" not in r for r in parts.values())
    return 0 if all_ok and parts_ok else 1


if __name__ == "__main__":
    sys.exit(main())
