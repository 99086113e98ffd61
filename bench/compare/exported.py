#!/usr/bin/env python3
"""Exported models (ct_nn_load_exported) beside the same models built from
ct_nn_* layers, and beside plain PyTorch: training steps/s on the CPU, the
same data, hyperparameters, seed and steps, interleaved, as ratios.

    .venv/bin/python bench/compare/exported.py BUILD [--runs 3] [--threads 1] [--json FILE]

Two workloads, each the model of an example program:
  resnet  torchvision's resnet18(num_classes=10) on the digits upsampled to
          32x32, batch 32, SGD (examples/resnet's resnet.json): examples/resnet
          (the model in ct_nn_* layers) against examples/exported given the
          same module exported by tools/export_model.py
  charlm  charlm's GPT (2 layers, n_embd 128, block 64, batch 16, AdamW and
          clipping; charlm.json): examples/charlm's own model against
          charlm's "model": "exported" with bench/gpu/torch_eager.py's GPT,
          the same module, exported
and PyTorch eager (bench/gpu/torch_eager.py) training the module itself.

Each process trains (warm-up + windows) x window steps; a window's steps/s
come from metrics.jsonl's timings (ctrial: a report every window, nothing
validated or checkpointed before the end; bench/gpu/run.py's run_ctrial) or
torch_eager.py's windows. The systems run in rounds, their order rotating.
The exported module has the weights torch.manual_seed(seed) gives, as the
other two, so the losses agree (the charlm GPT's dropout masks follow other
draws, so its loss agrees to the noise of the masks only).

--json writes every window's rate per system, which bench/compare/run.py's
part "exported" reads.
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gr = _load("bench_gpu_run", os.path.join(ROOT, "bench", "gpu", "run.py"))

EAGER = os.path.join(ROOT, "bench", "gpu", "torch_eager.py")
WORKLOADS = {
    "resnet": dict(config="examples/resnet/resnet.json", data="digits", layers="resnet", exported="exported",
                   exported_config="examples/exported/exported.json", eager="resnet",
                   factory="torchvision.models:resnet18", args=[], kwargs={"num_classes": 10},
                   input="float32[N,3,32,32]", window=5, title="resnet18 on the digits at 32x32, batch 32, SGD"),
    "charlm": dict(config="examples/charlm/charlm.json", data="tinyshakespeare/input.txt.gz", layers="charlm",
                   exported="charlm", exported_config="examples/charlm/charlm.json", eager="charlm",
                   factory=EAGER + ":charlm_model", input="int64[N,64]", window=40,
                   title="charlm GPT, 2 layers, n_embd 128, block 64, batch 16, AdamW + clipping"),
}


class Plan(gr.Plan):
    """bench/gpu/run.py's Plan on the CPU with this benchmark's sizes."""

    def steps(self, wl):
        return self.a.window or gr.WORKLOADS[wl]["window"], self.a.windows, self.a.warmup_windows


def export(a, wl, work):
    """The workload's module, exported with the seed's weights: its .pt2."""
    w = WORKLOADS[wl]
    path = os.path.join(work, f"{wl}.pt2")
    args = w.get("args")
    if args is None:  # charlm_model(hp, vocab): the example's hyperparameters
        with open(os.path.join(ROOT, w["config"])) as f:
            hp = json.load(f)["hyperparameters"]
        args = [dict(hp, model="gpt"), 65]
    cmd = [a.python, os.path.join(ROOT, "tools", "export_model.py"), w["factory"], "--args", json.dumps(args),
           "--kwargs", json.dumps(w.get("kwargs", {})), "--input", w["input"], "--seed", str(a.seed), "-o", path]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        raise SystemExit(f"exported.py: exporting {wl} failed:\n{p.stderr[-2000:]}")
    return path


def register(wl, pt2, kind):
    """bench/gpu/run.py's WORKLOADS entry that runs the example program of
    `kind` ("layers" or "exported") on this workload."""
    w = WORKLOADS[wl]
    hp = {"global_batch_size": 16, "sample_tokens": 0} if wl == "charlm" else {}
    if kind == "exported":
        hp.update({"model": pt2} if wl == "resnet" else {"model": "exported", "model_file": pt2})
    name = f"{wl}_{kind}"
    gr.WORKLOADS[name] = dict(binary=w[kind], config=w["exported_config" if kind == "exported" else "config"],
                              data=w["data"], kind="", title=w["title"], hparams=hp, window=w["window"], smoke={})
    return name


def run_eager(plan, wl):
    a, w = plan.a, WORKLOADS[wl]
    window, windows, warmup = plan.a.window or w["window"], plan.a.windows, plan.a.warmup_windows
    cmd = [a.python, EAGER, "--workload", w["eager"], "--config", os.path.join(ROOT, w["config"]),
           "--data", os.path.join(a.data_dir, w["data"]), "--device", "cpu", "--threads", str(a.threads),
           "--seed", str(a.seed), "--window", str(window), "--windows", str(windows),
           "--warmup-windows", str(warmup)]
    if wl == "charlm":
        cmd += ["--hparam", "global_batch_size=16"]
    rc, out, err, secs = plan.run(cmd, f"eager_{wl}")
    if rc != 0:
        return {"error": f"exit {rc}: {gr.last_line(err) or gr.last_line(out)}"}
    r = json.loads(out.strip().splitlines()[-1])
    return {"rates": r["steps_per_s"], "final_loss": r["final_loss"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window", type=int, default=0, help="steps per window (resnet 5, charlm 40)")
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--warmup-windows", type=int, default=1)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    a.python, a.device, a.data_dir = sys.executable, "cpu", os.path.join(ROOT, "examples", "data")
    a.smoke, a.run_timeout = False, 900
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    rows = []
    with tempfile.TemporaryDirectory() as work:
        plan = Plan(a, env, work)
        for wl in a.workloads.split(","):
            pt2 = export(a, wl, work)
            names = {"layers": register(wl, pt2, "layers"), "exported": register(wl, pt2, "exported")}
            binaries = {k: gr.find_binary(os.path.join(a.build, "examples"), WORKLOADS[wl][k]) for k in names}
            runs = {"layers": [], "exported": [], "pytorch": []}
            for r in range(a.runs):
                order = ["layers", "exported", "pytorch"]
                order = order[r % 3:] + order[:r % 3]
                for system in order:
                    res = run_eager(plan, wl) if system == "pytorch" else \
                        gr.run_ctrial(plan, names[system], "fp32", binaries[system])
                    if "error" in res:
                        raise SystemExit(f"exported.py: {wl} {system}: {res['error']}")
                    runs[system].append(res)
                    print(f"{wl} {system} run {r + 1}: {statistics.median(res['rates']):.2f} steps/s, "
                          f"final loss {res['final_loss']:.6f}", file=sys.stderr, flush=True)
            row = {"workload": wl, "title": WORKLOADS[wl]["title"]}
            for system, rs in runs.items():
                row[system] = [x for res in rs for x in res["rates"]]
                row[system + "_final_loss"] = statistics.median(res["final_loss"] for res in rs)
            rows.append(row)
            print(f"{wl}: exported {statistics.median(row['exported']):.2f} steps/s, ct_nn_* layers "
                  f"{statistics.median(row['layers']):.2f} ({statistics.median(row['exported']) / statistics.median(row['layers']):.3f}x), "
                  f"PyTorch eager {statistics.median(row['pytorch']):.2f} "
                  f"({statistics.median(row['exported']) / statistics.median(row['pytorch']):.3f}x)", flush=True)
    result = {"meta": {"threads": a.threads, "runs": a.runs, "windows": a.windows, "seed": a.seed}, "rows": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
