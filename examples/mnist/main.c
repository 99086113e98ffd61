/*
 * mnist — handwritten digits with a CNN or an MLP, as a Determined trial run
 * by ct_main: flags, a JSON experiment config, validation and checkpoints on
 * schedule, metrics.jsonl.
 *
 * The Determined trial it mirrors (examples/tutorials/mnist_pytorch, itself
 * PyTorch's examples/mnist), with the model chosen by a hyperparameter:
 *
 *     class MNistTrial(PyTorchTrial):
 *         def __init__(self, context):
 *             self.context = context
 *             self.train_set = MNIST(data_dir, train=True, transform=ToTensor())
 *             self.val_set = MNIST(data_dir, train=False, transform=ToTensor())
 *             _, h, w = self.train_set[0][0].shape
 *             if context.get_hparam("model") == "cnn":
 *                 model = nn.Sequential(        # BatchNorm2d when hparam batch_norm
 *                     nn.Conv2d(1, n_filters1, 3, padding=1), nn.BatchNorm2d(n_filters1), nn.ReLU(),
 *                     nn.Conv2d(n_filters1, n_filters2, 3, padding=1), nn.BatchNorm2d(n_filters2),
 *                     nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(dropout1), nn.Flatten(),
 *                     nn.Linear(n_filters2 * (h // 2) * (w // 2), hidden), nn.ReLU(),
 *                     nn.Dropout(dropout2), nn.Linear(hidden, 10))
 *             else:
 *                 model = nn.Sequential(
 *                     nn.Flatten(), nn.Linear(h * w, hidden), nn.ReLU(),
 *                     nn.Dropout(dropout2), nn.Linear(hidden, 10))
 *             self.model = context.wrap_model(model)
 *             self.optimizer = context.wrap_optimizer(
 *                 torch.optim.Adam(self.model.parameters(), lr=context.get_hparam("learning_rate")))
 *             self.scheduler = context.wrap_lr_scheduler(
 *                 torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1,
 *                                                 gamma=context.get_hparam("lr_gamma")),
 *                 step_mode=LRScheduler.StepMode.STEP_EVERY_EPOCH)
 *             self.n_val = len(self.val_set)
 *             self.label_smoothing = context.get_hparam("label_smoothing")
 *
 *         def build_training_data_loader(self):
 *             return DataLoader(self.train_set, shuffle=True,
 *                               batch_size=self.context.get_per_slot_batch_size())
 *         def build_validation_data_loader(self):
 *             return DataLoader(self.val_set, batch_size=self.context.get_per_slot_batch_size())
 *
 *         def train_batch(self, batch, epoch_idx, batch_idx):
 *             data, labels = batch
 *             output = self.model(data)
 *             loss = F.cross_entropy(output, labels, label_smoothing=self.label_smoothing)
 *             self.context.backward(loss)
 *             self.context.step_optimizer(self.optimizer)
 *             accuracy = (output.argmax(1) == labels).float().mean()
 *             return {"loss": loss, "accuracy": accuracy}
 *
 *         def evaluate_batch(self, batch):
 *             data, labels = batch
 *             output = self.model(data)
 *             loss = F.cross_entropy(output, labels, reduction="sum")
 *             correct = (output.argmax(1) == labels).sum()
 *             return {"validation_loss": loss / self.n_val,
 *                     "validation_accuracy": correct / self.n_val}
 *
 *         def evaluation_reducer(self):
 *             return Reducer.SUM
 *
 * Each validation batch reports its share of the whole validation set and
 * the shares are summed, so validation_loss and validation_accuracy are the
 * exact mean loss and fraction right over the set, whatever the batch size
 * or the number of ranks (the default AVG of per-batch means would weigh a
 * short last batch like a full one). The configs search on
 * validation_accuracy (larger is better): checkpoint_policy "best" keeps the
 * most accurate model.
 *
 * Data: config "data": {"dir": ...} names a folder of MNIST-format files
 * (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-...):
 * the bundled 8x8 digits (examples/data/digits, the default) or the real
 * 28x28 MNIST; the input size comes from the files. A relative dir is
 * relative to the working directory.
 *
 * Usage (from the repository root):
 *     build/examples/mnist/mnist --config examples/mnist/mnist_cnn.json
 *     build/examples/mnist/mnist --config examples/mnist/mnist_mlp.json --max-length 5e
 */
