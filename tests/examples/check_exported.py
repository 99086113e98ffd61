"""Models exported from Python, trained through ct_main as a user trains
them, against the same modules trained in PyTorch.

    check_exported.py EXPORTED CHARLM MODEL

MODEL is resnet18 or mobilenet_v3_small (torchvision), vit (a ViT with
nn.TransformerEncoder, tests/export/models.py), trained by examples/exported
on the digits; or gpt (causal scaled_dot_product_attention, a dynamic
sequence length) or lstm (nn.LSTM, a static one: export specializes an
LSTM's length), charlm's own models of
bench/gpu/torch_eager.py, trained by charlm with "model": "exported". Each
is exported here by tools/export_model.py (seed 0), then:

1. 20 batches through ct_main on the CPU (one thread, a report every
   batch): every batch's training loss equals PyTorch's training of the
   same module from the same weights on the same batches (1e-6 relative;
   dropout's masks from the same seed);
2. the validation at batch 20 (one ran at 10 too) equals the module's own eval() on the
   validation data after those 20 steps in PyTorch (1e-6);
3. the checkpoint's models_state_dict[0] loads into a fresh module with
   strict=True and gives that validation again;
4. a run stopped at batch 10 (its last validation there, as the
   uninterrupted run's) and resumed (--resume latest) reports the
   same 20 losses and validation, and its checkpoint holds the same bytes;
5. under `mpirun -np 2` (skipped without mpirun) the losses equal 2-rank
   data parallelism computed in PyTorch: each rank a replica with its own
   BatchNorm statistics and the trial seed's dropout stream, on its shard
   of each global batch (element i to rank i % 2), the gradients averaged,
   the loss the mean of the ranks'; where the model has neither BatchNorm
   nor dropout, they equal 1 rank's too (1e-6).

Runs from the source tree, writes under <build>/tests/examples/exported_MODEL.
"""
import copy
import glob
import json
import math
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from harness import fail, mpirun_cmd, run_example, MPIRUN  # noqa: E402

