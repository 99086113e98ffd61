"""What is not a regular file is refused, never read (issue 17, item 7).

A FIFO blocks open(2) until a writer comes, and a FIFO or a device such as
/dev/zero never ends a read: as a checkpoint's state_dict.pth or
metadata.json, as a .pth to list, as a data file (IDX, CSV, records, .pth),
as the experiment config, or as the metrics.jsonl a resumed run continues,
each made `ctrial-ckpt verify`, `--resume`, `--warm-start`, the data
loading or ct_main hang.
Each must end at once with an error naming the path and "not a regular
file". Every command runs under a timeout, so that a hang fails the test
instead of hanging it (the timeout is no measurement: a refusal takes
milliseconds).

    test_ckpt_not_regular.py CKPT_TRIAL CTRIAL_CKPT READ_DATA
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, run_cmd, single_config  # noqa: E402

TRIAL, CKPT_TOOL, READ_DATA = sys.argv[1], sys.argv[2], sys.argv[3]
WORK = tempfile.mkdtemp(prefix="ckpt_not_regular_")
HANG = 120  # seconds: far beyond any refusal, only there to stop a hang


def call(cmd):
    """(exit code, stdout, stderr); exit code None when it hung."""
    return run_cmd(cmd, HANG, stdin=subprocess.DEVNULL)


CFG = single_config(os.path.join(WORK, "cfg.json"), "ckpt_not_regular", 16, 16, val=8, ckpt=8, scheduling_unit=4)


def trial(out, *args):
    return call([TRIAL, "--config", CFG, "--output", out, "--threads", "1", *args])


def write_sealed(path, meta):
    """metadata.json as ctrial writes it: indented, metadata_crc32 (CRC-32 of
    the bytes with its own digits as zeros) last."""
    meta = {k: v for k, v in meta.items() if k != "metadata_crc32"}
    meta["metadata_crc32"] = "00000000"
    data = json.dumps(meta, indent=2).encode()
    crc = zlib.crc32(data)
    open(path, "wb").write(data.replace(b'"metadata_crc32": "00000000"', f'"metadata_crc32": "{crc:08x}"'.encode()))


ref = os.path.join(WORK, "ref")
rc, _, err = trial(ref)
check(rc == 0, f"the run: exit {rc} {err[-500:]}")
CK = {}
for d in glob.glob(os.path.join(ref, "checkpoints", "ckpt-*")):
    CK[json.load(open(os.path.join(d, "metadata.json")))["steps_completed"]] = os.path.basename(d)
check(sorted(CK) == [8, 16], f"checkpoints at {sorted(CK)}")


def copy(name):
    """A copy of the run; returns it and its newest checkpoint's path."""
    out = os.path.join(WORK, name)
    shutil.copytree(ref, out)
    return out, os.path.join(out, "checkpoints", CK[16])


def zero_size(ckpt):
    """metadata.json says state_dict.pth has 0 bytes (as a FIFO or a device
    shows): the size check cannot catch it, only the file's kind."""
    path = os.path.join(ckpt, "metadata.json")
    meta = json.load(open(path))
    meta["files"]["state_dict.pth"]["size"] = 0
    write_sealed(path, meta)


def fifo_state(ckpt):
    os.remove(os.path.join(ckpt, "state_dict.pth"))
    os.mkfifo(os.path.join(ckpt, "state_dict.pth"))


def zero_state(ckpt):
    os.remove(os.path.join(ckpt, "state_dict.pth"))
    os.symlink("/dev/zero", os.path.join(ckpt, "state_dict.pth"))


def fifo_metadata(ckpt):
    os.remove(os.path.join(ckpt, "metadata.json"))
    os.mkfifo(os.path.join(ckpt, "metadata.json"))


def zero_metadata(ckpt):
    os.remove(os.path.join(ckpt, "metadata.json"))
    os.symlink("/dev/zero", os.path.join(ckpt, "metadata.json"))


CASES = [
    ("state_dict.pth a FIFO", [fifo_state], "state_dict.pth: not a regular file (a FIFO)"),
    ("state_dict.pth a FIFO, size 0", [fifo_state, zero_size], "state_dict.pth: not a regular file (a FIFO)"),
    ("state_dict.pth -> /dev/zero, size 0", [zero_state, zero_size],
     "state_dict.pth: not a regular file (a character device)"),
    ("metadata.json a FIFO", [fifo_metadata], "metadata.json: not a regular file (a FIFO)"),
    ("metadata.json -> /dev/zero", [zero_metadata], "metadata.json: not a regular file (a character device)"),
]

