/*
 * resnet — torchvision's ResNet-18 trained on the bundled digits, as a
 * Determined trial run by ct_main. The model is torchvision's, layer for
 * layer and name for name: its state dict (in every checkpoint, as
 * "models_state_dict"[0]) loads into torchvision.models.resnet18(
 * num_classes=10) with strict=True, and the same seed gives the same
 * initial weights.
 *
 * The PyTorch it mirrors (torchvision/models/resnet.py, and a trial around
 * it in the style of Determined's mnist_pytorch):
 *
 *     class BasicBlock(nn.Module):
 *         def __init__(self, inplanes, planes, stride=1, downsample=None):
 *             super().__init__()
 *             self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, padding=1, bias=False)
 *             self.bn1 = nn.BatchNorm2d(planes)
 *             self.relu = nn.ReLU(inplace=True)
 *             self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
 *             self.bn2 = nn.BatchNorm2d(planes)
 *             self.downsample = downsample
 *         def forward(self, x):
 *             identity = x
 *             out = self.relu(self.bn1(self.conv1(x)))
 *             out = self.bn2(self.conv2(out))
 *             if self.downsample is not None:
 *                 identity = self.downsample(x)
 *             out += identity
 *             return self.relu(out)
 *
 *     class ResNet(nn.Module):                       # resnet18: layers [2, 2, 2, 2]
 *         def __init__(self, block, layers, num_classes=1000):
 *             super().__init__()
 *             self.inplanes = 64
 *             self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
 *             self.bn1 = nn.BatchNorm2d(64)
 *             self.relu = nn.ReLU(inplace=True)
 *             self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
 *             self.layer1 = self._make_layer(block, 64, layers[0])
 *             self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
 *             self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
 *             self.layer4 = self._make_layer(block, 512, layers[3], stride=2)
 *             self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
 *             self.fc = nn.Linear(512 * block.expansion, num_classes)
 *             for m in self.modules():
 *                 if isinstance(m, nn.Conv2d):
 *                     nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
 *                 elif isinstance(m, nn.BatchNorm2d):    # already BatchNorm2d's defaults
 *                     nn.init.constant_(m.weight, 1); nn.init.constant_(m.bias, 0)
 *         def _make_layer(self, block, planes, blocks, stride=1):
 *             downsample = None
 *             if stride != 1 or self.inplanes != planes:
 *                 downsample = nn.Sequential(
 *                     nn.Conv2d(self.inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
 *             layers = [block(self.inplanes, planes, stride, downsample)]
 *             self.inplanes = planes
 *             layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
 *             return nn.Sequential(*layers)
 *         def forward(self, x):
 *             x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
 *             x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
 *             return self.fc(torch.flatten(self.avgpool(x), 1))
 *
 *     class ResNetTrial(PyTorchTrial):
 *         def __init__(self, context):
 *             self.context = context
 *             self.train_set = MNIST(data_dir, train=True, transform=ToTensor())
 *             self.val_set = MNIST(data_dir, train=False, transform=ToTensor())
 *             self.size = context.get_hparam("image_size")
 *             self.model = context.wrap_model(torchvision.models.resnet18(num_classes=10))
 *             self.optimizer = context.wrap_optimizer(torch.optim.SGD(
 *                 self.model.parameters(), lr=context.get_hparam("learning_rate"),
 *                 momentum=context.get_hparam("momentum"),
 *                 weight_decay=context.get_hparam("weight_decay"),
 *                 fused=context.get_hparam("fused")))               # default False
 *             if context.get_hparam("amp"): context.experimental.use_amp()   # "bf16" or "fp16"
 *             self.n_val = len(self.val_set)
 *
 *         def inputs(self, images):     # 1x8x8 digits -> the 3 x size x size images ResNet takes
 *             x = F.interpolate(images, size=(self.size, self.size), mode="bilinear",
 *                               align_corners=False)
 *             return x.expand(-1, 3, -1, -1)
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
 *         def evaluate_batch(self, batch):
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
 *         (build_training_data_loader / build_validation_data_loader as mnist's)
 *
 * The same seed gives the same weights because the modules are made in the
 * order torchvision makes them, drawing the same random numbers: each
 * convolution first takes nn.Conv2d's default initialisation (drawn, then
 * overwritten), a layer's downsample is made before its first block's
 * convolutions (though the block registers it last, which is where the
 * state dict has it), fc takes nn.Linear's, and then every convolution is
 * redrawn with kaiming_normal_ in module order. F.interpolate is called by
 * its ATen name through ct_call (ops.h), as Python itself calls it.
 *
 * Data: config "data": {"dir": ...} names a folder of MNIST-format files,
 * as examples/mnist: the bundled 8x8 digits by default. Or "data":
 * {"train_folder": ..., "val_folder": ...} names two image folders (one
 * sub-folder of JPEG or PNG files per class, as torchvision's ImageFolder
 * reads them; resnet_folder.json), augmented on the loader's workers:
 *
 *     stats = ImageFolder(train_folder, transform=v2.ToTensor())   # mean/std per channel
 *     train = ImageFolder(train_folder, transform=v2.Compose([
 *         v2.RandomResizedCrop(size, scale=(crop_scale, 1.0)),
 *         v2.ColorJitter(brightness=0.4, contrast=0.4),
 *         v2.ToTensor(), v2.Normalize(mean, std)]))
 *     val = ImageFolder(val_folder, transform=v2.Compose([
 *         v2.Resize((size, size)), v2.ToTensor(), v2.Normalize(mean, std)]))
 *
 * and the images come in at [B, 3, size, size]: inputs() passes them on.
 * Each record's crop and jitter are drawn from its own seed (the trial
 * seed, the pass, its index: data.h's ct_dataset_map), so they are the
 * same with any number of workers and after a resume.
 *
 * Usage (from the repository root):
 *     build/examples/resnet/resnet --config examples/resnet/resnet.json
 *     build/examples/resnet/resnet --config examples/resnet/resnet.json --hparam image_size=64
 */
