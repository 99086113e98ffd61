"""A trial trained on a GPU end to end: tests/ckpt/ckpt_trial (a ct_main
program) with --device cuda. Where no GPU is present it prints why and exits
77, which ctest shows as skipped.

    test_cuda_fit.py CKPT_TRIAL

On a GPU it checks:
1. fp32 on cuda:0 ends within 1e-3 of the same run on the CPU (no dropout:
   the two devices draw different masks).
2. SIGTERM inside batch 19 and --resume equal the uninterrupted cuda run bit
   for bit, dropout included: the checkpoint holds every GPU's RNG state.
3. fp16 AMP on the GPU: an injected inf gradient skips exactly one Adam step
   and backs the scale off once; bf16 AMP trains without a scaler.
4. The progress line shows GPU memory and metrics.jsonl's training lines
   carry gpu_memory_allocated_bytes / gpu_memory_peak_bytes.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, single_config  # noqa: E402

TRIAL = sys.argv[1]
if not torch.cuda.is_available():
    print(f"SKIP: no GPU here (torch {torch.__version__}: torch.cuda.is_available() is false); "
          "the CUDA training paths were not run")
    sys.exit(77)

WORK = tempfile.mkdtemp(prefix="cuda_fit_")
CFG = single_config(os.path.join(WORK, "cfg.json"), "cuda", 16, 40, val=6, ckpt=8, scheduling_unit=4)


def run(name, *args, device="cuda", out=None):
    out = out or os.path.join(WORK, name)
    cmd = [TRIAL, "--config", CFG, "--output", out, "--threads", "1", "--device", device, *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print(" ".join(cmd), "\n", p.stdout[-3000:], p.stderr[-3000:])
    check(p.returncode == 0, f"{name}: exit code {p.returncode}")
    return out, p.stdout + p.stderr


def final_state(out, steps=40):
    for d in glob.glob(os.path.join(out, "checkpoints", "ckpt-*")):
        if json.load(open(os.path.join(d, "metadata.json")))["steps_completed"] == steps:
            return torch.load(os.path.join(d, "state_dict.pth"), weights_only=True, map_location="cpu")
    return None


def metrics(out):
    lines = [json.loads(x) for x in open(os.path.join(out, "metrics.jsonl"))]
    for x in lines:
        x.pop("time")
        x.pop("timings", None)
    return lines


def max_diff(a, b):
    return max((x - y).abs().max().item() for x, y in zip(a.values(), b.values()))


# 1. GPU against CPU, no dropout.
cpu, _ = run("cpu", "--hparam", "dropout=0", device="cpu")
gpu, text = run("gpu", "--hparam", "dropout=0")
a, b = final_state(cpu), final_state(gpu)
d = max_diff(a["models_state_dict"][0], b["models_state_dict"][0]) if a and b else float("inf")
check(d <= 1e-3, f"fp32 on cuda:0 ends within 1e-3 of the CPU run (max diff {d:.2e})")

# 4. Memory in the progress line and metrics.jsonl.
check(" gpu " in text, "the progress line shows GPU memory")
train = [json.loads(x) for x in open(os.path.join(gpu, "metrics.jsonl")) if '"training"' in x]
check(all(x["timings"].get("gpu_memory_peak_bytes", 0) > 0 for x in train),
      "training lines carry gpu_memory_peak_bytes")

# 2. Exact resume on the GPU, dropout on.
ref, _ = run("ref")
out, text = run("sigterm", "--hparam", "sigterm_at=19")
path = next((ln.split("--resume ", 1)[1].strip() for ln in text.splitlines() if "resume with --resume" in ln), "latest")
run("sigterm_resume", "--resume", path, out=out)
r, g = final_state(ref), final_state(out)
rng = r["rng_state"].get("gpu_rng_states") if r else None
check(rng is not None and len(rng) == torch.cuda.device_count(), "the checkpoint holds every GPU's RNG state")
same = r is not None and g is not None and all(torch.equal(x, y) for x, y in zip(
    r["models_state_dict"][0].values(), g["models_state_dict"][0].values()))
check(same and metrics(ref) == metrics(out), "SIGTERM + resume on the GPU equals the uninterrupted run bit for bit")

# 3. AMP on the GPU.
fp16, _ = run("fp16", "--hparam", "amp=fp16", "--hparam", "inf_at=7")
st = final_state(fp16)
check(st is not None and st["optimizers_state_dict"][0]["state"][0]["step"].item() == 39
      and st["scaler_state_dict"]["scale"] == 32.0,
      f"fp16 on the GPU: one skipped step, one backoff ({st and st.get('scaler_state_dict')})")
bf16, _ = run("bf16", "--hparam", "amp=bf16")
st = final_state(bf16)
check(st is not None and "scaler_state_dict" not in st, "bf16 on the GPU trains without a scaler")

print(f"{len(FAILURES)} failures; work dir {WORK}")
for f in FAILURES:
    print("FAILED: " + f)
sys.exit(1 if FAILURES else 0)
