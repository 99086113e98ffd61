#!/usr/bin/env python3
"""tests/ops/test_torchvision.py — torchvision's operators from C (ops.h)
against torchvision in Python.

    test_torchvision.py PATH/TO/torchvision_ops

Runs torchvision_ops (see its header) with the venv's libpython and
torchvision's _C.so, then recomputes nms, roi_align (and its input
gradient) and roi_pool with torchvision.ops on the inputs C drew, and
compares: indices and argmax exactly, values within 1e-6 relative. Exits 77
(ctest's skip) saying why when torchvision is not installed in the venv
(tools/setup.sh installs the release matching torch) or libpython is not a
shared library.
"""
import os
import subprocess
import sys
import sysconfig
import tempfile

import torch

try:
    import torchvision
    from torchvision import ops
except ImportError as e:
    print(f"skipped: torchvision is not installed in this Python ({e}); tools/setup.sh installs it")
    sys.exit(77)

LIBPYTHON = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("LDLIBRARY") or "")
TV_C = os.path.join(os.path.dirname(torchvision.__file__), "_C.so")
if not LIBPYTHON.endswith(".so") and ".so." not in LIBPYTHON or not os.path.exists(LIBPYTHON):
    print(f"skipped: this Python's library ({LIBPYTHON}) is not a shared library that C can load")
    sys.exit(77)

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def close(c, p, what):
    d = (c.double() - p.double()).abs()
    ok = c.shape == p.shape and c.dtype == p.dtype and bool((d <= 1e-7 + 1e-6 * p.double().abs()).all())
    check(ok, f"{what}: {list(c.shape)} {c.dtype}, max |diff| {float(d.max()) if d.numel() else 0:.3g}")


with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "tv.pth")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(os.path.dirname(torch.__file__), "lib"))
    p = subprocess.run([sys.argv[1], LIBPYTHON, TV_C, out], capture_output=True, text=True, timeout=300, env=env)
    if p.returncode != 0:
        sys.exit(f"torchvision_ops failed ({p.returncode}): {p.stdout}{p.stderr}")
    c = torch.load(out, weights_only=True)

torch.set_num_threads(1)
print(f"torchvision {torchvision.__version__}, torch {torch.__version__}")
keep = ops.nms(c["boxes"], c["scores"], 0.5)
check(torch.equal(c["keep"], keep), f"nms keeps {c['keep'].tolist()} (Python {keep.tolist()})")
check(0 < keep.numel() < 20, f"nms dropped some boxes and kept some ({keep.numel()} of 20)")
x = c["input"].clone().requires_grad_(True)
align = ops.roi_align(x, c["rois"], (4, 4), spatial_scale=0.5, sampling_ratio=2, aligned=True)
w = torch.cos(torch.arange(0, align.numel(), 1, dtype=torch.float32)).reshape(align.shape)
(align * w).sum().backward()
close(c["align"], align.detach(), "roi_align")
close(c["align_grad"], x.grad, "roi_align's input gradient")
check(bool(x.grad.abs().sum() > 0), "the gradient is not all zeros")
pool, argmax = torch.ops.torchvision.roi_pool(c["input"], c["rois"], 0.5, 3, 3)
close(c["pool"], pool, "roi_pool")
check(torch.equal(c["pool_argmax"], argmax), "roi_pool's argmax")
if FAILURES:
    sys.exit(f"{len(FAILURES)} failure(s)")
print("all passed")
