"""ct_dataset_cifar against torchvision.datasets.CIFAR10 / CIFAR100: small
synthetic archives written with numpy in both versions, the binary one
(ctrial's: label byte(s) + 3072 image bytes per record) and the Python one
(torchvision's: pickled dicts holding "data" uint8 [N, 3072] and "labels",
or "fine_labels" and "coarse_labels", plus the meta files its _load_meta
reads). For train and test of both kinds, every sample ctrial gives
(cifar_dump: get, get_batch, and one shuffled pass of a 2-worker loader)
equals torchvision's: np.array(img).transpose(2, 0, 1) for the image and
the target for the label (CIFAR-100's fine label). The loader's pass is in
the order of Determined's shuffle (numpy's RandomState(seed).shuffle).

    test_cifar_parity.py CIFAR_DUMP
"""
import os
import pickle
import subprocess
import sys
import tempfile

import numpy as np
import torchvision.datasets.cifar as tv_cifar

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check  # noqa: E402

# The md5 sums of the real archive's files cannot match synthetic ones:
# torchvision's check_integrity (of the batches and of the meta file) then
# only asks that the file exist.
tv_cifar.check_integrity = lambda fpath, md5=None: os.path.isfile(fpath)

IMG = 3 * 32 * 32
SEED = 7


def make_split(rng, n, kind):
    """n random images, with labels covering both ends of their range."""
    data = rng.integers(0, 256, (n, IMG), dtype=np.uint8)
    data[0, :], data[-1, :] = 0, 255  # the extreme pixels
    if kind == 10:
        labels = rng.integers(0, 10, n)
        labels[:2] = 0, 9
        return data, {"labels": labels.tolist()}, [labels]
    fine, coarse = rng.integers(0, 100, n), rng.integers(0, 20, n)
    fine[:2], coarse[:2] = (0, 99), (19, 0)
    return data, {"fine_labels": fine.tolist(), "coarse_labels": coarse.tolist()}, [coarse, fine]


def write_both(bin_dir, py_dir, name, data, entry, label_bytes):
    rec = np.concatenate([np.stack(label_bytes, 1).astype(np.uint8), data], 1)  # [N, k + 3072]
    rec.tofile(os.path.join(bin_dir, name + ".bin"))
    with open(os.path.join(py_dir, name), "wb") as f:
        pickle.dump({"batch_label": name, "data": data, "filenames": [f"{i}.png" for i in range(len(data))], **entry},
                    f, protocol=2)


def make_archives(work, rng):
    """cifar-10-batches-bin/-py and cifar-100-binary/-python under work."""
    dirs = {k: os.path.join(work, k) for k in ("cifar-10-batches-bin", "cifar-10-batches-py",
                                                 "cifar-100-binary", "cifar-100-python")}
    for d in dirs.values():
        os.makedirs(d)
    for i, n in enumerate([7, 13, 9, 11, 8]):
        write_both(dirs["cifar-10-batches-bin"], dirs["cifar-10-batches-py"], f"data_batch_{i + 1}",
                   *make_split(rng, n, 10))
    write_both(dirs["cifar-10-batches-bin"], dirs["cifar-10-batches-py"], "test_batch", *make_split(rng, 10, 10))
    with open(os.path.join(dirs["cifar-10-batches-py"], "batches.meta"), "wb") as f:
        pickle.dump({"label_names": [f"class{i}" for i in range(10)], "num_vis": IMG}, f, protocol=2)
    write_both(dirs["cifar-100-binary"], dirs["cifar-100-python"], "train", *make_split(rng, 23, 100))
    write_both(dirs["cifar-100-binary"], dirs["cifar-100-python"], "test", *make_split(rng, 12, 100))
    with open(os.path.join(dirs["cifar-100-python"], "meta"), "wb") as f:
        pickle.dump({"fine_label_names": [f"fine{i}" for i in range(100)],
                     "coarse_label_names": [f"coarse{i}" for i in range(20)]}, f, protocol=2)
    return dirs


def read_dump(path):
    raw = open(path, "rb").read()
    n = int(np.frombuffer(raw, np.int64, 1)[0])
    at = 8

    def take(k):  # k images, then k int64 labels
        nonlocal at
        img = np.frombuffer(raw, np.uint8, k * IMG, at).reshape(k, 3, 32, 32)
        at += k * IMG
        lab = np.frombuffer(raw, np.int64, k, at)
        at += 8 * k
        return img, lab

    gets = [take(1) for _ in range(n)]  # a sample: image then label, one at a time
    get = (np.concatenate([g[0] for g in gets]), np.concatenate([g[1] for g in gets]))
    parts = [take(min(7, n - s)) for s in range(0, n, 7)]
    batch = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    parts = [take(min(5, n - s)) for s in range(0, n, 5)]
    loader = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    assert at == len(raw), f"{len(raw) - at} bytes left over in the dump"
    return n, get, batch, loader


def compare(dump, work, dirs, kind, train):
    name = f"CIFAR-{kind} {'train' if train else 'test'}"
    cls = tv_cifar.CIFAR10 if kind == 10 else tv_cifar.CIFAR100
    tv = cls(work, train=train)  # reads cifar-10-batches-py / cifar-100-python under work
    want_img = np.stack([np.array(img).transpose(2, 0, 1) for img, _ in tv])
    want_lab = np.array([t for _, t in tv], dtype=np.int64)
    out = os.path.join(work, "dump.bin")
    bin_dir = dirs["cifar-10-batches-bin" if kind == 10 else "cifar-100-binary"]
    subprocess.run([dump, bin_dir, str(kind), "train" if train else "test", str(SEED), out], check=True)
    n, get, batch, loader = read_dump(out)
    check(n == len(tv), f"{name}: {n} samples, torchvision has {len(tv)}")
    if n != len(tv):
        return
    for what, (img, lab), order in (("get", get, np.arange(n)), ("get_batch", batch, np.arange(n)[::-1]),
                                    ("loader", loader, None)):
        if order is None:  # Determined's ReproducibleShuffleSampler
            order = np.arange(n)
            np.random.RandomState(SEED).shuffle(order)
        same = np.array_equal(img, want_img[order]) and np.array_equal(lab, want_lab[order])
        check(same, f"{name}: {what}: every image and label equals torchvision's")
        if not same:
            bad = np.nonzero((img != want_img[order]).any((1, 2, 3)) | (lab != want_lab[order]))[0]
            print("  first differing positions:", bad[:10], "labels", lab[bad[:5]], "want", want_lab[order][bad[:5]])
    check(not np.array_equal(loader[1], get[1]) or not np.array_equal(loader[0], get[0]),
          f"{name}: the loader's pass is shuffled")


def main():
    dump = sys.argv[1]
    rng = np.random.default_rng(2024)
    with tempfile.TemporaryDirectory() as work:
        dirs = make_archives(work, rng)
        for kind in (10, 100):
            for train in (True, False):
                compare(dump, work, dirs, kind, train)
    if FAILURES:
        print(f"FAIL: {len(FAILURES)} checks")
        sys.exit(1)
    print("every sample equals torchvision's")


if __name__ == "__main__":
    main()
