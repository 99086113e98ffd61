"""The weight average (ct_ctx_add_ema) against Lightning's
EMAWeightAveraging (torch.optim.swa_utils.AveragedModel with
get_ema_avg_fn): ema_trial.c and the same LightningModule (Linear ->
BatchNorm1d -> ReLU -> Linear, SGD with momentum, MSE, the same records in
the same order) train 12 steps, validating every 4 on the averaged weights.

  A: decay 0.8, every 2nd step from step 3, buffers averaged;
  B: decay 0.9, every step, buffers copied (use_buffers=False);
  C: validate=0: validations on the model's own weights, as Lightning's
     without the callback.

Each must give Lightning's training losses and validation losses, and the
last checkpoint's callbacks.ema.state_dict must equal Lightning's averaged
module (parameters and BatchNorm buffers; 1e-6), the model's own weights
Lightning's current ones. Then A stopped at step 6 and resumed to 12 ends
with the same averaged and current weights, bit for bit, as uninterrupted,
and a decay of 1.5 is refused naming it. Skipped (77) without lightning.

    test_ema.py EMA_TRIAL
"""
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
    import logging

    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import EMAWeightAveraging

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
except ImportError as e:
    print(f"SKIP: lightning is not installed ({e}); tools/setup.sh installs it")
    sys.exit(77)

TRIAL = os.path.abspath(sys.argv[1])
T0 = time.time()
WORK = tempfile.mkdtemp(prefix="ema_")
SEED, STEPS, PERIOD, BATCH = 7, 12, 4, 8
TOL = 1e-6


def data(first, n):
    i = torch.arange(first, first + n)
    x = torch.sin(0.37 * (i[:, None] * 4 + torch.arange(4)[None, :]).to(torch.float32))
    y = torch.cos(0.5 * i.to(torch.float32))[:, None]
    return torch.utils.data.TensorDataset(x, y)


class Module(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                                       torch.nn.Linear(8, 1))
        self.losses, self.val = [], []

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, idx):
        loss = torch.nn.functional.mse_loss(self(batch[0]), batch[1])
        self.losses.append(loss.item())
        return loss

    def validation_step(self, batch, idx):
        self.log("validation_loss", torch.nn.functional.mse_loss(self(batch[0]), batch[1]))

    def on_validation_epoch_end(self):
        self.val.append(self.trainer.callback_metrics["validation_loss"].item())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


class Current(pl.Callback):
    """The model's own weights after the last step (before Lightning's
    on_train_end copies the average in)."""

    def on_train_batch_end(self, trainer, module, outputs, batch, idx):
        self.state = {k: v.clone() for k, v in module.net.state_dict().items()}


def lightning(decay, every, start, use_buffers, ema=True):
    pl.seed_everything(SEED, verbose=False)
    module = Module()
    current = Current()
    callbacks = [current]
    if ema:
        callbacks.append(EMAWeightAveraging(decay=decay, update_every_n_steps=every, update_starting_at_step=start,
                                            use_buffers=use_buffers))
    trainer = pl.Trainer(max_steps=STEPS, val_check_interval=PERIOD, check_val_every_n_epoch=None,
                         num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                         default_root_dir=WORK, callbacks=callbacks)
    loader = lambda d: torch.utils.data.DataLoader(d, batch_size=BATCH)  # noqa: E731
    trainer.fit(module, loader(data(0, 48)), loader(data(48, 16)))
    # The average, which EMAWeightAveraging copies into the module when
    # training ends (it drops its AveragedModel at teardown).
    avg = {k: v.clone() for k, v in module.net.state_dict().items()} if ema else None
    return module.losses, module.val, current.state, avg


def config(name, hp, steps):
    path = os.path.join(WORK, name + ".json")
    json.dump({"hyperparameters": dict(hp, global_batch_size=BATCH),
               "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": steps}},
               "min_validation_period": {"batches": PERIOD}, "scheduling_unit": 1, "checkpoint_policy": "none",
               "reproducibility": {"experiment_seed": SEED}}, open(path, "w"))
    return path


