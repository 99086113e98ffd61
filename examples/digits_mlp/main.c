/*
 * digits_mlp — trains a multi-layer perceptron on handwritten digits and
 * prints the validation accuracy after each epoch.
 *
 * The PyTorch program it mirrors, line for line:
 *
 *     class Net(nn.Module):
 *         def __init__(self, n_in):
 *             super().__init__()
 *             self.fc1 = nn.Linear(n_in, 128)
 *             self.drop = nn.Dropout(0.1)
 *             self.fc2 = nn.Linear(128, 10)
 *
 *         def forward(self, x):
 *             x = torch.flatten(x, 1)
 *             x = self.drop(F.relu(self.fc1(x)))
 *             return self.fc2(x)
 *
 *     torch.manual_seed(0)
 *     model = Net(64)
 *     opt = torch.optim.Adam(model.parameters(), lr=1e-3)
 *     for epoch in range(epochs):
 *         model.train()
 *         perm = torch.randperm(len(train_x))
 *         for i in range(0, len(train_x), batch_size):
 *             idx = perm[i:i + batch_size]
 *             opt.zero_grad()
 *             loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
 *             loss.backward()
 *             opt.step()
 *         model.eval()
 *         with torch.no_grad():
 *             acc = (model(val_x).argmax(1) == val_y).float().mean()
 *
 * Usage: digits_mlp [DATA_DIR] [--epochs N] [--min-accuracy A]
 * DATA_DIR holds MNIST-format files (train-images-idx3-ubyte.gz, ...): the
 * bundled 8x8 digits or the real 28x28 MNIST, the input size comes from the
 * files. With --min-accuracy the exit code is 1 when the final validation
 * accuracy is below A (the test suite uses this).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

/* ---- the model ---------------------------------------------------------- */

typedef struct {
    ct_module *fc1, *drop, *fc2;
} Net;

static ct_tensor *net_forward(ct_module *self, const ct_tensor *x) {
    Net *net = ct_nn_user(self);
    x = ct_flatten(x, 1, -1);
    x = ct_nn_forward(net->drop, ct_relu(ct_nn_forward(net->fc1, x)));
    return ct_nn_forward(net->fc2, x);
}

static ct_module *net_new(int64_t n_in) {
    Net *net = calloc(1, sizeof *net);
    ct_module *m = net ? ct_nn_module("Net", net_forward, net, free) : NULL;
    if (!m) {
        free(net);
        return NULL;
    }
    net->fc1 = ct_nn_add_module(m, "fc1", ct_nn_linear(n_in, 128, true));
    net->drop = ct_nn_add_module(m, "drop", ct_nn_dropout(0.1));
    net->fc2 = ct_nn_add_module(m, "fc2", ct_nn_linear(128, 10, true));
    if (!net->fc1 || !net->drop || !net->fc2) {
        ct_nn_free(m);
        return NULL;
    }
    return m;
}

/* ---- data --------------------------------------------------------------- */

typedef struct {
    ct_tensor *x; /* [n, h, w] float32 in 0..1 */
    ct_tensor *y; /* [n] int64 class labels  */
} Split;

static int load_split(const char *dir, const char *prefix, Split *out) {
    char images[1024], labels[1024];
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    ct_scope *s = ct_scope_begin(); /* frees the raw uint8 tensors */
    ct_tensor *raw_x = ct_idx_read(images);
    ct_tensor *raw_y = raw_x ? ct_idx_read(labels) : NULL;
    out->x = ct_keep(ct_div_scalar(ct_to_dtype(raw_x, CT_F32), 255.0));
    out->y = ct_keep(ct_to_dtype(raw_y, CT_I64));
    ct_scope_end(s);
    if (!out->x || !out->y) return -1;
    if (ct_size(out->x, 0) != ct_size(out->y, 0))
        return ct_set_error(CT_EFORMAT, "%s: %lld images but %lld labels", dir,
                            (long long)ct_size(out->x, 0), (long long)ct_size(out->y, 0));
    return 0;
}

/* ---- training ----------------------------------------------------------- */