#define _POSIX_C_SOURCE 200809L /* access */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctrial/ctrial.h>

#define NUM_CLASSES 10

/* ---- the model: torchvision's ResNet-18 ------------------------------------ */

typedef struct {
    ct_module *conv1, *bn1, *conv2, *bn2, *downsample; /* downsample: NULL when none */
} BasicBlock;

static ct_tensor *basic_block_forward(ct_module *self, const ct_tensor *x) {
    BasicBlock *b = ct_nn_user(self);
    ct_tensor *out = ct_relu(ct_nn_forward(b->bn1, ct_nn_forward(b->conv1, x)));
    out = ct_nn_forward(b->bn2, ct_nn_forward(b->conv2, out));
    const ct_tensor *identity = b->downsample ? ct_nn_forward(b->downsample, x) : x;
    return ct_relu(ct_add(out, identity));
}

typedef struct {
    ct_module *conv1, *bn1, *maxpool, *layer[4], *avgpool, *fc;
} ResNet;

static ct_tensor *resnet_forward(ct_module *self, const ct_tensor *x) {
    ResNet *r = ct_nn_user(self);
    ct_tensor *h = ct_nn_forward(r->maxpool, ct_relu(ct_nn_forward(r->bn1, ct_nn_forward(r->conv1, x))));
    for (int i = 0; i < 4; i++) h = ct_nn_forward(r->layer[i], h);
    return ct_nn_forward(r->fc, ct_flatten(ct_nn_forward(r->avgpool, h), 1, -1));
}

/* A user module with a calloc'ed user struct; NULL + error on failure. */
static ct_module *user_module(const char *type, ct_forward_fn fwd, size_t size, void **user) {
    *user = calloc(1, size);
    ct_module *m = *user ? ct_nn_module(type, fwd, *user, free) : NULL;
    if (!m) {
        free(*user);
        if (!*user) ct_set_error(CT_ENOMEM, "resnet: out of memory");
    }
    return m;
}

/* nn.Conv2d(in, out, kernel, stride, padding=kernel // 2, bias=False):
 * torchvision's conv3x3, conv1x1 and the 7x7 stem. */
static ct_module *conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
    ct_conv_opts o = ct_conv_defaults();
    o.stride = stride;
    o.padding = kernel / 2;
    o.bias = false;
    return ct_nn_conv2d(in, out, kernel, &o);
}

/* BasicBlock(inplanes, planes, stride, downsample); takes downsample (may
 * be NULL), made by the caller first, as _make_layer makes it. */
