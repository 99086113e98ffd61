"""Per-record random transforms through the loader (data.h: ct_dataset_map,
ct_record_seed; vision.h: ct_dataset_transform).

    test_map.py MAP_DUMP

map_dump loads batches of randomly cropped, flipped and jittered images
(tests/transforms/map_dump.c). This checks that
  - every record's augmentation is the v2 pipeline run after
    torch.manual_seed(ct_record_seed(seed, pass, index)), the seed computed
    here from data.h's formula and the pass from the loader's: record k =
    (batch * batch_size + j) * world_size + rank of all ranks' stream is in
    pass k // len(dataset);
  - the batches do not depend on the number of workers;
  - a loader resumed at batch 5 serves what the uninterrupted one served
    from batch 5 on, draws included;
  - another seed draws differently.
"""
import os
import sys
import tempfile

import numpy as np
import torch
from torchvision.transforms import v2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, run_cmd  # noqa: E402

N, B, M64 = 10, 4, (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def record_seed(seed, epoch, index):
    h = splitmix64(seed)
    h = splitmix64(h ^ epoch)
    h = splitmix64(h ^ index)
    return h >> 1


def source(i):
    c, y, x = np.meshgrid(np.arange(3), np.arange(12), np.arange(10), indexing="ij")
    return torch.from_numpy(((i * 31 + c * 7 + y * 3 + x) % 256).astype(np.uint8))


PIPELINE = v2.Compose([v2.RandomCrop(8, padding=2, padding_mode="reflect"), v2.RandomHorizontalFlip(),
                       v2.ColorJitter(0.3, 0.3, 0.3, 0.05)])


def run(tool, tmp, seed, workers, world, rank, skip, n):
    out = os.path.join(tmp, f"b_{seed}_{workers}_{world}_{rank}_{skip}")
    r = run_cmd([tool, out, str(seed), str(workers), str(world), str(rank), str(skip), str(n)], 120)
    check(r.returncode == 0, f"map_dump seed {seed}, {workers} workers, rank {rank} of {world}, skip {skip} "
                             f"(exit {r.returncode}) {r.stderr[-300:]}")
    raw = open(out, "rb").read() if r.returncode == 0 else b""
    batches, at, isz = [], 0, B * 3 * 8 * 8
    for _ in range(n):
        img = torch.frombuffer(bytearray(raw[at:at + isz]), dtype=torch.uint8).reshape(B, 3, 8, 8)
        idx = torch.frombuffer(bytearray(raw[at + isz:at + isz + 8 * B]), dtype=torch.int64)
        batches.append((img, idx))
        at += isz + 8 * B
    return batches


def main():
    tool = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        seed, world, rank = 5, 2, 1
        base = run(tool, tmp, seed, 0, world, rank, 0, 12)
        if FAILURES:
            sys.exit(1)
        passes, bad = set(), []
        for b, (img, idx) in enumerate(base):
            for j in range(B):
                k = (b * B + j) * world + rank
                p = k // N
                passes.add(p)
                torch.manual_seed(record_seed(seed, p, int(idx[j])))
                want = PIPELINE(source(int(idx[j])))
                if not torch.equal(img[j], want):
                    bad.append((b, j, int(idx[j]), p))
        check(not bad, f"every record of 12 batches over passes {sorted(passes)} is the v2 pipeline after "
                       f"torch.manual_seed(record_seed(seed, pass, index)) (mismatches: {bad[:4]})")
        two = run(tool, tmp, seed, 2, world, rank, 0, 12)
        check(all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(base, two)),
              "2 workers serve the same batches, draws included, as 0 workers")
        resumed = run(tool, tmp, seed, 2, world, rank, 5, 7)
        check(all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(base[5:], resumed)),
              "a loader resumed at batch 5 serves batches 5.. as the uninterrupted one, draws included")
        other = run(tool, tmp, seed + 1, 0, world, rank, 0, 12)
        same_idx = [(a, b) for a, b in zip(base, other) if torch.equal(a[1], b[1])]
        check(sum(not torch.equal(a[0], b[0]) for a, b in zip(base, other)) >= 10,
              f"seed {seed + 1} draws other augmentations ({len(same_idx)} batches hold the same indices)")
        # The same record in two passes is augmented differently.
        firsts = {}
        differ = 0
        for b, (img, idx) in enumerate(base):
            for j in range(B):
                i = int(idx[j])
                if i in firsts and not torch.equal(firsts[i], img[j]):
                    differ += 1
                firsts.setdefault(i, img[j])
        check(differ >= 5, f"records seen again in a later pass draw anew ({differ} repeats differ)")
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        sys.exit(1)


if __name__ == "__main__":
    main()
