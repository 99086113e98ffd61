"""Twins of tests/ops/cases_create.c."""
import torch

from pyharness import (ALL_DTYPES, DTYPE_NAMES, INF, NAN, V, M, bf16, bw, case, f16, f32, f64, grads,
                       i32, i64, rn, rn64, rng, snap, tbool, u8)


@case("rng_inputs")
def _():
    return {
        "randn_f32": torch.randn(3, 4),
        "randn_f32_17": torch.randn(17),
        "randn_f64": torch.randn(2, 3, dtype=f64),
        "randn_f16": torch.randn(5, dtype=f16),
        "randn_bf16": torch.randn(5, dtype=bf16),
        "randn_null_opts": torch.randn(4),
        "randn_grad": torch.randn(2, requires_grad=True),
        "rand_f32": torch.rand(5),
        "rand_f64": torch.rand(2, 2, dtype=f64),
        "rand_grad": torch.rand(3, requires_grad=True),
        "randint_i64": torch.randint(-3, 7, (4, 5)),
        "randint_i32": torch.randint(0, 100, (6,), dtype=i32),
        "randint_f32": torch.randint(0, 10, (3,), dtype=f32),
        "randperm_10": torch.randperm(10),
        "randperm_40_i32": torch.randperm(40, dtype=i32),
        "randn_after": torch.randn(3),
    }


@case("creation")
def _():
    ref = torch.full((2, 3), 5, dtype=i32)
    r = {
        "zeros": torch.zeros(2, 3),
        "zeros_0d": torch.zeros((), dtype=f64),
        "ones_i64": torch.ones(4, dtype=i64),
        "ones_grad": torch.ones(2, requires_grad=True),
        "full_f64": torch.full((2, 2), 3.5, dtype=f64),
        "full_i32": torch.full((3,), 7, dtype=i32),
        "full_bool": torch.full((2,), True),
        "full_empty": torch.full((2, 0), 1.0),
        "scalar": torch.scalar_tensor(2.5),
        "scalar_i64": torch.scalar_tensor(-4, dtype=i64),
        "arange_f32": torch.arange(0.0, 10.0, 3.0),
        "arange_f64": torch.arange(1.0, 2.0, 0.25, dtype=f64),
        "arange_frac_f64": torch.arange(0.0, 1.0, 0.1, dtype=f64),
        "arange_i64": torch.arange(0, 5, 1),
        "arange_i32_step": torch.arange(-6, 7, 4, dtype=i32),
        "arange_neg": torch.arange(5.0, 0.0, -1.5),
        "linspace": torch.linspace(0, 1, 5),
        "linspace_f64": torch.linspace(-2, 2, 7, dtype=f64),
        "linspace_1": torch.linspace(3, 9, 1),
        "linspace_i64": torch.linspace(0, 10, 4, dtype=i64),
        "zeros_like": torch.zeros_like(ref),
        "ones_like": torch.ones_like(ref),
        "full_like": torch.full_like(ref, 2),
    }
    g = torch.randn(2, requires_grad=True)
    r["zeros_like_of_grad"] = torch.zeros_like(g)
    r["empty"] = M(torch.empty(3, 2, dtype=f64))
    r["empty_like"] = M(torch.empty_like(ref))
    r["empty_grad"] = M(torch.empty(2, requires_grad=True))
    return r


