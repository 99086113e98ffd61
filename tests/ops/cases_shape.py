"""Twins of tests/ops/cases_shape.c."""
import torch

from pyharness import V, bw, case, f32, grads, i32, i64, rng


def views(r):
    """Records every entry as a view (strides compared), then backprops all."""
    bw(*r.values())
    return {k: V(t) for k, t in r.items()}


@case("slice")
def _():
    x = rng(5, 6)
    r = views({
        "rows_1_4": x[1:4:1],
        "cols_step_2": x[:, 0::2],
        "cols_neg": x[:, -4:-1],
        "rows_clamped_step_3": x[-100:100:3],
        "empty": x[:, 5:2],
        "last_dim_to_end": x[:, 4:],
        "slice_of_slice": x[1::2][:, 1:5:3],
    })
    return grads(r, x=x)


@case("narrow_select")
def _():
    x = rng(4, 5)
    r = views({
        "narrow_1_2_3": x.narrow(1, 2, 3),
        "narrow_neg_start": x.narrow(0, -3, 2),
        "select_0_2": x.select(0, 2),
        "select_1_neg1": x.select(1, -1),
        "select_to_0d": x.select(0, -1).select(0, 0),
    })
    return grads(r, x=x)


@case("index")
def _():
    x = rng(4, 5)
    gidx = torch.randint(0, 5, (4, 3))
    src = rng(2, 5)
    mask = torch.rand(4, 5) < 0.4
    mask_row = torch.rand(5) < 0.5
    sidx = torch.tensor([[0, 1, 2, 3, 0], [3, 2, 1, 0, 2]])
    aidx = torch.tensor([[0, 0, 1, 1, 3], [0, 2, 1, 3, 3]])
    o = {
        "index_select_0": x.index_select(0, torch.tensor([2, 0, 2])),
        "index_select_1_i32": x.index_select(1, torch.tensor([4, 1], dtype=i32)),
        "index_select_neg_dim": x.index_select(-1, torch.tensor([3])),
        "gather": x.gather(1, gidx),
        "scatter": x.scatter(0, sidx, src),
        "scatter_add": x.scatter_add(0, aidx, src),
        "masked_fill": x.masked_fill(mask, -1.5),
        "masked_fill_broadcast": x.masked_fill(mask_row, 9.0),
        "masked_select": x.masked_select(mask),
        "masked_select_broadcast": x.masked_select(mask_row),
    }
    bw(*o.values())
    r = {"mask": mask, "mask_row": mask_row, **o}
    grads(r, x=x, src=src)
    r["masked_fill_i64"] = torch.tensor([1, 2, 3]).masked_fill(torch.tensor([False, True, True]), -7)
    return r


@case("join")
def _():
    a, b, c, d, e = rng(2, 3), rng(1, 3), rng(3, 3), rng(2, 2), rng(2, 3)
    x, y, z = rng(7, 3), rng(2, 7), rng(6, 2)
    o = {
        "cat_0": torch.cat([a, b, c], 0),
        "cat_neg1": torch.cat([a, d], -1),
        "cat_one": torch.cat([a], 0),
        "stack_0": torch.stack([a, e], 0),
        "stack_2": torch.stack([a, e], 2),
        "stack_neg2": torch.stack([a, e], -2),
    }
    r = {}
    sp = torch.split(x, 3, 0)
    r["split_n"] = len(sp)
    o.update({"split_0": sp[0], "split_1": sp[1], "split_2": sp[2]})
    r["split_3_untouched"] = True
    few = torch.split(x, 1, 1)
    r["split_more_than_max"] = len(few)
    o["split_first_only"] = few[0]
    r["split_rest_untouched"] = True
    r["split_count_only"] = len(torch.split(x, 2, 0))
    ch = torch.chunk(y, 3, 1)
    r["chunk_n"] = len(ch)
    o.update({"chunk_0": ch[0], "chunk_1": ch[1], "chunk_2": ch[2]})
    ch2 = torch.chunk(z, 4, 0)
    r["chunk_fewer_n"] = len(ch2)
    o.update({"chunk_fewer_0": ch2[0], "chunk_fewer_1": ch2[1], "chunk_fewer_2": ch2[2]})
    r["chunk_fewer_3_untouched"] = True
    bw(*o.values())
    r.update({k: V(t) for k, t in o.items()})
    grads(r, a=a, b=b, c=c, d=d, e=e, x=x, y=y, z=z)
    r["cat_i64"] = torch.cat([torch.tensor([1, 2]), torch.tensor([3])])
    return r


@case("views")
def _():
    x, m, y, z, q = rng(2, 3, 4), rng(3, 5), rng(1, 3, 1, 2), rng(1, 2, 1), rng(4, 5)
    # p is made where the C program makes it: the order in which views are
    # created decides the order their gradients are summed into x.grad.
    r = views({
        "reshape": x.reshape(-1, 4),
        "view": x.view(3, -1),
        "permute": (p := x.permute(2, 0, 1)),
        "permute_neg": x.permute(-1, -3, -2),
        "transpose_0_2": x.transpose(0, 2),
        "transpose_neg": x.transpose(-1, -2),
        "t": m.t(),
        "flatten_1_end": x.flatten(1, -1),
        "flatten_0_1": x.flatten(0, 1),
        "flatten_all": x.flatten(0, -1),
        "unsqueeze_0": x.unsqueeze(0),
        "unsqueeze_neg1": x.unsqueeze(-1),
        "unsqueeze_1": x.unsqueeze(1),
        "squeeze": y.squeeze(),
        "squeeze_dim_2": y.squeeze(2),
        "squeeze_dim_not_1": y.squeeze(1),
        "squeeze_dim_neg": y.squeeze(-4),
        "expand": z.expand(3, -1, 4),
        "expand_new_dim": z.expand(5, 1, 2, 3),
        "repeat_more_dims": m.repeat(2, 1, 3),
        "repeat": z.repeat(1, 2, 2),
        "tril_0": q.tril(0),
        "tril_neg1": q.tril(-1),
        "triu_1": q.triu(1),
        "triu_neg2": q.triu(-2),
        "tril_batched": x.tril(1),
        "triu_all_zero": x.triu(10),
        "reshape_copy": p.reshape(-1),
        "view_of_permuted": p.view(4, 6),
    })
    return grads(r, x=x, m=m, y=y, z=z, q=q)
