"""ctrial's PyTorch files against torch 2.11, both ways (pth_tool is the C side).

C -> Python: pth_tool writes values holding every kind and dtype, views and
shared storages (also with zip64 records on every entry); torch.load(...,
weights_only=True) must read them as the very same objects: structure,
dtypes, shapes, strides, offsets, storage sharing and every bit. The archive
must look like torch.save's (entry names and order, stored, 64-byte aligned
data, the same storage bytes under the same keys), and the size and CRC-32
that ct_pth_save reports must be the file's (zlib.crc32).

Python -> C: torch.save of a module's state_dict (BatchNorm's int64
num_batches_tracked included), optimizer and scheduler state_dicts, a dict of
every dtype with views and shared storages, parameters, with pickle protocols
2 and 4; pth_tool loads each (from the file and from memory) and its dump
must equal Python's bit for bit; ctrial re-saving the loaded value must give
torch the original back.

Numpy (what Determined's checkpoints carry): arrays of every dtype ctrial
reads (C and Fortran order, big-endian, empty, uint16/uint32 widened to
int32/int64), numpy scalars (numbers), Python's random.getstate() (nested
tuples), with pickle protocols 2 to 5, must load as the same values; so must
a state_dict.pth laid out as Determined's PyTorchTrial._save writes it, its
np_rng_state array equal to numpy's.

Refusals: other classes, complex and quantized tensors, numpy arrays of
dtypes ctrial lacks (uint64, complex, object, strings, structured,
datetime), ints beyond 64 bits, bytes, sets, NUL bytes in strings, damaged or
foreign archives: each fails with CT_EFORMAT and a message naming what was
found.

    test_pth_torch.py PTH_TOOL
"""

import collections
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pthjson import diff, encode  # noqa: E402

torch.manual_seed(0)
TOOL = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="ct_pth_py_")


def path(name):
    return os.path.join(TMP, name)


def tool(*args):
    """Runs pth_tool; returns its output lines as JSON."""
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    assert r.returncode == 0, f"pth_tool {' '.join(args)[:300]} failed ({r.returncode}): {r.stderr}"
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    return lines[0] if len(lines) == 1 else lines


def tool_each(cmd, paths, *flags):
    """pth_tool CMD [FLAGS] PATH...: one result per path."""
    out = tool(cmd, *flags, *paths)
    return out if len(paths) != 1 else [out]


def normal(x):
    return json.loads(json.dumps(x))


def same(c_dump, obj, what):
    d = diff(normal(c_dump), normal(encode(obj)))
    assert d is None, f"{what}: {d}"


def local_data_offset(f, info):
    f.seek(info.header_offset)
    h = f.read(30)
    assert h[:4] == b"PK\x03\x04"
    nlen, xlen = int.from_bytes(h[26:28], "little"), int.from_bytes(h[28:30], "little")
    return info.header_offset + 30 + nlen + xlen


# ---- C -> Python ---------------------------------------------------------------------------


def check_archive(p, out, archive, zip64):
    data = open(p, "rb").read()
    assert out["sum"]["nbytes"] == len(data), "ct_pth_save's size is not the file's"
    assert out["sum"]["crc32"] == zlib.crc32(data), "ct_pth_save's CRC-32 is not zlib.crc32 of the file"
    assert tool("checksum", p) == out["sum"]
    with open(p, "rb") as f, zipfile.ZipFile(f) as z:
        assert z.testzip() is None
        names = z.namelist()
        nstorages = len(out["dump"]["storages"])
        want = [f"{archive}/{n}" for n in ["data.pkl", ".format_version", ".storage_alignment", "byteorder"]
                + [f"data/{k}" for k in range(nstorages)] + ["version", ".data/serialization_id"]]
        assert names == want, f"entries {names}"
        assert z.read(f"{archive}/byteorder") == b"little" and z.read(f"{archive}/version") == b"3\n"
        assert z.read(f"{archive}/.format_version") == b"1" and z.read(f"{archive}/.storage_alignment") == b"64"
        assert len(z.read(f"{archive}/.data/serialization_id")) == 40
        for info in z.infolist():
            assert info.compress_type == zipfile.ZIP_STORED and info.flag_bits == 0x0808
            assert local_data_offset(f, info) % 64 == 0, f"{info.filename} is not 64-byte aligned"
            assert (b"\x01\x00" == info.extra[:2]) == zip64, f"{info.filename}: zip64 extra {info.extra!r}"
    if zip64:  # the classic end record defers to the zip64 one
        assert data[-22:-18] == b"PK\x05\x06" and data[-12:-4] == b"\xff" * 8 and data[-14:-12] == b"\xff\xff"


