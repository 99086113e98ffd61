"""examples/charlm, run as a user runs it, in three checks.

    check_charlm.py CHARLM train-and-sample
    check_charlm.py CHARLM matches-pytorch
    check_charlm.py CHARLM lstm

train-and-sample: charlm.json cut to 40 batches (a report every 10, a
validation at 20 and 40) trains through ct_main: exit 0; the training loss
falls (last report at least 0.4 below the first, about 3.7 -> 2.8); the
validation loss is below ln(65) (a uniform guess) with perplexity exp(loss);
the sample printed after training is there. Then `charlm sample CKPT` prints
exactly --tokens characters (and a newline), all from the text's
vocabulary; the same --seed prints the same text; --prompt starts it.

matches-pytorch: 30 batches through ct_main on the CPU (one thread) beside
bench/gpu/torch_eager.py, the same model in plain PyTorch with the same
seed and batches: the mean losses of batches 1-10, 11-20 and 21-30 agree to
1e-5 (relative): the same weights, data order and dropout masks.

lstm: the same with charlm_lstm.json (the LSTM model, batch 32) beside
torch_eager.py's RNNModel; then the checkpoint written at batch 30 loads
into that RNNModel with strict=True (PyTorch's names: encoder.weight,
rnn.weight_ih_l0, ..., decoder.bias) and gives, over the validation windows,
the validation_loss ctrial reported (1e-5 relative); and `charlm sample` on
it prints --tokens characters from the vocabulary, the same for the same
--seed. Then under AMP on the CPU: --hparam amp=bf16 trains (test mode),
and amp=fp16 fails as torch's own fp16 LSTM on the CPU does, with
libtorch's reason after "LSTM: ".

Runs from the source tree, writes under <build>/tests/examples/charlm_*.
"""
import glob
import gzip
import json
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import fail, run_example  # noqa: E402
SRC = os.environ["CTRIAL_SOURCE_DIR"]
TEXT = os.path.join(SRC, "examples", "data", "tinyshakespeare", "input.txt.gz")



def run(cmd, timeout=300):
    return run_example(cmd, SRC, timeout)


