/*
 * exported — train any image classifier exported from Python, as a
 * Determined trial run by ct_main: the model is a .pt2 archive
 * (tools/export_model.py; ctrial/export.h), given as --hparam model=FILE.
 *
 * The model is whatever the user's Python module is: torchvision's resnet18
 * or mobilenet_v3_small, a ViT, a team's own network. What this trial
 * needs of it: one input, float32 [N, C, H, W] (N dynamic), and logits
 * [N, classes] out. The archive says C, H and W, and the data is brought
 * to them.
 *
 * The PyTorch it mirrors (a trial in the style of Determined's
 * mnist_pytorch, whose model is the module the archive was exported from):
 *
 *     class ExportedTrial(PyTorchTrial):
 *         def __init__(self, context):
 *             self.context = context
 *             self.model = context.wrap_model(Net())     # the module of tools/export_model.py
 *             self.optimizer = context.wrap_optimizer(torch.optim.SGD(
 *                 self.model.parameters(), lr=context.get_hparam("learning_rate"),
 *                 momentum=context.get_hparam("momentum"),
 *                 weight_decay=context.get_hparam("weight_decay")))
 *                 # or torch.optim.AdamW(..., weight_decay=...) with hparam optimizer "adamw"
 *
 *         def inputs(self, images):     # digits [B, 1, 8, 8] -> the model's [B, C, H, W]
 *             x = F.interpolate(images, size=(H, W), mode="bilinear", align_corners=False)
 *             return x.expand(-1, C, -1, -1)
 *
 *         def train_batch(self, batch, epoch_idx, batch_idx):
 *             images, labels = batch
 *             output = self.model(self.inputs(images))
 *             loss = F.cross_entropy(output, labels)
 *             self.context.backward(loss)
 *             self.context.step_optimizer(self.optimizer)
 *             accuracy = (output.argmax(1) == labels).float().mean()
 *             return {"loss": loss, "accuracy": accuracy}
 *
 *         def evaluate_batch(self, batch):            # the model in eval(), under no_grad
 *             images, labels = batch
 *             output = self.model(self.inputs(images))
 *             loss = F.cross_entropy(output, labels, reduction="sum")
 *             correct = (output.argmax(1) == labels).sum()
 *             return {"validation_loss": loss / self.n_val,
 *                     "validation_accuracy": correct / self.n_val}
 *
 *         def evaluation_reducer(self):
 *             return Reducer.SUM
 *
 * Data: config "data": {"dir": ...} names a folder of MNIST-format files
 * (the bundled 8x8 digits by default), each batch upsampled on the device
 * to the model's H x W and expanded to its C channels, as examples/resnet
 * does. Or "data": {"train_folder": ..., "val_folder": ...} names two image
 * folders (one sub-folder of JPEG or PNG files per class, torchvision's
 * ImageFolder), transformed on the loader's workers:
 *
 *     train = ImageFolder(train_folder, transform=v2.Compose([
 *         v2.Resize((H, W)), v2.RandomHorizontalFlip(), v2.ToTensor(), v2.Normalize(mean, std)]))
 *     val = ImageFolder(val_folder, transform=v2.Compose([
 *         v2.Resize((H, W)), v2.ToTensor(), v2.Normalize(mean, std)]))
 *
 * with the training images' per-channel mean and std; the classes must
 * not outnumber the model's outputs.
 *
 * The checkpoints' models_state_dict[0] has the Python module's names: it
 * loads into that module with strict=True.
 *
 * Usage (from the repository root):
 *     .venv/bin/python tools/export_model.py torchvision.models:resnet18 --kwargs '{"num_classes": 10}' \
 *         --input 'float32[N,3,32,32]' --seed 0 -o resnet18.pt2
 *     build/examples/exported/exported --config examples/exported/exported.json --hparam model=resnet18.pt2
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
    int64_t n_val;        /* validation records: each batch reports its share */
    int64_t C, H, W;      /* what the model takes */
    int64_t classes;      /* what it returns */
    bool folders;         /* image folders, transformed to [C, H, W] already */
    int workers;
} ExportedTrial;

