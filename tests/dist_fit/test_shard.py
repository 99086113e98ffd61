"""The optimizer's state sharded across ranks (optimizations.shard_optimizer):
tests/dist_fit/shard_trial under `mpirun`, with and without sharding,
checked against each other, against torch.optim and against a memory limit.

    test_shard.py SHARD_TRIAL

1. SGD with momentum, Adam and AdamW over 100 steps on 2 ranks: every
   training loss, the final weights and the final optimizer state of the
   sharded run within 1e-6 of the unsharded run's. The checkpoint holds the
   whole state in torch's layout (the same keys, entries and param_groups
   as the unsharded checkpoint), and torch.optim of the same kind loads it.
   Each rank holds the state of exactly the parameters torch's
   ZeroRedundancyOptimizer would give it (its greedy partition, computed
   here), and the ranks' state bytes add up to the unsharded state.
2. Every other optimizer (RMSprop with momentum, Adagrad, Adadelta, Adamax,
   NAdam, RAdam) on 3 ranks, sharded = unsharded (1e-6) over 20 steps.
3. Gradient clipping (the norm over all parameters), fp16 AMP's GradScaler,
   fused AdamW and aggregation windows of 2, sharded = unsharded; also with
   messages instead of the gradient buckets' shared memory (the ring; two
   hosts of one rank; two hosts of two ranks, where gradients go to the
   owner's host and parameters to one rank per host). With clipping, each
   sharded rank holds at the step the gradients of its own parameters only
   (each gradient is reduced to the rank that steps it), the unsharded ones
   all six.
4. Checkpoints move: a sharded 2-rank checkpoint resumes on 1 rank
   unsharded and on 3 ranks sharded, an unsharded one on 2 ranks sharded,
   each ending where the uninterrupted run ends (1e-5: the ranks' sums
   differ in the last bits, as in test_dist_fit.py). A checkpoint written
   in the background holds the same bits as one written at once.
5. A refusal: LBFGS cannot be sharded, said before training. A disk too
   full for rank 0's share of a checkpoint (a small tmpfs, mounted where
   the test may) fails every rank with the reason, no checkpoint counting.
6. Memory: on an MLP of twelve equal layers (201 MB of weights, 403 MB of
   Adam state) each of 2 ranks holds half the state, and trains in less
   private memory (VmData) than one rank alone by more than a quarter of
   the state. Under a limit on each process's private memory (RLIMIT_DATA,
   `ulimit -d`) between the two, one rank fails, naming the allocation,
   and 2 ranks sharded train and write their checkpoint, which holds the
   whole state, equal to the run's without a limit. Not in sanitizer
   builds (their shadow memory is private memory too).

With SHARD_DEVICE=cuda (the test dist_shard_cuda) every rank trains on
cuda (all on one GPU where the machine has one: their tensors travel
through host memory) and sections 1, 3 and 4 run there; exits 77 without
a GPU.

Exits 77 (skipped) without mpirun."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import check, exit_with_report, mpirun_cmd, need_mpirun, run_cmd, single_config  # noqa: E402

TRIAL = os.path.abspath(sys.argv[1])
need_mpirun()
DEVICE = os.environ.get("SHARD_DEVICE", "cpu")
if DEVICE == "cuda" and not torch.cuda.is_available():
    print("SKIP: SHARD_DEVICE=cuda, but no GPU is present (torch.cuda.is_available() is False)")
    sys.exit(77)
CPU = DEVICE == "cpu"
WORK = tempfile.mkdtemp(prefix="dist_shard_")
T0 = time.time()
GBS = 24


def config(name, batches, ckpt=None, agg=1, shard=False, val=None):
    opts = {}
    if agg > 1:
        opts["aggregation_frequency"] = agg
    if shard:
        opts["shard_optimizer"] = True
    extra = {"optimizations": opts} if opts else {}
    # A training report per batch: every loss compared.
    return single_config(os.path.join(WORK, name + ".json"), "shard", GBS, batches, val=val, ckpt=ckpt,
                         scheduling_unit=1, **extra)


def run(name, np, cfg, *args, expect=0, limit=240, pre=None, env=None):
    """The trial into WORK/name under mpirun -np np (pre: a shell command
    each rank runs first, e.g. a ulimit; env: more environment); returns
    (exit code, output, output dir)."""
    out = os.path.join(WORK, name)
    os.makedirs(out, exist_ok=True)
    cmd = [TRIAL, "--config", cfg, "--output", out, "--threads", "1", "--device", DEVICE, *args]
    if pre:
        cmd = ["bash", "-c", pre + ' && exec "$@"', "rank", *cmd]
    code, text, _ = run_cmd(mpirun_cmd(np, cmd), limit, env=dict(os.environ, OMP_NUM_THREADS="1", SHARD_OUT=out, **(env or {})),
                            merge=True)
    if expect is not None and code != expect:
        print("$ " + " ".join(cmd) + "\n" + text[-3000:])
    if expect is not None:
        check(code == expect, f"{name}: exit code {code} (want {expect})")
    return code, text, out


def checkpoints(out):
    """{steps: dir} of the committed checkpoints."""
    found = {}
    for d in glob.glob(os.path.join(out, "checkpoints", "ckpt-*")):
        with open(os.path.join(d, "metadata.json")) as f:
            found[json.load(f)["steps_completed"]] = d
    return found


def state(out, steps):
    d = checkpoints(out).get(steps)
    return torch.load(os.path.join(d, "state_dict.pth"), weights_only=True, map_location="cpu") if d else None


def losses(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return [r["metrics"]["loss"] for r in rows if r["group"] == "training"]


def ranks(out, n):
    found = {}
    for r in range(n):
        p = os.path.join(out, f"rank{r}.json")
        if os.path.exists(p):
            with open(p) as f:
                found[r] = json.load(f)
    return found


def diff(a, b, path="state"):
    """Largest absolute difference over two trees' floating tensors; a
    structural difference (keys, order, shapes, dtypes, other values) raises."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype, path
        if not a.is_floating_point():
            assert torch.equal(a, b), path
            return 0.0
        return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{path}: keys {list(a)} vs {list(b)}"
        return max([diff(a[k], b[k], f"{path}.{k}") for k in a] or [0.0])
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), path
        return max([diff(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b))] or [0.0])
    assert a == b, f"{path}: {a!r} vs {b!r}"
    return 0.0


