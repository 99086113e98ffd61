"""Runs an example through ct_main and checks what it reports.

    check_example.py EXE CONFIG CHECK [ARG] [-- EXTRA_FLAGS...]

EXE runs from the source tree (the configs name examples/data/digits
relative to it) with --config CONFIG --output <build>/tests/examples/<name>
--quiet, then CHECK reads OUTPUT/metrics.jsonl:

    onevar            every report is the OneVar fixture's exact number:
                      validation after k batches 0.998^(2k) (1e-6), training
                      loss the workload's mean of 0.998^(2j), weight 1-0.998^k
    accuracy MIN      the final validation_accuracy is >= MIN
    finite KEYS       every training report has finite values for the
                      comma-separated KEYS, and training reached max_length
    config-error KEY  the run exits 2 (bad config) and stderr names KEY
    search N MIN      a search: OUTPUT/experiment.jsonl ends with
                      experiment_completed for N trials, each closed once,
                      whose best validation_accuracy is >= MIN and whose best
                      checkpoint exists
"""
import json
import math
import os
import shutil
import subprocess
import sys
import time


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(exe, config, name, extra):
    out = os.path.join(os.environ["CTRIAL_BUILD_DIR"], "tests", "examples", name)
    shutil.rmtree(out, ignore_errors=True)
    cmd = [exe, "--config", config, "--output", out, "--quiet"] + extra
    print("$", " ".join(cmd))
    start = time.monotonic()
    p = subprocess.run(cmd, cwd=os.environ["CTRIAL_SOURCE_DIR"], capture_output=True, text=True)
    secs = time.monotonic() - start
    sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    print(f"exit code {p.returncode} after {secs:.1f} s")
    return p, out, secs


def reports(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    train = [r for r in lines if r["group"] == "training"]
    val = [r for r in lines if r["group"] == "validation"]
    if not val:
        fail("no validation report in metrics.jsonl")
    return train, val


def near(what, got, want, tol):
    ok = got is not None and abs(got - want) <= tol
    print(f"{'ok ' if ok else 'BAD'} {what}: {got!r} (want {want:.9f} +- {tol:g})")
    return ok


def check_onevar(out):
    train, val = reports(out)
    ok = True
    for r in val:
        k = r["batches"]
        ok &= near(f"validation_loss after {k} batches", r["metrics"]["validation_loss"], 0.998 ** (2 * k), 1e-6)
        ok &= near(f"weight after {k} batches", r["metrics"]["weight"], 1 - 0.998 ** k, 1e-6)
    prev = 0
    for r in train:
        k = r["batches"]
        want = sum(0.998 ** (2 * j) for j in range(prev, k)) / (k - prev)
        ok &= near(f"training loss of batches {prev + 1}..{k}", r["metrics"]["loss"], want, 1e-6)
        prev = k
    last = val[-1]
    if last["batches"] != 100:
        fail(f"the last validation is after {last['batches']} batches, expected 100 (searcher.max_length)")
    ok &= near("final validation_loss = 0.998^(2*100)", last["metrics"]["validation_loss"], 0.998 ** 200, 1e-6)
    if not ok:
        fail("OneVar's numbers differ from the fixture's")


def check_accuracy(out, minimum):
    _, val = reports(out)
    acc = val[-1]["metrics"]["validation_accuracy"]
    print("validation_accuracy by validation:", " ".join(f"{r['metrics']['validation_accuracy']:.4f}" for r in val))
    if acc is None or acc < minimum:
        fail(f"final validation_accuracy {acc} is below {minimum}")
    print(f"final validation_accuracy {acc:.4f} >= {minimum} after {val[-1]['batches']} batches")


def check_finite(out, keys, config):
    train, val = reports(out)
    for r in train:
        for k in keys:
            v = r["metrics"].get(k)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                fail(f"training report at batch {r['batches']}: {k} is {v!r}")
    with open(config) as f:
        max_length = json.load(f)["searcher"]["max_length"]
    last = train[-1]
    if "epochs" in max_length:
        reached = abs(last["epochs"] - max_length["epochs"]) < 1e-9
    else:
        reached = last["batches"] == max_length["batches"]
    if not reached:
        fail(f"training stopped at {last['batches']} batches ({last['epochs']} epochs), short of {max_length}")
    print(f"{len(train)} training reports with finite {', '.join(keys)}; ended at {last['batches']} batches;",
          "last validation:", val[-1]["metrics"])


def check_search(out, trials, minimum):
    with open(os.path.join(out, "experiment.jsonl")) as f:
        events = [json.loads(l) for l in f if l.strip()]
    last = events[-1]
    if last["event"] != "experiment_completed" or last["trials"] != trials or last["errored"] != 0:
        fail(f"the search did not complete {trials} trials without error: {last}")
    closed = sorted(e["trial"] for e in events if e["event"] in ("trial_completed", "trial_stopped"))
    if closed != list(range(1, trials + 1)):
        fail(f"trials closed: {closed}, expected each of 1..{trials} once")
    if last["best_metric"] < minimum or not os.path.isdir(last["best_checkpoint"] or ""):
        fail(f"best trial {last['best_trial']}: {last['best_metric']} (want >= {minimum}), "
             f"checkpoint {last['best_checkpoint']}")
    print(f"{trials} trials; best trial {last['best_trial']} at {last['best_metric']:.4f} >= {minimum};",
          f"checkpoint {last['best_checkpoint']}")


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        extra = args[args.index("--") + 1:]
        args = args[: args.index("--")]
    exe, config, check = args[0], args[1], args[2]
    name = os.path.basename(exe) + "_" + os.path.splitext(os.path.basename(config))[0] + "_" + check
    if check == "config-error":
        key = args[3]
        p, _, _ = run(exe, config, name, extra)
        if p.returncode != 2:
            fail(f"exit code {p.returncode}, expected 2 (bad config)")
        if key not in p.stderr:
            fail(f"stderr does not name '{key}'")
        print(f"exit code 2 and the key '{key}' named")
        return
    p, out, secs = run(exe, config, name, extra)
    if p.returncode != 0:
        fail(f"exit code {p.returncode}")
    if check == "onevar":
        check_onevar(out)
    elif check == "accuracy":
        check_accuracy(out, float(args[3]))
        print(f"trained and validated in {secs:.1f} s")
    elif check == "search":
        check_search(out, int(args[3]), float(args[4]))
    elif check == "finite":
        check_finite(out, args[3].split(","), os.path.join(os.environ["CTRIAL_SOURCE_DIR"], config))
    else:
        fail(f"unknown check {check}")


if __name__ == "__main__":
    main()
