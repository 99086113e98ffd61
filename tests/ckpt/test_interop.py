"""ctrial checkpoints and PyTorch, both ways (docs/design.md, "Contracts").

    test_interop.py CKPT_TRIAL

CKPT_TRIAL is tests/ckpt/ckpt_trial.c built (ct_main). Python writes the
records (data.pth: x float32 [240, 8], y int64 [240]); ckpt_trial runs on
them with shuffle false, dropout 0, global_batch_size 16 and one training
report per batch, so metrics.jsonl has batch b's loss at batches = b + 1.
Training batches come, as in Determined (shuffle -> repeat -> shard ->
batch), from the endless stream of the first 180 records: batch b is the
records 16b .. 16b + 15 modulo 180, so batch 11 is 176..179 and 0..11
(an epoch is 12 batches, ctrial's epoch_len, but no batch is short).

1. Python continues a ctrial checkpoint: the checkpoint after K = 10 batches
   loads, with torch.load(weights_only=True), into nn.Sequential + Adam +
   StepLR built the way a Python trial builds them (load_state_dict on each);
   Python trains batches K..29 and every loss and lr equals ctrial's own
   continuation (1e-6), and the weights, Adam state and StepLR state after 30
   equal ctrial's checkpoint at 30. The optimizer's and scheduler's state
   dicts have the layout of Python's own after K batches (same keys, types,
   values: step tensors, initial_lr, last_epoch, _step_count, _last_lr).
2. Python warm-starts ctrial: Python trains from its own init, saves
   model.state_dict() with torch.save; ckpt_trial loads it (hparam
   warm_start) with a fresh Adam + StepLR, and Python continues from the same
   file the same way: the 24 per-batch losses agree (1e-6).
3. Loading for use: `ckpt_trial predict DIR` (ct_load_trial_from_checkpoint,
   eval mode) prints the same outputs for the first 4 records as the Python
   model loaded from DIR/state_dict.pth (1e-6).
4. The structure Python sees: the five keys, lists of one entry,
   callbacks {"counter": {"batches": K}}, rng_state.cpu_rng_state a uint8
   tensor as long as torch.get_rng_state() (and torch.set_rng_state takes
   it), metadata.json's steps_completed and its files' size and CRC-32 (zlib)
   match the files on disk.

Work files go to $CTRIAL_BUILD_DIR/tests/ckpt/interop (kept for a look after
a failure). Every difference is printed with the batch, key and values; the
script exits 1 if there was any.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import zlib

import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)

EXE = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(os.path.join(os.environ.get("CTRIAL_BUILD_DIR", "."), "tests", "ckpt", "interop"))
N, FEATURES, CLASSES, HIDDEN = 240, 8, 3, 16
B, LR, STEP_SIZE, GAMMA = 16, 0.01, 5, 0.7
K, TOTAL = 10, 30          # part 1: the checkpoint Python continues, the run's length
WARM_STEPS, WARM_RUN = 12, 24  # part 2: Python's own training, then the compared run
TOL = 1e-6
N_TRAIN = N * 3 // 4

problems = []


def bad(msg):
    problems.append(msg)
    print("BAD", msg)


def die(msg):
    print("FAIL:", msg)
    sys.exit(1)


# ---- the Python side ----------------------------------------------------------


def make_model():
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Dropout(0.0), nn.Linear(HIDDEN, CLASSES))


def make_optim(model):
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    return opt, torch.optim.lr_scheduler.StepLR(opt, step_size=STEP_SIZE, gamma=GAMMA)


def batch(data, b):
    """Batch b of ctrial's unshuffled training loader: records repeat, then batch."""
    idx = torch.arange(b * B, (b + 1) * B) % N_TRAIN
    return data["x"][idx], data["y"][idx]


def train(model, opt, sched, data, first, last):
    """Trains batches first..last-1 as ckpt_trial does; returns [(loss, lr)]."""
    model.train()
    out = []
    for b in range(first, last):
        x, y = batch(data, b)
        lr = opt.param_groups[0]["lr"]
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        out.append((loss.item(), lr))
    return out


# ---- the ctrial side ----------------------------------------------------------