#define _POSIX_C_SOURCE 200809L /* access */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctrial/ctrial.h>

typedef struct {
    ct_dataset *train_set, *val_set; /* handed to the loaders */
    ct_module *model;
    ct_optim *optimizer;
    int64_t n_val; /* validation records: each batch reports its share */
    double label_smoothing;
    int workers;
} MNistTrial;

/* ---- data --------------------------------------------------------------- */

/* dir/name.gz, or dir/name when only the unpacked file is there. */
static void data_file(char *out, size_t len, const char *dir, const char *name) {
    snprintf(out, len, "%s/%s.gz", dir, name);
    if (access(out, R_OK) != 0) snprintf(out, len, "%s/%s", dir, name);
}

/* MNIST(data_dir, train=..., transform=ToTensor()) */
static ct_dataset *mnist_split(const char *dir, const char *prefix) {
    char images[4096], labels[4096], name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    data_file(images, sizeof images, dir, name);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    data_file(labels, sizeof labels, dir, name);
    return ct_dataset_mnist(images, labels);
}

/* The config's "data": {"dir": folder, "workers": loader threads}. */
static int read_data_config(ct_context *ctx, const char **dir, int64_t *workers) {
    const ct_value *data = ct_ctx_data_config(ctx);
    const ct_value *d = ct_value_dict_get(data, "dir"), *w = ct_value_dict_get(data, "workers");
    *dir = d ? ct_value_get_str(d) : "examples/data/digits";
    *workers = 0;
    if (!*dir) return ct_set_error(CT_ECONFIG, "data.dir must be a string (a folder of MNIST files)");
    if (w && (ct_value_get_int(w, workers) != 0 || *workers < 0))
        return ct_set_error(CT_ECONFIG, "data.workers must be an integer >= 0");
    return 0;
}

static ct_loader *build_training_data_loader(void *self, ct_context *ctx) {
    MNistTrial *t = self;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.shuffle = true;
    o.seed = ct_ctx_trial_seed(ctx);
    o.num_workers = t->workers;
    o.device = ct_ctx_device(ctx);
    o.pin_memory = o.device.type == CT_CUDA; /* page-locked: the copy to the GPU runs asynchronously */
    ct_dataset *d = t->train_set;
    t->train_set = NULL; /* the loader takes it */
    return ct_loader_new(d, &o);
}

static ct_loader *build_validation_data_loader(void *self, ct_context *ctx) {
    MNistTrial *t = self;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.num_workers = t->workers;
    o.device = ct_ctx_device(ctx);
    ct_dataset *d = t->val_set;
    t->val_set = NULL;
    return ct_loader_new(d, &o);
}

/* ---- models ------------------------------------------------------------- */

typedef struct {
    const char *model;  /* "cnn" or "mlp" */
    int64_t n_filters1, n_filters2, hidden;
    double dropout1, dropout2;
    bool batch_norm;    /* BatchNorm2d after each convolution */
} ModelHparams;

