#!/usr/bin/env python3
"""Hyperparameter search, ctrial beside Optuna, on one machine in one run:
a 16-trial random search of examples/mnist's MLP on the bundled digits, the
same budget per trial, run by ctrial (ct_main: the mnist program given an
experiment config with searcher random) and by Optuna's RandomSampler
driving a plain PyTorch loop of the same model (optuna_search.py); and
ctrial's adaptive ASHA on the same space, trial count and maximum length.
Wall time per search, the best validation accuracy each found, and for ASHA
against random search the best accuracy per core-second.

    .venv/bin/python bench/search/run.py [--rounds 3] [--two-cores [--ctrial-mpi]] [--json PATH]
    .venv/bin/python bench/search/run.py --smoke                  # ~1 min: the path, not the numbers
    .venv/bin/python bench/search/run.py --only optuna --smoke    # the Optuna side alone

Needs BUILD/examples/mnist/mnist (--build-dir, default build) for the ctrial
systems and `bash tools/bench-setup.sh` (optuna in .venv) for the Optuna
one. Nothing is built here.

Systems (--only picks some):

  ctrial   mnist --config digits_mlp_random.yaml (searcher random, 16 trials,
           max_length 64 epochs, a validation every epoch): all trials in one
           process, one after another
  optuna   optuna_search.py: optuna.create_study(sampler=RandomSampler(seed))
           and study.optimize(objective, n_trials=16, n_jobs=1) in one
           Python process; the objective trains the same MLP (same model,
           Adam, data, batch, epochs, validation every epoch) in a plain
           PyTorch loop and returns the last validation accuracy
  asha     mnist --config digits_mlp_asha.yaml (searcher adaptive_asha, the
           same space, max_trials and max_length)

Every system runs once per round as its own process (its wall time is the
process's, start-up included: loading libtorch, importing torch and
optuna), --rounds rounds, the systems' order rotating each round. Round r
uses seed r on every side: ctrial's experiment_seed (which seeds its
sampler and its trials' seeds) and Optuna's RandomSampler(seed=r) (with
trial seeds drawn from r: optuna_search.py). The two samplers draw
different points from the same distributions, so best accuracies are
compared over rounds, "within noise", not run for run.

Cores: by default every process gets --threads intra-op threads (1) and
the sides run one process each (OMP_NUM_THREADS set to match).
--two-cores gives every side this machine's two cores: ctrial as one
process with --threads 2, or with --ctrial-mpi as `mpirun -np 2` with
resources.slots_per_trial 1 (two trials at once, one per rank); Optuna as
two worker processes of one thread each sharing the study through an
Optuna JournalStorage file (--optuna-parallel processes, the default; or
`threads`: one process with study.optimize(n_jobs=2), whose Python threads
share the GIL).

Best accuracy, the same on both sides: each trial's last validation
accuracy (what Determined's searchers rank a trial by: the validation at
the end of its training), the maximum over the trials. The best over every
validation of every trial ("any epoch") is reported beside it; ctrial's own
figure (experiment.jsonl's experiment_completed best_metric) is checked
against the first.

Core-seconds: wall seconds x intra-op threads x processes (the cores the
search held); the CPU seconds the processes used (os.wait4) are in the JSON.

--ctrial-single: a plumbing check for before ctrial's search has landed:
ctrial runs the config with searcher single and the space's centre as its
hyperparameters (one trial), so launching, timing and reading metrics.jsonl
are exercised; its numbers compare nothing.

See bench/search/README.md.
"""
import argparse
import datetime
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import hostinfo  # noqa: E402  (bench/hostinfo.py)

SYSTEMS = ["ctrial", "optuna", "asha"]
LABELS = {"ctrial": "ctrial random", "optuna": "Optuna RandomSampler + PyTorch loop", "asha": "ctrial adaptive_asha"}
CONFIGS = {"ctrial": "digits_mlp_random.yaml", "asha": "digits_mlp_asha.yaml"}
METRIC = "validation_accuracy"
N_VAL = 297  # validation digits: one image is 1/297 of accuracy
SMOKE_EPOCHS = 4


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- running processes ------------------------------------------------------------------