def test_specimen():
    for zip64 in (False, True):
        p = path("specimen64.pth" if zip64 else "specimen.pth")
        out = tool("save-specimen", p, *(["--zip64"] if zip64 else []))
        obj = torch.load(p, weights_only=True)
        same(out["dump"], obj, p)
        check_archive(p, out, "specimen64" if zip64 else "specimen", zip64)
        same(out["dump"], torch.load(p, weights_only=True, mmap=True), p + " (mmap)")
        # Sharing as PyTorch sees it.
        v = obj["views"]
        ptr = v["base"].untyped_storage().data_ptr()
        for k in ("transposed", "row", "column", "strided", "narrow", "expanded"):
            assert v[k].untyped_storage().data_ptr() == ptr, k
        assert v["strided"].stride() == (12, 2) and v["narrow"].storage_offset() == 2
        assert v["expanded"].stride() == (0, 1)
        a, b, c = obj["shared"]
        assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() == c.untyped_storage().data_ptr()
        assert obj["odd"]["requires_grad"].requires_grad and not obj["odd"]["scalar"].requires_grad
        assert obj[7] == "int key" and obj[-3] == "negative int key" and obj[1 << 40] == "large int key"
        # torch.save of the same object writes the same storages under the same keys.
        q = path("specimen_torch.pth")
        torch.save(obj, q)
        with zipfile.ZipFile(p) as zc, zipfile.ZipFile(q) as zt:
            ours = [n.split("/", 1)[1] for n in zc.namelist()]
            theirs = [n.split("/", 1)[1] for n in zt.namelist()]
            assert ours == theirs, f"{ours} vs {theirs}"
            for n in zc.namelist():
                rest = n.split("/", 1)[1]
                if rest.startswith("data/"):
                    assert zc.read(n) == zt.read("specimen_torch/" + rest), rest


def test_top_level():
    for kind in ("list", "tuple", "tensor", "int"):
        p = path(f"top_{kind}.pth")
        out = tool("save-top", kind, p)
        obj = torch.load(p, weights_only=True)
        same(out["dump"], obj, p)
    x = torch.load(path("top_list.pth"), weights_only=True)
    assert x[0].untyped_storage().data_ptr() == x[1].untyped_storage().data_ptr()


# ---- Python -> C ---------------------------------------------------------------------------


def trained():
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
    adam = torch.optim.Adam(model.parameters(), lr=1e-2, amsgrad=True)
    sgd = torch.optim.SGD([nn.Parameter(torch.randn(3))], lr=0.1, momentum=0.9)
    step = torch.optim.lr_scheduler.StepLR(adam, step_size=2, gamma=0.5)
    cycle = torch.optim.lr_scheduler.OneCycleLR(sgd, max_lr=0.1, total_steps=10)
    for _ in range(3):
        loss = model(torch.randn(2, 1, 8, 8)).square().mean()
        adam.zero_grad()
        loss.backward()
        adam.step()
        step.step()
        sgd.param_groups[0]["params"][0].grad = torch.randn(3)
        sgd.step()
        cycle.step()
    return model, adam, sgd, step, cycle