def compare(name, ref, out, steps, tol):
    """The final weights and optimizer state (and, at the same rank count,
    every training loss) of two runs within tol."""
    a, b = state(ref, steps), state(out, steps)
    if not check(a is not None and b is not None, f"{name}: both runs checkpointed at batch {steps}"):
        return
    try:
        d = max(diff(a["models_state_dict"], b["models_state_dict"], "models"),
                diff(a["optimizers_state_dict"], b["optimizers_state_dict"], "optimizers"))
    except AssertionError as e:
        d = float("inf")
        print(f"     structure differs: {e}")
    check(d <= tol, f"{name}: weights and optimizer state within {tol} (largest difference {d:.3g})")


def compare_losses(name, ref, out, tol=1e-6):
    la, lb = losses(ref), losses(out)
    d = max((abs(x - y) for x, y in zip(la, lb)), default=float("inf")) if len(la) == len(lb) else float("inf")
    check(d <= tol, f"{name}: the {len(la)} training losses within {tol} (largest difference {d:.3g})")


def zero_partition(sizes_by_group, world):
    """torch.distributed.optim.ZeroRedundancyOptimizer._partition_parameters:
    group by group, largest first (stable), to the rank with the fewest
    elements so far. sizes_by_group: [[(index, numel)]]. {index: rank}."""
    load = [0] * world
    owner = {}
    for group in sizes_by_group:
        for i, n in sorted(group, key=lambda p: p[1], reverse=True):
            r = load.index(min(load))
            owner[i] = r
            load[r] += n
    return owner


# ---- 1: SGD with momentum, Adam, AdamW: 100 steps on 2 ranks ------------------------------------

