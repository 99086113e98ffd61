"""ctrial's TensorBoard summaries against torch.utils.tensorboard's.

summary_write (summary_write.c) writes two event files: one through the
formats-level writer (cti_tb_add_histogram / _image / _text on plain arrays,
fixed wall times) and one through ctrial/summary.h (ct_summary_* on tensors
of many dtypes and layouts). This script rebuilds the same inputs in numpy
and torch, has torch write them (its summary functions, and a real
SummaryWriter), and compares:

  - every record byte for byte with the Event torch serializes, after
    copying over what may differ: wall times where ctrial used "now", the
    PNG bytes (PIL and zlib compress differently), and sum_squares (torch
    takes it from BLAS; checked to 1e-12 relative, and exactly where every
    partial sum is exact);
  - histograms through TensorBoard's EventAccumulator: min, max, num, sum,
    bucket_limit and bucket exactly;
  - images decoded: the pixels (and PIL's mode) exactly, and the PNG's
    chunks and CRCs;
  - text and scalars exactly.

Usage: test_summary.py SUMMARY_WRITE_PROGRAM"""
import io
import math
import os
import struct
import subprocess
import sys
import tempfile
import time
import warnings
import zlib

import numpy as np
import torch
from PIL import Image
from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.compat.tensorflow_stub import errors as stub_errors
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow as stub
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard import summary as tb_summary

failures = []
checks = [0]


def check(cond, what):
    checks[0] += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


# ---- the inputs, as summary_write.c makes them ------------------------------

def pos_edges():
    v, out = 1e-12, []
    while v < 1e20:
        out.append(v)
        v *= 1.1
    return out


E = pos_edges()


def hist_values(name):
    v = []
    if name == "dyadic":
        v = [i / 64.0 for i in range(-1000, 1001)] + [1048576.0, -2.0**-30, 0.0, -0.0]
    elif name == "span":
        for i, e in enumerate(E):
            v += [e * 1.05, -e * 1.05]
            if i % 50 == 0:
                v += [e, -e]
        v += [E[-1], -E[-1], -0.5e-12, 0.0]
    elif name == "single":
        v = [3.0]
    elif name == "first_bucket":
        v = [-9.91e19, 5.0]
    elif name == "nonfinite":
        v = [1.0, math.inf, -1e30, 2.5]
    elif name == "nan":
        v = [1.0, math.nan, 2.0]
    elif name == "ties":
        v = [1.0 / (i + 3.0) for i in range(129)]
    return np.array(v, dtype=np.float64)


HIST_SETS = ["dyadic", "span", "single", "first_bucket", "nonfinite", "nan", "ties"]
EXACT_SUM_SQUARES = {"dyadic", "single", "first_bucket", "nonfinite", "nan"}


def lcg_values(n):
    state, mask, out = 12345, (1 << 64) - 1, []
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) & mask
        m = ((state >> 11) % 2000001) - 1000000
        ex = ((state >> 5) % 61) - 30
        out.append(math.ldexp(m / 997.0, ex))
    return np.array(out, dtype=np.float64)


def fill_u8(c, h, w, a, b, d):
    ch, y, x = np.meshgrid(np.arange(c), np.arange(h), np.arange(w), indexing="ij")
    return ((ch * a + y * b + x * d + x * y) % 256).astype(np.uint8)


def fill_f32(n):
    i = np.arange(n, dtype=np.int64)
    f = ((i * 37) % 301 - 25).astype(np.float32) / np.float32(250.0)
    f[5], f[6], f[7], f[8] = np.nan, np.float32(-0.0), 1.0, 0.5
    f[9] = np.float32(254.5) / np.float32(255.0)
    f[10], f[11], f[12] = np.float32(1.0) / np.float32(255.0), 2.0, -1.0
    f[13] = np.float32(999.0) / np.float32(1000.0)
    return f


TEXTS = ["hello", "", "größe € 😀\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n*emphasis* `code`"]
LONG_TEXT = "".join(chr(ord("a") + i % 26) for i in range(100000))


def tb_images():
    """(tag, HWC uint8 array, step, wall) of the formats-level images."""
    out = []
    for i, c in enumerate([1, 3, 4]):
        h, w = 10 + i * 15, 13 + i * 18
        y, x, ch = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
        px = ((y * 7 + x * 3 + ch * 60 + x * y) % 256).astype(np.uint8)
        out.append((f"tbimg/c{c}", px, i, 1700000020.0 + i))
    return out


