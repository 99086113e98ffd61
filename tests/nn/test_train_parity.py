"""Training parity: nn_train_dump.c's runs (MLP with active dropout, CNN with
BatchNorm; SGD momentum 0.9, Adam, AdamW; fixed seeded data) repeated in
torch. Every step's loss and the final state dict (weights and BatchNorm
running statistics) must agree within 1e-6 relative; the largest deviation is
printed.

usage: test_train_parity.py NN_TRAIN_DUMP"""
import sys

import torch
import torch.nn.functional as F

from nn_parity import Net, compare_state, mlp, rel_dev, run_program

RTOL = 1e-6


def make_optim(kind, model):
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if kind == "adam":
        return torch.optim.Adam(model.parameters(), lr=1e-3)
    return torch.optim.AdamW(model.parameters(), lr=1e-3)


def replay(run, steps):
    torch.manual_seed(run["seed"])
    if run["model"] == "mlp":
        model = mlp(0.5)
        x = torch.randn(64, 784)
        y = torch.randint(0, 10, (64,))
    else:
        model = Net()
        x = torch.randn(32, 1, 28, 28)
        y = torch.randint(0, 10, (32,))
    opt = make_optim(run["optim"], model)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


def main():
    data = run_program(sys.argv[1])
    steps = data["steps"]
    failures = 0
    overall = 0.0
    for run in data["runs"]:
        label = f"{run['model']}/{run['optim']}"
        model, losses = replay(run, steps)
        loss_dev = max(rel_dev(a, b) for a, b in zip(run["losses"], losses))
        if len(run["losses"]) != steps or loss_dev > RTOL:
            print(f"{label}: losses differ (max relative deviation {loss_dev:.3g})")
            print(f"  C:      {run['losses']}")
            print(f"  Python: {losses}")
            failures += 1
        f, state_dev = compare_state(label, run["state"], model, rtol=RTOL)
        failures += f
        overall = max(overall, loss_dev, state_dev)
        print(f"{label}: loss {losses[0]:.6f} -> {losses[-1]:.6f}; max relative deviation: "
              f"losses {loss_dev:.3g}, final state {state_dev:.3g}")
    print(f"training parity: max relative deviation over all runs {overall:.3g} (tolerance {RTOL})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
