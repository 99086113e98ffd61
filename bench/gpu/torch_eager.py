#!/usr/bin/env python3
"""The bench/gpu workloads in plain PyTorch (eager, or whole-step CUDA graph
capture): the same model, data, hyperparameters, seed and steps as the
ctrial example programs that run.py measures beside it.

    torch_eager.py --workload digits|resnet|charlm --config CONFIG.json --data PATH
                   [--hparam K=V ...] [--device cuda] [--amp none|bf16]
                   [--fused auto|0|1] [--graphs] [--window N] [--windows R]
                   [--warmup-windows K] [--threads N]

CONFIG is the example's own experiment config (examples/mnist/mnist_cnn.json,
examples/resnet/resnet.json, examples/charlm/charlm.json or charlm_lstm.json);
its hyperparameters, with the --hparam overrides, define the model and the
optimizer exactly as the C trial reads them (charlm's hparam "model": "gpt"
or "lstm"). PATH is the digits folder (MNIST IDX files) or the text file.

What a step is, on both sides (ctrial's train_batch and this loop):
  digits:  out = model(x); loss = F.cross_entropy(out, y, label_smoothing);
           loss.backward(); Adam step; zero_grad(set_to_none=True);
           accuracy = (out.argmax(1) == y).float().mean()
  resnet:  x = F.interpolate(x, size=image_size, mode="bilinear").expand(-1, 3, -1, -1);
           out = resnet18(x); loss = F.cross_entropy(out, y); loss.backward();
           SGD step (momentum, weight decay); zero_grad(set_to_none=True);
           accuracy as digits
  charlm:  loss = F.cross_entropy(model(x).view(-1, V), y.view(-1));
           loss.backward(); clip_grad_norm_(params, grad_clip); AdamW step;
           zero_grad(set_to_none=True)
Each step's metrics stay on the device (detached) and a window's mean is
read once at its end, as ctrial's loop does at each report. Batches are
gathered on the CPU from the data in memory, pinned, and copied to the
device non-blocking, as ctrial's loader does (no worker threads on either
side). The order is Determined's: numpy RandomState(seed).shuffle of all
indices per pass, passes back to back, cut into batches -- the same batches
ctrial's loader serves (without numpy: torch.randperm, another order).

Timing: K + R windows of N steps; a window's time runs from the end of the
previous window (its metric read, which waits for the device) to the end of
its own. The first K windows (start-up, cuDNN/cuBLAS autotuning, graph
capture) are dropped. Prints one JSON line: steps/s of each kept window,
each window's mean loss, and what ran.

--graphs: PyTorch's whole-network capture (torch.cuda.graphs docs, "whole
network capture"): three eager steps on a side stream, then forward,
backward, clipping and the optimizer step captured once in a CUDA graph
and replayed for every later batch (copied into the static inputs); the
optimizer is fused and capturable.
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import numpy as np
except ImportError:  # the order then differs from ctrial's
    np = None


def parse_value(text):
    """--hparam values: JSON when they parse, else the text (as ct_main)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def load_hparams(config, overrides):
    with open(config) as f:
        hp = dict(json.load(f)["hyperparameters"])
    for kv in overrides:
        k, _, v = kv.partition("=")
        hp[k] = parse_value(v)
    return hp


# ---- data ---------------------------------------------------------------------


def read_idx(path):
    """An IDX file (plain or .gz) as a uint8 tensor of its header's shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise SystemExit(f"{path}: not a uint8 IDX file")
    shape = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(shape)


def idx_file(folder, name):
    path = os.path.join(folder, name + ".gz")
    return path if os.path.exists(path) else os.path.join(folder, name)


class Shuffled:
    """Determined's training chain: shuffle -> repeat -> batch."""

    def __init__(self, n, batch, seed):
        self.n, self.batch = n, batch
        self.rng = np.random.RandomState(seed) if np is not None else None
        self.gen = torch.Generator().manual_seed(seed)
        self.pass_ = []
        self.pos = 0

    def _next_pass(self):
        if self.rng is not None:
            idx = np.arange(self.n)
            self.rng.shuffle(idx)
            return torch.from_numpy(idx)
        return torch.randperm(self.n, generator=self.gen)

    def next(self):
        parts, need = [], self.batch
        while need:
            if self.pos == len(self.pass_):
                self.pass_, self.pos = self._next_pass(), 0
            take = min(need, len(self.pass_) - self.pos)
            parts.append(self.pass_[self.pos:self.pos + take])
            self.pos += take
            need -= take
        return parts[0] if len(parts) == 1 else torch.cat(parts)


