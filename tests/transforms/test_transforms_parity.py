"""ctrial's transforms (vision.h) against torchvision.transforms.v2, pixel for pixel.

    test_transforms_parity.py TF_DUMP

Each case is an image (uint8 or float32, [C, H, W] as decode_image gives it:
a permuted HWC buffer), a list of steps and a seed. ctrial applies the steps
with ct_rng_new(seed) (tests/transforms/tf_dump.c); Python applies the same
v2 transforms after torch.manual_seed(seed). The outputs must be equal:
same dtype, same shape, the same bits. Random transforms are run under many
seeds, so that their draws (crop boxes, flips, jitter factors and order)
are compared too, not only their kernels.
"""
import os
import sys
import tempfile

import numpy as np
import torch
import torchvision.transforms.functional as F1
from torchvision.transforms import v2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, run_cmd  # noqa: E402

torch.set_num_threads(1)
DTYPES = {"uint8": torch.uint8, "float32": torch.float32}


def image(h, w, c, dtype, seed):
    """Smooth gradients plus noise: edges and flat parts for the resamplers."""
    g = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(w - 1, 1) + k * 40) % 256 for k in range(c)], -1)
    base = base * 0.6 + (y[..., None] * 97 % 256) * 0.2 + g.integers(0, 52, (h, w, c))
    hwc = np.clip(base, 0, 255).astype(np.uint8)
    if dtype == "f32":
        hwc = (hwc.astype(np.float32) / 255.0).astype(np.float32)
    return np.ascontiguousarray(hwc)


def twin(step):
    """The v2 transform of one step's text."""
    name, *a = step.split(":")
    if name == "resize":
        h, w, m = int(a[0]), int(a[1]), int(a[2])
        return v2.Resize(h if w == 0 else (h, w), max_size=m or None, antialias=True)
    if name == "center":
        return v2.CenterCrop((int(a[0]), int(a[1])))
    if name == "rrc":
        return v2.RandomResizedCrop((int(a[0]), int(a[1])), scale=(float(a[2]), float(a[3])),
                                    ratio=(float(a[4]), float(a[5])), antialias=True)
    if name == "crop":
        pad = [int(v) for v in a[2:6]]
        fill = float(a[7])
        fill = int(fill) if fill == int(fill) else fill
        return v2.RandomCrop((int(a[0]), int(a[1])), padding=pad if any(pad) else None,
                             pad_if_needed=a[6] == "1", fill=fill, padding_mode=a[8])
    if name == "flip":
        return v2.RandomHorizontalFlip(float(a[0]))
    if name == "jitter":
        return v2.ColorJitter(*(float(v) for v in a[:4]))
    if name == "totensor":  # ToTensor on the HWC array the image came from
        return v2.Lambda(lambda t: F1.to_tensor(t.permute(1, 2, 0).contiguous().numpy()))
    if name == "normalize":
        return v2.Normalize([float(v) for v in a[0].split(",")], [float(v) for v in a[1].split(",")])
    raise ValueError(step)


