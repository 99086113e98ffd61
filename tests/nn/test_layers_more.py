"""Parity of the single-call layers after MaxPool2d in nn.h (Conv3d,
ConvTranspose1d/2d, GroupNorm, InstanceNorm1d/2d, LayerNorm over several
dims, AvgPool1d/2d, the adaptive pools, Upsample, Dropout1d/2d, Identity,
Softmax, LogSoftmax, LeakyReLU, ELU, Mish, Hardswish, PReLU, EmbeddingBag)
with torch.nn, case by case as nn_layers_more_dump writes them:

  - the state dict right after torch.manual_seed(seed); nn.X(...): the same
    names in the same order, shapes, dtypes, and bit-identical values;
  - the output, the gradients of every parameter and of the float inputs
    after backward of sum(y * w), and the state afterwards (running
    statistics), within |c - py| <= 1e-7 + 1e-6 |py|, in training and eval
    mode as the case says (dropout masks drawn from the same seed).

usage: test_layers_more.py NN_LAYERS_MORE_DUMP"""
import math
import sys

import torch
import torch.nn as nn

from nn_parity import DTYPES, as_list, compare_state, run_program

ATOL, RTOL = 1e-7, 1e-6


def stack():
    return nn.Sequential(
        nn.ConvTranspose2d(2, 4, 3, stride=2), nn.GroupNorm(2, 4), nn.Mish(),
        nn.Upsample(scale_factor=0.5, mode="bilinear"), nn.AvgPool2d(2, stride=1), nn.Hardswish(),
        nn.AdaptiveMaxPool2d((2, 2)), nn.Dropout2d(0.25), nn.Flatten(), nn.Linear(16, 6), nn.LeakyReLU(0.1),
        nn.PReLU(), nn.ELU(), nn.Identity(), nn.LogSoftmax(1))


def mixed_init():
    return nn.Sequential(
        nn.Conv3d(3, 4, 2), nn.EmbeddingBag(7, 3, mode="sum"), nn.ConvTranspose1d(6, 2, 5),
        nn.InstanceNorm1d(5, affine=True, track_running_stats=True), nn.PReLU(4, 0.5), nn.LayerNorm([2, 3]),
        nn.ConvTranspose2d(4, 4, 3), nn.GroupNorm(1, 3))


