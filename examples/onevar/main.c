/*
 * onevar — Determined's OneVar fixture as a complete ctrial program: the
 * conformance example. One weight, one record repeated 64 times, numbers you
 * can check by hand.
 *
 * The Determined trial it mirrors (harness/tests/experiment/fixtures/
 * pytorch_onevar_model.py, trimmed):
 *
 *     class OnesDataset(torch.utils.data.Dataset):
 *         def __len__(self):
 *             return 64
 *         def __getitem__(self, index):
 *             return torch.Tensor([float(1)]), torch.Tensor([float(1)])
 *
 *     class OneVarTrial(pytorch.PyTorchTrial):
 *         def __init__(self, context):
 *             self.context = context
 *             self.model = context.wrap_model(torch.nn.Linear(1, 1, False))
 *             self.model.weight.data.fill_(0)
 *             self.opt = context.wrap_optimizer(
 *                 torch.optim.SGD(self.model.parameters(), context.get_hparam("learning_rate")))
 *             self.loss_fn = torch.nn.MSELoss()
 *
 *         def train_batch(self, batch, epoch_idx, batch_idx):
 *             data, label = batch
 *             loss = self.loss_fn(self.model(data), label)
 *             self.context.backward(loss)
 *             self.context.step_optimizer(self.opt)
 *             return {"loss": loss}
 *
 *         def evaluate_batch(self, batch):
 *             data, label = batch
 *             loss = self.loss_fn(self.model(data), label)
 *             return {"validation_loss": loss, "weight": self.model.weight.data.item()}
 *
 *         def build_training_data_loader(self):
 *             return pytorch.DataLoader(OnesDataset(),
 *                                       batch_size=self.context.get_per_slot_batch_size())
 *         def build_validation_data_loader(self):
 *             return pytorch.DataLoader(OnesDataset(),
 *                                       batch_size=self.context.get_per_slot_batch_size())
 *
 * With x = y = 1 the MSE gradient is 2 (w - 1), so every batch moves the
 * weight w <- w + 2 lr (1 - w) and reports loss = (1 - w)^2 from before the
 * step. With lr 0.001, after k batches 1 - w = 0.998^k: validation after k
 * batches reports validation_loss = 0.998^(2k) and weight = 1 - 0.998^k,
 * whatever the batch size, and every counting rule of the loop shows in
 * metrics.jsonl as an exact number.
 *
 * Usage (from the repository root):
 *     build/examples/onevar/onevar --config examples/onevar/onevar.json
 */
#include <stdio.h>
#include <stdlib.h>

#include <ctrial/ctrial.h>

typedef struct {
    ct_module *model;
    ct_optim *opt;
} OneVar;

static void *onevar_init(ct_context *ctx) {
    OneVar *t = calloc(1, sizeof *t);
    if (!t) {
        ct_set_error(CT_ENOMEM, "onevar: out of memory");
        return NULL;
    }
    /* A hyperparameter of the wrong type records an error and gives the
     * default: check once after reading them. */
    ct_clear_error();
    double lr = ct_ctx_hparam_double(ctx, "learning_rate", 0.001);
    if (ct_last_code() != CT_OK) {
        free(t);
        return NULL;
    }

    /* self.model = context.wrap_model(torch.nn.Linear(1, 1, False)) */
    t->model = ct_ctx_wrap_model(ctx, ct_nn_linear(1, 1, false));
    /* self.model.weight.data.fill_(0) */
    if (t->model) {
        ct_guard *g = ct_no_grad();
        int rc = ct_fill_(ct_nn_get(t->model, "weight"), 0.0);
        ct_guard_end(g);
        if (rc != 0) t->model = NULL;
    }
    /* self.opt = context.wrap_optimizer(torch.optim.SGD(params, lr)) */
    ct_sgd_opts sgd = ct_sgd_defaults();
    sgd.lr = lr;
    t->opt = t->model ? ct_ctx_wrap_optimizer(ctx, ct_optim_sgd(t->model, &sgd)) : NULL;
    if (!t->opt) {
        free(t);
        return NULL;
    }
    return t;
}

/* OnesDataset: 64 records (x = [1.0], y = [1.0]) as a TensorDataset. */
static ct_loader *ones_loader(ct_context *ctx) {
    ct_tensor *x = ct_ones(CT_SHAPE(64, 1), NULL);
    ct_tensor *y = ct_ones(CT_SHAPE(64, 1), NULL);
    ct_dataset *ones = x && y ? ct_dataset_tensors(2, (ct_tensor *[]){x, y}) : NULL;
    ct_tensor_free(x); /* the dataset keeps its own references */
    ct_tensor_free(y);
    if (!ones) return NULL;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.device = ct_ctx_device(ctx);
    return ct_loader_new(ones, &o);
}

static ct_loader *build_training_data_loader(void *self, ct_context *ctx) {
    return ones_loader(ctx);
}

static ct_loader *build_validation_data_loader(void *self, ct_context *ctx) {
    return ones_loader(ctx);
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    OneVar *t = self;
    ct_tensor *data = ct_batch_at(batch, 0), *label = ct_batch_at(batch, 1);
    ct_tensor *loss = ct_mse_loss(ct_nn_forward(t->model, data), label, CT_REDUCE_MEAN);
    if (!loss || ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL))
        return NULL;
    return ct_value_tensor(loss); /* reported as "loss" */
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    OneVar *t = self;
    ct_tensor *data = ct_batch_at(batch, 0), *label = ct_batch_at(batch, 1);
    ct_tensor *loss = ct_mse_loss(ct_nn_forward(t->model, data), label, CT_REDUCE_MEAN);
    double weight;
    if (!loss || ct_item(ct_nn_get(t->model, "weight"), &weight) != 0) return NULL;
    ct_value *metrics = ct_value_dict();
    ct_value_dict_set(metrics, "validation_loss", ct_value_tensor(loss));
    ct_value_dict_set(metrics, "weight", ct_value_float(weight));
    return metrics;
}

static const ct_trial onevar = {
    .name = "onevar",
    .init = onevar_init,
    .destroy = free,
    .build_training_data_loader = build_training_data_loader,
    .build_validation_data_loader = build_validation_data_loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
};

int main(int argc, char **argv) { return ct_main(argc, argv, &onevar); }
