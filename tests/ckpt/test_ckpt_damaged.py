"""Damaged checkpoints are never passed over silently (issue 17, item 3).

One run of ckpt_trial (24 batches, checkpoints at 8, 16 and 24, every one
kept), then copies of its output folder with checkpoints damaged:

- the newest one's metadata.json deleted, empty, garbled, not an object,
  a key missing, a key of the wrong type, edited (its CRC-32, metadata_crc32,
  no longer matches), its seal removed; its state_dict.pth damaged:
  `--resume latest` exits 3 before anything trains, naming the damaged
  checkpoint, why, and the latest intact one (16) with how to resume it;
  metrics.jsonl and the checkpoints are untouched. `ctrial-ckpt latest`
  refuses too (exit 1), `ctrial-ckpt verify` names the damage, and
  `ctrial-ckpt list` lists it as damaged with no latest mark.
- the message's advice: resuming the intact one by path works (the run's
  summary says a damaged one may be the latest, and --resume latest keeps
  refusing while it is there); once it is moved out, --resume latest
  continues from the latest intact checkpoint.
- every checkpoint damaged: exit 3 (never "starting from the beginning");
  a fresh run is refused (they count as an earlier run), --overwrite
  replaces them.
- only the oldest damaged: the resume goes on from 24, with a warning
  naming the damaged one.
- checkpoints of an earlier ctrial (no commit_sequence, no metadata_crc32)
  still verify and resume, ordered by steps.
- `--resume PATH` of a checkpoint whose metadata.json fails its CRC: exit 3.

metadata.json's seal, as the test reads it: metadata_crc32 is the last key,
the CRC-32 (zlib's) of the file's bytes with its own 8 hex digits read as
"00000000".

    test_ckpt_damaged.py CKPT_TRIAL CTRIAL_CKPT
"""
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, run_cmd, single_config  # noqa: E402

TRIAL, CKPT_TOOL = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="ckpt_damaged_")


CFG = single_config(os.path.join(WORK, "cfg.json"), "ckpt_damaged", 16, 24, val=8, ckpt=8, scheduling_unit=4)


def run(out, *args, expect=0):
    cmd = [TRIAL, "--config", CFG, "--output", out, "--threads", "1", *args]
    p = run_cmd(cmd, 300)
    if p.returncode != expect:
        print(" ".join(cmd), "\n", p.stdout[-3000:], p.stderr[-3000:])
    check(p.returncode == expect, f"exit code {p.returncode} (want {expect}): {' '.join(args)}")
    return p


def tool(*args):
    return run_cmd([CKPT_TOOL, *args], 120)


def sealed(data):
    """True when metadata.json's bytes carry a matching metadata_crc32."""
    found = list(re.finditer(rb'"metadata_crc32"\s*:\s*"([0-9a-f]{8})"', data))
    if not found:
        return False
    m = found[-1]
    zeroed = data[:m.start(1)] + b"00000000" + data[m.end(1):]
    return zlib.crc32(zeroed) == int(m.group(1), 16) and json.loads(data)["metadata_crc32"] == m.group(1).decode()


def write_sealed(path, meta):
    """metadata.json as ctrial writes it: indented, metadata_crc32 last."""
    meta = {k: v for k, v in meta.items() if k != "metadata_crc32"}
    meta["metadata_crc32"] = "00000000"
    data = json.dumps(meta, indent=2).encode()
    crc = zlib.crc32(data)
    data = data.replace(b'"metadata_crc32": "00000000"', f'"metadata_crc32": "{crc:08x}"'.encode())
    open(path, "wb").write(data)


def resumed_from(p):
    for line in p.stdout.splitlines():
        if line.startswith("resumed from "):
            return os.path.basename(line.split()[2])
    return None


def snapshot(out):
    """Every file under out (but TensorBoard's) with its bytes."""
    files = {}
    for root, _, names in os.walk(out):
        for n in names:
            if "tfevents" not in n:
                p = os.path.join(root, n)
                files[os.path.relpath(p, out)] = open(p, "rb").read()
    return files


# ---- the run ----------------------------------------------------------------------

ref = os.path.join(WORK, "ref")
run(ref)
CK = {}
for d in glob.glob(os.path.join(ref, "checkpoints", "ckpt-*")):
    CK[json.load(open(os.path.join(d, "metadata.json")))["steps_completed"]] = os.path.basename(d)
check(sorted(CK) == [8, 16, 24], f"checkpoints at {sorted(CK)}")
metas = {s: open(os.path.join(ref, "checkpoints", n, "metadata.json"), "rb").read() for s, n in CK.items()}
check(all(sealed(m) for m in metas.values()), "every metadata.json carries a matching metadata_crc32")
check([json.loads(metas[s]).get("commit_sequence") for s in (8, 16, 24)] == [1, 2, 3],
      "commit_sequence 1, 2, 3")
check(all(json.loads(m)["time"] > 0 for m in metas.values()), "metadata.json still says when (time)")
p = tool("verify", os.path.join(ref, "checkpoints", CK[24]))
check(p.returncode == 0, f"ctrial-ckpt verify passes the intact one: {p.stdout.strip()} {p.stderr.strip()}")