@case("from_data")
def _():
    def half_bits(bits, dtype):
        return torch.tensor([b - 65536 if b >= 32768 else b for b in bits], dtype=torch.int16).view(dtype)

    r = {
        "f32": torch.tensor([1.5, -2.25, 3.0e-8, 1e30, -0.0, 7.0], dtype=f32).view(2, 3),
        "f64": torch.tensor([3.141592653589793, -1e-300, 1e300, 0.1], dtype=f64),
        "f64_0d": torch.tensor(-2.75, dtype=f64),
        "f16": half_bits([0x3C00, 0xC000, 0x7BFF, 0x0001], f16).view(2, 2),
        "bf16": half_bits([0x3F80, 0xC0A0, 0x7F7F, 0x0001], bf16),
        "i64": torch.tensor([-2**63, 2**63 - 1, -1, 0], dtype=i64),
        "i32": torch.tensor([-2**31, 2**31 - 1, 5], dtype=i32),
        "u8": torch.tensor([0, 255, 128], dtype=u8),
        "bool": torch.tensor([True, False, True]),
        "empty": torch.tensor([], dtype=f32),
    }
    blob = torch.arange(6, dtype=f32).view(2, 3)
    r["blob"] = snap(blob)
    blob[1, 1] = 42
    r["blob_after_write"] = snap(blob)
    r["blob_view"] = V(blob[:, 1:])
    r["deleted_while_view_lives"] = 0
    r["blob_view_after_free"] = V(blob[:, 1:])
    r["deleted_after_last_ref"] = 1
    mem = torch.tensor([1.0, 2.0, 3.0], dtype=f64)
    r["blob_no_deleter_x2"] = mem * 2
    mem[0] = -1
    r["blob_no_deleter_after_write"] = mem
    r["blob_i64_t"] = V(torch.tensor([5, -6, 7, -8]).view(2, 2).t())
    return r


@case("to_dtype")
def _():
    base = torch.tensor([0, 1, 2.5, 100, 3.75, 200], dtype=f64).view(2, 3)
    r = {}
    for a in ALL_DTYPES:
        src = base.to(a)
        for b in ALL_DTYPES:
            r[f"{DTYPE_NAMES[a]}_to_{DTYPE_NAMES[b]}"] = src.to(b)
    x = torch.randn(16, requires_grad=True)
    h, b = x.to(f16), x.to(bf16)
    d = x.to(f64)
    r.update({
        "f32_to_f16": h, "f32_to_bf16": b, "f16_back": h.to(f32), "bf16_back": b.to(f32),
        "f32_to_f64": d, "f32_to_f32": x.to(f32), "f32_to_i64": x.to(i64), "f32_to_bool": x.to(tbool),
    })
    y = torch.randn(7, dtype=f64)
    r["f64_to_f32"] = y.to(f32)
    r["f64_to_bf16"] = y.to(bf16)
    bw(d, h)
    return grads(r, x=x)


@case("clone_detach_contiguous")
def _():
    x = rng(3, 4)
    xt = x.t()
    c, k = xt.clone(), xt.contiguous()
    r = {"clone_of_t": V(c), "contiguous_of_t": V(k), "contiguous_of_contiguous": V(x.contiguous()),
         "t_is_contiguous": xt.is_contiguous()}
    y = x.clone()
    d = y.detach()
    r["detached"] = V(d)
    r["detached_is_leaf"] = d.is_leaf
    d.mul_(2)
    r["detached_write_rc"] = 0
    r["y_after_detached_write"] = snap(y)
    bw(c, k)
    return grads(r, x=x)


@case("read_write")
def _():
    r = {
        "item_0d_rc": 0, "item_0d": 2.5, "item_1x1_rc": 0, "item_1x1": 3.25,
        "item_of_int_rc": 0, "item_of_int": 7.0, "item_of_bool_rc": 0, "item_of_bool": 1.0,
        "item_of_f16_rc": 0, "item_of_f16": torch.tensor(0.1, dtype=f64).to(f16).item(),
    }
    x = rng(3)
    r["item_of_grad_rc"] = 0
    r["item_of_grad"] = (x * x).sum().item()
    r.update({
        "item_int_big_rc": 0, "item_int_big": 9007199254740993,
        "item_int_i32_rc": 0, "item_int_i32": -5,
        "item_int_u8_rc": 0, "item_int_u8": 200,
        "item_int_bool_rc": 0, "item_int_bool": 1,
    })
    m = rn(3, 4)
    r["read_t_rc"] = 0
    r["read_t"] = m.t().flatten()
    r["read_f16_rc"] = 0
    r["read_f16"] = m[:, 2].to(f16)
    r["read_bool_rc"] = 0
    r["read_bool"] = m[:, 0] > 0
    r["read_i64_rc"] = 0
    r["read_i64"] = torch.arange(10, 0, -2)
    r["read_0d_rc"] = 0
    r["read_0d"] = torch.tensor([-0.125], dtype=f64)

    r["write_rc"] = 0
    r["write"] = torch.arange(1.0, 7.0).view(2, 3)
    base = torch.zeros(3, 2)
    base.t().copy_(torch.arange(1.0, 7.0).view(2, 3))
    r["write_view_rc"] = 0
    r["write_through_transposed_view"] = base
    r["write_i64_rc"] = 0
    r["write_i64"] = torch.tensor([2**63 - 1, -3, 9007199254740993])
    with torch.no_grad():
        x.copy_(torch.tensor([0.5, -1.5, 2.5]))
    r["write_grad_leaf_rc"] = 0
    r["write_grad_leaf"] = snap(x)

    r["data_ptr_write"] = torch.tensor([-1.0, 0, 5, 0], dtype=f64)
    r["data_ptr_of_slice"] = 3.0
    r["data_ptr_i32"] = 11

    src = rn(4)
    dst = torch.zeros(3, 4, dtype=f64)
    dst.copy_(src)
    r["copy_rc"] = 0
    r["copy_broadcast_convert"] = dst
    a = rn(3)
    a.mul_(2)
    r["alias_write_rc"] = 0
    r["alias_write_seen"] = snap(a)
    r["alias_free_keeps_original"] = True
    r["after_alias_free"] = snap(a)
    r["to_device_cpu"] = a.to("cpu")
    return r