static void exported_destroy(void *self) {
    ExportedTrial *t = self;
    ct_dataset_free(t->train_set); /* still here if a loader was never built */
    ct_dataset_free(t->val_set);
    free(t);
}

/* ---- the model ------------------------------------------------------------- */

/* The archive's module, and what it takes and returns, checked against
 * what this trial feeds it. */
static ct_module *load_model(ExportedTrial *t, const char *path, int64_t image_size) {
    ct_module *m = ct_nn_load_exported(path, NULL);
    if (!m) return NULL;
    ct_exported_tensor in, out;
    size_t n_in = 0, n_out = 0;
    int rc = ct_nn_exported_arity(m, &n_in, &n_out);
    if (!rc && (n_in != 1 || n_out != 1))
        rc = ct_set_error(CT_ECONFIG, "%s: the model takes %zu inputs and returns %zu outputs; this trial feeds "
                          "one image batch and reads one tensor of logits", path, n_in, n_out);
    if (!rc) rc = ct_nn_exported_input(m, 0, &in);
    if (!rc) rc = ct_nn_exported_output(m, 0, &out);
    if (!rc && (in.dtype != CT_F32 || in.ndim != 4 || in.size[1] < 1))
        rc = ct_set_error(CT_ECONFIG, "%s: the model's input '%s' must be float32 [N, C, H, W] with C known", path,
                          in.name);
    if (!rc && (out.ndim != 2 || out.size[1] < 1))
        rc = ct_set_error(CT_ECONFIG, "%s: the model must return logits [N, classes]", path);
    if (rc) {
        ct_nn_free(m);
        return NULL;
    }
    t->C = in.size[1];
    t->H = in.size[2] > 0 ? in.size[2] : image_size; /* a dynamic size takes hparam image_size */
    t->W = in.size[3] > 0 ? in.size[3] : image_size;
    t->classes = out.size[1];
    return m;
}

/* ---- data -------------------------------------------------------------------- */

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

/* The folders resized to the model's H x W, normalized by the training
 * images' per-channel mean and std. */
static int read_folders(ExportedTrial *t, const char *train_dir, const char *val_dir) {
    if (t->C != 1 && t->C != 3)
        return ct_set_error(CT_ECONFIG, "image folders give 1 (gray) or 3 (RGB) channels; the model takes %lld",
                            (long long)t->C);
    ct_image_folder_opts fo = ct_image_folder_defaults();
    fo.mode = t->C == 1 ? CT_IMAGE_GRAY : CT_IMAGE_RGB;
    ct_dataset *train = ct_dataset_image_folder(train_dir, &fo);
    ct_dataset *val = train ? ct_dataset_image_folder(val_dir, &fo) : NULL;
    int64_t classes = train ? ct_image_folder_num_classes(train) : 0;
    double mean[3], std[3];
    int rc = val ? CT_OK : ct_last_code();
    if (rc == CT_OK && classes > t->classes)
        rc = ct_set_error(CT_ECONFIG, "%s has %lld classes, the model only %lld outputs", train_dir,
                          (long long)classes, (long long)t->classes);
    if (rc == CT_OK) { /* mean and std of the resized training images */
        ct_transform *resized[] = {ct_tf_resize(t->H, t->W, 0), ct_tf_to_tensor()};
        ct_dataset *pixels = ct_dataset_transform(train, 0, ct_tf_compose(2, resized));
        ct_tensor *m = NULL, *s = NULL;
        rc = pixels ? ct_dataset_mean_std(pixels, 0, 0, &m, &s) : ct_last_code();
        if (rc == CT_OK && (ct_read(m, mean, (size_t)t->C * sizeof(double)) != 0 ||
                            ct_read(s, std, (size_t)t->C * sizeof(double)) != 0))
            rc = ct_last_code();
        ct_tensor_free(m);
        ct_tensor_free(s);
        ct_dataset_free(pixels);
    }
    if (rc == CT_OK) {
        ct_transform *augment[] = {ct_tf_resize(t->H, t->W, 0), ct_tf_random_horizontal_flip(0.5), ct_tf_to_tensor(),
                                   ct_tf_normalize((int)t->C, mean, std)};
        ct_transform *evaluate[] = {ct_tf_resize(t->H, t->W, 0), ct_tf_to_tensor(), ct_tf_normalize((int)t->C, mean, std)};
        t->train_set = ct_dataset_transform(train, 0, ct_tf_compose(4, augment));
        t->val_set = t->train_set ? ct_dataset_transform(val, 0, ct_tf_compose(3, evaluate)) : NULL;
        rc = t->val_set ? CT_OK : ct_last_code();
    }
    ct_dataset_free(train); /* the transformed datasets hold their own references */
    ct_dataset_free(val);
    t->folders = true;
    return rc;
}

