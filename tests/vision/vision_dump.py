"""Reads the records the vision dump programs write (dump_write.h)."""
import struct

import numpy as np
import torch

# ct_dtype's order (tensor.h)
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
          torch.bool, torch.int8, torch.int16, torch.uint16]


class CtError:
    """An error record: ct_last_code() and ct_last_error()."""

    def __init__(self, code, message):
        self.code, self.message = code, message

    def __repr__(self):
        return f"CtError({self.code}, {self.message!r})"


def read_records(path):
    """The records in order: torch tensors (with .ct_strides, the strides as
    ctrial had them), CtError, str and int."""
    data = open(path, "rb").read()
    at, out = 0, []

    def take(fmt):
        nonlocal at
        vals = struct.unpack_from(fmt, data, at)
        at += struct.calcsize(fmt)
        return vals

    while at < len(data):
        kind = data[at:at + 1]
        at += 1
        if kind == b"T":
            dtype, ndim = take("=ii")
            shape = take(f"={ndim}q")
            strides = take(f"={ndim}q")
            (nbytes,) = take("=q")
            raw = np.frombuffer(data, dtype=np.uint8, count=nbytes, offset=at).copy()
            at += nbytes
            t = torch.from_numpy(raw).view(DTYPES[dtype]).reshape(shape)
            t.ct_strides = tuple(strides)
            out.append(t)
        elif kind == b"E":
            code, n = take("=ii")
            out.append(CtError(code, data[at:at + n].decode("utf-8", "replace")))
            at += n
        elif kind == b"S":
            (n,) = take("=i")
            out.append(data[at:at + n].decode("utf-8", "surrogateescape"))
            at += n
        elif kind == b"I":
            out.append(take("=q")[0])
        else:
            raise ValueError(f"{path}: bad record kind {kind!r} at {at - 1}")
    return out
