#!/usr/bin/env python3
"""The Optuna side of bench/search: Optuna's RandomSampler driving a plain
PyTorch training loop of examples/mnist's MLP, one study, in this process.

    optuna_search.py --space JSON --trials 16 --epochs 64 --seed S [--threads 1]
                     [--data examples/data/digits] [--n-jobs 1]
                     [--journal FILE --study NAME --worker K --workers N]

--space is the experiment config's `hyperparameters` as JSON (run.py reads
it from digits_mlp_random.yaml), in Determined's forms: a constant, or
{"type": "int" | "double" | "log" | "categorical" | "const", ...}. Each is
asked of Optuna as the same distribution:

  int           trial.suggest_int(name, minval, maxval)           both ends included, as Determined
  double        trial.suggest_float(name, minval, maxval)         uniform
  log           trial.suggest_float(name, base**minval, base**maxval, log=True)
                (Determined draws base**uniform(minval, maxval): the same log-uniform law)
  categorical   trial.suggest_categorical(name, vals)
  const / a value                                                  passed through

The trial (objective) is examples/mnist's MLP as bench/compare trains it
(common.digits_mlp: Flatten, Linear(64, hidden), ReLU, Dropout(dropout2),
Linear(hidden, 10)), Adam(lr=learning_rate), cross-entropy with
label_smoothing, StepLR(step_size=1, gamma=lr_gamma) stepped each epoch
(only built when lr_gamma != 1), batches of global_batch_size drawn in
Determined's order (torch_eager.Shuffled: numpy RandomState(trial seed)
shuffles of all indices, passes back to back), 47 batches an epoch for the
1,500 digits (ceil(1500 / 32), as ctrial's loader length), and after each
epoch a validation pass over the 297 validation digits in batches of 32
(model.eval(), torch.no_grad()): the fraction right. The objective returns
the last validation's accuracy (what Determined's searchers rank a trial
by); the best one of the trial goes in its user attribute "max_accuracy".

Seeds: trial k (Optuna's trial.number) gets the seed
numpy.random.RandomState(S).randint(0, 2**31 - 1, size=1024)[k];
torch.manual_seed(it) before the model is built (its weights, then the
dropout masks) and the data order from it, as ctrial seeds a trial from its
trial seed. The sampler is RandomSampler(seed=S) (one process), or
RandomSampler(seed=S * 1000 + K) in worker K of N processes (the same seed
in every worker would draw the same points in each).

Parallel: --n-jobs J runs J trials at once in threads of this process
(study.optimize(n_jobs=J); they share the GIL). --journal FILE --study NAME
--worker K --workers N makes this process one of N that share the study in
an Optuna JournalStorage file (Optuna's documented multi-process set-up):
each takes the next trial number from the storage until there are --trials
of them (a worker that draws number >= --trials stops its study there), so
the N processes share the trials as ctrial's ranks do, whatever each trial
costs.

Prints one JSON line: {"best_value", "best_any", "trials": [{"number",
"params", "value", "max_accuracy", "seconds", "seed"}], "optimize_s",
"import_s", "threads", "optuna", "torch"}; with --journal only this
worker's trials.
"""
import time

T_START = time.monotonic()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import optuna  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "compare"))
import common  # noqa: E402  (bench/compare: digits_mlp; it puts bench/gpu on sys.path)
import torch_eager as te  # noqa: E402  (bench/gpu: read_idx, idx_file, Shuffled)

IMPORT_S = time.monotonic() - T_START


def suggest(trial, space):
    """The hyperparameters of one trial: Determined's forms asked of Optuna."""
    hp = {}
    for name, spec in sorted(space.items()):
        if not isinstance(spec, dict) or "type" not in spec:
            hp[name] = spec  # a constant (Determined: a plain value)
            continue
        kind = spec["type"]
        if kind == "const":
            hp[name] = spec["val"]
        elif kind == "int":
            hp[name] = trial.suggest_int(name, int(spec["minval"]), int(spec["maxval"]))
        elif kind == "double":
            hp[name] = trial.suggest_float(name, float(spec["minval"]), float(spec["maxval"]))
        elif kind == "log":
            base = float(spec.get("base", 10.0))
            hp[name] = trial.suggest_float(name, base ** float(spec["minval"]), base ** float(spec["maxval"]), log=True)
        elif kind == "categorical":
            hp[name] = trial.suggest_categorical(name, spec["vals"])
        else:
            raise SystemExit(f"optuna_search.py: hyperparameter {name}: type {kind!r} not handled")
    return hp