static ct_module *basic_block_new(int64_t inplanes, int64_t planes, int64_t stride, ct_module *downsample) {
    BasicBlock *b;
    ct_module *m = user_module("BasicBlock", basic_block_forward, sizeof *b, (void **)&b);
    if (!m) {
        ct_nn_free(downsample);
        return NULL;
    }
    b->conv1 = ct_nn_add_module(m, "conv1", conv(inplanes, planes, 3, stride));
    b->bn1 = ct_nn_add_module(m, "bn1", ct_nn_batchnorm2d(planes, NULL));
    b->conv2 = ct_nn_add_module(m, "conv2", conv(planes, planes, 3, 1));
    b->bn2 = ct_nn_add_module(m, "bn2", ct_nn_batchnorm2d(planes, NULL));
    bool ok = b->conv1 && b->bn1 && b->conv2 && b->bn2;
    if (ok && downsample) ok = (b->downsample = ct_nn_add_module(m, "downsample", downsample)) != NULL;
    else ct_nn_free(downsample); /* none, or the block failed before taking it */
    if (ok) return m;
    ct_nn_free(m);
    return NULL;
}

/* _make_layer: an nn.Sequential of `blocks` BasicBlocks, the first with the
 * stride and, where the shape changes, a downsample (conv1x1 + BatchNorm). */
static ct_module *make_layer(int64_t *inplanes, int64_t planes, int blocks, int64_t stride) {
    ct_module *downsample = NULL;
    if (stride != 1 || *inplanes != planes) {
        downsample = ct_nn_sequential(2, (ct_module *[]){conv(*inplanes, planes, 1, stride),
                                                         ct_nn_batchnorm2d(planes, NULL)});
        if (!downsample) return NULL;
    }
    ct_module *layer = ct_nn_sequential(0, NULL);
    if (!ct_nn_sequential_append(layer, basic_block_new(*inplanes, planes, stride, downsample))) {
        ct_nn_free(layer);
        return NULL;
    }
    *inplanes = planes;
    for (int i = 1; i < blocks; i++) {
        if (!ct_nn_sequential_append(layer, basic_block_new(planes, planes, 1, NULL))) {
            ct_nn_free(layer);
            return NULL;
        }
    }
    return layer;
}

/* nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu") on the
 * weight of every Conv2d, in self.modules() order (which is the order of
 * the parameters). */
static int redraw_convolutions(ct_module *model) {
    ct_guard *g = ct_no_grad();
    int rc = CT_OK;
    for (size_t i = 0; rc == CT_OK && i < ct_nn_num_params(model); i++) {
        const char *name;
        ct_tensor *w = ct_nn_param_at(model, i, &name);
        size_t len = strlen(name);
        if (len < 7 || strcmp(name + len - 7, ".weight") != 0 || len - 7 >= 256) continue;
        char owner[256];
        memcpy(owner, name, len - 7);
        owner[len - 7] = '\0';
        if (strcmp(ct_nn_type(ct_nn_child(model, owner)), "Conv2d") != 0) continue;
        double fan_out = (double)(ct_size(w, 0) * ct_size(w, 2) * ct_size(w, 3));
        rc = ct_normal_(w, 0.0, sqrt(2.0) / sqrt(fan_out)); /* gain sqrt(2) for relu */
    }
    ct_guard_end(g);
    return rc;
}

/* torchvision.models.resnet18(num_classes=num_classes) */
static ct_module *resnet18(int64_t num_classes) {
    ResNet *r;
    ct_module *m = user_module("ResNet", resnet_forward, sizeof *r, (void **)&r);
    if (!m) return NULL;
    int64_t inplanes = 64;
    r->conv1 = ct_nn_add_module(m, "conv1", conv(3, 64, 7, 2));
    r->bn1 = ct_nn_add_module(m, "bn1", ct_nn_batchnorm2d(64, NULL));
    r->maxpool = ct_nn_add_module(m, "maxpool", ct_nn_max_pool2d(3, 2, 1));
    bool ok = r->conv1 && r->bn1 && r->maxpool;
    static const int64_t planes[4] = {64, 128, 256, 512};
    for (int i = 0; ok && i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "layer%d", i + 1);
        ok = (r->layer[i] = ct_nn_add_module(m, name, make_layer(&inplanes, planes[i], 2, i ? 2 : 1))) != NULL;
    }
    if (ok) ok = (r->avgpool = ct_nn_add_module(m, "avgpool", ct_nn_adaptive_avg_pool2d(1, 1))) != NULL;
    if (ok) ok = (r->fc = ct_nn_add_module(m, "fc", ct_nn_linear(512, num_classes, true))) != NULL;
    if (ok && redraw_convolutions(m) == CT_OK) return m;
    ct_nn_free(m);
    return NULL;
}