def summary_inputs():
    """What write_summary() passes, in its order: (kind, tag, value, step, extra)."""
    out = [("scalar", "scalar/x", v, i * 10, None) for i, v in enumerate([0.1, -2.5, 1e39, 3.0])]
    h64 = torch.tensor(lcg_values(20000), dtype=torch.float64).reshape(100, 200)
    span = torch.tensor(hist_values("span"), dtype=torch.float64)
    out += [
        ("hist", "hist/f64", h64, 0, None),
        ("hist", "hist/f32", h64.float(), 1, None),
        ("hist", "hist/bf16", (h64 / 1e6).to(torch.bfloat16), 2, None),
        ("hist", "hist/i64_t", torch.arange(-50, 50).reshape(10, 10).t(), -3, None),
        ("hist", "hist/span", span, 1 << 40, None),
    ]
    f = torch.from_numpy(fill_f32(3 * 32 * 40))
    hwc = torch.from_numpy(fill_u8(6, 4, 3, 11, 40, 90).reshape(-1).copy()).reshape(6, 4, 3)
    imgs = [
        ("img/gray_u8", torch.from_numpy(fill_u8(1, 5, 7, 0, 31, 7)), "CHW"),
        ("img/rgb_u8", torch.from_numpy(fill_u8(3, 16, 24, 85, 13, 29)), "CHW"),
        ("img/rgba_u8", torch.from_numpy(fill_u8(4, 9, 11, 64, 17, 5)), "CHW"),
        ("img/big_u8", torch.from_numpy(fill_u8(3, 300, 400, 1, 3, 2)), "CHW"),
        ("img/perm_u8", hwc.permute(2, 0, 1), "CHW"),
        ("img/rgb_f32", f.reshape(3, 32, 40), "CHW"),
        ("img/gray_f64", (torch.arange(36, dtype=torch.float64).reshape(1, 6, 6) / 35.0), "CHW"),
        ("img/hw_f32", f[:80].reshape(8, 10), "HW"),
        ("img/rgba_f16", f[:60].reshape(4, 3, 5).half(), "CHW"),
        ("img/rgb_bf16", f[:72].reshape(3, 4, 6).to(torch.bfloat16), "CHW"),
        ("img/bool", (torch.arange(16) % 3 == 0).reshape(1, 4, 4), "CHW"),
        ("img/i64", (torch.arange(12) % 3).reshape(3, 2, 2), "CHW"),
        ("img/1x1", torch.tensor([0.25, 0.5, 0.75]).reshape(3, 1, 1), "CHW"),
    ]
    out += [("image", tag, t, i, fmt) for i, (tag, t, fmt) in enumerate(imgs)]
    out += [("text", "notes", t, i, None) for i, t in enumerate(TEXTS)]
    out.append(("text", "long", LONG_TEXT, 7, None))
    return out


# ---- reading ---------------------------------------------------------------

def raw_records(path):
    """Every record's bytes through the CRC-checking reader."""
    reader = stub.PyRecordReader_New(path.encode(), 0, None, None)
    out = []
    while True:
        try:
            reader.GetNext()
        except stub_errors.OutOfRangeError:
            return out
        out.append(reader.record())


def accumulator(logdir):
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={
        event_accumulator.SCALARS: 0, event_accumulator.IMAGES: 0,
        event_accumulator.HISTOGRAMS: 0, event_accumulator.TENSORS: 0})
    with warnings.catch_warnings():
        # The Distributions tab's compressor interpolates between limits of
        # +-9.9e19 for a histogram spanning every bucket: inf * 0, in
        # TensorBoard's code, for torch's file as for ctrial's.
        warnings.simplefilter("ignore", RuntimeWarning)
        acc.Reload()
    return acc


def same_float(a, b):
    return (math.isnan(a) and math.isnan(b)) or struct.pack("<d", a) == struct.pack("<d", b)


def close_sum_squares(ours, torch_value, exact, what):
    if exact or math.isnan(torch_value) or math.isinf(torch_value):
        return check(same_float(ours, torch_value), f"{what}: sum_squares {ours!r} vs {torch_value!r}")
    return check(abs(ours - torch_value) <= 1e-12 * abs(torch_value),
                 f"{what}: sum_squares {ours!r} vs {torch_value!r}")


