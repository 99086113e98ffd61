"""ct_dataset_image_folder against torchvision.datasets.ImageFolder.

A tree with classes in tricky orders ("b", "a", "B", "a b", "10", "9", a
hidden one, one reached through a symbolic link), nested folders whose
sorted path strings differ from a depth-first walk ("sub", "sub b",
"sub-1", "sub.x", "sub/deeper"), upper-case extensions, a file named
".png", files that do not count ("notes.txt", "png"), a linked folder and
a linked file inside a class, files and a broken link in the root (not
classes): folder_dump reads it with ctrial, and torchvision's ImageFolder
(DatasetFolder for other extensions) with decode_image in the same mode;
the classes, their order, the samples' paths and order, their labels and
pixels must be the same. 16-bit PNGs beside 8-bit ones in an RGB folder
are 8-bit as ImageFolder's own loader (PIL) gives them, so they collate;
in UNCHANGED they stay 16-bit, as decode_image gives them. Then the errors, each against what torchvision
does: an empty class (and allow_empty), no class folder, a missing root, a
root that is a file, a .bmp that counts (refused; accepted when the
extensions leave it out), and a corrupt image that fails its sample only,
naming the file.

    test_image_folder.py FOLDER_DUMP
"""
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch
from PIL import Image
from torchvision.datasets import DatasetFolder, ImageFolder
from torchvision.io import ImageReadMode, decode_image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import FAILURES, check  # noqa: E402
from vision_dump import CtError, read_records  # noqa: E402

CT_EINVAL, CT_ENOTSUP, CT_EIO, CT_EFORMAT = -1, -7, -8, -9
RNG = np.random.default_rng(3)


def image(path, kind="png", size=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    w, h = size or (int(RNG.integers(1, 12)), int(RNG.integers(1, 12)))
    arr = RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)
    img = Image.fromarray(arr)
    if kind == "gray":
        img = img.convert("L")
    img.save(path, format="JPEG" if path.lower().endswith((".jpg", ".jpeg")) else
             "BMP" if path.lower().endswith(".bmp") else "PNG")


def png16(path, arr, color_type):
    """A 16-bit PNG of arr ([H, W, C] uint16) of libpng's color_type; PIL
    writes none but 16-bit gray."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    h, w = arr.shape[:2]
    raw = b"".join(b"\0" + arr[y].astype(">u2").tobytes() for y in range(h))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def text(path, body="not an image\n"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(body)


def run(dump, work, root, mode=ImageReadMode.RGB, allow_empty=False, exts=()):
    out = os.path.join(work, "dump.bin")
    r = subprocess.run([dump, out, root, str(mode.value), str(int(allow_empty)), *exts], capture_output=True,
                       text=True)
    check(r.returncode == 0, f"folder_dump {root} ran ({r.returncode}) {r.stderr.strip()[-1000:]}")
    recs = read_records(out)
    if recs and isinstance(recs[0], CtError):
        return recs[0]
    at = 0
    k = recs[at]
    classes = recs[at + 1:at + 1 + k]
    at += 1 + k
    n = recs[at]
    at += 1
    samples = []
    for _ in range(n):
        path = recs[at]
        if isinstance(recs[at + 1], CtError):
            samples.append((path, recs[at + 1], None))
            at += 2
        else:
            samples.append((path, recs[at + 1], recs[at + 2]))
            at += 3
    return classes, samples


def compare(what, got, tv):
    """got: run()'s (classes, samples); tv: a torchvision DatasetFolder."""
    if isinstance(got, CtError):
        check(False, f"{what}: ctrial failed: {got.message}")
        return
    classes, samples = got
    check(classes == tv.classes, f"{what}: classes {classes} == torchvision's {tv.classes}")
    check({c: i for i, c in enumerate(classes)} == tv.class_to_idx, f"{what}: class_to_idx")
    paths = [p for p, _, _ in samples]
    tv_paths = [p for p, _ in tv.samples]
    check(paths == tv_paths, f"{what}: {len(paths)} sample paths in torchvision's order"
          + ("" if paths == tv_paths else f"\n  ctrial:      {paths}\n  torchvision: {tv_paths}"))
    same = 0
    for i, (p, img, label) in enumerate(samples):
        if i >= len(tv):
            break
        tv_img, tv_label = tv[i]
        ok = (not isinstance(img, CtError) and label.dtype == torch.int64 and label.dim() == 0
              and int(label) == tv_label and img.dtype == tv_img.dtype and torch.equal(img, tv_img))
        same += ok
        if not ok:
            check(False, f"{what}: sample {i} ({p}): {img if isinstance(img, CtError) else 'differs'}")
    check(same == len(tv) == len(samples), f"{what}: {same} of {len(tv)} samples (image, label) equal")