for name, damages, why in CASES:
    out, ckpt = copy(name.replace(" ", "_").replace(",", "").replace(">", "").replace("/", "_"))
    for damage in damages:
        damage(ckpt)
    rc, _, err = call([CKPT_TOOL, "verify", ckpt])
    check(rc == 1 and why in err and CK[16] in err, f"{name}: ctrial-ckpt verify refuses ({rc}): {err.strip()[-300:]}")
    rc, _, err = call([CKPT_TOOL, "list", ckpt])
    check(rc == 1 and "not a regular file" in err, f"{name}: ctrial-ckpt list refuses ({rc}): {err.strip()[-300:]}")
    before = open(os.path.join(out, "metrics.jsonl")).read()
    rc, _, err = trial(out, "--resume", ckpt)
    check(rc == 3 and why in err, f"{name}: --resume PATH exits 3 ({rc}): {err.strip()[-300:]}")
    rc, _, err = trial(out, "--resume", "latest")
    check(rc == 3 and why in err and CK[8] in err,
          f"{name}: --resume latest exits 3 naming the intact one ({rc}): {err.strip()[-300:]}")
    check(open(os.path.join(out, "metrics.jsonl")).read() == before, f"{name}: metrics.jsonl untouched")
    if name.startswith("metadata.json"):
        rc, _, err = trial(os.path.join(WORK, "warm_" + os.path.basename(out)), "--warm-start", ckpt)
        check(rc == 3 and "metadata.json is not a regular file" in err,
              f"{name}: --warm-start exits 3 ({rc}): {err.strip()[-300:]}")

# A .pth to list, and data files, as a FIFO (and a .pth as /dev/zero).
fifo = os.path.join(WORK, "fifo")
os.mkfifo(fifo)
zero = os.path.join(WORK, "zero.pth")
os.symlink("/dev/zero", zero)
for path, kind in ((fifo, "a FIFO"), (zero, "a character device")):
    rc, _, err = call([CKPT_TOOL, "list", path])
    check(rc == 1 and f"{path}: not a regular file ({kind})" in err, f"ctrial-ckpt list {kind}: ({rc}) {err.strip()}")
for kind in ("idx", "csv", "records", "pth"):
    rc, _, err = call([READ_DATA, kind, fifo])
    check(rc == 1 and f"{fifo}: not a regular file (a FIFO)" in err, f"a FIFO as {kind} data: ({rc}) {err.strip()}")
rc, _, err = call([READ_DATA, "pth", zero])
check(rc == 1 and f"{zero}: not a regular file (a character device)" in err, f"/dev/zero as .pth data: {err.strip()}")
rc, _, err = trial(os.path.join(WORK, "data_fifo"), "--hparam", f"data={fifo}")
check(rc not in (0, None) and f"{fifo}: not a regular file (a FIFO)" in err,
      f"a trial whose data file is a FIFO fails, naming it ({rc}): {err.strip()[-300:]}")

# The experiment config as a FIFO or /dev/zero: a config error (exit 2)
# naming it, before anything trains.
for path, kind in ((fifo, "a FIFO"), ("/dev/zero", "a character device")):
    rc, _, err = call([TRIAL, "--config", path, "--output", os.path.join(WORK, "cfg_fifo")])
    check(rc == 2 and f"{path}: not a regular file ({kind})" in err,
          f"--config {kind} exits 2 naming it ({rc}): {err.strip()[-300:]}")

# metrics.jsonl a FIFO where a resumed run continues it: refused, naming it.
out, ckpt = copy("metrics_fifo")
os.remove(os.path.join(out, "metrics.jsonl"))
os.mkfifo(os.path.join(out, "metrics.jsonl"))
rc, _, err = trial(out, "--resume", "latest")
check(rc not in (0, None) and "metrics.jsonl: not a regular file (a FIFO)" in err,
      f"metrics.jsonl a FIFO: --resume latest fails naming it ({rc}): {err.strip()[-300:]}")

if FAILURES:
    print(f"{len(FAILURES)} failure(s); work dir kept: {WORK}")
    sys.exit(1)
shutil.rmtree(WORK)
print("all passed")
