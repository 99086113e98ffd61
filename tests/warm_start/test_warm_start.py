"""Warm starts from Determined's checkpoints (and ctrial's), against torch 2.11.

Python trains a small model (Linear(4, 8) -> ReLU -> Linear(8, 3), Adam,
StepLR(2, 0.5)) for a few steps and writes a checkpoint directory exactly as
Determined's PyTorchTrial._save does: state_dict.pth (models, optimizers, LR
schedulers, callbacks, rng_state with torch's, numpy's and Python's states),
trial_state.pkl, load_data.json and metadata.json. warm_start_trial (the same
model in C) warm-starts from it:

    test_warm_start.py WARM_START_TRIAL direct   cti_context_warm_start itself
    test_warm_start.py WARM_START_TRIAL fit      through ct_fit (opts.warm_start)

direct: the loaded weights, the optimizer's state (exp_avg, exp_avg_sq,
step, hyperparameters, lr) and the scheduler's equal Python's bit for bit;
the console line says what was loaded and skipped; Determined's older
layouts (model_state_dict / optimizer_state_dict / lr_scheduler) and
locations (determined/, pedl/, checkpoint.pt), DistributedDataParallel's
"module." prefix, a grad scaler; and every refusal is CT_ECHECKPOINT naming
the directory, the entry and the problem.

fit: ct_fit with opts.warm_start: the first batch is batch 0 (no position
restored), the trial holds Python's state when it runs, the console line is
printed once, metrics.jsonl starts at batch 1; and a ctrial checkpoint that
run wrote warm-starts the next run the same way.
"""

import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch import nn

TOOL, MODE = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="ct_warm_")


def path(*parts):
    return os.path.join(TMP, *parts)


# ---- Python's side --------------------------------------------------------------------------


def trained(hidden=8, steps=3):
    """A model, Adam and StepLR after `steps` steps, from a fixed seed."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return model, opt, sched


def determined_save(d, model, opt, sched, *, old_layout=False, where="state_dict.pth", change=None):
    """The directory PyTorchTrial._save writes (determined/pytorch/_pytorch_trial.py)."""
    os.makedirs(os.path.dirname(os.path.join(d, where)), exist_ok=True)
    np.random.seed(1)
    random.seed(2)
    np.random.standard_normal()  # numpy's state with a cached gaussian
    rng_state = {
        "cpu_rng_state": torch.random.get_rng_state(),
        "np_rng_state": np.random.get_state(),
        "random_rng_state": random.getstate(),
    }
    if old_layout:  # the keys _load still reads from older checkpoints
        checkpoint = {"model_state_dict": model.state_dict(), "optimizer_state_dict": opt.state_dict(),
                      "lr_scheduler": sched.state_dict(), "callbacks": {}, "rng_state": rng_state}
    else:
        checkpoint = {
            "models_state_dict": [model.state_dict()],
            "optimizers_state_dict": [opt.state_dict()],
            "lr_schedulers_state_dict": [sched.state_dict()],
            "callbacks": {"counter": {"batches": np.int64(3)}},
            "rng_state": rng_state,
        }
    if change:
        change(checkpoint)
    torch.save(checkpoint, os.path.join(d, where))
    with open(os.path.join(d, "trial_state.pkl"), "wb") as f:
        pickle.dump({"trial_id": 7, "last_ckpt": 3, "step_id": 0, "last_val": 0, "batches_trained": 3,
                     "epochs_trained": 0}, f)
    with open(os.path.join(d, "load_data.json"), "w") as f:
        json.dump({"trial_type": "PyTorchTrial", "experiment_config": {"searcher": {"name": "single"}},
                   "hparams": {"global_batch_size": 4}, "trial_cls_spec": "model_def:Trial", "is_trainer": True}, f)
    with open(os.path.join(d, "metadata.json"), "w") as f:
        json.dump({"determined_version": "0.38.0", "steps_completed": 3, "framework": f"torch-{torch.__version__}",
                   "format": "pickle"}, f, indent=2)
    return d


# ---- running the C side ---------------------------------------------------------------------


def run(d, out, hparams=None, output_dir=None):
    """warm_start_trial MODE d out ...: (returncode, stdout, stderr)."""
    args = [TOOL, MODE, d, out] + ([output_dir] if MODE == "fit" else []) + ([json.dumps(hparams)] if hparams else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def load_ok(d, hparams=None, tag="out"):
    out = path(f"{tag}.pth")
    outdir = path(f"{tag}_output")
    rc, stdout, stderr = run(d, out, hparams, outdir)
    assert rc == 0, f"{d}: exit {rc}: {stderr}"
    return torch.load(out, weights_only=True), stdout, outdir


def refused(d, needle, hparams=None, tag="refused"):
    rc, stdout, stderr = run(d, path(f"{tag}.pth"), hparams, path(f"{tag}_output"))
    lines = stderr.splitlines()
    assert rc == 3 and lines and lines[0] == "CT_ECHECKPOINT", f"{d}: expected CT_ECHECKPOINT, got {rc}: {stderr}"
    message = "\n".join(lines[1:])
    assert needle in message, f"{d}: expected {needle!r} in {message!r}"
    assert os.path.basename(d.rstrip("/")) in message, f"the message does not name {d}: {message}"
    assert "warm start from" not in stdout, f"{d}: a refused warm start printed {stdout!r}"


# ---- comparisons ----------------------------------------------------------------------------


def same_tensor(a, b, what):
    assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor), f"{what}: {type(a)} vs {type(b)}"
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    assert torch.equal(a.view(-1).view(torch.uint8) if a.numel() else a, b.view(-1).view(torch.uint8) if b.numel()
                       else b), f"{what}: {a} vs {b}"


def check_state(got, model, opt, sched, what):
    """What the C trial holds equals Python's model, optimizer and scheduler, bit for bit."""
    want = model.state_dict()
    assert list(got["model"]) == list(want), f"{what}: model keys {list(got['model'])}"
    for k in want:
        same_tensor(got["model"][k], want[k], f"{what}: model {k}")
    o, w = got["optimizer"], opt.state_dict()
    assert sorted(o["state"]) == sorted(w["state"]), f"{what}: optimizer state for {sorted(o['state'])}"
    for i in w["state"]:
        assert sorted(o["state"][i]) == sorted(w["state"][i]), f"{what}: state[{i}] keys {sorted(o['state'][i])}"
        for k, v in w["state"][i].items():
            same_tensor(o["state"][i][k], v, f"{what}: optimizer state[{i}][{k}]")
    for gc, gw in zip(o["param_groups"], w["param_groups"]):
        for k in ("lr", "betas", "eps", "weight_decay", "amsgrad", "initial_lr", "params"):
            assert gc[k] == gw[k] or (isinstance(gw[k], tuple) and list(gc[k]) == list(gw[k])), \
                f"{what}: param_groups {k}: {gc[k]} vs {gw[k]}"
    assert got["lr"] == opt.param_groups[0]["lr"] == 0.005, f"{what}: lr {got['lr']}"
    if sched is not None:
        s, w = got["scheduler"], sched.state_dict()
        for k in ("last_epoch", "base_lrs", "_last_lr", "_step_count", "step_size", "gamma"):
            assert s[k] == w[k], f"{what}: scheduler {k}: {s[k]} vs {w[k]}"


