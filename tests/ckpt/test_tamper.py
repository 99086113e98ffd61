"""Tampered or absurd checkpoint state, bad numbers in the config and flags
that used to overflow or exit with the wrong code (issue 17, items 4, 9, 10).

Runs tests/ckpt/ckpt_trial (a ct_main program) once to get real
checkpoints, then, for each case, edits a copy of one (metadata.json's
trial_state, or state_dict.pth, keeping the file sums and the metadata seal
right so that only the edited field is wrong) and resumes from it: the run
must end with exit code 3 (CT_ECHECKPOINT) and a message naming the
checkpoint, the field, its value and what was expected, in bounded time
(every run has a timeout: a hang fails the case). The config cases must end
with exit code 2 (CT_ECONFIG) naming the setting.

    test_tamper.py CKPT_TRIAL
"""
import glob
import json
import math
import os
import shutil
import sys
import tempfile
import zlib

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, run_cmd  # noqa: E402

TRIAL = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="ckpt_tamper_")
TIMEOUT = 120  # seconds per run; every case here takes one or two


def config(name, **over):
    """180 training records in batches of 16 (12 per epoch), validation
    every 6 batches, checkpoints every 8, 24 batches; every checkpoint
    kept."""
    c = {
        "name": "tamper",
        "hyperparameters": {"global_batch_size": 16},
        "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True,
                     "max_length": {"batches": 24}},
        "min_validation_period": {"batches": 6},
        "min_checkpoint_period": {"batches": 8},
        "scheduling_unit": 4,
        "checkpoint_storage": {"save_trial_latest": 100, "save_trial_best": 100},
    }
    c.update(over)
    path = os.path.join(WORK, name + ".json")
    with open(path, "w") as f:
        json.dump(c, f)
    return path


BASE = config("base")


def run(out, *args, cfg=BASE):
    """Runs the trial; (exit code, stdout, stderr), or (None, ...) when it
    did not end within TIMEOUT (killed)."""
    return run_cmd([TRIAL, "--config", cfg, "--output", out, "--threads", "1", *args], TIMEOUT)


def expect(what, result, code, *needles):
    rc, out, err = result
    if rc is None:
        check(False, f"{what}: no end within {TIMEOUT} s (a hang)")
        return
    text = out + err
    missing = [n for n in needles if n not in text]
    if rc != code or missing:
        print(f"  exit {rc}, want {code}; missing {missing}\n  stdout: {out[-1500:]}\n  stderr: {err[-1500:]}")
    check(rc == code and not missing, f"{what}: exit {rc} (want {code})" + (f", missing {missing}" if missing else ""))


# ---- checkpoints to tamper with ------------------------------------------------------------

def checkpoint(out, steps):
    found = glob.glob(os.path.join(out, "checkpoints", f"ckpt-{steps:06d}-*"))
    assert len(found) == 1, (out, steps, found)
    return found[0]


def reseal(meta_path, meta):
    """Writes metadata.json, sealed as ctrial seals it when the original was
    (metadata_crc32, the last key: the CRC-32 of the file's bytes with its
    own 8 hex digits read as 00000000)."""
    sealed = "metadata_crc32" in meta
    if sealed:
        del meta["metadata_crc32"]
        meta["metadata_crc32"] = "00000000"
    text = json.dumps(meta, indent=2)
    if sealed:
        crc = zlib.crc32(text.encode()) & 0xFFFFFFFF
        at = text.rindex('"metadata_crc32": "00000000"') + len('"metadata_crc32": "')
        text = text[:at] + f"{crc:08x}" + text[at + 8:]
    with open(meta_path, "w") as f:
        f.write(text)


def tampered(src, name, edit_meta=None, edit_state=None):
    """A copy of checkpoint src with its metadata.json (edit_meta(meta)) or
    state_dict.pth (edit_state(state)) edited; the file sums and the seal
    are rewritten, so that the edit is all that is wrong."""
    dst = os.path.join(WORK, "ckpts", name, os.path.basename(src))
    shutil.rmtree(os.path.dirname(dst), ignore_errors=True)
    shutil.copytree(src, dst)
    meta_path = os.path.join(dst, "metadata.json")
    meta = json.load(open(meta_path))
    if edit_state:
        pth = os.path.join(dst, "state_dict.pth")
        state = torch.load(pth, weights_only=True)
        edit_state(state)
        torch.save(state, pth)
        data = open(pth, "rb").read()
        meta["files"]["state_dict.pth"] = {"size": len(data), "crc32": f"{zlib.crc32(data) & 0xFFFFFFFF:08x}"}
    if edit_meta:
        edit_meta(meta)
    reseal(meta_path, meta)
    return dst


