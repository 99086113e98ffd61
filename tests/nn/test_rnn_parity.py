#!/usr/bin/env python3
"""nn.RNN, nn.LSTM and nn.GRU: ctrial's (src/nn/rnn.c) against torch's.

    test_rnn_parity.py PATH/TO/rnn_dump

Runs rnn_dump (the file's format is in rnn_dump.c) and, for every case of
CASES, builds the same torch.nn layer after the same torch.manual_seed and
requires:
  - the initial state dict bit-identical (torch.equal, same dtypes), with
    the same keys in the same order, and the same type name;
  - after load_state_dict(C's initial state, strict=True), the same forward
    on C's input and hx (torch.manual_seed(seed + 1000) just before it, for
    dropout's draws) to give the same structure, shapes and dtypes, and
    values within |c - py| <= 1e-7 + 1e-6 * |py|;
  - the same for the gradients of sum_k (out_k * weight_k).sum() (C's
    weights) with respect to the input, hx (h_0 and c_0) and every
    parameter.
The *_autocast_* cases run the forward under torch.autocast("cpu", dtype)
on both sides (ct_autocast_enter in C, as ct_ctx_use_amp does): the same
dtypes out and the same values. Then, for every case of ERRORS, that the
same construction or call fails
in torch too, with C's message being torch's after the layer's name (or the
constructor's). Prints one line per case; exits non-zero if any fails.
"""
import contextlib
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn

RTOL, ATOL = 1e-6, 1e-7
IN, HID, T, N = 4, 5, 6, 3


def rnn(**kw):
    return nn.RNN(IN, HID, **kw)


def lstm(**kw):
    return nn.LSTM(IN, HID, **kw)


def gru(**kw):
    return nn.GRU(IN, HID, **kw)


BIDIR_BF = dict(num_layers=2, bidirectional=True, batch_first=True)

# name -> (seed, constructor, how forward gets hx: None (not given), "pos",
# "kw", "none" (None positional)); train unless "eval" in the name; float64
# when "f64" in it. In step with CASES in rnn_dump.c.
CASES = {
    "rnn_tanh": (1, lambda: rnn(), None),
    "rnn_relu": (2, lambda: rnn(nonlinearity="relu"), None),
    "lstm": (3, lambda: lstm(), None),
    "gru": (4, lambda: gru(), None),
    "rnn_2l_bidir_bf": (5, lambda: rnn(**BIDIR_BF), None),
    "lstm_2l_bidir_bf": (6, lambda: lstm(**BIDIR_BF), None),
    "gru_2l_bidir_bf": (7, lambda: gru(**BIDIR_BF), None),
    "rnn_relu_dropout": (8, lambda: rnn(nonlinearity="relu", num_layers=3, dropout=0.3), None),
    "lstm_dropout_bidir": (9, lambda: lstm(num_layers=2, bidirectional=True, dropout=0.3), None),
    "gru_dropout": (10, lambda: gru(num_layers=3, dropout=0.3), None),
    "rnn_unbatched": (11, lambda: rnn(), None),
    "lstm_unbatched": (12, lambda: lstm(num_layers=2), None),
    "gru_unbatched_bf_hx": (13, lambda: gru(batch_first=True), "pos"),
    "lstm_unbatched_bidir_hx": (14, lambda: lstm(bidirectional=True), "pos"),
    "rnn_hx": (15, lambda: rnn(num_layers=2, bidirectional=True), "pos"),
    "lstm_hx": (16, lambda: lstm(num_layers=2, bidirectional=True), "pos"),
    "gru_hx_kw": (17, lambda: gru(num_layers=2), "kw"),
    "lstm_hx_kw_bf": (18, lambda: lstm(batch_first=True), "kw"),
    "lstm_hx_none": (19, lambda: lstm(), "none"),
    "lstm_eval_dropout": (20, lambda: lstm(num_layers=2, dropout=0.5), None),
    "gru_eval": (21, lambda: gru(), "pos"),
    "lstm_f64": (22, lambda: lstm(num_layers=2, bidirectional=True), "pos"),
    "gru_f64_dropout": (23, lambda: gru(num_layers=2, dropout=0.3), None),
    "rnn_f64": (24, lambda: rnn(), None),
    "lstm_nobias": (25, lambda: lstm(num_layers=2, bias=False), "pos"),
    "gru_nobias_bidir": (26, lambda: gru(bidirectional=True, bias=False), None),
    "rnn_big_seed": (123456789012, lambda: rnn(num_layers=2), None),
    # The forward under torch.autocast("cpu", dtype): the same ops, so the
    # same dtypes out (the GRU's in float32: aten::gru is on autocast's
    # float32 list) and, the kernels being the same, the same values.
    "rnn_autocast_bf16": (27, lambda: rnn(num_layers=2), "pos"),
    "lstm_autocast_bf16": (28, lambda: lstm(num_layers=2, bidirectional=True), "pos"),
    "gru_autocast_bf16": (29, lambda: gru(batch_first=True), None),
    "rnn_autocast_fp16": (30, lambda: rnn(nonlinearity="relu"), None),
    "gru_autocast_fp16": (31, lambda: gru(num_layers=2), "kw"),
    "lstm_autocast_bf16_dropout": (32, lambda: lstm(num_layers=2, dropout=0.3), None),
}