@case("queries")
def _():
    x = rn(2, 3, 4)
    p = x.permute(2, 0, 1)
    r = {
        "ndim": x.ndim, "size_1": x.size(1), "size_neg1": x.size(-1), "stride_0": x.stride(0),
        "stride_p_neg1": p.stride(-1), "numel": x.numel(),
        "shape_ret_max2": 3, "shape_0": 2, "shape_1": 3, "shape_2_untouched": -7,
        "ndim_0d": 0, "numel_0d": 1, "numel_empty": 0,
        "x_contiguous": x.is_contiguous(), "p_contiguous": p.is_contiguous(), "x_defined": True,
        "describe": "[2, 3, 4] float32 cpu", "describe_0d": "[] int64 cpu",
        "describe_bf16": "[5] bfloat16 cpu", "describe_truncated": "[2, ",
        "device_of_type": 0,
    }
    for i, d in enumerate(ALL_DTYPES):
        r[f"name_{i}"] = DTYPE_NAMES[d]
        r[f"size_{i}"] = d.itemsize
        r[f"floating_{i}"] = d.is_floating_point
        r[f"dtype_of_{i}"] = True
    for text in ["cpu", "cuda", "cuda:3", "cuda:12"]:
        dev = torch.device(text)
        r[f"parse_{text}_rc"] = 0
        r[f"parse_{text}_type"] = 1 if dev.type == "cuda" else 0
        if dev.type == "cuda":
            r[f"parse_{text}_index"] = dev.index or 0
        r[f"format_{text}"] = "cpu" if dev.type == "cpu" else f"cuda:{dev.index or 0}"
    r["format_truncated"] = "cud"
    r["set_num_threads"] = 1
    r["get_num_threads"] = torch.get_num_threads()
    r["torch_version"] = torch.__version__.split("+")[0]
    r["print_f32"] = True  # checked on the C side: values and libtorch's footer
    r["print_i64"] = True
    return r


@case("rng_state")
def _():
    r = {"state_after_seed_0": torch.get_rng_state(), "a": torch.randn(5)}
    s = torch.get_rng_state()
    b, u, perm = torch.randn(5), torch.rand(3, dtype=f64), torch.randperm(7)
    r.update({"b": b, "u": u, "perm": perm})
    torch.set_rng_state(s)
    r["set_state_rc"] = 0
    r["b_again"] = torch.randn(5)
    r["u_again"] = torch.rand(3, dtype=f64)
    r["perm_again"] = torch.randperm(7)
    r["state_copy_unchanged"] = s
    torch.manual_seed(123)
    r["seed_rc"] = 0
    r["seed_123"] = torch.randn(3)
    torch.manual_seed(0xFFFFFFFFFFFF)
    r["seed_large"] = torch.rand(3)
    return r
