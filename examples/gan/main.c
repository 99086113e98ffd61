/*
 * gan — a small generative adversarial network on the 8x8 digits: Determined's
 * multi-model pattern. Two models, two optimizers, two LR schedulers (one
 * stepped by the loop every epoch, one stepped by the trial), and two
 * backward passes per batch in the order the trial chooses.
 *
 * The Determined trial it mirrors (examples/computer_vision/gan_mnist_pytorch,
 * with the discriminator trained first and a scheduler per optimizer):
 *
 *     class GANTrial(PyTorchTrial):
 *         def __init__(self, context):
 *             self.generator = context.wrap_model(Generator(latent_dim, img_shape))
 *             self.discriminator = context.wrap_model(Discriminator(img_shape))
 *             self.opt_g = context.wrap_optimizer(torch.optim.Adam(
 *                 self.generator.parameters(), lr=g_lr, betas=(b1, b2)))
 *             self.opt_d = context.wrap_optimizer(torch.optim.Adam(
 *                 self.discriminator.parameters(), lr=d_lr, betas=(b1, b2)))
 *             self.sched_g = context.wrap_lr_scheduler(
 *                 ExponentialLR(self.opt_g, g_lr_gamma), step_mode=StepMode.STEP_EVERY_EPOCH)
 *             self.sched_d = context.wrap_lr_scheduler(
 *                 ExponentialLR(self.opt_d, d_lr_gamma), step_mode=StepMode.MANUAL_STEP)
 *
 *         def train_batch(self, batch, epoch_idx, batch_idx):
 *             imgs, _ = batch
 *             z = torch.randn(imgs.size(0), latent_dim, device=imgs.device)
 *             generated_imgs = self.generator(z)
 *             valid = torch.ones(imgs.size(0), 1, device=imgs.device)
 *             fake = torch.zeros(imgs.size(0), 1, device=imgs.device)
 *
 *             # Discriminator: real images are valid, generated ones fake. The
 *             # generated batch is detached: no gradient reaches the generator.
 *             self.discriminator.requires_grad_(True)
 *             real_loss = F.binary_cross_entropy_with_logits(self.discriminator(imgs), valid)
 *             fake_loss = F.binary_cross_entropy_with_logits(
 *                 self.discriminator(generated_imgs.detach()), fake)
 *             d_loss = (real_loss + fake_loss) / 2
 *             self.context.backward(d_loss)
 *             self.context.step_optimizer(self.opt_d)
 *             self.sched_d.step()          # MANUAL_STEP: once per discriminator step
 *
 *             # Generator: make the (just updated, frozen) discriminator call
 *             # the generated images valid.
 *             self.discriminator.requires_grad_(False)
 *             g_loss = F.binary_cross_entropy_with_logits(self.discriminator(generated_imgs), valid)
 *             self.context.backward(g_loss)
 *             self.context.step_optimizer(self.opt_g)
 *             return {"d_loss": d_loss, "g_loss": g_loss}
 *
 *         def evaluate_batch(self, batch):
 *             imgs, _ = batch
 *             z = torch.randn(imgs.size(0), latent_dim, device=imgs.device)
 *             real = self.discriminator(imgs) > 0
 *             fake = self.discriminator(self.generator(z)) < 0
 *             return {"d_accuracy": torch.cat([real, fake]).float().mean()}
 *
 * d_accuracy is how often the discriminator tells validation digits from
 * freshly generated ones: 1.0 when the generator is hopeless, 0.5 when it
 * fools the discriminator as often as not. No metric says that one GAN is
 * better than another, so the config checkpoints by period (and at the end),
 * not by the searcher metric.
 *
 * Usage (from the repository root; print_samples draws six generated digits
 * as text at the end):
 *     build/examples/gan/gan --config examples/gan/gan.json --hparam print_samples=true
 */
#include <stdio.h>
#include <stdlib.h>

#include <ctrial/callback.h>
#include <ctrial/ctrial.h>

/* ---- the models --------------------------------------------------------- */

/*
 *     class Generator(nn.Module):
 *         def forward(self, z):
 *             x = F.leaky_relu(self.fc1(z), 0.2)
 *             return torch.sigmoid(self.fc2(x)).view(-1, 1, h, w)
 */
typedef struct {
    ct_module *fc1, *fc2;
    int64_t h, w;
} Generator;

