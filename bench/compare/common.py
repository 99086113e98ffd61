"""Shared by det_runner.py and lightning_runner.py: the workloads (model,
optimizer, data order, step) taken from bench/gpu/torch_eager.py, the
batch-level data loader both frameworks train from, and the window timer.

Nothing here is copied from torch_eager.py: it is imported, so the models,
the numpy RandomState shuffle and the hyperparameter handling are the same
code the plain-PyTorch side runs. The one addition is the digits MLP
(examples/mnist's build_mlp), which torch_eager.py does not have.
"""
import argparse
import json
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
import torch_eager as te  # noqa: E402

# Issue 8's workloads: the example's own config plus the benchmark's
# overrides (StepLR off: lr_gamma 1.0, as bench/gpu; torch_eager refuses
# a scheduler; no sampling after the char LMs' training), and the workload of
# torch_eager.py that trains it (None: the MLP, which it lacks).
WORKLOADS = {
    "mlp": dict(config="examples/mnist/mnist_mlp.json", data="examples/data/digits", eager=None,
                hparams={"lr_gamma": 1.0}),                                   # batch 32
    "cnn": dict(config="examples/mnist/mnist_cnn.json", data="examples/data/digits", eager="digits",
                hparams={"global_batch_size": 128, "lr_gamma": 1.0}),
    "charlm": dict(config="examples/charlm/charlm.json", data="examples/data/tinyshakespeare/input.txt.gz",
                   eager="charlm", hparams={"global_batch_size": 16, "sample_tokens": 0}),
    "resnet": dict(config="examples/resnet/resnet.json", data="examples/data/digits", eager="resnet",
                   hparams={}),                                               # batch 32
    "lstm": dict(config="examples/charlm/charlm_lstm.json", data="examples/data/tinyshakespeare/input.txt.gz",
                 eager="charlm", hparams={"sample_tokens": 0}),               # batch 32
}


def digits_mlp(hp, h, w):
    """examples/mnist's MLP (build_mlp), in nn.Sequential order."""
    hidden = hp.get("hidden", 128)
    return nn.Sequential(nn.Flatten(), nn.Linear(h * w, hidden), nn.ReLU(),
                         nn.Dropout(hp.get("dropout2", 0.5)), nn.Linear(hidden, 10))


class DigitsMLP(te.Digits):
    """te.Digits with the MLP: the CNN it builds is thrown away and the
    generator re-seeded, so the MLP's weights (and the dropout masks after
    them) are those of torch.manual_seed(seed) followed by building the MLP
    alone, as in examples/mnist."""

    def __init__(self, hp, data, seed, device, fused, capturable):
        super().__init__(hp, data, seed, device, fused, capturable)
        torch.manual_seed(seed)
        self.model = digits_mlp(hp, self.x.shape[2], self.x.shape[3]).to(device)
        kw = dict(lr=hp.get("learning_rate", 1e-3))
        if fused:
            kw.update(fused=True, capturable=capturable)
        self.opt = torch.optim.Adam(self.model.parameters(), **kw)


def build_workload(name, hp, data, seed, device, fused):
    cls = {None: DigitsMLP, "digits": te.Digits, "resnet": te.ResNet, "charlm": te.CharLM}[WORKLOADS[name]["eager"]]
    return cls(hp, data, seed, device, fused, False)


def is_lm(name):
    """charlm and lstm: te.CharLM's step (clipping, no accuracy)."""
    return WORKLOADS[name]["eager"] == "charlm"


def gather(W, i):
    """The batch of sample indices i, gathered from the data in memory, as
    te.Digits.batch / te.CharLM.batch do."""
    if isinstance(W, te.CharLM):
        off = i.unsqueeze(1) + W.arange
        return W.train[off], W.train[off + 1]
    return W.x[i], W.y[i]


class _OrderSampler(torch.utils.data.Sampler):
    """Yields W.order.next() -- one batch of indices per item, in the order
    torch_eager.py (and ctrial's loader) uses -- `length` times."""

    def __init__(self, W, length):
        self.W, self.length = W, length

    def __len__(self):
        return self.length

    def __iter__(self):
        for _ in range(self.length):
            yield self.W.order.next()


class _BatchGather(torch.utils.data.Dataset):
    def __init__(self, W):
        self.W = W

    def __getitem__(self, i):
        return gather(self.W, i)


def train_loader(W, length, pin):
    """A plain torch DataLoader that serves whole batches gathered in the
    main process (batch_size=None, no workers), as ctrial's loader and
    torch_eager.py do. Its own generator keeps DataLoader from drawing its
    base seed from the global generator (which would shift the dropout
    masks relative to torch_eager.py)."""
    return torch.utils.data.DataLoader(_BatchGather(W), batch_size=None, sampler=_OrderSampler(W, length),
                                       num_workers=0, pin_memory=pin, generator=torch.Generator())