/* ---- data: as examples/mnist ------------------------------------------------ */

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

/* ---- the trial ----------------------------------------------------------- */

typedef struct {
    ct_dataset *train_set, *val_set; /* handed to the loaders */
    ct_module *model;
    ct_optim *optimizer;
    int64_t n_val;      /* validation records: each batch reports its share */
    int64_t image_size; /* the digits are upsampled to image_size x image_size */
    double crop_scale;  /* image folders: RandomResizedCrop's smallest area */
    bool folders;       /* image folders, transformed to [3, S, S] already */
    int workers;
} ResNetTrial;

static void resnet_destroy(void *self) {
    ResNetTrial *t = self;
    ct_dataset_free(t->train_set); /* still here if a loader was never built */
    ct_dataset_free(t->val_set);
    free(t);
}

/* ---- data: image folders, as torchvision's ImageFolder + v2 transforms --------- */

/* The training folder's per-channel mean and std after ToTensor (all its
 * images must have one size): ct_dataset_mean_std over the pixels. */
static int folder_stats(ct_dataset *folder, double mean[3], double std[3]) {
    ct_dataset *as_float = ct_dataset_transform(folder, 0, ct_tf_to_tensor());
    ct_tensor *m = NULL, *s = NULL;
    int rc = as_float ? ct_dataset_mean_std(as_float, 0, 0, &m, &s) : ct_last_code();
    if (rc == CT_OK && (ct_numel(m) != 3 || ct_read(m, mean, 3 * sizeof(double)) != 0 ||
                        ct_read(s, std, 3 * sizeof(double)) != 0))
        rc = ct_set_error(CT_ECONFIG, "data.train_folder: expected RGB images (3 channels)");
    ct_tensor_free(m);
    ct_tensor_free(s);
    ct_dataset_free(as_float);
    return rc;
}

