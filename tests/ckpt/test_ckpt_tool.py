"""`ctrial-ckpt list` on a run's output folder: every checkpoint, one a
line, in training order, with the searcher metric and the best and latest
marks.

One short run of tests/ckpt/ckpt_trial (24 batches, validation every 4,
checkpoint policy all plus a checkpoint every 6: checkpoints at 4, 6, 8, 12,
16, 18, 20, 24, those at 6 and 18 without a validation metric), then the
listing is checked against the metadata.json files read here, and against
copies whose metadata.json are edited (best elsewhere, null metrics, larger
is better, no metric, a damaged one, an uncommitted one).

    test_ckpt_tool.py CKPT_TRIAL CTRIAL_CKPT
"""
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

TRIAL, CKPT_TOOL = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="ckpt_tool_")
FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def tool(*args):
    return subprocess.run([CKPT_TOOL, *args], capture_output=True, text=True)


def listing(path):
    """(return code, header lines, rows, stdout, stderr) of `list path`; a row
    is {name, batches, epochs, metric, marks}, "-" where a value is absent."""
    p = tool("list", path)
    header = [line for line in p.stdout.splitlines() if line.startswith("#")]
    rows = []
    for line in p.stdout.splitlines():
        if line.startswith("#"):
            continue
        f = line.split(None, 4)
        rows.append({"name": f[0], "batches": f[1], "epochs": f[2], "metric": f[3],
                     "marks": f[4] if len(f) > 4 else ""})
    return p.returncode, header, rows, p.stdout, p.stderr


def metadata(folder):
    """{name: metadata.json} of the committed checkpoints in a folder."""
    return {os.path.basename(d): json.load(open(os.path.join(d, "metadata.json")))
            for d in glob.glob(os.path.join(folder, "ckpt-*"))}


def edit(folder, name, change):
    """Changes a metadata.json and seals it again as ctrial does: its last key
    metadata_crc32 is the CRC-32 of the file's bytes with those 8 digits read
    as zeros (unsealed, the checkpoint would be listed as damaged)."""
    path = os.path.join(folder, name, "metadata.json")
    meta = json.load(open(path))
    change(meta)
    meta.pop("metadata_crc32")
    meta["metadata_crc32"] = "00000000"
    data = json.dumps(meta, indent=2).encode()
    crc = zlib.crc32(data)
    with open(path, "wb") as f:
        f.write(data.replace(b'"metadata_crc32": "00000000"', f'"metadata_crc32": "{crc:08x}"'.encode()))


def marked(rows, mark):
    return [r["name"] for r in rows if mark in r["marks"].split()]


def expected_best(metas, larger_is_better=False):
    """The checkpoint with the best finite searcher metric, the latest (in
    commit order: commit_sequence) of equals; None when none has one."""
    found = []
    for name, meta in metas.items():
        v = meta["validation_metrics"].get(meta["trial_state"]["searcher_metric"])
        if isinstance(v, (int, float)) and math.isfinite(v):
            found.append((-v if larger_is_better else v, -meta["commit_sequence"], name))
    return min(found)[2] if found else None


def check_listing(what, folder, latest, larger_is_better=False):
    """The listing of a checkpoints folder against its metadata.json files;
    `latest`: the name the latest mark should be on."""
    rc, header, rows, text, err = listing(folder)
    check(rc == 0, f"{what}: exit 0 ({err.strip()})")
    metas = metadata(folder)
    order = sorted(metas, key=lambda n: (metas[n]["steps_completed"], n))
    listed = [r["name"] for r in rows]
    check(listed == order, f"{what}: every checkpoint in training order: {listed}")
    if listed != order:
        return header, rows, text
    check(all(r["batches"] == str(metas[r["name"]]["steps_completed"]) for r in rows),
          f"{what}: batches trained as metadata.json says")
    check(all(abs(float(r["epochs"]) - metas[r["name"]]["epochs_trained"]) < 0.006 for r in rows),
          f"{what}: epochs as metadata.json says")
    for r in rows:
        v = metas.get(r["name"], {}).get("validation_metrics", {}).get("validation_loss", "absent")
        want = "-" if v == "absent" else "null" if v is None else v
        got = r["metric"] if want in ("-", "null") else float(r["metric"])
        ok = got == want if want in ("-", "null") else abs(got - want) <= 1e-5 * abs(want)
        check(ok, f"{what}: {r['name']} shows validation_loss {r['metric']} (metadata.json: {v})")
    best = expected_best(metas, larger_is_better)
    check(marked(rows, "best") == ([best] if best else []), f"{what}: best on {best}: {marked(rows, 'best')}")
    check(marked(rows, "latest") == [latest], f"{what}: latest on {latest}: {marked(rows, 'latest')}")
    return header, rows, text


# ---- one short run -----------------------------------------------------------------