def val_loader(W, batches=1):
    """A tiny validation loader (the first `batches` sequential batches),
    only so the frameworks' end-of-fit validation is quick."""
    B = W.order.batch
    idx = [torch.arange(k * B, (k + 1) * B) for k in range(batches)]
    return torch.utils.data.DataLoader([gather(W, i) for i in idx], batch_size=None, num_workers=0,
                                       generator=torch.Generator())


def digits_step_loss(W, model, x, y):
    if isinstance(W, te.ResNet):
        x = W.upsample(x)
    out = model(x)
    loss = F.cross_entropy(out, y, label_smoothing=W.label_smoothing)
    return out, loss


def charlm_loss(W, model, x, y):
    return F.cross_entropy(te.logits_of(model, x).view(-1, W.V), y.view(-1))


class Windows:
    """Window timer: call step_end(loss) once per training step, at the end
    of the step (after the optimizer step). Every `window` steps it reads
    the window's mean loss (one .item(), which waits for the device, as
    torch_eager.py's read) and synchronizes CUDA, then takes
    time.perf_counter(). A window runs from the previous window's end to its
    own, so it holds `window` steps and everything the framework does
    between them (fetching the next batch, metric bookkeeping, reports).
    The first window starts when the timer is made (before the framework's
    own start-up) and is dropped with the other warm-up windows."""

    def __init__(self, window, windows, warmup_windows, device):
        self.window, self.windows, self.warmup = window, windows, warmup_windows
        self.cuda = torch.device(device).type == "cuda"
        self.total_steps = window * (windows + warmup_windows)
        self.losses, self.records, self.count = [], [], 0
        self.t0 = time.perf_counter()

    def step_end(self, loss):
        self.count += 1
        if self.count > self.total_steps:
            return
        self.losses.append(loss.detach())
        if self.count % self.window == 0:
            mean = torch.stack(self.losses).float().mean().item()
            if self.cuda:
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            self.records.append({"steps": self.window, "seconds": t1 - self.t0, "loss": mean})
            self.losses = []
            self.t0 = t1

    def result(self, system, workload, extra):
        kept = self.records[self.warmup:]
        if len(self.records) != self.windows + self.warmup:
            raise SystemExit(f"{system}: {len(self.records)} windows timed, expected "
                             f"{self.windows + self.warmup} (did training stop early?)")
        out = {
            "system": system, "workload": workload,
            "steps_per_s": [k["steps"] / k["seconds"] for k in kept],
            "final_loss": kept[-1]["loss"] if kept else float("nan"),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            "losses": [r["loss"] for r in self.records],
            "window": self.window, "windows": self.windows, "warmup_windows": self.warmup,
            "torch": torch.__version__, "threads": torch.get_num_threads(),
        }
        out.update(extra)
        return out


def arg_parser(doc):
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    ap.add_argument("--config", help="experiment config (default: the workload's example config)")
    ap.add_argument("--data", help="digits folder or text file (default: the bundled data)")
    ap.add_argument("--hparam", action="append", default=[], help="K=V over the config's (after the workload's)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--window", type=int, default=100, help="steps per timed window")
    ap.add_argument("--windows", type=int, default=5, help="timed windows kept")
    ap.add_argument("--warmup-windows", type=int, default=1, help="windows dropped first")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (0: leave torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    return ap


def libtorch_cmd(binary, workload, hp, data, window, windows, warmup_windows, threads, seed):
    """The command line of the hand-written libtorch loop (libtorch_loop.cpp)
    for these resolved hyperparameters: every number or flag as --hp K=V
    (strings such as "model" are the workload's choice, not a value)."""
    cmd = [binary, "--workload", workload, "--data", data, "--window", str(window), "--windows", str(windows),
           "--warmup-windows", str(warmup_windows), "--threads", str(threads), "--seed", str(seed)]
    for k, v in sorted(hp.items()):
        if isinstance(v, bool):
            cmd += ["--hp", f"{k}={'true' if v else 'false'}"]
        elif isinstance(v, (int, float)):
            cmd += ["--hp", f"{k}={v!r}"]
    return cmd


def setup(a):
    """Threads, hyperparameters (config + workload overrides + --hparam),
    data path and the fused choice, as torch_eager.py's --fused auto."""
    if a.threads:
        torch.set_num_threads(a.threads)
    w = WORKLOADS[a.workload]
    config = a.config or os.path.join(ROOT, w["config"])
    data = a.data or os.path.join(ROOT, w["data"])
    overrides = [f"{k}={json.dumps(v)}" for k, v in w["hparams"].items()] + a.hparam
    hp = te.load_hparams(config, overrides)
    if hp.get("lr_gamma", 1.0) != 1.0:
        raise SystemExit("lr_gamma must be 1.0 here (no scheduler in the benchmark)")
    cuda = a.device == "cuda"
    fused = bool(hp.get("fused", cuda if is_lm(a.workload) else False))
    return hp, data, fused