static int read_folders(ResNetTrial *t, const char *train_dir, const char *val_dir) {
    int64_t S = t->image_size;
    double mean[3], std[3];
    ct_dataset *train = ct_dataset_image_folder(train_dir, NULL); /* RGB, as ImageFolder's loader */
    ct_dataset *val = train ? ct_dataset_image_folder(val_dir, NULL) : NULL;
    int rc = val ? folder_stats(train, mean, std) : ct_last_code();
    if (rc == CT_OK) {
        ct_transform *augment[] = {
            ct_tf_random_resized_crop(S, S, t->crop_scale, 1.0, 3.0 / 4.0, 4.0 / 3.0),
            ct_tf_color_jitter(0.4, 0.4, 0, 0),
            ct_tf_to_tensor(),
            ct_tf_normalize(3, mean, std),
        };
        ct_transform *evaluate[] = {ct_tf_resize(S, S, 0), ct_tf_to_tensor(), ct_tf_normalize(3, mean, std)};
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
static int read_data_config(ct_context *ctx, ResNetTrial *t) {
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
        t->n_val = ct_dataset_len(t->val_set);
        return CT_OK;
    }
    t->train_set = mnist_split(dir, "train");
    t->val_set = t->train_set ? mnist_split(dir, "t10k") : NULL;
    if (!t->val_set) return ct_last_code();
    t->n_val = ct_dataset_len(t->val_set);
    return CT_OK;
}

/* context.experimental.use_amp() in the trial's choice of dtype. */
static int use_amp(ct_context *ctx, const char *amp) {
    if (!amp[0]) return CT_OK;
    ct_amp_opts o = ct_amp_defaults();
    if (strcmp(amp, "bf16") == 0) o.dtype = CT_BF16;
    else if (strcmp(amp, "fp16") == 0) o.dtype = CT_F16;
    else return ct_set_error(CT_ECONFIG, "hyperparameter 'amp' must be \"\", \"bf16\" or \"fp16\", not \"%s\"", amp);
    return ct_ctx_use_amp(ctx, &o);
}

static void *resnet_init(ct_context *ctx) {
    ResNetTrial *t = calloc(1, sizeof *t);
    if (!t) {
        ct_set_error(CT_ENOMEM, "resnet: out of memory");
        return NULL;
    }
    ct_clear_error(); /* a mistyped hparam records an error and gives the default: check once */
    t->image_size = ct_ctx_hparam_int(ctx, "image_size", 32);
    t->crop_scale = ct_ctx_hparam_double(ctx, "crop_scale", 0.7);
    ct_sgd_opts sgd = ct_sgd_defaults();
    sgd.lr = ct_ctx_hparam_double(ctx, "learning_rate", 0.02);
    sgd.momentum = ct_ctx_hparam_double(ctx, "momentum", 0.9);
    sgd.weight_decay = ct_ctx_hparam_double(ctx, "weight_decay", 5e-4);
    bool fused = ct_ctx_hparam_bool(ctx, "fused", false);  /* torch.optim.SGD(fused=True): one kernel */
    const char *amp = ct_ctx_hparam_str(ctx, "amp", ""); /* "", "bf16" or "fp16": mixed precision */
    if (ct_last_code() != CT_OK) goto fail;
    /* Five stride-2 stages: smaller images would vanish before layer4. */
    if (t->image_size < 32 || t->image_size > 1024) {
        ct_set_error(CT_ECONFIG, "hyperparameter 'image_size' must be from 32 to 1024, not %lld",
                     (long long)t->image_size);
        goto fail;
    }
    if (!(t->crop_scale > 0 && t->crop_scale <= 1)) {
        ct_set_error(CT_ECONFIG, "hyperparameter 'crop_scale' must be in (0, 1], not %g", t->crop_scale);
        goto fail;
    }
    if (read_data_config(ctx, t) != CT_OK) goto fail;
    t->model = ct_ctx_wrap_model(ctx, resnet18(NUM_CLASSES));
    ct_optim *sgd_opt = t->model ? ct_optim_sgd(t->model, &sgd) : NULL;
    if (sgd_opt && fused && ct_optim_set_option(sgd_opt, 0, "fused", 1) != CT_OK) {
        ct_optim_free(sgd_opt);
        goto fail;
    }
    t->optimizer = sgd_opt ? ct_ctx_wrap_optimizer(ctx, sgd_opt) : NULL;
    if (!t->optimizer || use_amp(ctx, amp) != CT_OK) goto fail;
    return t;
fail:
    resnet_destroy(t); /* what was wrapped belongs to the context */
    return NULL;
}

static ct_loader *build_training_data_loader(void *self, ct_context *ctx) {
    ResNetTrial *t = self;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.shuffle = true;
    o.seed = ct_ctx_trial_seed(ctx);
    o.num_workers = t->workers;
    o.device = ct_ctx_device(ctx);
    ct_dataset *d = t->train_set;
    t->train_set = NULL; /* the loader takes it */
    return ct_loader_new(d, &o);
}

static ct_loader *build_validation_data_loader(void *self, ct_context *ctx) {
    ResNetTrial *t = self;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.num_workers = t->workers;
    o.device = ct_ctx_device(ctx);
    ct_dataset *d = t->val_set;
    t->val_set = NULL;
    return ct_loader_new(d, &o);
}

/* F.interpolate(images, size=(S, S), mode="bilinear", align_corners=False)
 * .expand(-1, 3, -1, -1): the gray digits as the RGB images ResNet takes.
 * Images from the folders are [B, 3, S, S] already. */
static ct_tensor *inputs(const ResNetTrial *t, const ct_tensor *images) {
    if (t->folders) return ct_alias(images);
    int64_t S = t->image_size;
    ct_tensor *x = CT_CALL("aten::upsample_bilinear2d.vec", CT_T(images), CT_INTS(S, S), CT_B(false), CT_NONE);
    return ct_expand(x, CT_SHAPE(-1, 3, -1, -1));
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    ResNetTrial *t = self;
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
    ResNetTrial *t = self;
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

static const ct_trial resnet = {
    .name = "resnet",
    .init = resnet_init,
    .destroy = resnet_destroy,
    .build_training_data_loader = build_training_data_loader,
    .build_validation_data_loader = build_validation_data_loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
    .evaluation_reducer = evaluation_reducer,
};

int main(int argc, char **argv) { return ct_main(argc, argv, &resnet); }
