"""examples/charlm, run as a user runs it, in two checks.

    check_charlm.py CHARLM train-and-sample
    check_charlm.py CHARLM matches-pytorch

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

Runs from the source tree, writes under <build>/tests/examples/charlm_*.
"""
import glob
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import time

SRC = os.environ["CTRIAL_SOURCE_DIR"]
TEXT = os.path.join(SRC, "examples", "data", "tinyshakespeare", "input.txt.gz")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(cmd, timeout=300):
    print("$", " ".join(cmd))
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=SRC, capture_output=True, text=True, timeout=timeout)
    print(f"exit code {p.returncode} after {time.monotonic() - t0:.1f} s")
    if p.returncode != 0:
        sys.stdout.write(p.stdout[-3000:] + p.stderr[-3000:])
        fail(f"exit code {p.returncode}")
    return p


def config(out, name, batches, report, validate, sample_tokens):
    with open(os.path.join(SRC, "examples", "charlm", "charlm.json")) as f:
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


def matches_pytorch(exe, work):
    cfg = config(work, "parity", 30, 10, 0, 0)
    out = os.path.join(work, "parity")
    run([exe, "--config", cfg, "--output", out, "--quiet", "--threads", "1"])
    ours, _ = training_losses(out)
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


def main():
    exe, check = sys.argv[1], sys.argv[2]
    work = os.path.join(os.environ["CTRIAL_BUILD_DIR"], "tests", "examples", "charlm_" + check)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    {"train-and-sample": train_and_sample, "matches-pytorch": matches_pytorch}[check](exe, work)


if __name__ == "__main__":
    main()