SRC = os.environ["CTRIAL_SOURCE_DIR"]
DIGITS = os.path.join(SRC, "examples", "data", "digits")
TEXT = os.path.join(SRC, "examples", "data", "tinyshakespeare", "input.txt.gz")
sys.path.insert(0, os.path.join(SRC, "bench", "gpu"))
sys.path.insert(0, os.path.join(SRC, "tests", "export"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_eager as te  # noqa: E402

LM_HP = {"block_size": 32, "n_layer": 2, "n_head": 4, "n_embd": 64, "hidden_size": 64, "dropout": 0.1,
         "learning_rate": 1e-3, "beta2": 0.99, "weight_decay": 0.1, "grad_clip": 1.0}
CASES = {
    "resnet18": dict(kind="image", factory="torchvision.models:resnet18", args=[], kwargs={"num_classes": 10},
                     input="float32[N,3,32,32]", batch_norm=True),
    "mobilenet_v3_small": dict(kind="image", factory="torchvision.models:mobilenet_v3_small", args=[],
                               kwargs={"num_classes": 10}, input="float32[N,3,32,32]", batch_norm=True),
    "vit": dict(kind="image", factory=os.path.join(SRC, "tests", "export", "models.py") + ":ViT", args=[],
                kwargs={"dropout": 0.0}, input="float32[N,3,32,32]", batch_norm=False),
    "gpt": dict(kind="lm", factory=os.path.join(SRC, "bench", "gpu", "torch_eager.py") + ":charlm_model",
                args=[dict(LM_HP, model="gpt"), 65], kwargs={}, input="int64[N,T]", batch_norm=False),
    "lstm": dict(kind="lm", factory=os.path.join(SRC, "bench", "gpu", "torch_eager.py") + ":charlm_model",
                 args=[dict(LM_HP, model="lstm", dropout=0.0), 65], kwargs={}, input="int64[N,32]",
                 batch_norm=False),
}
BATCH = {"image": 16, "lm": 8}
REL = 1e-6


def close(a, b, rel=REL):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def build(case):
    """The module as tools/export_model.py builds it (seed 0)."""
    fac = __import__("export_model").load_factory(case["factory"])
    torch.manual_seed(0)
    return fac(*case["args"], **case["kwargs"])


def export(case, work):
    path = os.path.join(work, "model.pt2")
    run_example([sys.executable, os.path.join(SRC, "tools", "export_model.py"), case["factory"],
                 "--args", json.dumps(case["args"]), "--kwargs", json.dumps(case["kwargs"]),
                 "--input", case["input"], "--seed", "0", "-o", path], SRC, 600)
    return path


def write_config(case, work, name, pt2, batches):
    kind = case["kind"]
    base = os.path.join(SRC, "examples", *(("exported", "exported.json") if kind == "image" else
                                            ("charlm", "charlm.json")))
    with open(base) as f:
        cfg = json.load(f)
    hp = cfg["hyperparameters"]
    hp["global_batch_size"] = BATCH[kind]
    if kind == "image":
        hp["model"] = pt2
    else:
        hp.update({k: v for k, v in LM_HP.items() if k not in ("n_layer", "n_head", "n_embd", "hidden_size")})
        hp.update(model="exported", model_file=pt2, sample_tokens=0)
    cfg["searcher"]["max_length"] = {"batches": batches}
    cfg["scheduling_unit"] = 1
    cfg["min_validation_period"] = {"batches": 10}
    cfg["checkpoint_policy"] = "none"
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path, hp


def run_trial(exe, config, out, extra=(), np=0):
    cmd = mpirun_cmd(np, [exe, "--config", config, "--output", out, "--quiet", "--threads", "1", *extra])
    run_example(cmd, SRC, 900)
    with open(os.path.join(out, "metrics.jsonl")) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    losses = [r["metrics"]["loss"] for r in lines if r["group"] == "training"]
    val = [r for r in lines if r["group"] == "validation"]
    return losses, val[-1]["metrics"] if val else None, lines


def last_checkpoint(out):
    ckpts = sorted(glob.glob(os.path.join(out, "checkpoints", "ckpt-*")))
    if not ckpts:
        fail(f"no checkpoint in {out}")
    with open(os.path.join(ckpts[-1], "metadata.json")) as f:
        meta = json.load(f)
    return torch.load(os.path.join(ckpts[-1], "state_dict.pth"), weights_only=True), meta


# ---- PyTorch: the data, the steps, the validation ------------------------------------------


class Images:
    """examples/exported on the digits: the batches, inputs() and the step."""

    def __init__(self, case, hp, seed):
        x = te.read_idx(te.idx_file(DIGITS, "train-images-idx3-ubyte"))
        self.x = (x.float() / 255).unsqueeze(1)
        self.y = te.read_idx(te.idx_file(DIGITS, "train-labels-idx1-ubyte")).long()
        vx = te.read_idx(te.idx_file(DIGITS, "t10k-images-idx3-ubyte"))
        self.vx = self.inputs((vx.float() / 255).unsqueeze(1))
        self.vy = te.read_idx(te.idx_file(DIGITS, "t10k-labels-idx1-ubyte")).long()
        self.order = te.Shuffled(len(self.x), hp["global_batch_size"], seed)
        self.hp = hp

    @staticmethod
    def inputs(images):
        return F.interpolate(images, size=(32, 32), mode="bilinear", align_corners=False).expand(-1, 3, -1, -1)

    def batch(self):
        i = self.order.next()
        return self.x[i], self.y[i]

    def optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=self.hp["learning_rate"], momentum=self.hp["momentum"],
                               weight_decay=self.hp["weight_decay"])

    def loss(self, model, x, y):
        return F.cross_entropy(model(self.inputs(x)), y)

    clip = None

    def validate(self, model, batch):
        model.eval()
        torch.backends.mha.set_fastpath_enabled(False)  # the graph traced the layers' own code
        with torch.no_grad():
            out = model(self.vx)
        torch.backends.mha.set_fastpath_enabled(True)
        model.train()
        loss = F.cross_entropy(out, self.vy, reduction="sum").item() / len(self.vy)
        return {"validation_loss": loss, "validation_accuracy": (out.argmax(1) == self.vy).sum().item() / len(self.vy)}


class Text:
    """charlm: torch_eager's CharLM data and step (AdamW, clipping)."""

    def __init__(self, case, hp, seed):
        self.w = te.CharLM(dict(case["args"][0], global_batch_size=hp["global_batch_size"]), TEXT, seed,
                           torch.device("cpu"), False, False)
        self.hp, self.T = hp, hp["block_size"]

    def batch(self):
        return self.w.batch()

    def optimizer(self, model):
        params = list(model.parameters())
        return torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": self.hp["weight_decay"]},
                                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                                 lr=self.hp["learning_rate"], betas=(0.9, self.hp["beta2"]))

    def loss(self, model, x, y):
        return F.cross_entropy(te.logits_of(model, x).view(-1, self.w.V), y.view(-1))

    def clip(self, model):
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), self.hp["grad_clip"])

    def validate(self, model, batch):
        """charlm's evaluate_full_dataset: the windows in batches of the
        per-rank batch size, each batch's summed loss added up in float32
        (as the C trial adds them on the device), divided by the tokens."""
        ids, T = self.val_ids(), self.T
        n = (len(ids) - T - 1) // T + 1
        off = torch.arange(n).unsqueeze(1) * T + torch.arange(T)
        model.eval()
        total = None
        with torch.no_grad():
            for s in range(0, n, batch):
                x, y = ids[off[s:s + batch]], ids[off[s:s + batch] + 1]
                part = F.cross_entropy(te.logits_of(model, x).flatten(0, 1), y.flatten(), reduction="sum")
                total = part.clone() if total is None else total + part
        model.train()
        loss = total.item() / (n * T)
        return {"validation_loss": loss, "validation_perplexity": math.exp(loss)}

    def val_ids(self):
        import gzip
        with gzip.open(TEXT, "rb") as f:
            text = f.read()
        chars = sorted(set(text))
        lut = torch.full((256,), -1, dtype=torch.long)
        lut[torch.tensor(chars)] = torch.arange(len(chars))
        ids = lut[torch.frombuffer(bytearray(text), dtype=torch.uint8).long()]
        return ids[int(len(ids) * 0.9):]