STEPS = 100
for opt in ("sgd", "adam", "adamw"):
    hp = ["--hparam", f"optimizer={opt}"]
    _, _, plain = run(f"{opt}_np2", 2, config(f"{opt}_plain", STEPS, ckpt=50), *hp)
    _, text, shard = run(f"{opt}_np2_shard", 2, config(f"{opt}_shard", STEPS, ckpt=50, shard=True), *hp)
    name = f"{opt}, 2 ranks, sharded vs not"
    check("2 ranks (gradients: shared memory" in text and "; optimizer state sharded)" in text,
          f"{name}: the start-up summary says the optimizer state is sharded")
    compare_losses(name, plain, shard)
    compare(name, plain, shard, STEPS, 1e-6)
    sd = state(shard, STEPS)
    if sd is None:
        continue
    osd = sd["optimizers_state_dict"][0]
    check(sorted(osd["state"]) == list(range(6)) and [g["params"] for g in osd["param_groups"]] == [[0, 1, 2], [3, 4, 5]],
          f"{name}: the checkpoint holds the whole state: entries {sorted(osd['state'])}, groups "
          f"{[g['params'] for g in osd['param_groups']]}")
    # torch.optim of the same kind takes it, and steps from it as ctrial's unsharded run's state would.
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4))
    model.load_state_dict(sd["models_state_dict"][0])
    w = [model[0].weight, model[2].weight, model[4].weight]
    b = [model[0].bias, model[2].bias, model[4].bias]
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[opt]
    topt = cls([{"params": w}, {"params": b}], lr=0.01)
    try:
        topt.load_state_dict(osd)
        loaded = diff(topt.state_dict()["state"], osd["state"]) == 0.0
    except Exception as e:  # noqa: BLE001 (any refusal is the failure reported)
        print(f"     torch.optim.{cls.__name__}.load_state_dict: {e}")
        loaded = False
    check(loaded, f"{name}: torch.optim.{cls.__name__} loads the checkpoint's optimizer state")
    # Each rank's share: the greedy partition, and the bytes add up.
    per = ranks(shard, 2)
    whole = ranks(plain, 2)
    sizes = [[(0, 32 * 16), (1, 16 * 32), (2, 4 * 16)], [(3, 32), (4, 16), (5, 4)]]
    want = zero_partition(sizes, 2)
    got = {r: per[r]["params"] for r in per}
    check(all(sorted(got.get(r, [])) == sorted(i for i, o in want.items() if o == r) for r in range(2)),
          f"{name}: each rank holds the state of ZeroRedundancyOptimizer's share ({got}, want "
          f"{ {r: sorted(i for i, o in want.items() if o == r) for r in range(2)} })")
    total = whole.get(0, {}).get("state_bytes", -1)
    shares = [per.get(r, {}).get("state_bytes", 0) for r in range(2)]
    check(total > 0 and sum(shares) == total and max(shares) <= 0.6 * total,
          f"{name}: state bytes per rank {shares}, unsharded {total} on each rank")

# ---- 2: every other optimizer, 3 ranks -----------------------------------------------------------

for opt in ("rmsprop", "adagrad", "adadelta", "adamax", "nadam", "radam") if CPU else ():
    hp = ["--hparam", f"optimizer={opt}"]
    _, _, plain = run(f"{opt}_np3", 3, config(f"{opt}_plain", 20), *hp)
    _, _, shard = run(f"{opt}_np3_shard", 3, config(f"{opt}_shard", 20, shard=True), *hp)
    name = f"{opt}, 3 ranks, sharded vs not"
    compare_losses(name, plain, shard)
    compare(name, plain, shard, 20, 1e-6)
    per = ranks(shard, 3)
    check(sorted(i for r in per.values() for i in r["params"]) == list(range(6)) and len(per) == 3,
          f"{name}: the ranks hold the six parameters' state once between them "
          f"({ {r: p['params'] for r, p in per.items()} })")

# ---- 3: clipping, AMP's scaler, fused AdamW, aggregation -----------------------------------------

