"""examples/charlm trained from llm.c shards equals charlm trained from the text.

    check_charlm_shards.py CHARLM

`charlm shard TEXT DIR` writes tiny shakespeare's vocabulary indices as
llm.c shards: the files are llm.c's format (header magic 20240520, version
1, the token count; uint16 tokens) and hold exactly the text's indices,
split at int(0.9 * n); with --shard-tokens the same tokens are cut into
several shards. Then charlm.json, cut to 20 batches with a report after
every batch and a validation at the end, trains once from the text
("data.path") and once from the shards ("data.train_shards",
"data.val_shards", "data.vocab_size": 65): the same tokens, the same windows
(one training shard: item i is offset i in both), the same shuffle, so the
20 per-batch training losses and the validation loss must be the same
numbers (to 1e-7). `charlm sample --data TEXT` works on the shard-trained
checkpoint; a shard config without vocab_size is refused (exit 2).
"""
import glob
import gzip
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import fail, run_example  # noqa: E402
SRC = os.environ["CTRIAL_SOURCE_DIR"]
BUILD = os.environ["CTRIAL_BUILD_DIR"]
TEXT = os.path.join(SRC, "examples", "data", "tinyshakespeare", "input.txt.gz")



def run(cmd, expect=0):
    return run_example(cmd, SRC, 150, expect)


def config(work, name, data):
    with open(os.path.join(SRC, "examples", "charlm", "charlm.json")) as f:
        cfg = json.load(f)
    cfg["searcher"]["max_length"] = {"batches": 20}
    cfg["scheduling_unit"] = 1
    cfg["min_validation_period"] = {"batches": 20}
    cfg["hyperparameters"]["sample_tokens"] = 0
    cfg["data"] = data
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def metrics(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    train = [r["metrics"]["loss"] for r in lines if r["group"] == "training"]
    val = [r["metrics"]["validation_loss"] for r in lines if r["group"] == "validation"]
    return train, val


def read_shard(path):
    header = np.fromfile(path, dtype=np.int32, count=256)
    toks = np.fromfile(path, dtype=np.uint16, offset=1024)
    if header[0] != 20240520 or header[1] != 1 or header[2] != len(toks) or header[3:].any():
        fail(f"{path}: header {header[:4]} for {len(toks)} tokens")
    return toks


def main():
    exe = sys.argv[1]
    work = os.path.join(BUILD, "tests", "shards", "charlm")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    with gzip.open(TEXT, "rb") as f:
        text = np.frombuffer(f.read(), dtype=np.uint8)
    chars = np.unique(text)
    ids = np.searchsorted(chars, text).astype(np.uint16)
    n_train = int(0.9 * len(ids))

    shards = os.path.join(work, "shards")
    p = run([exe, "shard", TEXT, shards])
    print(p.stdout.strip())
    train_files = sorted(glob.glob(os.path.join(shards, "charlm_train_*.bin")))
    val_files = sorted(glob.glob(os.path.join(shards, "charlm_val_*.bin")))
    if len(train_files) != 1 or len(val_files) != 1:
        fail(f"expected one train and one val shard, got {train_files} {val_files}")
    if not (np.array_equal(read_shard(train_files[0]), ids[:n_train])
            and np.array_equal(read_shard(val_files[0]), ids[n_train:])):
        fail("the shards do not hold the text's vocabulary indices split at int(0.9 n)")
    print(f"shards hold the text's {len(ids)} indices ({len(chars)} characters), split at {n_train}")

    many = os.path.join(work, "many")
    run([exe, "shard", TEXT, many, "--shard-tokens", "300000"])
    parts = sorted(glob.glob(os.path.join(many, "charlm_train_*.bin")))
    if len(parts) != -(-n_train // 300000) or not np.array_equal(
            np.concatenate([read_shard(f) for f in parts]), ids[:n_train]):
        fail(f"--shard-tokens 300000: {len(parts)} train shards, or not the same tokens")
    print(f"--shard-tokens 300000: {len(parts)} train shards holding the same tokens")

    text_out = os.path.join(work, "from_text")
    run([exe, "--config", config(work, "text", {"path": TEXT}), "--output", text_out, "--quiet", "--threads", "1"])
    shard_data = {"train_shards": os.path.join(shards, "charlm_train_*.bin"),
                  "val_shards": [os.path.join(shards, "charlm_val_000000.bin")], "vocab_size": len(chars)}
    shard_out = os.path.join(work, "from_shards")
    run([exe, "--config", config(work, "shards", shard_data), "--output", shard_out, "--quiet", "--threads", "1"])
    (lt, vt), (ls, vs) = metrics(text_out), metrics(shard_out)
    print("from the text:  ", " ".join(f"{x:.6f}" for x in lt), "| validation", vt)
    print("from the shards:", " ".join(f"{x:.6f}" for x in ls), "| validation", vs)
    if len(lt) != 20 or len(ls) != 20 or len(vt) != 1 or len(vs) != 1:
        fail("expected 20 training reports and one validation in each run")
    worst = max(abs(a - b) for a, b in zip(lt + vt, ls + vs))
    if worst > 1e-7:
        fail(f"the losses differ (largest difference {worst:.3g})")
    print(f"the 20 batch losses and the validation loss agree (largest difference {worst:.3g})")

    ckpt = sorted(glob.glob(os.path.join(shard_out, "checkpoints", "ckpt-*")))[-1]
    s = run([exe, "sample", ckpt, "--data", TEXT, "--tokens", "40", "--seed", "1"]).stdout
    if len(s) != 41 or not set(s[:-1].encode()) <= set(chars.tolist()):
        fail(f"charlm sample --data on the shard-trained checkpoint printed {s!r}")
    print("sampled from the shard-trained checkpoint:", repr(s[:-1]))

    bad = dict(shard_data)
    del bad["vocab_size"]
    p = run([exe, "--config", config(work, "bad", bad), "--output", os.path.join(work, "bad")], expect=2)
    if "data.vocab_size" not in p.stderr:
        fail(f"the refusal does not name data.vocab_size: {p.stderr[-500:]}")
    print("ok")


if __name__ == "__main__":
    main()
