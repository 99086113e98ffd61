"""ct_dataset_shards against numpy: shards written exactly as llm.c's
dev/data/data_common.py write_datafile writes them (both formats: GPT-2's
uint16 and Llama 3's uint32), read by ctrial (shards_dump) in both window
modes, through a glob pattern and a list of files; every window (x, y),
from get_batch and from get, equals numpy slicing of the shard it lies in,
and the windows are exactly: per shard in sorted order, random = every
offset 0 .. n-T-1, sequential = offsets 0, T, 2T, ... while o+T+1 <= n
(none crossing a shard's end).

    test_shards_parity.py SHARDS_DUMP
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

HEADERS_INFO = {  # llm.c dev/data/data_common.py
    "gpt-2": {"magic": 20240520, "version": 1, "token_dtype": np.uint16},
    "llama-3": {"magic": 20240801, "version": 7, "token_dtype": np.uint32},
}


def write_datafile(filename, toks, model_desc="gpt-2"):
    """llm.c's write_datafile, as it is (less its print)."""
    assert len(toks) < 2**31, "token count too large"
    info = HEADERS_INFO[model_desc]
    header = np.zeros(256, dtype=np.int32)
    header[0] = info["magic"]
    header[1] = info["version"]
    header[2] = len(toks)
    toks_np = np.array(toks, dtype=info["token_dtype"])
    with open(filename, "wb") as f:
        f.write(header.tobytes())
        f.write(toks_np.tobytes())


def expected(shards, T, mode):
    xs, ys = [], []
    for toks in shards:
        n = len(toks)
        stride = 1 if mode == "random" else T
        for o in range(0, n - T, stride):  # o + T + 1 <= n
            xs.append(toks[o:o + T].astype(np.int64))
            ys.append(toks[o + 1:o + T + 1].astype(np.int64))
    return np.array(xs).reshape(-1, T), np.array(ys).reshape(-1, T)


def run(dump, work, mode, T, entries):
    out = os.path.join(work, "dump.bin")
    subprocess.run([dump, mode, str(T), out, *entries], check=True)
    raw = np.fromfile(out, dtype=np.int64)
    n = int(raw[0])
    body = raw[1:]
    # batches of 7: x [k, T] then y [k, T] per batch
    bx, by, at = [], [], 0
    for start in range(0, n, 7):
        k = min(7, n - start)
        bx.append(body[at:at + k * T].reshape(k, T)); at += k * T
        by.append(body[at:at + k * T].reshape(k, T)); at += k * T
    gx, gy = [], []
    for _ in range(n):
        gx.append(body[at:at + T]); at += T
        gy.append(body[at:at + T]); at += T
    assert at == len(body), "trailing data in the dump"
    if n == 0:
        return n, np.zeros((0, T), np.int64), np.zeros((0, T), np.int64), np.zeros((0, T), np.int64), np.zeros((0, T), np.int64)
    return n, np.concatenate(bx), np.concatenate(by), np.array(gx), np.array(gy)


def check(name, dump, work, mode, T, entries, shards):
    n, bx, by, gx, gy = run(dump, work, mode, T, entries)
    ex, ey = expected(shards, T, mode)
    ok = n == len(ex) and np.array_equal(bx, ex) and np.array_equal(by, ey) \
        and np.array_equal(gx, ex) and np.array_equal(gy, ey)
    print(f"{name}: {mode} T={T}: {n} windows (expected {len(ex)}):", "ok" if ok else "DIFFERENT")
    if not ok and n == len(ex):
        bad = np.nonzero((bx != ex).any(1) | (by != ey).any(1) | (gx != ex).any(1) | (gy != ey).any(1))[0]
        print("  first differing windows:", bad[:10])
    return ok


def main():
    dump = sys.argv[1]
    rng = np.random.default_rng(19)
    ok = True
    with tempfile.TemporaryDirectory() as work:
        # GPT-2 shards, written out of order: the pattern sorts them. Sizes:
        # 1000; 17 (T=8: 9 random, 2 sequential windows); exactly T+1; 300.
        sizes = {"tok_003.bin": 300, "tok_000.bin": 1000, "tok_002.bin": 9, "tok_001.bin": 17}
        data = {}
        for name, n in sizes.items():
            data[name] = rng.integers(0, 50257, n).astype(np.uint16)
            data[name][0], data[name][-1] = 65535, 0  # the extremes, at the edges
            write_datafile(os.path.join(work, name), data[name].tolist(), "gpt-2")
        order = sorted(sizes)
        shards = [data[k] for k in order]
        for mode in ("random", "sequential"):
            ok &= check("gpt-2 glob", dump, work, mode, 8, [os.path.join(work, "tok_*.bin")], shards)
        ok &= check("gpt-2 T=1", dump, work, "sequential", 1, [os.path.join(work, "tok_00[01].bin")], shards[:2])
        # A list: one file, then a pattern, in the order given.
        entries = [os.path.join(work, "tok_003.bin"), os.path.join(work, "tok_00[0-1].bin")]
        ok &= check("gpt-2 list", dump, work, "random", 8, entries, [data["tok_003.bin"], *shards[:2]])
        # Llama 3 shards: uint32 tokens beyond 65535, beside a GPT-2 shard.
        big = rng.integers(0, 128256, 500).astype(np.uint32)
        big[0], big[-1] = 2**32 - 1, 70000
        write_datafile(os.path.join(work, "llama_000.bin"), big.tolist(), "llama-3")
        for mode in ("random", "sequential"):
            ok &= check("llama-3 + gpt-2", dump, work, mode, 16,
                        [os.path.join(work, "llama_*.bin"), os.path.join(work, "tok_000.bin")],
                        [big, data["tok_000.bin"]])
    if not ok:
        print("FAIL")
        sys.exit(1)
    print("all windows equal numpy's")


if __name__ == "__main__":
    main()
