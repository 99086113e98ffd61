"""The learning-rate monitor (ct_ctx_add_lr_monitor) against Lightning's
LearningRateMonitor: the keys are the names Lightning gives the same
optimizers (an SGD, an SGD of two parameter groups, an Adam), and each
training line holds the rates PyTorch's StepLR gives after that many steps,
written as Python's json.dumps writes them ("lr-SGD":0.025, where jansson
wrote 0.025000000000000001), as is every real of metrics.jsonl and
metadata.json;
TensorBoard has them as scalars.

    test_lr_monitor.py LR_TRIAL
"""
import collections
import glob
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import check, exit_with_report, run_cmd  # noqa: E402

try:
    from lightning.pytorch.callbacks import LearningRateMonitor
except ImportError as e:
    print(f"SKIP: lightning is not installed ({e}); tools/setup.sh installs it")
    sys.exit(77)

TRIAL = os.path.abspath(sys.argv[1])
T0 = time.time()
WORK = tempfile.mkdtemp(prefix="lr_monitor_")

cfg = os.path.join(WORK, "lr.json")
json.dump({"hyperparameters": {"global_batch_size": 4},
           "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 8}},
           "scheduling_unit": 2}, open(cfg, "w"))
out = os.path.join(WORK, "out")
p = run_cmd([TRIAL, "--config", cfg, "--output", out, "--threads", "1"], 60, env=dict(os.environ, OMP_NUM_THREADS="1"))
check(p.returncode == 0, f"exit 0 ({p.returncode}: {p.stderr.strip()[-300:]})")
raw = open(os.path.join(out, "metrics.jsonl")).readlines()
training = [l for l in raw if '"training"' in l]
lines = [json.loads(l) for l in training]
# Every real of every line (and of the checkpoints' metadata.json) as
# Python's json.dumps writes it, repr(): the shortest digits that read back.
reals = []
for l in raw:
    json.loads(l, parse_float=lambda text: reals.append(text) or float(text))
check(len(reals) > 20 and all(t == repr(float(t)) for t in reals),
      f"every real in metrics.jsonl is written as repr() ({[t for t in reals if t != repr(float(t))][:5]})")
metas = glob.glob(os.path.join(out, "checkpoints", "*", "metadata.json"))
meta_reals = []
for m in metas:
    json.load(open(m), parse_float=lambda text: meta_reals.append(text) or float(text))
check(metas and meta_reals and all(t == repr(float(t)) for t in meta_reals),
      f"so is every real in the checkpoints' metadata.json ({len(metas)}: {meta_reals[:8]})")

# Lightning's names for the same optimizers.
a, b1, b2, c = (torch.nn.Parameter(torch.zeros(1)) for _ in range(4))
opts = [torch.optim.SGD([a], lr=0.1), torch.optim.SGD([{"params": [b1]}, {"params": [b2], "lr": 0.02}], lr=0.01),
        torch.optim.Adam([c], lr=0.001)]
sched = torch.optim.lr_scheduler.StepLR(opts[0], 2, 0.5)
names = LearningRateMonitor()._find_names_from_optimizers(opts, [], collections.defaultdict(int))[0]
flat = [n for group in names for n in group]
check(flat == ["lr-SGD", "lr-SGD-1/pg1", "lr-SGD-1/pg2", "lr-Adam"], f"Lightning's names: {flat}")
want = []
for step in range(1, 9):
    for o in opts:
        o.step()
    sched.step()
    if step % 2 == 0:
        want.append([opts[0].param_groups[0]["lr"], 0.01, 0.02, 0.001])
got = [[m["metrics"].get(n) for n in flat] for m in lines]
check(len(got) == 4 and all(g == w for g, w in zip(got, want)),
      f"every training line holds each group's rate, named as Lightning names it ({got} vs {want})")
written = [(f'"{n}":{v!r}', line) for line, w in zip(training, want) for n, v in zip(flat, w)]
check(len(written) == 16 and all(s + "," in line or s + "}" in line for s, line in written),
      f"written as Python writes them ({written[0][0]}, not jansson's 0.050000000000000003): {training[0][:160]}")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
acc = EventAccumulator(out, size_guidance={"scalars": 0})
acc.Reload()
tags = acc.Tags()["scalars"]
lr_tags = sorted(t for t in tags if "lr-" in t)
check(len(lr_tags) == 4, f"TensorBoard has the 4 rates as scalars ({lr_tags})")
exit_with_report(T0, WORK)
