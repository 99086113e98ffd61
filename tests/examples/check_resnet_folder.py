"""examples/resnet on image folders (resnet_folder.json) against torchvision.

    check_resnet_folder.py RESNET

The bundled digits are written out as an image folder of PNG files
(training) and one of JPEG files (validation) by
examples/resnet/digit_folders.py. resnet_folder.json cut to 10 batches of
16 (a report every 5, a validation and a checkpoint at 10) trains on them
through ct_main with 2 loader workers, and:

1. its training losses equal bench/gpu/torch_eager.py's `resnet_folder`
   workload to 1e-5 relative: ImageFolder read with decode_image, the
   training set's mean/std, RandomResizedCrop + ColorJitter + ToTensor +
   Normalize from torchvision.transforms.v2 after
   torch.manual_seed(record_seed(seed, pass, index)), the same batches and
   torchvision's resnet18 with the same initial weights;
2. the checkpoint's model, loaded into torchvision.models.resnet18 (strict),
   on the validation folder through Resize + ToTensor + Normalize, gives the
   validation_loss (1e-5 relative) and validation_accuracy ctrial reported.

Runs from the source tree, writes under <build>/tests/examples/resnet_folder.
"""
import glob
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import fail, run_example  # noqa: E402
SRC = os.environ["CTRIAL_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SRC, "bench", "gpu"))


def run(cmd):
    return run_example(cmd, SRC, 600)


def main():
    exe = sys.argv[1]
    work = os.path.join(os.environ["CTRIAL_BUILD_DIR"], "tests", "examples", "resnet_folder")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    folders = os.path.join(work, "digits")
    subprocess.run([sys.executable, os.path.join(SRC, "examples", "resnet", "digit_folders.py"), folders], check=True)
    with open(os.path.join(SRC, "examples", "resnet", "resnet_folder.json")) as f:
        cfg = json.load(f)
    cfg["hyperparameters"]["global_batch_size"] = 16
    cfg["searcher"]["max_length"] = {"batches": 10}
    cfg["scheduling_unit"] = 5
    cfg["min_validation_period"] = {"batches": 10}
    cfg["data"].update(train_folder=os.path.join(folders, "train"), val_folder=os.path.join(folders, "val"), workers=2)
    config = os.path.join(work, "resnet_folder.json")
    with open(config, "w") as f:
        json.dump(cfg, f)
    out = os.path.join(work, "out")
    run([exe, "--config", config, "--output", out, "--quiet", "--threads", "1"])
    with open(os.path.join(out, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    ours = [r["metrics"]["loss"] for r in lines if r["group"] == "training"]
    val = [r["metrics"] for r in lines if r["group"] == "validation"]

    p = run([sys.executable, os.path.join(SRC, "bench", "gpu", "torch_eager.py"), "--workload", "resnet_folder",
             "--config", config, "--data", folders, "--device", "cpu", "--threads", "1",
             "--window", "5", "--windows", "1", "--warmup-windows", "1"])
    theirs = json.loads(p.stdout.strip().splitlines()[-1])
    print("ctrial     :", " ".join(f"{x:.7f}" for x in ours))
    print("torchvision:", " ".join(f"{x:.7f}" for x in theirs["losses"]))
    if len(ours) != 2 or len(theirs["losses"]) != 2:
        fail("expected two training reports on each side")
    for i, (x, y) in enumerate(zip(ours, theirs["losses"])):
        if abs(x - y) > 1e-5 * abs(y):
            fail(f"batches {5 * i + 1}-{5 * i + 5}: ctrial {x!r}, PyTorch {y!r}")

    import torch
    import torch.nn.functional as F
    import torchvision
    import torch_eager as te

    torch.set_num_threads(1)
    ckpts = glob.glob(os.path.join(out, "checkpoints", "ckpt-*", "state_dict.pth"))
    if len(ckpts) != 1 or len(val) != 1:
        fail(f"expected one checkpoint and one validation, got {ckpts} and {val}")
    model = torchvision.models.resnet18(num_classes=10)
    model.load_state_dict(torch.load(ckpts[0], weights_only=True)["models_state_dict"][0], strict=True)
    model.eval()
    twin = te.ResNetFolder(cfg["hyperparameters"], folders, 0, torch.device("cpu"), False, False)
    x = torch.stack([twin.evaluate(img) for img, _ in twin.val])
    y = torch.tensor(twin.val.targets)
    with torch.no_grad():
        logits = model(x)
    loss = F.cross_entropy(logits, y, reduction="sum").item() / len(y)
    accuracy = (logits.argmax(1) == y).sum().item() / len(y)
    print(f"validation: ctrial loss {val[0]['validation_loss']!r} accuracy {val[0]['validation_accuracy']!r}; "
          f"torchvision loss {loss!r} accuracy {accuracy!r}")
    if abs(val[0]["validation_loss"] - loss) > 1e-5 * abs(loss) or val[0]["validation_accuracy"] != accuracy:
        fail("torchvision's resnet18 with the checkpoint's weights does not give ctrial's validation")
    print("ok: the same training losses as torchvision's resnet18 on the augmented image folders, and the "
          "same validation from the checkpoint")


if __name__ == "__main__":
    main()