# name -> constructor; in step with CASES in layers_more_dump.c (which also
# carries the seed, the input and the train/eval schedule)
CASES = {
    "conv3d": lambda: nn.Conv3d(2, 4, 3, stride=2, padding=1),
    "conv3d_groups_nobias": lambda: nn.Conv3d(4, 6, 2, groups=2, dilation=2, bias=False),
    "conv3d_unbatched": lambda: nn.Conv3d(2, 4, 3, stride=2, padding=1),
    "convt1d": lambda: nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1),
    "convt1d_groups_nobias": lambda: nn.ConvTranspose1d(4, 6, 3, groups=2, dilation=2, bias=False),
    "convt1d_unbatched": lambda: nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1),
    "convt2d": lambda: nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1, output_padding=1),
    "convt2d_groups": lambda: nn.ConvTranspose2d(4, 8, 4, stride=3, groups=4, output_padding=2, dilation=2),
    "convt2d_f64": lambda: nn.ConvTranspose2d(2, 3, 2),
    "groupnorm": lambda: nn.GroupNorm(2, 6),
    "groupnorm_noaffine": lambda: nn.GroupNorm(3, 6, eps=1e-3, affine=False),
    "groupnorm_2d_eval": lambda: nn.GroupNorm(2, 6),
    "instancenorm1d": lambda: nn.InstanceNorm1d(4),
    "instancenorm1d_affine_unbatched": lambda: nn.InstanceNorm1d(4, affine=True),
    "instancenorm2d_track_train": lambda: nn.InstanceNorm2d(3, momentum=0.2, affine=True, track_running_stats=True),
    "instancenorm2d_track_eval": lambda: nn.InstanceNorm2d(3, momentum=0.2, affine=True, track_running_stats=True),
    "instancenorm2d_track_noaffine_unbatched": lambda: nn.InstanceNorm2d(3, track_running_stats=True),
    "instancenorm2d_momentum_none": lambda: nn.InstanceNorm2d(
        3, eps=1e-3, momentum=None, affine=True, track_running_stats=True),
    "instancenorm1d_notrack_eval_f64": lambda: nn.InstanceNorm1d(4, affine=True),
    "layernorm_2": lambda: nn.LayerNorm([4, 5]),
    "layernorm_3_noaffine": lambda: nn.LayerNorm([3, 4, 5], eps=1e-3, elementwise_affine=False),
    "avg_pool1d": lambda: nn.AvgPool1d(3, stride=2, padding=1),
    "avg_pool2d": lambda: nn.AvgPool2d(3, padding=1),
    "avg_pool2d_s1_unbatched": lambda: nn.AvgPool2d(2, stride=1),
    "adaptive_avg_pool1d": lambda: nn.AdaptiveAvgPool1d(4),
    "adaptive_avg_pool2d": lambda: nn.AdaptiveAvgPool2d((3, 2)),
    "adaptive_max_pool2d": lambda: nn.AdaptiveMaxPool2d((2, 3)),
    "upsample_nearest_scale": lambda: nn.Upsample(scale_factor=2.0),
    "upsample_nearest_1d_size": lambda: nn.Upsample(size=(7,)),
    "upsample_nearest_3d": lambda: nn.Upsample(scale_factor=1.5),
    "upsample_linear_align": lambda: nn.Upsample(size=(9,), mode="linear", align_corners=True),
    "upsample_linear_scale": lambda: nn.Upsample(scale_factor=2.5, mode="linear"),
    "upsample_bilinear_scale": lambda: nn.Upsample(scale_factor=1.7, mode="bilinear"),
    "upsample_bilinear_align": lambda: nn.Upsample(size=(7, 9), mode="bilinear", align_corners=True),
    "upsample_bicubic_f64": lambda: nn.Upsample(scale_factor=2.0, mode="bicubic"),
    "upsample_bicubic_align": lambda: nn.Upsample(size=(5, 3), mode="bicubic", align_corners=True),
    "upsample_trilinear": lambda: nn.Upsample(size=(4, 5, 6), mode="trilinear"),
    "upsample_nearest_exact": lambda: nn.Upsample(scale_factor=1.5, mode="nearest-exact"),
    "upsample_area": lambda: nn.Upsample(scale_factor=0.7, mode="area"),
    "dropout1d_train": lambda: nn.Dropout1d(0.4),
    "dropout1d_unbatched_train": lambda: nn.Dropout1d(0.4),
    "dropout1d_eval": lambda: nn.Dropout1d(0.4),
    "dropout2d_train": lambda: nn.Dropout2d(0.5),
    "dropout2d_eval": lambda: nn.Dropout2d(0.5),
    "identity": nn.Identity,
    "softmax": lambda: nn.Softmax(1),
    "log_softmax": lambda: nn.LogSoftmax(-1),
    "leaky_relu": lambda: nn.LeakyReLU(0.2),
    "elu": lambda: nn.ELU(0.7),
    "mish": nn.Mish,
    "hardswish": nn.Hardswish,
    "prelu": lambda: nn.PReLU(1, 0.25),
    "prelu_channels": lambda: nn.PReLU(3, -0.1),
    "embedding_bag_2d": lambda: nn.EmbeddingBag(10, 4, mode="mean"),
    "embedding_bag_sum_offsets_weights": lambda: nn.EmbeddingBag(12, 3, mode="sum"),
    "embedding_bag_mean_offsets": lambda: nn.EmbeddingBag(10, 4, mode="mean"),
    "embedding_bag_max_offsets": lambda: nn.EmbeddingBag(9, 5, mode="max"),
    "stack": stack,
    "stack_eval": stack,
    "mixed_init": mixed_init,
}

NAMES = {"float32": torch.float32, "float64": torch.float64}


def close(a, b):
    return abs(a - b) <= ATOL + RTOL * abs(b)