def dtype_dict():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) - 7.5
    d = {str(dt).split(".")[1]: (torch.arange(6) - 3).to(dt).reshape(2, 3) for dt in
         (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8, torch.bool)}
    d.update({
        "base": base, "t": base.t(), "row": base[2], "strided": base[1::2, 1::2], "expanded": base[3:4].expand(5, 6),
        "shared": (base, base[1]), "empty": torch.zeros(0, 5), "scalar": torch.tensor(2.5, dtype=torch.float64),
        "param": nn.Parameter(torch.ones(2, 2)), "frozen": nn.Parameter(torch.ones(3), requires_grad=False),
        "grad": torch.zeros(2, requires_grad=True),
        "nested": [1, (2.5, None, True), {"x": [[]], 5: -(2 ** 63)}], 3: "int key", "nan": float("nan"),
    })
    return d


def python_objects():
    model, adam, sgd, step, cycle = trained()
    sd = model.state_dict()
    assert sd["1.num_batches_tracked"].dtype == torch.int64 and hasattr(sd, "_metadata")
    return {
        "module": sd,
        "adam": adam.state_dict(),
        "sgd": sgd.state_dict(),
        "steplr": step.state_dict(),
        "onecycle": cycle.state_dict(),
        "dtypes": dtype_dict(),
        "checkpoint": {"models_state_dict": [sd], "optimizers_state_dict": [adam.state_dict()],
                       "lr_schedulers_state_dict": [step.state_dict()], "rng_state": torch.get_rng_state(),
                       "steps_completed": 3},
    }


def test_python_files():
    files = []
    for name, obj in python_objects().items():
        for proto in (2, 4):
            p = path(f"py_{name}_{proto}.pth")
            torch.save(obj, p, pickle_protocol=proto)
            files.append((p, obj))
    paths = [p for p, _ in files]
    for flags in ((), ("--buffer",)):
        for (p, obj), out in zip(files, tool_each("dump", paths, *flags)):
            assert "dump" in out, f"{p}: {out}"
            same(out["dump"], obj, f"{p} {flags}")
    for p, s in zip(paths, tool_each("checksum", paths)):
        data = open(p, "rb").read()
        assert s == {"nbytes": len(data), "crc32": zlib.crc32(data)}, p
    # ctrial re-saves what it loaded: torch gets the original back.
    pairs = [(p, path("resaved_" + os.path.basename(p)[3:])) for p in paths]
    outs = tool_each("resave", [x for pair in pairs for x in pair])
    for (p, obj), (_, q), out in zip(files, pairs, outs):
        same(out["dump"], obj, q + " (C's view)")
        d = diff(normal(encode(torch.load(q, weights_only=True))), normal(encode(obj)))
        assert d is None, f"{q}: {d}"
    # What ctrial re-saved loads into a torch optimizer.
    _, adam, *_ = trained()
    adam.load_state_dict(torch.load(path("resaved_adam_2.pth"), weights_only=True))


# ---- numpy and Python's RNG states -----------------------------------------------------------


def as_ctrial(x, memo=None):
    """What ctrial loads in place of Python's x: numpy arrays as tensors of
    the same values and memory order (uint16 / uint32 widened; one array met
    twice is one tensor, as the pickle's memo makes it), numpy scalars as
    Python numbers; containers converted inside."""
    memo = {} if memo is None else memo
    if isinstance(x, np.ndarray):
        if id(x) not in memo:
            memo[id(x)] = (x, numpy_tensor(x))
        return memo[id(x)][1]
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, tuple):
        return tuple(as_ctrial(v, memo) for v in x)
    if isinstance(x, list):
        return [as_ctrial(v, memo) for v in x]
    if isinstance(x, dict):
        return type(x)((k, as_ctrial(v, memo)) for k, v in x.items())
    return x


def numpy_tensor(x):
    """A new tensor of x's values (native byte order, uint16 / uint32
    widened) with torch's own strides for x's memory order."""
    a = x.astype(x.dtype.newbyteorder("="), order="K")
    a = a.astype({np.dtype(np.uint16): np.int32, np.dtype(np.uint32): np.int64}.get(a.dtype, a.dtype), order="K")

    def fresh(b):
        t = torch.from_numpy(b.copy(order="C"))
        return torch.empty(t.shape, dtype=t.dtype).copy_(t)

    if a.ndim > 1 and not a.flags.c_contiguous and a.flags.f_contiguous:
        return fresh(a.transpose()).permute(*reversed(range(a.ndim)))
    return fresh(a)


