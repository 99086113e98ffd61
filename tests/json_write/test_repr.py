"""cti_float_repr and cti_json_dumps (src/base/json_write.c) against Python:
every double repr_dump writes is written as Python's repr(float) writes it
and reads back as the same double; its documents are what Python's
json.dumps writes for what json.loads reads from them (compact separators,
or indent=2), and hold the same doubles, bit for bit.

    test_repr.py REPR_DUMP
"""
import glob
import json
import math
import os
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import check, exit_with_report, run_cmd  # noqa: E402

T0 = time.time()
WORK = tempfile.mkdtemp(prefix="json_repr_")
p = run_cmd([os.path.abspath(sys.argv[1]), WORK], 60)
check(p.returncode == 0, f"repr_dump exits 0 ({p.returncode}: {p.stderr.strip()[-300:]})")


def double(hex16):
    return struct.unpack(">d", bytes.fromhex(hex16))[0]


def bits(x):
    return struct.pack(">d", x).hex()


# ---- repr(float) ----------------------------------------------------------------
wrong, unread, n = [], [], 0
for ln in open(os.path.join(WORK, "reprs.txt")):
    h, text = ln.split()
    x = double(h)
    n += 1
    if text != repr(x):
        wrong.append(f"{h}: {text}, Python: {repr(x)}")
    if not math.isnan(x) and bits(float(text)) != h:
        unread.append(f"{h}: {text} reads back as {bits(float(text))}")
check(n > 50000, f"repr_dump wrote {n} doubles")
check(not wrong, f"each is written as Python's repr ({len(wrong)} otherwise: {wrong[:5]})")
check(not unread, f"each reads back as the same double ({len(unread)} otherwise: {unread[:5]})")
edges = {"0.003", "0.1", "0.3333333333333333", "1e+16", "1000000000000000.0", "9999999999999998.0", "0.0001",
         "1e-05", "5e-324", "1.7976931348623157e+308", "-0.0", "1.2345678901234568e+17", "1.0", "100.0", "1000000.0",
         "nan", "inf", "-inf"}
seen = {ln.split()[1] for ln in open(os.path.join(WORK, "reprs.txt"))}
check(edges <= seen, f"the edge cases are among them ({sorted(edges - seen)} missing)")

# ---- documents ------------------------------------------------------------------


def reals(v):
    """The floats of a parsed document, in document order."""
    if isinstance(v, float):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from reals(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from reals(x)


docs = sorted(glob.glob(os.path.join(WORK, "*.json")))
check(len(docs) == 4, f"4 documents ({[os.path.basename(d) for d in docs]})")
for path in docs:
    name = os.path.basename(path)[:-5]
    text = open(path, encoding="utf-8").read()
    obj = json.loads(text)
    want = [ln.strip() for ln in open(path[:-5] + ".bits")]
    got = [bits(x) for x in reals(obj)]
    check(got == want and len(got) > 0, f"{name}: Python reads its {len(want)} reals as the same doubles")
    if name.endswith("_compact"):
        python = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    else:
        python = json.dumps(obj, indent=2, ensure_ascii=False)
    at = next((i for i, (a, b) in enumerate(zip(text, python)) if a != b), min(len(text), len(python)))
    check(text == python, f"{name}: the text is Python's json.dumps of it"
          + ("" if text == python else f" (differs at {at}: {text[at - 40:at + 40]!r} vs {python[at - 40:at + 40]!r})"))
exit_with_report(T0, WORK)
