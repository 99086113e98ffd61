"""A closure in ct_ctx_step_optimizer_with (ct_step_opts.closure) against
torch.optim (torch 2.11): tests/loop/closure.c trains its trial through
ct_fit on the CPU, and torch replays it here with the same data, the same
initial parameters (read from C's run) and the same closure.

    test_closure.py LOOP_CLOSURE_EXE

For each run (lbfgs: LBFGS with strong_wolfe, whose line search evaluates
the closure a data-dependent number of times; lbfgs_autocast: the same with
the closure's forward under a bf16 autocast region of its own; sgd_mixed:
SGD with momentum, step(closure) on even batches and backward + step() on
odd ones):
  * every batch's closure_loss (what step(closure) returns) and the loss
    metric in metrics.jsonl are torch's,
  * the closure ran as many times per batch as torch's (LBFGS: more than
    once on some batches, so ct_ctx_backward runs several times a batch),
  * every gradient is None after the step (auto_zero_grads),
  * the final parameters are torch's.
"""
import json
import math
import os
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import FAILURES, check, run_cmd  # noqa: E402

torch.set_num_threads(1)

IN, HID, OUT, RECORDS, BATCH, BATCHES = 3, 4, 2, 24, 8, 6
SHAPES = [[HID, IN], [HID], [OUT, HID], [OUT]]
RTOL = 1e-6

X = torch.tensor([[math.sin(0.37 * (IN * i + j)) for j in range(IN)] for i in range(RECORDS)], dtype=torch.float32)
Y = torch.tensor([[math.cos(0.23 * (OUT * i + k)) for k in range(OUT)] for i in range(RECORDS)], dtype=torch.float32)


def unflatten(values):
    params, at = [], 0
    for shape in SHAPES:
        n = math.prod(shape)
        params.append(torch.tensor(values[at:at + n], dtype=torch.float32).reshape(shape).requires_grad_())
        at += n
    return params


def torch_run(name, initial):
    """The trial in torch: per batch the loss step(closure) returned (or the
    loss before a plain step), the closure's calls, whether the gradients
    were None after the step; and the final parameters, flattened."""
    params = unflatten(initial)
    if name.startswith("lbfgs"):
        opt = torch.optim.LBFGS(params, lr=1, max_iter=5, history_size=4, line_search_fn="strong_wolfe")
    else:
        opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    losses, evals, grads_none = [], [], []
    for b in range(BATCHES):
        at = (b * BATCH) % RECORDS  # the loader's order: no shuffle, passes repeat
        x, y = X[at:at + BATCH], Y[at:at + BATCH]
        calls = [0]

        def mse():
            return F.mse_loss(F.linear(torch.tanh(F.linear(x, params[0], params[1])), params[2], params[3]), y)

        def closure():
            calls[0] += 1
            opt.zero_grad()
            with torch.autocast("cpu", torch.bfloat16, enabled=name == "lbfgs_autocast"):
                loss = mse()
            loss.backward()
            return loss

        if name == "sgd_mixed" and b % 2 == 1:
            loss = mse()
            loss.backward()
            opt.step()
        else:
            loss = opt.step(closure)
        opt.zero_grad(set_to_none=True)  # Determined's auto_zero_grads
        losses.append(float(loss))
        evals.append(calls[0])
        grads_none.append(all(p.grad is None for p in params))
    return losses, evals, grads_none, torch.cat([p.detach().flatten() for p in params])


def close(a, b):
    return len(a) == len(b) and all(abs(u - v) <= RTOL * max(abs(u), abs(v), 1e-3) for u, v in zip(a, b))


def float32(values):
    """C's parameters (printed with 9 digits: float32 exactly) as float32."""
    return torch.tensor(values, dtype=torch.float32)


def main():
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        res = run_cmd([exe, "parity", tmp], 120, merge=True)
        if not check(res.returncode == 0, f"loop_closure parity ran (exit {res.returncode})"):
            print(res.stdout[-3000:])
            sys.exit(1)
        for name in ("lbfgs", "lbfgs_autocast", "sgd_mixed"):
            with open(os.path.join(tmp, name + ".json")) as f:
                c = json.load(f)
            with open(os.path.join(tmp, name, "metrics.jsonl")) as f:
                reported = [json.loads(line) for line in f]
            reported = [r["metrics"]["loss"] for r in reported if r["group"] == "training"]
            losses, evals, grads_none, final = torch_run(name, c["initial"])
            check(len(c["initial"]) == sum(math.prod(s) for s in SHAPES), f"{name}: {len(c['initial'])} parameters")
            check(c["evals"] == evals, f"{name}: closure calls per batch {c['evals']} (torch: {evals})")
            if name.startswith("lbfgs"):
                check(max(evals) > 1, f"{name}: the line search re-evaluated the closure ({evals})")
            check(close(c["losses"], losses), f"{name}: closure_loss per batch {c['losses']} (torch: {losses})")
            check(close(reported, losses), f"{name}: reported losses {reported} (torch: {losses})")
            check(c["grads_none"] == grads_none == [True] * BATCHES, f"{name}: gradients None after each step")
            c_final = float32(c["final"])
            dev = (c_final - final).abs().max().item()
            check(torch.allclose(c_final, final, rtol=RTOL, atol=RTOL * 1e-3),
                  f"{name}: final parameters are torch's (max abs deviation {dev:.3g})")
            check(not torch.equal(c_final, float32(c["initial"])), f"{name}: the parameters moved")
    if FAILURES:
        print(f"{len(FAILURES)} failed")
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
