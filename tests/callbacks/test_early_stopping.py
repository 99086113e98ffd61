"""The stock early-stopping callback (ct_ctx_add_early_stopping) against
Lightning's EarlyStopping fed the same metric sequence.

    test_early_stopping.py ES_TRIAL

For each case es_trial validates after every batch, reporting the case's
sequence as metric "m", for up to len(sequence) batches. Lightning's
EarlyStopping(monitor="m", ...) sees the same values through its
_evaluate_stopping_criteria, as its on_validation_end does. Equal: the
validation at which both stop (or neither), and at the end the state each
saves (wait_count, best_score, patience: Lightning's keys), ctrial's from
its last checkpoint. A run stopped part way and resumed goes on counting
where the checkpoint left it.
"""
import glob
import json
import math
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import check, exit_with_report, run_cmd  # noqa: E402

try:
    from lightning.pytorch.callbacks import EarlyStopping
except ImportError as e:
    print(f"SKIP: lightning is not installed ({e}); tools/setup.sh installs it")
    sys.exit(77)

TRIAL = os.path.abspath(sys.argv[1])
T0 = time.time()
WORK = tempfile.mkdtemp(prefix="early_stopping_")


def config(name, n):
    path = os.path.join(WORK, name + ".json")
    with open(path, "w") as f:
        json.dump({"hyperparameters": {"global_batch_size": 4},
                   "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": n}},
                   "min_validation_period": {"batches": 1}, "min_checkpoint_period": {"batches": 1},
                   "checkpoint_policy": "none",
                   "checkpoint_storage": {"save_trial_latest": 1, "save_trial_best": 0}}, f)
    return path


def lightning(seq, patience=3, min_delta=0.0, mode="min", stop=None, div=None, finite=True):
    """Lightning's decisions: the 1-based validation it stops at (0: none) and its state_dict then."""
    es = EarlyStopping(monitor="m", patience=patience, min_delta=min_delta, mode=mode, stopping_threshold=stop,
                       divergence_threshold=div, check_finite=finite)
    for k, v in enumerate(seq, 1):
        should_stop, _ = es._evaluate_stopping_criteria(torch.tensor(v, dtype=torch.float64))
        if should_stop:
            return k, es.state_dict()
    return 0, es.state_dict()


def ctrial(name, seq, patience=3, min_delta=0.0, mode="min", stop=None, div=None, finite=True, resume=False,
           out=None, n=None):
    out = out or os.path.join(WORK, name)
    args = [TRIAL, "--config", config(name, n or len(seq)), "--output", out, "--threads", "1",
            "--seq", ",".join(repr(float(v)) for v in seq), "--patience", str(patience),
            "--min-delta", repr(min_delta), "--mode", mode]
    args += ["--stop-threshold", repr(stop)] if stop is not None else []
    args += ["--div-threshold", repr(div)] if div is not None else []
    args += [] if finite else ["--no-finite-check"]
    args += ["--resume", "latest"] if resume else []
    p = run_cmd(args, 60, env=dict(os.environ, OMP_NUM_THREADS="1"))
    check(p.returncode == 0, f"{name}: exit 0 ({p.returncode}: {p.stderr.strip()[-300:]})")
    vals = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if '"validation"' in l]
    ckpts = sorted(glob.glob(os.path.join(out, "checkpoints", "ckpt-*")))
    state = torch.load(os.path.join(ckpts[-1], "state_dict.pth"), weights_only=True) if ckpts else {}
    return len(vals), state.get("callbacks", {}).get("early_stopping"), p.stdout


def same_state(a, b):
    return (a is not None and b is not None and a["wait_count"] == b["wait_count"] and
            a["patience"] == b["patience"] and
            (a["best_score"] == float(b["best_score"]) or
             (math.isinf(a["best_score"]) and math.isinf(float(b["best_score"])))))


CASES = [
    ("plateau", [1.0, 0.8, 0.8, 0.81, 0.79, 0.9, 1.2, 0.5], dict(patience=3)),
    ("min_delta", [1.0, 0.95, 0.91, 0.9, 0.7, 0.69, 0.68, 0.67, 0.66], dict(patience=2, min_delta=0.05)),
    ("max", [0.1, 0.3, 0.3, 0.2, 0.35, 0.35, 0.34, 0.33, 0.36], dict(patience=3, mode="max")),
    ("max_delta", [0.1, 0.2, 0.25, 0.26, 0.27, 0.28], dict(patience=2, mode="max", min_delta=0.03)),
    ("nan", [1.0, 0.9, float("nan"), 0.5], dict(patience=5)),
    ("nan_unchecked", [1.0, 0.9, float("nan"), 0.5, 0.6, 0.7, 0.8], dict(patience=2, finite=False)),
    ("threshold", [1.0, 0.6, 0.4, 0.2, 0.1], dict(patience=5, stop=0.3)),
    ("divergence", [1.0, 0.6, 0.9, 5.0, 0.1], dict(patience=5, div=2.0)),
    ("patience0", [1.0, 1.0, 0.5], dict(patience=0)),
    ("never", [5.0, 4.0, 3.0, 2.0, 1.0], dict(patience=1)),
]
for name, seq, kw in CASES:
    want_at, want_state = lightning(seq, **kw)
    got_n, got_state, _ = ctrial(name, seq, **kw)
    want_n = want_at or len(seq)
    check(got_n == want_n, f"{name}: stops after validation {got_n} as Lightning does ({want_at or 'never'})")
    check(same_state(got_state, want_state), f"{name}: checkpointed state {got_state} equals Lightning's "
          f"{ {k: float(v) if hasattr(v, 'item') else v for k, v in want_state.items()} }")

# Stopped part way (max_length 4 of 8), then resumed to 8: the wait counted
# before the checkpoint goes on after it.
seq, kw = [1.0, 0.8, 0.8, 0.81, 0.82, 0.9, 1.2, 0.5], dict(patience=3)
want_at, want_state = lightning(seq, **kw)
check(want_at == 5, f"Lightning stops this one at validation 5 ({want_at})")
out = os.path.join(WORK, "resumed")
first_n, first_state, _ = ctrial("resumed", seq, out=out, n=4, **kw)
check(first_state and first_state["wait_count"] == 2, f"after 4 validations the wait is 2 ({first_state})")
n, state, _ = ctrial("resumed_2", seq, out=out, resume=True, **kw)
check(n == want_at and same_state(state, want_state),
      f"resumed: stops after validation {n} as the uninterrupted run and Lightning ({want_at})")

exit_with_report(T0, WORK)