static ct_tensor *generator_forward(ct_module *self, const ct_tensor *z) {
    Generator *g = ct_nn_user(self);
    ct_tensor *x = ct_leaky_relu(ct_nn_forward(g->fc1, z), 0.2);
    x = ct_sigmoid(ct_nn_forward(g->fc2, x)); /* pixels in 0..1, as ToTensor() gives them */
    return ct_view(x, CT_SHAPE(-1, 1, g->h, g->w));
}

static ct_module *generator_new(int64_t latent_dim, int64_t hidden, int64_t h, int64_t w) {
    Generator *g = calloc(1, sizeof *g);
    ct_module *m = g ? ct_nn_module("Generator", generator_forward, g, free) : NULL;
    if (!m) {
        free(g);
        return NULL;
    }
    g->h = h;
    g->w = w;
    g->fc1 = ct_nn_add_module(m, "fc1", ct_nn_linear(latent_dim, hidden, true));
    g->fc2 = ct_nn_add_module(m, "fc2", ct_nn_linear(hidden, h * w, true));
    if (!g->fc1 || !g->fc2) {
        ct_nn_free(m);
        return NULL;
    }
    return m;
}

/*
 *     class Discriminator(nn.Module):
 *         def forward(self, img):
 *             x = F.leaky_relu(self.fc1(torch.flatten(img, 1)), 0.2)
 *             return self.fc2(x)          # a logit: > 0 means "real"
 */
typedef struct {
    ct_module *fc1, *fc2;
} Discriminator;

static ct_tensor *discriminator_forward(ct_module *self, const ct_tensor *img) {
    Discriminator *d = ct_nn_user(self);
    ct_tensor *x = ct_leaky_relu(ct_nn_forward(d->fc1, ct_flatten(img, 1, -1)), 0.2);
    return ct_nn_forward(d->fc2, x);
}

static ct_module *discriminator_new(int64_t hidden, int64_t h, int64_t w) {
    Discriminator *d = calloc(1, sizeof *d);
    ct_module *m = d ? ct_nn_module("Discriminator", discriminator_forward, d, free) : NULL;
    if (!m) {
        free(d);
        return NULL;
    }
    d->fc1 = ct_nn_add_module(m, "fc1", ct_nn_linear(h * w, hidden, true));
    d->fc2 = ct_nn_add_module(m, "fc2", ct_nn_linear(hidden, 1, true));
    if (!d->fc1 || !d->fc2) {
        ct_nn_free(m);
        return NULL;
    }
    return m;
}

/* module.requires_grad_(on) */
static int requires_grad(ct_module *m, bool on) {
    size_t n;
    ct_tensor *const *params = ct_nn_parameters(m, &n);
    for (size_t i = 0; i < n; i++)
        if (ct_set_requires_grad(params[i], on) != 0) return -1;
    return 0;
}

/* ---- the trial ---------------------------------------------------------- */

typedef struct {
    ct_dataset *train_set, *val_set; /* handed to the loaders */
    ct_module *generator, *discriminator;
    ct_optim *opt_g, *opt_d;
    ct_sched *sched_d; /* stepped here; the generator's is stepped by the loop */
    int64_t latent_dim;
} GANTrial;

static ct_dataset *digits(const char *dir, const char *prefix) {
    char images[4096], labels[4096];
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    return ct_dataset_mnist(images, labels);
}

static void gan_destroy(void *self) {
    GANTrial *t = self;
    ct_dataset_free(t->train_set);
    ct_dataset_free(t->val_set);
    free(t);
}

static ct_optim *adam(ct_module *m, double lr, double beta1, double beta2) {
    ct_adam_opts o = ct_adam_defaults();
    o.lr = lr;
    o.beta1 = beta1;
    o.beta2 = beta2;
    return ct_optim_adam(m, &o);
}

