"""ct_dataset_segmentation_folder and joint transforms against torchvision v2.

    test_segmentation.py SEG_DUMP

Writes images (RGB, gray and RGBA PNGs, JPEGs) and their masks (palette
PNGs at 8 and 4 bits with VOC's palette and its 255 border, gray trimaps
with values 1-3 as Oxford-IIIT Pet's, 1-bit and 16-bit gray) into a temp
folder, reads them with seg_dump (ctrial) and with the dataset people
write in Python:

    image = decode_image(path, mode=ImageReadMode.RGB)
    mask = torch.as_tensor(np.array(PIL.Image.open(mask_path))).long()

The samples' order, paths, images and masks must be the same. Then each
pipeline (ct_dataset_transform_pair) is drawn for every sample in three
passes and compared with v2 applied to (tv_tensors.Image(image),
tv_tensors.Mask(mask)) after torch.manual_seed(ct_record_seed(seed, pass,
index)): images and masks bit for bit (the tolerance of the transforms'
parity test: none), masks int64 [H, W]. One pass also goes through a
two-worker loader. The pipelines: RandomResizedCrop, RandomHorizontalFlip,
RandomCrop with padding and fill={Image: 0, Mask: 255}, ColorJitter,
ToTensor's scaling, Normalize; Resize and CenterCrop padding the mask with
0; RandomCrop in reflect mode and Resize to (h, w); pad_if_needed with a
single fill, which v2 gives the mask too. A second folder pairs masks by
the suffix "_mask.png".
"""
import os
import sys
import tempfile

import numpy as np
import torch
from PIL import Image
from torchvision import tv_tensors
from torchvision.io import ImageReadMode, decode_image
from torchvision.transforms import v2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import FAILURES, check, run_cmd  # noqa: E402
from vision_dump import CtError, read_records  # noqa: E402

torch.set_num_threads(1)
RNG = np.random.default_rng(11)
M64 = (1 << 64) - 1
SEED, EPOCHS = 23, 3
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def record_seed(seed, epoch, index):
    """data.h's ct_record_seed"""
    h = splitmix64(seed)
    h = splitmix64(h ^ epoch)
    h = splitmix64(h ^ index)
    return h >> 1


def voc_palette():
    """VOC's colour map (bit-interleaved), 256 colours."""
    pal = []
    for i in range(256):
        r = g = b = 0
        c = i
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        pal += [r, g, b]
    return pal