static ct_module *build_cnn(const ModelHparams *hp, int64_t h, int64_t w) {
    ct_conv_opts pad1 = ct_conv_defaults();
    pad1.padding = 1;
    ct_module *layers[13];
    int n = 0;
    layers[n++] = ct_nn_conv2d(1, hp->n_filters1, 3, &pad1);
    if (hp->batch_norm) layers[n++] = ct_nn_batchnorm2d(hp->n_filters1, NULL);
    layers[n++] = ct_nn_relu();
    layers[n++] = ct_nn_conv2d(hp->n_filters1, hp->n_filters2, 3, &pad1);
    if (hp->batch_norm) layers[n++] = ct_nn_batchnorm2d(hp->n_filters2, NULL);
    layers[n++] = ct_nn_relu();
    layers[n++] = ct_nn_max_pool2d(2, 0, 0);
    layers[n++] = ct_nn_dropout(hp->dropout1);
    layers[n++] = ct_nn_flatten(1, -1);
    layers[n++] = ct_nn_linear(hp->n_filters2 * (h / 2) * (w / 2), hp->hidden, true);
    layers[n++] = ct_nn_relu();
    layers[n++] = ct_nn_dropout(hp->dropout2);
    layers[n++] = ct_nn_linear(hp->hidden, 10, true);
    return ct_nn_sequential(n, layers);
}

static ct_module *build_mlp(const ModelHparams *hp, int64_t h, int64_t w) {
    return ct_nn_sequential(5, (ct_module *[]){
        ct_nn_flatten(1, -1),
        ct_nn_linear(h * w, hp->hidden, true),
        ct_nn_relu(),
        ct_nn_dropout(hp->dropout2),
        ct_nn_linear(hp->hidden, 10, true),
    });
}

/* ---- the trial ---------------------------------------------------------- */

static void mnist_destroy(void *self) {
    MNistTrial *t = self;
    ct_dataset_free(t->train_set); /* still here if a loader was never built */
    ct_dataset_free(t->val_set);
    free(t);
}

