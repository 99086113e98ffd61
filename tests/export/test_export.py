"""ct_nn_load_exported against PyTorch: programs exported here, run in C by
export_tool (forward and backward), compared with the same nn.Module in
Python.

    test_export.py EXPORT_TOOL parity|errors

parity: for torchvision's resnet18 and mobilenet_v3_small, a ViT (nn.
TransformerEncoder), a GPT (causal SDPA, tied embedding), an nn.LSTM
model and a module with several inputs, a keyword, dict and tuple outputs,
a no_grad block, a lifted constant, a frozen parameter and buffers:
  - train mode, at a batch size other than the one exported (the batch is
    dynamic): outputs, every parameter's gradient and the state dict after
    two calls (BatchNorm's running statistics and num_batches_tracked)
    equal Python's, bit for bit (dropout's masks drawn from the same seed);
  - eval mode, both from an archive with an "eval" program
    (tools/export_model.py) and from a single program with its flags
    rewritten: the outputs equal the module's in eval();
  - the state-dict names are the module's, in its order.
errors: bad inputs and bad archives are named errors, never a crash.
"""
import copy
import json
import os
import shutil
import subprocess
import sys
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402

SRC = os.environ.get("CTRIAL_SOURCE_DIR", os.path.join(HERE, "..", ".."))
TOOL = sys.argv[1]
WORK = os.path.join(os.environ.get("CTRIAL_BUILD_DIR", "/tmp"), "tests", "export", sys.argv[2])  # one per mode
failures = []


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


def path(name):
    return os.path.join(WORK, name)


def export(model, args, name, kwargs=None, programs=("model",), batch_dims=None):
    """Exports model (in train() for "model", eval() for "eval") to NAME.pt2
    with dimension 0 of every tensor input dynamic (batch_dims: which)."""
    import inspect
    b = torch.export.Dim("batch", min=1, max=4096)
    dims = batch_dims if batch_dims is not None else [isinstance(a, torch.Tensor) for a in args]
    names = list(inspect.signature(model.forward).parameters)
    dyn = {names[i]: ({0: b} if d else None) for i, d in enumerate(dims)}
    dyn.update({k: None for k in (kwargs or {})})
    eps = {}
    for prog in programs:
        model.train(prog == "model")
        eps[prog] = torch.export.export(model, tuple(args), kwargs or {}, dynamic_shapes=dyn)
    model.train()
    from torch.export.pt2_archive._package import package_pt2
    package_pt2(path(name + ".pt2"), exported_programs=eps)
    return path(name + ".pt2")


def run_tool(*argv, expect_fail=False):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([TOOL, *argv], capture_output=True, text=True, env=env, timeout=300)
    if expect_fail:
        return p
    if p.returncode:
        raise RuntimeError(f"export_tool {' '.join(argv)}: {p.stderr.strip()}")
    return p


def call_c(archive, args, kwargs=None, calls=1, eval_mode=False, seed=None, extra=(), autocast=False, load=None):
    inp, out = path("in.pth"), path("out.pth")
    d = {"args": list(args), "kwargs": kwargs or {}, "calls": calls}
    if load is not None:
        d["load"] = load
    if autocast:
        d["autocast"] = "bf16"
    if seed is not None:
        d["seed"] = seed
    torch.save(d, inp)
    run_tool("forward", archive, inp, out, *(["--eval"] if eval_mode else []), *extra)
    return torch.load(out, weights_only=True)


def tensors_of(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, dict):
        return [t for x in v.values() for t in tensors_of(x)]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in tensors_of(x)]
    return []


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)


