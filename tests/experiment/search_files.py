"""Reading a search's folder, for the two search drivers: its events, what
it decided (clock readings and the slowed-down runs' sleep_ms left out),
and each trial's metrics.jsonl."""
import json
import os


def events(out):
    """experiment.jsonl's events, in order."""
    return [json.loads(line) for line in open(os.path.join(out, "experiment.jsonl"))]


def outcome(out):
    """What a search decided, without clock readings: each trial event's
    name, trial, length, batches, metric and hyperparameters, in order."""
    keep = ("event", "trial", "length", "batches", "metric", "metrics", "hparams", "trial_seed", "from",
            "best_metric", "best_trial", "best_hparams")
    got = [{k: e[k] for k in keep if k in e} for e in events(out)
           if e["event"] not in ("experiment_started", "experiment_resumed", "experiment_stopped")]
    for e in got:  # the slowed-down runs' only difference
        for k in ("hparams", "best_hparams"):
            if k in e:
                e[k] = {n: v for n, v in e[k].items() if n != "sleep_ms"}
    return got


def per_trial(evs):
    """Each trial's events in their order (a stable sort): under mpirun the
    trials of a round report together, so only the file's interleaving
    differs from one process's."""
    return sorted(evs, key=lambda e: e.get("trial", 1 << 30))


def metrics(path):
    """A metrics.jsonl without clock readings."""
    lines = [json.loads(line) for line in open(path)]
    for line in lines:
        del line["time"]
        line.pop("timings", None)
    return lines


def trial_logs(out):
    """{trial id: its metrics.jsonl lines} of a search folder."""
    d = os.path.join(out, "trials")
    return {t: metrics(os.path.join(d, t, "metrics.jsonl")) for t in sorted(os.listdir(d))}