/* The config's "data": {"dir": folder of MNIST files, or "train_folder" and
 * "val_folder": image folders; "workers": loader threads}. */
static int read_data_config(ct_context *ctx, ExportedTrial *t) {
    const ct_value *data = ct_ctx_data_config(ctx);
    const ct_value *d = ct_value_dict_get(data, "dir"), *w = ct_value_dict_get(data, "workers");
    const ct_value *tf = ct_value_dict_get(data, "train_folder"), *vf = ct_value_dict_get(data, "val_folder");
    const char *dir = d ? ct_value_get_str(d) : "examples/data/digits";
    int64_t workers = 0;
    if (!dir) return ct_set_error(CT_ECONFIG, "data.dir must be a string (a folder of MNIST files)");
    if (w && (ct_value_get_int(w, &workers) != 0 || workers < 0 || workers > 1024))
        return ct_set_error(CT_ECONFIG, "data.workers must be an integer from 0 to 1024");
    t->workers = (int)workers;
    if (tf || vf) {
        if (!tf || !vf || !ct_value_get_str(tf) || !ct_value_get_str(vf))
            return ct_set_error(CT_ECONFIG, "data.train_folder and data.val_folder must both be strings "
                                            "(folders of one sub-folder of images per class)");
        if (read_folders(t, ct_value_get_str(tf), ct_value_get_str(vf)) != CT_OK) return ct_last_code();
    } else {
        if (t->classes < 10)
            return ct_set_error(CT_ECONFIG, "the digits have 10 classes, the model only %lld outputs",
                                (long long)t->classes);
        t->train_set = mnist_split(dir, "train");
        t->val_set = t->train_set ? mnist_split(dir, "t10k") : NULL;
        if (!t->val_set) return ct_last_code();
    }
    t->n_val = ct_dataset_len(t->val_set);
    return CT_OK;
}

/* ---- the trial ----------------------------------------------------------------- */

static ct_optim *optimizer_new(ct_context *ctx, ct_module *model) {
    const char *kind = ct_ctx_hparam_str(ctx, "optimizer", "sgd");
    double lr = ct_ctx_hparam_double(ctx, "learning_rate", 0.02);
    double wd = ct_ctx_hparam_double(ctx, "weight_decay", 5e-4);
    if (!strcmp(kind, "sgd")) {
        ct_sgd_opts o = ct_sgd_defaults();
        o.lr = lr;
        o.momentum = ct_ctx_hparam_double(ctx, "momentum", 0.9);
        o.weight_decay = wd;
        return ct_optim_sgd(model, &o);
    }
    if (!strcmp(kind, "adamw")) {
        ct_adam_opts o = ct_adamw_defaults();
        o.lr = lr;
        o.weight_decay = wd;
        return ct_optim_adamw(model, &o);
    }
    ct_set_error(CT_ECONFIG, "hyperparameter 'optimizer' must be \"sgd\" or \"adamw\", not \"%s\"", kind);
    return NULL;
}