# The parameters go back through the gradient buckets' shared memory; with
# messages (the ring, or two hosts of one rank each) by broadcasts.
CASES = [
    ("clip", ["--hparam", "optimizer=adam", "--hparam", "clip=0.05"], 1, {}),
    ("amp_clip", ["--hparam", "optimizer=adam", "--hparam", "amp=true", "--hparam", "clip=0.05"], 1, {}),
    ("fused_amp", ["--hparam", "optimizer=adamw", "--hparam", "fused=true", "--hparam", "amp=true"], 1, {}),
    # A first scale that overflows fp16 for the first steps: the scaler
    # skips steps where any rank's gradients (each its own share's) held an
    # inf, and every rank skips the same ones.
    ("amp_overflow", ["--hparam", "optimizer=adam", "--hparam", "amp=true", "--hparam", "init_scale=1e12"], 1, {}),
    ("fused_overflow", ["--hparam", "optimizer=adamw", "--hparam", "fused=true", "--hparam", "amp=true",
                        "--hparam", "init_scale=1e12"], 1, {}),
    ("agg2", ["--hparam", "optimizer=sgd", "--hparam", "clip=0.05"], 2, {}),
    # Two backwards before each step (each reduced when it ends): the
    # step's gradient is still the sum of both averages.
    ("halves", ["--hparam", "optimizer=adam", "--hparam", "halves=true", "--hparam", "clip=0.05"], 1, {}),
    ("halves_ring", ["--hparam", "optimizer=adam", "--hparam", "halves=true"], 1, {"CTRIAL_GRAD_SYNC": "ring"}),
    ("ring", ["--hparam", "optimizer=adam", "--hparam", "clip=0.05"], 1, {"CTRIAL_GRAD_SYNC": "ring"}),
    ("two_hosts", ["--hparam", "optimizer=adamw", "--hparam", "clip=0.05"], 1, {"CTRIAL_GRAD_SYNC_HOST_RANKS": "1"}),
]
for case, hp, agg, env in CASES:
    _, _, plain = run(f"{case}_np2", 2, config(f"{case}_plain", 40, agg=agg), *hp, env=env)
    _, _, shard = run(f"{case}_np2_shard", 2, config(f"{case}_shard", 40, agg=agg, shard=True), *hp, env=env)
    compare_losses(f"{case}, 2 ranks, sharded vs not", plain, shard)
    compare(f"{case}, 2 ranks, sharded vs not", plain, shard, 40, 1e-6)
    if "clip=0.05" not in hp:
        continue
    # At the step each sharded rank holds the averaged gradients of the
    # parameters it steps and no others (reduced to their owners); the
    # clip norm is still the whole model's (the losses above).
    sp, pp = ranks(shard, 2), ranks(plain, 2)
    check(len(sp) == 2 and all(r["grads_at_clip"] == len(r["params"]) for r in sp.values()) and
          all(r["grads_at_clip"] == 6 for r in pp.values()),
          f"{case}: at the step a sharded rank has the gradients of its own parameters only "
          f"({ {k: (r['grads_at_clip'], len(r['params'])) for k, r in sp.items()} }; unsharded: "
          f"{ {k: r['grads_at_clip'] for k, r in pp.items()} })")

# Two hosts of 2 ranks (shared memory on each, messages between): each
# host sums its ranks' gradients in shared memory and sends the sum to the
# owner's host alone, and each owner's parameters go to one rank of the
# other host, which its host mate copies them from; each rank keeps only
# its own share's gradients at the step.
if CPU:
    hp, env = ["--hparam", "optimizer=adam", "--hparam", "clip=0.05"], {"CTRIAL_GRAD_SYNC_HOST_RANKS": "2"}
    _, _, plain = run("hosts_2x2_np4", 4, config("hosts_2x2_plain", 20), *hp, env=env)
    _, _, shard = run("hosts_2x2_np4_shard", 4, config("hosts_2x2_shard", 20, shard=True), *hp, env=env)
    compare_losses("two hosts of 2 ranks, sharded vs not", plain, shard)
    compare("two hosts of 2 ranks, sharded vs not", plain, shard, 20, 1e-6)
    sp = ranks(shard, 4)
    check(len(sp) == 4 and all(r["grads_at_clip"] == len(r["params"]) for r in sp.values()),
          f"two hosts of 2 ranks: at the step each rank has its own parameters' gradients only "
          f"({ {k: (r['grads_at_clip'], len(r['params'])) for k, r in sp.items()} })")