def blobs(h, w, classes):
    """A class map of rectangles and a noisy part: edges for NEAREST."""
    m = np.full((h, w), classes[0], dtype=np.int64)
    for _ in range(6):
        y, x = int(RNG.integers(0, h)), int(RNG.integers(0, w))
        m[y:y + int(RNG.integers(2, h // 2 + 3)), x:x + int(RNG.integers(2, w // 2 + 3))] = RNG.choice(classes)
    m[: h // 4, : w // 4] = RNG.choice(classes, (h // 4, w // 4))
    return m


def write_image(path, h, w, kind):
    arr = RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)
    y, x = np.mgrid[0:h, 0:w]
    arr = np.clip(arr * 0.3 + np.stack([x * 255 // w, y * 255 // h, (x + y) % 256], -1) * 0.7, 0, 255).astype(np.uint8)
    img = Image.fromarray(arr)
    if kind == "gray":
        img = img.convert("L")
    elif kind == "rgba":
        img = img.convert("RGBA")
        img.putalpha(Image.fromarray(RNG.integers(0, 256, (h, w), dtype=np.uint8)))
    img.save(path, format="JPEG" if path.endswith((".jpg", ".jpeg")) else "PNG", **({"quality": 90} if
             path.endswith((".jpg", ".jpeg")) else {}))


def write_mask(path, h, w, kind):
    if kind == "voc":  # palette indices 0..20, a 255 border between objects
        m = blobs(h, w, np.arange(21))
        edge = np.zeros_like(m, dtype=bool)
        edge[1:, :] |= m[1:, :] != m[:-1, :]
        edge[:, 1:] |= m[:, 1:] != m[:, :-1]
        m[edge] = 255
        img = Image.fromarray(m.astype(np.uint8), mode="P")
        img.putpalette(voc_palette())
        img.save(path)
    elif kind == "pal4":  # a 4-bit palette PNG
        img = Image.fromarray(blobs(h, w, np.arange(16)).astype(np.uint8), mode="P")
        img.putpalette(voc_palette()[:48])
        img.save(path, bits=4)
    elif kind == "trimap":  # Oxford-IIIT Pet: 1 foreground, 2 background, 3 not classified
        Image.fromarray(blobs(h, w, np.array([1, 2, 3])).astype(np.uint8), mode="L").save(path)
    elif kind == "gray":
        Image.fromarray(blobs(h, w, np.arange(0, 256, 5)).astype(np.uint8), mode="L").save(path)
    elif kind == "bits1":
        Image.fromarray(blobs(h, w, np.array([0, 1])).astype(bool)).save(path)
    elif kind == "gray16":
        Image.fromarray(blobs(h, w, np.array([0, 7, 300, 1000, 65535])).astype(np.uint16)).save(path)
    else:
        raise ValueError(kind)


def make_folder(root, suffix):
    """images/ and masks/ of six pairs (plus files that do not count)."""
    images, masks = os.path.join(root, "images"), os.path.join(root, "masks")
    os.makedirs(images)
    os.makedirs(masks)
    pairs = [("2007_000032.jpg", 37, 53, "rgb", "voc"), ("Abyssinian_1.jpg", 48, 64, "rgb", "trimap"),
             ("b.png", 29, 41, "gray", "pal4"), ("a.png", 60, 45, "rgba", "gray"), ("c.jpeg", 40, 40, "rgb", "bits1"),
             ("d.PNG", 33, 70, "rgb", "gray16")]
    for name, h, w, ik, mk in pairs:
        write_image(os.path.join(images, name), h, w, ik)
        write_mask(os.path.join(masks, os.path.splitext(name)[0] + suffix), h, w, mk)
    with open(os.path.join(images, "notes.txt"), "w") as f:
        f.write("not an image\n")
    with open(os.path.join(masks, "README"), "w") as f:
        f.write("not a mask\n")
    os.makedirs(os.path.join(images, "sub.png"))  # a folder: not walked, not an image
    return images, masks


def python_dataset(images, masks, suffix):
    """What people write: sorted images, mask by stem."""
    exts = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
    names = sorted(n for n in os.listdir(images) if n.lower().endswith(exts)
                   and os.path.isfile(os.path.join(images, n)))
    out = []
    for n in names:
        ipath = os.path.join(images, n)
        mpath = os.path.join(masks, os.path.splitext(n)[0] + suffix)
        out.append((ipath, mpath, decode_image(ipath, mode=ImageReadMode.RGB),
                    torch.as_tensor(np.array(Image.open(mpath))).long()))
    return out


def to_float(t):
    return t.to(torch.float32).div(255)  # ct_tf_to_tensor


def twin(step):
    """The v2 transform of one step's text (seg_dump's grammar)."""
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
        fill = int(float(a[7]))
        if len(a) > 9:
            fill = {tv_tensors.Image: fill, tv_tensors.Mask: int(float(a[9]))}
        return v2.RandomCrop((int(a[0]), int(a[1])), padding=pad if any(pad) else None,
                             pad_if_needed=a[6] == "1", fill=fill, padding_mode=a[8])
    if name == "flip":
        return v2.RandomHorizontalFlip(float(a[0]))
    if name == "jitter":
        return v2.ColorJitter(*(float(v) for v in a[:4]))
    if name == "totensor":
        return v2.Lambda(to_float, tv_tensors.Image)
    if name == "normalize":
        return v2.Normalize([float(v) for v in a[0].split(",")], [float(v) for v in a[1].split(",")])
    raise ValueError(step)


NORM = f"normalize:{','.join(map(str, MEAN))}:{','.join(map(str, STD))}"
PIPELINES = [
    ("the U-Net pipeline", ["rrc:40:48:0.3:1:0.75:1.3333333333333333", "flip:0.5",
                            "crop:40:48:4:4:4:4:0:0:constant:255", "jitter:0.3:0.3:0.3:0.05", "totensor", NORM]),
    ("Resize and CenterCrop (the mask padded with 0)", ["resize:32:0:0", "center:36:36", "totensor", NORM]),
    ("RandomCrop reflect, Resize to (h, w)", ["crop:24:24:3:2:5:1:0:7:reflect", "flip:0.7", "resize:20:28:0"]),
    ("RandomCrop pad_if_needed, one fill for both", ["crop:64:64:0:0:0:0:1:5:constant", "flip:0.5",
                                                     "jitter:0.2:0.2:0:0"]),
    ("RandomResizedCrop upscaling, edge and symmetric padding",
     ["rrc:72:80:0.08:0.5:0.5:2", "crop:70:80:2:0:3:1:0:0:edge", "crop:74:82:2:2:2:2:0:0:symmetric"]),
]


def run(dump, out, images, masks, suffix, pipelines=(), workers=0):
    args = []
    for steps in pipelines:
        args += [*(["--"] if args else []), *steps]
    r = run_cmd([dump, out, images, masks, suffix, str(SEED), str(EPOCHS), str(workers), *args], 300)
    check(r.returncode == 0, f"seg_dump ran {len(pipelines)} pipelines, freeing every tensor "
                             f"(exit {r.returncode}) {r.stderr[-500:]}")
    return read_records(out) if os.path.exists(out) else []


def same(got, want):
    return (not isinstance(got, CtError) and got.dtype == want.dtype and got.shape == want.shape
            and torch.equal(got, want.contiguous()))


def describe(got, want):
    if isinstance(got, CtError):
        return f"ctrial failed: {got.message}"
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype} {list(got.shape)} vs {want.dtype} {list(want.shape)}"
    diff = (got.double() - want.double()).abs()
    return f"max diff {diff.max().item():.3g}, {int((diff > 0).sum())} of {diff.numel()} differ"


def take_pair(recs, at):
    """(image, mask) or (error, error) from records at `at`; the next position."""
    if isinstance(recs[at], CtError):
        return (recs[at], recs[at]), at + 1
    return (recs[at], recs[at + 1]), at + 2


def check_samples(label, recs, py):
    """The dataset itself: n, then per sample its paths and (image, mask)."""
    if not recs or isinstance(recs[0], CtError):
        check(False, f"{label}: creation failed: {recs[0] if recs else 'no output'}")
        return None
    n, at = recs[0], 1
    check(n == len(py), f"{label}: {n} samples, as many as the Python dataset's {len(py)}")
    ok = 0
    for i in range(min(n, len(py))):
        ipath, mpath = recs[at], recs[at + 1]
        (img, mask), at = take_pair(recs, at + 2)
        pi, pm, want_img, want_mask = py[i]
        good = ipath == pi and mpath == pm and same(img, want_img) and same(mask, want_mask)
        ok += good
        if not good:
            check(False, f"{label}: sample {i} ({pi} / {pm}): got {ipath} / {mpath}: image "
                         f"{describe(img, want_img)}; mask {describe(mask, want_mask)}")
    check(ok == n == len(py), f"{label}: {ok} of {len(py)} samples: paths, uint8 images and int64 masks equal")
    return at


def main():
    dump = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        images, masks = make_folder(os.path.join(work, "data"), ".png")
        py = python_dataset(images, masks, ".png")
        check([m.dtype for *_, m in py] == [torch.int64] * 6 and int(py[0][3].max()) == 255
              and int(py[1][3].min()) == 1 and int(py[5][3].max()) == 65535,
              "the Python masks are int64 class maps with VOC's 255, Pet's 1-3 and 16-bit values")
        recs = run(dump, os.path.join(work, "seg.bin"), images, masks, "-", [steps for _, steps in PIPELINES], 2)
        at = check_samples("the folder", recs, py)

        # the suffix: masks named <stem>_mask.png
        images2, masks2 = make_folder(os.path.join(work, "suffixed"), "_mask.png")
        check_samples("masks named <stem>_mask.png", run(dump, os.path.join(work, "suffixed.bin"), images2, masks2,
                                                         "_mask.png"), python_dataset(images2, masks2, "_mask.png"))

        for k, (label, steps) in enumerate(PIPELINES):
            if at is None:
                break
            transform = v2.Compose([twin(s) for s in steps])
            n, ok = len(py), 0
            want_all = {}
            for e in range(EPOCHS):
                for i in range(n):
                    (img, mask), at = take_pair(recs, at)
                    _, _, src_img, src_mask = py[i]
                    torch.manual_seed(record_seed(SEED, e, i))
                    want_img, want_mask = transform(tv_tensors.Image(src_img), tv_tensors.Mask(src_mask))
                    want_img, want_mask = want_img.as_subclass(torch.Tensor), want_mask.as_subclass(torch.Tensor)
                    want_all[e, i] = (want_img, want_mask)
                    good = same(img, want_img) and same(mask, want_mask) and mask.dtype == torch.int64 \
                        and mask.dim() == 2
                    ok += good
                    if not good:
                        check(False, f"{label}: sample {i} pass {e}: image {describe(img, want_img)}; "
                                     f"mask {describe(mask, want_mask)}")
            check(ok == EPOCHS * n, f"{label}: {ok} of {EPOCHS * n} draws: images and masks equal v2's on "
                                    f"(Image, Mask) after manual_seed(ct_record_seed(seed, pass, index))")
            if k == 0:  # the draws differ between passes: the masks are not the same three times
                distinct = sum(not torch.equal(want_all[0, i][1], want_all[1, i][1]) for i in range(n))
                padded = sum(int((want_all[e, i][1] == 255).sum()) > 0 for e in range(EPOCHS) for i in (1, 3, 4, 5))
                check(distinct >= n - 1 and padded > 0, f"{label}: the passes draw differently ({distinct} of {n}) "
                                                        f"and the padding marks masks without 255 ({padded})")
            batches, at = recs[at], at + 1
            check(batches == n // 2, f"{label}: the loader gives {batches} batches of 2")
            got_ok = 0
            for b in range(batches):
                (img, mask), at = take_pair(recs, at)
                want_img = torch.stack([want_all[0, 2 * b][0], want_all[0, 2 * b + 1][0]])
                want_mask = torch.stack([want_all[0, 2 * b][1], want_all[0, 2 * b + 1][1]])
                good = same(img, want_img) and same(mask, want_mask)
                got_ok += good
                if not good:
                    check(False, f"{label}: loader batch {b}: image {describe(img, want_img)}; "
                                 f"mask {describe(mask, want_mask)}")
            check(got_ok == batches, f"{label}: a two-worker loader's batches are pass 0's draws ({got_ok} "
                                     f"of {batches})")
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        sys.exit(1)


if __name__ == "__main__":
    main()