def run_processes(cmds, env, timeout, logdir, name):
    """Start every command of cmds at once (from the repository root), wait
    for all. Returns {"rc": first non-zero exit or 0 ("timeout" if killed),
    "seconds": wall from the first start to the last exit, "cpu_s": user +
    system CPU of the processes (os.wait4), "out": [stdout of each]}; each
    stdout and stderr is kept under logdir; "why": the failing process's
    error line."""
    procs, files = [], []
    t0 = time.monotonic()
    for k, cmd in enumerate(cmds):
        fo = open(os.path.join(logdir, f"{name}.{k}.out"), "w+")
        fe = open(os.path.join(logdir, f"{name}.{k}.err"), "w+")
        files.append((fo, fe))
        procs.append(subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True, cwd=ROOT, env=env))
    killed = []

    def kill_all():
        killed.append(1)
        for p in procs:
            p.kill()

    timer = threading.Timer(timeout, kill_all)
    timer.start()
    rcs, cpu = [], 0.0
    try:
        for p in procs:
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            rcs.append(p.returncode)
            cpu += ru.ru_utime + ru.ru_stime
    except BaseException:  # Ctrl-C: leave no training process behind
        for p in procs:
            if p.returncode is None:
                p.kill()
                os.waitpid(p.pid, 0)
        raise
    finally:
        timer.cancel()
    seconds = time.monotonic() - t0
    outs, why = [], ""
    for (fo, fe), cmd, rc in zip(files, cmds, rcs):
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
        fo.close()
        fe.close()
        outs.append(out)
        if rc != 0 or killed:
            why = why or error_line(err + "\n" + out)
            log(f"  $ {' '.join(cmd)}\n  exit {rc}{' (killed: --run-timeout)' if killed else ''}\n"
                f"{out[-1500:]}{err[-1500:]}")
    rc = "timeout" if killed else next((r for r in rcs if r != 0), 0)
    return {"rc": rc, "seconds": seconds, "cpu_s": cpu, "out": outs, "why": why}


def error_line(text):
    """The line that says why a process failed: ctrial's last "ctrial: ..."
    line or Python's exception, else the last line (mpirun adds its own)."""
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    for l in reversed(lines):
        if l.startswith("ctrial:") or l.startswith("SystemExit") or "Error" in l.split(":")[0]:
            return l[:300]
    return lines[-1][:300] if lines else ""


# ---- ctrial ------------------------------------------------------------------------------


def centre(spec):
    """The middle of a searched hyperparameter (--ctrial-single)."""
    if not isinstance(spec, dict) or "type" not in spec:
        return spec
    kind = spec["type"]
    if kind == "const":
        return spec["val"]
    if kind == "int":
        return (int(spec["minval"]) + int(spec["maxval"])) // 2
    if kind == "double":
        return (float(spec["minval"]) + float(spec["maxval"])) / 2
    if kind == "log":
        return float(spec.get("base", 10)) ** ((float(spec["minval"]) + float(spec["maxval"])) / 2)
    if kind == "categorical":
        return spec["vals"][0]
    raise SystemExit(f"run.py: hyperparameter type {kind!r} not handled")


