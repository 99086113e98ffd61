"""Writes the bundled digits as two image folders, one sub-folder per class,
as torchvision's ImageFolder reads them: the training digits as PNG files,
the validation digits as JPEG files (quality 95).

    python examples/resnet/digit_folders.py [OUT]     # default: out/digit_folders

OUT/train/<label>/<n>.png and OUT/val/<label>/<n>.jpg, 8x8 grayscale (the
images ImageFolder's loader, and ctrial's, convert to RGB). Needs numpy and
Pillow. resnet_folder.json trains on them.
"""
import gzip
import os
import struct
import sys

import numpy as np
from PIL import Image

DIGITS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "digits")


def read_idx(name):
    with gzip.open(os.path.join(DIGITS, name + ".gz"), "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def write(images, labels, folder, ext):
    for n, (img, label) in enumerate(zip(images, labels)):
        d = os.path.join(folder, str(label))
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"{n:04d}.{ext}")
        Image.fromarray(img).save(path, **({"quality": 95} if ext == "jpg" else {}))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("out", "digit_folders")
    write(read_idx("train-images-idx3-ubyte"), read_idx("train-labels-idx1-ubyte"), os.path.join(out, "train"), "png")
    write(read_idx("t10k-images-idx3-ubyte"), read_idx("t10k-labels-idx1-ubyte"), os.path.join(out, "val"), "jpg")
    print(f"wrote {out}/train (PNG) and {out}/val (JPEG)")


if __name__ == "__main__":
    main()
