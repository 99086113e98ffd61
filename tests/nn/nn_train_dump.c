/* nn_train_dump OUT.json — trains the reference MLP and CNN for STEPS steps
 * on fixed seeded data with SGD(momentum=0.9), Adam and AdamW, and writes the
 * loss of every step and the final state dict of every run.
 * test_train_parity.py repeats each run in torch.
 *
 * Per run: manual_seed(seed); build the model; x = randn(shape);
 * y = randint(0, 10, [N]); then STEPS x (zero_grad, forward, cross_entropy,
 * backward, step). The MLP keeps Dropout(0.5) active, so the dropout masks
 * come from the same generator in the same order as in Python; the CNN's
 * BatchNorm updates its running statistics, which are compared as well. */
#include <string.h>

#include "nn_util.h"

enum { STEPS = 20 };

typedef enum { SGD, ADAM, ADAMW } opt_kind;
static const char *OPT_NAMES[] = {"sgd", "adam", "adamw"};

static ct_optim *make_optim(opt_kind k, ct_module *m) {
    if (k == SGD) {
        ct_sgd_opts o = ct_sgd_defaults();
        o.lr = 0.01;
        o.momentum = 0.9;
        return ct_optim_sgd(m, &o);
    }
    ct_adam_opts o = k == ADAM ? ct_adam_defaults() : ct_adamw_defaults();
    o.lr = 1e-3;
    return k == ADAM ? ct_optim_adam(m, &o) : ct_optim_adamw(m, &o);
}

/* One run; returns its JSON object or NULL. */
static json_t *run(const char *model, opt_kind k, uint64_t seed) {
    ct_manual_seed(seed);
    bool is_mlp = strcmp(model, "mlp") == 0;
    ct_module *m = is_mlp ? nn_build_mlp(0.5) : nn_build_cnn();
    ct_tensor *x = is_mlp ? ct_randn(CT_SHAPE(64, 784), NULL) : ct_randn(CT_SHAPE(32, 1, 28, 28), NULL);
    int64_t n = is_mlp ? 64 : 32;
    ct_tensor *y = ct_randint(0, 10, 1, &n, &(ct_topts){.dtype = CT_I64});
    ct_optim *opt = m ? make_optim(k, m) : NULL;
    if (!m || !x || !y || !opt) {
        fprintf(stderr, "%s/%s setup: %s\n", model, OPT_NAMES[k], ct_last_error());
        return NULL;
    }
    json_t *losses = json_array();
    int rc = 0;
    for (int step = 0; step < STEPS && rc == 0; ++step) {
        ct_scope *s = ct_scope_begin();
        double value = 0;
        rc = ct_optim_zero_grad(opt, true);
        ct_tensor *loss = ct_cross_entropy(ct_nn_forward(m, x), y);
        if (rc == 0) rc = loss ? ct_backward(loss) : ct_last_code();
        if (rc == 0) rc = ct_optim_step(opt);
        if (rc == 0) rc = ct_item(loss, &value);
        json_array_append_new(losses, json_real(value));
        ct_scope_end(s);
    }
    json_t *out = NULL;
    if (rc != 0) {
        fprintf(stderr, "%s/%s: %s\n", model, OPT_NAMES[k], ct_last_error());
        json_decref(losses);
    } else {
        out = json_object();
        json_object_set_new(out, "model", json_string(model));
        json_object_set_new(out, "optim", json_string(OPT_NAMES[k]));
        json_object_set_new(out, "seed", json_integer((json_int_t)seed));
        json_object_set_new(out, "losses", losses);
        json_object_set_new(out, "state", nn_dump_state(m));
    }
    ct_optim_free(opt);
    ct_tensor_free(x);
    ct_tensor_free(y);
    ct_nn_free(m);
    return out;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
        return 2;
    }
    const char *models[] = {"mlp", "cnn"};
    json_t *runs = json_array();
    uint64_t seed = 100;
    for (int i = 0; i < 2; ++i)
        for (opt_kind k = SGD; k <= ADAMW; ++k) {
            json_t *r = run(models[i], k, seed++);
            if (!r) {
                json_decref(runs);
                return 1;
            }
            json_array_append_new(runs, r);
        }
    json_t *root = json_object();
    json_object_set_new(root, "steps", json_integer(STEPS));
    json_object_set_new(root, "runs", runs);
    return nn_write_json(argv[1], root) == 0 ? 0 : 1;
}