def check_png(data, width, height, channels, what):
    """The PNG's structure: signature, chunk CRCs, IHDR, one zlib stream."""
    if not check(data[:8] == b"\x89PNG\r\n\x1a\n", f"{what}: PNG signature"):
        return
    off, types, idat = 8, [], b""
    while off < len(data):
        (n,) = struct.unpack_from(">I", data, off)
        kind, body = data[off + 4:off + 8], data[off + 8:off + 8 + n]
        (crc,) = struct.unpack_from(">I", data, off + 8 + n)
        check(crc == zlib.crc32(kind + body), f"{what}: CRC of {kind}")
        types.append(kind)
        if kind == b"IHDR":
            w, h, depth, color, comp, filt, inter = struct.unpack(">IIBBBBB", body)
            check((w, h, depth, color, comp, filt, inter) ==
                  (width, height, 8, {1: 0, 3: 2, 4: 6}[channels], 0, 0, 0), f"{what}: IHDR {w, h, depth, color}")
        if kind == b"IDAT":
            idat += body
        off += 12 + n
    check(off == len(data) and types[0] == b"IHDR" and types[-1] == b"IEND"
          and set(types) == {b"IHDR", b"IDAT", b"IEND"}, f"{what}: chunks {types}")
    raw = zlib.decompress(idat)
    check(len(raw) == height * (1 + width * channels), f"{what}: {len(raw)} bytes of scanlines")
    check(all(raw[y * (1 + width * channels)] <= 4 for y in range(height)), f"{what}: filter types")


def decode(png):
    img = Image.open(io.BytesIO(png))
    img.load()
    return img.mode, np.array(img)


# ---- the formats-level file --------------------------------------------------

def check_tb_file(path, default_bins):
    records = raw_records(path)
    want = len(HIST_SETS) + 1 + 3 + len(TEXTS)
    if not check(len(records) == 1 + want, f"tb: {len(records)} records, expected {1 + want}"):
        return
    events = [event_pb2.Event.FromString(r) for r in records]
    check(events[0].file_version == "brain.Event:2", "tb: file_version")
    k = 1

    # Histograms: torch's histogram() with SummaryWriter's default bins.
    hists = [(f"hist/{s}", hist_values(s), i * 3 - 2, 1700000000.0 + i, s in EXACT_SUM_SQUARES)
             for i, s in enumerate(HIST_SETS)]
    hists.append(("hist/lcg", lcg_values(20000), 1 << 20, 1700000010.0, False))
    for tag, values, step, wall, exact in hists:
        with np.errstate(invalid="ignore"):
            want_ev = event_pb2.Event(wall_time=wall, step=step,
                                      summary=tb_summary.histogram(tag, values, bins=default_bins))
        got = events[k]
        g, w = got.summary.value[0].histo, want_ev.summary.value[0].histo
        close_sum_squares(g.sum_squares, w.sum_squares, exact, f"tb {tag}")
        w.sum_squares = g.sum_squares
        check(records[k] == want_ev.SerializeToString(),
              f"tb {tag}: record bytes differ:\n  ours  {got}\n  torch {want_ev}"[:3000])
        check(len(w.bucket) >= 2 and w.bucket[0] == 0, f"tb {tag}: torch's leading empty bucket")
        k += 1

    # Images: the Event's fields as torch writes them (gray: colorspace 1,
    # which torch never writes), the PNG's pixels decoded.
    for tag, px, step, wall in tb_images():
        got = events[k]
        h, w, c = px.shape
        enc = got.summary.value[0].image.encoded_image_string
        want_ev = event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag=tag, image=summary_pb2.Summary.Image(
                height=h, width=w, colorspace=c, encoded_image_string=enc))]))
        check(records[k] == want_ev.SerializeToString(), f"tb {tag}: record bytes")
        check_png(enc, w, h, c, f"tb {tag}")
        mode, arr = decode(enc)
        check(mode == {1: "L", 3: "RGB", 4: "RGBA"}[c], f"tb {tag}: mode {mode}")
        check(np.array_equal(arr, px[:, :, 0] if c == 1 else px), f"tb {tag}: pixels")
        if c > 1:  # torch's own PNG of the same pixels decodes to the same
            tmode, tarr = decode(tb_summary.image(tag, px, dataformats="HWC")
                                 .value[0].image.encoded_image_string)
            check(tmode == mode and np.array_equal(tarr, arr), f"tb {tag}: torch's PNG decodes alike")
        k += 1

    for i, text in enumerate(TEXTS):
        want_ev = event_pb2.Event(wall_time=1700000030.0 + i, step=i,
                                  summary=tb_summary.text("notes", text))
        check(records[k] == want_ev.SerializeToString(),
              f"tb text {i}: {records[k].hex()} vs {want_ev.SerializeToString().hex()}")
        k += 1