def run_trial(name, hparams, max_length, checkpoint_period=None):
    out = os.path.join(WORK, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    config = {
        "hyperparameters": dict({"global_batch_size": B, "shuffle": False, "dropout": 0.0, "hidden": HIDDEN,
                                 "lr": LR}, **hparams),
        "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True,
                     "max_length": {"batches": max_length}},
        "scheduling_unit": 1,
        "checkpoint_storage": {"save_trial_latest": 100, "save_trial_best": 0},
        "reproducibility": {"experiment_seed": 7},
    }
    if checkpoint_period:
        config["min_checkpoint_period"] = {"batches": checkpoint_period}
    cfg = os.path.join(out, "config.json")
    with open(cfg, "w") as f:
        json.dump(config, f, indent=1)
    cmd = [EXE, "--config", cfg, "--output", out, "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        die(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return out


def training_reports(out, n):
    """{batch index b: (loss, lr)} from metrics.jsonl's training reports at batches b+1."""
    got = {}
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r["group"] == "training":
                got[r["batches"] - 1] = (r["metrics"]["loss"], r["metrics"]["lr"])
    missing = [b + 1 for b in range(n) if b not in got]
    if missing:
        die(f"{out}/metrics.jsonl has no training report at batches {missing} (scheduling_unit 1 reports each)")
    return got


def checkpoints(out):
    """{steps_completed: directory} of the run's committed checkpoints."""
    root = os.path.join(out, "checkpoints")
    found = {}
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        meta = os.path.join(root, name, "metadata.json")
        if name.startswith("ckpt-") and os.path.exists(meta):
            with open(meta) as f:
                found[json.load(f)["steps_completed"]] = os.path.join(root, name)
    return found


def load_state(ckpt):
    return torch.load(os.path.join(ckpt, "state_dict.pth"), weights_only=True)


# ---- comparisons ----------------------------------------------------------------


def compare_losses(what, python, ctrial, first):
    worst = 0.0
    for i, (loss, lr) in enumerate(python):
        b = first + i
        c_loss, c_lr = ctrial[b]
        worst = max(worst, abs(loss - c_loss))
        if not abs(loss - c_loss) <= TOL:
            bad(f"{what}: batch {b} (metrics.jsonl batches={b + 1}): ctrial loss {c_loss!r}, Python {loss!r}, "
                f"|diff| {abs(loss - c_loss):.3g}")
        if not abs(lr - c_lr) <= 1e-12:
            bad(f"{what}: batch {b} (metrics.jsonl batches={b + 1}): ctrial lr {c_lr!r}, Python {lr!r}")
    print(f"{what}: batches {first}..{first + len(python) - 1}, largest loss difference {worst:.3g}")


def compare_tensors(what, got, want):
    if not isinstance(got, torch.Tensor):
        bad(f"{what}: ctrial has {type(got).__name__} {got!r}, Python a tensor {want!r}")
        return
    if got.dtype != want.dtype or got.shape != want.shape:
        bad(f"{what}: ctrial {got.dtype} {list(got.shape)}, Python {want.dtype} {list(want.shape)}")
        return
    d = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    if not d <= TOL:
        bad(f"{what}: largest difference {d:.3g} (ctrial {got.flatten()[:4].tolist()}..., "
            f"Python {want.flatten()[:4].tolist()}...)")


def compare_plain(what, got, want):
    """Non-tensor state (numbers, tuples, lists, None, bools): same type, same value."""
    if isinstance(want, torch.Tensor):
        return compare_tensors(what, got, want)
    if type(got) is not type(want):
        bad(f"{what}: ctrial has {type(got).__name__} {got!r}, Python {type(want).__name__} {want!r}")
    elif isinstance(want, float):
        if not (got == want or abs(got - want) <= 1e-12 * max(1.0, abs(want))):
            bad(f"{what}: ctrial {got!r}, Python {want!r}")
    elif isinstance(want, (list, tuple)):
        if len(got) != len(want):
            bad(f"{what}: ctrial {got!r}, Python {want!r}")
        else:
            for i, (g, w) in enumerate(zip(got, want)):
                compare_plain(f"{what}[{i}]", g, w)
    elif got != want:
        bad(f"{what}: ctrial {got!r}, Python {want!r}")


def compare_keys(what, got, want):
    if list(got) != list(want):
        missing = [k for k in want if k not in got]
        extra = [k for k in got if k not in want]
        if missing or extra:
            bad(f"{what}: keys differ from Python's: missing {missing}, extra {extra}")
        else:
            print(f"note: {what}: keys in another order than Python's: {list(got)} vs {list(want)}")


def compare_optim_state(what, got, want):
    """ctrial's Adam state_dict against Python's (the layout and the values)."""
    compare_keys(what, got, want)
    gs, ws = got.get("state", {}), want["state"]
    if sorted(gs) != sorted(ws):
        bad(f"{what}['state']: parameter ids {sorted(gs)}, Python {sorted(ws)}")
    for pid in ws:
        if pid not in gs:
            continue
        compare_keys(f"{what}['state'][{pid}]", gs[pid], ws[pid])
        for key in ws[pid]:
            if key in gs[pid]:
                compare_tensors(f"{what}['state'][{pid}][{key!r}]", gs[pid][key], ws[pid][key])
    gg, wg = got.get("param_groups", []), want["param_groups"]
    if len(gg) != len(wg):
        bad(f"{what}['param_groups']: {len(gg)} groups, Python {len(wg)}")
    for i, (g, w) in enumerate(zip(gg, wg)):
        compare_keys(f"{what}['param_groups'][{i}]", g, w)
        for key in w:
            if key in g:
                compare_plain(f"{what}['param_groups'][{i}][{key!r}]", g[key], w[key])


def compare_optim_state_layout(what, got, want):
    """Keys and types of every entry; values where they do not depend on the init."""
    compare_keys(what, got, want)
    gs, ws = got.get("state", {}), want["state"]
    if sorted(gs) != sorted(ws):
        bad(f"{what}['state']: parameter ids {sorted(gs)}, Python {sorted(ws)}")
    for pid in ws:
        g, w = gs.get(pid, {}), ws[pid]
        compare_keys(f"{what}['state'][{pid}]", g, w)
        for key in w:
            if key not in g:
                continue
            if not isinstance(g[key], torch.Tensor) or g[key].dtype != w[key].dtype or g[key].shape != w[key].shape:
                bad(f"{what}['state'][{pid}][{key!r}]: ctrial {type(g[key]).__name__} "
                    f"{getattr(g[key], 'dtype', '')} {list(getattr(g[key], 'shape', []))}, "
                    f"Python {w[key].dtype} {list(w[key].shape)}")
            elif key == "step":  # the count of steps, whatever the init
                compare_tensors(f"{what}['state'][{pid}]['step']", g[key], w[key])
    gg, wg = got.get("param_groups", []), want["param_groups"]
    if len(gg) != len(wg):
        bad(f"{what}['param_groups']: {len(gg)} groups, Python {len(wg)}")
    for i, (g, w) in enumerate(zip(gg, wg)):
        compare_keys(f"{what}['param_groups'][{i}]", g, w)
        for key in w:
            if key in g:
                compare_plain(f"{what}['param_groups'][{i}][{key!r}]", g[key], w[key])


def compare_sched_state(what, got, want):
    compare_keys(what, got, want)
    for key in want:
        if key in got:
            compare_plain(f"{what}[{key!r}]", got[key], want[key])


# ---- the parts ------------------------------------------------------------------


def check_structure(sd, ckpt, k):
    """Part 4: what torch.load shows of a ctrial checkpoint."""
    want = ["models_state_dict", "optimizers_state_dict", "lr_schedulers_state_dict", "callbacks", "rng_state"]
    if sorted(sd) != sorted(want):
        bad(f"state_dict.pth of {ckpt}: keys {list(sd)}, expected {want}")
    for key in want[:3]:
        v = sd.get(key)
        if not isinstance(v, list) or len(v) != 1:
            bad(f"state_dict.pth['{key}']: expected a list of 1 entry, got {type(v).__name__} {v!r:.200}")
    if sd.get("callbacks") != {"counter": {"batches": k}}:
        bad(f"state_dict.pth['callbacks']: {sd.get('callbacks')!r}, expected {{'counter': {{'batches': {k}}}}}")
    rng = sd.get("rng_state", {}).get("cpu_rng_state")
    ref = torch.get_rng_state()
    if not isinstance(rng, torch.Tensor) or rng.dtype != torch.uint8 or rng.shape != ref.shape:
        bad(f"rng_state['cpu_rng_state']: {type(rng).__name__} "
            f"{getattr(rng, 'dtype', '')} {list(getattr(rng, 'shape', []))}, expected uint8 {list(ref.shape)}")
    else:
        try:
            torch.set_rng_state(rng)
        except Exception as e:  # noqa: BLE001 - any refusal is the finding
            bad(f"torch.set_rng_state refuses rng_state['cpu_rng_state']: {e}")
        finally:
            torch.set_rng_state(ref)
    with open(os.path.join(ckpt, "metadata.json")) as f:
        meta = json.load(f)
    if meta.get("steps_completed") != k:
        bad(f"{ckpt}/metadata.json: steps_completed {meta.get('steps_completed')!r}, expected {k}")
    files = meta.get("files", {})
    on_disk = sorted(n for n in os.listdir(ckpt) if n != "metadata.json")
    if sorted(files) != on_disk:
        bad(f"{ckpt}/metadata.json lists files {sorted(files)}, the directory holds {on_disk} (+ metadata.json)")
    for name, entry in files.items():
        path = os.path.join(ckpt, name)
        if not os.path.exists(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        crc = f"{zlib.crc32(data):08x}"
        if entry.get("size") != len(data) or str(entry.get("crc32")).lower() != crc:
            bad(f"{ckpt}/metadata.json: files['{name}'] = {entry}, the file has size {len(data)}, crc32 {crc}")
    print(f"structure of {os.path.basename(ckpt)} checked ({len(files)} file(s) listed)")


def part1_python_continues(data, data_path):
    out = run_trial("continue", {"data": data_path}, TOTAL, checkpoint_period=K)
    ctrial = training_reports(out, TOTAL)
    ckpts = checkpoints(out)
    for k in (K, TOTAL):
        if k not in ckpts:
            die(f"no checkpoint with steps_completed {k} in {out}/checkpoints (found {sorted(ckpts)})")
    sd = load_state(ckpts[K])
    check_structure(sd, ckpts[K], K)

    # The layout: Python's own state dicts after K batches from its own init.
    torch.manual_seed(0)
    ref_model = make_model()
    ref_opt, ref_sched = make_optim(ref_model)
    train(ref_model, ref_opt, ref_sched, data, 0, K)
    ref_o, ref_s = ref_opt.state_dict(), ref_sched.state_dict()
    c_o, c_s = sd["optimizers_state_dict"][0], sd["lr_schedulers_state_dict"][0]
    compare_keys("models_state_dict[0]", sd["models_state_dict"][0], ref_model.state_dict())
    compare_optim_state_layout("optimizers_state_dict[0]", c_o, ref_o)
    compare_sched_state("lr_schedulers_state_dict[0]", c_s, ref_s)

    # Python continues the checkpoint, as a Python trial restoring it would.
    model = make_model()
    opt, sched = make_optim(model)
    try:
        model.load_state_dict(sd["models_state_dict"][0])
        opt.load_state_dict(c_o)
        sched.load_state_dict(c_s)
    except Exception as e:  # noqa: BLE001
        die(f"Python cannot load the checkpoint at {K}: {type(e).__name__}: {e}")
    compare_losses(f"Python continuing ctrial's checkpoint at {K}", train(model, opt, sched, data, K, TOTAL),
                   ctrial, K)

    end = load_state(ckpts[TOTAL])
    for name, want in model.state_dict().items():
        compare_tensors(f"weights after {TOTAL}: '{name}'", end["models_state_dict"][0].get(name), want)
    compare_optim_state(f"optimizer after {TOTAL}", end["optimizers_state_dict"][0], opt.state_dict())
    compare_sched_state(f"scheduler after {TOTAL}", end["lr_schedulers_state_dict"][0], sched.state_dict())
    return ckpts[TOTAL]


def part2_python_warm_starts(data, data_path):
    torch.manual_seed(1)
    model = make_model()
    opt, sched = make_optim(model)
    # Its own training: the batches in reverse order, so nothing is shared with the run below.
    for b in reversed(range(WARM_STEPS)):
        train(model, opt, sched, data, b, b + 1)
    warm = os.path.join(WORK, "warm.pth")
    torch.save(model.state_dict(), warm)

    out = run_trial("warm", {"data": data_path, "warm_start": warm}, WARM_RUN)
    ctrial = training_reports(out, WARM_RUN)
    model = make_model()
    model.load_state_dict(torch.load(warm, weights_only=True))
    opt, sched = make_optim(model)
    compare_losses("ctrial warm-started from Python's model.state_dict()", train(model, opt, sched, data, 0, WARM_RUN),
                   ctrial, 0)


def part3_predict(data, ckpt):
    cmd = [EXE, "predict", ckpt]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        die(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    try:
        got = torch.tensor(json.loads(p.stdout), dtype=torch.float64)
    except (ValueError, TypeError) as e:
        die(f"{' '.join(cmd)} printed no JSON list of lists ({e}):\n{p.stdout}")
    model = make_model()
    model.load_state_dict(load_state(ckpt)["models_state_dict"][0])
    model.eval()
    with torch.no_grad():
        want = model(data["x"][:4]).double()
    if got.shape != want.shape:
        die(f"predict printed shape {list(got.shape)}, expected {list(want.shape)}: {p.stdout}")
    for i in range(4):
        for j in range(CLASSES):
            if not abs(got[i, j] - want[i, j]) <= TOL:
                bad(f"predict {os.path.basename(ckpt)}: record {i} class {j}: ctrial {got[i, j].item()!r}, "
                    f"Python {want[i, j].item()!r}")
    print(f"predict: largest difference {(got - want).abs().max().item():.3g}")


def main():
    start = time.monotonic()
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    g = torch.Generator().manual_seed(20240611)
    data = {"x": torch.randn(N, FEATURES, generator=g), "y": torch.randint(0, CLASSES, (N,), generator=g)}
    data_path = os.path.join(WORK, "data.pth")
    torch.save(data, data_path)

    last = part1_python_continues(data, data_path)
    part2_python_warm_starts(data, data_path)
    part3_predict(data, last)
    print(f"{time.monotonic() - start:.1f} s")
    if problems:
        die(f"{len(problems)} difference(s) between ctrial and PyTorch (listed above)")
    print("ok")


if __name__ == "__main__":
    main()