def cases():
    """(label, (h, w, c, dtype), steps, seeds)"""
    rgb, wide, gray, big, f32 = (37, 53, 3, "u8"), (48, 64, 3, "u8"), (29, 31, 1, "u8"), (120, 90, 3, "u8"), (37, 53, 3, "f32")
    few, many = [None], list(range(12))
    yield "resize smaller edge", rgb, ["resize:24:0:0"], few
    yield "resize to (h, w)", rgb, ["resize:24:32:0"], few
    yield "resize up", wide, ["resize:70:0:0"], few
    yield "resize with max_size", big, ["resize:20:0:25"], few
    yield "resize gray", gray, ["resize:16:0:0"], few
    yield "resize float32", f32, ["resize:24:0:0"], few
    yield "center crop", rgb, ["center:20:21"], few
    yield "center crop odd margins", wide, ["center:31:40"], few
    yield "center crop larger than the image (pads)", rgb, ["center:40:60"], few
    yield "random resized crop", big, ["rrc:32:32:0.08:1:0.75:1.3333333333333333"], many
    yield "random resized crop, narrow ratio (fallback)", wide, ["rrc:24:24:0.95:1:5:6"], many[:4]
    yield "random resized crop float32", f32, ["rrc:16:20:0.3:1:0.75:1.3333333333333333"], many[:6]
    for mode in ("constant", "edge", "reflect", "symmetric"):
        yield f"random crop padded ({mode})", rgb, [f"crop:32:32:4:3:2:5:0:0:{mode}"], many[:6]
    yield "random crop fill 7", gray, ["crop:29:31:2:2:2:2:0:7:constant"], many[:4]
    yield "random crop pad_if_needed", rgb, ["crop:48:60:0:0:0:0:1:0:constant"], many[:4]
    yield "random crop without padding", big, ["crop:64:64:0:0:0:0:0:0:constant"], many[:6]
    yield "horizontal flip", rgb, ["flip:0.5"], many
    yield "color jitter", rgb, ["jitter:0.4:0.4:0.4:0.1"], many
    yield "color jitter hue only", wide, ["jitter:0:0:0:0.5"], many[:6]
    yield "color jitter gray", gray, ["jitter:0.5:0.5:0.5:0.2"], many[:6]
    yield "color jitter float32", f32, ["jitter:0.4:0.4:0.4:0.1"], many[:6]
    yield "ImageNet training pipeline", big, ["rrc:32:32:0.08:1:0.75:1.3333333333333333", "flip:0.5", "totensor",
                                              "normalize:0.485,0.456,0.406:0.229,0.224,0.225"], many
    yield "evaluation pipeline", big, ["resize:36:0:0", "center:32:32", "totensor",
                                       "normalize:0.485,0.456,0.406:0.229,0.224,0.225"], few
    yield "CIFAR pipeline", rgb, ["crop:32:32:4:4:4:4:0:0:constant", "flip:0.5", "jitter:0.2:0.2:0.2:0",
                                  "totensor", "normalize:0.5,0.5,0.5:0.25,0.25,0.25"], many


def main():
    tf_dump = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        lines, expected = [], []
        for k, (label, (h, w, c, dt), steps, seeds) in enumerate(cases()):
            hwc = image(h, w, c, dt, k)
            src = os.path.join(tmp, f"in{k}.raw")
            hwc.tofile(src)
            for seed in seeds:
                out = os.path.join(tmp, f"out{k}_{seed}.raw")
                lines.append(" ".join([src, str(h), str(w), str(c), dt, "none" if seed is None else str(seed), out,
                                       *steps]))
                img = torch.from_numpy(hwc).permute(2, 0, 1)  # decode_image's layout
                torch.manual_seed(0 if seed is None else seed)
                want = v2.Compose([twin(s) for s in steps])(img)
                expected.append((f"{label} (seed {seed})", out, want))
        # Refusals: each case's output holds the error.
        errors = [("Normalize of a uint8 image", ["normalize:0.5:0.5"], "float tensor"),
                  ("a crop larger than the image", ["crop:64:64:0:0:0:0:0:0:constant"], "larger than")]
        hwc = image(37, 53, 3, "u8", 99)
        src = os.path.join(tmp, "err.raw")
        hwc.tofile(src)
        for i, (label, steps, words) in enumerate(errors):
            lines.append(" ".join([src, "37", "53", "3", "u8", "1", os.path.join(tmp, f"err{i}.out"), *steps]))
        cases_path = os.path.join(tmp, "cases.txt")
        with open(cases_path, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = run_cmd([tf_dump, cases_path], 300)
        check(r.returncode == 0, f"tf_dump ran every case and freed every tensor (exit {r.returncode}) {r.stderr[-400:]}")
        for label, out, want in expected:
            if not os.path.exists(out):
                check(False, f"{label}: no output")
                continue
            with open(out, "rb") as f:
                head = f.readline().decode().split()
                data = f.read()
            if head[0] == "error":
                check(False, f"{label}: ctrial failed: {' '.join(head)}")
                continue
            got = torch.frombuffer(bytearray(data), dtype=DTYPES[head[0]]).reshape([int(v) for v in head[1:]])
            same = got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want.contiguous())
            detail = ""
            if not same and got.shape == want.shape:
                diff = (got.double() - want.double()).abs()
                detail = f" (max diff {diff.max().item():.3g}, {int((diff > 0).sum())} of {diff.numel()} differ)"
            check(same, f"{label}: {head[0]} {list(got.shape)} equals torchvision's {str(want.dtype)[6:]} "
                        f"{list(want.shape)}{detail}")
        for i, (label, steps, words) in enumerate(errors):
            with open(os.path.join(tmp, f"err{i}.out")) as f:
                text = f.read()
            check(text.startswith("error") and words in text and "[3, 37, 53]" in text,
                  f"{label} is refused, naming the problem and the image: {text.strip()[:160]}")
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        sys.exit(1)


if __name__ == "__main__":
    main()
