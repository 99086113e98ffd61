/* libFuzzer target: resuming from a checkpoint whose metadata.json or
 * state_dict.pth comes from the input, through ct_fit itself (modules fit
 * and everything under it, over the release build's shim and libtorch):
 * metadata.json's checks (ckpt), the trial state's position and fields
 * (cti_context_restore_position, cti_context_check_position), and the
 * appliers that put a state dict into the models, optimizers, LR
 * schedulers and RNG (cti_context_restore_state), then one batch of
 * training on what was restored.
 *
 * The trial: Linear(4, 8) -> BatchNorm1d(8) -> ReLU -> Linear(8, 3), Adam,
 * StepLR(2, 0.5) per batch, on 16 fixed records, global batch 4. Once per
 * process it trains 3 batches and checkpoints (the base checkpoint). Each
 * input is a mode byte and a payload:
 *  - even: the payload is metadata.json (beside the base checkpoint's
 *    state_dict.pth);
 *  - odd: the payload is a trial state in value_wire's encoding
 *    (dist/value_wire.h: tensors with their dtype and shape), saved as
 *    state_dict.pth (ct_pth_save) beside the base checkpoint's
 *    metadata.json listing that file's size and CRC-32.
 * The seeds' metadata.json has no seal (metadata_crc32 and
 * commit_sequence: checkpoints of earlier versions have none), so mutated
 * fields reach the checks behind it.
 *
 * ct_fit resumes from it for max_length 4 batches. Beyond "no crash, no
 * leak, no undefined behaviour", it checks that a checkpoint that cannot be
 * resumed is CT_ECHECKPOINT (the exit code of a bad checkpoint) with a
 * message naming its folder — never another code, never a failure later in
 * training — and that the checkpoint's files are left as they were.
 *
 * FUZZ_RESTORE_SEEDS=DIR writes the two seeds made from the base
 * checkpoint into DIR (fuzz/corpus/restore holds them).
 * Built by fuzz/CMakeLists.txt when the shim is given, run by fuzz/run.sh. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctrial/ctrial.h>

#include "base/files.h"
#include "ckpt/ckpt.h"
#include "dist/value_wire.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the trial --------------------------------------------------------------------- */

typedef struct {
    ct_module *model;
    ct_optim *opt;
    ct_tensor *x, *y;
} Trial;

static void trial_destroy(void *self) {
    Trial *t = self;
    ct_tensor_free(t->x);
    ct_tensor_free(t->y);
    free(t);
}

static void *trial_init(ct_context *ctx) {
    enum { N = 16, F = 4 };
    Trial *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    float x[N * F];
    int64_t y[N];
    for (int i = 0; i < N * F; i++) x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
    for (int i = 0; i < N; i++) y[i] = (x[i * F] + x[i * F + 1] > 0) + (x[i * F + 2] > 0.3f);
    t->x = ct_keep(ct_from_data(x, CT_SHAPE(N, F), CT_F32));
    t->y = ct_keep(ct_from_data(y, CT_SHAPE(N), CT_I64));
    t->model = ct_ctx_wrap_model(
        ctx, ct_nn_sequential(4, (ct_module *[]){ct_nn_linear(4, 8, true), ct_nn_batchnorm1d(8, NULL), ct_nn_relu(),
                                                 ct_nn_linear(8, 3, true)}));
    ct_adam_opts adam = ct_adam_defaults();
    adam.lr = 0.01;
    t->opt = t->model ? ct_ctx_wrap_optimizer(ctx, ct_optim_adam(t->model, &adam)) : NULL;
    if (!t->opt || !ct_ctx_wrap_lr_scheduler(ctx, ct_sched_step_lr(t->opt, 2, 0.5), CT_STEP_EVERY_BATCH, 1)) {
        trial_destroy(t);
        return NULL;
    }
    return t;
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    Trial *t = self;
    ct_tensor *loss = ct_cross_entropy(ct_nn_forward(t->model, ct_batch_at(batch, 0)), ct_batch_at(batch, 1));
    if (ct_ctx_backward(ctx, loss) != 0 || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL) != 0) return NULL;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "loss", ct_value_tensor(ct_keep(ct_alias(loss))));
    return m;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    Trial *t = self;
    ct_tensor *out = ct_nn_forward(t->model, ct_batch_at(batch, 0));
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(ct_keep(ct_cross_entropy(out, ct_batch_at(batch, 1)))));
    return m;
}

static ct_loader *loader(void *self, ct_context *ctx) {
    Trial *t = self;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    return ct_loader_new(ct_dataset_tensors(2, (ct_tensor *[]){t->x, t->y}), &o);
}

static const ct_trial trial = {
    .name = "fuzz_restore",
    .init = trial_init,
    .destroy = trial_destroy,
    .build_training_data_loader = loader,
    .build_validation_data_loader = loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
};

/* ---- the base checkpoint ----------------------------------------------------------- */

static char g_root[96];         /* scratch: base/, ckpt/ (the input's checkpoint), out/ */
static char g_base[4200];       /* the base checkpoint */
static json_t *g_meta;          /* its metadata.json without the seal */

static ct_fit_opts fit_opts(int64_t batches, const char *out, const char *resume) {
    ct_fit_opts o = ct_fit_defaults();
    o.max_length = ct_batches(batches);
    o.global_batch_size = 4;
    o.num_threads = 1;
    o.quiet = true;
    o.tensorboard = false;
    o.output_dir = out;
    o.resume = resume;
    o.overwrite = true;
    return o;
}

