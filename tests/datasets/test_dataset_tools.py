"""Dataset tools against torch: random_split's indices (counts and
fractions, several seeds, remainders), Subset's and ConcatDataset's samples
and batches (torch's default_collate of torch's own datasets), and
ct_dataset_mean_std against numpy in float64 (1e-12 relative) on the
bundled digits and on tensors.

usage: test_dataset_tools.py TOOLS_DUMP"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch.utils.data import ConcatDataset, Subset, TensorDataset, random_split
from torch.utils.data._utils.collate import default_collate

SRC = os.environ.get("CTRIAL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
DIGITS = os.path.join(SRC, "examples", "data", "digits")
NP_OF = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "uint8": np.uint8}

failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL:", msg)


def formula(n, d1, d2, d3, shift, channel_step):
    """tools_dump.c's formula(): ((i*131 + a*17 + b*7 + c*3) % 251) / 8 + shift + step*a."""
    i, a, b, c = (np.arange(k).reshape([-1 if j == m else 1 for j in range(4)])
                  for m, k in enumerate((n, d1, d2, d3)))
    x = ((i * 131 + a * 17 + b * 7 + c * 3) % 251) / 8.0 + shift + channel_step * a
    x = np.broadcast_to(x, (n, d1, d2, d3)).astype(np.float32)
    return x.reshape(n, d1, d2) if d3 == 1 else x


def labels(n, mod):
    return (np.arange(n, dtype=np.int64) * 5) % mod


def mnist(split):
    img = gzip.open(os.path.join(DIGITS, f"{split}-images-idx3-ubyte.gz")).read()
    lab = gzip.open(os.path.join(DIGITS, f"{split}-labels-idx1-ubyte.gz")).read()
    n, h, w = (int.from_bytes(img[4 + 4 * i: 8 + 4 * i], "big") for i in range(3))
    images = np.frombuffer(img, dtype=np.uint8, offset=16).reshape(n, h, w)
    x = torch.from_numpy(images.copy()).to(torch.float32).div(255).unsqueeze(1)  # ToTensor
    y = torch.from_numpy(np.frombuffer(lab, dtype=np.uint8, offset=8).astype(np.int64))
    return TensorDataset(x, y)


def load_leaf(leaf):
    raw = open(leaf["file"], "rb").read()
    return np.frombuffer(raw, dtype=NP_OF[leaf["dtype"]]).reshape(leaf["shape"])


def leaves_of(v):
    return [v] if isinstance(v, torch.Tensor) else list(v)


def same(name, got_leaves, expected):
    exp = [t.numpy() for t in leaves_of(expected)]
    if len(got_leaves) != len(exp):
        fail(f"{name}: {len(got_leaves)} leaves, torch has {len(exp)}")
        return
    for k, (g, e) in enumerate(zip(got_leaves, exp)):
        a = load_leaf(g)
        if a.dtype != e.dtype or a.shape != e.shape or a.tobytes() != np.ascontiguousarray(e).tobytes():
            fail(f"{name} leaf {k}: ctrial {a.dtype}{list(a.shape)} differs from torch's "
                 f"{e.dtype}{list(e.shape)}")