def pytorch_run(case, hp, seed, steps, ranks=1, validate_every=10):
    """The module trained in PyTorch: `ranks` replicas (data parallelism as
    ctrial does it) on the same batches as ct_main. Each rank draws the
    _base_seed of the iterators Determined's loop makes (torch's DataLoader
    draws it from the global generator): the training iterator's at the
    start, a validation iterator's every validate_every batches (where the
    trial's validation iterates a loader on that rank). Returns
    (the losses as reported, rank 0's model, the data)."""
    data = (Images if case["kind"] == "image" else Text)(case, hp, seed)
    model = build(case)
    torch.manual_seed(seed)  # ct_fit seeds before init; loading the archive draws nothing
    reps = [model] + [copy.deepcopy(model) for _ in range(ranks - 1)]
    opts = [data.optimizer(m) for m in reps]
    torch.empty((), dtype=torch.int64).random_()  # the training iterator's _base_seed, as Determined's loop draws it
    rng = [torch.get_rng_state() for _ in reps]  # every rank seeds its generator with the trial seed
    losses = []
    for step in range(steps):
        if step and step % validate_every == 0:
            # the validation's iterator: on every rank for evaluate_batch
            # (the image trial), on rank 0 only for charlm's
            # evaluate_full_dataset, as Determined's chief alone iterates
            for r in range(ranks if case["kind"] == "image" else 1):
                torch.set_rng_state(rng[r])
                torch.empty((), dtype=torch.int64).random_()
                rng[r] = torch.get_rng_state()
        x, y = data.batch()
        per_rank = []
        for r, m in enumerate(reps):
            torch.set_rng_state(rng[r])
            loss = data.loss(m, x[r::ranks].contiguous(), y[r::ranks].contiguous())
            loss.backward()
            rng[r] = torch.get_rng_state()
            per_rank.append(loss.item())
        if ranks == 2:  # the average of the two ranks' gradients, on both
            for p0, p1 in zip(reps[0].parameters(), reps[1].parameters()):
                if p0.grad is not None:
                    p0.grad = (p0.grad + p1.grad) / 2
                    p1.grad = p0.grad.clone()
        for m, o in zip(reps, opts):
            if data.clip:
                data.clip(m)
            o.step()
            o.zero_grad(set_to_none=True)
        losses.append(sum(per_rank) / ranks)
    return losses, reps[0], data