class Digits:
    """The digits in memory, loaded once per process (as an Optuna user
    would, outside the objective): [n, 1, h, w] floats in [0, 1] (ToTensor)
    and int64 labels, training and validation splits."""

    def __init__(self, folder):
        def split(prefix):
            x = te.read_idx(te.idx_file(folder, f"{prefix}-images-idx3-ubyte"))
            y = te.read_idx(te.idx_file(folder, f"{prefix}-labels-idx1-ubyte"))
            return (x.float() / 255).unsqueeze(1), y.long()

        self.x, self.y = split("train")
        self.vx, self.vy = split("t10k")


def validate(model, data, batch):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(data.vx), batch):
            out = model(data.vx[i:i + batch])
            correct += int((out.argmax(1) == data.vy[i:i + batch]).sum())
    model.train()
    return correct / len(data.vx)


def train_trial(hp, data, epochs, seed):
    """One trial: the MLP trained `epochs` epochs, validated after each.
    Returns the validation accuracies, one per epoch."""
    batch = int(hp["global_batch_size"])
    torch.manual_seed(seed)
    model = common.digits_mlp(hp, data.x.shape[2], data.x.shape[3])
    opt = torch.optim.Adam(model.parameters(), lr=hp["learning_rate"])
    gamma = hp.get("lr_gamma", 1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=gamma) if gamma != 1.0 else None
    smoothing = hp.get("label_smoothing", 0.0)
    order = te.Shuffled(len(data.x), batch, seed)
    per_epoch = math.ceil(len(data.x) / batch)
    model.train()
    accuracies = []
    for _ in range(epochs):
        for _ in range(per_epoch):
            i = order.next()
            out = model(data.x[i])
            loss = F.cross_entropy(out, data.y[i], label_smoothing=smoothing)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if sched is not None:
            sched.step()
        accuracies.append(validate(model, data, batch))
    return accuracies


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--space", required=True, help="the config's hyperparameters, as JSON")
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (intra-op)")
    ap.add_argument("--data", default=os.path.join(ROOT, "examples", "data", "digits"))
    ap.add_argument("--n-jobs", type=int, default=1, help="study.optimize(n_jobs=...): threads of this process")
    ap.add_argument("--journal", help="a JournalStorage file shared by --workers processes")
    ap.add_argument("--study", default="digits_mlp_random")
    ap.add_argument("--worker", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = json.loads(a.space)
    data = Digits(a.data)
    seeds = np.random.RandomState(a.seed).randint(0, 2**31 - 1, size=max(1024, a.trials))
    records = []

    def objective(trial):
        if trial.number >= a.trials:  # --journal: the other workers took the last trials
            trial.study.stop()
            raise optuna.TrialPruned()
        hp = suggest(trial, space)
        seed = int(seeds[trial.number])
        t0 = time.monotonic()
        accuracies = train_trial(hp, data, a.epochs, seed)
        trial.set_user_attr("max_accuracy", max(accuracies))
        records.append({"number": trial.number, "params": trial.params, "value": accuracies[-1],
                        "max_accuracy": max(accuracies), "seconds": time.monotonic() - t0, "seed": seed})
        return accuracies[-1]

    if a.journal:
        from optuna.storages.journal import JournalFileBackend, JournalStorage
        storage = JournalStorage(JournalFileBackend(a.journal))
        sampler = optuna.samplers.RandomSampler(seed=a.seed * 1000 + a.worker)
        study = optuna.create_study(study_name=a.study, storage=storage, direction="maximize", sampler=sampler,
                                    load_if_exists=True)
        n_trials = a.trials  # an upper bound: the objective stops the study at number --trials
    else:
        study = optuna.create_study(study_name=a.study, direction="maximize",
                                    sampler=optuna.samplers.RandomSampler(seed=a.seed))
        n_trials = a.trials
    t0 = time.monotonic()
    study.optimize(objective, n_trials=n_trials, n_jobs=a.n_jobs)
    optimize_s = time.monotonic() - t0

    mine = sorted(records, key=lambda r: r["number"])
    out = {
        "system": "optuna", "worker": a.worker, "workers": a.workers, "n_jobs": a.n_jobs,
        "best_value": max((r["value"] for r in mine), default=None),
        "best_any": max((r["max_accuracy"] for r in mine), default=None),
        "trials": mine, "optimize_s": optimize_s, "import_s": IMPORT_S,
        "process_s": time.monotonic() - T_START, "threads": torch.get_num_threads(),
        "optuna": optuna.__version__, "torch": torch.__version__,
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
