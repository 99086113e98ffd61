"""Step for step with Determined's own loop: determined_order.c under ct_main
beside the same trial as a PyTorchTrial run by Determined's Trainer (local
training mode of the `determined` package, 0.38.1) on the CPU.

The trial has dropout, so its losses depend on every draw from the global
generator; Determined's loop draws, besides the trial's own, one int64 per
DataLoader iterator it makes (torch's _base_seed): the training iterator's
after building the loaders, a validation iterator's at each validation on
every rank that runs evaluate_batch (with evaluate_full_dataset, the
trial's own pass on the chief). Two schedules, each 20 batches (48 training
records in batches of 8: epochs of 6), validation every 5 batches:

  batch  the trial validates with evaluate_batch;
  full   with evaluate_full_dataset.

Each must give Determined's 20 training losses and 4 validation losses
(1e-6 relative). Then a check that the comparison can fail: the same run
without the iterator draws in the reference differs from ctrial's after the
first batch. Skipped (77) without the determined package (tools/setup.sh
installs it).

    test_determined_order.py DETERMINED_ORDER
"""
import json
import os
import random
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import check, exit_with_report, run_cmd  # noqa: E402

try:
    import logging

    logging.disable(logging.WARNING)
    from determined import pytorch
except ImportError as e:
    print(f"SKIP: the determined package is not installed ({e}); tools/setup.sh installs it")
    sys.exit(77)

EXE = os.path.abspath(sys.argv[1])
T0 = time.time()
WORK = tempfile.mkdtemp(prefix="determined_order_")
SEED = 1234
BATCHES, PERIOD, BATCH = 20, 5, 8
REL = 1e-6


def data(first, n):
    """determined_order.c's records: float32 sin as the C side's sinf."""
    i = torch.arange(first, first + n)
    x = torch.sin(0.37 * (i[:, None] * 8 + torch.arange(8)[None, :]).to(torch.float32))
    return torch.utils.data.TensorDataset(x, (7 * i) % 3)


class Trial(pytorch.PyTorchTrial):
    """determined_order.c as a PyTorchTrial. `rewind`: the reference without
    the training iterator's draw (the generator put back at the first batch
    as the trial's init left it)."""

    def __init__(self, context, rewind=False):
        self.context = context
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                                    torch.nn.Linear(16, 3))
        self.model = context.wrap_model(model)
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))
        self.after_init = torch.get_rng_state() if rewind else None
        self.losses, self.val = [], []

    def build_training_data_loader(self):
        return pytorch.DataLoader(data(0, 48), batch_size=BATCH)

    def build_validation_data_loader(self):
        return pytorch.DataLoader(data(48, 16), batch_size=BATCH)

    def build_callbacks(self):
        trial = self

        class Record(pytorch.PyTorchCallback):
            def on_validation_end(self, metrics):
                trial.val.append(metrics["validation_loss"])

        return {"record": Record()}

    def loss(self, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.model(x), y)

    def train_batch(self, batch, epoch_idx, batch_idx):
        if self.after_init is not None and batch_idx == 0:
            torch.set_rng_state(self.after_init)
        loss = self.loss(batch)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        self.losses.append(loss.item())
        return {"loss": loss}


class BatchTrial(Trial):
    def evaluate_batch(self, batch):
        return {"validation_loss": self.loss(batch)}


class FullTrial(Trial):
    def evaluate_full_dataset(self, data_loader):
        losses = [self.loss(b).item() for b in data_loader]
        return {"validation_loss": sum(losses) / len(losses)}


def determined(full, rewind=False):
    """Determined's Trainer on the trial: the training and validation losses."""
    # What Determined's harness does before it builds the trial on a cluster
    # (_set_random_seeds with the trial seed); local mode leaves it to us.
    random.seed(SEED)
    np.random.seed(SEED)
    torch.random.manual_seed(SEED)
    cwd = os.getcwd()
    os.chdir(WORK)  # local mode writes its checkpoints folder here
    try:
        with pytorch.init(hparams={}, exp_conf={"searcher": {"metric": "validation_loss"}}) as ctx:
            trial = (FullTrial if full else BatchTrial)(ctx, rewind)
            pytorch.Trainer(trial, ctx).fit(max_length=pytorch.Batch(BATCHES), validation_period=pytorch.Batch(PERIOD),
                                            checkpoint_period=pytorch.Batch(1000), checkpoint_policy="none")
    finally:
        os.chdir(cwd)
    return trial.losses, trial.val


def ctrial(full):
    cfg = os.path.join(WORK, "c.json")
    json.dump({"hyperparameters": {"global_batch_size": BATCH, "full": 0},
               "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": BATCHES}},
               "min_validation_period": {"batches": PERIOD}, "scheduling_unit": 1, "checkpoint_policy": "none",
               "reproducibility": {"experiment_seed": SEED}}, open(cfg, "w"))
    out = os.path.join(WORK, "out_full" if full else "out_batch")
    cmd = [EXE, "--config", cfg, "--output", out, "--threads", "1", "--quiet"] + (["--hparam", "full=1"] if full else [])
    p = run_cmd(cmd, 120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    check(p.returncode == 0, f"{os.path.basename(out)}: exit 0 ({p.returncode}: {p.stderr.strip()[-300:]})")
    lines = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    return ([r["metrics"]["loss"] for r in lines if r["group"] == "training"],
            [r["metrics"]["validation_loss"] for r in lines if r["group"] == "validation"])


def close(a, b):
    return abs(a - b) <= REL * max(abs(b), 1e-12)


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if not close(x, y)), None)


torch.set_num_threads(1)
ctrial_losses = {}
for full in (False, True):
    name = "evaluate_full_dataset" if full else "evaluate_batch"
    theirs, theirs_val = determined(full)
    ours, ours_val = ctrial_losses[full] = ctrial(full)
    check(len(theirs) == BATCHES and len(ours) == BATCHES, f"{name}: {BATCHES} losses each ({len(ours)}, {len(theirs)})")
    bad = first_difference(ours, theirs)
    check(bad is None, f"{name}: the training losses equal Determined's"
          + ("" if bad is None else f" (batch {bad + 1}: ctrial {ours[bad]!r}, Determined {theirs[bad]!r})"))
    check(len(ours_val) == len(theirs_val) == BATCHES // PERIOD and first_difference(ours_val, theirs_val) is None,
          f"{name}: the {BATCHES // PERIOD} validation losses equal Determined's ({ours_val} against {theirs_val})")
    print(f"{name}: ctrial {ours[0]:.7f} {ours[1]:.7f} ... {ours[-1]:.7f}; validation {ours_val[-1]:.7f}")

# The check above can fail: without the iterators' draws (the generator as
# the trial's init left it at the first batch) the losses part from ctrial's.
plain, _ = determined(False, rewind=True)
ours, _ = ctrial_losses[False]
bad = first_difference(ours, plain)
check(bad is not None and bad == 0, f"without the iterator's draw the first loss differs ({plain[0]!r} against "
      f"{ours[0]!r})")
exit_with_report(T0, WORK)