def autocast_of(name):
    """torch.autocast for a case named *_autocast_bf16 or *_fp16, else a no-op."""
    for tag, dtype in (("autocast_bf16", torch.bfloat16), ("autocast_fp16", torch.float16)):
        if tag in name:
            return torch.autocast("cpu", dtype=dtype)
    return contextlib.nullcontext()


def call(make, inp, hx=None, cx=None, dtype=torch.float32):
    """make()(zeros of inp's shape, hx) for an error case."""
    m = make()
    x = torch.zeros(inp, dtype=dtype)
    if hx is None:
        return m(x)
    h = torch.zeros(hx)
    return m(x, h if cx is None else (h, torch.zeros(cx)))


# name -> (prefix of C's message, what fails in torch). In step with ERRORS
# in rnn_dump.c.
ERRORS = {
    "lstm_input_size": ("LSTM", lambda: call(lstm, [T, N, 5])),
    "lstm_4d": ("LSTM", lambda: call(lstm, [2, T, N, IN])),
    "rnn_1d": ("RNN", lambda: call(rnn, [IN])),
    "gru_unbatched_input_size": ("GRU", lambda: call(gru, [T, 3])),
    "gru_hidden_size": ("GRU", lambda: call(gru, [T, N, IN], [1, 2, HID])),
    "gru_unbatched_hx_3d": ("GRU", lambda: call(gru, [T, IN], [1, 1, HID])),
    "rnn_batched_hx_2d": ("RNN", lambda: call(rnn, [T, N, IN], [1, HID])),
    "rnn_unbatched_hx_size": ("RNN", lambda: call(rnn, [T, IN], [1, 4])),
    "lstm_cell_size": ("LSTM", lambda: call(lambda: lstm(num_layers=2, bidirectional=True), [T, N, IN],
                                           [4, N, HID], [4, N, 6])),
    "lstm_hidden_layers": ("LSTM", lambda: call(lambda: lstm(num_layers=2, bidirectional=True), [T, N, IN],
                                               [2, N, HID], [4, N, HID])),
    "lstm_unbatched_cx_3d": ("LSTM", lambda: call(lstm, [T, IN], [1, HID], [1, 1, HID])),
    "lstm_batched_hx_2d": ("LSTM", lambda: call(lstm, [T, N, IN], [1, HID], [1, HID])),
    "lstm_unbatched_hidden": ("LSTM", lambda: call(lstm, [T, IN], [2, HID], [1, HID])),
    "rnn_dtype": ("RNN", lambda: call(rnn, [T, N, IN], dtype=torch.float64)),
    "rnn_nonlinearity": ("ct_nn_rnn", lambda: rnn(nonlinearity="sigmoid")),
    "gru_dropout_range": ("ct_nn_gru", lambda: gru(dropout=1.5)),
    "lstm_num_layers": ("ct_nn_lstm", lambda: lstm(num_layers=0)),
    "rnn_input_size_zero": ("ct_nn_rnn", lambda: nn.RNN(0, HID)),
    "gru_hidden_size_zero": ("ct_nn_gru", lambda: nn.GRU(IN, 0)),
    "lstm_autocast_fp16": ("LSTM", lambda: autocast_call(torch.float16, lstm, [T, N, IN])),
}


def autocast_call(dtype, make, inp):
    with torch.autocast("cpu", dtype=dtype):
        return call(make, inp)


WORST = [0.0]  # the largest |c - py| seen, printed at the end (expected 0: the same libtorch)


