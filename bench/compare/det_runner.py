#!/usr/bin/env python3
"""Issue 8's workloads as Determined PyTorchTrials, trained locally (no
master) with det.pytorch.Trainer, timed in steady-state windows.

    det_runner.py --workload mlp|cnn|charlm|resnet|lstm [--config CONFIG.json] [--data PATH]
                  [--hparam K=V ...] [--device cpu|cuda] [--window N]
                  [--windows R] [--warmup-windows K] [--threads T] [--seed S]

Needs `bash tools/bench-setup.sh` (determined in .venv).

The trial: __init__ builds the workload of bench/gpu/torch_eager.py (the
same model, optimizer, hyperparameters and numpy-RandomState batch order;
bench/compare/common.py) and passes its model and optimizer through
context.wrap_model / context.wrap_optimizer. train_batch is

  digits (mlp, cnn, resnet): out = model(x) (resnet: x upsampled to
          image_size and repeated over 3 channels first, as torch_eager.py);
          loss = cross_entropy(out, y, label_smoothing);
          context.backward(loss); context.step_optimizer(opt);
          returns {"loss", "accuracy"}
  charlm (charlm, lstm): loss = cross_entropy(logits_of(model, x).view(-1, V),
          y.view(-1)); context.backward(loss);
          context.step_optimizer(opt, clip_grads=clip_grad_norm_(params, grad_clip));
          returns {"loss"}

(step_optimizer steps, then zero_grad()s: set_to_none, torch's default).
evaluate_batch returns {"validation_loss"}. The training loader is a plain
torch DataLoader serving whole batches gathered from memory in the order
torch_eager.py uses (Determined's own DataLoader would fetch and collate
item by item; the dataset reproducibility check that guards plain loaders
is switched off with context.experimental.disable_dataset_reproducibility_checks()).

Run as: det.pytorch.init(hparams=..., exp_conf=...) -> Trainer(trial,
context).fit(max_length=Batch(K+R windows), reporting_period=Batch(N),
validation_period=None, checkpoint_period=None, checkpoint_policy="none").
validation_period/checkpoint_period None are Batch(sys.maxsize): no
validation or checkpoint during training. Determined still validates
(one batch, see common.val_loader) and checkpoints once after the last
batch; both happen after the last timed window ends and are not in any
window. Metrics are reported (printed, local mode) every N batches, once
per window, as ctrial reports once per window.

Timing (common.Windows): train_batch ends with timer.step_end(loss); at the
end of every N-th step the timer reads the window's mean loss (.item()),
synchronizes CUDA and takes time.perf_counter(). A window is end-of-window
to end-of-window: N steps plus all of Determined's per-batch work between
them (next batch, to_device, metrics to numpy -- a device sync per step --,
boundary checks) and one report. The first K windows (process start-up,
trial and controller set-up) are dropped.

Prints one JSON line on stdout: {"system": "determined", "workload",
"steps_per_s": [R], "final_loss" (last window's mean training loss),
"peak_rss_mb" (ru_maxrss of this process), "losses" (every window's mean,
warm-up included), ...}.
"""
import logging
import os
import sys
import tempfile

import torch

import common

try:
    import determined as det
    from determined import pytorch
except ImportError as e:
    raise SystemExit(f"det_runner: {e}; install the benchmark dependencies: bash tools/bench-setup.sh")


class BenchTrial(pytorch.PyTorchTrial):
    def __init__(self, context, run):
        self.context = context
        self.run = run
        hp = context.get_hparams()
        device = context.device
        self.W = common.build_workload(run["workload"], hp, run["data"], run["seed"], device, run["fused"])
        self.W.model.train()
        self.model = context.wrap_model(self.W.model)
        self.opt = context.wrap_optimizer(self.W.opt)
        self.charlm = common.is_lm(run["workload"])
        self.grad_clip = hp.get("grad_clip", 1.0)
        context.experimental.disable_dataset_reproducibility_checks()
        self.timer = run["timer"]

    def build_training_data_loader(self):
        # One batch more than fit() trains, so the loader never ends an epoch.
        return common.train_loader(self.W, self.timer.total_steps + 1, pin=self.context.device.type == "cuda")

    def build_validation_data_loader(self):
        return common.val_loader(self.W)

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        if self.charlm:
            loss = common.charlm_loss(self.W, self.model, x, y)
            self.context.backward(loss)
            clip = None
            if self.grad_clip > 0:
                # The model's own parameter order (not the optimizer groups'),
                # as torch_eager.py: the same total norm to the last bit.
                clip = lambda _params: torch.nn.utils.clip_grad_norm_(self.W.params, self.grad_clip)  # noqa: E731
            self.context.step_optimizer(self.opt, clip_grads=clip)
            self.timer.step_end(loss)
            return {"loss": loss}
        out, loss = common.digits_step_loss(self.W, self.model, x, y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        acc = (out.argmax(1) == y).float().mean()
        self.timer.step_end(loss)
        return {"loss": loss, "accuracy": acc}

    def evaluate_batch(self, batch, batch_idx):
        x, y = batch
        if self.charlm:
            return {"validation_loss": common.charlm_loss(self.W, self.model, x, y)}
        out, loss = common.digits_step_loss(self.W, self.model, x, y)
        return {"validation_loss": loss}


def main():
    a = common.arg_parser(__doc__).parse_args()
    timer = common.Windows(a.window, a.windows, a.warmup_windows, a.device)
    hp, data, fused = common.setup(a)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("determined").setLevel(logging.WARNING)
    run = dict(workload=a.workload, data=data, seed=a.seed, fused=fused, timer=timer)
    # The final checkpoint goes to a scratch folder, removed at the end.
    with tempfile.TemporaryDirectory(prefix="det_runner_") as scratch:
        cwd = os.getcwd()
        os.chdir(scratch)
        try:
            with pytorch.init(hparams=hp, exp_conf={"hyperparameters": hp}) as context:
                if context.device.type != a.device:
                    raise SystemExit(f"det_runner: Determined chose device {context.device}, not {a.device} "
                                     "(local mode uses a GPU whenever nvidia-smi lists one)")
                trial = BenchTrial(context, run)
                trainer = pytorch.Trainer(trial, context)
                trainer.fit(max_length=pytorch.Batch(timer.total_steps),
                            reporting_period=pytorch.Batch(a.window),
                            validation_period=None, checkpoint_period=None, checkpoint_policy="none")
        finally:
            os.chdir(cwd)
    res = timer.result("determined", a.workload, {"device": a.device, "fused": fused,
                                                  "determined": det.__version__})
    print(common.json.dumps(res), flush=True)


if __name__ == "__main__":
    sys.exit(main())