static void *exported_init(ct_context *ctx) {
    ExportedTrial *t = calloc(1, sizeof *t);
    if (!t) {
        ct_set_error(CT_ENOMEM, "exported: out of memory");
        return NULL;
    }
    ct_clear_error(); /* a mistyped hparam records an error and gives the default: check once */
    const char *path = ct_ctx_hparam_str(ctx, "model", "");
    int64_t image_size = ct_ctx_hparam_int(ctx, "image_size", 32);
    if (ct_last_code() != CT_OK) goto fail;
    if (!path[0]) {
        ct_set_error(CT_ECONFIG, "hyperparameter 'model' must name an exported model (--hparam model=FILE.pt2; "
                                 "tools/export_model.py writes one)");
        goto fail;
    }
    ct_module *model = load_model(t, path, image_size);
    if (!model || read_data_config(ctx, t) != CT_OK) {
        ct_nn_free(model);
        goto fail;
    }
    t->model = ct_ctx_wrap_model(ctx, model);
    t->optimizer = t->model ? ct_ctx_wrap_optimizer(ctx, optimizer_new(ctx, t->model)) : NULL;
    if (!t->optimizer) goto fail;
    return t;
fail:
    exported_destroy(t); /* what was wrapped belongs to the context */
    return NULL;
}

static ct_loader *make_loader(ExportedTrial *t, ct_context *ctx, ct_dataset **set, bool train) {
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.shuffle = train;
    o.seed = ct_ctx_trial_seed(ctx);
    o.num_workers = t->workers;
    o.device = ct_ctx_device(ctx);
    ct_dataset *d = *set;
    *set = NULL; /* the loader takes it */
    return ct_loader_new(d, &o);
}

static ct_loader *build_training_data_loader(void *self, ct_context *ctx) {
    ExportedTrial *t = self;
    return make_loader(t, ctx, &t->train_set, true);
}

static ct_loader *build_validation_data_loader(void *self, ct_context *ctx) {
    ExportedTrial *t = self;
    return make_loader(t, ctx, &t->val_set, false);
}

/* F.interpolate(images, size=(H, W), mode="bilinear", align_corners=False)
 * .expand(-1, C, -1, -1): the gray digits as the model's images. Images
 * from the folders are [B, C, H, W] already. */
static ct_tensor *inputs(const ExportedTrial *t, const ct_tensor *images) {
    if (t->folders) return ct_alias(images);
    ct_tensor *x = CT_CALL("aten::upsample_bilinear2d.vec", CT_T(images), CT_INTS(t->H, t->W), CT_B(false), CT_NONE);
    return ct_expand(x, CT_SHAPE(-1, t->C, -1, -1));
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    ExportedTrial *t = self;
    ct_tensor *images = ct_batch_at(batch, 0), *labels = ct_batch_at(batch, 1);
    ct_tensor *output = ct_nn_forward(t->model, inputs(t, images));
    ct_tensor *loss = ct_cross_entropy(output, labels);
    if (!loss || ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, t->optimizer, NULL, NULL))
        return NULL;
    ct_tensor *accuracy = ct_mean(ct_to_dtype(ct_eq(ct_argmax(output, 1, false), labels), CT_F32));
    if (!accuracy) return NULL;
    ct_value *metrics = ct_value_dict();
    ct_value_dict_set(metrics, "loss", ct_value_tensor(loss));
    ct_value_dict_set(metrics, "accuracy", ct_value_tensor(accuracy));
    return metrics;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    ExportedTrial *t = self;
    ct_tensor *images = ct_batch_at(batch, 0), *labels = ct_batch_at(batch, 1);
    ct_tensor *output = ct_nn_forward(t->model, inputs(t, images));
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

static ct_value *evaluation_reducer(void *self, ct_context *ctx) { return ct_value_int(CT_REDUCER_SUM); }

static const ct_trial exported = {
    .name = "exported",
    .init = exported_init,
    .destroy = exported_destroy,
    .build_training_data_loader = build_training_data_loader,
    .build_validation_data_loader = build_validation_data_loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
    .evaluation_reducer = evaluation_reducer,
};

int main(int argc, char **argv) { return ct_main(argc, argv, &exported); }