def parity(name, make, args, run_args, kwargs=None):
    torch.manual_seed(0)
    model = make()
    ref, fresh = copy.deepcopy(model), copy.deepcopy(model)
    archive = export(model, args, name, kwargs, programs=("model", "eval"))
    single = export(copy.deepcopy(model), args, name + "_single", kwargs)

    # train mode: two calls (running statistics move twice), then backward
    # of the sum of the outputs
    got = call_c(archive, run_args, kwargs, calls=2, seed=7)
    torch.manual_seed(7)
    ref.train()
    for _ in range(2):
        out = ref(*run_args, **(kwargs or {}))
    outs, gouts = tensors_of(out), tensors_of(got["out"])
    ok = len(outs) == len(gouts) and all(same(a, b.to(a.dtype)) and a.dtype == b.dtype for a, b in zip(outs, gouts))
    if not ok:
        fail(f"{name}: train-mode outputs differ: " + ", ".join(
            f"{(a.double() - b.double()).abs().max().item():.3g}" for a, b in zip(outs, gouts)))
    sd, gsd = ref.state_dict(), got["state"]
    if list(sd) != list(gsd):
        fail(f"{name}: state-dict names or order differ: {list(sd)[:6]} vs {list(gsd)[:6]}")
    else:
        bad = [k for k in sd if not same(sd[k], gsd[k])]
        if bad:
            fail(f"{name}: state after two calls differs in {bad[:5]}")
    sum(o.sum() for o in outs if o.requires_grad).backward()
    grads = dict(ref.named_parameters())
    bad = [n for n, p in grads.items() if p.grad is not None and (n not in got["grads"] or not same(p.grad, got["grads"][n]))]
    missing = [n for n in got["grads"] if n not in grads]
    if bad or missing:
        fail(f"{name}: gradients differ for {bad[:5]} (unknown {missing[:3]})")

    # eval mode, from the archive's weights, under no_grad (as the loop
    # validates): the "eval" program, and the single program rewritten.
    # Python's eval-mode fast paths of nn.TransformerEncoderLayer are off:
    # the graph traced the layer's own code (nn.h says the same of
    # ctrial's own layers)
    fresh.eval()
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        want = tensors_of(fresh(*run_args, **(kwargs or {})))
    torch.backends.mha.set_fastpath_enabled(True)
    for which, arch in (("eval program", archive), ("rewritten flags", single)):
        got_e = tensors_of(call_c(arch, run_args, kwargs, eval_mode=True)["out"])
        if len(got_e) != len(want) or not all(same(a, b) for a, b in zip(want, got_e)):
            fail(f"{name}: eval mode ({which}) differs from the module's eval(): " + ", ".join(
                f"{(a.double() - b.double()).abs().max().item():.3g}" for a, b in zip(want, got_e)))
    print(f"ok   {name}: train outputs, state, gradients and eval ({len(sd)} state entries) equal PyTorch's")


