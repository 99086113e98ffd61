"""Checkpoints in S3 end to end: tests/ckpt/ckpt_trial (a ct_main program)
with checkpoint_storage type s3 against moto's server (signatures checked)
through a proxy that can stall or refuse requests (s3_server.py).

    test_s3_ckpt.py CKPT_TRIAL CTRIAL_CKPT

"Equal" means the final checkpoint's state_dict.pth (weights, Adam and
StepLR state, the RNG state) is equal tensor for tensor with the
uninterrupted run's on disk.

1. A run to 40 batches with checkpoints every 8 keeps the same checkpoints
   in the store as on disk (retention 2 latest + 1 best on both), each with
   the same metadata.json bytes and every file at its size; it trains what
   the run without a store trains.
2. A new machine: a run stopped after batch 20, its output folder deleted,
   resumed with --resume latest into an empty folder: the store's latest
   checkpoint is fetched and the run ends equal.
3. kill -9 while a checkpoint's metadata.json is being uploaded: the store
   holds its state_dict.pth but no checkpoint; --resume latest continues
   from the one before (not from the copy committed on disk, which the
   store never got), removes the leftover, and ends equal.
4. A store that refuses every upload (503): the run fails (exit 1) naming
   the store, the attempts and that the checkpoint is committed on disk.
5. A fresh run over a prefix that holds checkpoints is refused (exit 2,
   naming the store); --overwrite replaces them.
6. --warm-start s3://.../ckpt-...: the same as a warm start from the same
   checkpoint on disk.
7. gs:// and a type 'gcs' are refused before anything runs (exit 2), naming
   the S3-compatible way.
8. ctrial-ckpt on s3://: list, latest and best of the prefix print what they
   print for the same checkpoints on disk (the folder's name aside), list
   and verify of one checkpoint too; with an upload cut off in the prefix
   (no metadata.json) nothing changes, and verifying it fails; a checkpoint
   whose state_dict.pth is missing is listed as damaged (exit 1). The
   endpoint from the environment or --endpoint-url; what was fetched is
   removed.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import check, exit_with_report, run_cmd, spawn, wait_or_kill  # noqa: E402
from s3_server import AK, BUCKET, MOTO, PROXY, SK, Plan, s3, stop  # noqa: E402

TRIAL = os.path.abspath(sys.argv[1])
TOOL = os.path.abspath(sys.argv[2])
T0 = time.time()
WORK = tempfile.mkdtemp(prefix="s3_ckpt_")
ENV = dict(os.environ, AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK, AWS_REGION="us-east-1", OMP_NUM_THREADS="1")


def config(name, prefix=None, endpoint=PROXY, **over):
    c = {
        "name": "ckpt",
        "hyperparameters": {"global_batch_size": 16},
        "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True,
                     "max_length": {"batches": 40}},
        "min_validation_period": {"batches": 6},
        "min_checkpoint_period": {"batches": 8},
        "scheduling_unit": 4,
        "checkpoint_storage": {"save_trial_latest": 2, "save_trial_best": 1},
    }
    if prefix is not None:
        c["checkpoint_storage"].update(type="s3", bucket=BUCKET, prefix=prefix, endpoint_url=endpoint)
    c.update(over)
    path = os.path.join(WORK, name + ".json")
    with open(path, "w") as f:
        json.dump(c, f)
    return path


def run(name, cfg, *args, expect=0, out=None, env=None):
    out = out or os.path.join(WORK, name)
    cmd = [TRIAL, "--config", cfg, "--output", out, "--threads", "1", *args]
    p = run_cmd(cmd, None, env=dict(ENV, **(env or {})))
    if p.returncode != expect:
        print(" ".join(cmd), "\n", p.stdout[-3000:], p.stderr[-3000:])
    check(p.returncode == expect, f"{name}: exit code {p.returncode} (want {expect})")
    return p, out


def local(out):
    """{name: metadata.json bytes} of the committed checkpoints on disk."""
    found = {}
    for d in glob.glob(os.path.join(out, "checkpoints", "ckpt-*")):
        m = os.path.join(d, "metadata.json")
        if os.path.exists(m):
            found[os.path.basename(d)] = open(m, "rb").read()
    return found


def stored(prefix):
    """{name: {file: size}} of every ckpt-* under prefix in the store."""
    found, token = {}, None
    while True:
        kw = dict(Bucket=BUCKET, Prefix=prefix + "/")
        if token:
            kw["ContinuationToken"] = token
        r = s3.list_objects_v2(**kw)
        for o in r.get("Contents", []):
            name, _, file = o["Key"][len(prefix) + 1:].partition("/")
            found.setdefault(name, {})[file] = o["Size"]
        if not r.get("IsTruncated"):
            return found
        token = r["NextContinuationToken"]


def final_state(out):
    """state_dict.pth of the checkpoint at 40 on disk."""
    for d in glob.glob(os.path.join(out, "checkpoints", "ckpt-*")):
        meta = json.load(open(os.path.join(d, "metadata.json")))
        if meta["steps_completed"] == 40:
            return torch.load(os.path.join(d, "state_dict.pth"), weights_only=False)
    return None


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def equal_to_ref(name, out):
    got = final_state(out)
    check(got is not None and same(REF, got), f"{name}: the state at 40 equals the run without a store")


# ---- 1: the store mirrors the disk ------------------------------------------------------

_, ref_out = run("ref", config("ref"))
REF = final_state(ref_out)
check(REF is not None, "the reference run's checkpoint at 40")

Plan.set()
p1, out1 = run("mirror", config("mirror", prefix="mirror"))
disk, store = local(out1), stored("mirror")
check(sorted(store) == sorted(disk) and len(disk) in (2, 3),
      f"the store keeps the same checkpoints as the disk ({sorted(store)} vs {sorted(disk)})")
same_meta = all(s3.get_object(Bucket=BUCKET, Key=f"mirror/{n}/metadata.json")["Body"].read() == disk[n] for n in disk)
sizes = all(store[n].get("state_dict.pth") == os.path.getsize(os.path.join(out1, "checkpoints", n, "state_dict.pth"))
            for n in disk)
check(same_meta and sizes, "each with the same metadata.json bytes and state_dict.pth size")
puts = [p for m, p in Plan.seen if m == "PUT"]
order = [p.rsplit("/", 1)[-1] for p in puts]
written = len(re.findall(r"^checkpoint at batch", p1.stdout, re.M))
check(written >= 5 and len(order) == 2 * written and all(order[i] == "state_dict.pth" and order[i + 1] == "metadata.json"
                                                        for i in range(0, len(order), 2)),
      f"every checkpoint written ({written}) uploaded, its state_dict.pth then its metadata.json ({order})")
equal_to_ref("with a store", out1)

# ---- 2: a new machine -----------------------------------------------------------------------

p2, out2 = run("newmachine", config("newmachine", prefix="newmachine"), "--hparam", "stop_at=20")
last = max(int(b) for b in re.findall(r"^checkpoint at batch (\d+)", p2.stdout, re.M))
at = [n for n in stored("newmachine") if n.startswith(f"ckpt-{last:06d}-")]
check(20 <= last < 40 and len(at) == 1,
      f"the stopped run's last checkpoint ({last}) is in the store ({sorted(stored('newmachine'))})")
shutil.rmtree(out2)
p, _ = run("newmachine_resume", config("newmachine", prefix="newmachine"), "--resume", "latest", out=out2)
line = re.search(r"resumed from (\S+) after batch (\d+)", p.stdout)
check(line and line.group(2) == str(last) and line.group(1).startswith(os.path.join(out2, "checkpoints",
                                                                                   f"ckpt-{last:06d}-")),
      f"resumed from the store's checkpoint at {last}, fetched into the empty folder ({line and line.group(0)})")
equal_to_ref("a new machine", out2)

# ---- 3: kill -9 during an upload ---------------------------------------------------------------

# The first checkpoint's metadata.json (the policy's, at 6) goes through, the
# second's (at 8) stalls; the run is killed while it waits.
Plan.set(dict(method="PUT", match="/metadata.json", mode="stall", seconds=20, skip=1, count=1))
out3 = os.path.join(WORK, "killed")
cmd = [TRIAL, "--config", config("killed", prefix="killed"), "--output", out3, "--threads", "1"]
proc = spawn(cmd, ENV)
Plan.hit.wait(60)
time.sleep(0.3)
proc.send_signal(signal.SIGKILL)
wait_or_kill(proc, 30)
names = stored("killed")
partial = [n for n, files in names.items() if "metadata.json" not in files]
whole = [n for n, files in names.items() if "metadata.json" in files]
check(len(partial) == 1 and partial[0].startswith("ckpt-000008-") and names[partial[0]].get("state_dict.pth")
      and len(whole) == 1 and whole[0].startswith("ckpt-000006-"),
      f"killed while uploading 8: the store holds checkpoint 6 and 8's state_dict.pth without metadata.json ({names})")
Plan.set()
p, _ = run("killed_resume", config("killed", prefix="killed"), "--resume", "latest", out=out3)
line = re.search(r"resumed from \S+ after batch (\d+)", p.stdout)
check(line and line.group(1) == "6", f"--resume latest continues from the store's checkpoint at 6, not the "
      f"committed-on-disk 8 the store does not hold ({line and line.group(0)})")
check(partial and partial[0] not in stored("killed"), "and removes what the cut-off upload left")
equal_to_ref("after kill -9 during an upload", out3)

# ---- 4: a store that refuses ------------------------------------------------------------------

Plan.set(dict(method="PUT", match="/refused/", mode="status", status=503))
t = time.time()
p, out4 = run("refused", config("refused", prefix="refused"), expect=1)
err = p.stderr
check(f"s3://{BUCKET}/refused" in err and "after 5 attempts" in err and "503 SlowDown" in err
      and "committed on disk in" in err,
      f"503 on every upload: exit 1 naming the store, the attempts and the disk copy ({err.strip()[-400:]})")
check(len(local(out4)) == 1 and not any("metadata.json" in f for f in stored("refused").values()),
      "the checkpoint is on disk only, none counts in the store")
Plan.set()

# ---- 5: an earlier run's checkpoints in the store ---------------------------------------------

p, _ = run("guard", config("guard", prefix="mirror"), expect=2)
check(f"in s3://{BUCKET}/mirror" in p.stderr and "--overwrite" in p.stderr,
      f"a fresh run over a prefix with checkpoints is refused, naming the store ({p.stderr.strip()[-300:]})")
before = sorted(stored("mirror"))
_, out5 = run("overwrite", config("guard", prefix="mirror"), "--overwrite")
after = sorted(stored("mirror"))
check(not set(before) & set(after) and sorted(local(out5)) == after,
      f"--overwrite replaces them ({before} -> {after})")

# ---- 6: warm start from the store ----------------------------------------------------------------

name = sorted(n for n in stored("newmachine") if n.startswith("ckpt-000040-"))[0]
url = f"s3://{BUCKET}/newmachine/{name}"
# no checkpoint_storage in this run's config: the endpoint from the environment, as boto3 reads it
_, out6a = run("warm_s3", config("warm", prefix=None), "--warm-start", url, env={"AWS_ENDPOINT_URL": PROXY})
_, out6b = run("warm_disk", config("warm", prefix=None), "--warm-start", os.path.join(out2, "checkpoints", name))
a, b = final_state(out6a), final_state(out6b)
check(a is not None and b is not None and same(a, b) and not same(a, REF),
      "--warm-start s3://...: the same run as from the checkpoint on disk")

# ---- 7: stores other than S3 ------------------------------------------------------------------------

p, _ = run("gcs", config("gcs", checkpoint_storage={"type": "gcs", "bucket": "b"}), expect=2)
check("storage.googleapis.com" in p.stderr, f"type gcs: refused naming the S3-compatible way ({p.stderr.strip()})")
p, _ = run("gs_url", config("gsurl"), "--warm-start", "gs://bucket/ckpt-000008-00000000", expect=3)
check("Google Cloud Storage is not supported" in p.stderr and "HMAC" in p.stderr,
      f"a gs:// checkpoint: refused naming the way through S3 ({p.stderr.strip()[-300:]})")

# ---- 8: ctrial-ckpt on s3:// ---------------------------------------------------------------------

FETCHED = tempfile.mkdtemp(prefix="tool_tmp_", dir=WORK)  # the tool's TMPDIR: empty again after each run
TOOL_ENV = dict(ENV, TMPDIR=FETCHED, AWS_ENDPOINT_URL=MOTO)
DISK, URL = os.path.join(out5, "checkpoints"), f"s3://{BUCKET}/mirror"


def tool(*args, expect=0, env=None):
    p = run_cmd([TOOL, *args], None, env=env or TOOL_ENV)
    if p.returncode != expect:
        print("ctrial-ckpt", " ".join(args), "\n", p.stdout[-3000:], p.stderr[-3000:])
    check(p.returncode == expect, f"ctrial-ckpt {' '.join(args)}: exit code {p.returncode} (want {expect})")
    check(os.listdir(FETCHED) == [], f"ctrial-ckpt {' '.join(args)} left nothing in TMPDIR ({os.listdir(FETCHED)})")
    return p


def on_disk_and_in_store(cmd, name=""):
    """ctrial-ckpt CMD on the disk's folder and on the store's prefix: the
    same text once each names the same place FOLDER."""
    d, u = (DISK + name, URL + name)
    a, b = tool(cmd, d).stdout, tool(cmd, u).stdout
    return a.replace(d, "FOLDER"), b.replace(u, "FOLDER")


names = sorted(local(out5))
lines = {}
for cmd in ("list", "latest", "best"):
    a, b = on_disk_and_in_store(cmd)
    lines[cmd] = b
    check(a == b and a.strip(), f"ctrial-ckpt {cmd} s3://: what it says on disk\n{a}---\n{b}")
check(len([ln for ln in lines["list"].splitlines() if ln.startswith("ckpt-")]) == len(names)
      and " latest" in lines["list"] and "best" in lines["list"],
      f"list: every checkpoint, latest and best marked\n{lines['list']}")
latest = lines["latest"].strip().rsplit("/", 1)[-1]
check(latest in names and lines["best"].startswith("FOLDER/ckpt-") and "\tvalidation_loss " in lines["best"],
      f"latest {latest}, best {lines['best'].strip()}")
a, b = on_disk_and_in_store("list", "/" + latest)
check(a == b and "models_state_dict" in a and "== FOLDER/metadata.json" in a,
      f"list of one checkpoint in the store: its metadata and keys as on disk\n{b[:400]}")
p = tool("verify", f"{URL}/{latest}/")
check(p.stdout.strip() == f"{URL}/{latest}: OK", f"verify s3://.../{latest}: {p.stdout.strip()}")
no_env = {k: v for k, v in TOOL_ENV.items() if not k.startswith("AWS_ENDPOINT_URL")}
p = tool("--endpoint-url", PROXY, "latest", URL, env=no_env)
check(p.stdout == tool("latest", URL).stdout, f"--endpoint-url names the store as the environment does ({p.stdout})")

# an upload cut off after its state_dict.pth: no checkpoint, not listed
cut = "ckpt-000099-0badc0de"
s3.put_object(Bucket=BUCKET, Key=f"mirror/{cut}/state_dict.pth", Body=b"\0" * 1000)
for cmd in ("list", "latest", "best"):
    a, b = on_disk_and_in_store(cmd)
    check(a == b == lines[cmd], f"ctrial-ckpt {cmd} s3:// with an upload cut off: unchanged\n{b}")
p = tool("verify", f"{URL}/{cut}", expect=1)
check("no metadata.json there (not a committed checkpoint)" in p.stderr, f"verify of the cut-off: {p.stderr.strip()}")
check(cut in stored("mirror"), "and the store is left as it was (the tool removes nothing)")

# metadata.json without its state_dict.pth: damaged
bad = "ckpt-000098-0badf00d"
s3.copy_object(Bucket=BUCKET, Key=f"mirror/{bad}/metadata.json", CopySource=f"{BUCKET}/mirror/{latest}/metadata.json")
p = tool("list", URL, expect=1)
row = [ln for ln in p.stdout.splitlines() if ln.startswith(bad)]
why = f"damaged: checkpoint {URL}/{bad}: state_dict.pth is missing"
check(row and row[0].endswith(why) and "1 damaged, 0 uncommitted" in p.stdout and why in p.stderr,
      f"a checkpoint without its state_dict.pth is listed as damaged\n{p.stdout}{p.stderr}")
check(tool("latest", URL).stdout == lines["latest"].replace("FOLDER", URL), "latest passes over the damaged one")

stop()
exit_with_report(T0, WORK)