def compare_losses(what, ours, theirs):
    if len(ours) != len(theirs):
        fail(f"{what}: {len(ours)} losses against {len(theirs)}")
    worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, theirs))
    print(f"{what}: ctrial {' '.join(f'{x:.7f}' for x in ours[:5])} ...")
    print(f"{what}: PyTorch {' '.join(f'{x:.7f}' for x in theirs[:5])} ... (largest relative difference {worst:.2e})")
    if worst > REL:
        bad = next(i for i, (a, b) in enumerate(zip(ours, theirs)) if not close(a, b))
        fail(f"{what}: batch {bad + 1}: ctrial {ours[bad]!r}, PyTorch {theirs[bad]!r}")


def compare_validation(what, ours, theirs):
    for k, v in theirs.items():
        if k not in ours or not close(ours[k], v):
            fail(f"{what}: {k}: ctrial {ours.get(k)!r}, PyTorch {v!r}")
    print(f"{what}: {theirs} equal")


def main():
    exe = {"image": sys.argv[1], "lm": sys.argv[2]}
    name = sys.argv[3]
    case = CASES[name]
    torch.set_num_threads(1)
    sys.path.insert(0, os.path.join(SRC, "tools"))
    work = os.path.join(os.environ["CTRIAL_BUILD_DIR"], "tests", "examples", "exported_" + name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    pt2 = export(case, work)
    trial = exe[case["kind"]]

    # 1-3: 20 batches, against PyTorch; the checkpoint in the module
    config, hp = write_config(case, work, "run20", pt2, 20)
    out = os.path.join(work, "run20")
    losses, val, _ = run_trial(trial, config, out)
    state, meta = last_checkpoint(out)
    seed = meta["trial_seed"]
    theirs, model, data = pytorch_run(case, hp, seed, 20)
    compare_losses(f"{name}: 20 batches", losses, theirs)
    compare_validation(f"{name}: validation after 20 batches, against the module's eval()", val,
                       data.validate(model, BATCH[case["kind"]]))
    fresh = build(case)
    fresh.load_state_dict(state["models_state_dict"][0], strict=True)  # raises on a missing or unexpected key
    compare_validation(f"{name}: the checkpoint loaded into the module (strict=True), its eval()", val,
                       data.validate(fresh, BATCH[case["kind"]]))

    # 4: stopped at 10, resumed
    config10, _ = write_config(case, work, "run10", pt2, 10)
    out2 = os.path.join(work, "resumed")
    first, _, _ = run_trial(trial, config10, out2)
    losses2, val2, _ = run_trial(trial, config, out2, ["--resume", "latest"])
    if losses2 != losses or val2 != val:
        fail(f"{name}: the resumed run differs: losses {losses2[8:12]} against {losses[8:12]}, validation {val2} "
             f"against {val}")
    state2, _ = last_checkpoint(out2)
    sd, sd2 = state["models_state_dict"][0], state2["models_state_dict"][0]
    if list(sd) != list(sd2) or any(not torch.equal(sd[k], sd2[k]) for k in sd):
        fail(f"{name}: the resumed run's checkpoint differs from the uninterrupted run's")
    print(f"{name}: stopped at batch 10 and resumed: the same 20 losses, validation and checkpoint, bit for bit")

    # 5: two ranks
    if MPIRUN is None:
        print("mpirun not found: the 2-rank check is skipped")
    else:
        out3 = os.path.join(work, "ranks2")
        losses3, val3, _ = run_trial(trial, config, out3, np=2)
        ddp, model2, data2 = pytorch_run(case, hp, seed, 20, ranks=2)
        compare_losses(f"{name}: 2 ranks, against 2-rank data parallelism in PyTorch", losses3, ddp)
        compare_validation(f"{name}: 2 ranks' validation, against rank 0's model in PyTorch", val3,
                           data2.validate(model2, BATCH[case["kind"]] // 2))
        dropout = case["args"][0]["dropout"] if case["kind"] == "lm" else case["kwargs"].get("dropout", 0.2)
        if not case["batch_norm"] and not dropout:
            compare_losses(f"{name}: 2 ranks against 1 rank", losses3, losses)
        else:  # each rank normalizes its own half-batch, or draws its own masks
            why = "BatchNorm's statistics are per rank" if case["batch_norm"] else "each rank draws its dropout masks"
            print(f"{name}: 2 ranks cannot equal 1 rank ({why}, as under DistributedDataParallel)")
    print(f"ok: {name} exported from Python trains through ct_main as in PyTorch")


if __name__ == "__main__":
    main()
