/* Trains y = 2x + 1 with one Linear layer through the installed headers and
 * library; exits 0 when the fit is right. */
#include <ctrial/ctrial.h>
#include <math.h>
#include <stdio.h>

int main(void) {
    if (ct_manual_seed(0)) return 1;
    ct_module *lin = ct_nn_linear(1, 1, true);
    ct_sgd_opts o = ct_sgd_defaults();
    o.lr = 0.1;
    ct_optim *opt = ct_optim_sgd(lin, &o);
    if (!lin || !opt) {
        fprintf(stderr, "consumer: %s\n", ct_last_error());
        return 1;
    }
    for (int step = 0; step < 200; step++) {
        ct_scope *s = ct_scope_begin();
        ct_tensor *x = ct_randn(CT_SHAPE(16, 1), NULL);
        ct_tensor *y = ct_add_scalar(ct_mul_scalar(x, 2.0), 1.0);
        ct_tensor *loss = ct_mse_loss(ct_nn_forward(lin, x), y, CT_REDUCE_MEAN);
        ct_optim_zero_grad(opt, true);
        int rc = loss ? ct_backward(loss) : -1;
        if (rc == 0) rc = ct_optim_step(opt);
        ct_scope_end(s);
        if (rc) {
            fprintf(stderr, "consumer: %s\n", ct_last_error());
            return 1;
        }
    }
    double w = 0, b = 0;
    ct_item(ct_nn_get(lin, "weight"), &w);
    ct_item(ct_nn_get(lin, "bias"), &b);
    printf("ctrial %s (headers %s): w=%.4f b=%.4f\n", ct_version(), CTRIAL_VERSION_STRING, w, b);
    ct_optim_free(opt);
    ct_nn_free(lin);
    return fabs(w - 2) < 1e-3 && fabs(b - 1) < 1e-3 ? 0 : 1;
}
