"""Twins of tests/ops/cases_autograd.c."""
import warnings

import torch

from pyharness import case, f64, rn64, rn64g, snap


@case("autograd")
def _():
    x, g = rn64g(3), rn64(3)
    y = x * x
    r = {"x_is_leaf": x.is_leaf, "y_is_leaf": y.is_leaf, "y_requires_grad": y.requires_grad,
         "g_requires_grad": g.requires_grad, "x_has_grad_before": x.grad is not None,
         "grad_absent_is_null": x.grad is None, "grad_absent_code": 0}
    y.backward(g)
    r["backward_gradient_rc"] = 0
    r["x.grad"] = snap(x.grad)

    x2 = rn64g(3)
    l2 = x2.sin().sum()
    l2.backward(retain_graph=True)
    r["retain_rc"] = 0
    r["x2_after_first.grad"] = snap(x2.grad)
    l2.backward()
    r["second_rc"] = 0
    r["x2_after_second.grad"] = snap(x2.grad)

    x3 = rn64g(3)
    l3 = x3.pow(3.0).sum()
    with warnings.catch_warnings():  # the reference cycle it warns about is the point here
        warnings.simplefilter("ignore", UserWarning)
        l3.backward(create_graph=True)
    r["create_graph_rc"] = 0
    g3 = x3.grad
    r["g3"] = snap(g3)
    g3.sum().backward()
    r["second_order_rc"] = 0
    r["x3.grad"] = snap(x3.grad)

    x4 = rn64g(2, 2)
    x4.grad = torch.full((2, 2), 0.5, dtype=f64)
    r["set_grad_rc"] = 0
    r["x4_preset.grad"] = snap(x4.grad)
    (x4 * 3.0).sum().backward()
    r["backward_x4_rc"] = 0
    r["x4_accumulated.grad"] = snap(x4.grad)
    x4.grad = None
    r["set_grad_null_rc"] = 0
    r["x4_has_grad_after_null"] = x4.grad is not None

    x5 = rn64g(3)
    (x5 * x5).sum().backward()
    r["backward_x5_rc"] = 0
    held = x5.grad
    x5.grad.requires_grad_(False)  # what optimizer.zero_grad(set_to_none=False) does
    x5.grad.zero_()
    r["zero_grad_rc"] = 0
    r["x5_has_grad_after_zero"] = x5.grad is not None
    r["x5_zeroed.grad"] = snap(x5.grad)
    r["held_grad_after_zero"] = snap(held)
    x5.grad = None
    r["zero_grad_none_rc"] = 0
    r["x5_has_grad_after_none"] = False
    r["zero_grad_without_grad_rc"] = 0

    z = rn64(2)
    z.requires_grad_(True)
    r.update({"set_requires_grad_rc": 0, "z_requires_grad": z.requires_grad, "z_is_leaf": z.is_leaf})
    (z * 4.0).sum().backward()
    r["backward_z_rc"] = 0
    r["z.grad"] = snap(z.grad)
    z.requires_grad_(False)
    r["set_requires_grad_off_rc"] = 0
    r["z_requires_grad_off"] = z.requires_grad

    a, b = rn64g(4, 3), rn64g(3)
    h = torch.tanh(torch.matmul(a, b.unsqueeze(1)) + b.sum())
    loss = (h * h).mean()
    r["chain_loss"] = snap(loss)
    loss.backward()
    r["chain_rc"] = 0
    r["a.grad"], r["b.grad"] = a.grad, b.grad
    return r


@case("grad_modes")
def _():
    x = rn64g(3)
    r = {"enabled_at_start": torch.is_grad_enabled()}
    with torch.no_grad():
        r["enabled_in_no_grad"] = torch.is_grad_enabled()
        yn = x * x
        r["no_grad_result"] = yn
        r["no_grad_result_requires_grad"] = yn.requires_grad
        with torch.enable_grad():
            r["enabled_in_enable_grad"] = torch.is_grad_enabled()
            ye = x * x
            r["enable_grad_result"] = ye
            r["enable_grad_result_requires_grad"] = ye.requires_grad
        r["enabled_after_enable_grad_end"] = torch.is_grad_enabled()
        w = rn64g(3)
        w.add_(x, alpha=-0.1)
        r["update_under_no_grad_rc"] = 0
        r["updated_w_is_leaf"] = w.is_leaf
    r["enabled_after_no_grad_end"] = torch.is_grad_enabled()
    with torch.inference_mode():
        r["enabled_in_inference_mode"] = torch.is_grad_enabled()
        yi = x * x
        r["inference_result_requires_grad"] = yi.requires_grad
    r["enabled_after_inference_mode"] = torch.is_grad_enabled()
    r["inference_result"] = yi
    r["inference_item_rc"] = 0
    r["inference_item"] = yi.sum().item()
    with torch.no_grad():
        with torch.no_grad():
            pass
        r["enabled_after_inner_no_grad"] = torch.is_grad_enabled()
    r["enabled_after_outer_no_grad"] = torch.is_grad_enabled()
    (x * w).sum().backward()
    r["backward_rc"] = 0
    r["x.grad"], r["w.grad"] = x.grad, w.grad
    return r