def close(c, py):
    if c.shape != py.shape or c.dtype != py.dtype:
        return False
    dev = (c - py).abs()
    WORST[0] = max(WORST[0], float(dev.max()) if dev.numel() else 0.0)
    return bool((dev <= ATOL + RTOL * py.abs()).all())


def leaves(v):
    """The tensors of a (nested) tuple, in order."""
    if isinstance(v, torch.Tensor):
        return [v]
    return [t for e in v for t in leaves(e)]


def structure(v):
    if isinstance(v, torch.Tensor):
        return "T"
    return "(" + ", ".join(structure(e) for e in v) + ")"


def check_case(name, rec):
    """Problems found in one case (empty when it passes)."""
    seed, make, hx_mode = CASES[name]
    torch.manual_seed(seed)
    m = make()
    problems = []
    if rec["type"] != type(m).__name__:
        problems.append(f"type {rec['type']!r} != {type(m).__name__!r}")
    sd, c_sd = m.state_dict(), rec["state0"]
    if list(sd.keys()) != list(c_sd.keys()):
        return problems + [f"state keys {list(c_sd.keys())} != Python {list(sd.keys())}"]
    for k, t in sd.items():
        if c_sd[k].dtype != t.dtype or not torch.equal(c_sd[k], t):
            problems.append(f"initial {k} differs")
    m.load_state_dict(c_sd, strict=True)
    if "f64" in name:
        m.double()
    m.train("eval" not in name)

    x = rec["input"].clone().requires_grad_()
    inputs = {"input": x}
    hx = None
    if hx_mode in ("pos", "kw"):
        inputs["hx"] = rec["hx"].clone().requires_grad_()
        hx = inputs["hx"]
        if isinstance(m, nn.LSTM):
            inputs["cx"] = rec["cx"].clone().requires_grad_()
            hx = (inputs["hx"], inputs["cx"])
    torch.manual_seed(seed + 1000)
    with autocast_of(name):
        if hx_mode == "pos":
            y = m(x, hx)
        elif hx_mode == "kw":
            y = m(x, hx=hx)
        elif hx_mode == "none":
            y = m(x, None)
        else:
            y = m(x)

    c_out = rec["out"]
    if structure(y) != structure(c_out):
        return problems + [f"output structure {structure(c_out)} != Python {structure(y)}"]
    for i, (c, py) in enumerate(zip(leaves(c_out), leaves(y))):
        if not close(c, py.detach()):
            problems.append(f"output {i}: C {list(c.shape)} {c.dtype} differs from Python "
                            f"{list(py.shape)} {py.dtype}")
    loss = sum((t * w).sum() for t, w in zip(leaves(y), rec["weights"]))
    loss.backward()

    py_grads = dict((k, v.grad) for k, v in inputs.items())
    py_grads.update((k, p.grad) for k, p in m.named_parameters())
    c_grads = rec["grads"]
    if list(c_grads.keys()) != list(py_grads.keys()):
        return problems + [f"gradients of {list(c_grads.keys())} != Python {list(py_grads.keys())}"]
    for k, g in py_grads.items():
        if g is None or not close(c_grads[k], g):
            problems.append(f"gradient of {k} differs")
    return problems


def check_error(name, c_msg):
    prefix, fails = ERRORS[name]
    try:
        fails()
    except (RuntimeError, ValueError) as e:
        py = str(e).replace("RNN input dtype", "input dtype")  # C names the layer in front
        want = py if py.startswith(f"{prefix}: ") else f"{prefix}: {py}"
        return [] if c_msg == want else [f"message {c_msg!r} != {want!r}"]
    return ["torch does not fail"]


def report(label, problems):
    print(f"{'ok  ' if not problems else 'FAIL'} {label}")
    for p in problems:
        print(f"       {p}")
    return 1 if problems else 0


def main():
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rnn.pth")
        proc = subprocess.run([sys.argv[1], out], capture_output=True, text=True)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            raise SystemExit(f"{sys.argv[1]} failed with exit code {proc.returncode}")
        data = torch.load(out, weights_only=True)
    failures = 0
    for table, got, check in ((CASES, data["cases"], check_case), (ERRORS, data["errors"], check_error)):
        if list(got.keys()) != list(table.keys()):
            print(f"FAIL the cases differ: C {list(got.keys())}\n     Python {list(table.keys())}")
            failures += 1
        for name in table:
            if name in got:
                failures += report(name, check(name, got[name]))
    print(f"{failures} failure(s); largest |c - py| of outputs and gradients: {WORST[0]:.3g}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
