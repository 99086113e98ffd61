#!/usr/bin/env python3
"""ctrial against PyTorch eager on a GPU: the digits CNN, a small
character-level transformer (two sizes, and exported from PyTorch), its
LSTM, and torchvision's resnet18, in fp32, bf16 autocast and with CUDA
graphs, steps/s side by side in one run, as ratios.

    python3 bench/gpu/run.py --bin-dir BIN [--lib-dir LIB] [--device cuda]
    .venv/bin/python bench/gpu/run.py --bin-dir build/examples --smoke

BIN holds the example programs (BIN/mnist/mnist, BIN/charlm/charlm and
BIN/resnet/resnet as a build tree lays them out, or BIN/mnist, ...); LIB (repeatable)
holds the shared libraries they need that the machine lacks (libctrial.so.0,
libjansson.so.4, ...). The libraries of the torch that runs this script
(torch/lib and the nvidia/*/lib folders beside it) are added to
LD_LIBRARY_PATH after them. Nothing is built here: the machine needs
python3 with torch and the binaries, not cmake.

For each workload and mode it runs (1) the example program through ct_main
with --device cuda, a derived config (its own JSON with the batch size, a
fixed length, a report every WINDOW batches, no validation or checkpoint
before the end) and (2) bench/gpu/torch_eager.py, the same model, data,
hyperparameters, seed and steps in plain PyTorch. Steps/s come from timed
windows of WINDOW steps: for ctrial the training lines of metrics.jsonl
(each line's timings.wall_s is the wall time since the previous report, and
a report waits for the device to read the metrics), for PyTorch the same
window around the same metric read. The first window of each process
(start-up, autotuning, graph capture) is dropped, so process start, model
building and the final validation and checkpoint are not timed.

See bench/gpu/README.md for how to read the table.
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Final losses: the last timed window's mean training loss of both sides
# must agree within this relative tolerance. Both sides start from the same
# weights and see the same batches (with numpy), so on the CPU they agree
# to float rounding; on a GPU atomics and kernel choices differ in the last
# bits and the difference grows over the steps, and in bf16 / with the
# graph's warm-up on repeated batches more. 10% is far below what a wrong
# run shows (a model that does not train stays at ln(classes): 2.3 for
# digits, 4.2 for charlm; 30 steps on the CPU bring them to 0.70 and 2.9).
LOSS_REL_TOL = 0.10

WORKLOADS = {
    # name: the example, its config, the data, hyperparameter overrides, the
    # window on a GPU, and the smoke run's sizes.
    "digits": dict(
        binary="mnist", config="examples/mnist/mnist_cnn.json", data="digits", kind="overhead",
        title="digits CNN (examples/mnist mnist_cnn.json, batch 128, no StepLR)",
        hparams={"global_batch_size": 128, "lr_gamma": 1.0}, window=400, smoke={}),
    "charlm": dict(
        binary="charlm", config="examples/charlm/charlm.json", data="tinyshakespeare/input.txt.gz",
        kind="overhead", title="charlm (2 layers, n_embd 128, block 64, batch 16)",
        hparams={"global_batch_size": 16, "sample_tokens": 0}, window=200, smoke={}),
    "charlm_big": dict(
        binary="charlm", config="examples/charlm/charlm.json", data="tinyshakespeare/input.txt.gz",
        kind="compute", title="charlm big (2 layers, n_embd 512, 8 heads, block 256, batch 64)",
        hparams={"global_batch_size": 64, "n_embd": 512, "n_head": 8, "block_size": 256, "sample_tokens": 0},
        window=40,
        # On the CPU the big model takes seconds per step: the smoke run
        # checks the path with a smaller one.
        smoke={"global_batch_size": 8, "n_embd": 192, "n_head": 4, "block_size": 128}),
    # charlm's GPT as PyTorch writes it (torch_eager.py), exported by
    # tools/export_model.py at the start of the run and trained from its
    # .pt2 (ct_nn_load_exported): the same model and steps as "charlm".
    "charlm_exported": dict(
        binary="charlm", config="examples/charlm/charlm.json", data="tinyshakespeare/input.txt.gz",
        kind="overhead", title="charlm exported from PyTorch (the same GPT as charlm, from a .pt2 archive)",
        hparams={"global_batch_size": 16, "sample_tokens": 0, "model": "exported"}, window=200, smoke={},
        ctrial_only=("model", "model_file"), export=True),
    # torchvision's resnet18 on the digits upsampled to 32x32 (examples/resnet;
    # torch_eager.py's "resnet": torchvision's own model): a convolution-bound
    # step, SGD with momentum (fused with --hparam fused=true).
    "resnet": dict(
        binary="resnet", config="examples/resnet/resnet.json", data="digits", kind="compute", torch="resnet",
        title="resnet18 (examples/resnet, 32x32 digits, batch 128)",
        hparams={"global_batch_size": 128}, window=50,
        smoke={"global_batch_size": 16}),
    # charlm's LSTM (charlm_lstm.json; torch_eager.py's RNNModel): cuDNN's
    # fused LSTM on a GPU.
    "lstm": dict(
        binary="charlm", config="examples/charlm/charlm_lstm.json", data="tinyshakespeare/input.txt.gz",
        kind="overhead", title="charlm LSTM (charlm_lstm.json: 2 layers, hidden 128, block 64, batch 32)",
        hparams={"global_batch_size": 32, "sample_tokens": 0}, window=200, smoke={},
        # The probe runs fp16 on the CPU, where oneDNN has no fp16 LSTM:
        # the binary's hyperparameters are probed on its GPT.
        probe_hparams={"model": "gpt"}),
}

# mode: what ctrial adds, what the PyTorch side runs, and the goal.
MODES = {
    "fp32": dict(ctrial_hparams={}, ctrial_flags=[], amp="none", fused="auto", torch_graphs=False),
    "bf16": dict(ctrial_hparams={"amp": "bf16"}, ctrial_flags=[], amp="bf16", fused="auto", torch_graphs=False),
    # CUDA graphs need a fused Adam/AdamW on ctrial's side; the eager
    # baseline uses the same fused optimizer, and PyTorch's own
    # whole-network capture is measured beside it.
    "graphs": dict(ctrial_hparams={"fused": True}, ctrial_flags=["--cuda-graphs"], amp="none", fused="1",
                   torch_graphs=True),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- environment ------------------------------------------------------------------


def find_binary(bin_dir, name):
    for p in (os.path.join(bin_dir, name, name), os.path.join(bin_dir, name)):
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p)
    raise SystemExit(f"run.py: no {name} program in {bin_dir} (looked for {name}/{name} and {name})")


def library_env(lib_dirs):
    """LD_LIBRARY_PATH: the given folders, then this torch's libraries."""
    import torch
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    site = os.path.dirname(os.path.dirname(torch_lib))
    nvidia = sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
    paths = [os.path.abspath(d) for d in lib_dirs] + [torch_lib] + nvidia
    old = os.environ.get("LD_LIBRARY_PATH")
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(paths + ([old] if old else [])), PYTHONUNBUFFERED="1")
    return env, torch