# ---- the summary.h file against SummaryWriter's -------------------------------

def torch_writes(logdir):
    w = SummaryWriter(log_dir=logdir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NaN pixels: "invalid value encountered in cast"
        for kind, tag, value, step, extra in summary_inputs():
            if kind == "scalar":
                w.add_scalar(tag, value, step)
            elif kind == "hist":
                w.add_histogram(tag, value, step)
            elif kind == "image":
                w.add_image(tag, value, step, dataformats=extra)
            else:
                w.add_text(tag, value, step)
    default_bins = list(w.default_bins)
    w.close()
    files = os.listdir(logdir)
    check(len(files) == 1, f"torch wrote {files}")
    return os.path.join(logdir, files[0]), default_bins


def check_summary_file(path, torch_path, t0, t1, what):
    name = os.path.basename(path)
    check(name.startswith("events.out.tfevents.") and name.endswith(".summary"), f"{what}: file name {name}")
    ours, theirs = raw_records(path), raw_records(torch_path)
    inputs = summary_inputs()
    check(len(ours) == 1 + len(inputs), f"{what}: {len(ours)} records, expected {1 + len(inputs)}")
    check(len(theirs) == len(ours), f"{what}: torch wrote {len(theirs)} records, ctrial {len(ours)}")
    for k, (rec, trec) in enumerate(zip(ours[1:], theirs[1:]), 1):
        kind, tag = inputs[k - 1][0], inputs[k - 1][1]
        got, want = event_pb2.Event.FromString(rec), event_pb2.Event.FromString(trec)
        check(t0 <= got.wall_time <= t1, f"{what} {tag}: wall_time {got.wall_time} is now")
        want.wall_time = got.wall_time
        if kind == "hist":
            g, w = got.summary.value[0].histo, want.summary.value[0].histo
            close_sum_squares(g.sum_squares, w.sum_squares, tag == "hist/i64_t", f"{what} {tag}")
            w.sum_squares = g.sum_squares
        if kind == "image":
            g, w = got.summary.value[0].image, want.summary.value[0].image
            check_png(g.encoded_image_string, g.width, g.height, g.colorspace, f"{what} {tag}")
            w.encoded_image_string = g.encoded_image_string
        check(rec == want.SerializeToString(), f"{what} {tag} (record {k}): bytes differ:\n"
              f"  ours  {str(got)[:1500]}\n  torch {str(want)[:1500]}")

    # TensorBoard's own view of both.
    acc, tacc = accumulator(os.path.dirname(path)), accumulator(os.path.dirname(torch_path))
    for kind in ("scalars", "histograms", "images", "tensors"):
        check(sorted(acc.Tags()[kind]) == sorted(tacc.Tags()[kind]),
              f"{what}: {kind} tags {sorted(acc.Tags()[kind])} vs {sorted(tacc.Tags()[kind])}")
    for tag in tacc.Tags()["scalars"]:
        got, want = acc.Scalars(tag), tacc.Scalars(tag)
        check([(s.step, s.value) for s in got] == [(s.step, s.value) for s in want],
              f"{what} scalars {tag}: {got} vs {want}")
    for tag in tacc.Tags()["histograms"]:
        for g, w in zip(acc.Histograms(tag), tacc.Histograms(tag), strict=True):
            gh, wh = g.histogram_value, w.histogram_value
            check(g.step == w.step, f"{what} {tag}: step {g.step} vs {w.step}")
            for field in ("min", "max", "num", "sum"):
                check(same_float(getattr(gh, field), getattr(wh, field)),
                      f"{what} {tag}: {field} {getattr(gh, field)!r} vs {getattr(wh, field)!r}")
            check(list(gh.bucket_limit) == list(wh.bucket_limit), f"{what} {tag}: bucket_limit")
            check(list(gh.bucket) == list(wh.bucket), f"{what} {tag}: bucket")
            check(sum(gh.bucket) > 0, f"{what} {tag}: counts something")
    n_images = 0
    for tag in tacc.Tags()["images"]:
        for g, w in zip(acc.Images(tag), tacc.Images(tag), strict=True):
            check((g.step, g.width, g.height) == (w.step, w.width, w.height),
                  f"{what} {tag}: {g.step, g.width, g.height} vs {w.step, w.width, w.height}")
            (gm, ga), (wm, wa) = decode(g.encoded_image_string), decode(w.encoded_image_string)
            check(gm == wm and ga.shape == wa.shape and np.array_equal(ga, wa),
                  f"{what} {tag}: pixels ({gm} {ga.shape} vs {wm} {wa.shape})")
            n_images += 1
    check(n_images == 13, f"{what}: {n_images} images compared")
    for tag in tacc.Tags()["tensors"]:
        check(acc.SummaryMetadata(tag).plugin_data.plugin_name == "text", f"{what} {tag}: text plugin")
        got = [(e.step, list(e.tensor_proto.string_val)) for e in acc.Tensors(tag)]
        want = [(e.step, list(e.tensor_proto.string_val)) for e in tacc.Tensors(tag)]
        check(got == want, f"{what} {tag}: text {str(got)[:200]} vs {str(want)[:200]}")

    # A few values asserted outright, not only as "same as torch".
    img = {t: decode(e.encoded_image_string)[1] for t in acc.Tags()["images"] for e in acc.Images(t)}
    rgb = img["img/rgb_f32"]  # HWC; channel 0 of row 0 was elements 0..39 of the CHW floats
    flat = [int(rgb[0, i, 0]) for i in range(14)]
    check(flat[5] == 0 and flat[6] == 0 and flat[7] == 255 and flat[8] == 127 and flat[9] == 254
          and flat[10] == 1 and flat[11] == 255 and flat[12] == 0 and flat[13] == 254,
          f"{what}: scaled pixels {flat}")
    check(img["img/gray_u8"].shape == (5, 7, 3) and np.array_equal(img["img/gray_u8"][:, :, 0],
                                                                     fill_u8(1, 5, 7, 0, 31, 7)[0])
          and np.array_equal(img["img/gray_u8"][:, :, 0], img["img/gray_u8"][:, :, 2]),
          f"{what}: gray repeated into RGB")
    check(np.array_equal(img["img/perm_u8"], fill_u8(6, 4, 3, 11, 40, 90).reshape(6, 4, 3)),
          f"{what}: a permuted CHW view")
    check(img["img/bool"][0, :, 0].tolist() == [255, 0, 0, 255], f"{what}: bool pixels")
    h = acc.Histograms("hist/i64_t")[0].histogram_value
    check((h.min, h.max, h.num, h.sum, h.sum_squares) == (-50.0, 49.0, 100.0, -50.0, 83350.0),
          f"{what}: i64 histogram {h.min, h.max, h.num, h.sum, h.sum_squares}")
    check(sum(h.bucket) == 100.0 and len(h.bucket) == len(h.bucket_limit), f"{what}: i64 counts")
    check(acc.Tensors("long/text_summary")[0].tensor_proto.string_val[0] == LONG_TEXT.encode(),
          f"{what}: long text")


def main():
    program = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ct_summary_") as work:
        torch_path, default_bins = torch_writes(os.path.join(work, "torch"))
        check(default_bins == [-e for e in reversed(E)] + [0] + E and len(E) == 774,
              "SummaryWriter's default bins are the edges summary_write uses")
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        for device in devices:
            out = os.path.join(work, device)
            t0 = time.time()
            res = subprocess.run([program, out, device], capture_output=True, text=True)
            t1 = time.time()
            if not check(res.returncode == 0, f"{device}: summary_write failed: {res.stderr}"):
                continue
            tb_path, summary_path = res.stdout.split("\n")[:2]
            if device == "cpu":
                check_tb_file(tb_path, default_bins)
            check_summary_file(summary_path, torch_path, t0, t1, device)
            print(f"{device}: compared {len(raw_records(summary_path)) - 1} summaries with torch's")
    if failures:
        print(f"{len(failures)} failures", file=sys.stderr)
        return 1
    print(f"summary parity with torch.utils.tensorboard: ok ({checks[0]} checks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
