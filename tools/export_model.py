#!/usr/bin/env python3
"""Exports a PyTorch nn.Module for ctrial (ct_nn_load_exported, docs/api/export.md).

    .venv/bin/python tools/export_model.py MODULE:FACTORY --input SPEC [--input SPEC ...]
        [--args JSON] [--kwargs JSON] [--seed S] [--state-dict FILE] [--max-batch N]
        [--path DIR] -o OUT.pt2

MODULE:FACTORY is what builds the model, imported the way Python would:
`torchvision.models:resnet18`, `mypackage.nets:ResNetish`, or `models.py:Net`
for a file; it is called with --args (a JSON list) and --kwargs (a JSON
object). --path DIR (repeatable) is put on sys.path first, for a team's own
packages. --seed seeds torch before the model is built, so the weights are
the ones torch.manual_seed(S); Factory(...) makes; --state-dict loads a
state dict (or a ctrial checkpoint's first model) into it instead.

Each --input describes one positional argument of forward: a dtype and
its sizes, a letter for the batch dimension, which is exported dynamic
(torch.export.Dim, from 1 to --max-batch) so that any batch size runs,
including a short last one:

    --input 'float32[N,3,32,32]'     images
    --input 'int64[N,64]'            token ids (the example holds zeros)

The archive holds two programs of the same weights: "model", the module
in train() (what ctrial trains, and what torch.export.load returns), and
"eval", the module in eval(), which ctrial runs for validation (BatchNorm
on its running statistics, dropout off, and whatever else the module's
eval() changes). Both are torch.export.export's training IR; the archive is
torch.export.save's format (package_pt2 with two programs, the eval
program's weights naming the training program's files, so that the
weights are in the archive once), and Python reads it back with
torch.export.load (torch.export.pt2_archive's load_pt2 gives both).

Prints what was exported: the parameters, the inputs and outputs as
traced, and the file.
"""
import argparse
import importlib
import importlib.util
import json
import os
import re
import sys

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8,
          "bool": torch.bool}


def load_factory(spec):
    """MODULE:NAME (or FILE.py:NAME) -> the callable."""
    module, _, name = spec.rpartition(":")
    if not module or not name:
        raise SystemExit(f"export_model: {spec!r}: expected MODULE:FACTORY, e.g. torchvision.models:resnet18")
    if module.endswith(".py"):
        s = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(module))[0], module)
        if s is None:
            raise SystemExit(f"export_model: cannot import {module}")
        mod = importlib.util.module_from_spec(s)
        sys.modules[s.name] = mod
        s.loader.exec_module(mod)
    else:
        mod = importlib.import_module(module)
    obj = mod
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def parse_input(text, max_batch, dims):
    """'float32[N,3,32,32]' -> (example tensor, {dim: Dim} or None)."""
    m = re.fullmatch(r"\s*(\w+)\s*\[([^\]]*)\]\s*", text)
    if not m or m.group(1) not in DTYPES:
        raise SystemExit(f"export_model: --input {text!r}: expected DTYPE[SIZES] with DTYPE one of {sorted(DTYPES)}")
    dtype = DTYPES[m.group(1)]
    sizes, dynamic = [], {}
    for i, s in enumerate(x.strip() for x in m.group(2).split(",") if x.strip()):
        if s.isdigit():
            sizes.append(int(s))
        elif re.fullmatch(r"[A-Za-z_]\w*", s):
            if s not in dims:
                dims[s] = torch.export.Dim(s, min=1, max=max_batch)
            dynamic[i] = dims[s]
            sizes.append(2)  # not 0 or 1, which export would specialize on
        else:
            raise SystemExit(f"export_model: --input {text!r}: size {s!r} is neither a number nor a name")
    example = torch.zeros(sizes, dtype=dtype) if not dtype.is_floating_point else torch.randn(sizes, dtype=dtype)
    return example, (dynamic or None)


