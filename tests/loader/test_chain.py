"""The loader's index stream equals Determined's sampler chain.

Training ("repeat") mode must give exactly what Determined builds for a
PyTorchTrial's training loader: ReproducibleShuffleSampler (numpy's legacy
RandomState(seed).shuffle, one generator, a new permutation per pass) or
SequentialSampler -> RepeatSampler -> DistributedSampler (islice(rank, None,
world_size)) -> torch's BatchSampler -> SkipBatchSampler(skip). One-pass mode
is the validation chain (shuffle/sequential -> shard -> batch) pass after
pass, with its position counted over the concatenated passes.

Each line also gives ct_loader_len, compared with Python's len() of the
chain: torch's BatchSampler over Determined's samplers (their __len__ copied
from harness/determined/pytorch/samplers.py). The same chains are also given
to the loader as the user's own sampler ("user"), moved to the position by
ct_loader_set_position (forward draws, across pass ends) instead of a skip.

usage: test_chain.py LOADER_STREAM"""
import itertools
import random
import subprocess
import sys

import numpy as np
import torch.utils.data as tud


class ReproducibleShuffleSampler(tud.Sampler):
    def __init__(self, n, seed):
        self.n = n
        self.rand = np.random.RandomState(seed)

    def __len__(self):
        return self.n

    def __iter__(self):
        indices = np.arange(self.n)
        self.rand.shuffle(indices)
        return iter(indices.tolist())


class RepeatSampler(tud.Sampler):
    def __init__(self, sampler):
        self.sampler = sampler

    def __len__(self):
        return len(self.sampler)

    def __iter__(self):
        while True:
            yield from self.sampler


class DistributedSampler(tud.Sampler):
    def __init__(self, sampler, world_size, rank):
        self.sampler, self.world_size, self.rank = sampler, world_size, rank

    def __len__(self):
        n = len(self.sampler)
        return n // self.world_size + int(n % self.world_size > self.rank)

    def __iter__(self):
        return itertools.islice(self.sampler, self.rank, None, self.world_size)


class SkipBatchSampler(tud.Sampler):
    def __init__(self, batch_sampler, skip):
        self.batch_sampler, self.skip = batch_sampler, skip

    def __len__(self):
        return len(self.batch_sampler)

    def __iter__(self):
        it = iter(self.batch_sampler)
        for _ in range(self.skip):
            next(it)
        return it


def base_sampler(n, seed, shuffle):
    return ReproducibleShuffleSampler(n, seed) if shuffle else tud.SequentialSampler(range(n))


def expected(n, seed, shuffle, repeat, rank, ws, bs, drop_last, skip, tokens):
    share = n // ws + (n % ws > rank)
    if repeat:
        if share == 0:
            return "ERR"
        s = DistributedSampler(RepeatSampler(base_sampler(n, seed, shuffle)), ws, rank)
        chain = SkipBatchSampler(tud.BatchSampler(s, bs, bool(drop_last)), skip)
        it = iter(chain)
        return f"len={len(chain)} " + " ".join(",".join(map(str, next(it))) for _ in range(tokens))
    length = len(tud.BatchSampler(DistributedSampler(base_sampler(n, seed, shuffle), ws, rank), bs, bool(drop_last)))
    per_pass = share // bs if drop_last else -(-share // bs)
    assert length == per_pass
    if per_pass == 0:
        return f"len={length} " + " ".join(["|"] * tokens)
    # One-pass mode: the passes back to back, "|" at each end; the first
    # `skip` batches (and the pass ends between them) are skipped.
    sampler = DistributedSampler(base_sampler(n, seed, shuffle), ws, rank)
    batcher = tud.BatchSampler(sampler, bs, bool(drop_last))
    out, skipped = [], 0
    while len(out) < tokens:
        for b in batcher:  # each iteration is a new pass (a new permutation)
            if skipped < skip:
                skipped += 1
                continue
            out.append(",".join(map(str, b)))
        if skipped >= skip:
            out.append("|")
    return f"len={length} " + " ".join(out[:tokens])


def configs():
    rng = random.Random(2024)
    seeds = [0, 1, 42, 2**32 - 1]
    sizes = [1, 2, 7, 60, 103]
    for i in range(160):
        n = rng.choice(sizes)
        ws = rng.choice([1, 1, 2, 3, 4])
        rank = rng.randrange(ws)
        bs = rng.choice([1, 3, 8, 64])
        c = (n, rng.choice(seeds), rng.randrange(2), i % 2, rank, ws, bs, rng.randrange(2),
             rng.choice([0, 0, 1, 5, 17, 40]), rng.choice([0, 2, 3]), rng.choice([12, 40]),
             rng.randrange(2))
        yield c + (0,)
        # the user's own chain: a rank must have batches (a repeating chain
        # with none never yields, a positioned one never arrives)
        share = n // ws + (n % ws > rank)
        if (share // bs if c[7] else share) > 0:
            yield c + (1,)
    # the repeating loader refuses a rank with no samples
    yield (2, 5, 1, 1, 3, 4, 2, 0, 0, 2, 5, 1, 0)


def main():
    prog = sys.argv[1]
    cases = list(configs())
    text = "".join(" ".join(map(str, c)) + "\n" for c in cases)
    res = subprocess.run([prog], input=text, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        print(res.stderr)
        sys.exit(f"{prog} exited with {res.returncode}")
    lines = res.stdout.split("\n")
    bad = 0
    for c, got in zip(cases, lines):
        want = expected(*c[:9], c[10])
        if want == "ERR" and got.startswith("ERR ") and "gets none" in got:
            continue
        if got != want:
            bad += 1
            if bad <= 5:
                print(f"config {c}:\n  loader:      {got[:300]}\n  determined:  {want[:300]}")
    if len(lines) < len(cases):
        sys.exit(f"only {len(lines)} lines for {len(cases)} configurations")
    print(f"{len(cases) - bad}/{len(cases)} configurations give Determined's stream")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
