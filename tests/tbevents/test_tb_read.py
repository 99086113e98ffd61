"""ctrial's TensorBoard event files read back by the `tensorboard` package's
own readers: the CRC-checking record reader, EventFileLoader (the path that
migrates simple_value scalars to tensors for today's scalars plugin) and
EventAccumulator (Scalars(tag)). Every tag, step, value (as float32, bit for
bit), wall time and the file_version record are checked, each record's bytes
are compared with what Python's protobuf serializes for the same Event, and
corrupted copies of the file show that the readers notice a bad CRC, so this
test can fail.

Usage: test_tb_read.py TB_WRITE_PROGRAM"""
import math
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.compat.tensorflow_stub import errors as stub_errors
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow as stub
from tensorboard.util import tensor_util

SUFFIX = ".ctrial"
TAGS = ["training/loss", "training/lr", "validation/accuracy", "validation/loss"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def expected_scalars():
    """(tag, step, value as double, wall_time or None for "now"), in the order
    tb_write.c writes them."""
    out = []
    for s in range(100):
        step = s * 10
        for t, tag in enumerate(TAGS):
            if t >= 2 and s % 2 == 1:
                continue
            out.append((tag, step, ((step * 37 + t * 11) % 101 - 50) / 7.0,
                        1700000000.0 + step * 0.25 + t * 0.0625))
    big = float.fromhex("0x1p128") - float.fromhex("0x1p103")
    values = [0.1, -0.0, 0.0, math.inf, -math.inf, math.nan, 1e-45, 3e-39,
              float(np.finfo(np.float32).max), -float(np.finfo(np.float32).max), big, -big,
              big - float.fromhex("0x1p75"), 1e300, -1e300, 1e-300, 16777217.0, 1.0 / 3.0]
    out += [("edge/value", i, v, 1700001000.0 + i) for i, v in enumerate(values)]
    steps = [-1, -5, -2**63, 2**63 - 1, 1, 0, 127, 128, 2**31]
    out += [("edge/step", s, float(i), 1700002000.0 + i) for i, s in enumerate(steps)]
    out += [("clock/now", 1, 1.0, None), ("clock/now", 2, 2.0, None)]
    long_tag = "long/" + "".join(chr(ord("a") + i % 26) for i in range(5, 1000))
    out += [(long_tag, 5, 42.0, 1700003000.0), ("validation/größe €", 6, -42.5, 1700003001.0)]
    return out


def f32(x):
    """The float a C cast (round to nearest, overflow to inf) gives."""
    with np.errstate(over="ignore"):
        return np.float32(x)


def same_f32(got, want):
    got, want = np.float32(got), f32(want)
    if np.isnan(want):
        return bool(np.isnan(got))
    return got.tobytes() == want.tobytes()  # tells -0.0 from 0.0


def raw_records(path):
    """Every record's data through the stub's CRC-checking reader; raises
    DataLossError on a bad CRC or a cut record."""
    reader = stub.PyRecordReader_New(path.encode(), 0, None, None)
    out = []
    while True:
        try:
            reader.GetNext()
        except stub_errors.OutOfRangeError:
            return out
        out.append(reader.record())


def record_offsets(data):
    """(start, length) of each record, from the framing alone."""
    out, off = [], 0
    while off < len(data):
        (n,) = struct.unpack_from("<Q", data, off)
        out.append((off, n))
        off += 16 + n
    check(off == len(data), "records fill the file exactly")
    return out


def serialized(tag, step, value, wall_time):
    return event_pb2.Event(
        wall_time=wall_time, step=step,
        summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(
            tag=tag, simple_value=value)])).SerializeToString()


