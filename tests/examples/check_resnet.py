"""examples/resnet against torchvision, run as a user runs it.

    check_resnet.py RESNET

resnet.json cut to 10 batches of 16 (a report every 5, a validation and a
checkpoint at 10) trains through ct_main on the CPU (one thread), and:

1. its training losses equal bench/gpu/torch_eager.py's `resnet` workload,
   torchvision.models.resnet18(num_classes=10) in plain PyTorch with the same
   seed and batches, to 1e-5 relative: the same initial weights (torchvision's
   construction order and kaiming redraws), data order and upsampling;
2. the checkpoint's model state dict loads into
   torchvision.models.resnet18(num_classes=10) with strict=True, and that
   model, in eval mode on the validation digits upsampled the same way,
   gives the validation_loss ctrial reported (1e-5 relative) and the same
   validation_accuracy;
3. with the hyperparameters amp=bf16 and fused=true, its training losses
   equal the same workload's under torch.autocast("cpu", torch.bfloat16)
   with torch.optim.SGD(fused=True).

Runs from the source tree, writes under <build>/tests/examples/resnet.
"""
import glob
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import fail, run_example  # noqa: E402
SRC = os.environ["CTRIAL_SOURCE_DIR"]
DIGITS = os.path.join(SRC, "examples", "data", "digits")
sys.path.insert(0, os.path.join(SRC, "bench", "gpu"))



def run(cmd):
    return run_example(cmd, SRC, 600)


def train_cut(exe, name, config_name, edit=None):
    """examples/resnet/CONFIG_NAME cut to 10 batches of 16 (a report every
    5, a validation and a checkpoint at 10), edit(cfg, work folder) applied, trained
    through ct_main under <build>/tests/examples/NAME on one thread. Returns
    (cfg, the config's path, the output folder, the training losses, the
    validation metrics)."""
    work = os.path.join(os.environ["CTRIAL_BUILD_DIR"], "tests", "examples", name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(os.path.join(SRC, "examples", "resnet", config_name)) as f:
        cfg = json.load(f)
    cfg["hyperparameters"]["global_batch_size"] = 16
    cfg["searcher"]["max_length"] = {"batches": 10}
    cfg["scheduling_unit"] = 5
    cfg["min_validation_period"] = {"batches": 10}
    if edit:
        edit(cfg, work)
    config = os.path.join(work, config_name)
    with open(config, "w") as f:
        json.dump(cfg, f)
    out = os.path.join(work, "out")
    run([exe, "--config", config, "--output", out, "--quiet", "--threads", "1"])
    with open(os.path.join(out, "metrics.jsonl")) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    ours = [r["metrics"]["loss"] for r in lines if r["group"] == "training"]
    val = [r["metrics"] for r in lines if r["group"] == "validation"]
    return cfg, config, out, ours, val


def check_losses(ours, workload, config, data, extra=()):
    """The two reported training losses equal torch_eager.py's WORKLOAD's
    on DATA (1e-5 relative); extra: torch_eager's --amp and --fused."""
    p = run([sys.executable, os.path.join(SRC, "bench", "gpu", "torch_eager.py"), "--workload", workload,
             "--config", config, "--data", data, "--device", "cpu", "--threads", "1",
             "--window", "5", "--windows", "1", "--warmup-windows", "1", *extra])
    theirs = json.loads(p.stdout.strip().splitlines()[-1])
    if not theirs["numpy_order"]:
        print("SKIP: numpy is missing, so the PyTorch side cannot draw ctrial's batch order")
        sys.exit(77)
    print("ctrial     :", " ".join(f"{x:.7f}" for x in ours))
    print("torchvision:", " ".join(f"{x:.7f}" for x in theirs["losses"]))
    if len(ours) != 2 or len(theirs["losses"]) != 2:
        fail("expected two training reports on each side")
    for i, (x, y) in enumerate(zip(ours, theirs["losses"])):
        if abs(x - y) > 1e-5 * abs(y):
            fail(f"batches {5 * i + 1}-{5 * i + 5}: ctrial {x!r}, PyTorch {y!r}")


def check_validation(out, val, x, y):
    """The one checkpoint's model state dict loads into torchvision's
    resnet18 (strict), and that model, in eval mode on inputs x with labels
    y, gives the validation ctrial reported."""
    import torch
    import torch.nn.functional as F
    import torchvision

    ckpts = glob.glob(os.path.join(out, "checkpoints", "ckpt-*", "state_dict.pth"))
    if len(ckpts) != 1 or len(val) != 1:
        fail(f"expected one checkpoint and one validation, got {ckpts} and {val}")
    sd = torch.load(ckpts[0], weights_only=True)["models_state_dict"][0]
    model = torchvision.models.resnet18(num_classes=10)
    model.load_state_dict(sd, strict=True)  # raises on a missing, unexpected or mis-shaped key
    model.eval()
    with torch.no_grad():
        out_ = model(x)
    loss = F.cross_entropy(out_, y, reduction="sum").item() / len(y)
    accuracy = (out_.argmax(1) == y).sum().item() / len(y)
    print(f"validation: ctrial loss {val[0]['validation_loss']!r} accuracy {val[0]['validation_accuracy']!r}; "
          f"torchvision loss {loss!r} accuracy {accuracy!r}")
    # ctrial's accuracy is a sum of per-batch shares (correct / n), Python's
    # one quotient: the same count of right answers can differ in the last
    # bit, while one answer more or less moves it by 1/n
    if abs(val[0]["validation_loss"] - loss) > 1e-5 * abs(loss) or abs(val[0]["validation_accuracy"] - accuracy) > 1e-9:
        fail("torchvision's resnet18 with the checkpoint's weights does not give ctrial's validation")


def main():
    cfg, config, out, ours, val = train_cut(sys.argv[1], "resnet", "resnet.json")
    check_losses(ours, "resnet", config, DIGITS)

    import torch
    import torch.nn.functional as F
    import torch_eager as te

    torch.set_num_threads(1)
    x = (te.read_idx(te.idx_file(DIGITS, "t10k-images-idx3-ubyte")).float() / 255).unsqueeze(1)
    y = te.read_idx(te.idx_file(DIGITS, "t10k-labels-idx1-ubyte")).long()
    size = cfg["hyperparameters"]["image_size"]
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False).expand(-1, 3, -1, -1)
    check_validation(out, val, x, y)
    print("ok: the same training losses as torchvision's resnet18, and the checkpoint loads into it (strict) "
          "with the same validation")

    # The hyperparameters amp and fused: bf16 autocast and torch.optim.SGD's
    # fused kernel, against torchvision's resnet18 under the same.
    def amp_fused(c, work):
        c["hyperparameters"].update(amp="bf16", fused=True)
    _, config, _, ours, _ = train_cut(sys.argv[1], "resnet_amp_fused", "resnet.json", amp_fused)
    check_losses(ours, "resnet", config, DIGITS, ("--amp", "bf16", "--fused", "1"))
    print("ok: amp=bf16 and fused=true give torchvision's losses under bf16 autocast and fused SGD")


if __name__ == "__main__":
    main()
