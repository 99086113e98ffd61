/* A 1000-step training loop (MLP, Adam, dropout, cross-entropy) must not grow:
 * live tensor handles return to the same count after every step, and the
 * resident set stays flat once warm (a leak of one small tensor per step
 * would add megabytes). */
#include <stdio.h>
#include <stdlib.h>

#include "ct_test.h"

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * 4; /* 4 KiB pages */
}

int main(void) {
    ct_manual_seed(1);
    ct_module *net = ct_nn_sequential(5, (ct_module *[]){
        ct_nn_linear(64, 128, true), ct_nn_relu(), ct_nn_dropout(0.1),
        ct_nn_linear(128, 10, true), ct_nn_silu()});
    ct_optim *opt = ct_optim_adam(net, NULL);
    CHECK(net && opt);
    ct_tensor *x = ct_randn(CT_SHAPE(32, 64), NULL);
    ct_tensor *y = ct_randint(0, 10, CT_SHAPE(32), NULL);
    size_t live_warm = 0;
    long rss_warm = 0;
    double first = 0, last = 0;
    for (int step = 0; step < 1000; step++) {
        ct_scope *s = ct_scope_begin();
        ct_optim_zero_grad(opt, true);
        ct_tensor *loss = ct_cross_entropy(ct_nn_forward(net, x), y);
        CHECK_OK(ct_backward(loss));
        CHECK_OK(ct_optim_step(opt));
        if (step == 0) ct_item(loss, &first);
        if (step == 999) ct_item(loss, &last);
        ct_scope_end(s);
        if (step == 200) {
            live_warm = ct_tensor_live_count();
            rss_warm = rss_kib();
        }
        if (step > 200 && ct_tensor_live_count() != live_warm) {
            CHECK(ct_tensor_live_count() == live_warm);
            break;
        }
    }
    long growth = rss_kib() - rss_warm;
    printf("live tensors %zu, RSS growth over 800 steps %ld KiB, loss %.4f -> %.4f\n",
           ct_tensor_live_count(), growth, first, last);
#ifndef __SANITIZE_ADDRESS__
    CHECK(growth < 4096); /* ASan's quarantine holds freed memory on purpose */
#endif
    CHECK(last < first); /* it did train */
    ct_optim_free(opt);
    ct_nn_free(net);
    ct_tensor_free(x);
    ct_tensor_free(y);
    CHECK(ct_tensor_live_count() == 0);
    return ct_test_result("memory_train_loop");
}
