"""Sampler parity: ctrial's samplers against numpy's RandomState and the
Python iterables Determined composes (ReproducibleShuffleSampler,
RepeatSampler, DistributedSampler = islice(rank, None, n), torch's
BatchSampler, SkipBatchSampler = islice(skip, None)), computed here during the
test run: the items of every chain and its length, ct_sampler_len against
Python's len() of the same chain (torch's own SequentialSampler and
BatchSampler, Determined's __len__ for the others, copied from
harness/determined/pytorch/samplers.py). Usage: sampler_parity.py
SAMPLER_DUMP_PROGRAM"""
import itertools
import json
import subprocess
import sys

import numpy as np
from torch.utils.data import BatchSampler, SequentialSampler


class ReproducibleShuffle:  # Determined's ReproducibleShuffleSampler
    def __init__(self, n, seed):
        self.n, self.rng = n, np.random.RandomState(seed)

    def __len__(self):
        return self.n

    def __iter__(self):
        indices = np.arange(self.n)
        self.rng.shuffle(indices)
        return iter(indices.tolist())


class Repeat:  # Determined's RepeatSampler
    def __init__(self, inner):
        self.inner = inner

    def __len__(self):
        return len(self.inner)

    def __iter__(self):
        while True:
            yield from self.inner


class Shard:  # Determined's DistributedSampler
    def __init__(self, inner, rank, size):
        self.inner, self.rank, self.size = inner, rank, size

    def __len__(self):
        n = len(self.inner)
        return n // self.size + int(n % self.size > self.rank)

    def __iter__(self):
        return itertools.islice(self.inner, self.rank, None, self.size)


class Skip:  # Determined's SkipBatchSampler
    def __init__(self, inner, skip):
        self.inner, self.skip = inner, skip

    def __len__(self):
        return len(self.inner)

    def __iter__(self):
        return itertools.islice(self.inner, self.skip, None)


def build(spec):
    s = None
    for word in spec.split():
        name, *args = word.split(":")
        a = [int(x) for x in args]
        if name == "sequential":
            s = SequentialSampler(range(a[0]))
        elif name == "shuffle":
            s = ReproducibleShuffle(a[0], a[1])
        elif name == "repeat":
            s = Repeat(s)
        elif name == "shard":
            s = Shard(s, a[0], a[1])
        elif name == "batch":
            s = BatchSampler(s, a[0], bool(a[1]))
        elif name == "skip":
            s = Skip(s, a[0])
    return s


def expected(spec, calls):
    """The items of `calls` next() calls: passes back to back, None after each."""
    root, out = build(spec), []
    while len(out) < calls:
        for item in root:
            out.append(list(item) if isinstance(item, list) else [int(item)])
            if len(out) == calls:
                break
        else:
            out.append(None)
    return out


def cases():
    for n, seed in [(1, 0), (2, 1), (10, 42), (1000, 12345), (100003, 7), (5, 2**32 - 1)]:
        yield f"shuffle:{n}:{seed}", 3 * (n + 1) if n < 2000 else n + 5
    yield "sequential:7", 20
    yield "sequential:0", 3
    for n, seed, rank, size, bs, drop, skip in [
        (100, 0, 0, 1, 32, 0, 0), (100, 0, 1, 3, 7, 0, 5), (64, 3, 2, 3, 5, 1, 11),
        (1500, 42, 0, 2, 32, 0, 100), (1500, 42, 1, 2, 32, 1, 0), (97, 9, 4, 5, 3, 0, 40),
        (10, 1, 0, 4, 4, 0, 1),
    ]:
        # Determined's training chain.
        yield f"shuffle:{n}:{seed} repeat shard:{rank}:{size} batch:{bs}:{drop} skip:{skip}", 3 * n // bs + 10
        yield f"sequential:{n} repeat shard:{rank}:{size} batch:{bs}:{drop} skip:{skip}", 2 * n // bs + 5
        # Validation: shard only, then batch, finite passes.
        yield f"sequential:{n} shard:{rank}:{size} batch:{bs}:{drop}", 3 * (n // bs + 3)
        yield f"shuffle:{n}:{seed} shard:{rank}:{size}", 2 * n + 4
    yield "sequential:3 shard:2:4 batch:2:0", 6  # a rank with nothing to do
    # Lengths: torch's BatchSampler(SequentialSampler) with drop_last both
    # ways, sharded, repeated (one pass's length) and skipped (the inner's).
    for n in [0, 1, 5, 31, 32, 33, 100]:
        for bs in [1, 2, 7, 32, 200]:
            for drop in (0, 1):
                yield f"sequential:{n} batch:{bs}:{drop}", 2 * (n // bs + 2)
                yield f"sequential:{n} shard:{n % 3}:3 batch:{bs}:{drop}", 2 * (n // bs + 2)
                yield f"sequential:{n} batch:{bs}:{drop} shard:1:2", 2 * (n // bs + 2)
                if n:
                    yield f"sequential:{n} repeat batch:{bs}:{drop} skip:3", n // bs + 5
                    yield f"shuffle:{n}:3 repeat shard:0:4 batch:{bs}:{drop} skip:{n}", n // bs + 5
                # without a repeat, only up to the first pass's end: Python's
                # islice skips in every pass, ctrial's skip once in the stream
                short = n // bs if drop else -(-n // bs)
                yield f"sequential:{n} batch:{bs}:{drop} skip:2", max(short - 2, 0) + 1


def main(prog):
    specs = list(cases())
    text = "".join(f"{spec} | {calls}\n" for spec, calls in specs)
    run = subprocess.run([prog], input=text, capture_output=True, text=True, check=True)
    lines = run.stdout.splitlines()
    assert len(lines) == len(specs), (len(lines), len(specs), run.stderr)
    failures = 0
    for (spec, calls), line in zip(specs, lines):
        got, want, want_len = json.loads(line), expected(spec, calls), len(build(spec))
        if "error" in got or got["items"] != want or got["len"] != want_len:
            failures += 1
            g = got.get("error") or (got["len"], got["items"][:12])
            print(f"FAIL {spec}: C gives {g} ... expected {(want_len, want[:12])} ...")
            continue
        # A chain that neither repeats nor skips yields len() items per pass.
        if "repeat" not in spec and "skip" not in spec and want.index(None) != want_len:
            failures += 1
            print(f"FAIL {spec}: len {want_len} but a pass of {want.index(None)} items")
    # The comparison can fail: a different seed must not match.
    other = json.loads(subprocess.run([prog], input="shuffle:50:1 | 50\n", capture_output=True, text=True).stdout)
    assert other["items"] != expected("shuffle:50:2", 50), "comparison cannot tell seeds apart"
    print(f"{len(specs) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
