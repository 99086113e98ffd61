/* tests/ops/cases_autograd.c — backward with a gradient, retained graphs,
 * second derivatives, setting and zeroing grads, grad-mode regions.
 * Twins: cases_autograd.py. */
#include "parity.h"

void case_autograd(void) {
    ct_tensor *x = RN64G(3), *g = RN64(3);
    ct_tensor *y = ct_mul(x, x);
    put_bool("x_is_leaf", ct_is_leaf(x));
    put_bool("y_is_leaf", ct_is_leaf(y));
    put_bool("y_requires_grad", ct_requires_grad(y));
    put_bool("g_requires_grad", ct_requires_grad(g));
    put_bool("x_has_grad_before", ct_has_grad(x));
    ct_clear_error();
    ct_tensor *none = ct_grad(x);
    put_bool("grad_absent_is_null", none == NULL);
    put_int("grad_absent_code", ct_last_code());

    /* y.backward(gradient) for a non-scalar y */
    put_int("backward_gradient_rc", ct_backward_ex(y, g, false, false));
    put_grad("x", x);

    /* retain_graph, then a second backward through the same graph
     * accumulates */
    ct_tensor *x2 = RN64G(3);
    ct_tensor *l2 = ct_sum(ct_sin(x2));
    put_int("retain_rc", ct_backward_ex(l2, NULL, true, false));
    put_grad("x2_after_first", x2);
    put_int("second_rc", ct_backward_ex(l2, NULL, false, false));
    put_grad("x2_after_second", x2);

    /* create_graph: the gradient is differentiable (second derivative) */
    ct_tensor *x3 = RN64G(3);
    ct_tensor *l3 = ct_sum(ct_pow_scalar(x3, 3));
    put_int("create_graph_rc", ct_backward_ex(l3, NULL, false, true));
    ct_tensor *g3 = put("g3", ct_grad(x3));
    put_int("second_order_rc", ct_backward(ct_sum(g3)));
    put_grad("x3", x3);

    /* a preset gradient is accumulated into */
    ct_tensor *x4 = RN64G(2, 2);
    ct_tensor *preset = ct_full(S(2, 2), 0.5, &F64);
    put_int("set_grad_rc", ct_set_grad(x4, preset));
    put_grad("x4_preset", x4);
    put_int("backward_x4_rc", ct_backward(ct_sum(ct_mul_scalar(x4, 3))));
    put_grad("x4_accumulated", x4);
    put_int("set_grad_null_rc", ct_set_grad(x4, NULL));
    put_bool("x4_has_grad_after_null", ct_has_grad(x4));

    /* zero_grad: zeroed in place (a held handle sees it), or set to None */
    ct_tensor *x5 = RN64G(3);
    put_int("backward_x5_rc", ct_backward(ct_sum(ct_mul(x5, x5))));
    ct_tensor *held = ct_grad(x5);
    put_int("zero_grad_rc", ct_zero_grad(x5, false));
    put_bool("x5_has_grad_after_zero", ct_has_grad(x5));
    put_grad("x5_zeroed", x5);
    put("held_grad_after_zero", held);
    put_int("zero_grad_none_rc", ct_zero_grad(x5, true));
    put_bool("x5_has_grad_after_none", ct_has_grad(x5));
    put_int("zero_grad_without_grad_rc", ct_zero_grad(x5, false));

    /* requires_grad switched on later makes a leaf */
    ct_tensor *z = RN64(2);
    put_int("set_requires_grad_rc", ct_set_requires_grad(z, true));
    put_bool("z_requires_grad", ct_requires_grad(z));
    put_bool("z_is_leaf", ct_is_leaf(z));
    put_int("backward_z_rc", ct_backward(ct_sum(ct_mul_scalar(z, 4))));
    put_grad("z", z);
    put_int("set_requires_grad_off_rc", ct_set_requires_grad(z, false));
    put_bool("z_requires_grad_off", ct_requires_grad(z));

    /* gradients through a chain of ops with broadcasting and reductions */
    ct_tensor *a = RN64G(4, 3), *b = RN64G(3);
    ct_tensor *h = ct_tanh(ct_add(ct_matmul(a, ct_unsqueeze(b, 1)), ct_sum(b)));
    ct_tensor *loss = put("chain_loss", ct_mean(ct_mul(h, h)));
    put_int("chain_rc", ct_backward(loss));
    put_grad("a", a);
    put_grad("b", b);
}

void case_grad_modes(void) {
    ct_tensor *x = RN64G(3);
    put_bool("enabled_at_start", ct_is_grad_enabled());
    ct_guard *ng = ct_no_grad();
    put_bool("enabled_in_no_grad", ct_is_grad_enabled());
    ct_tensor *yn = put("no_grad_result", ct_mul(x, x));
    put_bool("no_grad_result_requires_grad", ct_requires_grad(yn));
    ct_guard *eg = ct_enable_grad();
    put_bool("enabled_in_enable_grad", ct_is_grad_enabled());
    ct_tensor *ye = put("enable_grad_result", ct_mul(x, x));
    put_bool("enable_grad_result_requires_grad", ct_requires_grad(ye));
    ct_guard_end(eg);
    put_bool("enabled_after_enable_grad_end", ct_is_grad_enabled());
    /* a parameter update under no_grad is not recorded */
    ct_tensor *w = RN64G(3);
    put_int("update_under_no_grad_rc", ct_add_(w, x, -0.1));
    put_bool("updated_w_is_leaf", ct_is_leaf(w));
    ct_guard_end(ng);
    put_bool("enabled_after_no_grad_end", ct_is_grad_enabled());

    ct_guard *im = ct_inference_mode();
    put_bool("enabled_in_inference_mode", ct_is_grad_enabled());
    ct_tensor *yi = ct_mul(x, x);
    put_bool("inference_result_requires_grad", ct_requires_grad(yi));
    ct_guard_end(im);
    put_bool("enabled_after_inference_mode", ct_is_grad_enabled());
    put("inference_result", yi);
    double v = 0;
    put_int("inference_item_rc", ct_item(ct_sum(yi), &v));
    put_val("inference_item", v);

    /* nested no_grad regions restore the state they found */
    ct_guard *n1 = ct_no_grad();
    ct_guard *n2 = ct_no_grad();
    ct_guard_end(n2);
    put_bool("enabled_after_inner_no_grad", ct_is_grad_enabled());
    ct_guard_end(n1);
    put_bool("enabled_after_outer_no_grad", ct_is_grad_enabled());

    /* the graph built afterwards still differentiates */
    put_int("backward_rc", ct_backward(ct_sum(ct_mul(x, w))));
    put_grad("x", x);
    put_grad("w", w);
}