def ctrial_config(a, system, seed, work):
    """The round's config: the system's YAML with the round's experiment
    seed, this run's max_trials and max_length, slots_per_trial 1 under
    --ctrial-mpi, or searcher single (--ctrial-single). Written as YAML
    beside the run's outputs; its path."""
    with open(os.path.join(HERE, CONFIGS[system])) as f:
        cfg = yaml.safe_load(f)
    cfg.setdefault("reproducibility", {})["experiment_seed"] = seed
    s = cfg["searcher"]
    s["max_trials"] = a.max_trials
    s["max_length"] = {"epochs": a.epochs}
    if a.ctrial_mpi:
        cfg["resources"] = {"slots_per_trial": 1}
    if a.ctrial_single:
        cfg["searcher"] = {"name": "single", "metric": s["metric"], "smaller_is_better": s["smaller_is_better"],
                           "max_length": s["max_length"]}
        cfg["hyperparameters"] = {k: centre(v) for k, v in cfg["hyperparameters"].items()}
    path = os.path.join(work, f"{system}_seed{seed}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    return path


def read_metrics(path):
    """A trial's metrics.jsonl: the searcher metric of each validation line
    in order of batches, and the epochs the trial trained (its lines' largest
    "epochs")."""
    rows, epochs = [], 0.0
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            epochs = max(epochs, r.get("epochs", 0.0))
            if r.get("group") == "validation" and METRIC in r.get("metrics", {}):
                rows.append((r["batches"], r["metrics"][METRIC]))
    return [v for _, v in sorted(rows)], epochs


def read_ctrial(out_dir):
    """What a ctrial search left in out_dir: every trial's searcher
    validations in order (experiment.jsonl's trial_validated lines: the
    validations that end a trial's training or a rung; else, or where a
    trial has none there, the validation lines of trials/<id>/metrics.jsonl,
    or of out_dir/metrics.jsonl as trial 1 for searcher single), every
    validation of each trial (its metrics.jsonl), the epochs it trained, the
    events counted and experiment_completed's line. Returns a dict with
    best_final (the max over trials of each one's last searcher
    validation), best_any (the max over every validation), best_reported
    (experiment_completed's best_metric) and epochs_trained."""
    trials, events, completed, notes = {}, {}, None, []
    exp = os.path.join(out_dir, "experiment.jsonl")
    first_time, unit = None, None
    if os.path.exists(exp):
        with open(exp) as f:
            for line in f:
                if not line.strip():
                    continue
                ev = json.loads(line)
                kind = ev.get("event", "?")
                events[kind] = events.get(kind, 0) + 1
                if first_time is None and "time" in ev:
                    first_time = ev["time"]
                if kind == "experiment_started":
                    unit = ev.get("unit")
                t = ev.get("trial")
                if t is not None:
                    trials.setdefault(str(t), {"vals": [], "hparams": None, "length": 0})
                    if isinstance(ev.get("length"), (int, float)):
                        trials[str(t)]["length"] = max(trials[str(t)]["length"], ev["length"])
                if kind == "trial_created":
                    trials[str(t)]["hparams"] = ev.get("hparams")
                elif kind == "trial_validated":
                    v = ev.get("metric", (ev.get("metrics") or {}).get(METRIC))
                    if v is not None:
                        trials[str(t)]["vals"].append(v)
                elif kind == "experiment_completed":
                    completed = ev
        source = "experiment.jsonl"
    else:
        source = "metrics.jsonl (no experiment.jsonl)"
        notes.append("no experiment.jsonl: read the trials' metrics.jsonl")
    # Per-trial metrics.jsonl: every validation of the trial.
    files = {os.path.basename(os.path.dirname(p)): p
             for p in glob.glob(os.path.join(out_dir, "trials", "*", "metrics.jsonl"))}
    if not files and not trials and os.path.exists(os.path.join(out_dir, "metrics.jsonl")):
        files = {"1": os.path.join(out_dir, "metrics.jsonl")}
    for tid, path in files.items():
        vals, epochs = read_metrics(path)
        t = trials.setdefault(tid, {"vals": [], "hparams": None, "length": 0})
        if not t["vals"]:
            t["vals"] = vals
            if vals and source == "experiment.jsonl":
                notes.append(f"trial {tid}: no trial_validated line, read its metrics.jsonl")
        t["file_vals"], t["epochs"] = vals, epochs
    for t in trials.values():
        if "epochs" not in t:  # no metrics.jsonl: the searcher's length, or one validation an epoch
            t["epochs"] = t["length"] if unit == "epochs" and t["length"] else len(t["vals"])
    finals = [t["vals"][-1] for t in trials.values() if t["vals"]]
    every = [v for t in trials.values() for v in t["vals"] + t.get("file_vals", [])]
    if not finals:
        return {"error": f"no validation found in {out_dir} ({source})", "events": events}
    res = {"source": source, "events": events, "trials": trials, "notes": notes,
           "best_final": max(finals), "best_any": max(every),
           "trials_validated": len(finals),
           "epochs_trained": sum(t["epochs"] for t in trials.values()),
           "best_reported": completed.get("best_metric") if completed else None,
           "best_trial": completed.get("best_trial") if completed else None}
    if completed and first_time is not None and "time" in completed:
        res["search_s"] = completed["time"] - first_time
    if completed is None and source == "experiment.jsonl":
        notes.append("no experiment_completed line")
    elif completed is not None and res["best_reported"] is not None and \
            abs(res["best_reported"] - res["best_final"]) > 1e-9:
        notes.append(f"experiment_completed best_metric {res['best_reported']:.6f} differs from the max over "
                     f"trials of their last validation {res['best_final']:.6f}")
    return res


def run_ctrial(a, system, seed, work, env):
    name = f"{system}_seed{seed}"
    out_dir = os.path.join(work, name)
    cmd = [a.binary, "--config", ctrial_config(a, system, seed, work), "--output", out_dir, "--overwrite", "--quiet"]
    if a.ctrial_mpi:
        cmd = ["mpirun", "--allow-run-as-root", "--bind-to", "none", "-np", str(a.cores)] + cmd + ["--threads", "1"]
        threads, procs = 1, a.cores
    else:
        threads, procs = a.ctrial_threads, 1
        cmd += ["--threads", str(threads)]
    cmd += a.ctrial_arg
    r = run_processes([cmd], dict(env, OMP_NUM_THREADS=str(threads)), a.run_timeout, work, name)
    res = {"seconds": r["seconds"], "cpu_s": r["cpu_s"], "threads": threads, "processes": procs,
           "core_s": r["seconds"] * threads * procs, "command": " ".join(cmd)}
    if r["rc"] != 0:
        res["error"] = f"exit {r['rc']}: {r['why']}"
        return res
    found = read_ctrial(out_dir)
    res.update(found)
    if not a.keep:
        shutil.rmtree(out_dir, ignore_errors=True)
    return res


# ---- Optuna ------------------------------------------------------------------------------


def run_optuna(a, seed, work, env):
    with open(os.path.join(HERE, CONFIGS["ctrial"])) as f:
        space = yaml.safe_load(f)["hyperparameters"]
    base = [a.python, os.path.join(HERE, "optuna_search.py"), "--space", json.dumps(space),
            "--trials", str(a.max_trials), "--epochs", str(a.epochs), "--seed", str(seed)]
    name = f"optuna_seed{seed}"
    if a.two_cores and a.optuna_parallel == "processes":
        journal = os.path.join(work, f"{name}.journal")
        if os.path.exists(journal):
            os.remove(journal)
        cmds = [base + ["--threads", "1", "--journal", journal, "--study", name, "--worker", str(k),
                        "--workers", str(a.cores)] for k in range(a.cores)]
        threads, procs = 1, a.cores
    elif a.two_cores:
        cmds = [base + ["--threads", "1", "--n-jobs", str(a.cores)]]
        threads, procs = a.cores, 1  # n_jobs threads, each running its ops on one thread
    else:
        cmds = [base + ["--threads", str(a.threads)]]
        threads, procs = a.threads, 1
    # n_jobs threads: each runs its torch ops on one intra-op thread
    omp = 1 if a.two_cores else threads
    r = run_processes(cmds, dict(env, OMP_NUM_THREADS=str(omp)), a.run_timeout, work, name)
    res = {"seconds": r["seconds"], "cpu_s": r["cpu_s"], "threads": threads, "processes": procs,
           "core_s": r["seconds"] * threads * procs, "command": " ".join(cmds[0])}
    if r["rc"] != 0:
        res["error"] = f"exit {r['rc']}: {r['why']}"
        return res
    workers = [json.loads(out.strip().splitlines()[-1]) for out in r["out"]]
    trials = sorted((t for w in workers for t in w["trials"]), key=lambda t: t["number"])
    if len(trials) != a.max_trials:
        res["error"] = f"{len(trials)} trials trained, expected {a.max_trials}"
        return res
    res.update({"trials": trials, "best_final": max(t["value"] for t in trials),
                "best_any": max(t["max_accuracy"] for t in trials), "trials_validated": len(trials),
                "epochs_trained": len(trials) * a.epochs,
                "import_s": max(w["import_s"] for w in workers), "optimize_s": max(w["optimize_s"] for w in workers),
                "versions": {"optuna": workers[0]["optuna"], "torch": workers[0]["torch"]}})
    return res


def run_one(a, system, seed, work, env):
    if system == "optuna":
        return run_optuna(a, seed, work, env)
    return run_ctrial(a, system, seed, work, env)


# ---- the tables ----------------------------------------------------------------------------


def summarize(runs):
    good = [r for r in runs if "error" not in r]
    if not good:
        return None

    def stats(key):
        xs = [r[key] for r in good]
        return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}

    s = {k: stats(k) for k in ("seconds", "core_s", "cpu_s", "best_final", "best_any", "epochs_trained",
                               "trials_validated")}
    per = [r["best_final"] / r["core_s"] for r in good]
    s["acc_per_core_s"] = {"median": statistics.median(per), "min": min(per), "max": max(per)}
    s["runs"], s["failed"] = len(good), len(runs) - len(good)
    s["threads"], s["processes"] = good[0]["threads"], good[0]["processes"]
    return s