def machine(torch, device):
    if device.startswith("cuda") and torch.cuda.is_available():
        name = torch.cuda.get_device_name(torch.device(device))
    else:
        name = "CPU"
        try:
            for line in open("/proc/cpuinfo"):
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        name += f" ({os.cpu_count()} cores)"
    return f"{name}; torch {torch.__version__}" + (f", CUDA {torch.version.cuda}" if torch.version.cuda else "")


# ---- one run of each side -------------------------------------------------------------


class Plan:
    """Sizes and places shared by every run."""

    def __init__(self, a, env, work):
        self.a, self.env, self.work = a, env, work
        self.count = 0

    def steps(self, wl):
        window = self.a.window or (5 if self.a.smoke else WORKLOADS[wl]["window"])
        return window, self.a.windows, self.a.warmup_windows

    def hparams(self, wl, small=False):
        w = WORKLOADS[wl]
        hp = dict(w["hparams"])
        if self.a.smoke or small:
            hp.update(w["smoke"])
        return hp

    def data(self, wl):
        return os.path.join(self.a.data_dir, WORKLOADS[wl]["data"])

    def config(self, wl, name, small=False):
        """The example's config with the benchmark's sizes, written to the work dir."""
        w = WORKLOADS[wl]
        window, windows, warmup = self.steps(wl)
        with open(os.path.join(ROOT, w["config"])) as f:
            cfg = json.load(f)
        cfg["hyperparameters"].update(self.hparams(wl, small))
        cfg["searcher"]["max_length"] = {"batches": window * (warmup + windows)}
        cfg["scheduling_unit"] = window
        cfg.pop("min_validation_period", None)   # validation and a checkpoint only at the end
        cfg.pop("min_checkpoint_period", None)
        cfg["checkpoint_policy"] = "none"
        data = self.data(wl)
        # The example's own key: a folder ("dir": the digits) or a file ("path").
        cfg["data"] = {"dir" if "dir" in cfg["data"] else "path": data, "workers": 0}
        path = os.path.join(self.work, name + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)
        return path

    def run(self, cmd, what):
        self.count += 1
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=self.env,
                               timeout=self.a.run_timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = "timeout", e.stdout or "", f"killed after {self.a.run_timeout} s"
            out = out.decode() if isinstance(out, bytes) else out
        secs = time.monotonic() - t0
        if rc != 0:
            log(f"  $ {' '.join(cmd)}\n{(out or '')[-1500:]}{(err or '')[-1500:]}")
        return rc, out, err, secs


