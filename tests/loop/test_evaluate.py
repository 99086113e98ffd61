"""Evaluating a checkpoint (--evaluate, ct_evaluate) and named validation
loaders (ct_ctx_add_validation_loader), on determined_order.c with a second
validation loader "test" (24 more records).

1. Training 20 batches, validating every 5 and checkpointing every 10:
   every validation line holds validation_loss and test/validation_loss,
   and both equal, at batches 10 and 20, what PyTorch computes with the
   checkpoint's weights over the same records (1e-6); with
   evaluate_full_dataset too.
2. --evaluate CKPT (batch 10), latest (20) and best (by validation_loss)
   each append one line to evaluation.jsonl: the checkpoint, its batch and
   the same metrics as that validation in metrics.jsonl; metrics.jsonl and
   the checkpoints are the same bytes afterwards.
3. --evaluate of a missing checkpoint fails (exit 3), naming it, and an
   invalid loader name is refused (exit 1), naming it.

    test_evaluate.py DETERMINED_ORDER
"""
import glob
import hashlib
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import check, exit_with_report, run_cmd  # noqa: E402

EXE = os.path.abspath(sys.argv[1])
T0 = time.time()
WORK = tempfile.mkdtemp(prefix="evaluate_")
TOL = 1e-6


def config(name, hp):
    path = os.path.join(WORK, name + ".json")
    json.dump({"hyperparameters": dict({"global_batch_size": 8, "full": 0, "named": "test"}, **hp),
               "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 20}},
               "min_validation_period": {"batches": 5}, "min_checkpoint_period": {"batches": 10},
               "checkpoint_policy": "none", "scheduling_unit": 5,
               "checkpoint_storage": {"save_trial_latest": 5, "save_trial_best": 0}}, open(path, "w"))
    return path


def run(name, out, *extra, hp=None, expect=0):
    p = run_cmd([EXE, "--config", config(name, hp or {}), "--output", out, "--threads", "1", "--quiet", *extra], 120,
                env=dict(os.environ, OMP_NUM_THREADS="1"))
    check(p.returncode == expect, f"{name}: exit {expect} ({p.returncode}: {p.stderr.strip()[-300:]})")
    return p


def data(first, n):
    i = torch.arange(first, first + n)
    x = torch.sin(0.37 * (i[:, None] * 8 + torch.arange(8)[None, :]).to(torch.float32))
    return x, (7 * i) % 3


def pytorch_loss(ckpt, first, n):
    """The mean of the batches' cross entropy with the checkpoint's weights."""
    sd = torch.load(os.path.join(ckpt, "state_dict.pth"), weights_only=True)["models_state_dict"][0]
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(16, 3))
    model.load_state_dict(sd)
    model.eval()
    x, y = data(first, n)
    with torch.no_grad():
        losses = [torch.nn.functional.cross_entropy(model(x[b:b + 8]), y[b:b + 8]).item() for b in range(0, n, 8)]
    return sum(losses) / len(losses)


def lines(path, group=None):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    return [r for r in rows if group is None or r["group"] == group]


def digest(out):
    h = hashlib.sha256()
    for f in sorted(glob.glob(os.path.join(out, "metrics.jsonl")) + glob.glob(os.path.join(out, "checkpoints", "**"),
                                                                              recursive=True)):
        h.update(f.encode())
        if os.path.isfile(f):
            h.update(open(f, "rb").read())
    return h.hexdigest()


torch.set_num_threads(1)
for full in (0, 1):
    kind = "evaluate_full_dataset" if full else "evaluate_batch"
    out = os.path.join(WORK, f"run{full}")
    run(f"train{full}", out, hp={"full": full})
    vals = {r["batches"]: r["metrics"] for r in lines(os.path.join(out, "metrics.jsonl"), "validation")}
    check(sorted(vals) == [5, 10, 15, 20] and all("test/validation_loss" in m and "validation_loss" in m
                                                  for m in vals.values()),
          f"{kind}: validations at 5, 10, 15, 20 with validation_loss and test/validation_loss ({sorted(vals)})")
    ckpts = sorted(glob.glob(os.path.join(out, "checkpoints", "ckpt-*")))
    for ckpt in ckpts:
        bt = json.load(open(os.path.join(ckpt, "metadata.json")))["batches_trained"]
        want = (pytorch_loss(ckpt, 48, 16), pytorch_loss(ckpt, 64, 24))
        got = (vals[bt]["validation_loss"], vals[bt]["test/validation_loss"])
        check(all(abs(a - b) <= TOL * max(1, abs(b)) for a, b in zip(got, want)),
              f"{kind}: batch {bt}: validation_loss, test/validation_loss {got} are PyTorch's {want}")

# 2. --evaluate: a checkpoint, latest, best
out = os.path.join(WORK, "run0")
# the trial's metrics of each validation (the report adds batches and epochs)
vals = {r["batches"]: {k: v for k, v in r["metrics"].items() if k not in ("batches", "epochs")}
        for r in lines(os.path.join(out, "metrics.jsonl"), "validation")}
before = digest(out)
ckpts = sorted(glob.glob(os.path.join(out, "checkpoints", "ckpt-*")))
by_bt = {json.load(open(os.path.join(c, "metadata.json")))["batches_trained"]: c for c in ckpts}
best_bt = min(by_bt, key=lambda bt: vals[bt]["validation_loss"])
for what, bt in ((by_bt[10], 10), ("latest", 20), ("best", best_bt)):
    p = run("evaluate", out, "--evaluate", what)
    last = lines(os.path.join(out, "evaluation.jsonl"))[-1]
    check(last["batches"] == bt and os.path.realpath(last["checkpoint"]) == os.path.realpath(by_bt[bt]) and
          last["metrics"] == vals[bt], f"--evaluate {os.path.basename(what)}: batch {bt}, {last['metrics']} equal "
          f"that validation's {vals[bt]}")
    check(f"evaluation of {last['checkpoint']} (batch {bt}): validation_loss" in p.stdout,
          f"--evaluate {os.path.basename(what)}: the metrics printed ({p.stdout.strip()[-200:]})")
check(len(lines(os.path.join(out, "evaluation.jsonl"))) == 3, "evaluation.jsonl: one line per evaluation")
check(digest(out) == before, "metrics.jsonl and the checkpoints are unchanged by the evaluations")

# 3. refusals
missing = os.path.join(WORK, "no-such-ckpt")
p = run("missing", out, "--evaluate", missing, expect=3)
check("no-such-ckpt" in p.stderr, f"a missing checkpoint is named ({p.stderr.strip()[-200:]})")
p = run("badname", os.path.join(WORK, "bad"), hp={"named": "te st"}, expect=1)
check("'te st'" in p.stderr, f"an invalid loader name is refused, naming it ({p.stderr.strip()[-200:]})")
exit_with_report(T0, WORK)