def line_of(stdout, d):
    lines = [ln for ln in stdout.splitlines() if ln.startswith("warm start from ")]
    assert len(lines) == 1, f"{d}: expected one warm start line, got {stdout!r}"
    return lines[0]


# ---- the tests ------------------------------------------------------------------------------


def test_determined():
    model, opt, sched = trained()
    d = determined_save(path("det"), model, opt, sched)
    got, stdout, outdir = load_ok(d)
    check_state(got, model, opt, sched, d)
    assert line_of(stdout, d) == (f"warm start from {d}: 1 model, 1 optimizer, 1 scheduler; "
                                  "skipped callbacks, rng_state, trial_state.pkl"), stdout
    if MODE == "fit":
        # No position restored: the first batch is batch 0 and sees Python's state.
        assert got["first_batch"] == 0 and got["initial_batch"] == 0, (got["first_batch"], got["initial_batch"])
        with open(os.path.join(outdir, "metrics.jsonl")) as f:
            first = json.loads(f.readline())
        assert first["group"] == "training" and first["batches"] == 1, first
        # A checkpoint that run wrote (ctrial's own layout) warm-starts the next run.
        ckpts = os.path.join(outdir, "checkpoints")
        ck = os.path.join(ckpts, sorted(os.listdir(ckpts))[-1])
        sd = torch.load(os.path.join(ck, "state_dict.pth"), weights_only=True)
        got2, stdout2, _ = load_ok(ck, tag="from_ctrial")
        assert got2["first_batch"] == 0
        for k, v in sd["models_state_dict"][0].items():
            same_tensor(got2["model"][k], v, f"{ck}: model {k}")
        assert line_of(stdout2, ck) == (f"warm start from {ck}: 1 model, 1 optimizer, 1 scheduler; "
                                        "skipped callbacks, rng_state, metadata.json trial_state"), stdout2