def spread(st, digits):
    f = f"{{:.{digits}f}}"
    text = f.format(st["median"])
    if st["min"] != st["max"]:
        text += f" ({f.format(st['min'])}–{f.format(st['max'])})"
    return text


def tables(a, summary, results):
    rows = ["| system | processes × threads | wall s | ÷ ctrial random | best val acc (last of trial) | "
            "best val acc (any epoch) | epochs trained | core-s | best acc per core-s | runs |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    ref = summary.get("ctrial")
    notes = []
    for system in a.systems:
        s = summary.get(system)
        if s is None:
            errs = sorted({r.get("error", "") for r in results[system]})
            rows.append(f"| {LABELS[system]} | — | failed | — | — | — | — | — | — | "
                        f"0 of {len(results[system])} |")
            notes.append(f"{system}: " + "; ".join(errs))
            continue
        ratio = f"{s['seconds']['median'] / ref['seconds']['median']:.2f}×" if ref else "—"
        runs = f"{s['runs']}" + (f" ({s['failed']} failed)" if s["failed"] else "")
        if s["failed"]:
            notes.append(f"{system}: " + "; ".join(sorted({r['error'] for r in results[system] if 'error' in r})))
        rows.append(f"| {LABELS[system]} | {s['processes']} × {s['threads']} | {spread(s['seconds'], 1)} | {ratio} | "
                    f"{spread(s['best_final'], 4)} | {spread(s['best_any'], 4)} | "
                    f"{spread(s['epochs_trained'], 0)} | {spread(s['core_s'], 1)} | "
                    f"{spread(s['acc_per_core_s'], 5)} | {runs} |")
    for system in a.systems:
        for r in results[system]:
            for n in r.get("notes", []):
                notes.append(f"{system} seed {r['seed']}: {n}")
    verdict = []
    c, o, h = summary.get("ctrial"), summary.get("optuna"), summary.get("asha")
    if c and o:
        ratio = o["seconds"]["median"] / c["seconds"]["median"]
        verdict.append(f"- Wall time, Optuna ÷ ctrial random search (median over median): **{ratio:.2f}×** "
                       f"(goal ≥ 2×: {'met' if ratio >= 2 else 'NOT met'}).")
        diff = c["best_final"]["median"] - o["best_final"]["median"]
        noise = max(c["best_final"]["max"] - c["best_final"]["min"], o["best_final"]["max"] - o["best_final"]["min"],
                    2 / N_VAL)
        verdict.append(f"- Best validation accuracy (each trial's last validation, max over trials; median over "
                       f"rounds): ctrial {c['best_final']['median']:.4f}, Optuna {o['best_final']['median']:.4f}, "
                       f"difference {diff:+.4f}; noise (the larger spread over rounds of either side, at least "
                       f"2 of the {N_VAL} validation images) {noise:.4f}: "
                       f"**{'within noise' if abs(diff) <= noise else 'NOT within noise'}**"
                       + (f" ({c['runs']} and {o['runs']} round(s): too few to know the spread; 3 or more "
                          f"make this meaningful)." if min(c["runs"], o["runs"]) < 3 else "."))
    if c and h:
        pr = h["acc_per_core_s"]["median"] / c["acc_per_core_s"]["median"]
        verdict.append(f"- ASHA against random search, the same max_trials and max_length: best accuracy "
                       f"{h['best_final']['median']:.4f} against {c['best_final']['median']:.4f} "
                       f"({h['best_final']['median'] - c['best_final']['median']:+.4f}), in "
                       f"{h['core_s']['median']:.1f} core-s against {c['core_s']['median']:.1f} "
                       f"({h['epochs_trained']['median']:.0f} epochs trained against "
                       f"{c['epochs_trained']['median']:.0f}); best accuracy per core-second "
                       f"{h['acc_per_core_s']['median']:.5f} against {c['acc_per_core_s']['median']:.5f}: "
                       f"**{pr:.2f}×**.")
    return rows, verdict, notes


# ---- main --------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=None, help="rounds, every system once each, interleaved (3; smoke 1)")
    ap.add_argument("--only", default=",".join(SYSTEMS), help="comma-separated systems: " + ", ".join(SYSTEMS))
    ap.add_argument("--max-trials", type=int, default=16, help="trials per search (16)")
    ap.add_argument("--epochs", type=int, default=None,
                    help=f"max_length in epochs: each random trial's budget, ASHA's longest (64; smoke {SMOKE_EPOCHS})")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per process without --two-cores (1)")
    ap.add_argument("--two-cores", action="store_true", help="every side gets two cores: ctrial --threads 2 (or "
                    "--ctrial-mpi), Optuna two processes (or --optuna-parallel threads)")
    ap.add_argument("--ctrial-mpi", action="store_true", help="with --two-cores: ctrial under mpirun -np 2 with "
                    "resources.slots_per_trial 1 (two trials at once)")
    ap.add_argument("--optuna-parallel", choices=["processes", "threads"], default="processes",
                    help="with --two-cores: two worker processes sharing a JournalStorage file (default), or "
                         "study.optimize(n_jobs=2) in one process")
    ap.add_argument("--ctrial-single", action="store_true", help="plumbing check before ctrial's search lands: "
                    "ctrial runs searcher single at the space's centre (one trial); compares nothing")
    ap.add_argument("--ctrial-arg", action="append", default=[], metavar="FLAG",
                    help="an extra flag for the ctrial runs, repeatable (e.g. --ctrial-arg=--no-tensorboard)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"), help="the build with examples/mnist/mnist")
    ap.add_argument("--python", default=sys.executable, help="python with torch and optuna (this one)")
    ap.add_argument("--run-timeout", type=float, default=1800, help="seconds one search may run (1800)")
    ap.add_argument("--smoke", action="store_true",
                    help=f"1 round, {SMOKE_EPOCHS} epochs a trial: checks the path in about a minute")
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers here")
    ap.add_argument("--keep", metavar="DIR", help="keep the configs, outputs and logs under DIR")
    a = ap.parse_args()
    a.rounds = a.rounds or (1 if a.smoke else 3)
    a.epochs = a.epochs or (SMOKE_EPOCHS if a.smoke else 64)
    a.systems = [s for s in a.only.split(",") if s]
    for s in a.systems:
        if s not in SYSTEMS:
            raise SystemExit(f"run.py: unknown system {s} (systems: {', '.join(SYSTEMS)})")
    if a.ctrial_mpi and not a.two_cores:
        raise SystemExit("run.py: --ctrial-mpi goes with --two-cores")
    if a.threads < 1 or a.epochs < 1 or a.max_trials < 1 or a.rounds < 1:
        raise SystemExit("run.py: --threads, --epochs, --max-trials and --rounds must be >= 1")
    a.cores = 2 if a.two_cores else a.threads
    a.ctrial_threads = 2 if a.two_cores else a.threads
    a.binary = os.path.join(os.path.abspath(a.build_dir), "examples", "mnist", "mnist")
    if any(s != "optuna" for s in a.systems) and not os.path.isfile(a.binary):
        raise SystemExit(f"run.py: {a.binary} not found: build it first (ninja -C build mnist)")
    if a.ctrial_mpi and not shutil.which("mpirun"):
        raise SystemExit("run.py: --ctrial-mpi: no mpirun on PATH")
    if "optuna" in a.systems:
        probe = subprocess.run([a.python, "-c", "import optuna, torch"], capture_output=True, text=True)
        if probe.returncode != 0:
            raise SystemExit(f"run.py: {a.python} cannot import optuna and torch (bash tools/bench-setup.sh "
                             f"installs optuna):\n{probe.stderr[-800:]}")

    # Each process's intra-op threads are set by its flag (--threads,
    # torch.set_num_threads) and OMP_NUM_THREADS alike (run_ctrial, run_optuna).
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if a.keep:
        work = os.path.abspath(a.keep)
        os.makedirs(work, exist_ok=True)
    else:
        work = tempfile.mkdtemp(prefix="bench_search_")
    ctrial_version = ""
    if any(s != "optuna" for s in a.systems):
        v = subprocess.run([a.binary, "--version"], capture_output=True, text=True, env=env)
        ctrial_version = (v.stdout or v.stderr).strip().splitlines()[0] if (v.stdout or v.stderr).strip() else ""

    start = time.monotonic()
    load0 = hostinfo.load()
    results = {s: [] for s in a.systems}
    total, n = a.rounds * len(a.systems), 0
    for rnd in range(a.rounds):
        order = a.systems[rnd % len(a.systems):] + a.systems[:rnd % len(a.systems)]
        for system in order:
            n += 1
            r = run_one(a, system, rnd, work, env)
            r["seed"] = rnd
            results[system].append(r)
            what = (f"{r['seconds']:.1f} s wall, {r['cpu_s']:.1f} s CPU, best val acc {r['best_final']:.4f} "
                    f"(any epoch {r['best_any']:.4f}), {r['trials_validated']} trials, {r['epochs_trained']:.0f} epochs"
                    if "error" not in r else r["error"])
            log(f"[{n}/{total}, round {rnd + 1}/{a.rounds}, {time.monotonic() - start:5.0f} s] {system}: {what}")
    load1 = hostinfo.load()
    summary = {s: summarize(results[s]) for s in a.systems}
    rows, verdict, notes = tables(a, summary, results)

    cpus, model = hostinfo.machine()
    versions = next((r["versions"] for r in results.get("optuna", []) if "versions" in r), {})
    when = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    command = " ".join([os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)] + sys.argv[1:])
    if a.two_cores:
        ctrial_how = ("mpirun -np 2, slots_per_trial 1, 1 thread per rank" if a.ctrial_mpi
                      else "one process, --threads 2")
        optuna_how = ("2 worker processes (1 thread each) sharing a JournalStorage file"
                      if a.optuna_parallel == "processes" else "one process, study.optimize(n_jobs=2), 1 intra-op thread")
        cores = f"two cores: ctrial {ctrial_how}; Optuna {optuna_how}"
    else:
        cores = f"one process per side, {a.threads} intra-op thread(s)"
    text = "\n".join([
        "# bench/search — ctrial's hyperparameter search beside Optuna" + (" (smoke run)" if a.smoke else ""),
        "",
        f"Measured {when} on {model} ({cpus} CPUs); {cores}; {a.max_trials} trials, max_length {a.epochs} epochs "
        f"(47 batches of 32 each), validation every epoch; {a.rounds} round(s), seeds 0..{a.rounds - 1}; "
        f"{ctrial_version}{', ' if ctrial_version and versions else ''}"
        + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + ".",
        f"Load average {load0} at the start, {load1} at the end; {time.monotonic() - start:.0f} s in all.",
        f"Command: `{command}`" + (" — ctrial ran searcher single (--ctrial-single): a plumbing check, "
                                    "its numbers compare nothing" if a.ctrial_single else ""),
        "",
        "Wall s: the search process's (processes') wall time, start-up included; median (min–max) over rounds. "
        "÷ ctrial random: median over median. Best val acc: each trial's last validation accuracy, max over the "
        "trials (any epoch: max over every validation). Core-s: wall × threads × processes. Best acc per core-s: "
        "per round, then the median.",
        "",
    ] + rows + [""] + verdict + ([""] + ["Notes:"] + [f"- {x}" for x in notes] if notes else []))
    print(text)
    if a.json:
        raw = {"args": {k: v for k, v in vars(a).items()}, "machine": {"cpus": cpus, "model": model},
               "ctrial_version": ctrial_version, "versions": versions, "load": [load0, load1],
               "summary": summary, "results": results, "table": text}
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(raw, f, indent=1, default=str)
        log(f"wrote {a.json}")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    failed = any(s is None or s["failed"] for s in summary.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