def numpy_objects():
    np.random.seed(5)
    random.seed(6)
    np.random.rand(3)  # a state mid-stream, with a cached gaussian
    np.random.standard_normal()
    random.random()
    arrays = {str(np.dtype(d)): (np.arange(6) - 2).astype(d).reshape(2, 3) for d in
              (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.float16,
               np.float32, np.float64)}
    arrays.update({
        "uint32_max": np.array([0, 1, 2 ** 31, 2 ** 32 - 1], dtype=np.uint32),
        "fortran": np.asfortranarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4)),
        "big_endian": np.arange(5, dtype=">f8") / 3, "big_int": np.arange(-2, 3, dtype=">i4"),
        "empty": np.zeros((0, 4), dtype=np.int64), "scalar0d": np.array(7.25), "nan": np.array([np.nan, -np.inf]),
        "strided": np.arange(20, dtype=np.int32).reshape(4, 5)[::2, 1::2],
    })
    scalars = {"f32": np.float32(1.1), "f64": np.float64(-2.5), "f16": np.float16(0.1), "i8": np.int8(-7),
               "i64": np.int64(-2 ** 63), "u64": np.uint64(2 ** 63 - 1), "u32": np.uint32(4000000000),
               "b": np.bool_(False), "nan": np.float32("nan")}
    return {"np_rng_state": np.random.get_state(), "random_rng_state": random.getstate(), "arrays": arrays,
            "scalars": scalars, "shared": [arrays["int64"], arrays["int64"]]}


def determined_checkpoint():
    """The dict Determined's PyTorchTrial._save passes to torch.save."""
    model, adam, _, step, _ = trained()
    np.random.seed(11)
    random.seed(12)
    return {
        "models_state_dict": [model.state_dict()],
        "optimizers_state_dict": [adam.state_dict()],
        "lr_schedulers_state_dict": [step.state_dict()],
        "callbacks": {},
        "rng_state": {"cpu_rng_state": torch.random.get_rng_state(), "np_rng_state": np.random.get_state(),
                      "random_rng_state": random.getstate()},
    }


def test_numpy():
    objs = numpy_objects()
    files = []
    for proto in (2, 3, 4, 5):
        p = path(f"numpy_{proto}.pth")
        torch.save(objs, p, pickle_protocol=proto)
        files.append(p)
    p = path("determined_state_dict.pth")
    det = determined_checkpoint()
    torch.save(det, p)
    files.append(p)
    want = [as_ctrial(objs)] * 4 + [as_ctrial(det)]
    for flags in ((), ("--buffer",)):
        for p, obj, out in zip(files, want, tool_each("dump", files, *flags)):
            assert "dump" in out, f"{p}: {out}"
            same(out["dump"], obj, f"{p} {flags}")
    # The numpy state as numpy has it: every word of the key, pos, has_gauss, gauss.
    out = tool("dump", files[-1])
    np_state = dict(out["dump"]["value"]["dict"])["rng_state"]["dict"]
    np_state = dict(np_state)["np_rng_state"]["tuple"]
    name, key, pos, has_gauss, gauss = det["rng_state"]["np_rng_state"]
    t = np_state[1]["tensor"]
    assert np_state[0] == name == "MT19937" and t["dtype"] == "int64" and t["shape"] == [624]
    assert np.array_equal(np.frombuffer(bytes.fromhex(t["data"]), dtype="<i8"), key.astype(np.int64))
    assert np_state[2] == pos and np_state[3] == has_gauss
    # A value ctrial loaded from numpy's pickles saves as torch tensors torch reads.
    q = path("numpy_resaved.pth")
    tool("resave", files[0], q)
    d = diff(normal(encode(torch.load(q, weights_only=True))), normal(encode(as_ctrial(objs))))
    assert d is None, f"{q}: {d}"


# ---- refusals ------------------------------------------------------------------------------


class Foo:
    def __init__(self):
        self.x = 1