static void *mnist_init(ct_context *ctx) {
    MNistTrial *t = calloc(1, sizeof *t);
    if (!t) {
        ct_set_error(CT_ENOMEM, "mnist: out of memory");
        return NULL;
    }
    /* A hyperparameter of the wrong type records an error and gives the
     * default: check once after reading them all. */
    ct_clear_error();
    ModelHparams hp = {
        .model = ct_ctx_hparam_str(ctx, "model", "cnn"),
        .n_filters1 = ct_ctx_hparam_int(ctx, "n_filters1", 32),
        .n_filters2 = ct_ctx_hparam_int(ctx, "n_filters2", 64),
        .hidden = ct_ctx_hparam_int(ctx, "hidden", 128),
        .dropout1 = ct_ctx_hparam_double(ctx, "dropout1", 0.25),
        .dropout2 = ct_ctx_hparam_double(ctx, "dropout2", 0.5),
        .batch_norm = ct_ctx_hparam_bool(ctx, "batch_norm", false),
    };
    t->label_smoothing = ct_ctx_hparam_double(ctx, "label_smoothing", 0.0);
    double lr = ct_ctx_hparam_double(ctx, "learning_rate", 1e-3);
    double lr_gamma = ct_ctx_hparam_double(ctx, "lr_gamma", 1.0);
    if (ct_last_code() != CT_OK) goto fail;
    if (strcmp(hp.model, "cnn") != 0 && strcmp(hp.model, "mlp") != 0) {
        ct_set_error(CT_ECONFIG, "hyperparameter 'model' must be \"cnn\" or \"mlp\", not \"%s\"", hp.model);
        goto fail;
    }
    const char *dir;
    int64_t workers;
    if (read_data_config(ctx, &dir, &workers) != 0) goto fail;
    t->workers = (int)workers;
    t->train_set = mnist_split(dir, "train");
    t->val_set = t->train_set ? mnist_split(dir, "t10k") : NULL;
    if (!t->val_set) goto fail;
    t->n_val = ct_dataset_len(t->val_set);
    /* _, h, w = train_set[0][0].shape */
    ct_value *first = ct_dataset_get(t->train_set, 0);
    ct_tensor *image = first ? ct_batch_at(first, 0) : NULL;
    int64_t h = image ? ct_size(image, 1) : -1, w = image ? ct_size(image, 2) : -1;
    ct_value_free(first);
    if (h < 1) goto fail;

    ct_module *model = strcmp(hp.model, "cnn") == 0 ? build_cnn(&hp, h, w) : build_mlp(&hp, h, w);
    t->model = ct_ctx_wrap_model(ctx, model);
    ct_adam_opts adam = ct_adam_defaults();
    adam.lr = lr;
    t->optimizer = t->model ? ct_ctx_wrap_optimizer(ctx, ct_optim_adam(t->model, &adam)) : NULL;
    if (!t->optimizer) goto fail;
    /* Adam(fused=True) when hparam fused: one kernel per step, and what
     * --cuda-graphs needs (the foreach Adam reads its step count on the host). */
    if (ct_ctx_hparam_bool(ctx, "fused", false) && ct_optim_set_option(t->optimizer, 0, "fused", 1) != 0) goto fail;
    /* hparam amp "bf16" or "fp16": context.experimental.use_amp() */
    const char *amp = ct_ctx_hparam_str(ctx, "amp", "");
    if (amp[0]) {
        ct_amp_opts a = ct_amp_defaults();
        a.dtype = !strcmp(amp, "bf16") ? CT_BF16 : !strcmp(amp, "fp16") ? CT_F16 : CT_F32;
        if (ct_ctx_use_amp(ctx, &a) != 0) goto fail;
    }
    if (lr_gamma != 1.0 &&
        !ct_ctx_wrap_lr_scheduler(ctx, ct_sched_step_lr(t->optimizer, 1, lr_gamma), CT_STEP_EVERY_EPOCH, 1))
        goto fail;
    return t;
fail:
    mnist_destroy(t); /* what was wrapped belongs to the context */
    return NULL;
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    MNistTrial *t = self;
    ct_tensor *data = ct_batch_at(batch, 0), *labels = ct_batch_at(batch, 1);
    ct_tensor *output = ct_nn_forward(t->model, data);
    ct_cross_entropy_opts ce = ct_cross_entropy_defaults();
    ce.label_smoothing = t->label_smoothing;
    ct_tensor *loss = ct_cross_entropy_ex(output, labels, &ce);
    if (!loss || ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, t->optimizer, NULL, NULL))
        return NULL;
    ct_tensor *acc = ct_mean(ct_to_dtype(ct_eq(ct_argmax(output, 1, false), labels), CT_F32));
    if (!acc) return NULL;
    ct_value *metrics = ct_value_dict();
    ct_value_dict_set(metrics, "loss", ct_value_tensor(loss));
    ct_value_dict_set(metrics, "accuracy", ct_value_tensor(acc));
    return metrics;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    MNistTrial *t = self;
    ct_tensor *data = ct_batch_at(batch, 0), *labels = ct_batch_at(batch, 1);
    ct_tensor *output = ct_nn_forward(t->model, data);
    ct_cross_entropy_opts sum = ct_cross_entropy_defaults();
    sum.reduction = CT_REDUCE_SUM;
    ct_tensor *loss = ct_cross_entropy_ex(output, labels, &sum);
    ct_tensor *correct = ct_sum(ct_eq(ct_argmax(output, 1, false), labels));
    ct_tensor *loss_share = ct_div_scalar(loss, (double)t->n_val);
    ct_tensor *accuracy_share = ct_div_scalar(ct_to_dtype(correct, CT_F64), (double)t->n_val);
    if (!loss_share || !accuracy_share) return NULL;
    ct_value *metrics = ct_value_dict();
    ct_value_dict_set(metrics, "validation_loss", ct_value_tensor(loss_share));
    ct_value_dict_set(metrics, "validation_accuracy", ct_value_tensor(accuracy_share));
    return metrics;
}

static ct_value *evaluation_reducer(void *self, ct_context *ctx) {
    return ct_value_int(CT_REDUCER_SUM);
}

static const ct_trial mnist = {
    .name = "mnist",
    .init = mnist_init,
    .destroy = mnist_destroy,
    .build_training_data_loader = build_training_data_loader,
    .build_validation_data_loader = build_validation_data_loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
    .evaluation_reducer = evaluation_reducer,
};

int main(int argc, char **argv) { return ct_main(argc, argv, &mnist); }