def last_line(text):
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


def run_ctrial(plan, wl, mode, binary):
    a = plan.a
    m = MODES[mode]
    name = f"ctrial_{wl}_{mode}_{plan.count}"
    out_dir = os.path.join(plan.work, name)
    cmd = [binary, "--config", plan.config(wl, name), "--output", out_dir, "--device", a.device, "--quiet"]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    cmd += m["ctrial_flags"]
    if a.deterministic:
        cmd.append("--deterministic")
    for k, v in m["ctrial_hparams"].items():
        cmd += ["--hparam", f"{k}={json.dumps(v) if not isinstance(v, str) else v}"]
    rc, out, err, secs = plan.run(cmd, name)
    if rc != 0:
        return {"error": f"exit {rc}: {last_line(err) or last_line(out)}", "seconds": secs}
    window, windows, warmup = plan.steps(wl)
    lines = []
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r["group"] == "training":
                lines.append(r)
    lines.sort(key=lambda r: r["batches"])
    rates, prev = [], 0
    for i, r in enumerate(lines):
        steps = r["batches"] - prev
        prev = r["batches"]
        t = r["timings"]
        wall = t["wall_s"] - t.get("validation_s", 0) - t.get("checkpoint_s", 0)
        if i >= warmup:
            rates.append(steps / wall)
    shutil.rmtree(out_dir, ignore_errors=True)
    if len(rates) != windows:
        return {"error": f"expected {windows} timed windows, metrics.jsonl gave {len(rates)}", "seconds": secs}
    return {"rates": rates, "final_loss": lines[-1]["metrics"]["loss"],
            "losses": [r["metrics"]["loss"] for r in lines], "seconds": secs}


def export_charlm(a, wl, work):
    """torch_eager.py's charlm GPT at the workload's sizes, exported by
    tools/export_model.py; its .pt2 becomes the workload's model_file."""
    w = WORKLOADS[wl]
    with open(os.path.join(ROOT, w["config"])) as f:
        hp = dict(json.load(f)["hyperparameters"], **w["hparams"])
    hp["model"] = "gpt"
    if a.smoke:
        hp.update(w["smoke"])
    path = os.path.join(work, f"{wl}.pt2")
    cmd = [a.python, os.path.join(ROOT, "tools", "export_model.py"), os.path.join(HERE, "torch_eager.py") +
           ":charlm_model", "--args", json.dumps([hp, 65]), "--input", "int64[N,T]", "--seed", "0", "-o", path]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        raise SystemExit(f"run.py: exporting {wl} failed:\n{p.stderr[-2000:]}")
    w["hparams"] = dict(w["hparams"], model_file=path)