def main():
    dump = sys.argv[1]
    rng = np.random.default_rng(19)

    # ---- the datasets, as tools_dump.c builds them -------------------------
    t = TensorDataset(torch.from_numpy(formula(40, 2, 3, 1, -10, 0)), torch.from_numpy(labels(40, 7)))
    u = TensorDataset(torch.from_numpy(formula(25, 2, 3, 1, 3, 0)), torch.from_numpy(labels(25, 3)))
    subset_indices = [int(i) for i in rng.integers(0, 40, size=17)]  # repeats included
    subset = Subset(t, subset_indices)
    concat = ConcatDataset([t, subset, u])
    mtest, mtrain = mnist("t10k"), mnist("train")
    digits_indices = [int(i) for i in rng.permutation(len(mtrain))[:150]]
    digits = ConcatDataset([mtest, Subset(mtrain, digits_indices)])
    big = formula(300, 3, 64, 64, 0, 10)  # mean_std: sample 0, then 3 batches of about 16 MiB
    torch_ds = {"t": t, "u": u, "subset": subset, "concat": concat, "digits": digits}

    # ---- random_split jobs -----------------------------------------------
    splits = []
    for seed in (0, 1, 42, 2**40 + 7, 2**64 - 1):
        splits.append({"n": 10, "lengths": [3, 7], "seed": seed})
        splits.append({"n": 101, "lengths": [50, 0, 40, 11], "seed": seed})
        splits.append({"n": 30, "fractions": [0.3, 0.3, 0.4], "seed": seed})
        splits.append({"n": 1797, "fractions": [0.8, 0.2], "seed": seed})
        # floor gives 3 + 3 + 3 = 9 of 11: the remainder goes round-robin to splits 0 and 1
        splits.append({"n": 11, "fractions": [1 / 3, 1 / 3, 1 / 3], "seed": seed})
        # 7 splits of 10: remainder 3 (lengths 1, 1, ... then +1 to the first three)
        splits.append({"n": 10, "fractions": [1 / 7] * 7, "seed": seed})
    splits.append({"n": 0, "lengths": [0, 0], "seed": 3})
    splits.append({"n": 1, "lengths": [1], "seed": 3})
    splits.append({"n": 5000, "fractions": [0.25, 0.25, 0.5], "seed": 123456789})

    # ---- batch jobs ------------------------------------------------------
    batches = []
    for name, d in torch_ds.items():
        n = len(d)
        batches.append({"dataset": name, "indices": list(range(n))})
        batches.append({"dataset": name, "indices": [int(i) for i in rng.integers(0, n, size=13)]})
        batches.append({"dataset": name, "indices": [n - 1]})
    # within one source of the concatenations only (the pass-through path)
    batches.append({"dataset": "concat", "indices": [40, 41, 56, 40, 45]})
    batches.append({"dataset": "concat", "indices": [57, 81, 60]})
    batches.append({"dataset": "digits", "indices": [len(mtest) + 3, len(mtest), len(mtest) + 149]})
    batches.append({"dataset": "digits", "indices": [len(mtest) - 1, len(mtest)]})  # the boundary

    stats = [
        {"dataset": "train", "field": 0, "channel_dim": 0},
        {"dataset": "train", "field": 0, "channel_dim": -1},
        {"dataset": "train", "field": 0, "channel_dim": 1},
        {"dataset": "train", "field": 1, "channel_dim": -1},
        {"dataset": "digits", "field": 0, "channel_dim": 0},
        {"dataset": "big", "field": 0, "channel_dim": 0},
        {"dataset": "big", "field": 0, "channel_dim": 2},
        {"dataset": "big", "field": 0, "channel_dim": -1},
        {"dataset": "t", "field": 0, "channel_dim": 1},
    ]

    with tempfile.TemporaryDirectory() as tmp:
        for job in splits:
            job["seed_str"] = str(job["seed"])
        jobs = {"digits": DIGITS, "subset_indices": subset_indices, "digits_indices": digits_indices,
                "splits": splits, "batches": batches, "stats": stats}
        jp = os.path.join(tmp, "jobs.json")
        json.dump({**jobs, "splits": [{**j, "seed": j["seed_str"]} for j in splits]}, open(jp, "w"))
        subprocess.run([dump, jp, tmp], check=True)
        res = json.load(open(os.path.join(tmp, "result.json")))

        for name, d in torch_ds.items():
            if res["lengths"][name] != len(d):
                fail(f"len({name}): ctrial {res['lengths'][name]}, torch {len(d)}")

        # random_split: torch's own split of range(n) with a generator seeded alike
        for job, got in zip(splits, res["splits"]):
            lengths = job.get("lengths", job.get("fractions"))
            g = torch.Generator().manual_seed(job["seed"])
            expected = [list(s) for s in random_split(range(job["n"]), lengths, generator=g)]
            if "error" in got:
                fail(f"random_split {job}: {got['error']}")
            elif got["splits"] != expected:
                fail(f"random_split {job}: ctrial {[s[:6] for s in got['splits']]} (lengths "
                     f"{[len(s) for s in got['splits']]}), torch {[s[:6] for s in expected]} "
                     f"(lengths {[len(s) for s in expected]})")
        print(f"random_split: {len(splits)} splits compared with torch's")

        for job, got in zip(batches, res["batches"]):
            d, idx = torch_ds[job["dataset"]], job["indices"]
            name = f"{job['dataset']}{idx[:5]}"
            same(name + " batch", got["leaves"], default_collate([d[i] for i in idx]))
            same(name + " sample", got["sample0"], d[idx[0]])
            if not got["batch_equals_collated_gets"]:
                fail(f"{name}: get_batch differs from ct_collate of the gets")
        print(f"subset / concat: {len(batches)} batches compared with torch's default_collate")

        arrays = {"train": [mtrain.tensors[0].numpy(), mtrain.tensors[1].numpy()],
                  "digits": [np.concatenate([mtest.tensors[0].numpy(),
                                             mtrain.tensors[0].numpy()[digits_indices]])],
                  "big": [big], "t": [t.tensors[0].numpy()]}
        for job, got in zip(stats, res["stats"]):
            x = arrays[job["dataset"]][job["field"]].astype(np.float64)
            cd = job["channel_dim"]
            axes = tuple(a for a in range(x.ndim) if cd < 0 or a != cd + 1)
            mean, std = x.mean(axis=axes), x.std(axis=axes)  # ddof=0: the population std
            # torch agrees with numpy here: x.std(dims, correction=0)
            tstd = torch.from_numpy(x).std(dim=axes, correction=0).numpy()
            gm, gs = np.array(got["mean"]), np.array(got["std"])
            want_ndim = 0 if cd < 0 else 1
            if got["ndim"] != want_ndim or gm.size != np.size(mean):
                fail(f"stats {job}: ndim {got['ndim']} / {gm.size} values, expected {want_ndim} / "
                     f"{np.size(mean)}")
                continue
            for what, g_, e_ in (("mean", gm, mean), ("std", gs, std), ("std (torch)", gs, tstd)):
                rel = np.max(np.abs(g_ - np.ravel(e_)) / np.maximum(np.abs(np.ravel(e_)), 1e-300))
                if not rel <= 1e-12:
                    fail(f"stats {job} {what}: ctrial {g_[:4]} numpy {np.ravel(e_)[:4]} (rel {rel:.3g})")
            print(f"stats {job['dataset']} field {job['field']} channel_dim {cd}: "
                  f"mean {gm[:3]} std {gs[:3]}")

    if failures:
        print(f"{failures} failure(s)")
        sys.exit(1)
    print("dataset tools: all equal to torch's and numpy's")


if __name__ == "__main__":
    main()
