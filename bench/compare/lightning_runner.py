#!/usr/bin/env python3
"""Issue 8's workloads as LightningModules, trained with lightning.Trainer
set up as Lightning's own parity benchmark runs it (no progress bar, no
logger, no checkpointing, no model summary), timed in steady-state windows.

    lightning_runner.py --workload mlp|cnn|charlm|resnet|lstm [--config CONFIG.json] [--data PATH]
                        [--hparam K=V ...] [--device cpu|cuda] [--window N]
                        [--windows R] [--warmup-windows K] [--threads T] [--seed S]

Needs `bash tools/bench-setup.sh` (lightning in .venv).

The module holds the workload of bench/gpu/torch_eager.py (the same model,
optimizer, hyperparameters and numpy-RandomState batch order;
bench/compare/common.py). Lightning's automatic optimization runs the step:
zero_grad (set_to_none), training_step (forward and loss, returned),
backward, configure_gradient_clipping (charlm and lstm: clip_grad_norm_
over the model's parameters at grad_clip, as torch_eager.py; digits: none),
optimizer.step. configure_optimizers returns the workload's Adam/AdamW/SGD.
training_step is the same step as torch_eager.py's (resnet: the digits
upsampled to image_size and repeated over 3 channels; lstm: the logits of
the model's (logits, hidden)) with the same metrics (digits: loss and
accuracy) and logs nothing (logger=False).

Trainer(accelerator=DEVICE, devices=1, max_steps=(K+R)*N, logger=False,
enable_progress_bar=False, enable_checkpointing=False,
enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0):
no validation (the module has no val_dataloader) and no checkpoint at any
time. The training loader is a plain torch DataLoader serving whole batches
gathered from memory (common.train_loader), as ctrial's loader and
torch_eager.py do.

Timing (common.Windows): a Callback's on_train_batch_end (after the
optimizer step) calls timer.step_end(loss); at the end of every N-th step
the timer reads the window's mean loss (.item()), synchronizes CUDA and
takes time.perf_counter(). A window is end-of-window to end-of-window: N
steps plus all of Lightning's per-batch work between them (hooks, the next
batch, batch transfer, loop bookkeeping). The first K windows (process
start-up, Trainer set-up) are dropped.

Prints one JSON line on stdout: {"system": "lightning", "workload",
"steps_per_s": [R], "final_loss" (last window's mean training loss),
"peak_rss_mb" (ru_maxrss of this process), "losses" (every window's mean,
warm-up included), ...}.
"""
import logging
import sys
import warnings

import torch

import common

try:
    import lightning as L
except ImportError as e:
    raise SystemExit(f"lightning_runner: {e}; install the benchmark dependencies: bash tools/bench-setup.sh")


class BenchModule(L.LightningModule):
    def __init__(self, W, workload, hp, timer, pin):
        super().__init__()
        self.W = W
        self.model = W.model
        self.charlm = common.is_lm(workload)
        self.grad_clip = hp.get("grad_clip", 1.0) if self.charlm else 0.0
        self.timer, self.pin = timer, pin

    def train_dataloader(self):
        return common.train_loader(self.W, self.timer.total_steps + 1, pin=self.pin)

    def configure_optimizers(self):
        return self.W.opt

    def training_step(self, batch, batch_idx):
        x, y = batch
        if self.charlm:
            return common.charlm_loss(self.W, self.model, x, y)
        out, loss = common.digits_step_loss(self.W, self.model, x, y)
        acc = (out.argmax(1) == y).float().mean()
        return {"loss": loss, "accuracy": acc.detach()}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        # The model's own parameter order (not the optimizer groups'), as
        # torch_eager.py: the same total norm to the last bit.
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.W.params, self.grad_clip)


class WindowTimer(L.Callback):
    def __init__(self, timer):
        self.timer = timer

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.timer.step_end(outputs["loss"])


def main():
    a = common.arg_parser(__doc__).parse_args()
    timer = common.Windows(a.window, a.windows, a.warmup_windows, a.device)
    hp, data, fused = common.setup(a)
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="lightning")
    device = torch.device(a.device)
    W = common.build_workload(a.workload, hp, data, a.seed, device, fused)
    W.model.train()
    module = BenchModule(W, a.workload, hp, timer, pin=device.type == "cuda")
    trainer = L.Trainer(accelerator="gpu" if device.type == "cuda" else "cpu", devices=1,
                        max_steps=timer.total_steps, max_epochs=-1,
                        logger=False, enable_progress_bar=False, enable_checkpointing=False,
                        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
                        callbacks=[WindowTimer(timer)])
    trainer.fit(module)
    res = timer.result("lightning", a.workload, {"device": a.device, "fused": fused, "lightning": L.__version__})
    print(common.json.dumps(res), flush=True)


if __name__ == "__main__":
    sys.exit(main())