def copy(name):
    out = os.path.join(WORK, name)
    shutil.copytree(ref, out)
    return out, os.path.join(out, "checkpoints")


def meta_path(ckpts, steps):
    return os.path.join(ckpts, CK[steps], "metadata.json")


def edited(change, seal=True):
    """A damage that edits the newest one's metadata.json (sealed again or not)."""
    def damage(ckpts):
        meta = json.loads(metas[24])
        change(meta)
        if seal:
            write_sealed(meta_path(ckpts, 24), meta)
        else:
            with open(meta_path(ckpts, 24), "w") as f:
                json.dump(meta, f, indent=2)
    return damage


def write(text):
    def damage(ckpts):
        open(meta_path(ckpts, 24), "wb").write(text)
    return damage


def flip_state(ckpts):
    path = os.path.join(ckpts, CK[24], "state_dict.pth")
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x40]))


def flip_metadata_byte(ckpts):
    """One digit of the state file's size changed, the JSON still valid."""
    data = bytearray(metas[24])
    at = data.index(b'"size": ') + len(b'"size": ')
    data[at] = ord("9") if data[at] != ord("9") else ord("8")
    open(meta_path(ckpts, 24), "wb").write(bytes(data))


DAMAGES = [
    ("deleted", lambda c: os.remove(meta_path(c, 24)), "metadata.json is missing"),
    ("empty", write(b""), "metadata.json is empty"),
    ("garbled", write(metas[24][: len(metas[24]) // 2]), "metadata.json is not valid JSON"),
    ("binary", write(bytes(range(256)) * 4), "metadata.json is not valid JSON"),
    ("not an object", write(b"[1, 2, 3]\n"), "metadata.json is a list, not a JSON object"),
    ("missing key", edited(lambda m: m.pop("steps_completed")), "metadata.json lacks 'steps_completed'"),
    ("missing trial_state", edited(lambda m: m.pop("trial_state")), "metadata.json lacks 'trial_state'"),
    ("wrong type", edited(lambda m: m.update(steps_completed="24")),
     "metadata.json: 'steps_completed' is a string, not an integer"),
    ("wrong type of files", edited(lambda m: m.update(files=[])), "metadata.json: 'files' is a list, not an object"),
    ("bad sequence", edited(lambda m: m.update(commit_sequence=0)),
     "metadata.json: 'commit_sequence' is 0, not 1 or more"),
    ("edited, not sealed again", edited(lambda m: m["trial_state"].update(batches_trained=20), seal=False),
     "metadata.json has CRC-32"),
    ("one byte changed", flip_metadata_byte, "metadata.json has CRC-32"),
    ("seal removed", edited(lambda m: m.pop("metadata_crc32"), seal=False), "metadata.json lacks 'metadata_crc32'"),
    ("state_dict.pth damaged", flip_state, "state_dict.pth has CRC-32"),
]

for name, damage, why in DAMAGES:
    out, ckpts = copy("newest_" + name.replace(" ", "_").replace(",", ""))
    damage(ckpts)
    before = snapshot(out)
    p = run(out, "--resume", "latest", expect=3)
    err = p.stderr
    check(why in err and CK[24] in err, f"{name}: names the damaged checkpoint and why: {err.strip()[-400:]}")
    check(f"--resume {ckpts}/{CK[16]}" in err, f"{name}: names the latest intact one and how to resume it")
    check("starting from the beginning" not in p.stdout + err and resumed_from(p) is None,
          f"{name}: neither starts over nor resumes")
    check(snapshot(out) == before, f"{name}: metrics.jsonl and every checkpoint untouched")
    v = tool("verify", os.path.join(ckpts, CK[24]))
    check(v.returncode == 1 and why in v.stderr, f"{name}: ctrial-ckpt verify: {v.stderr.strip()[-300:]}")
    if name == "state_dict.pth damaged":
        continue  # metadata.json is fine: listing and latest go by it (verify and --resume read the file)
    lt = tool("latest", ckpts)
    check(lt.returncode == 1 and CK[24] in lt.stderr and why in lt.stderr and CK[16] in lt.stderr,
          f"{name}: ctrial-ckpt latest refuses as --resume latest does: {lt.stderr.strip()[-300:]}")
    ls = tool("list", out)
    rows = {line.split()[0]: line for line in ls.stdout.splitlines() if not line.startswith("#")}
    check(ls.returncode == 1 and "damaged: " in rows.get(CK[24], "") and why in rows.get(CK[24], "")
          and not any(r.endswith("latest") for r in rows.values()),
          f"{name}: ctrial-ckpt list shows it damaged, no latest mark: {rows.get(CK[24], '')[:200]}")

# Following the message: resume the intact one by path (the run goes on; its
# summary says a damaged one may still be the latest), then move the damaged
# one out: --resume latest continues from the latest intact checkpoint.
out, ckpts = copy("advice")
open(meta_path(ckpts, 24), "w").close()
p = run(out, "--resume", os.path.join(ckpts, CK[16]))
check(resumed_from(p) == CK[16] and "checkpoints: no latest: " in p.stdout and CK[24] in p.stdout,
      f"--resume PATH of the intact one trains to 24; the summary names the damaged one: "
      f"{[line for line in p.stdout.splitlines() if line.startswith('checkpoints:')]}")
new24 = [n for n in os.listdir(ckpts) if n.startswith("ckpt-000024-") and n != CK[24]]
p = run(out, "--resume", "latest", "--max-length", "32", expect=3)
check(CK[24] in p.stderr and new24 and new24[0] in p.stderr,
      f"while the damaged one is there, --resume latest refuses again: {p.stderr.strip()[-300:]}")
os.rename(os.path.join(ckpts, CK[24]), os.path.join(WORK, "moved_out"))
p = run(out, "--resume", "latest", "--max-length", "32")
check(new24 and resumed_from(p) == new24[0], f"moved out: --resume latest resumes the new 24 ({resumed_from(p)})")
train = [json.loads(line)["batches"] for line in open(os.path.join(out, "metrics.jsonl"))
         if json.loads(line)["group"] == "training"]
check(train == list(range(4, 33, 4)), f"advice: metrics.jsonl without gap or repeat: {train}")

# Every checkpoint damaged: no intact one, and still no start from scratch.
out, ckpts = copy("all_damaged")
for s in CK:
    os.remove(meta_path(ckpts, s))
before = snapshot(out)
p = run(out, "--resume", "latest", expect=3)
check("holds no intact checkpoint" in p.stderr and CK[24] in p.stderr and "--overwrite" in p.stderr,
      f"all damaged: refused, naming the furthest and the way out: {p.stderr.strip()[-400:]}")
check("starting from the beginning" not in p.stdout and snapshot(out) == before, "all damaged: nothing touched")
check(tool("latest", ckpts).returncode == 1, "all damaged: ctrial-ckpt latest exits 1")
# A new run without --resume does not write next to them unless told to.
p = run(out, expect=2)
check("3 checkpoints" in p.stderr and "--overwrite" in p.stderr, f"a fresh run is refused: {p.stderr.strip()[-300:]}")
p = run(out, "--overwrite")
names = sorted(os.listdir(ckpts))
check(len(names) == 3 and not set(names) & set(CK.values()), f"--overwrite replaced them all: {names}")

# Only the oldest damaged: 24 is the latest whatever 8 was; the resume goes
# on, saying which it passed over.
out, ckpts = copy("oldest_damaged")
open(meta_path(ckpts, 8), "w").close()
p = run(out, "--resume", "latest", "--max-length", "32")
check(resumed_from(p) == CK[24], f"oldest damaged: resumed from 24 ({resumed_from(p)})")
check("warning" in p.stderr and CK[8] in p.stderr and "metadata.json is empty" in p.stderr,
      f"oldest damaged: the warning names it: {p.stderr.strip()[-300:]}")

# Checkpoints of an earlier ctrial: no sequence, no seal. They verify and
# resume; ordered by steps.
out, ckpts = copy("legacy")
for s in CK:
    meta = json.loads(metas[s])
    meta.pop("commit_sequence")
    meta.pop("metadata_crc32")
    with open(meta_path(ckpts, s), "w") as f:
        json.dump(meta, f, indent=2)
check(tool("verify", os.path.join(ckpts, CK[16])).returncode == 0, "legacy: ctrial-ckpt verify passes")
lt = tool("latest", ckpts)
check(lt.returncode == 0 and os.path.basename(lt.stdout.strip()) == CK[24], f"legacy: latest is 24: {lt.stdout}")
p = run(out, "--resume", "latest", "--max-length", "32")
check(resumed_from(p) == CK[24], f"legacy: resumed from 24 ({resumed_from(p)})")
new = [n for n in os.listdir(ckpts) if n.startswith("ckpt-000032-")]
seq = json.load(open(os.path.join(ckpts, new[0], "metadata.json"))).get("commit_sequence") if new else None
check(seq == 1, f"legacy: the next checkpoint's commit_sequence is 1 ({seq}), after the legacy ones")
lt = tool("latest", ckpts)
check(new and os.path.basename(lt.stdout.strip()) == new[0], f"legacy: then the latest is 32: {lt.stdout}")

# --resume PATH of a checkpoint whose metadata.json fails its CRC.
out, ckpts = copy("path_bad_crc")
edited(lambda m: m.update(hparams={"global_batch_size": 16, "lr": 1.0}), seal=False)(ckpts)
before = snapshot(out)
p = run(out, "--resume", os.path.join(ckpts, CK[24]), expect=3)
check("metadata.json has CRC-32" in p.stderr and CK[24] in p.stderr and snapshot(out) == before,
      f"--resume PATH with a bad CRC: refused, nothing touched: {p.stderr.strip()[-300:]}")

if FAILURES:
    print(f"{len(FAILURES)} failure(s); work dir kept: {WORK}")
    sys.exit(1)
shutil.rmtree(WORK)
print("all passed")