cfg = os.path.join(WORK, "run.json")
with open(cfg, "w") as f:
    json.dump({"name": "ckpt_tool", "hyperparameters": {"global_batch_size": 16, "lr": 0.2},
               "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True,
                            "max_length": {"batches": 24}},
               "min_validation_period": {"batches": 4}, "min_checkpoint_period": {"batches": 6},
               "checkpoint_policy": "all", "scheduling_unit": 4,
               "checkpoint_storage": {"save_trial_latest": 100, "save_trial_best": 100}}, f)
out = os.path.join(WORK, "out")
p = subprocess.run([TRIAL, "--config", cfg, "--output", out, "--threads", "1"], capture_output=True, text=True)
check(p.returncode == 0, f"the run: exit {p.returncode} {p.stderr[-2000:]}")
ckpts = os.path.join(out, "checkpoints")
steps = sorted(m["steps_completed"] for m in metadata(ckpts).values())
check(steps == [4, 6, 8, 12, 16, 18, 20, 24], f"checkpoints at {steps}")

# ---- the run as written ----------------------------------------------------------------

# "latest" is what --resume latest picks: what `ctrial-ckpt latest` prints.
latest = os.path.basename(tool("latest", ckpts).stdout.strip())
header, rows, text = check_listing("run", ckpts, latest)
check(len(header) == 2 and header[0].startswith(f"# {ckpts}: 8 committed, 0 damaged, 0 uncommitted")
      and "validation_loss, smaller is better" in header[0], f"header names the folder and counts: {header}")
for same in (out, ckpts + "/"):
    check(listing(same)[3] == text, f"list {same} prints what list {ckpts} prints")

# ---- edited copies -------------------------------------------------------------------

# The best one in the middle; a null (NaN) metric lower than every other is
# never best.
copy = os.path.join(WORK, "edited", "checkpoints")
shutil.copytree(ckpts, copy)
names = [r["name"] for r in rows]
edit(copy, names[2], lambda m: m["validation_metrics"].update(validation_loss=0.001))
edit(copy, names[4], lambda m: m["validation_metrics"].update(validation_loss=None))
_, rows2, _ = check_listing("best in the middle, a null metric", copy, latest)
check(marked(rows2, "best") == [names[2]] and rows2[4]["metric"] == "null", f"best moved to {names[2]}")

# Larger is better, as the latest checkpoint's trial_state says.
edit(copy, names[-1], lambda m: m["trial_state"].update(smaller_is_better=False))
check_listing("larger is better", copy, latest, larger_is_better=True)

# No validation metric anywhere: no best.
for n in names:
    edit(copy, n, lambda m: m.update(validation_metrics={}))
_, _, rows4, _, _ = listing(copy)
check(marked(rows4, "best") == [] and all(r["metric"] == "-" for r in rows4), "no metric: no best")

# A checkpoint being written (or left by a crash) is shown as uncommitted and
# is no error; a damaged metadata.json is listed with why, exit 1, and the
# others are still listed.
broken = os.path.join(WORK, "broken")
shutil.copytree(ckpts, broken)
os.mkdir(os.path.join(broken, ".tmp-ckpt-000028-0badc0de"))
rc, _, rows5, _, err = listing(broken)
check(rc == 0 and rows5[-1]["name"] == ".tmp-ckpt-000028-0badc0de" and rows5[-1]["marks"] == "uncommitted",
      f"uncommitted shown last, exit 0: {rows5[-1]} ({err.strip()})")
with open(os.path.join(broken, names[3], "metadata.json"), "w") as f:
    f.write('{"steps')
rc, header, rows6, _, err = listing(broken)
damaged = [r for r in rows6 if r["marks"].startswith("damaged:")]
check(rc == 1, f"a damaged checkpoint: exit {rc}")
check(len(damaged) == 1 and damaged[0]["name"] == names[3] and "metadata.json" in damaged[0]["marks"]
      and names[3] in err, f"the damaged one listed with why: {damaged} / {err.strip()}")
check([r["name"] for r in rows6 if r["name"].startswith("ckpt-") and r not in damaged]
      == [n for n in names if n != names[3]], "the others still listed, in training order")
check("7 committed, 1 damaged, 1 uncommitted" in header[0], f"header counts: {header[0]}")

# A run folder before its first checkpoint: nothing to list, no error.
empty = os.path.join(WORK, "empty")
os.mkdir(empty)
rc, header, rows7, _, err = listing(empty)
check(rc == 0 and rows7 == [] and "0 committed" in header[0], f"no checkpoints yet: {header} {err.strip()}")

# A single checkpoint directory: its metadata and keys, as before.
p = tool("list", os.path.join(ckpts, names[-1]))
check(p.returncode == 0 and p.stdout.startswith("== ") and "steps_completed" in p.stdout
      and "models_state_dict[0].0.weight" in p.stdout, "list CKPT_DIR still shows metadata and keys")

if FAILURES:
    print(f"{len(FAILURES)} failure(s); work dir kept: {WORK}")
    sys.exit(1)
shutil.rmtree(WORK)
print("all passed")
