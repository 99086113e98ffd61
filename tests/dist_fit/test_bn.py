"""BatchNorm's running statistics across ranks (issue 17): bn_trial under
`mpirun -np 2`, each run with a timeout (a hang is a failure).

The two ranks' shards differ in scale, so their running statistics would
differ. PyTorch's DistributedDataParallel broadcasts rank 0's buffers
before every forward; ctrial gives every rank rank 0's buffers before each
validation (the only place the running statistics are used), so:

1. every reported validation_loss equals the checkpointed (rank 0) model's
   loss on the validation set, evaluated here in PyTorch (1e-6);
2. a run stopped at a checkpoint and resumed on 2 ranks reports the same
   validation lines as the uninterrupted run.

Without the broadcast both fail: rank 1 validates its half with running
statistics from records three times larger (reported 98.0 where the
checkpoint gives 75.4 at batch 15).

    test_bn.py BN_TRIAL

Exits 77 (skipped) without mpirun.
"""
import json
import os
import shutil
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, mpirun_cmd, need_mpirun, run_cmd  # noqa: E402

TRIAL = os.path.abspath(sys.argv[1])
need_mpirun()

WORK = tempfile.mkdtemp(prefix="bn_")

CONFIG = os.path.join(WORK, "bn.json")
with open(CONFIG, "w") as f:  # keep every checkpoint, to evaluate each
    json.dump({"checkpoint_storage": {"save_trial_latest": 100}}, f)


def run(name, *args):
    out = os.path.join(WORK, name)
    cmd = mpirun_cmd(2, [TRIAL, "--config", CONFIG, "--output", out, "--threads", "1",
                         "--hparam", "global_batch_size=8", "--validation-period", "5", "--checkpoint-period", "5",
                         "--checkpoint-policy", "none", *args], oversubscribe=False)
    code, text, _ = run_cmd(cmd, 90, env=dict(os.environ, OMP_NUM_THREADS="1"), merge=True)
    check(code == 0, f"{name}: exit code {code}")
    if code != 0:
        print(text)
    return out


def validations(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [json.loads(l) for l in f if '"validation"' in l]


def model_of(ckpt):
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    state = torch.load(os.path.join(ckpt, "state_dict.pth"), weights_only=True)
    net.load_state_dict(state["models_state_dict"][0])
    return net.eval()


out = run("straight", "--max-length", "20")
x, y = torch.load(os.path.join(out, "val.pth"), weights_only=True)
ckpts = {json.load(open(os.path.join(out, "checkpoints", d, "metadata.json")))["steps_completed"]:
         os.path.join(out, "checkpoints", d) for d in os.listdir(os.path.join(out, "checkpoints"))}
lines = validations(out)
check([l["batches"] for l in lines] == [5, 10, 15, 20], f"validations at 5, 10, 15, 20: {[l['batches'] for l in lines]}")
for line in lines:
    b = line["batches"]
    if b not in ckpts:
        check(False, f"a checkpoint at {b}")
        continue
    with torch.no_grad():
        net = model_of(ckpts[b])
        # The reported metric is the mean over the 8 validation batches of 4
        # (4 on each rank): with equal batches, the mean over the records.
        want = torch.nn.functional.mse_loss(net(x), y).item()
    got = line["metrics"]["validation_loss"]
    check(abs(got - want) <= 1e-6 * max(1.0, abs(want)),
          f"validation at {b}: reported {got:.8f} = the checkpointed model's loss on the validation set {want:.8f}")

stopped = run("stopped", "--max-length", "10")
shutil.copytree(stopped, os.path.join(WORK, "resumed"))
resumed = run("resumed", "--max-length", "20", "--resume", "latest")
a = [(l["batches"], l["metrics"]["validation_loss"]) for l in validations(out)]
b = [(l["batches"], l["metrics"]["validation_loss"]) for l in validations(resumed)]
check(a == b, f"resumed at 10 on 2 ranks: the same validation lines as the uninterrupted run: {a} vs {b}")

shutil.rmtree(WORK, ignore_errors=True)
print(f"{len(FAILURES)} failed" if FAILURES else "all passed")
sys.exit(1 if FAILURES else 0)