def config(out, name, batches, report, validate, sample_tokens, base="charlm.json"):
    with open(os.path.join(SRC, "examples", "charlm", base)) as f:
        cfg = json.load(f)
    cfg["searcher"]["max_length"] = {"batches": batches}
    cfg["scheduling_unit"] = report
    if validate:
        cfg["min_validation_period"] = {"batches": validate}
    else:
        cfg.pop("min_validation_period", None)
        cfg["checkpoint_policy"] = "none"
    cfg["hyperparameters"]["sample_tokens"] = sample_tokens
    path = os.path.join(out, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def training_losses(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    train = [r for r in lines if r["group"] == "training"]
    return [r["metrics"]["loss"] for r in train], [r for r in lines if r["group"] == "validation"]


def train_and_sample(exe, work):
    out = os.path.join(work, "train")
    p = run([exe, "--config", config(work, "train", 40, 10, 20, 60), "--output", out, "--quiet", "--threads", "1"])
    losses, val = training_losses(out)
    print("training loss by report:", " ".join(f"{x:.4f}" for x in losses))
    if len(losses) != 4 or not all(math.isfinite(x) for x in losses):
        fail(f"expected 4 finite training reports, got {losses}")
    if not losses[-1] <= losses[0] - 0.4:
        fail(f"the training loss did not fall by 0.4: {losses[0]:.4f} -> {losses[-1]:.4f}")
    if [r["batches"] for r in val] != [20, 40]:
        fail(f"validations at {[r['batches'] for r in val]}, expected [20, 40]")
    vl, ppl = val[-1]["metrics"]["validation_loss"], val[-1]["metrics"]["validation_perplexity"]
    print(f"validation_loss {vl:.4f}, validation_perplexity {ppl:.3f}")
    if not (vl < math.log(65) and abs(ppl - math.exp(vl)) < 1e-6 * ppl):
        fail("validation_loss is not below ln(65), or the perplexity is not exp(loss)")
    if "---- sample (60 characters" not in p.stdout:
        fail("no sample after training on stdout")

    with gzip.open(TEXT, "rb") as f:
        vocab = set(f.read().decode("ascii"))
    ckpts = sorted(glob.glob(os.path.join(out, "checkpoints", "ckpt-*")))
    if not ckpts:
        fail("no checkpoint")
    ckpt = ckpts[-1]

    def sample(*args):
        s = run([exe, "sample", ckpt, *args]).stdout
        if not s.endswith("\n"):
            fail("the sample does not end with a newline")
        return s[:-1]

    a = sample("--tokens", "200", "--seed", "3")
    print(repr(a[:80]) + "...")
    if len(a) != 200:
        fail(f"--tokens 200 printed {len(a)} characters")
    if not set(a) <= vocab:
        fail(f"characters outside the vocabulary: {sorted(set(a) - vocab)}")
    if sample("--tokens", "200", "--seed", "3") != a:
        fail("the same --seed sampled another text")
    b = sample("--tokens", "50", "--seed", "4", "--prompt", "ROMEO:", "--temperature", "0.5")
    if not (b.startswith("ROMEO:") and len(b) == 6 + 50 and set(b) <= vocab):
        fail(f"--prompt ROMEO: --tokens 50 printed {b!r}")
    print("ok: loss fell, validation below ln(65), samples of the right length from the vocabulary, seeded")


def matches_pytorch(exe, work, base="charlm.json", validate=0):
    cfg = config(work, "parity", 30, 10, validate, 0, base)
    out = os.path.join(work, "parity")
    run([exe, "--config", cfg, "--output", out, "--quiet", "--threads", "1"])
    ours, val = training_losses(out)
    p = run([sys.executable, os.path.join(SRC, "bench", "gpu", "torch_eager.py"), "--workload", "charlm",
             "--config", cfg, "--data", TEXT, "--device", "cpu", "--threads", "1",
             "--window", "10", "--windows", "2", "--warmup-windows", "1"])
    theirs = json.loads(p.stdout.strip().splitlines()[-1])
    if not theirs["numpy_order"]:
        print("SKIP: numpy is missing, so the PyTorch side cannot draw ctrial's batch order")
        sys.exit(77)
    torch_losses = theirs["losses"]
    print("ctrial :", " ".join(f"{x:.7f}" for x in ours))
    print("PyTorch:", " ".join(f"{x:.7f}" for x in torch_losses))
    if len(ours) != 3 or len(torch_losses) != 3:
        fail("expected three windows on each side")
    for i, (x, y) in enumerate(zip(ours, torch_losses)):
        if abs(x - y) > 1e-5 * abs(y):
            fail(f"batches {10 * i + 1}-{10 * i + 10}: ctrial {x!r}, PyTorch {y!r}")
    print("ok: ctrial's charlm and the PyTorch model train to the same losses")
    return cfg, out, val


def lstm(exe, work):
    cfg, out, val = matches_pytorch(exe, work, "charlm_lstm.json", validate=30)
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(SRC, "bench", "gpu"))
    import torch_eager as te

    torch.set_num_threads(1)
    with open(cfg) as f:
        hp = json.load(f)["hyperparameters"]
    with gzip.open(TEXT, "rb") as f:
        text = f.read()
    chars = sorted(set(text))
    lut = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([lut[c] for c in text])
    held = data[int(len(data) * 0.9):]
    T = hp["block_size"]
    n = (len(held) - T - 1) // T + 1
    x = torch.stack([held[i * T:i * T + T] for i in range(n)])
    y = torch.stack([held[i * T + 1:i * T + T + 1] for i in range(n)])
    ckpts = sorted(glob.glob(os.path.join(out, "checkpoints", "ckpt-*")))
    if len(ckpts) != 1 or len(val) != 1:
        fail(f"expected one checkpoint and one validation, got {ckpts} and {len(val)}")
    sd = torch.load(os.path.join(ckpts[0], "state_dict.pth"), weights_only=True)["models_state_dict"][0]
    model = te.charlm_model(hp, len(chars))
    model.load_state_dict(sd, strict=True)  # raises on a missing, unexpected or mis-shaped key
    model.eval()
    with torch.no_grad():
        loss = F.cross_entropy(model(x)[0].flatten(0, 1), y.flatten(), reduction="sum").item() / y.numel()
    mine = val[0]["metrics"]["validation_loss"]
    print(f"validation_loss: ctrial {mine!r}, RNNModel with the checkpoint {loss!r}")
    if abs(mine - loss) > 1e-5 * loss:
        fail("the checkpoint in PyTorch's RNNModel does not give ctrial's validation loss")

    def sample(*args):
        s = run([exe, "sample", ckpts[0], *args]).stdout
        return s[:-1] if s.endswith("\n") else fail("the sample does not end with a newline")

    a = sample("--tokens", "100", "--seed", "5")
    print(repr(a))
    if len(a) != 100 or not set(a.encode()) <= set(chars) or sample("--tokens", "100", "--seed", "5") != a:
        fail("the LSTM's sample is not 100 characters of the vocabulary, the same for the same seed")
    print("ok: the LSTM checkpoint loads into PyTorch's RNNModel with ctrial's validation loss, and samples")

    # Under AMP on the CPU: bf16 trains, validates and checkpoints; fp16
    # fails as torch's does (oneDNN's LSTM has no float16 kernel), with
    # libtorch's reason after the layer's name, not a NULL further on.
    base = os.path.join(SRC, "examples", "charlm", "charlm_lstm.json")
    run([exe, "--config", base, "--hparam", "amp=bf16", "--test-mode", "--device", "cpu", "--threads", "1",
         "--output", os.path.join(work, "amp_bf16")])
    with torch.autocast("cpu", dtype=torch.float16):
        try:
            torch.nn.LSTM(4, 5)(torch.zeros(3, 2, 4))
            torch_fails = False
        except RuntimeError:
            torch_fails = True
    p = run_example([exe, "--config", base, "--hparam", "amp=fp16", "--test-mode", "--device", "cpu", "--threads",
                     "1", "--output", os.path.join(work, "amp_fp16")], SRC, 300, expect=1 if torch_fails else 0)
    if torch_fails and "train_batch: LSTM: could not create a primitive descriptor" not in p.stderr:
        fail(f"fp16 LSTM on the CPU: expected libtorch's reason after 'LSTM: ', got {p.stderr[-500:]!r}")
    print("ok: the LSTM under AMP: bf16 trains; fp16 " + ("fails as torch's does" if torch_fails else "trains"))


def main():
    exe, check = sys.argv[1], sys.argv[2]
    work = os.path.join(os.environ["CTRIAL_BUILD_DIR"], "tests", "examples", "charlm_" + check)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    {"train-and-sample": train_and_sample, "matches-pytorch": matches_pytorch, "lstm": lstm}[check](exe, work)


if __name__ == "__main__":
    main()