# ---- 4: checkpoints move between rank counts, sharded or not -------------------------------------

ref_sharded = os.path.join(WORK, "adam_np2_shard")
ref_plain = os.path.join(WORK, "adam_np2")
for name, src, np, shard in (("sharded 2 -> 1 rank", ref_sharded, 1, False),
                             ("sharded 2 -> 3 ranks sharded", ref_sharded, 3, True),
                             ("unsharded 2 -> 2 ranks sharded", ref_plain, 2, True)):
    ck = checkpoints(src).get(50)
    tag = name.replace(" ", "_").replace(">", "")
    if not check(ck is not None, f"{name}: the source run checkpointed at batch 50"):
        continue
    _, _, out = run(tag, np, config(tag, STEPS, ckpt=50, shard=shard), "--hparam", "optimizer=adam", "--resume", ck)
    compare(f"{name}: resumed at 50, at 100", ref_sharded, out, STEPS, 1e-5)

# The same sharded run with its checkpoint at 50 written in the background:
# rank 0's snapshot shares the state it received into its spill file
# instead of copying it (dist.md), and the checkpoint holds the same bits.
_, text, bg = run("adam_np2_shard_bg", 2, config("adam_shard_bg", STEPS, ckpt=50, shard=True), "--hparam",
                  "optimizer=adam", "--background-checkpoints")
check("checkpoint at batch 50 (period, written in the background)" in text,
      "sharded, background checkpoints: the checkpoint at 50 was written in the background")
compare("sharded, checkpoint at 50 written in the background", ref_sharded, bg, 50, 0)
compare("sharded, background checkpoints, at 100", ref_sharded, bg, STEPS, 0)

# ---- 5: LBFGS is refused; a full disk at a checkpoint -----------------------------------------------

if CPU:
    code, text, _ = run("lbfgs_np2_shard", 2, config("lbfgs", 5, shard=True), "--hparam", "optimizer=lbfgs",
                        expect=None)
    check(code not in (0, None) and "LBFGS cannot be sharded" in text and "shard_optimizer" in text,
          f"LBFGS sharded: exit {code}, refused naming LBFGS and shard_optimizer")

# Rank 0 keeps the other rank's share in a file in the checkpoint directory
# while it writes a checkpoint: here a 256 kB file system, which the other
# rank's 1 MB of Adam state does not fit. Rank 0 fails to make a tensor in
# the middle of the exchange; every rank must learn it before the next
# broadcast (none may wait for a message, or take one meant for another
# tensor) and end with its reason, leaving no checkpoint that counts.
# Needs to mount a tmpfs (root, or CAP_SYS_ADMIN).
full = os.path.join(WORK, "full_disk")
ckdir = os.path.join(full, "checkpoints")
os.makedirs(ckdir)
mounted = CPU and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", ckdir],
                                 capture_output=True).returncode == 0
if not mounted:
    print("     full disk skipped: " + ("cannot mount a tmpfs here (not root?)" if CPU else "on the CPU only"))
else:
    try:
        code, text, _ = run("full_disk", 2, config("full", 3, shard=True), "--hparam", "optimizer=adam",
                            "--hparam", "hidden=256", "--hparam", "depth=4", expect=None, limit=120)
        said = [ln for ln in text.splitlines() if "No space left" in ln]
        # mpirun exits with the code of the first rank to end: rank 0's 1
        # (CT_EIO) or rank 1's 5 (CT_EDIST: "rank 0 failed").
        check(code in (1, 5) and len(said) >= 1 and ckdir in said[0] and "rank 0 failed" in text,
              f"a full disk under rank 0's share of a sharded checkpoint: exit {code} (want 1 or 5, no hang or "
              f"signal), "
              f"naming the directory and the reason on rank 0 and rank 0 on rank 1: {said[:1]}")
        check(not checkpoints(full) and not os.listdir(ckdir),
              f"full disk: nothing committed, nothing left ({os.listdir(ckdir)})")
    finally:
        subprocess.run(["umount", ckdir])

