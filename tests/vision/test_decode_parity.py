"""ct_image_read against torchvision.io.decode_image, pixel for pixel.

PNGs of every colour type and bit depth (Pillow's, and the rest written
here byte by byte: 2-, 4- and 16-bit, 16-bit colour, Adam7 interlacing,
tRNS), JPEGs of every kind Pillow writes (gray, RGB with 4:2:0 and 4:4:4
sampling, progressive, CMYK), at odd sizes, are decoded by ctrial
(decode_dump, which also checks that decoding the bytes from memory agrees)
and by torchvision in every mode: same dtype, shape, strides (channels
last, as torchvision's permuted view) and values. Where torchvision has no
answer or a wrong one, the expectation is vision.h's:
  - a palette PNG in UNCHANGED mode is RGB (torchvision gives the indices,
    packed and followed by garbage when under 8 bits): decode_image(RGB);
  - GRAY_ALPHA / RGB_ALPHA of a palette PNG without tRNS and of a 1-, 2-
    or 4-bit gray PNG, and of any JPEG, are torchvision's GRAY / RGB with an
    opaque alpha (255) after them (torchvision refuses JPEG; for the PNGs
    its rows are misaligned, or its alpha is 1);
  - a CMYK JPEG in UNCHANGED mode is CT_ENOTSUP (torchvision: raw CMYK).
Truncated files fail in both (CT_EFORMAT naming the file).

    test_decode_parity.py DECODE_DUMP
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
from torchvision.io import ImageReadMode, decode_image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import FAILURES, check  # noqa: E402
from vision_dump import CtError, read_records  # noqa: E402

CT_ENOTSUP, CT_EFORMAT = -7, -9
MODES = [ImageReadMode.UNCHANGED, ImageReadMode.GRAY, ImageReadMode.GRAY_ALPHA, ImageReadMode.RGB,
         ImageReadMode.RGB_ALPHA]
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # PNG colour type -> samples a pixel
SIZES = [(1, 1), (7, 5), (33, 17)]  # (w, h)


def png_bytes(samples, color_type, depth, interlace=False, palette=None, trns=None):
    """A PNG of samples (h x w x channels ints), written as the spec says."""
    h, w, _ = samples.shape

    def rows(img):
        out = bytearray()
        for row in img:
            vals = row.reshape(-1)
            if depth == 16:
                b = vals.astype(">u2").tobytes()
            elif depth == 8:
                b = vals.astype(np.uint8).tobytes()
            else:
                per = 8 // depth
                vals = np.concatenate([vals.astype(np.uint8), np.zeros((-len(vals)) % per, np.uint8)])
                shifts = np.array([8 - depth * (i + 1) for i in range(per)], dtype=np.uint8)
                b = np.bitwise_or.reduce(vals.reshape(-1, per) << shifts, axis=1).astype(np.uint8).tobytes()
            out += b"\x00" + b
        return bytes(out)

    if interlace:  # Adam7: (x0, y0, dx, dy) of each pass; empty passes are left out
        passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
        raw = b"".join(rows(samples[y0::dy, x0::dx]) for x0, y0, dx, dy in passes if samples[y0::dy, x0::dx].size)
    else:
        raw = rows(samples)

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, int(interlace)))
    if palette is not None:
        out += chunk(b"PLTE", bytes(np.asarray(palette, np.uint8).reshape(-1)))
    if trns is not None:
        out += chunk(b"tRNS", trns)
    return out + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def make_images(work):
    """[(path, kind)] where kind says what vision.h expects beyond torchvision."""
    rng = np.random.default_rng(7)
    out = []
    # Pillow's PNGs and JPEGs
    for w, h in SIZES:
        rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        rgba = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
        gray = rng.integers(0, 256, (h, w), dtype=np.uint8)
        tag = f"{w}x{h}"
        for mode, arr in [("RGB", rgb), ("RGBA", rgba), ("L", gray)]:
            p = os.path.join(work, f"pil_{mode}_{tag}.png")
            Image.fromarray(arr, mode).save(p)
            out.append((p, "png"))
        p = os.path.join(work, f"pil_LA_{tag}.png")
        Image.fromarray(rgba[:, :, :2].copy(), "LA").save(p)
        out.append((p, "png"))
        p = os.path.join(work, f"pil_1_{tag}.png")
        Image.fromarray(gray > 127).save(p)
        out.append((p, "png_lowbit"))
        p = os.path.join(work, f"pil_I16_{tag}.png")
        Image.fromarray(rng.integers(0, 65536, (h, w), dtype=np.uint16)).save(p)
        out.append((p, "png"))
        for ncolors in (4, 16, 256):  # 2-, 4- and 8-bit indices
            pal = Image.fromarray(rgb).quantize(ncolors)
            p = os.path.join(work, f"pil_P{ncolors}_{tag}.png")
            pal.save(p, bits={4: 2, 16: 4, 256: 8}[ncolors])
            out.append((p, "palette"))
            p = os.path.join(work, f"pil_P{ncolors}_trns_{tag}.png")
            pal.save(p, transparency=0)
            out.append((p, "palette_trns"))
        for name, arr, kw in [("L", gray, {}), ("RGB", rgb, {}), ("RGB444", rgb, {"subsampling": 0}),
                              ("RGB422", rgb, {"subsampling": 1}), ("RGBprog", rgb, {"progressive": True}),
                              ("RGBq30", rgb, {"quality": 30, "optimize": True})]:
            p = os.path.join(work, f"pil_{name}_{tag}.jpg")
            Image.fromarray(arr).save(p, quality=kw.pop("quality", 90), **kw)
            out.append((p, "jpeg"))
        p = os.path.join(work, f"pil_CMYK_{tag}.jpg")
        Image.fromarray(rgba, "CMYK").save(p, quality=90)
        out.append((p, "jpeg_cmyk"))
    # PNGs written here: every colour type and bit depth, plain and interlaced
    for (w, h) in SIZES + [(9, 10)]:
        for ct, depths in [(0, (1, 2, 4, 8, 16)), (2, (8, 16)), (3, (1, 2, 4, 8)), (4, (8, 16)), (6, (8, 16))]:
            for depth in depths:
                for interlace in (False, True):
                    top = 1 << depth
                    samples = rng.integers(0, top, (h, w, CHANNELS[ct]), dtype=np.int64)
                    palette = trns = None
                    kind = "png_lowbit" if ct == 0 and depth < 8 else "png"
                    if ct == 3:
                        palette = rng.integers(0, 256, (top, 3))
                        kind = "palette"
                    name = f"ct{ct}_d{depth}_{'i' if interlace else 'p'}_{w}x{h}"
                    out.append((write(os.path.join(work, name + ".png"),
                                      png_bytes(samples, ct, depth, interlace, palette)), kind))
                    if ct in (0, 2, 3):  # with a tRNS chunk (torchvision ignores it but for palettes)
                        if ct == 3:
                            trns, kind = bytes(rng.integers(0, 256, top // 2 + 1).astype(np.uint8)), "palette_trns"
                        else:
                            trns = struct.pack(">" + "H" * CHANNELS[ct], *samples[0, 0].tolist())
                        out.append((write(os.path.join(work, name + "_trns.png"),
                                          png_bytes(samples, ct, depth, interlace, palette, trns)), kind))
    return out


def opaque(base):
    return torch.cat([base, torch.full_like(base[:1], 65535 if base.dtype == torch.uint16 else 255)])


def expected(path, kind, mode):
    """What ctrial must give: a tensor, or an error code."""
    M = ImageReadMode
    if kind.startswith("palette") and mode == M.UNCHANGED:
        return decode_image(path, mode=M.RGB)
    alpha_fix = kind in ("jpeg", "jpeg_cmyk", "palette", "png_lowbit")
    if alpha_fix and mode in (M.GRAY_ALPHA, M.RGB_ALPHA):
        return opaque(decode_image(path, mode=M.GRAY if mode == M.GRAY_ALPHA else M.RGB))
    if kind == "jpeg_cmyk" and mode == M.UNCHANGED:
        return CT_ENOTSUP
    return decode_image(path, mode=mode)


def main():
    dump = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        images = make_images(work)
        # truncated files: both refuse them
        full = open(images[0][0], "rb").read()
        jpg = next(p for p, k in images if k == "jpeg" and "33x17" in p)
        jfull = open(jpg, "rb").read()
        for name, data in [("cut_png", full[:len(full) // 2]), ("cut_jpg", jfull[:len(jfull) // 2]),
                           ("cut_jpg_eoi", jfull[:-1])]:
            images.append((write(os.path.join(work, name + (".png" if "png" in name else ".jpg")), data), "cut"))
        jobs = [(p, k, m) for p, k in images for m in MODES]
        out = os.path.join(work, "dump.bin")
        args = [dump, out]
        for p, _, m in jobs:
            args += [str(m.value), p]
        r = subprocess.run(args, capture_output=True, text=True)
        check(r.returncode == 0, f"decode_dump ran ({r.returncode}): {r.stderr.strip()[-2000:]}")
        got = read_records(out)
        check(len(got) == len(jobs), f"{len(got)} records for {len(jobs)} decodes")
        compared = 0
        for (p, kind, m), g in zip(jobs, got):
            what = f"{os.path.basename(p)} {m.name}"
            if kind == "cut":
                try:
                    decode_image(p, mode=m)
                    tv_ok = True
                except RuntimeError:
                    tv_ok = False
                check(isinstance(g, CtError) and g.code == CT_EFORMAT and p in g.message and not tv_ok,
                      f"{what}: truncated: {g!r} (torchvision {'decodes it' if tv_ok else 'refuses it too'})")
                continue
            exp = expected(p, kind, m)
            if isinstance(exp, int):
                check(isinstance(g, CtError) and g.code == exp and p in g.message, f"{what}: error {exp}: {g!r}")
                continue
            if isinstance(g, CtError):
                check(False, f"{what}: ctrial failed: {g.message}")
                continue
            c, h, w = exp.shape
            ok = (g.dtype == exp.dtype and g.shape == exp.shape and g.ct_strides == (1, w * c, c)
                  and torch.equal(g, exp))
            compared += ok
            if not ok:
                detail = f"dtype {g.dtype} vs {exp.dtype}, shape {tuple(g.shape)} vs {tuple(exp.shape)}, " \
                         f"strides {g.ct_strides}"
                if g.shape == exp.shape and g.dtype == exp.dtype:
                    diff = (g.to(torch.int64) - exp.to(torch.int64)).abs()
                    detail += f", {int((diff > 0).sum())} values differ (max {int(diff.max())})"
                check(False, f"{what} ({kind}): {detail}")
        check(compared > 0, f"{compared} images equal torchvision's (or vision.h's documented answer)")
    if FAILURES:
        print(f"{len(FAILURES)} failures")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