def run_torch(plan, wl, mode, graphs):
    a = plan.a
    m = MODES[mode]
    window, windows, warmup = plan.steps(wl)
    hp = {k: v for k, v in plan.hparams(wl).items() if k not in WORKLOADS[wl].get("ctrial_only", ())}
    torch_wl = WORKLOADS[wl].get("torch", "digits" if wl == "digits" else "charlm")
    cmd = [a.python, os.path.join(HERE, "torch_eager.py"), "--workload", torch_wl,
           "--config", os.path.join(ROOT, WORKLOADS[wl]["config"]), "--data", plan.data(wl),
           "--device", a.device, "--amp", m["amp"], "--fused", m["fused"],
           "--window", str(window), "--windows", str(windows), "--warmup-windows", str(warmup)]
    for k, v in hp.items():
        cmd += ["--hparam", f"{k}={json.dumps(v)}"]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    if graphs:
        cmd.append("--graphs")
    if a.deterministic:
        cmd.append("--deterministic")
    rc, out, err, secs = plan.run(cmd, f"torch_{wl}_{mode}")
    if rc != 0:
        return {"error": f"exit {rc}: {last_line(err) or last_line(out)}", "seconds": secs}
    r = json.loads(out.strip().splitlines()[-1])
    return {"rates": r["steps_per_s"], "final_loss": r["final_loss"], "losses": r["losses"], "seconds": secs,
            "numpy_order": r["numpy_order"], "fused": r["fused"]}


# ---- does the example take the hyperparameter? ---------------------------------------


def probe(plan, wl, binary, hparam, check, what):
    """Trains one batch on the CPU with --hparam hparam (--test-mode) and
    checks its effect in the checkpoint: an example that ignores a
    hyperparameter it does not know would otherwise measure fp32 as bf16."""
    import torch
    name = f"probe_{wl}_{hparam.split('=')[0]}"
    out_dir = os.path.join(plan.work, name)
    cfg = plan.config(wl, name, small=True)
    if WORKLOADS[wl]["binary"] == "charlm":   # a short validation split: a few windows
        with open(cfg) as f:
            c = json.load(f)
        c["data"]["train_fraction"] = 0.999
        with open(cfg, "w") as f:
            json.dump(c, f)
    cmd = [binary, "--config", cfg, "--output", out_dir, "--device", "cpu", "--test-mode",
           "--quiet", "--hparam", hparam, "--hparam", "sample_tokens=0"]
    for k, v in WORKLOADS[wl].get("probe_hparams", {}).items():
        cmd += ["--hparam", f"{k}={json.dumps(v)}"]
    rc, out, err, _ = plan.run(cmd, name)
    if rc != 0:
        return f"{os.path.basename(binary)} --hparam {hparam} fails on the CPU: {last_line(err)}"
    ckpts = sorted(glob.glob(os.path.join(out_dir, "checkpoints", "ckpt-*", "state_dict.pth")))
    sd = torch.load(ckpts[-1], weights_only=True) if ckpts else {}
    shutil.rmtree(out_dir, ignore_errors=True)
    return None if check(sd) else f"{os.path.basename(binary)} {what}"


def fused_check(sd):
    opts = sd.get("optimizers_state_dict") or []
    return bool(opts) and all(g.get("fused") for o in opts for g in o["param_groups"])


def amp_check(sd):
    return "scaler_state_dict" in sd   # fp16 AMP checkpoints its GradScaler


# ---- the table -------------------------------------------------------------------------


def stats(rates):
    return statistics.median(rates), min(rates), max(rates)


def fmt_rate(r):
    if r is None:
        return "—"
    if "error" in r:
        return "failed"
    med, lo, hi = stats(r["rates"])
    f = "{:,.1f}" if med < 100 else "{:,.0f}"
    return f"{f.format(med)} ({f.format(lo)}–{f.format(hi)})"


def ratio(a, b):
    if not a or not b or "rates" not in a or "rates" not in b:
        return None
    return statistics.median(a["rates"]) / statistics.median(b["rates"])


def loss_ok(a, b):
    if not a or not b or "final_loss" not in a or "final_loss" not in b:
        return None
    return abs(a["final_loss"] - b["final_loss"]) <= LOSS_REL_TOL * max(abs(b["final_loss"]), 1e-6)


def merge(runs):
    """Pools the windows of several processes of one measurement."""
    good = [r for r in runs if "rates" in r]
    if not good:
        return runs[0] if runs else None
    return {"rates": [x for r in good for x in r["rates"]], "final_loss": statistics.median(r["final_loss"] for r in good),
            "processes": len(good), "failed": len(runs) - len(good)}