def compare_tensor(label, entry, t):
    """(failures, worst |c - py| / (1e-7 + 1e-6 |py|)); 0 when identical."""
    if t is None or entry is None:
        if (t is None) != (entry is None):
            print(f"{label}: {'C' if entry is None else 'Python'} has no tensor")
            return 1, math.inf
        return 0, 0.0
    if entry["shape"] != list(t.shape):
        print(f"{label}: shape {entry['shape']} != Python {list(t.shape)}")
        return 1, math.inf
    if entry["dtype"] != DTYPES.get(t.dtype):
        print(f"{label}: dtype {entry['dtype']} != Python {t.dtype}")
        return 1, math.inf
    ref = as_list(t)
    worst, bad = 0.0, []
    for i, (a, b) in enumerate(zip(entry["values"], ref)):
        if a == b or (math.isnan(a) and math.isnan(b)):
            continue
        worst = max(worst, abs(a - b) / (ATOL + RTOL * abs(b)))
        if not close(a, b):
            bad.append(i)
    if bad:
        i = bad[0]
        print(f"{label}: {len(bad)} of {len(ref)} values out of tolerance, first at {i}: "
              f"C {entry['values'][i]!r} Python {ref[i]!r}")
        return 1, worst
    return 0, worst


def compare_state_after(name, c_state, m):
    sd = m.state_dict()
    if [e["name"] for e in c_state] != list(sd):
        print(f"{name}: state names after the forward differ: C {[e['name'] for e in c_state]}, Python {list(sd)}")
        return 1, math.inf
    failures, worst = 0, 0.0
    for e in c_state:
        f, d = compare_tensor(f"{name}: state {e['name']}", e, sd[e["name"]])
        failures += f
        worst = max(worst, d)
    return failures, worst


def run_case(case):
    name = case["name"]
    torch.manual_seed(case["seed"])
    m = CASES[name]()
    failures, _ = compare_state(f"{name} (initial state)", case["init"], m)
    if case["type"] != type(m).__name__:
        print(f"{name}: type {case['type']} != Python {type(m).__name__}")
        failures += 1
    if "input" not in case:
        print(f"{name}: {'FAILED' if failures else 'ok'}; initial state only ({len(case['init'])} entries)")
        return failures, 0.0
    inp = case["input"]
    dtype = NAMES[inp["dtype"]]
    if dtype != torch.float32:
        m = m.to(dtype)
    offsets = psw = None
    if inp["kind"] == "randn":
        x = torch.randn(inp["shape"], dtype=dtype, requires_grad=True)
    else:
        x = torch.randint(0, inp["high"], inp["shape"])
        if inp["kind"] == "bag":
            offsets = torch.tensor(inp["offsets"], dtype=torch.int64)
            if inp["psw"]:
                psw = torch.randn(inp["shape"], requires_grad=True)

    def run():
        return m(x) if inp["kind"] != "bag" else m(x, offsets, per_sample_weights=psw)

    for _ in range(case["pre"]):
        run()
    if case["eval"]:
        m.eval()
    y = run()
    w = torch.randn(y.shape, dtype=y.dtype)
    (y * w).sum().backward()

    f, worst = compare_tensor(f"{name}: output", case["output"], y)
    failures += f
    params = list(m.named_parameters())
    if [g["name"] if g else None for g in case["grads"]] != [n if p.grad is not None else None for n, p in params]:
        print(f"{name}: parameters or their gradients differ: C {[g and g['name'] for g in case['grads']]}, "
              f"Python {[n for n, _ in params]}")
        failures += 1
    else:
        for g, (pname, p) in zip(case["grads"], params):
            f, d = compare_tensor(f"{name}: grad of {pname}", g, p.grad)
            failures += f
            worst = max(worst, d)
    for key, t in (("input_grad", x.grad), ("psw_grad", psw.grad if psw is not None else None)):
        f, d = compare_tensor(f"{name}: {key}", case.get(key), t)
        failures += f
        worst = max(worst, d)
    f, d = compare_state_after(name, case["state"], m)
    failures += f
    worst = max(worst, d)
    print(f"{name}: {'FAILED' if failures else 'ok'}; worst deviation {worst:.3g} of the tolerance")
    return failures, worst


def main():
    data = run_program(sys.argv[1])
    names = [c["name"] for c in data["cases"]]
    failures = 0
    if sorted(names) != sorted(CASES):
        print(f"cases differ: C {names}, Python {list(CASES)}")
        failures += 1
    overall = 0.0
    for case in data["cases"]:
        f, d = run_case(case)
        failures += f
        overall = max(overall, d)
    print(f"layers_more parity: {len(names)} cases, worst deviation {overall:.3g} of "
          f"|c - py| <= {ATOL} + {RTOL} |py|, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
