"""Determined's multi-rank semantics (issue 15): tests/dist_fit/semantics_trial
under `mpirun -np 2`, each run with a timeout (a hang is a failure).

    test_semantics.py SEMANTICS_TRIAL

1. Every rank counts epochs by rank 0's training loader (Determined
   broadcasts the chief's len): with 3 records at 1 per rank and batch, and
   101 records at 10, the ranks' own lengths differ (2 and 1; 6 and 5), yet
   both ranks end epochs, validate, checkpoint and report at rank 0's
   boundaries with every period in epochs, and the job ends.
2. on_training_workload_end gets, on every rank, the per-batch metrics
   averaged across ranks (Determined's average_training_metrics).
3. Object collectives: gather, allgather, broadcast of value trees.
4. A stop requested on rank 1 alone stops both ranks at the next boundary.
5. on_checkpoint_save_start / _write_end run on rank 0 only (it writes the
   checkpoint), on_checkpoint_upload_end on every rank.
6. ct_ctx_backward_ex averages gradients across ranks; a bare ct_backward is
   refused at the optimizer step instead of letting the ranks diverge.
7. evaluate_batch's metric names differing on one rank: an error on every
   rank, no hang.
8. The console under mpirun is plain lines, and the start-up summary names
   the gradients' transport.

Exits 77 (skipped) without mpirun.
"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, mpirun_cmd, need_mpirun, run_cmd  # noqa: E402

TRIAL = os.path.abspath(sys.argv[1])
need_mpirun()

WORK = tempfile.mkdtemp(prefix="semantics_")


def run(name, mode, *args, expect=0, text_out=None):
    """mpirun -np 2 semantics_trial MODE OUT [ARGS]; returns both ranks' JSON
    (and, with text_out a list, appends the job's output to it)."""
    out = os.path.join(WORK, name)
    os.makedirs(out, exist_ok=True)
    cmd = mpirun_cmd(2, [TRIAL, mode, out, *args], oversubscribe=False)
    code, text, _ = run_cmd(cmd, 90, env=dict(os.environ, OMP_NUM_THREADS="1"), merge=True)
    if text_out is not None:
        text_out.append(text)
    ok = (code == 0) == (expect == 0)
    if not ok:
        print("$ " + " ".join(cmd) + "\n" + text[-3000:])
    check(ok, f"{name}: exit code {code} ({'0' if expect == 0 else 'non-zero'} wanted)")
    ranks = []
    for r in range(2):
        try:
            with open(os.path.join(out, f"rank{r}.json")) as f:
                ranks.append(json.load(f))
        except (OSError, ValueError) as e:
            check(False, f"{name}: rank {r}'s result: {e}")
            ranks.append({})
    return ranks


# 1. Uneven shares, every period in epochs.
for records, per_slot, want_len in ((3, 1, 2), (101, 10, 6)):
    name = f"epochs_{records}_by_{per_slot}"
    r0, r1 = run(name, "epochs", str(records), str(per_slot))
    ends = [want_len, 2 * want_len]
    for r, res in enumerate((r0, r1)):
        check(res.get("epoch_len") == want_len,
              f"{name}: rank {r} counts epochs of {res.get('epoch_len')} batches (rank 0's: {want_len})")
        check(res.get("epoch_ends") == ends, f"{name}: rank {r} ends epochs after {res.get('epoch_ends')} ({ends})")
        check(res.get("validations") == ends, f"{name}: rank {r} validates after {res.get('validations')}")
        check(res.get("uploads") == ends, f"{name}: rank {r} checkpoints after {res.get('uploads')}")

# 2, 3. Per-batch metrics averaged across ranks; object collectives.
r0, r1 = run("metrics", "metrics")
for r, res in enumerate((r0, r1)):
    check(res.get("batch_r") == [0.5] * 8, f"metrics: rank {r}'s per-batch r {res.get('batch_r')} (0.5 each)")
    check(res.get("avg_r") == [0.5, 0.5], f"metrics: rank {r}'s reported r {res.get('avg_r')}")
    check(res.get("allgathered") == [0, 1], f"metrics: rank {r} allgathered {res.get('allgathered')}")
    check(res.get("broadcast") == "from rank 0", f"metrics: rank {r} got {res.get('broadcast')!r}")
check(r0.get("gathered") == [0, 1] and r1.get("gathered") is None,
      f"metrics: gathered on rank 0 {r0.get('gathered')}, on rank 1 {r1.get('gathered')}")

# 4, 5. A stop on rank 1 alone, taken at the next boundary (validation at 4).
r0, r1 = run("stop", "stop")
for r, res in enumerate((r0, r1)):
    check(res.get("validations") == [4], f"stop: rank {r} validated after {res.get('validations')} ([4])")
    check(res.get("uploads") == [4], f"stop: rank {r} saw checkpoints after {res.get('uploads')} ([4])")
check(r0.get("saves") == 1 and r0.get("writes") == 1, f"stop: rank 0 saves/writes {r0.get('saves')}/{r0.get('writes')}")
check(r1.get("saves") == 0 and r1.get("writes") == 0, f"stop: rank 1 saves/writes {r1.get('saves')}/{r1.get('writes')}")

# 6. backward_ex: loss x (rank + 1) with gradient 2, averaged over the two
# ranks: every step multiplies 1 - w by 1 - 0.001 * 2 * 1.5 * 2 = 0.994.
r0, r1 = run("backward", "backward")
want = 1 - 0.994 ** 8
for r, res in enumerate((r0, r1)):
    w = res.get("w", 0)
    check(abs(w - want) < 1e-6, f"backward_ex: rank {r}'s w {w} ({want}: averaged)")
check(r0.get("w") == r1.get("w"), "backward_ex: the ranks' weights are equal")
r0, r1 = run("bare", "bare", expect=1)
for r, res in enumerate((r0, r1)):
    check(res.get("rc", 0) != 0 and "outside ct_ctx_backward" in (res.get("error") or ""),
          f"bare backward: rank {r} refused: {res.get('error')!r}")

# 7. Metric names differing on rank 1 alone.
r0, r1 = run("names", "names", expect=1)
check("metric names must match" in (r1.get("error") or ""), f"names: rank 1's error {r1.get('error')!r}")
check(r0.get("rc", 0) != 0 and "rank 1" in (r0.get("error") or ""), f"names: rank 0's error {r0.get('error')!r}")

# 8. Under mpirun the console is plain lines (Open MPI hands ranks a
# pseudo-terminal, which is no reason for a live line's \r and escapes).
said = []
run("console", "console", text_out=said)
text = said[0] if said else ""
check("\r" not in text and "\x1b" not in text and "validation at batch 8" in text,
      f"console under mpirun: plain lines ({text[-300:]!r})")
# The start-up summary says how the gradients travel (the two ranks share
# this machine: shared memory).
check(", 2 ranks (gradients: shared memory); " in text, f"console under mpirun: the transport ({text[:600]!r})")

shutil.rmtree(WORK, ignore_errors=True)
if FAILURES:
    print(f"{len(FAILURES)} failed")
    sys.exit(1)
print("all passed")