def table(plan, results, notes, header):
    rows = ["| workload | mode | ctrial steps/s | PyTorch eager steps/s | ctrial / eager | "
            "PyTorch CUDA graphs steps/s | ctrial / PyTorch graphs | final loss ctrial / eager | goal |",
            "|---|---|---|---|---|---|---|---|---|"]
    for wl in plan.a.workloads:
        for mode in plan.a.modes:
            cell = results.get((wl, mode))
            if cell is None:
                continue
            if "skip" in cell:
                rows.append(f"| {wl} | {mode} | {cell['skip']} | | | | | | |")
                continue
            c, e, g = merge(cell["ctrial"]), merge(cell["eager"]), merge(cell.get("torch_graphs", []))
            r, rg = ratio(c, e), ratio(c, g)
            ok = loss_ok(c, e)
            loss = (f"{c['final_loss']:.4f} / {e['final_loss']:.4f} {'ok' if ok else 'DIFFER'}"
                    if ok is not None else "—")
            goal = ""
            if r is not None and not plan.a.smoke:
                if WORKLOADS[wl]["kind"] == "compute":
                    goal = f"≥ 0.98× eager: {'met' if r >= 0.98 else 'NOT met'}"
                elif mode == "graphs":
                    goal = f"≥ 2× eager: {'met' if r >= 2.0 else 'NOT met'}"
            errs = [x["error"] for x in cell["ctrial"] + cell["eager"] + cell.get("torch_graphs", []) if "error" in x]
            if errs:
                notes.append(f"{wl} {mode}: " + "; ".join(sorted(set(errs))))
            rows.append(f"| {wl} | {mode} | {fmt_rate(c)} | {fmt_rate(e)} | "
                        f"{f'{r:.2f}×' if r is not None else '—'} | {fmt_rate(g) if g else '—'} | "
                        f"{f'{rg:.2f}×' if rg is not None else '—'} | {loss} | {goal} |")
    text = "\n".join(header) + "\n\n" + "\n".join(rows) + "\n"
    if notes:
        text += "\nNotes:\n" + "".join(f"- {n}\n" for n in notes)
    return text