def autocast_parity(name, make, args, run_args):
    """Under torch.autocast("cpu", torch.bfloat16) the nodes are dispatcher
    calls, so autocast casts them as it casts eager PyTorch's."""
    torch.manual_seed(0)
    model = make()
    ref = copy.deepcopy(model)
    archive = export(model, args, name + "_amp")
    got = tensors_of(call_c(archive, run_args, autocast=True, seed=3)["out"])
    torch.manual_seed(3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = tensors_of(ref(*run_args))
    if len(got) != len(want) or not all(same(a, b) for a, b in zip(want, got)):
        fail(f"{name}: under bf16 autocast the outputs differ from PyTorch's: " +
             ", ".join(f"{a.dtype} {b.dtype}" for a, b in zip(want, got)))
    else:
        print(f"ok   {name}: under bf16 autocast, {want[0].dtype} outputs equal PyTorch's")


def run_parity():
    import torchvision
    torch.manual_seed(1)
    img = torch.randn(4, 3, 32, 32)
    tok = torch.randint(0, 65, (4, 32))
    parity("resnet18", lambda: torchvision.models.resnet18(num_classes=10), (img,), (torch.randn(3, 3, 32, 32),))
    parity("mobilenet_v3_small", lambda: torchvision.models.mobilenet_v3_small(num_classes=10), (img,),
           (torch.randn(3, 3, 32, 32),))
    parity("vit", models.ViT, (img,), (torch.randn(3, 3, 32, 32),))
    parity("gpt", lambda: models.GPT(dropout=0.1), (tok,), (torch.randint(0, 65, (3, 32)),))
    parity("lstm", models.LSTMLM, (tok,), (torch.randint(0, 65, (5, 32)),))
    x, mask = torch.randn(4, 8), torch.rand(4, 4) > 0.3
    parity("fancy", models.Fancy, (x, mask), (torch.randn(6, 8), torch.rand(6, 4) > 0.3), kwargs={"temperature": 2.0})

    autocast_parity("gpt", lambda: models.GPT(dropout=0.1), (tok,), (torch.randint(0, 65, (3, 32)),))

    # a warm start: another module's state dict (other weights, other
    # running statistics) loaded into the exported module, strict
    torch.manual_seed(5)
    other = torchvision.models.resnet18(num_classes=10)
    with torch.no_grad():
        other(torch.randn(8, 3, 32, 32))  # running statistics that differ from the archive's
    other.eval()
    x = torch.randn(2, 3, 32, 32)
    got = call_c(path("resnet18.pt2"), (x,), eval_mode=True, load=other.state_dict())["out"]
    with torch.no_grad():
        want = other(x)
    if not same(want, got):
        fail(f"warm start: a Python state dict loaded into the exported resnet18 gives other outputs "
             f"({(want - got).abs().max().item():.3g})")
    else:
        print("ok   warm start: resnet18's Python state dict loads into the exported module (strict) and gives "
              "its outputs")
    autocast_parity("resnet18", lambda: torchvision.models.resnet18(num_classes=10), (img,),
                    (torch.randn(2, 3, 32, 32),))

    # tools/export_model.py: two programs, the weights stored once, which
    # torch reads back and ctrial runs as the module's eval()
    archive = path("tool_gpt.pt2")
    subprocess.run([sys.executable, os.path.join(SRC, "tools", "export_model.py"),
                    os.path.join(HERE, "models.py") + ":GPT", "--kwargs", '{"dropout": 0.1}', "--input", "int64[N,32]",
                    "--seed", "4", "-o", archive], check=True, capture_output=True, text=True)
    from torch.export.pt2_archive._package import load_pt2
    eps = load_pt2(archive).exported_programs
    weights = [n for n in zipfile.ZipFile(archive).namelist() if "/data/weights/weight_" in n]
    torch.manual_seed(4)
    gpt = models.GPT(dropout=0.1).eval()
    x = torch.randint(0, 65, (3, 32))
    with torch.no_grad():
        want = gpt(x)
    got = call_c(archive, (x,), eval_mode=True)["out"]
    if sorted(eps) != ["eval", "model"] or len(weights) != len(set(id(p) for p in gpt.parameters())) or \
            not same(eps["eval"].module()(x), want) or not same(got, want):
        fail(f"tools/export_model.py: programs {sorted(eps)}, {len(weights)} weight files, or eval outputs differ")
    else:
        print(f"ok   tools/export_model.py: 'model' and 'eval' in one archive, {len(weights)} weight files (once), "
              "torch's load_pt2 and ctrial give the module's eval()")

    # the names and what the module takes, as traced
    info = [json.loads(l) for l in run_tool("info", path("gpt.pt2")).stdout.splitlines()]
    names = [d["state"] for d in info if "state" in d]
    params = [d["num_params"] for d in info if "num_params" in d][0]
    if "lm_head.weight" not in names or params != len(list(models.GPT().parameters())):
        fail(f"gpt: tied weights: state {names[:3]}..., {params} parameters")
    inp = [d for d in info if "input" in d][0]
    if inp["dtype"] != "int64" or inp["size"] != [-1, 32]:
        fail(f"gpt: input described as {inp}")
    fancy = [json.loads(l) for l in run_tool("info", path("fancy.pt2")).stdout.splitlines()]
    frozen = [d for d in fancy if d.get("state") == "scale"]
    if not frozen or frozen[0]["requires_grad"]:
        fail(f"fancy: the frozen parameter 'scale' requires grad in C: {frozen}")
    if any(d.get("state") == "offset" for d in fancy):
        fail("fancy: the non-persistent buffer 'offset' is in the state dict")


# ---- errors ---------------------------------------------------------------------------------


def expect_error(what, argv, *fragments):
    p = run_tool(*argv, expect_fail=True)
    msg = p.stderr.strip()
    if p.returncode != 3 or not all(f in msg for f in fragments):
        fail(f"{what}: expected a named error with {fragments}, got exit {p.returncode}: {msg[:400]}")
    else:
        print(f"ok   {what}: {msg[len('export_tool: '):][:200]}")


def rewrite(src, dst, change=None, drop=None, add=None):
    """Copies zip src to dst, entries stored, change(name, bytes) -> bytes."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if drop and drop(info.filename):
                continue
            data = zin.read(info.filename)
            if change:
                data = change(info.filename, data)
            zout.writestr(info.filename, data)
        for name, data in (add or {}).items():
            zout.writestr(name, data)


def run_errors():
    torch.manual_seed(0)
    good = export(models.GPT(), (torch.randint(0, 65, (4, 32)),), "err_gpt")
    root = zipfile.ZipFile(good).namelist()[0].split("/")[0]

    def inputs(args):
        torch.save({"args": args, "kwargs": {}}, path("bad_in.pth"))
        return ["forward", good, path("bad_in.pth"), path("bad_out.pth")]

    expect_error("wrong dtype", inputs([torch.zeros(2, 32)]), "input 'idx'", "must be int64[", "float32")
    expect_error("wrong rank", inputs([torch.zeros(2, 32, 1, dtype=torch.long)]), "input 'idx'", "[2, 32, 1]")
    expect_error("wrong static size", inputs([torch.zeros(2, 33, dtype=torch.long)]), "dimension 1 was exported static")
    expect_error("batch out of range", inputs([torch.zeros(0, 32, dtype=torch.long)]), "must be in [1, 4096]")
    expect_error("missing argument", inputs([]), "takes 1 positional argument, got 0")
    expect_error("not a tensor", inputs([3]), "must be a tensor, got int")
    expect_error("index out of range in a node", inputs([torch.full((2, 32), 99, dtype=torch.long)]),
                 "node 'embedding' (aten::embedding.default)", "index out of range")

    truncated = path("truncated.pt2")
    with open(good, "rb") as f:
        data = f.read()
    with open(truncated, "wb") as f:
        f.write(data[: len(data) // 2])
    expect_error("truncated archive", ["load", truncated], "truncated.pt2", "CT_EFORMAT")

    with zipfile.ZipFile(good) as z:
        info = z.getinfo(f"{root}/data/weights/weight_0")
        header = 30 + len(info.filename) + len(info.extra)
    corrupt = path("corrupt.pt2")
    flipped = bytearray(data)
    flipped[info.header_offset + header + 5] ^= 0xFF
    with open(corrupt, "wb") as f:
        f.write(flipped)
    expect_error("corrupt weights", ["load", corrupt], "weight_0", "CRC-32", "damaged")

    other = path("version.pt2")
    rewrite(good, other, change=lambda n, b: b"1" if n.endswith("/archive_version") else b)
    expect_error("another archive version", ["load", other], "archive_version is '1'", "torch 2.11")

    def schema9(n, b):
        if not n.endswith("models/model.json"):
            return b
        d = json.loads(b)
        d["schema_version"]["major"] = 9
        return json.dumps(d).encode()
    newer = path("schema9.pt2")
    rewrite(good, newer, change=schema9)
    expect_error("another schema version", ["load", newer], "export schema 9.", "CT_ENOTSUP")

    missing = path("missing.pt2")
    rewrite(good, missing, drop=lambda n: n.endswith("data/weights/weight_3"))
    expect_error("missing weights", ["load", missing], "data/weights/weight_3", "lacks")

    def grow(n, b):
        if not n.endswith("model_weights_config.json"):
            return b
        d = json.loads(b)
        meta = d["config"]["wpe.weight"]["tensor_meta"]
        meta["sizes"][0]["as_int"] *= 2
        return json.dumps(d).encode()
    wrong = path("wrongsize.pt2")
    rewrite(good, wrong, change=grow)
    expect_error("weights of the wrong size", ["load", wrong], "'wpe.weight'", "reach past")

    def bad_json(n, b):
        return b[: len(b) // 2] if n.endswith("models/model.json") else b
    broken = path("badjson.pt2")
    rewrite(good, broken, change=bad_json)
    expect_error("corrupt program JSON", ["load", broken], "models/model.json", "not valid JSON")

    def undefined_name(n, b):
        if not n.endswith("models/model.json"):
            return b
        d = json.loads(b)
        d["graph_module"]["graph"]["nodes"][2]["inputs"][0]["arg"] = {"as_tensor": {"name": "nowhere"}}
        return json.dumps(d).encode()
    dangling = path("dangling.pt2")
    rewrite(good, dangling, change=undefined_name)
    expect_error("a node reading an undefined value", ["load", dangling], "nodes[2]", "'nowhere' is used before")

    pth = path("state.pth")
    torch.save(models.GPT().state_dict(), pth)
    expect_error("a torch.save file", ["load", pth], "torch.save file", "torch.export.save")

    # a custom operator whose library the C program has not loaded
    lib = torch.library.Library("ctrial_test", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")

    class Custom(torch.nn.Module):
        def forward(self, x):
            return torch.ops.ctrial_test.twice(x) + 1
    custom = export(Custom(), (torch.randn(2, 3),), "custom")
    expect_error("an operator the dispatcher does not know", ["load", custom],
                 "node 'twice' (ctrial_test::twice.default)", "no operator named ctrial_test::twice", "load it")


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)  # parity and errors run side by side: each has its own folder
    torch.set_num_threads(1)
    {"parity": run_parity, "errors": run_errors}[sys.argv[2]]()
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)


if __name__ == "__main__":
    main()