def check_file(path, t0, t1, want):
    # The name TensorBoard's and PyTorch's writers use.
    name = os.path.basename(path)
    m = re.fullmatch(r"events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)" + re.escape(SUFFIX), name)
    check(m is not None, f"file name {name}")
    if m:
        check(int(t0) - 1 <= int(m.group(1)) <= t1 + 1, f"timestamp in {name}")
        check(m.group(2) == socket.gethostname(), f"hostname in {name}")

    # 1. The record reader with CRC checks, and the bytes of every Event.
    try:
        records = raw_records(path)
    except stub_errors.DataLossError as e:
        check(False, f"record reader: {e}")
        return []
    check(len(records) == 1 + len(want), f"{len(records)} records, expected {1 + len(want)}")
    first = event_pb2.Event.FromString(records[0])
    check(first.file_version == "brain.Event:2", f"file_version {first.file_version!r}")
    check(t0 <= first.wall_time <= t1, f"file_version wall_time {first.wall_time} in [{t0}, {t1}]")
    check(first.step == 0 and not first.HasField("summary"), "file_version record holds no more")
    check(records[0] == event_pb2.Event(wall_time=first.wall_time,
                                        file_version="brain.Event:2").SerializeToString(),
          "file_version record bytes")
    for rec, (tag, step, value, wall) in zip(records[1:], want):
        if wall is None:
            wall = event_pb2.Event.FromString(rec).wall_time
        check(rec == serialized(tag, step, value, wall),
              f"bytes of {tag}@{step}: {rec.hex()} vs {serialized(tag, step, value, wall).hex()}")

    # 2. LegacyEventFileLoader: the Event protos as written.
    events = list(event_file_loader.LegacyEventFileLoader(path).Load())
    check(len(events) == 1 + len(want), f"legacy loader read {len(events)} events")
    for ev, (tag, step, value, wall) in zip(events[1:], want):
        check(len(ev.summary.value) == 1, "one value per event")
        v = ev.summary.value[0]
        check(v.tag == tag and ev.step == step, f"{v.tag}@{ev.step}, expected {tag}@{step}")
        check(v.WhichOneof("value") == "simple_value", f"{tag}@{step} is a simple_value")
        check(same_f32(v.simple_value, value), f"{tag}@{step}: {v.simple_value} vs f32({value})")
        if wall is None:
            check(t0 <= ev.wall_time <= t1, f"{tag}@{step}: wall_time {ev.wall_time} is now")
        else:
            check(ev.wall_time == wall, f"{tag}@{step}: wall_time {ev.wall_time} vs {wall}")

    # 3. EventFileLoader: simple_value migrated to a scalars-plugin tensor.
    events = list(event_file_loader.EventFileLoader(path).Load())
    check(len(events) == 1 + len(want), f"loader read {len(events)} events")
    check(events[0].file_version == "brain.Event:2", "loader: file_version")
    for ev, (tag, step, value, wall) in zip(events[1:], want):
        v = ev.summary.value[0]
        check(v.metadata.plugin_data.plugin_name == "scalars", f"{tag}: scalars plugin")
        got = tensor_util.make_ndarray(v.tensor)
        check(v.tag == tag and ev.step == step and got.shape == () and same_f32(got, value),
              f"loader: {v.tag}@{ev.step} = {got}, expected {tag}@{step} = f32({value})")

    # 4. EventAccumulator, keeping every scalar.
    acc = event_accumulator.EventAccumulator(
        os.path.dirname(path), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    check(acc.file_version == 2.0, f"accumulator file_version {acc.file_version}")
    tags = sorted({w[0] for w in want})
    check(sorted(acc.Tags()["scalars"]) == tags, f"scalar tags {sorted(acc.Tags()['scalars'])}")
    for tag in tags:
        got = acc.Scalars(tag)
        exp = [w for w in want if w[0] == tag]
        check(len(got) == len(exp), f"{tag}: {len(got)} scalars, expected {len(exp)}")
        for g, (_, step, value, wall) in zip(got, exp):
            check(g.step == step and same_f32(g.value, value)
                  and (wall is None or g.wall_time == wall),
                  f"accumulator {tag}: {g} vs step {step} value f32({value}) wall {wall}")
    return records


def corrupted(path, workdir, name, offset):
    """A copy of the file in its own directory with one byte flipped."""
    d = os.path.join(workdir, name)
    os.makedirs(d)
    copy = os.path.join(d, os.path.basename(path))
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0x20
    open(copy, "wb").write(data)
    return copy


def check_corruption(path, workdir, n_records):
    data = open(path, "rb").read()
    spans = record_offsets(data)
    check(len(spans) == n_records, "framing agrees with the reader")
    k = 100  # the record that is damaged; the k before it stay readable
    start, n = spans[k]
    cases = [
        ("data_crc", start + 12 + n + 1, "failed event crc32 check"),
        ("data", start + 12 + n - 2, "failed event crc32 check"),  # inside simple_value
        ("length_crc", start + 9, "failed header crc32 check"),
    ]
    for name, offset, message in cases:
        copy = corrupted(path, workdir, name, offset)
        try:
            raw_records(copy)
            check(False, f"{name}: corrupted file read without error")
        except stub_errors.DataLossError as e:
            check(message in str(e), f"{name}: error {e}")
        # TensorBoard's loader stops at the bad record (it takes it for a
        # record still being written): only the k before it arrive.
        got = list(event_file_loader.EventFileLoader(copy).Load())
        check(len(got) == k, f"{name}: loader read {len(got)} events, expected {k}")
        acc = event_accumulator.EventAccumulator(
            os.path.dirname(copy), size_guidance={event_accumulator.SCALARS: 0})
        acc.Reload()
        total = sum(len(acc.Scalars(t)) for t in acc.Tags()["scalars"])
        check(total == k - 1, f"{name}: accumulator kept {total} scalars, expected {k - 1}")

    # A file cut inside a record.
    d = os.path.join(workdir, "cut")
    os.makedirs(d)
    cut = os.path.join(d, os.path.basename(path))
    open(cut, "wb").write(data[:start + 7])
    try:
        raw_records(cut)
        check(False, "cut file read without error")
    except stub_errors.DataLossError as e:
        check("truncated record" in str(e), f"cut: error {e}")


def main():
    program = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ct_tb_") as workdir:
        logdir = os.path.join(workdir, "runs", "exp1")
        t0 = time.time()
        out = subprocess.run([program, logdir, SUFFIX], check=True, capture_output=True,
                             text=True)
        t1 = time.time()
        path = out.stdout.strip()
        check(os.listdir(logdir) == [os.path.basename(path)], f"one file in {logdir}")
        want = expected_scalars()
        records = check_file(path, t0, t1, want)
        if records:
            check_corruption(path, workdir, len(records))
        print(f"{len(records)} records ({len(want)} scalars) read back; "
              f"{os.path.getsize(path)} bytes")
    if failures:
        print(f"{len(failures)} failures", file=sys.stderr)
        return 1
    print("tbevents read-back: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
