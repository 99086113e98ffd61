"""Python half of pth_tool's dumps: a Python object (as torch.load returns it)
in the same JSON shape, so that C's view and Python's can be compared exactly.

    {"value": V, "storages": [{"nbytes": n, "data": hex}, ...]}
    V = None | bool | int | {"float": hex of the IEEE bits} | str
      | {"list": [V...]} | {"tuple": [V...]} | {"dict": [[key, V]...]}
      | {"tensor": {"dtype", "shape", "stride", "offset", "storage": index into
                    storages (by first use), "requires_grad", "data": hex}}

Storages are told apart by their StorageImpl (untyped_storage()._cdata), as
ct_storage_info.id tells them apart in C; tensor data is the elements in C
order, storage data the whole storage, both bit for bit.
"""

import struct

import torch

DTYPE_NAMES = {
    torch.float32: "float32", torch.float64: "float64", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8",
    torch.uint8: "uint8", torch.bool: "bool",
}


def _bytes_of_storage(st):
    return torch.empty(0, dtype=torch.uint8).set_(st).numpy().tobytes()


def encode(obj):
    storages = []  # (StorageImpl address, entry)

    def storage_index(t):
        st = t.untyped_storage()
        for i, (cdata, _) in enumerate(storages):
            if cdata == st._cdata:
                return i
        storages.append((st._cdata, {"nbytes": st.nbytes(), "data": _bytes_of_storage(st).hex()}))
        return len(storages) - 1

    def enc(x):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return x
        if isinstance(x, float):
            return {"float": struct.pack(">d", x).hex()}
        if isinstance(x, torch.Tensor):
            t = x.detach()
            index = storage_index(t)
            data = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            return {"tensor": {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "stride": list(t.stride()),
                               "offset": t.storage_offset(), "storage": index,
                               "requires_grad": x.requires_grad, "data": data.hex()}}
        if isinstance(x, tuple):
            return {"tuple": [enc(v) for v in x]}
        if isinstance(x, list):
            return {"list": [enc(v) for v in x]}
        if isinstance(x, dict):
            return {"dict": [[k, enc(v)] for k, v in x.items()]}
        raise TypeError(f"cannot encode a {type(x).__name__}")

    value = enc(obj)
    return {"value": value, "storages": [s for _, s in storages]}


def diff(c, p, where="dump"):
    """The first difference between C's dump c and Python's p, or None."""
    if type(c) is not type(p):
        return f"{where}: C has {str(c)[:100]!r}, Python {str(p)[:100]!r}"
    if isinstance(c, dict):
        if list(c) != list(p):
            return f"{where}: C has fields {list(c)}, Python {list(p)}"
        for k in c:
            d = diff(c[k], p[k], f"{where}.{k}")
            if d:
                return d
        return None
    if isinstance(c, list):
        if len(c) != len(p):
            return f"{where}: C has {len(c)} items, Python {len(p)}"
        for i, (a, b) in enumerate(zip(c, p)):
            d = diff(a, b, f"{where}[{i}]")
            if d:
                return d
        return None
    return None if c == p else f"{where}: C has {str(c)[:100]!r}, Python {str(p)[:100]!r}"