static void *gan_init(ct_context *ctx) {
    GANTrial *t = calloc(1, sizeof *t);
    if (!t) {
        ct_set_error(CT_ENOMEM, "gan: out of memory");
        return NULL;
    }
    /* A hyperparameter of the wrong type records an error and gives the
     * default: check once after reading them all. */
    ct_clear_error();
    t->latent_dim = ct_ctx_hparam_int(ctx, "latent_dim", 16);
    int64_t hidden = ct_ctx_hparam_int(ctx, "hidden", 128);
    double g_lr = ct_ctx_hparam_double(ctx, "g_lr", 2e-3);
    double d_lr = ct_ctx_hparam_double(ctx, "d_lr", 2e-3);
    double b1 = ct_ctx_hparam_double(ctx, "b1", 0.5);
    double b2 = ct_ctx_hparam_double(ctx, "b2", 0.999);
    double g_lr_gamma = ct_ctx_hparam_double(ctx, "g_lr_gamma", 0.95);
    double d_lr_gamma = ct_ctx_hparam_double(ctx, "d_lr_gamma", 0.999);
    if (ct_last_code() != CT_OK) goto fail;

    const ct_value *dir_value = ct_value_dict_get(ct_ctx_data_config(ctx), "dir"); /* "data": {"dir": ...} */
    const char *dir = dir_value ? ct_value_get_str(dir_value) : "examples/data/digits";
    if (!dir) {
        ct_set_error(CT_ECONFIG, "data.dir must be a string (a folder of MNIST-format files)");
        goto fail;
    }
    t->train_set = digits(dir, "train");
    t->val_set = t->train_set ? digits(dir, "t10k") : NULL;
    if (!t->val_set) goto fail;
    ct_value *first = ct_dataset_get(t->train_set, 0); /* (image [1, h, w], label) */
    ct_tensor *image = first ? ct_batch_at(first, 0) : NULL;
    int64_t h = image ? ct_size(image, 1) : -1, w = image ? ct_size(image, 2) : -1;
    ct_value_free(first);
    if (h < 1) goto fail;

    t->generator = ct_ctx_wrap_model(ctx, generator_new(t->latent_dim, hidden, h, w));
    t->discriminator = ct_ctx_wrap_model(ctx, discriminator_new(hidden, h, w));
    if (!t->generator || !t->discriminator) goto fail;
    t->opt_g = ct_ctx_wrap_optimizer(ctx, adam(t->generator, g_lr, b1, b2));
    t->opt_d = ct_ctx_wrap_optimizer(ctx, adam(t->discriminator, d_lr, b1, b2));
    if (!t->opt_g || !t->opt_d) goto fail;
    if (!ct_ctx_wrap_lr_scheduler(ctx, ct_sched_exponential(t->opt_g, g_lr_gamma), CT_STEP_EVERY_EPOCH, 1))
        goto fail;
    t->sched_d = ct_ctx_wrap_lr_scheduler(ctx, ct_sched_exponential(t->opt_d, d_lr_gamma), CT_STEP_MANUAL, 1);
    if (!t->sched_d) goto fail;
    return t;
fail:
    gan_destroy(t); /* what was wrapped belongs to the context */
    return NULL;
}

static ct_loader *loader(ct_context *ctx, ct_dataset **set, bool shuffle) {
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.shuffle = shuffle;
    o.seed = ct_ctx_trial_seed(ctx);
    o.device = ct_ctx_device(ctx);
    ct_dataset *d = *set;
    *set = NULL; /* the loader takes it */
    return ct_loader_new(d, &o);
}

static ct_loader *build_training_data_loader(void *self, ct_context *ctx) {
    return loader(ctx, &((GANTrial *)self)->train_set, true);
}

static ct_loader *build_validation_data_loader(void *self, ct_context *ctx) {
    return loader(ctx, &((GANTrial *)self)->val_set, false);
}

