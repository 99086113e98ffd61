"""ctrial's image pipeline vs torchvision's, side by side in one run.

An image folder decoded and augmented, images/s with 0 and 2 workers:

  ctrial       bench_images: ct_dataset_image_folder -> ct_dataset_transform
               (Compose(crop, RandomHorizontalFlip, ToTensor, Normalize))
               -> ct_loader (batch 64, shuffle, W workers)
  tv PIL       torchvision.datasets.ImageFolder(root, transform=v2.Compose(
               [crop, v2.RandomHorizontalFlip(), v2.ToTensor(), v2.Normalize]))
               with its default loader (PIL), torch.utils.data.DataLoader(
               batch_size=64, shuffle=True, num_workers=W); what users write
  tv tensor    the same with loader=lambda p: decode_image(p, mode=RGB) and
               v2.ToDtype(torch.float32, scale=True) for ToTensor

on three folders, generated on the first run and kept under --data:

  jpeg    10 classes x 64 images, JPEG quality 90, sides drawn in [300, 500]
          px, smooth random content (noise at four scales plus fine grain:
          about 77 KB a file); crop RandomResizedCrop(224) (scale (0.08, 1),
          ratio (3/4, 4/3)), Normalize with ImageNet's mean and std
  png     the same images as PNG
  digits  the 1797 bundled digits (examples/data/digits, 8x8, upscaled to
          28x28) as gray PNGs in 10 class folders; crop RandomCrop(28,
          padding=2): small images, where the per-image overhead shows

The DataLoaders keep their workers between passes (persistent_workers), as
ctrial's loader does. Each measurement: one warm-up pass (page cache, workers
started), then --passes timed passes (3 times as many for the digits, whose
passes are short); its figure is images / time over them.
Every (folder, workers, system) is measured once per round, the systems in a
rotating order, --rounds rounds; the table shows the medians and the ratios
ctrial / torchvision. Workers run single-threaded in both libraries; with 0
workers the calling process loads with libtorch's default intra-op threads
(both sides). --parts adds where one image's time goes, on one thread:
decoding, then each step of the chain (bench_images parts, and PIL / v2 /
decode_image timed alike here).

usage: python bench/loader/images.py [--build build] [--data DIR] [--rounds 5] [--passes 3]
                                     [--sets jpeg,png,digits] [--workers 0,2] [--parts] [--json PATH]
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import pil_loader
from torchvision.io import ImageReadMode, decode_image
from torchvision.transforms import v2

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BATCH = 64
SYSTEMS = ("ctrial", "tv PIL", "tv tensor")
DATA_VERSION = "1"  # bump when the generated folders change

# name -> (image size, crop, passes per --passes): crop "rrc" is RandomResizedCrop,
# "pad" RandomCrop(padding=2); the digits' passes are short (0.1 s): 3 per --passes
SETS = {"jpeg": (224, "rrc", 1), "png": (224, "rrc", 1), "digits": (28, "pad", 3)}

warnings.filterwarnings("ignore", message=".*ToTensor.*")  # v2.ToTensor is deprecated; users still write it


# ---- data --------------------------------------------------------------------

def smooth_image(rng, h, w):
    """A photo-like RGB image: random noise at four scales, upscaled, plus fine grain."""
    img = np.zeros((h, w, 3), np.float32)
    for cells, amp in ((3, 90), (12, 45), (48, 20), (160, 16)):
        low = ((rng.normal(0, 1, (cells, cells, 3)) * 40) + 128).clip(0, 255).astype(np.uint8)
        img += (np.asarray(Image.fromarray(low).resize((w, h), Image.BICUBIC), np.float32) - 128) / 40 * amp
    img += 128 + rng.normal(0, 10, (h, w, 1))
    return Image.fromarray(img.clip(0, 255).astype(np.uint8))


def make_data(root):
    """The three folders under root, written once (deterministic)."""
    stamp = os.path.join(root, "done")
    if os.path.exists(stamp) and open(stamp).read() == DATA_VERSION:
        return
    print(f"writing the image folders under {root} ...", flush=True)
    rng = np.random.default_rng(0)
    for c in range(10):
        for i in range(64):
            h, w = (int(v) for v in rng.integers(300, 501, 2))
            img = smooth_image(rng, h, w)
            for kind in ("jpeg", "png"):
                d = os.path.join(root, kind, f"class{c}")
                os.makedirs(d, exist_ok=True)
                if kind == "jpeg":
                    img.save(os.path.join(d, f"{i:03d}.jpg"), quality=90)
                else:
                    img.save(os.path.join(d, f"{i:03d}.png"))
    digits = os.path.join(REPO, "examples", "data", "digits")
    n = 0
    for part in ("train", "t10k"):
        with gzip.open(os.path.join(digits, f"{part}-images-idx3-ubyte.gz")) as f:
            raw = f.read()
        with gzip.open(os.path.join(digits, f"{part}-labels-idx1-ubyte.gz")) as f:
            labels = f.read()[8:]
        count, rows, cols = (int.from_bytes(raw[k:k + 4], "big") for k in (4, 8, 12))
        pixels = np.frombuffer(raw[16:], np.uint8).reshape(count, rows, cols)
        for k in range(count):
            d = os.path.join(root, "digits", str(labels[k]))
            os.makedirs(d, exist_ok=True)
            Image.fromarray(pixels[k]).resize((28, 28), Image.BICUBIC).save(os.path.join(d, f"{n:04d}.png"))
            n += 1
    with open(stamp, "w") as f:
        f.write(DATA_VERSION)


# ---- the systems ---------------------------------------------------------------

def v2_chain(size, crop, tensor_path):
    first = (v2.RandomResizedCrop(size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)) if crop == "rrc"
             else v2.RandomCrop(size, padding=2))
    scale = v2.ToDtype(torch.float32, scale=True) if tensor_path else v2.ToTensor()
    return [first, v2.RandomHorizontalFlip(0.5), scale, v2.Normalize(MEAN, STD)]


def torchvision_folder(root, size, crop, tensor_path):
    transform = v2.Compose(v2_chain(size, crop, tensor_path))
    if tensor_path:
        return ImageFolder(root, loader=lambda p: decode_image(p, mode=ImageReadMode.RGB), transform=transform)
    return ImageFolder(root, transform=transform)


def run_torchvision(root, size, crop, tensor_path, workers, passes, seed):
    torch.manual_seed(seed)
    ds = torchvision_folder(root, size, crop, tensor_path)
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers, persistent_workers=workers > 0)
    rates = []
    for p in range(passes + 1):  # pass 0 warms up (and starts the workers)
        t0 = time.perf_counter()
        images = sum(len(y) for _, y in loader)
        dt = time.perf_counter() - t0
        assert images == len(ds)
        if p > 0:
            rates.append(images / dt)
    del loader
    return rates


def run_ctrial(prog, root, size, crop, workers, passes):
    out = subprocess.run([prog, "loader", root, str(size), str(workers), str(BATCH), str(passes), crop],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["images_per_s"]


def overall(rates):
    """images / time over passes of equal size: the harmonic mean of the rates."""
    return len(rates) / sum(1 / r for r in rates)


# ---- where the time goes ---------------------------------------------------------

def torchvision_parts(root, size, crop, tensor_path):
    """Mean us per image of decoding and of each v2 step, one thread."""
    paths = [p for p, _ in ImageFolder(root).samples]
    steps = v2_chain(size, crop, tensor_path)
    decode = (lambda p: decode_image(p, mode=ImageReadMode.RGB)) if tensor_path else pil_loader
    for _ in range(2):  # the first pass warms up
        t = [0.0] * 5
        for i, path in enumerate(paths):
            torch.manual_seed(i)
            t0 = time.perf_counter()
            x = decode(path)
            t[0] += time.perf_counter() - t0
            for k, step in enumerate(steps):
                t0 = time.perf_counter()
                x = step(x)
                t[k + 1] += time.perf_counter() - t0
    return dict(zip(("decode", "crop", "flip", "to_tensor", "normalize"), (1e6 * v / len(paths) for v in t)))


def parts(prog, data, sets):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    print("\nwhere one image's time goes, one thread: mean us per image")
    cols = ("decode", "crop", "flip", "to_tensor", "normalize")
    print(f"{'set':<7} {'system':<10}" + "".join(f"{c:>10}" for c in cols) + f"{'total':>10}")
    out = []
    for name in sets:
        size, crop, _ = SETS[name]
        root = os.path.join(data, name)
        c = json.loads(subprocess.run([prog, "parts", root, str(size), crop], check=True, capture_output=True,
                                      text=True).stdout)["us_per_image"]
        rows = {"ctrial": c, "tv PIL": torchvision_parts(root, size, crop, False),
                "tv tensor": torchvision_parts(root, size, crop, True)}
        for system, r in rows.items():
            print(f"{name:<7} {system:<10}" + "".join(f"{r[k]:>10.1f}" for k in cols) + f"{sum(r.values()):>10.1f}")
            out.append({"set": name, "system": system, "us_per_image": r})
    torch.set_num_threads(threads)
    return out


# ---- the run ------------------------------------------------------------------------

def load():
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def table(runs, sets, workers):
    """Prints the medians and ratios; returns them as rows."""
    print(f"\n{'set':<7} {'workers':>7} {'ctrial':>9} {'tv PIL':>9} {'tv tensor':>10} {'vs PIL':>7} "
          f"{'vs tensor':>10}")
    rows = []
    for name in sets:
        for w in workers:
            m = {s: statistics.median(runs[name, w, s]) for s in SYSTEMS}
            r_pil, r_tensor = m["ctrial"] / m["tv PIL"], m["ctrial"] / m["tv tensor"]
            print(f"{name:<7} {w:>7} {m['ctrial']:>9.0f} {m['tv PIL']:>9.0f} {m['tv tensor']:>10.0f} "
                  f"{r_pil:>6.2f}x {r_tensor:>9.2f}x")
            rows.append({"set": name, "workers": w, "median_images_per_s": m, "ratio_vs_pil": r_pil,
                         "ratio_vs_tensor": r_tensor, "rounds": {s: runs[name, w, s] for s in SYSTEMS}})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("CTRIAL_BUILD_DIR", "build"))
    ap.add_argument("--data", default="/tmp/ctrial_bench_images", help="where the image folders are kept")
    ap.add_argument("--rounds", type=int, default=5, help="0: only --parts")
    ap.add_argument("--passes", type=int, default=3, help="timed passes per measurement, after a warm-up pass")
    ap.add_argument("--sets", default="jpeg,png,digits")
    ap.add_argument("--workers", default="0,2")
    ap.add_argument("--parts", action="store_true", help="also time decoding and each step alone, one thread")
    ap.add_argument("--json", metavar="PATH", help="also write every measurement to PATH as one JSON object")
    args = ap.parse_args()
    prog = os.path.join(args.build, "bench", "loader", "bench_images")
    if not os.path.exists(prog):
        sys.exit(f"{prog} not found: build it first (ninja -C {args.build} bench_images)")
    sets = [s for s in args.sets.split(",") if s]
    workers = [int(w) for w in args.workers.split(",") if w]
    make_data(args.data)

    load_before = load()
    print("$ " + " ".join([os.path.relpath(sys.executable, REPO)] + sys.argv))
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, Pillow {PIL.__version__}; "
          f"{os.cpu_count()} CPUs, intra-op threads {torch.get_num_threads()}; load average before: {load_before}")
    print(f"batch {BATCH}, shuffle; {args.rounds} rounds, each measurement a warm-up pass then {args.passes} "
          f"timed passes; images/s, median over rounds\n", flush=True)
    runs = {}  # (set, workers, system) -> [round figure]
    raw = []
    for rnd in range(args.rounds):
        for name in sets:
            size, crop, more = SETS[name]
            root = os.path.join(args.data, name)
            passes = args.passes * more
            for w in workers:
                k = rnd % len(SYSTEMS)
                for system in SYSTEMS[k:] + SYSTEMS[:k]:  # rotating order
                    if system == "ctrial":
                        rates = run_ctrial(prog, root, size, crop, w, passes)
                    else:
                        rates = run_torchvision(root, size, crop, system == "tv tensor", w, passes, rnd)
                    runs.setdefault((name, w, system), []).append(overall(rates))
                    raw.append({"round": rnd, "set": name, "workers": w, "system": system, "images_per_s": rates})
        print(f"round {rnd + 1}/{args.rounds} done, load average {load()}", flush=True)

    rows = table(runs, sets, workers) if args.rounds > 0 else []
    load_after = load()
    print(f"\nload average after: {load_after}")
    for row in rows:  # issue 19's bar: >= 2x torchvision's DataLoader over ImageFolder (its default, PIL, loader)
        print(f"{row['set']}, workers {row['workers']}: ctrial vs ImageFolder + DataLoader {row['ratio_vs_pil']:.2f}x "
              f"(>= 2x: {'yes' if row['ratio_vs_pil'] >= 2 else 'NO'}); "
              f"vs the decode_image loader {row['ratio_vs_tensor']:.2f}x")
    part_rows = parts(prog, args.data, sets) if args.parts else []
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "images", "rows": rows, "raw": raw, "parts": part_rows, "meta": {
                "torch": torch.__version__, "torchvision": torchvision.__version__, "pillow": PIL.__version__,
                "cpus": os.cpu_count(), "batch": BATCH, "rounds": args.rounds, "passes": args.passes,
                "load_before": load_before, "load_after": load_after}}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