static double evaluate(ct_module *model, const Split *val) {
    double acc = -1;
    ct_scope *s = ct_scope_begin();
    ct_guard *g = ct_no_grad();
    ct_nn_train(model, false);
    ct_tensor *pred = ct_argmax(ct_nn_forward(model, val->x), 1, false);
    ct_item(ct_mean(ct_to_dtype(ct_eq(pred, val->y), CT_F32)), &acc);
    ct_guard_end(g);
    ct_scope_end(s);
    return acc;
}

static int train_epoch(ct_module *model, ct_optim *opt, const Split *train, int64_t batch_size,
                       double *mean_loss) {
    int64_t n = ct_size(train->x, 0);
    int64_t n_batches = 0;
    ct_scope *epoch = ct_scope_begin();
    ct_tensor *perm = ct_randperm(n, NULL);
    ct_tensor *loss_sum = ct_zeros(CT_SHAPE(1), NULL); /* stays a tensor: no sync per batch */
    ct_nn_train(model, true);
    for (int64_t i = 0; i < n; i += batch_size, n_batches++) {
        ct_scope *batch = ct_scope_begin(); /* frees this batch's temporaries */
        ct_tensor *idx = ct_slice(perm, 0, i, i + batch_size, 1);
        ct_tensor *x = ct_index_select(train->x, 0, idx);
        ct_tensor *y = ct_index_select(train->y, 0, idx);
        ct_optim_zero_grad(opt, true);
        ct_tensor *loss = ct_cross_entropy(ct_nn_forward(model, x), y);
        int rc = loss ? ct_backward(loss) : -1;
        if (rc == 0) rc = ct_optim_step(opt);
        if (rc == 0) rc = ct_add_(loss_sum, ct_detach(loss), 1.0);
        ct_scope_end(batch);
        if (rc != 0) {
            ct_scope_end(epoch);
            return -1;
        }
    }
    int rc = ct_item(loss_sum, mean_loss);
    *mean_loss /= (double)n_batches;
    ct_scope_end(epoch);
    return rc;
}

int main(int argc, char **argv) {
    const char *dir = "examples/data/digits";
    int epochs = 30;
    double min_accuracy = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--epochs") && i + 1 < argc) epochs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-accuracy") && i + 1 < argc) min_accuracy = atof(argv[++i]);
        else if (argv[i][0] != '-') dir = argv[i];
        else {
            fprintf(stderr, "usage: %s [DATA_DIR] [--epochs N] [--min-accuracy A]\n", argv[0]);
            return 2;
        }
    }

    Split train = {0}, val = {0};
    if (load_split(dir, "train", &train) || load_split(dir, "t10k", &val)) {
        fprintf(stderr, "digits_mlp: %s\n", ct_last_error());
        return 1;
    }
    int64_t n_in = ct_numel(train.x) / ct_size(train.x, 0);
    printf("digits: %lld training and %lld validation images of %lld pixels\n",
           (long long)ct_size(train.x, 0), (long long)ct_size(val.x, 0), (long long)n_in);

    ct_manual_seed(0);
    ct_module *model = net_new(n_in);
    ct_adam_opts adam = ct_adam_defaults();
    adam.lr = 1e-3;
    ct_optim *opt = model ? ct_optim_adam(model, &adam) : NULL;
    if (!opt) {
        fprintf(stderr, "digits_mlp: %s\n", ct_last_error());
        return 1;
    }

    double acc = 0;
    for (int epoch = 0; epoch < epochs; epoch++) {
        double loss = 0;
        if (train_epoch(model, opt, &train, 32, &loss) != 0 || (acc = evaluate(model, &val)) < 0) {
            fprintf(stderr, "digits_mlp: epoch %d: %s\n", epoch, ct_last_error());
            return 1;
        }
        printf("epoch %2d  train loss %.4f  validation accuracy %.2f%%\n", epoch + 1, loss, 100 * acc);
    }

    ct_optim_free(opt);
    ct_nn_free(model);
    ct_tensor_free(train.x);
    ct_tensor_free(train.y);
    ct_tensor_free(val.x);
    ct_tensor_free(val.y);
    printf("final validation accuracy: %.2f%%\n", 100 * acc);
    if (min_accuracy >= 0 && acc < min_accuracy) {
        fprintf(stderr, "digits_mlp: accuracy %.4f is below the required %.4f\n", acc, min_accuracy);
        return 1;
    }
    return 0;
}