static ct_tensor *bce(const ct_tensor *logits, const ct_tensor *target) {
    return ct_bce_with_logits(logits, target, NULL, NULL, CT_REDUCE_MEAN);
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    GANTrial *t = self;
    ct_tensor *imgs = ct_batch_at(batch, 0);
    if (!imgs) return NULL;
    int64_t n = ct_size(imgs, 0);
    ct_topts on_device = {.device = ct_device_of(imgs)};
    ct_tensor *z = ct_randn(CT_SHAPE(n, t->latent_dim), &on_device);
    ct_tensor *generated_imgs = ct_nn_forward(t->generator, z);
    ct_tensor *valid = ct_ones(CT_SHAPE(n, 1), &on_device);
    ct_tensor *fake = ct_zeros(CT_SHAPE(n, 1), &on_device);

    /* Discriminator: real images are valid, generated ones fake. The
     * generated batch is detached: no gradient reaches the generator. */
    if (requires_grad(t->discriminator, true) != 0) return NULL;
    ct_tensor *real_loss = bce(ct_nn_forward(t->discriminator, imgs), valid);
    ct_tensor *fake_loss = bce(ct_nn_forward(t->discriminator, ct_detach(generated_imgs)), fake);
    ct_tensor *d_loss = ct_div_scalar(ct_add(real_loss, fake_loss), 2.0);
    if (!d_loss || ct_ctx_backward(ctx, d_loss) || ct_ctx_step_optimizer(ctx, t->opt_d, NULL, NULL) ||
        ct_sched_step(t->sched_d)) /* MANUAL: once per discriminator step */
        return NULL;

    /* Generator: make the (just updated, now frozen) discriminator call the
     * generated images valid. Frozen, it collects no gradients of its own. */
    if (requires_grad(t->discriminator, false) != 0) return NULL;
    ct_tensor *g_loss = bce(ct_nn_forward(t->discriminator, generated_imgs), valid);
    if (!g_loss || ct_ctx_backward(ctx, g_loss) || ct_ctx_step_optimizer(ctx, t->opt_g, NULL, NULL))
        return NULL;

    ct_value *metrics = ct_value_dict();
    ct_value_dict_set(metrics, "d_loss", ct_value_tensor(d_loss));
    ct_value_dict_set(metrics, "g_loss", ct_value_tensor(g_loss));
    return metrics;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    GANTrial *t = self;
    ct_tensor *imgs = ct_batch_at(batch, 0);
    if (!imgs) return NULL;
    ct_tensor *z = ct_randn(CT_SHAPE(ct_size(imgs, 0), t->latent_dim), &(ct_topts){.device = ct_device_of(imgs)});
    ct_tensor *real = ct_gt_scalar(ct_nn_forward(t->discriminator, imgs), 0.0);
    ct_tensor *fake = ct_lt_scalar(ct_nn_forward(t->discriminator, ct_nn_forward(t->generator, z)), 0.0);
    ct_tensor *accuracy = real && fake ? ct_mean(ct_to_dtype(ct_cat(2, (ct_tensor *[]){real, fake}, 0), CT_F32))
                                       : NULL;
    if (!accuracy) return NULL;
    ct_value *metrics = ct_value_dict();
    ct_value_dict_set(metrics, "d_accuracy", ct_value_tensor(accuracy));
    return metrics;
}

/* ---- a callback: show what the generator draws ------------------------- */

/* With hparam print_samples, draws six digits as text when training ends. */
static int print_samples(void *self, ct_context *ctx) {
    GANTrial *t = self;
    enum { N = 6 };
    ct_scope *s = ct_scope_begin();
    ct_guard *g = ct_no_grad();
    ct_nn_train(t->generator, false);
    ct_tensor *imgs = ct_nn_forward(t->generator, ct_randn(CT_SHAPE(N, t->latent_dim),
                                                               &(ct_topts){.device = ct_ctx_device(ctx)}));
    imgs = ct_contiguous(ct_to_device(imgs, ct_cpu(), false));
    int64_t h = ct_size(imgs, 2), w = ct_size(imgs, 3);
    const float *px = ct_data_ptr(imgs);
    for (int64_t r = 0; px && r < h; r++) {
        for (int k = 0; k < N; k++) {
            for (int64_t c = 0; c < w; c++) putchar(" .:-=+*#"[(int)(px[(k * h + r) * w + c] * 7.99f)]);
            fputs("   ", stdout);
        }
        putchar('\n');
    }
    ct_guard_end(g);
    ct_scope_end(s);
    return px ? 0 : -1;
}

static int build_callbacks(void *self, ct_context *ctx) {
    if (!ct_ctx_hparam_bool(ctx, "print_samples", false)) return 0;
    return ct_ctx_add_callback(ctx, &(ct_callback){.name = "samples", .self = self,
                                                   .on_trial_shutdown = print_samples});
}

static const ct_trial gan = {
    .name = "gan",
    .init = gan_init,
    .destroy = gan_destroy,
    .build_training_data_loader = build_training_data_loader,
    .build_validation_data_loader = build_validation_data_loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
    .build_callbacks = build_callbacks,
};

int main(int argc, char **argv) { return ct_main(argc, argv, &gan); }