# ---- models -------------------------------------------------------------------


def digits_cnn(hp, h, w):
    """examples/mnist's CNN (build_cnn), in nn.Sequential order."""
    f1, f2, hidden = hp.get("n_filters1", 32), hp.get("n_filters2", 64), hp.get("hidden", 128)
    bn = hp.get("batch_norm", False)
    layers = [nn.Conv2d(1, f1, 3, padding=1)] + ([nn.BatchNorm2d(f1)] if bn else []) + [nn.ReLU()]
    layers += [nn.Conv2d(f1, f2, 3, padding=1)] + ([nn.BatchNorm2d(f2)] if bn else []) + [nn.ReLU()]
    layers += [nn.MaxPool2d(2), nn.Dropout(hp.get("dropout1", 0.25)), nn.Flatten(),
               nn.Linear(f2 * (h // 2) * (w // 2), hidden), nn.ReLU(), nn.Dropout(hp.get("dropout2", 0.5)),
               nn.Linear(hidden, 10)]
    return nn.Sequential(*layers)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.n_embd, self.dropout = n_head, n_embd, dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd, dropout):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """examples/charlm's model (nanoGPT's, plain init, no weight tying)."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, dropout):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd), wpe=nn.Embedding(block_size, n_embd),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList([Block(n_embd, n_head, dropout) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


class RNNModel(nn.Module):
    """examples/charlm's LSTM model (hparam model "lstm"): PyTorch's
    examples/word_language_model RNNModel, batch first, untied, with a
    fresh state per window; forward(input, hidden=None) -> (logits, hidden)."""

    def __init__(self, ntoken, ninp, nhid, nlayers, dropout):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden=None):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        return self.decoder(self.drop(output)), hidden


def charlm_model(hp, vocab_size):
    """examples/charlm's model for hparam "model": "gpt" (default) or "lstm"."""
    kind = hp.get("model", "gpt")
    if kind == "lstm":
        return RNNModel(vocab_size, hp.get("n_embd", 64), hp.get("hidden_size", 128), hp.get("n_layer", 2),
                        hp.get("dropout", 0.1))
    if kind != "gpt":
        raise SystemExit(f"charlm: hparam model must be gpt or lstm, not {kind}")
    return GPT(vocab_size, hp.get("block_size", 64), hp.get("n_layer", 2), hp.get("n_head", 4),
               hp.get("n_embd", 128), hp.get("dropout", 0.1))


def logits_of(model, x):
    out = model(x)
    return out[0] if isinstance(out, tuple) else out


# ---- workloads: model, optimizer, batches, step ---------------------------------


class Digits:
    def __init__(self, hp, data, seed, device, fused, capturable):
        x = read_idx(idx_file(data, "train-images-idx3-ubyte"))
        self.x = (x.float() / 255).unsqueeze(1)           # [n, 1, h, w], as ToTensor()
        self.y = read_idx(idx_file(data, "train-labels-idx1-ubyte")).long()
        self.order = Shuffled(len(self.x), hp["global_batch_size"], seed)
        self.label_smoothing = hp.get("label_smoothing", 0.0)
        torch.manual_seed(seed)                              # as ct_fit before init
        self.model = digits_cnn(hp, self.x.shape[2], self.x.shape[3]).to(device)
        kw = dict(lr=hp.get("learning_rate", 1e-3))
        if fused:
            kw.update(fused=True, capturable=capturable)
        self.opt = torch.optim.Adam(self.model.parameters(), **kw)
        if hp.get("lr_gamma", 1.0) != 1.0:
            raise SystemExit("lr_gamma must be 1.0 here (no scheduler in the benchmark)")

    def batch(self):
        i = self.order.next()
        return self.x[i], self.y[i]

    def step(self, x, y):
        out = self.model(x)
        loss = F.cross_entropy(out, y, label_smoothing=self.label_smoothing)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        acc = (out.argmax(1) == y).float().mean()
        return loss.detach(), acc.detach()


class ResNet(Digits):
    """examples/resnet: torchvision's resnet18(num_classes=10) on the digits
    upsampled (bilinear) to image_size and repeated over 3 channels, SGD
    with momentum and weight decay."""

    def __init__(self, hp, data, seed, device, fused, capturable):
        import torchvision  # the workload needs it; the others do not
        super().__init__(hp, data, seed, device, fused, capturable)
        self.size = hp.get("image_size", 32)
        torch.manual_seed(seed)                              # the CNN above is thrown away
        self.model = torchvision.models.resnet18(num_classes=10).to(device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=hp.get("learning_rate", 0.02),
                                   momentum=hp.get("momentum", 0.9), weight_decay=hp.get("weight_decay", 5e-4),
                                   fused=fused or None)
        self.label_smoothing = 0.0

    def upsample(self, x):
        """A batch of digits as the model takes it: [B, 3, image_size, image_size]."""
        x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
        return x.expand(-1, 3, -1, -1)

    def step(self, x, y):
        return super().step(self.upsample(x), y)


def record_seed(seed, epoch, index):
    """data.h's ct_record_seed: the seed ctrial's loader gives record `index`
    in pass `epoch` of a loader seeded `seed`."""
    def splitmix64(x):
        z = (x + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        return z ^ (z >> 31)
    h = splitmix64(seed)
    h = splitmix64(h ^ epoch)
    return splitmix64(h ^ index) >> 1


class ResNetFolder(ResNet):
    """examples/resnet on image folders (resnet_folder.json): DATA/train and
    DATA/val read by ImageFolder with torchvision.io.decode_image(mode=RGB)
    (what ctrial decodes as), normalised by the training set's per-channel
    mean and std, the training images augmented by v2 transforms after
    torch.manual_seed(record_seed(seed, pass, index)), as ctrial's loader
    seeds each record (data.h), in a fork of the generator so that the
    model's own draws are not disturbed."""

    def __init__(self, hp, data, seed, device, fused, capturable):
        import torchvision
        from torchvision import datasets, io
        from torchvision.transforms import v2
        load = lambda p: io.decode_image(p, mode=io.ImageReadMode.RGB)  # noqa: E731
        self.train = datasets.ImageFolder(os.path.join(data, "train"), loader=load)
        self.val = datasets.ImageFolder(os.path.join(data, "val"), loader=load)
        to_tensor = v2.Lambda(lambda t: t.to(torch.float32).div(255))   # ToTensor's scaling
        pixels = torch.stack([to_tensor(img) for img, _ in self.train]).double()
        mean, std = pixels.mean((0, 2, 3)).tolist(), pixels.std((0, 2, 3), correction=0).tolist()
        S = hp.get("image_size", 32)
        self.augment = v2.Compose([
            v2.RandomResizedCrop(S, scale=(hp.get("crop_scale", 0.7), 1.0), antialias=True),
            v2.ColorJitter(brightness=0.4, contrast=0.4), to_tensor, v2.Normalize(mean, std)])
        self.evaluate = v2.Compose([v2.Resize((S, S), antialias=True), to_tensor, v2.Normalize(mean, std)])
        self.seed, self.served, self.B = seed, 0, hp["global_batch_size"]
        self.order = Shuffled(len(self.train), self.B, seed)
        torch.manual_seed(seed)
        self.model = torchvision.models.resnet18(num_classes=10).to(device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=hp.get("learning_rate", 0.02),
                                   momentum=hp.get("momentum", 0.9), weight_decay=hp.get("weight_decay", 5e-4),
                                   fused=fused or None)
        self.label_smoothing = 0.0

    def batch(self):
        xs, ys = [], []
        for j, i in enumerate(self.order.next().tolist()):
            epoch = (self.served + j) // len(self.train)   # one rank: record k of the stream
            img, label = self.train[i]
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(record_seed(self.seed, epoch, i))
                xs.append(self.augment(img))
            ys.append(label)
        self.served += len(ys)
        return torch.stack(xs), torch.tensor(ys)

    def upsample(self, x):
        return x


class CharLM:
    def __init__(self, hp, data, seed, device, fused, capturable):
        opener = gzip.open if data.endswith(".gz") else open
        with opener(data, "rb") as f:
            text = f.read()
        chars = sorted(set(text))                             # bytes, as the C trial
        lut = torch.full((256,), -1, dtype=torch.long)
        lut[torch.tensor(chars)] = torch.arange(len(chars))
        ids = lut[torch.frombuffer(bytearray(text), dtype=torch.uint8).long()]
        n_train = int(len(ids) * 0.9)
        self.train = ids[:n_train]
        self.T = hp.get("block_size", 64)
        self.V = len(chars)
        self.arange = torch.arange(self.T)
        self.order = Shuffled(n_train - self.T, hp["global_batch_size"], seed)
        self.grad_clip = hp.get("grad_clip", 1.0)
        torch.manual_seed(seed)
        self.model = charlm_model(hp, self.V).to(device)
        params = list(self.model.parameters())
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": hp.get("weight_decay", 0.1)},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        kw = dict(lr=hp.get("learning_rate", 1e-3), betas=(0.9, hp.get("beta2", 0.99)))
        if fused:
            kw.update(fused=True, capturable=capturable)
        self.opt = torch.optim.AdamW(groups, **kw)
        self.params = params

    def batch(self):
        off = self.order.next().unsqueeze(1) + self.arange    # [B, T] offsets
        return self.train[off], self.train[off + 1]

    def step(self, x, y):
        logits = logits_of(self.model, x)
        loss = F.cross_entropy(logits.view(-1, self.V), y.view(-1))
        loss.backward()
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return (loss.detach(),)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=["digits", "resnet", "resnet_folder", "charlm"], required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--hparam", action="append", default=[])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--amp", choices=["none", "bf16"], default="none")
    ap.add_argument("--fused", choices=["auto", "0", "1"], default="auto",
                    help="fused Adam/AdamW (charlm) or SGD (resnet): auto = the example's choice (the hparam "
                         "fused; charlm: on CUDA)")
    ap.add_argument("--graphs", action="store_true", help="capture the whole step in a CUDA graph")
    ap.add_argument("--window", type=int, default=100, help="steps per timed window")
    ap.add_argument("--windows", type=int, default=5, help="timed windows kept")
    ap.add_argument("--warmup-windows", type=int, default=1, help="windows dropped first")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deterministic", action="store_true",
                    help="torch.use_deterministic_algorithms(True), cuDNN deterministic (ctrial's --deterministic)")
    a = ap.parse_args()
    if a.deterministic:  # before CUDA starts: cuBLAS reads its workspace setting once
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False

    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if a.graphs and not cuda:
        raise SystemExit("--graphs needs a CUDA device")
    hp = load_hparams(a.config, a.hparam)
    if a.fused == "auto":
        fused = bool(hp.get("fused", cuda if a.workload == "charlm" else False))
    else:
        fused = a.fused == "1"
    if a.graphs:
        fused = True
    W = {"digits": Digits, "resnet": ResNet, "resnet_folder": ResNetFolder, "charlm": CharLM}[a.workload](hp, a.data, a.seed, device, fused,
                                                                            a.graphs)
    W.model.train()
    # Determined's loop makes its training iterator here, and torch's
    # DataLoader draws the workers' _base_seed from the global generator as
    # it does: ctrial draws it too, so the dropout masks that follow agree.
    torch.empty((), dtype=torch.int64).random_()

    def to_device(t):
        return t.pin_memory().to(device, non_blocking=True) if cuda else t

    def eager(x, y):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.amp == "bf16"):
            return W.step(x, y)

    graph = None
    static = None
    if a.graphs:
        # Whole-network capture: warm up on a side stream, then capture.
        x0, y0 = (to_device(t) for t in W.batch())
        static = (x0.clone(), y0.clone())
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                eager(*static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        W.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_out = eager(*static)
    # The three warm-up steps train on the first batch (ctrial warms up on
    # batches 0-2), so graph-mode losses agree with ctrial's within the
    # tolerance, not step for step.

    def run_step():
        x, y = W.batch()
        if graph is None:
            return eager(to_device(x), to_device(y))
        static[0].copy_(x.pin_memory(), non_blocking=True)
        static[1].copy_(y.pin_memory(), non_blocking=True)
        graph.replay()
        return tuple(t.clone() for t in static_out)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    windows = []
    sync()
    t0 = time.perf_counter()
    for w in range(a.warmup_windows + a.windows):
        metrics = [run_step() for _ in range(a.window)]
        loss = torch.stack([m[0] for m in metrics]).float().mean().item()   # waits for the device
        sync()
        t1 = time.perf_counter()
        windows.append({"steps": a.window, "seconds": t1 - t0, "loss": loss})
        t0 = t1
    kept = windows[a.warmup_windows:]
    print(json.dumps({
        "impl": "torch-graphs" if a.graphs else "eager", "workload": a.workload, "amp": a.amp, "fused": fused,
        "device": str(device), "torch": torch.__version__, "numpy_order": np is not None,
        "steps_per_s": [k["steps"] / k["seconds"] for k in kept], "losses": [k["loss"] for k in windows],
        "final_loss": kept[-1]["loss"] if kept else math.nan,
    }))


if __name__ == "__main__":
    sys.exit(main())
