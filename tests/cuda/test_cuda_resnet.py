#!/usr/bin/env python3
"""ResNet-18 on a GPU in deterministic mode equals torchvision's, step for
step (issue: cuDNN's nondeterministic kernels made the two sides' losses
move from run to run, so they could not be compared).

    test_cuda_resnet.py RESNET

examples/resnet's resnet.json cut to 10 batches of 16 (a report every 5)
trains on cuda with --deterministic, twice: the two runs' losses are
bit-identical. bench/gpu/torch_eager.py's `resnet` workload,
torchvision.models.resnet18(num_classes=10) with the same seed and batches,
runs on cuda with torch.use_deterministic_algorithms(True) and
cudnn.deterministic: its two reported losses equal ctrial's to 1e-5
(relative). Skipped (exit 77) without a GPU.
"""
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import fail, run_example  # noqa: E402

RESNET = os.path.abspath(sys.argv[1])
SRC = os.environ["CTRIAL_SOURCE_DIR"]
if not torch.cuda.is_available():
    print(f"SKIP: no GPU here (torch {torch.__version__}: torch.cuda.is_available() is false); "
          "ResNet-18's deterministic GPU steps were not run")
    sys.exit(77)

WORK = os.path.join(os.environ["CTRIAL_BUILD_DIR"], "tests", "cuda", "resnet_deterministic")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
with open(os.path.join(SRC, "examples", "resnet", "resnet.json")) as f:
    cfg = json.load(f)
cfg["hyperparameters"]["global_batch_size"] = 16
cfg["searcher"]["max_length"] = {"batches": 10}
cfg["scheduling_unit"] = 5
cfg["min_validation_period"] = {"batches": 10}
CONFIG = os.path.join(WORK, "resnet.json")
with open(CONFIG, "w") as f:
    json.dump(cfg, f)


def ctrial_losses(name):
    out = os.path.join(WORK, name)
    run_example([RESNET, "--config", CONFIG, "--output", out, "--quiet", "--device", "cuda", "--deterministic"],
                SRC, 600)
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [r["metrics"]["loss"] for r in map(json.loads, f) if r["group"] == "training"]


a, b = ctrial_losses("first"), ctrial_losses("second")
print("ctrial, twice:", a, b)
if len(a) != 2 or a != b:
    fail("two deterministic runs on the GPU gave different losses")
p = run_example([sys.executable, os.path.join(SRC, "bench", "gpu", "torch_eager.py"), "--workload", "resnet",
                 "--config", CONFIG, "--data", os.path.join(SRC, "examples", "data", "digits"), "--device", "cuda",
                 "--deterministic", "--window", "5", "--windows", "1", "--warmup-windows", "1"], SRC, 600)
theirs = json.loads(p.stdout.strip().splitlines()[-1])
if not theirs["numpy_order"]:
    print("SKIP: numpy is missing, so the PyTorch side cannot draw ctrial's batch order")
    sys.exit(77)
print("torchvision:", theirs["losses"])
for i, (x, y) in enumerate(zip(a, theirs["losses"])):
    if abs(x - y) > 1e-5 * abs(y):
        fail(f"batches {5 * i + 1}-{5 * i + 5}: ctrial {x!r}, torchvision {y!r}")
print("ok: ResNet-18's deterministic GPU steps equal torchvision's, and repeat exactly")