# ---- 6: a memory limit one rank cannot train under -----------------------------------------------

# 16 -> 2048, 12 x (2048 -> 2048), 2048 -> 4: 50M parameters (201 MB) in
# twelve layers of one size, six to a rank; Adam's state is 403 MB. Private
# memory (VmData) after each step: one rank holds the weights, their
# gradients and the whole state; a sharded rank the weights and half the
# state (its gradients are in the buckets' shared memory). At the final
# checkpoint rank 0 receives the other half into a file it maps (shard.h),
# not into private memory. Not under the sanitizers, whose shadow memory
# is private memory too, terabytes of it.
big = ["--hparam", "optimizer=adam", "--hparam", "hidden=2048", "--hparam", "depth=12"]
if "ASAN_OPTIONS" in os.environ or not CPU:
    print("     section 6 skipped: " + ("a sanitizer build (ASAN_OPTIONS is set)" if CPU else "on the CPU only"))
else:
    _, _, free_run = run("big_np2_shard", 2, config("big_shard", 3, shard=True), *big, limit=400)
    _, _, one = run("big_np1", 1, config("big_one", 3), *big, limit=400)
    per, alone = ranks(free_run, 2), ranks(one, 1)
    if check(len(per) == 2 and len(alone) == 1, "big model: every rank of both runs reports"):
        total = alone[0]["state_bytes"]
        shares = sorted(r["state_bytes"] for r in per.values())
        check(sum(shares) == total and shares[1] - shares[0] <= 0.1 * total,
              f"big model: each of 2 ranks holds half the state ({shares} bytes of {total})")
        v1 = alone[0]["vm_data_train_kb"] << 10
        v2 = max(r["vm_data_train_kb"] for r in per.values()) << 10
        check(v1 - v2 >= total // 4, f"big model: a sharded rank trains in {(v1 - v2) >> 20} MB less private memory "
              f"than one rank alone ({v2 >> 20} MB against {v1 >> 20} MB; the state is {total >> 20} MB)")
        # The limit: halfway between what a sharded rank and one rank alone
        # used (one rank alone needs the weights' gradients and the other
        # half of the state more).
        kb = (v1 + v2) // 2 >> 10
        print(f"     limit: ulimit -d {kb} (kB of private memory per process)")
        pre = f"ulimit -d {kb}"
        code, text, _ = run("big_np1_limit", 1, config("big_one_limit", 3), *big, expect=None, limit=400, pre=pre)
        check(code not in (0, None) and "can't allocate memory" in text,
              f"big model, 1 rank under the limit: fails (exit {code}) saying memory ran out: "
              f"{[ln for ln in text.splitlines() if 'allocate' in ln][:1]}")
        code, text, out = run("big_np2_limit", 2, config("big_limit", 3, shard=True), *big, expect=0, limit=400, pre=pre)
        if check(3 in checkpoints(out), "big model, 2 ranks sharded under the same limit: trains and checkpoints"):
            a, b = state(out, 3)["optimizers_state_dict"][0], state(free_run, 3)["optimizers_state_dict"][0]
            same = a["state"].keys() == b["state"].keys() and all(
                torch.equal(a["state"][k][n], b["state"][k][n]) for k in a["state"] for n in a["state"][k])
            check(same and len(a["state"]) == 2 * 14,  # a weight and a bias in each of 14 layers
                  f"big model under the limit: the checkpoint holds all "
                  f"{len(a['state'])} entries of the state, equal to the run without a limit")
            left = glob.glob(os.path.join(out, "checkpoints", ".optimizer-state-*"))
            check(not left, f"big model: no spill file is left in the checkpoint directory ({left})")

exit_with_report(T0, WORK)