def ctrial(name, hp, steps=STEPS, out=None, resume=False):
    out = out or os.path.join(WORK, name)
    cmd = [TRIAL, "--config", config(name, hp, steps), "--output", out, "--threads", "1", "--quiet"]
    p = run_cmd(cmd + (["--resume", "latest"] if resume else []), 60, env=dict(os.environ, OMP_NUM_THREADS="1"))
    check(p.returncode == 0, f"{name}: exit 0 ({p.returncode}: {p.stderr.strip()[-300:]})")
    lines = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    ckpt = sorted(glob.glob(os.path.join(out, "checkpoints", "ckpt-*")))[-1]
    state = torch.load(os.path.join(ckpt, "state_dict.pth"), weights_only=True)
    model = {k.removeprefix("net."): v for k, v in state["models_state_dict"][0].items()}
    return ([r["metrics"]["loss"] for r in lines if r["group"] == "training"],
            {r["batches"]: r["metrics"]["validation_loss"] for r in lines if r["group"] == "validation"},
            model, state["callbacks"].get("ema"))


def close_lists(a, b):
    return len(a) == len(b) and all(abs(x - y) <= TOL * max(1.0, abs(y)) for x, y in zip(a, b))


def close_states(a, b):
    if a is None or b is None or set(a) != set(b):
        return False
    return all(a[k].dtype == b[k].dtype and torch.allclose(a[k].double(), b[k].double(), rtol=TOL, atol=TOL)
               for k in b)


def worst(a, b):
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in b)


CASES = [("A", dict(decay=0.8, every=2, start=3, use_buffers=1)),
         ("B", dict(decay=0.9, every=1, start=0, use_buffers=0)),
         ("C", dict(decay=0.9, every=1, start=0, use_buffers=1, validate=0))]
torch.set_num_threads(1)
results = {}
for name, hp in CASES:
    validate = hp.get("validate", 1)
    l_loss, l_val, l_cur, l_avg = lightning(hp["decay"], hp["every"], hp["start"], bool(hp["use_buffers"]),
                                            ema=bool(validate))
    c_loss, c_val, c_cur, c_ema = results[name] = ctrial(name, hp)
    c_vals = [c_val[b] for b in sorted(c_val)]
    check(close_lists(c_loss, l_loss), f"{name}: the {len(l_loss)} training losses equal Lightning's")
    check(close_lists(c_vals, l_val), f"{name}: the validation losses {[round(v, 6) for v in c_vals]} equal "
          f"Lightning's {[round(v, 6) for v in l_val]}" + (" (validated on the averaged weights)" if validate else
                                                          " (Lightning without the callback)"))
    check(close_states(c_cur, l_cur), f"{name}: the model's own weights equal Lightning's current ones")
    if validate:
        avg = {k: v for k, v in c_ema["state_dict"].items()} if c_ema else None
        check(close_states(avg, l_avg), f"{name}: callbacks.ema.state_dict equals Lightning's AveragedModel "
              f"({len(l_avg)} entries, BatchNorm's included; largest difference "
              f"{worst(avg, l_avg) if avg and set(avg) == set(l_avg) else 'n/a'})")
    n_updates = len([s for s in range(STEPS) if s >= hp["start"] and s % hp["every"] == 0])
    check(c_ema is not None and c_ema["n_averaged"] == n_updates and c_ema["latest_update_step"] ==
          max(s for s in range(STEPS) if s >= hp["start"] and s % hp["every"] == 0) + 1,
          f"{name}: n_averaged {c_ema and c_ema['n_averaged']} = {n_updates} updates")

# A, stopped at step 6 and resumed to 12: the same weights, averaged and own.
out = os.path.join(WORK, "A_resumed")
ctrial("A_first", CASES[0][1], steps=6, out=out)
_, r_val, r_cur, r_ema = ctrial("A_rest", CASES[0][1], out=out, resume=True)
_, a_val, a_cur, a_ema = results["A"]
same = all(torch.equal(r_cur[k], a_cur[k]) for k in a_cur) and \
    all(torch.equal(r_ema["state_dict"][k], a_ema["state_dict"][k]) for k in a_ema["state_dict"])
check(same and r_ema["n_averaged"] == a_ema["n_averaged"] and r_val[12] == a_val[12],
      "A stopped at 6 and resumed: the same averaged and own weights and validation at 12, bit for bit")
# A decay outside [0, 1] is refused in init, naming it.
p = run_cmd([TRIAL, "--config", config("bad", dict(decay=1.5), STEPS), "--output", os.path.join(WORK, "bad"),
             "--threads", "1", "--quiet"], 60)
check(p.returncode != 0 and "decay 1.5 is outside [0, 1]" in p.stderr,
      f"decay 1.5: refused, naming it ({p.returncode}: {p.stderr.strip()[-200:]})")
exit_with_report(T0, WORK)