static void fail_setup(const char *what) {
    fprintf(stderr, "fuzz_restore: %s: %s\n", what, ct_last_error());
    abort();
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) fail_setup(path);
}

static void write_seeds(const char *dir) {
    char path[4300];
    char *text = json_dumps(g_meta, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    snprintf(path, sizeof path, "%s/metadata", dir);
    FILE *f = fopen(path, "wb");
    if (!text || !f || fputc(0, f) == EOF || fputs(text, f) == EOF || fclose(f) != 0) fail_setup(path);
    free(text);
    ct_value *state = NULL;
    void *bytes = NULL;
    size_t n = 0;
    snprintf(path, sizeof path, "%s/%s", g_base, CT_CKPT_STATE_FILE);
    if (ct_pth_load(path, &state) != 0 || cti_value_to_bytes(state, &bytes, &n) != 0) fail_setup(path);
    snprintf(path, sizeof path, "%s/state", dir);
    f = fopen(path, "wb");
    if (!f || fputc(1, f) == EOF || fwrite(bytes, 1, n, f) != n || fclose(f) != 0) fail_setup(path);
    free(bytes);
    ct_value_free(state);
}

static void remove_tree(const char *path);
static void remove_root(void) { remove_tree(g_root); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_root, sizeof g_root, "%s/fuzz_restore_%ld", shm, (long)getpid());
    char base_out[200], ckpts[300];
    snprintf(base_out, sizeof base_out, "%s/base", g_root);
    snprintf(ckpts, sizeof ckpts, "%s/checkpoints", base_out);
    if (mkdir(g_root, 0700) != 0) fail_setup(g_root);
    atexit(remove_root);
    ct_fit_opts o = fit_opts(3, base_out, NULL);
    if (ct_fit(&trial, &o) != 0) fail_setup("training the base checkpoint");
    if (ct_ckpt_latest(ckpts, g_base, sizeof g_base) != 0) fail_setup(ckpts);
    g_meta = cti_ckpt_read_metadata(g_base);
    if (!g_meta) fail_setup(g_base);
    json_object_del(g_meta, CT_CKPT_CRC_KEY);
    json_object_del(g_meta, CT_CKPT_SEQ_KEY);
    const char *seeds = getenv("FUZZ_RESTORE_SEEDS");
    if (seeds) write_seeds(seeds);
    return 0;
}

/* ---- the target -------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    return remove(path) == 0 ? 0 : -1;
}

/* rm -rf path (a missing path is fine), without forking this large process. */
static void remove_tree(const char *path) {
    if (access(path, F_OK) == 0 && nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) abort();
}

static uint32_t file_crc(const char *path) {
    ct_file_sum sum;
    if (ct_file_checksum(path, &sum) != 0) abort();
    return sum.crc32;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char dir[200], out[200], meta_path[300], state_path[300], base_state[4300];
    snprintf(dir, sizeof dir, "%s/ckpt", g_root);
    snprintf(out, sizeof out, "%s/out", g_root);
    snprintf(meta_path, sizeof meta_path, "%s/%s", dir, CT_CKPT_METADATA_FILE);
    snprintf(state_path, sizeof state_path, "%s/%s", dir, CT_CKPT_STATE_FILE);
    snprintf(base_state, sizeof base_state, "%s/%s", g_base, CT_CKPT_STATE_FILE);
    remove_tree(dir);
    remove_tree(out);
    if (mkdir(dir, 0700) != 0) abort();

    if (data[0] % 2 == 0) {
        write_bytes(meta_path, data + 1, size - 1);
        if (symlink(base_state, state_path) != 0) abort();
    } else {
        ct_value *state = cti_value_from_bytes(data + 1, size - 1);
        if (!state) {
            if (ct_last_code() != CT_EFORMAT) abort();
            ct_clear_error();
            return 0;
        }
        ct_file_sum sum;
        int rc = ct_pth_save(state_path, state, NULL, &sum);
        ct_value_free(state);
        if (rc != 0) { /* a tree torch.save cannot write either */
            ct_clear_error();
            return 0;
        }
        json_t *meta = json_deep_copy(g_meta), *files = json_object();
        char crc[16];
        snprintf(crc, sizeof crc, "%08x", (unsigned)sum.crc32);
        json_object_set_new(files, CT_CKPT_STATE_FILE, json_pack("{s:I, s:s}", "size", (json_int_t)sum.nbytes, "crc32", crc));
        json_object_set_new(meta, "files", files);
        if (json_dump_file(meta, meta_path, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0) abort();
        json_decref(meta);
    }
    uint32_t meta_crc = file_crc(meta_path), state_crc = file_crc(state_path);

    ct_fit_opts o = fit_opts(4, out, dir);
    int rc = ct_fit(&trial, &o);
    if (rc != 0) {
        if (rc != CT_ECHECKPOINT) {
            fprintf(stderr, "fuzz_restore: resuming failed with %s, not CT_ECHECKPOINT: %s\n", ct_strerror(rc),
                    ct_last_error());
            abort();
        }
        if (!strstr(ct_last_error(), dir)) {
            fprintf(stderr, "fuzz_restore: the error does not name %s: %s\n", dir, ct_last_error());
            abort();
        }
        ct_clear_error();
    }
    if (file_crc(meta_path) != meta_crc || file_crc(state_path) != state_crc) abort(); /* the checkpoint is as it was */
    return 0;
}