def resume(name, ckpt, *args, cfg=BASE):
    out = os.path.join(WORK, "runs", name)
    shutil.rmtree(out, ignore_errors=True)
    return run(out, "--resume", ckpt, *args, cfg=cfg)


def set_ts(**fields):
    def edit(meta):
        for k, v in fields.items():
            if v is DELETE:
                del meta["trial_state"][k]
            else:
                meta["trial_state"][k] = v
    return edit


class _Delete:
    def __repr__(self):
        return "<deleted>"


DELETE = _Delete()
BIG = 2 ** 62


def main():
    ref = os.path.join(WORK, "ref")
    rc, out, err = run(ref)
    check(rc == 0, f"the reference run: exit {rc} {err[-500:]}")
    ck16 = checkpoint(ref, 16)  # inside the run: 8 batches to go
    ck24 = checkpoint(ref, 24)  # its end
    meta16 = json.load(open(os.path.join(ck16, "metadata.json")))
    ts = meta16["trial_state"]
    check(ts["batches_trained"] == 16 and ts["loader_position"] == 16 and ts["epoch_len"] == 12,
          f"the checkpoint at batch 16 is as these cases assume: {ts}")

    # A copy rewritten without changes resumes: the cases below fail for
    # their edit alone.
    intact = tampered(ck16, "intact", edit_meta=lambda m: None, edit_state=lambda s: None)
    expect("an untouched copy (sums and seal rewritten) resumes", resume("intact", intact), 0,
           "done: 24 batches")

    # ---- metadata.json's trial_state ------------------------------------------------------
    def case(name, fields, *needles, src=ck16, args=()):
        ckpt = tampered(src, name, edit_meta=set_ts(**fields))
        expect(f"trial_state {fields}", resume(name, ckpt, *args), 3, f"checkpoint {ckpt}: ", *needles)

    # The loader skipped 2^62 batches one by one: the run never ended.
    case("position_huge", {"loader_position": BIG},
         f"metadata.json: trial_state.loader_position is {BIG}, expected 16 (batches_trained: the training loader "
         "hands out one batch per batch trained)")
    case("position_negative", {"loader_position": -3}, "trial_state.loader_position is -3, expected 16")
    # 2^62 batches trained, with every count that says so agreeing: past
    # max_length, so nothing to train (Determined's
    # test_max_batches_leq_steps_completed), and the loader is not moved
    # there (it would never get there).
    ckpt = tampered(ck16, "bt_huge", edit_meta=lambda m: (
        set_ts(batches_trained=BIG, last_checkpoint_batches=BIG, loader_position=BIG)(m),
        m.update(steps_completed=BIG, batches_trained=BIG)))
    expect("trial_state: 2^62 batches, every count agreeing", resume("bt_huge", ckpt), 0,
           f"nothing to train: the checkpoint is at batch {BIG}, at or past this run's max_length of 24 batches")
    case("bt_alone", {"batches_trained": BIG},
         f"trial_state.last_checkpoint_batches is 16, expected {BIG} (batches_trained")
    case("bt_negative", {"batches_trained": -1}, "trial_state.batches_trained is -1, expected an integer >= 0")
    case("bt_string", {"batches_trained": "16"}, "trial_state.batches_trained is \"16\", expected an integer >= 0")
    case("bt_missing", {"batches_trained": DELETE},
         "trial_state.batches_trained is missing, expected an integer >= 0")
    case("bt_real", {"batches_trained": 16.0}, "trial_state.batches_trained is 16.0, expected an integer >= 0")
    # The best metric was read as "no best yet": the best policy started over.
    case("best_string", {"best_metric": "x"},
         "metadata.json: trial_state.best_metric is \"x\", expected a finite number or null (no best yet)")
    case("best_list", {"best_metric": [0.5]}, "trial_state.best_metric is [0.5], expected a finite number or null")
    case("best_missing", {"best_metric": DELETE}, "trial_state.best_metric is missing, expected a finite number")
    case("records_negative", {"records_trained": -5}, "trial_state.records_trained is -5, expected an integer >= 0")
    case("records_string", {"records_trained": "many"}, "trial_state.records_trained is \"many\"")
    case("last_val_ahead", {"last_validation_batches": 17},
         "trial_state.last_validation_batches is 17, expected -1 (none) or a batch count from 0 to "
         "batches_trained (16)")
    case("last_val_low", {"last_validation_batches": -2}, "trial_state.last_validation_batches is -2")
    case("epoch_len_zero", {"epoch_len": 0},
         "trial_state.epoch_len is 0, expected a number of batches >= 1 (or -1: a loader without a length)")
    case("epoch_len_other", {"epoch_len": 13},
         "trial_state.epoch_len is 13, expected 12, the batches per epoch of this run's training loader on 1 rank")
    case("gbs_other", {"global_batch_size": 17},
         "it was trained with global_batch_size 17, this run has 16 (resuming needs the same)")
    case("gbs_zero", {"global_batch_size": 0}, "trial_state.global_batch_size is 0, expected a positive integer")
    case("agg_zero", {"aggregation_frequency": 0},
         "trial_state.aggregation_frequency is 0, expected a positive integer")
    case("agg_other", {"aggregation_frequency": 2},
         "it was trained with aggregation_frequency 2, this run has 1 (resuming needs the same)")
    case("world_zero", {"world_size": 0}, "trial_state.world_size is 0, expected a number of ranks >= 1")
    case("world_string", {"world_size": "1"}, "trial_state.world_size is \"1\", expected a number of ranks >= 1")
    case("metric_number", {"searcher_metric": 5},
         "trial_state.searcher_metric is 5, expected a metric name (a string) or null")
    case("metric_null_with_best", {"searcher_metric": None},
         "trial_state.searcher_metric is null, expected the name of the metric whose best_metric is 0.")
    case("metric_other", {"searcher_metric": "accuracy"},
         "it chose its best checkpoints by searcher metric 'accuracy' (smaller is better), this run by "
         "'validation_loss' (smaller is better) (resuming needs the same")
    case("direction_other", {"smaller_is_better": False},
         "searcher metric 'validation_loss' (larger is better), this run by 'validation_loss' (smaller is better)")
    case("direction_string", {"smaller_is_better": "yes"},
         "trial_state.smaller_is_better is \"yes\", expected true or false")
    case("reason_unknown", {"reason": "nap"},
         "trial_state.reason is \"nap\", expected \"period\", \"policy\", \"end\" or \"stop\"")
    case("last_ckpt_other", {"last_checkpoint_batches": 8}, "trial_state.last_checkpoint_batches is 8, expected 16")

    # Top-level fields of the same position and run.
    def top(name, fields, *needles):
        def edit(meta):
            meta.update(fields)
        ckpt = tampered(ck16, name, edit_meta=edit)
        expect(f"metadata {fields}", resume(name, ckpt), 3, f"checkpoint {ckpt}: ", *needles)

    top("steps_other", {"steps_completed": 15},
        "metadata.json: steps_completed is 15, expected 16 (trial_state.batches_trained)")
    top("batches_other", {"batches_trained": 17},
        "metadata.json: batches_trained is 17, expected 16 (trial_state.batches_trained)")
    top("seed_other", {"trial_seed": 5},
        "it was trained with trial_seed 5, this run has seed 0 (resuming needs the same")
    top("seed_negative", {"trial_seed": -1}, "metadata.json: trial_seed is -1, expected an integer >= 0")

    # The checkpoint's batches against this run's max_length: past it or at
    # it, the run has nothing to train and ends at once, as Determined's.
    expect("a checkpoint beyond this run's max_length", resume("beyond", ck24, "--max-length", "20"), 0,
           "nothing to train: the checkpoint is at batch 24, at or past this run's max_length of 20 batches",
           "done: 24 batches")
    expect("a checkpoint at max_length resumes", resume("at_end", ck24), 0, "done: 24 batches")

    # ---- state_dict.pth ---------------------------------------------------------------------
    def state_case(name, edit, *needles, src=ck16):
        ckpt = tampered(src, name, edit_state=edit)
        expect(f"state_dict.pth: {name}", resume(name, ckpt), 3, f"checkpoint {ckpt}: ", *needles)

    def drop_exp_avg_sq(s):
        del s["optimizers_state_dict"][0]["state"][1]["exp_avg_sq"]

    # It loaded, then the first step failed with exit 1.
    state_case("adam_no_exp_avg_sq", drop_exp_avg_sq,
               "optimizer 0: ct_optim_load_state_dict: state[1] has no 'exp_avg_sq' (Adam keeps step, exp_avg "
               "and exp_avg_sq for each parameter it has stepped)")

    def drop_step(s):
        del s["optimizers_state_dict"][0]["state"][0]["step"]

    state_case("adam_no_step", drop_step, "optimizer 0: ct_optim_load_state_dict: state[0] has no 'step'")

    def nan_step(s):
        s["optimizers_state_dict"][0]["state"][2]["step"] = torch.tensor(math.nan)

    state_case("adam_nan_step", nan_step,
               "optimizer 0: ct_optim_load_state_dict: state[2]['step'] is nan, expected a finite step count >= 0")

    def negative_step(s):
        s["optimizers_state_dict"][0]["state"][3]["step"] = torch.tensor(-4.0)

    state_case("adam_negative_step", negative_step, "state[3]['step'] is -4.000000, expected a finite step count")

    def none_exp_avg(s):
        s["optimizers_state_dict"][0]["state"][0]["exp_avg"] = None

    state_case("adam_none_exp_avg", none_exp_avg, "state[0] has no 'exp_avg'")

    # Gradients accumulated in a window that has ended (no aggregation: every
    # batch steps).
    def add_gradients(s):
        s["accumulated_gradients"] = [{k: torch.zeros_like(v) for k, v in s["models_state_dict"][0].items()
                                       if not k.startswith("ballast")}]

    state_case("gradients_at_step", add_gradients,
               "state_dict.pth has accumulated_gradients, but batches_trained 16 ends an aggregation window of 1 "
               "batches")

    # With aggregation: a checkpoint inside a window must hold its gradients.
    agg_cfg = config("agg", optimizations={"aggregation_frequency": 2}, min_checkpoint_period={"batches": 3},
                     searcher={"name": "single", "metric": "validation_loss", "max_length": {"batches": 6}})
    agg = os.path.join(WORK, "agg")
    rc, out, err = run(agg, cfg=agg_cfg)
    check(rc == 0, f"the aggregation run: exit {rc} {err[-500:]}")
    ck3 = checkpoint(agg, 3)
    has = "accumulated_gradients" in torch.load(os.path.join(ck3, "state_dict.pth"), weights_only=True)
    check(has, "a checkpoint inside an aggregation window holds accumulated_gradients")
    ckpt = tampered(ck3, "gradients_missing", edit_state=lambda s: s.pop("accumulated_gradients"))
    expect("state_dict.pth without the window's gradients", resume("gradients_missing", ckpt, cfg=agg_cfg), 3,
           f"checkpoint {ckpt}: state_dict.pth has no accumulated_gradients, but batches_trained 3 is inside an "
           "aggregation window of 2 batches (the gradients of its last 1 batches are missing)")

    # ---- config errors (exit 2), not trial failures or silent wraps ---------------------------
    def config_case(name, args, *needles, cfg=BASE):
        out = os.path.join(WORK, "runs", name)
        shutil.rmtree(out, ignore_errors=True)
        expect(name, run(out, *args, cfg=cfg), 2, *needles)
        check(not glob.glob(os.path.join(out, "checkpoints", "ckpt-*")), f"{name}: no checkpoint written")

    # max_length x epoch length wrapped negative: "done: 0 batches", a
    # ckpt-000000, exit 0.
    config_case("max_length_epochs_overflow", ["--max-length", f"{BIG}e"],
                f"max_length is {BIG} epochs of 12 batches: more than 9223372036854775807 batches, the most ctrial "
                "counts")
    config_case("max_length_epochs_config", [],
                f"max_length is {2 ** 63 - 1} epochs of 12 batches",
                cfg=config("huge_epochs", searcher={"name": "single", "metric": "validation_loss",
                                                    "max_length": {"epochs": 2 ** 63 - 1}}))
    # global_batch_size 2^63 - 1 overflowed in the loader.
    config_case("gbs_int64_max", ["--hparam", f"global_batch_size={2 ** 63 - 1}"],
                f"global_batch_size is {2 ** 63 - 1}, at most 1099511627776")
    config_case("gbs_int64_max_config", [], f"'hyperparameters.global_batch_size' is {2 ** 63 - 1}, at most",
                cfg=config("huge_gbs", hyperparameters={"global_batch_size": 2 ** 63 - 1}))
    # No global_batch_size: exit 1 from the loader's batch size 0.
    config_case("gbs_missing", [], "global_batch_size is not set",
                cfg=config("no_gbs", hyperparameters={"hidden": 16}))
    # A seed above 2^32 failed in the loader's shuffle with exit 1.
    config_case("seed_2_32", ["--seed", str(2 ** 32)],
                "--seed: 4294967296 is out of range: experiment seeds are 0 to 2147483647, as Determined's")
    config_case("seed_config", [], "'reproducibility.experiment_seed' is 4294967296, at most 2147483647",
                cfg=config("big_seed", reproducibility={"experiment_seed": 2 ** 32}))
    # "unexpected argument X".
    config_case("flag_as_value", ["--max-length", "--output", "X"],
                "--max-length needs a value (LEN); the next argument, --output, is a flag")
    # The largest seed trains.
    out = os.path.join(WORK, "runs", "seed_max")
    expect("seed 2^31 - 1 trains", run(out, "--seed", str(2 ** 31 - 1), "--max-length", "2"), 0, "done: 2 batches")


main()
shutil.rmtree(WORK, ignore_errors=True)
if FAILURES:
    print(f"{len(FAILURES)} failure(s)")
    sys.exit(1)
print("all passed")