class Evil:
    """Pickles as a _rebuild_tensor_v2 call that reaches past its storage."""

    def __init__(self, t):
        self.storage = torch.storage.TypedStorage(wrap_storage=t.untyped_storage(), dtype=t.dtype, _internal=True)

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2,
                (self.storage, 100, (5,), (1,), False, collections.OrderedDict()))


def check_refusals(cases):
    """cases: (path, code, needle); each file must be refused, from disk and
    from memory, with that code and a message naming the file and needle."""
    paths = [p for p, _, _ in cases]
    for flags in ((), ("--buffer",)):
        for (p, code, needle), out in zip(cases, tool_each("dump", paths, *flags)):
            assert "code" in out, f"{p} {flags}: expected a refusal, got {str(out)[:200]}"
            assert out["code"] == code and needle in out["message"], \
                f"{p} {flags}: expected {code} with {needle!r}, got {out['code']}: {out['message']}"
            assert p in out["message"], f"the message does not name the file: {out['message']}"


def rezip(src, dst, compress=zipfile.ZIP_STORED, change=None):
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", compression=compress) as zo:
        for info in zi.infolist():
            data = zi.read(info)
            if change:
                data = change(info.filename, data)
            zo.writestr(info.filename, data)


def test_refusals():
    cases = [
        ({"a": np.arange(3, dtype=np.uint64)}, 2, "a numpy uint64 array"),
        ({"a": np.arange(3, dtype=np.uint64)}, 5, "a numpy uint64 array"),
        ({"a": np.uint64(2 ** 64 - 1)}, 2, "a numpy uint64 scalar 18446744073709551615 is beyond 64 bits"),
        ({"a": np.zeros(2, dtype=np.complex64)}, 2, "numpy dtype 'c8' is refused"),
        ({"a": np.array([1, "x"], dtype=object)}, 2, "numpy dtype 'O8' is refused"),
        ({"a": np.array(["ab"])}, 2, "numpy dtype 'U2' is refused"),
        ({"a": np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")])}, 2, "numpy dtype 'V8' is refused"),
        ({"a": np.zeros(2, dtype="datetime64[s]")}, 2, "numpy dtype 'M8' is refused"),
        ({"a": np.longdouble(1)}, 2, "numpy dtype 'f16' is refused"),
        ({"g": np.random.default_rng(0)}, 2, "refuses global 'numpy.random._pickle."),
        ({"m": np.ma.masked_array([1, 2])}, 2, "refuses global 'numpy.ma.core."),
        ({"s": "a\x00b"}, 2, "a string holds a NUL byte"),
        ({"a\x00b": 1}, 2, "a dict key holds a NUL byte"),
        ({"x": Foo()}, 2, "refuses global '__main__.Foo'"),
        ({"c": torch.zeros(2, dtype=torch.complex64)}, 2,
         "complex tensors are not supported (global 'torch.ComplexFloatStorage')"),
        ({"q": torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)}, 2, "quantized tensors"),
        ({"u": torch.zeros(2, dtype=torch.uint16)}, 2, "a tensor of a dtype ctrial lacks"),
        ({"n": 2 ** 70}, 2, "beyond 64 bits"),
        ({"n": -(2 ** 63) - 1}, 2, "beyond 64 bits"),
        ({"b": b"xyz"}, 2, "bytes values are not supported"),
        ({"b": b""}, 2, "bytes values are not supported"),
        ({"b": bytearray(b"xy")}, 5, "bytes values are not supported"),
        ({"b": b"xyz"}, 4, "bytes values are not supported"),
        ({"s": {1, 2}}, 2, "refuses global '__builtin__.set'"),
        ({"s": {1, 2}}, 4, "sets are not supported"),
        ({1.5: "float key"}, 2, "a dict key of type float"),
        ({"e": Evil(torch.zeros(4))}, 2, "a float32 tensor reaching element 104 of a storage of 4 elements"),
    ]
    refusals = []
    for i, (obj, proto, needle) in enumerate(cases):
        p = path(f"refused_{i}.pth")
        torch.save(obj, p, pickle_protocol=proto)
        refusals.append((p, "CT_EFORMAT", needle))
    good = path("good.pth")
    torch.save({"w": torch.arange(10.0), "v": torch.ones(3)}, good)
    data = open(good, "rb").read()
    with zipfile.ZipFile(good) as z:
        info = z.getinfo("good/data/0")
        with open(good, "rb") as f:
            at = local_data_offset(f, info)
    open(path("cut.pth"), "wb").write(data[: len(data) // 2])
    refusals.append((path("cut.pth"), "CT_EFORMAT", "truncated"))
    flipped = bytearray(data)
    flipped[at + 3] ^= 0x10
    open(path("flipped.pth"), "wb").write(bytes(flipped))
    refusals.append((path("flipped.pth"), "CT_EFORMAT", "entry good/data/0: its bytes have CRC-32"))
    open(path("text.pth"), "w").write("just some text, long enough to be looked at\n")
    refusals.append((path("text.pth"), "CT_EFORMAT", "not a zip archive"))
    with zipfile.ZipFile(path("nopkl.pth"), "w") as z:
        z.writestr("arch/other.txt", "hello")
    refusals.append((path("nopkl.pth"), "CT_EFORMAT", "no entry arch/data.pkl"))
    rezip(good, path("deflated.pth"), zipfile.ZIP_DEFLATED)
    refusals.append((path("deflated.pth"), "CT_EFORMAT", "is compressed (method 8)"))
    rezip(good, path("short.pth"), change=lambda n, d: d[:-4] if n.endswith("data/0") else d)
    refusals.append((path("short.pth"), "CT_EFORMAT",
                     "entry good/data/0 holds 36 bytes, but the pickle says 10 float32 values (40 bytes)"))
    torch.save({"w": torch.ones(2)}, path("legacy.pth"), _use_new_zipfile_serialization=False)
    refusals.append((path("legacy.pth"), "CT_EFORMAT", "legacy format"))
    refusals.append((path("nothing-here.pth"), "CT_EIO", "cannot open"))
    # One memoized bytes object BUILT into array after array: a few bytes of
    # pickle each, 1000 bytes of memory each. Refused past 4x the pickle.
    state = (b"(K\x01M\xe8\x03\x85cnumpy\ndtype\nq\x07X\x02\x00\x00\x00u1\x89\x88\x87Rq\x08(K\x03X\x01\x00\x00"
             b"\x00|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89B\xe8\x03\x00\x00" + bytes(1000) + b"tq\x09b")
    hostile = (b"\x80\x03]q\x00(cnumpy.core.multiarray\n_reconstruct\nq\x01cnumpy\nndarray\nq\x02K\x00\x85q\x03"
               b"C\x01bq\x04\x87q\x05Rq\x06" + state + b"h\x01h\x02h\x03h\x04\x87Rh\x09b" * 50 + b"e.")
    assert len(pickle.loads(hostile)) == 51  # Python reads it: 51 arrays
    with zipfile.ZipFile(path("reused_bytes.pth"), "w") as z:
        z.writestr("a/data.pkl", hostile)
    refusals.append((path("reused_bytes.pth"), "CT_EFORMAT", "numpy data would take more than"))
    check_refusals(refusals)


def test_checksum():
    files = [(path(name), data) for name, data in
             (("empty.bin", b""), ("one.bin", b"x"), ("odd.bin", bytes(range(256)) * 4099))]
    for p, data in files:
        open(p, "wb").write(data)
    for (p, data), s in zip(files, tool_each("checksum", [p for p, _ in files])):
        assert s == {"nbytes": len(data), "crc32": zlib.crc32(data)}, p


def main():
    tests = [test_specimen, test_top_level, test_python_files, test_numpy, test_refusals, test_checksum]
    failed = 0
    for t in tests:
        try:
            t()
            print(f"ok   {t.__name__}")
        except AssertionError as e:
            failed += 1
            print(f"FAIL {t.__name__}: {e}")
    shutil.rmtree(TMP, ignore_errors=True)
    print(f"{len(tests) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