def save_sharing_weights(path, programs):
    """package_pt2 (what torch.export.save calls) of both programs, rewritten
    so that "eval" names the training program's weight files instead of
    copies of them: the archive holds the weights once. torch.export.load
    reads it as it reads package_pt2's."""
    from torch.export.pt2_archive._package import PT2ArchiveReader, PT2ArchiveWriter, package_pt2
    tmp = path + ".tmp.pt2"
    package_pt2(tmp, exported_programs=programs)
    config = "data/weights/{}_weights_config.json"
    with PT2ArchiveReader(tmp) as r:
        train = json.loads(r.read_string(config.format("model")))["config"]
        ev = json.loads(r.read_string(config.format("eval")))
        dropped = set()
        for fqn, meta in ev["config"].items():
            if fqn in train and not meta["use_pickle"] and not train[fqn]["use_pickle"]:
                dropped.add("data/weights/" + meta["path_name"])
                meta["path_name"] = train[fqn]["path_name"]
        kept = {"data/weights/" + m["path_name"] for m in list(train.values()) + list(ev["config"].values())}
        with PT2ArchiveWriter(path) as w:
            for name in r.archive_file.get_all_records():
                if name in dropped and name not in kept:
                    continue
                data = json.dumps(ev).encode() if name == config.format("eval") else r.read_bytes(name)
                w.write_bytes(name, data)
    os.remove(tmp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("factory")
    ap.add_argument("--input", action="append", required=True, help="DTYPE[SIZES], a letter for the batch")
    ap.add_argument("--args", default="[]", help="the factory's positional arguments, a JSON list")
    ap.add_argument("--kwargs", default="{}", help="the factory's keyword arguments, a JSON object")
    ap.add_argument("--seed", type=int, default=None, help="torch.manual_seed before the model is built")
    ap.add_argument("--state-dict", default=None, help="weights to load: a state dict or a ctrial checkpoint")
    ap.add_argument("--max-batch", type=int, default=1 << 16)
    ap.add_argument("--path", action="append", default=[], help="a folder to import from (repeatable)")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()

    for p in reversed(a.path):
        sys.path.insert(0, os.path.abspath(p))
    sys.path.insert(0, os.getcwd())
    factory = load_factory(a.factory)
    if a.seed is not None:
        torch.manual_seed(a.seed)
    model = factory(*json.loads(a.args), **json.loads(a.kwargs))
    if not isinstance(model, torch.nn.Module):
        raise SystemExit(f"export_model: {a.factory} returned a {type(model).__name__}, not an nn.Module")
    if a.state_dict:
        sd = torch.load(a.state_dict, weights_only=True, map_location="cpu")
        if isinstance(sd, dict) and "models_state_dict" in sd:  # a ctrial or Determined checkpoint
            sd = sd["models_state_dict"][0]
        model.load_state_dict(sd, strict=True)

    dims = {}
    inputs = [parse_input(t, a.max_batch, dims) for t in a.input]
    args = tuple(x for x, _ in inputs)
    dynamic = tuple(d for _, d in inputs)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    programs = {}
    for name, train in (("model", True), ("eval", False)):
        model.train(train)
        programs[name] = torch.export.export(model, args, dynamic_shapes=dynamic)
    model.train(True)
    for k, v in model.state_dict().items():  # tracing runs on fake tensors: nothing moved
        assert torch.equal(v, before[k]), f"export changed {k}"

    save_sharing_weights(a.output, programs)

    ep = programs["model"]
    n = sum(p.numel() for p in model.parameters())
    print(f"{a.factory}: {len(list(model.parameters()))} parameters ({n:,} elements), "
          f"{len(model.state_dict())} state-dict entries")
    for spec in ep.graph_signature.input_specs:
        if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT:
            print(f"  input  {spec.arg.name}: {ep.graph.find_nodes(op='placeholder', target=spec.arg.name)[0].meta['val']}")
    outs = list(ep.graph.find_nodes(op="output"))[0].args[0]
    for o in outs:
        if hasattr(o, "meta"):
            print(f"  output {o.name}: {o.meta.get('val')}")
    print(f"wrote {a.output} ({os.path.getsize(a.output):,} bytes): programs 'model' (train) and 'eval'")


if __name__ == "__main__":
    main()
