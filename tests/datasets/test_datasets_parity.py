"""Dataset parity: the files ctrial reads against numpy (and torch for
MNIST's ToTensor). This script writes the test files itself — IDX files of
every type code, a records file, CSV/TSV files in several dialects — runs
datasets_dump on them, and compares every value bit for bit with what numpy
reads or computes here, now.

usage: test_datasets_parity.py DATASETS_DUMP"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

SRC = os.environ.get("CTRIAL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
DIGITS = os.path.join(SRC, "examples", "data", "digits")

IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.int16, 0x0C: np.int32,
             0x0D: np.float32, 0x0E: np.float64}
CT_NAME = {np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8", np.dtype(np.int16): "int16",
           np.dtype(np.int32): "int32", np.dtype(np.int64): "int64",
           np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
           np.dtype(np.float16): "float16", np.dtype(np.bool_): "bool"}
NP_OF = {v: k for k, v in CT_NAME.items()}

failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL:", msg)


def idx_bytes(arr, code):
    """An IDX file by the format's definition: magic, big-endian sizes and values."""
    head = bytes([0, 0, code, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    return head + arr.astype(np.dtype(IDX_TYPES[code]).newbyteorder(">")).tobytes()


def values_for(code, shape, rng):
    dt = np.dtype(IDX_TYPES[code])
    if dt.kind == "f":
        a = (rng.standard_normal(shape) * 1000).astype(dt)
        flat = a.reshape(-1)
        specials = np.array([np.inf, -np.inf, np.nan, -0.0, np.finfo(dt).max, np.finfo(dt).tiny],
                            dtype=dt)
        flat[: min(len(flat), len(specials))] = specials[: len(flat)]
        return a
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt)
    flat = a.reshape(-1)
    ext = np.array([info.min, info.max, 0, -1 if info.min < 0 else 1], dtype=dt)
    flat[: min(len(flat), len(ext))] = ext[: len(flat)]
    return a


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def load_leaf(leaf):
    raw = open(leaf["file"], "rb").read()
    return np.frombuffer(raw, dtype=NP_OF[leaf["dtype"]]).reshape(leaf["shape"])


def check_leaves(name, got, expected):
    if "error" in got:
        fail(f"{name}: {got['error']}: {got['message']}")
        return
    leaves = got["batch"]
    if len(leaves) != len(expected):
        fail(f"{name}: {len(leaves)} tensors, expected {len(expected)}")
        return
    for k, (leaf, exp) in enumerate(zip(leaves, expected)):
        arr = load_leaf(leaf)
        if not same_bits(arr, exp):
            fail(f"{name}[{k}]: got {arr.dtype}{list(arr.shape)}, expected "
                 f"{exp.dtype}{list(exp.shape)}; values differ" if arr.shape == exp.shape else
                 f"{name}[{k}]: shape {list(arr.shape)} != {list(exp.shape)}")
    if "batch_matches_gets" in got and not got["batch_matches_gets"]:
        fail(f"{name}: get_batch differs from stacking get() results")


def check_sample(name, got, kind, leaves):
    if "error" in got:
        return
    if got.get("sample_kind") != kind:
        fail(f"{name}: sample is a {got.get('sample_kind')}, expected a {kind}")
    want = [{"dtype": d, "shape": s} for d, s in leaves]
    if got.get("sample") != want:
        fail(f"{name}: sample leaves {got.get('sample')} != {want}")


def main():
    with tempfile.TemporaryDirectory(prefix="ct_datasets_") as tmp:
        run(sys.argv[1], tmp)


def run(dump, tmp):
    rng = np.random.default_rng(1234)
    jobs, expect, samples = [], {}, {}

    # ---- IDX: every type code, several ranks, plain and gzip --------------
    shapes = [(7,), (3, 4, 5), (2, 1, 3, 2), (1, 1, 1, 1, 1, 1, 1, 2), (0, 5)]
    for code in IDX_TYPES:
        for si, shape in enumerate(shapes):
            arr = values_for(code, shape, rng)
            name = f"idx_{code:02x}_{si}"
            path = os.path.join(tmp, name + ".idx")
            data = idx_bytes(arr, code)
            if si == 1:  # one compressed file per type code
                path += ".gz"
                with gzip.open(path, "wb") as f:
                    f.write(data)
            else:
                open(path, "wb").write(data)
            jobs.append({"name": name, "kind": "idx", "path": path})
            expect[name] = [arr.astype(arr.dtype.newbyteorder("="))]

    # ---- MNIST: the bundled digits, gz and decompressed --------------------
    for split in ("train", "t10k"):
        img_gz = os.path.join(DIGITS, f"{split}-images-idx3-ubyte.gz")
        lab_gz = os.path.join(DIGITS, f"{split}-labels-idx1-ubyte.gz")
        img_raw, lab_raw = gzip.open(img_gz).read(), gzip.open(lab_gz).read()
        n, h, w = (int.from_bytes(img_raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(3))
        images = np.frombuffer(img_raw, dtype=np.uint8, offset=16).reshape(n, h, w)
        labels = np.frombuffer(lab_raw, dtype=np.uint8, offset=8)
        # torchvision's ToTensor on each uint8 image: float32, / 255, [1, H, W].
        x = torch.from_numpy(images.copy()).to(dtype=torch.float32).div(255).unsqueeze(1).numpy()
        y = labels.astype(np.int64)
        jobs.append({"name": f"mnist_{split}", "kind": "mnist", "images": img_gz, "labels": lab_gz})
        expect[f"mnist_{split}"] = [x, y]
        samples[f"mnist_{split}"] = ("tuple", [("float32", [1, h, w]), ("int64", [])])
        if split == "t10k":
            ip, lp = os.path.join(tmp, "t10k-images"), os.path.join(tmp, "t10k-labels")
            open(ip, "wb").write(img_raw)
            open(lp, "wb").write(lab_raw)
            jobs.append({"name": "mnist_plain", "kind": "mnist", "images": ip, "labels": lp})
            expect["mnist_plain"] = [x, y]

    # ---- records -------------------------------------------------------------
    cifar = np.dtype([("label", "u1"), ("image", "u1", (3, 4, 4))])
    recs = np.zeros(9, dtype=cifar)
    recs["label"] = rng.integers(0, 10, 9)
    recs["image"] = rng.integers(0, 256, (9, 3, 4, 4))
    path = os.path.join(tmp, "cifar.bin")
    recs.tofile(path)
    jobs.append({"name": "records_cifar", "kind": "records", "path": path, "fields": [
        {"dtype": "uint8", "shape": []}, {"dtype": "uint8", "shape": [3, 4, 4]}]})
    expect["records_cifar"] = [recs["label"].copy(), recs["image"].copy()]
    samples["records_cifar"] = ("tuple", [("uint8", []), ("uint8", [3, 4, 4])])

    # packed, unaligned, little-endian fields after a 13-byte header
    mixed = np.dtype([("a", "<f4", (2, 3)), ("b", "<i8"), ("c", "<i2", (5,)), ("d", "<f8"),
                      ("e", "i1", (1, 2, 1, 2))])
    recs = np.zeros(11, dtype=mixed)
    for f in mixed.names:
        recs[f] = rng.standard_normal(recs[f].shape) * 100
    path = os.path.join(tmp, "mixed.bin")
    with open(path, "wb") as fh:
        fh.write(b"HEADER-BYTES!")
        fh.write(recs.tobytes())
    jobs.append({"name": "records_mixed", "kind": "records", "path": path, "header_bytes": 13,
                 "fields": [{"dtype": "float32", "shape": [2, 3]}, {"dtype": "int64", "shape": []},
                            {"dtype": "int16", "shape": [5]}, {"dtype": "float64", "shape": []},
                            {"dtype": "int8", "shape": [1, 2, 1, 2]}]})
    expect["records_mixed"] = [recs[f].astype(recs[f].dtype.newbyteorder("=")) for f in mixed.names]
    samples["records_mixed"] = ("tuple", [("float32", [2, 3]), ("int64", []), ("int16", [5]),
                                          ("float64", []), ("int8", [1, 2, 1, 2])])

    path = os.path.join(tmp, "single.bin")
    single = rng.standard_normal((6, 4)).astype("<f8")
    single.tofile(path)
    jobs.append({"name": "records_single", "kind": "records", "path": path,
                 "fields": [{"dtype": "float64", "shape": [4]}]})
    expect["records_single"] = [single.astype(np.float64)]
    samples["records_single"] = ("tensor", [("float64", [4])])

    path = os.path.join(tmp, "empty.bin")
    open(path, "wb").close()
    jobs.append({"name": "records_empty", "kind": "records", "path": path,
                 "fields": [{"dtype": "uint8", "shape": [2]}]})

    # ---- CSV / TSV --------------------------------------------------------------
    vals = np.round(rng.standard_normal((8, 4)) * 50, 3)
    vals[0, 0], vals[1, 1], vals[2, 2] = 1e-7, -2.5e10, 0.1
    lab = rng.integers(0, 10, 8)

    def table(delim, label_at, header, crlf, trailing_nl, blank_lines):
        lines = []
        if header:
            lines.append(delim.join(f"col{i}" for i in range(5)))
        for r in range(len(vals)):
            cells = [repr(float(v)) for v in vals[r]]
            if label_at is not None:
                cells.insert(label_at, str(int(lab[r])))
            lines.append(delim.join(cells))
            if blank_lines and r == 3:
                lines.append("")
                lines.append("   ")
        nl = "\r\n" if crlf else "\n"
        return nl.join(lines) + (nl if trailing_nl else "")

    csv_cases = [
        # name, file name, text args, job options
        ("csv_plain", "plain.csv", (",", None, False, False, True, False), {}),
        ("csv_header_label", "hl.csv", (",", 2, True, False, False, True),
         {"header": True, "label_column": 2}),
        ("csv_crlf_first_label", "crlf.csv", (",", 0, True, True, True, True),
         {"header": True, "label_column": 0, "dtype": "float64"}),
        ("tsv_by_extension", "data.tsv", ("\t", 4, False, True, False, False),
         {"label_column": 4}),
        ("tsv_explicit", "data.txt", ("\t", None, True, False, True, False),
         {"delimiter": "\t", "header": True, "dtype": "float64"}),
        ("csv_buffer_label", "buf.csv", (",", 1, False, True, True, True),
         {"label_column": 1, "kind": "csv_buffer"}),
    ]
    for name, fname, targs, opts in csv_cases:
        path = os.path.join(tmp, fname)
        text = table(*targs)
        open(path, "w", newline="").write(text)
        job = {"name": name, "kind": opts.pop("kind", "csv"), "path": path, **opts}
        jobs.append(job)
        delim, label_at, header = targs[0], targs[1], targs[2]
        # numpy skips empty lines but not lines of blanks (ctrial skips both):
        # the reference reads the same file without the line of blanks.
        ref_path = path + ".ref"
        open(ref_path, "w", newline="").write(text.replace("   \r\n", "").replace("   \n", ""))
        ref = np.loadtxt(ref_path, delimiter=delim, skiprows=1 if header else 0, dtype=np.float64,
                         ndmin=2)
        dtype = NP_OF[opts.get("dtype", "float32")]
        if label_at is None:
            expect[name] = [ref.astype(dtype)]
            samples[name] = ("tensor", [(CT_NAME[np.dtype(dtype)], [ref.shape[1]])])
        else:
            feats = np.delete(ref, label_at, axis=1).astype(dtype)
            expect[name] = [feats, ref[:, label_at].astype(np.int64)]
            samples[name] = ("tuple", [(CT_NAME[np.dtype(dtype)], [feats.shape[1]]), ("int64", [])])

    # integer features, blanks around values, exponents and signs
    path = os.path.join(tmp, "ints.csv")
    ints = rng.integers(-30000, 30000, (5, 3))
    open(path, "w").write("\n".join(" , ".join(f" {v} " for v in row) + " ,+1e1" for row in ints))
    jobs.append({"name": "csv_int16", "kind": "csv", "path": path, "dtype": "int16"})
    ref = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    expect["csv_int16"] = [ref.astype(np.int16)]
    samples["csv_int16"] = ("tensor", [("int16", [4])])

    jobs_path = os.path.join(tmp, "jobs.json")
    json.dump(jobs, open(jobs_path, "w"))
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    proc = subprocess.run([dump, jobs_path, out], capture_output=True, text=True)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        fail(f"datasets_dump exited with {proc.returncode}")
        return
    got = json.load(open(os.path.join(out, "result.json")))
    for name, exp in expect.items():
        check_leaves(name, got[name], exp)
        if name in samples:
            check_sample(name, got[name], *samples[name])
            if got[name].get("len") != len(exp[0]):
                fail(f"{name}: len {got[name].get('len')} != {len(exp[0])}")
    if got["records_empty"] != {"len": 0}:
        fail(f"records_empty: {got['records_empty']}")
    print(f"{len(expect) + 1} datasets compared with numpy")


if __name__ == "__main__":
    main()
    if failures:
        print(f"{failures} failures")
        sys.exit(1)