def expect_error(what, got, code, needle, tv_raises=None):
    ok = isinstance(got, CtError) and got.code == code and needle in got.message
    check(ok, f"{what}: CtError({code}) naming {needle!r}: {got if isinstance(got, CtError) else 'no error'}")
    if tv_raises is not None:
        try:
            tv_raises()
            raised = "nothing"
        except Exception as e:  # noqa: BLE001
            raised = type(e).__name__
        check(raised != "nothing", f"{what}: torchvision raises too ({raised})")


def loader(mode):
    return lambda p: decode_image(p, mode=mode)


def main():
    dump = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        root = os.path.join(work, "root")
        elsewhere = os.path.join(work, "elsewhere")
        for cls in ["b", "a", "B", "a b", "10", "9", ".hidden", "a-b", "a.b"]:
            image(os.path.join(root, cls, "one.png"))
            image(os.path.join(root, cls, "Two.JPG"))
        for sub in ["sub", "sub b", "sub-1", "sub.x", "sub/deeper", "sub/deeper/deepest", "Sub", "sub b/x"]:
            image(os.path.join(root, "a", sub, "img.png"))
            image(os.path.join(root, "a", sub, "IMG2.JPEG"), kind="gray")
        image(os.path.join(root, "a", ".png"))
        image(os.path.join(root, "a", "z.jpeg"))
        image(os.path.join(root, "a", "y.PnG"))
        text(os.path.join(root, "a", "notes.txt"))
        text(os.path.join(root, "a", "png"))
        text(os.path.join(root, "a", "sub", "README"))
        image(os.path.join(elsewhere, "linked", "far.png"))
        image(os.path.join(elsewhere, "linked", "inner", "farther.jpg"))
        image(os.path.join(elsewhere, "cls", "c.png"))
        os.symlink(os.path.join(elsewhere, "linked"), os.path.join(root, "a", "link"))
        os.symlink(os.path.join(elsewhere, "linked", "far.png"), os.path.join(root, "b", "alias.png"))
        os.symlink(os.path.join(elsewhere, "cls"), os.path.join(root, "linked_class"))
        os.symlink(os.path.join(work, "nowhere"), os.path.join(root, "broken"))
        image(os.path.join(root, "toplevel.png"))
        text(os.path.join(root, "notes.txt"))

        for mode in (ImageReadMode.RGB, ImageReadMode.GRAY, ImageReadMode.UNCHANGED):
            compare(f"tree in {mode.name}", run(dump, work, root, mode), ImageFolder(root, loader=loader(mode)))
        exts = (".png", ".JPG")  # torchvision's test lower-cases only the name: ".JPG" counts nothing there
        got = run(dump, work, root, ImageReadMode.RGB, exts=exts)
        compare("extensions .png .jpg", got,
                DatasetFolder(root, loader=loader(ImageReadMode.RGB), extensions=(".png", ".jpg")))
        # a path given with a trailing slash is joined as os.path.join does
        compare("root/", run(dump, work, root + "/"), ImageFolder(root + "/", loader=loader(ImageReadMode.RGB)))

        # ---- 16-bit PNGs beside 8-bit ones
        deep = os.path.join(work, "deep")
        image(os.path.join(deep, "a", "eight.png"), size=(5, 3))
        v = RNG.integers(0, 65536, (3, 5, 4), dtype=np.uint16)
        v[0, :4, 0] = [255, 256, 40000, 65535]
        png16(os.path.join(deep, "a", "rgb16.png"), v[..., :3], 2)
        png16(os.path.join(deep, "a", "rgba16.png"), v, 6)
        png16(os.path.join(deep, "b", "gray_alpha16.png"), v[..., :2], 4)
        got = run(dump, work, deep)
        tv = ImageFolder(deep)  # PIL's loader, converted to RGB

        def pil(i):
            return torch.from_numpy(np.array(tv[i][0])).permute(2, 0, 1)
        if isinstance(got, CtError):
            check(False, f"16-bit PNGs: {got.message}")
        else:
            same = sum(not isinstance(img, CtError) and img.dtype == torch.uint8 and torch.equal(img, pil(i))
                       for i, (_, img, _) in enumerate(got[1]))
            check(same == len(tv) == 4, f"16-bit PNGs in RGB: {same} of 4 uint8 images equal PIL's (ImageFolder's)")
            check(int(got[1][1][1][0, 0, 2]) == 40000 >> 8, "16-bit PNGs: a sample's high byte")
        # plain 16-bit gray: PIL saturates at 255 (its I;16 conversion); ctrial takes the high byte
        png16(os.path.join(deep, "b", "gray16.png"), v[..., :1], 0)
        got = run(dump, work, deep)
        gray = [img for p, img, _ in (got[1] if not isinstance(got, CtError) else []) if p.endswith("gray16.png")]
        want = torch.from_numpy((v[..., 0] >> 8).astype(np.uint8))[None].expand(3, -1, -1)
        check(len(gray) == 1 and gray[0].dtype == torch.uint8 and torch.equal(gray[0], want),
              "16-bit gray in RGB: the high byte, as 3 channels")
        tv = ImageFolder(deep)
        at = [p for p, _ in tv.samples].index(os.path.join(deep, "b", "gray16.png"))
        check(np.array(tv[at][0])[0, 1, 0] == 255, "PIL saturates 16-bit gray (256 -> 255)")
        compare("16-bit PNGs in UNCHANGED", run(dump, work, deep, ImageReadMode.UNCHANGED),
                ImageFolder(deep, loader=loader(ImageReadMode.UNCHANGED)))

        # ---- errors
        empty = os.path.join(work, "empty")
        image(os.path.join(empty, "full", "x.png"))
        os.makedirs(os.path.join(empty, "void", "deep"))
        text(os.path.join(empty, "void", "notes.txt"))
        expect_error("an empty class", run(dump, work, empty), CT_EINVAL, "'void'",
                     lambda: ImageFolder(empty))
        compare("an empty class, allow_empty", run(dump, work, empty, allow_empty=True),
                ImageFolder(empty, loader=loader(ImageReadMode.RGB), allow_empty=True))
        flat = os.path.join(work, "flat")
        image(os.path.join(flat, "x.png"))
        expect_error("no class folder", run(dump, work, flat), CT_EINVAL, flat, lambda: ImageFolder(flat))
        missing = os.path.join(work, "missing")
        expect_error("a missing root", run(dump, work, missing), CT_EIO, missing, lambda: ImageFolder(missing))
        afile = os.path.join(flat, "x.png")
        expect_error("a root that is a file", run(dump, work, afile), CT_EIO, afile, lambda: ImageFolder(afile))

        bmp = os.path.join(work, "bmp")
        image(os.path.join(bmp, "c", "a.png"))
        image(os.path.join(bmp, "c", "b.BMP"))
        bmp_file = os.path.join(bmp, "c", "b.BMP")
        expect_error("a .bmp that counts", run(dump, work, bmp), CT_ENOTSUP, bmp_file)
        compare("a .bmp left out", run(dump, work, bmp, exts=(".jpg", ".jpeg", ".png")),
                DatasetFolder(bmp, loader=loader(ImageReadMode.RGB), extensions=(".jpg", ".jpeg", ".png")))

        corrupt = os.path.join(work, "corrupt")
        image(os.path.join(corrupt, "c", "a.png"), size=(4, 4))
        bad = os.path.join(corrupt, "c", "b.png")
        data = open(os.path.join(corrupt, "c", "a.png"), "rb").read()
        with open(bad, "wb") as f:
            f.write(data[:len(data) - 20])
        image(os.path.join(corrupt, "d", "c.jpg"), size=(4, 4))
        got = run(dump, work, corrupt)
        if isinstance(got, CtError):
            check(False, f"a corrupt image: creation failed: {got.message}")
        else:
            _, samples = got
            errs = [(p, e) for p, e, _ in samples if isinstance(e, CtError)]
            check(len(samples) == 3 and len(errs) == 1 and errs[0][0] == bad and errs[0][1].code == CT_EFORMAT
                  and bad in errs[0][1].message, f"a corrupt image fails its sample only, naming it: {errs}")
            try:
                ImageFolder(corrupt, loader=loader(ImageReadMode.RGB))[1]
                tv = "decodes it"
            except RuntimeError:
                tv = "refuses it too"
            check(tv == "refuses it too", f"a corrupt image: torchvision {tv}")
    if FAILURES:
        print(f"{len(FAILURES)} failures")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