# ---- main ------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "examples"),
                    help="folder of the example programs (a build tree's examples/, or a flat folder)")
    ap.add_argument("--lib-dir", action="append", default=[],
                    help="folder of shared libraries the programs need (libctrial.so.0, ...); repeatable")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "examples", "data"),
                    help="holds digits/ and tinyshakespeare/input.txt.gz (default: examples/data)")
    ap.add_argument("--device", default=None, help="cuda (default), cuda:N; cpu with --smoke")
    ap.add_argument("--smoke", action="store_true",
                    help="on the CPU: 5-step windows, smaller big model, fp32 and bf16 (graphs need a GPU)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated: " + ", ".join(WORKLOADS))
    ap.add_argument("--modes", default=None, help="comma-separated: fp32, bf16, graphs")
    ap.add_argument("--window", type=int, default=0, help="steps per timed window (default: per workload)")
    ap.add_argument("--windows", type=int, default=5, help="timed windows per process (5)")
    ap.add_argument("--warmup-windows", type=int, default=1, help="windows dropped at the start (1)")
    ap.add_argument("--procs", type=int, default=2,
                    help="rounds: every measurement runs once per round, interleaved (2)")
    ap.add_argument("--budget-s", type=float, default=420,
                    help="no further round starts when it would end after this many seconds, and none "
                     "at all after 60 s more (420)")
    ap.add_argument("--run-timeout", type=float, default=120, help="seconds one program may run (120)")
    ap.add_argument("--threads", type=int, default=None,
                    help="intra-op CPU threads on both sides (default: 1 with --smoke, else libtorch's)")
    ap.add_argument("--python", default=sys.executable, help="python with torch for the PyTorch side")
    ap.add_argument("--deterministic", action="store_true",
                    help="deterministic algorithms on both sides (ctrial's --deterministic, "
                         "torch.use_deterministic_algorithms): cuDNN's nondeterministic kernels otherwise move "
                         "the losses from run to run (ResNet-18), so the loss column compares like with like; "
                         "the rates are then those of the deterministic kernels")
    ap.add_argument("--dry-run", action="store_true",
                    help="list the programs a round would run (no probes, no GPU needed) and exit")
    ap.add_argument("--out", default=None,
                    help="write the table here (default: bench/gpu/RESULTS.md on a GPU, nowhere with --smoke) "
                         "and the raw numbers beside it (.json)")
    a = ap.parse_args()
    a.device = a.device or ("cpu" if a.smoke else "cuda")
    a.workloads = [w for w in a.workloads.split(",") if w]
    a.modes = [m for m in (a.modes or ("fp32,bf16" if a.smoke else "fp32,bf16,graphs")).split(",") if m]
    if a.threads is None:
        a.threads = 1 if a.smoke else 0
    if a.out is None and not a.smoke:
        a.out = os.path.join(HERE, "RESULTS.md")
    for w in a.workloads:
        if w not in WORKLOADS:
            raise SystemExit(f"run.py: unknown workload {w}")
    for m in a.modes:
        if m not in MODES:
            raise SystemExit(f"run.py: unknown mode {m}")

    env, torch = library_env(a.lib_dir)
    if a.device.startswith("cuda") and not torch.cuda.is_available() and not a.dry_run:
        raise SystemExit("run.py: no GPU here (torch.cuda.is_available() is false); use --smoke on a CPU")
    binaries = {WORKLOADS[w]["binary"]: find_binary(a.bin_dir, WORKLOADS[w]["binary"]) for w in a.workloads}
    work = tempfile.mkdtemp(prefix="bench_gpu_")
    plan = Plan(a, env, work)
    for wl in a.workloads:  # the exported models, with the weights torch_eager.py's seed 0 gives
        if WORKLOADS[wl].get("export") and not a.dry_run:
            export_charlm(a, wl, work)
    start = time.monotonic()
    notes = []

    # Which modes can each example run? (its hparams fused and amp)
    unsupported = {}
    for wl in a.workloads:
        b = binaries[WORKLOADS[wl]["binary"]]
        if b in unsupported:
            continue
        if a.dry_run:
            unsupported[b] = {}
            continue
        unsupported[b] = {}
        if "graphs" in a.modes and a.device != "cpu":
            unsupported[b]["graphs"] = probe(plan, wl, b, "fused=true", fused_check,
                                              "has no hyperparameter fused (--hparam fused=true left its "
                                              "optimizer unfused), which CUDA graphs need")
        if "bf16" in a.modes:
            unsupported[b]["bf16"] = probe(plan, wl, b, "amp=fp16", amp_check,
                                            "has no hyperparameter amp (--hparam amp=fp16 left no GradScaler "
                                            "in its checkpoint)")
        for mode, why in unsupported[b].items():
            log(f"probe {os.path.basename(b)} {mode}: " + (f"no: {why}" if why else "yes"))

    # The measurements: each (workload, mode) cell, and the eager runs it
    # compares with (shared between cells that need the same one).
    results, eager_key = {}, {}
    jobs = []
    for wl in a.workloads:
        b = binaries[WORKLOADS[wl]["binary"]]
        for mode in a.modes:
            if mode == "graphs" and a.device == "cpu":
                results[(wl, mode)] = {"skip": "skipped: CUDA graphs need a GPU"}
                continue
            why = unsupported[b].get(mode)
            if why:
                results[(wl, mode)] = {"skip": "not measured (see the notes)"}
                notes.append(f"{wl} {mode}: not measured because {why}")
                continue
            results[(wl, mode)] = {"ctrial": [], "eager": [], "torch_graphs": []}
            # The PyTorch eager run this cell compares with; identical ones
            # (charlm's fused AdamW on CUDA in fp32 and graphs) run once.
            m = MODES[mode]
            fused = m["fused"]
            if fused == "auto":
                fused = "1" if (wl != "digits" and a.device.startswith("cuda")) else "0"
            key = (wl, m["amp"], fused)
            eager_key[(wl, mode)] = key
            jobs.append(("ctrial", wl, mode, b))
            if key not in [j[1:] for j in jobs if j[0] == "eager"]:
                jobs.append(("eager", *key))
            if m["torch_graphs"]:
                jobs.append(("torch_graphs", wl, mode, None))
    if not a.smoke:
        notes.append("PyTorch eager uses the same optimizer as ctrial in each row: Adam (foreach) for digits in "
                     "fp32/bf16, fused Adam(W) in the graphs rows and for charlm on CUDA (nanoGPT's choice).")
    eager_runs = {}
    mode_of_key = {v: k[1] for k, v in eager_key.items()}
    if a.dry_run:
        for job in jobs:
            print({"ctrial": lambda j: f"ctrial {j[1]} {j[2]}",
                   "eager": lambda j: f"torch eager {j[1]} amp={j[2]} fused={j[3]}",
                   "torch_graphs": lambda j: f"torch graphs {j[1]}"}[job[0]](job))
        print(f"{len(jobs)} programs per round, up to {a.procs} rounds")
        return

    round_secs = None
    for rnd in range(a.procs):
        elapsed = time.monotonic() - start
        if rnd > 0 and round_secs is not None and elapsed + round_secs > a.budget_s:
            notes.append(f"{rnd} round(s) of {a.procs} run: another would have ended after "
                         f"{elapsed + round_secs:.0f} s (--budget-s {a.budget_s:.0f})")
            log(notes[-1])
            break
        t_round = time.monotonic()
        for i, job in enumerate(jobs):
            kind = job[0]
            t = time.monotonic() - start
            if t > a.budget_s + 60:   # something ran far longer than planned: stop, keep what ran
                notes.append(f"stopped after {t:.0f} s, {len(jobs) - i} program(s) of round {rnd + 1} not run")
                log(notes[-1])
                break
            if kind == "ctrial":
                _, wl, mode, b = job
                r = run_ctrial(plan, wl, mode, b)
                results[(wl, mode)]["ctrial"].append(r)
                label = f"ctrial {wl} {mode}"
            elif kind == "eager":
                key = job[1:]
                wl = key[0]
                r = run_torch(plan, wl, mode_of_key[key], False)
                eager_runs.setdefault(key, []).append(r)
                label = f"torch eager {wl} amp={key[1]} fused={key[2]}"
            else:
                _, wl, mode, _ = job
                r = run_torch(plan, wl, mode, True)
                results[(wl, mode)]["torch_graphs"].append(r)
                label = f"torch graphs {wl}"
            what = (f"{statistics.median(r['rates']):,.1f} steps/s, final loss {r['final_loss']:.4f}"
                    if "rates" in r else r["error"])
            log(f"[round {rnd + 1}/{a.procs}, {i + 1}/{len(jobs)}, {t:5.0f} s] {label}: {what} "
                f"({r['seconds']:.1f} s)")
        round_secs = time.monotonic() - t_round
    for cell_key, key in eager_key.items():
        results[cell_key]["eager"] = eager_runs.get(key, [])

    window_desc = ", ".join(f"{wl} {plan.steps(wl)[0]}" for wl in a.workloads)
    header = [
        "# bench/gpu — ctrial vs PyTorch eager" + (" (smoke run on the CPU)" if a.smoke else ""),
        "",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {machine(torch, a.device)}; "
        f"device {a.device}" + (f", {a.threads} intra-op thread(s)" if a.threads else "") + ".",
        f"Command: `{' '.join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])}`",
        "",
        f"Steps/s: median (min–max) over timed windows of N steps (N: {window_desc}), {a.windows} per process "
        f"after {a.warmup_windows} dropped, pooled over the processes that ran (up to {a.procs}, interleaved). "
        f"Ratios: median over median. Final loss: the last window's mean training loss, median over processes; "
        f"'ok' when the two agree within {LOSS_REL_TOL:.0%}.",
    ]
    header.append("")
    header += [f"- `{wl}`: {WORKLOADS[wl]['title']}, {WORKLOADS[wl]['kind']}-bound" for wl in a.workloads]
    if a.smoke:
        sizes = {wl: WORKLOADS[wl]["smoke"] for wl in a.workloads if WORKLOADS[wl]["smoke"]}
        if sizes:
            header.append("")
            header.append("Smoke sizes: " + "; ".join(f"{wl} with {json.dumps(s)}" for wl, s in sizes.items()) +
                          " (the GPU run uses the sizes in the workload names).")
    text = table(plan, results, notes, header)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
        raw = {f"{wl}/{mode}": cell for (wl, mode), cell in results.items()}
        with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
            json.dump({"args": vars(a), "results": raw}, f, indent=1, default=str)
        log(f"wrote {a.out}")
    log(f"total {time.monotonic() - start:.0f} s, {plan.count} programs run")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