def test_layouts():
    """Determined's older keys and locations, DDP's prefix, a scaler."""
    if MODE != "direct":
        return
    model, opt, sched = trained()
    for where in ("determined/state_dict.pth", "pedl/state_dict.pth", "checkpoint.pt"):
        d = determined_save(path("old_" + where.split("/")[0].replace(".", "_")), model, opt, sched,
                            old_layout=True, where=where)
        got, stdout, _ = load_ok(d)
        check_state(got, model, opt, sched, d)
        assert line_of(stdout, d) == (f"warm start from {d} ({where}): 1 model, 1 optimizer, 1 scheduler; "
                                      "skipped callbacks, rng_state, trial_state.pkl"), stdout
    # state_dict.pth comes first when several are there (Determined's order).
    d = determined_save(path("both"), model, opt, sched)
    determined_save(d, *trained(hidden=5), where="determined/state_dict.pth")
    got, stdout, _ = load_ok(d)
    check_state(got, model, opt, sched, d)

    def ddp(c):
        c["models_state_dict"][0] = {"module." + k: v for k, v in c["models_state_dict"][0].items()}
    d = determined_save(path("ddp"), model, opt, sched, change=ddp)
    got, _, _ = load_ok(d)
    check_state(got, model, opt, sched, d)

    scaler = {"scale": 512.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
              "_growth_tracker": 7}

    def with_scaler(c):
        c["scaler_state_dict"] = scaler
    d = determined_save(path("scaler"), model, opt, sched, change=with_scaler)
    got, stdout, _ = load_ok(d, {"amp": True})
    check_state(got, model, opt, sched, d)
    assert got["scaler"]["scale"] == 512.0 and got["scaler"]["_growth_tracker"] == 7, got["scaler"]
    assert line_of(stdout, d) == (f"warm start from {d}: 1 model, 1 optimizer, 1 scheduler, the grad scaler; "
                                  "skipped callbacks, rng_state, trial_state.pkl"), stdout
    # A trial without AMP leaves the scaler's state, and says so.
    got, stdout, _ = load_ok(d)
    check_state(got, model, opt, sched, d)
    assert "scaler" not in got
    assert line_of(stdout, d).endswith("skipped callbacks, rng_state, scaler_state_dict, trial_state.pkl"), stdout


class Custom:
    """A callback's state that is a Python object: torch.load(weights_only=True) refuses it, so does ctrial."""


def test_refusals():
    if MODE != "direct":
        return
    model, opt, sched = trained()
    refused(path("nowhere"), "no such directory", tag="r_nowhere")
    os.makedirs(path("empty"))
    open(path("empty", "metadata.json"), "w").write("{}")
    refused(path("empty"), "no state_dict.pth (nor determined/state_dict.pth, pedl/state_dict.pth or "
                           "checkpoint.pt)", tag="r_empty")
    d = determined_save(path("det_r"), model, opt, sched)
    refused(d, "model 0: ", {"hidden": 16}, tag="r_shape")
    refused(d, "0.weight", {"hidden": 16}, tag="r_shape2")
    refused(d, "'lr_schedulers_state_dict' holds 1 LR schedulers, the trial has 0", {"schedulers": 0},
            tag="r_count")

    def two_optimizers(c):
        c["optimizers_state_dict"].append(c["optimizers_state_dict"][0])
    refused(determined_save(path("two_opts"), model, opt, sched, change=two_optimizers),
            "'optimizers_state_dict' holds 2 optimizers, the trial has 1", tag="r_two")

    def both_keys(c):
        c["model_state_dict"] = c["models_state_dict"][0]
    refused(determined_save(path("both_keys"), model, opt, sched, change=both_keys),
            "it holds both 'models_state_dict' and 'model_state_dict'", tag="r_both")

    def no_scheds(c):
        del c["lr_schedulers_state_dict"]
    refused(determined_save(path("no_scheds"), model, opt, sched, change=no_scheds),
            "it has no 'lr_schedulers_state_dict' (nor 'lr_scheduler'), the trial has 1 scheduler", tag="r_nosch")

    def not_a_list(c):
        c["models_state_dict"] = c["models_state_dict"][0]
    refused(determined_save(path("not_list"), model, opt, sched, change=not_a_list),
            "'models_state_dict' is a dict, not a list", tag="r_notlist")

    def bad_optimizer(c):
        c["optimizers_state_dict"][0]["state"][0]["exp_avg"] = torch.zeros(2)
    refused(determined_save(path("bad_opt"), model, opt, sched, change=bad_optimizer), "optimizer 0: ",
            tag="r_badopt")

    def python_object(c):
        c["callbacks"]["mine"] = Custom()
    refused(determined_save(path("custom"), model, opt, sched, change=python_object),
            "refuses global '__main__.Custom'", tag="r_custom")
    os.makedirs(path("top_list"))
    torch.save([model.state_dict()], path("top_list", "state_dict.pth"))
    refused(path("top_list"), "the file holds a list, not a dict of state dicts", tag="r_top")
    os.makedirs(path("garbage"))
    open(path("garbage", "state_dict.pth"), "w").write("not a zip archive at all, just text")
    refused(path("garbage"), "state_dict.pth", tag="r_garbage")


def main():
    tests = [test_determined, test_layouts, test_refusals]
    failed = 0
    for t in tests:
        try:
            t()
            print(f"ok   {t.__name__} ({MODE})")
        except AssertionError as e:
            failed += 1
            print(f"FAIL {t.__name__} ({MODE}): {e}")
    shutil.rmtree(TMP, ignore_errors=True)
    print(f"{len(tests) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
