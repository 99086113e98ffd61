/* src/fit/warm_start.c — a fresh trial starting from another run's
 * checkpoint (warm_start.h): Determined's _load, less everything that
 * belongs to the old trial.
 *
 * The checkpoint's state_dict.pth is read whole (cti_pth_load_mapped: its
 * large tensors mapped from the file copy-on-write; numpy's and Python's
 * RNG states included, see src/pth/pickle_read.c), brought to
 * ctrial's layout (Determined's older singular keys, DistributedDataParallel's
 * "module." prefix), and handed to the restore code a resume uses
 * (cti_context_restore_trained, state.c) for models, optimizers, schedulers
 * and the scaler. The rest of the checkpoint is named on the console as
 * skipped, never applied. */
#define _POSIX_C_SOURCE 200809L
#include "fit/warm_start.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "ckpt/pth_tensors.h"
#include "fit/state.h"

/* Where Determined's _load looks, newest layout first. */
static const char *const state_files[] = {"state_dict.pth", "determined/state_dict.pth", "pedl/state_dict.pth",
                                          "checkpoint.pt"};
#define NUM_STATE_FILES (sizeof state_files / sizeof *state_files)

/* The three lists a checkpoint holds, with Determined's older key of each. */
static const struct {
    const char *key, *old_key, *what, *one, *many;
} groups[] = {
    {"models_state_dict", "model_state_dict", "models", "model", "models"},
    {"optimizers_state_dict", "optimizer_state_dict", "optimizers", "optimizer", "optimizers"},
    {"lr_schedulers_state_dict", "lr_scheduler", "LR schedulers", "scheduler", "schedulers"},
};
#define NUM_GROUPS (sizeof groups / sizeof *groups)

static int fail(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* CT_ECHECKPOINT "warm start from WHERE: ...". */
static int fail(const char *where, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ct_set_error(CT_ECHECKPOINT, "warm start from %s: %s", where, msg);
}

/* The error set by state.c ("checkpoint DIR: <what>") said as a warm
 * start's. */
static int restated(const char *where, const char *dir) {
    char msg[2048], prefix[4200];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    snprintf(prefix, sizeof prefix, "checkpoint %s: ", dir);
    size_t n = strlen(prefix);
    return fail(where, "%s", strncmp(msg, prefix, n) == 0 ? msg + n : msg);
}

static bool exists(const char *path, bool want_dir) {
    struct stat st;
    return stat(path, &st) == 0 && (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

static int count(const ct_context *ctx, size_t g) {
    return (int)(g == 0 ? ctx->n_models : g == 1 ? ctx->n_optims : ctx->n_scheds);
}

/* sd without DistributedDataParallel's "module." prefix, when every key has
 * it and the model's own names do not (torch's
 * consume_prefix_in_state_dict_if_present): NEW dict sharing the tensors,
 * or NULL (no error) when sd is to be taken as it is. */
static ct_value *without_ddp_prefix(ct_module *model, const ct_value *sd) {
    static const char prefix[] = "module.";
    const size_t n = sizeof prefix - 1;
    if (ct_value_kind_of(sd) != CT_VALUE_DICT || ct_value_len(sd) == 0) return NULL;
    const char *own = NULL;
    if (ct_nn_num_params(model) > 0) ct_nn_param_at(model, 0, &own);
    if (own && strncmp(own, prefix, n) == 0) return NULL;
    for (size_t i = 0; i < ct_value_len(sd); i++) {
        const char *key = NULL;
        int64_t ikey;
        ct_value_dict_at(sd, i, &key, &ikey);
        if (!key || strncmp(key, prefix, n) != 0) return NULL;
    }
    ct_value *out = ct_value_dict();
    for (size_t i = 0; out && i < ct_value_len(sd); i++) {
        const char *key = NULL;
        int64_t ikey;
        const ct_value *item = ct_value_dict_at(sd, i, &key, &ikey);
        if (ct_value_dict_set(out, key + n, ct_value_copy(item, false)) != 0) {
            ct_value_free(out);
            out = NULL;
        }
    }
    return out;
}

/* The checkpoint's state in ctrial's layout, for cti_context_restore_trained:
 * a NEW dict holding the three lists (and scaler_state_dict when there is
 * one), sharing the checkpoint's tensors. Checks what only a warm start
 * meets: the older keys, missing lists, counts. */
static int canonical(ct_context *ctx, const ct_value *state, const char *where, ct_value **out) {
    *out = NULL;
    if (ct_value_kind_of(state) != CT_VALUE_DICT)
        return fail(where, "the file holds a %s, not a dict of state dicts", ct_value_kind_name(ct_value_kind_of(state)));
    ct_value *canon = ct_value_dict();
    if (!canon) return ct_last_code();
    int rc = CT_OK;
    for (size_t g = 0; g < NUM_GROUPS && rc == CT_OK; g++) {
        const ct_value *list = ct_value_dict_get(state, groups[g].key);
        const ct_value *old = ct_value_dict_get(state, groups[g].old_key);
        int want = count(ctx, (size_t)g);
        ct_value *copy = NULL;
        if (list && old)
            rc = fail(where, "it holds both '%s' and '%s'", groups[g].key, groups[g].old_key);
        else if (old && want != 1)
            rc = fail(where, "'%s' (Determined's older layout) holds one %s, the trial has %d", groups[g].old_key,
                      groups[g].one, want);
        else if (old) {
            copy = ct_value_list();
            if (!copy || ct_value_list_append(copy, ct_value_copy(old, false)) != 0) rc = ct_last_code();
        } else if (!list && want > 0)
            rc = fail(where, "it has no '%s' (nor '%s'), the trial has %d %s", groups[g].key, groups[g].old_key, want,
                      want == 1 ? groups[g].one : groups[g].many);
        else if (!list)
            copy = ct_value_list();
        else if (ct_value_kind_of(list) != CT_VALUE_LIST && ct_value_kind_of(list) != CT_VALUE_TUPLE)
            rc = fail(where, "'%s' is a %s, not a list", groups[g].key, ct_value_kind_name(ct_value_kind_of(list)));
        else if (ct_value_len(list) != (size_t)want)
            rc = fail(where, "'%s' holds %zu %s, the trial has %d", groups[g].key, ct_value_len(list),
                      groups[g].what, want);
        else {
            copy = ct_value_list();
            for (size_t i = 0; copy && i < ct_value_len(list) && rc == CT_OK; i++) {
                const ct_value *item = ct_value_list_get(list, i);
                ct_value *stripped = g == 0 ? without_ddp_prefix(ctx->models[i], item) : NULL;
                if (ct_value_list_append(copy, stripped ? stripped : ct_value_copy(item, false)) != 0)
                    rc = ct_last_code();
            }
        }
        if (rc == CT_OK && (!copy || ct_value_dict_set(canon, groups[g].key, copy) != 0)) {
            copy = NULL;
            rc = ct_last_code() ? ct_last_code() : CT_ENOMEM;
        }
        if (rc != CT_OK) ct_value_free(copy);
    }
    const ct_value *scaler = ct_value_dict_get(state, "scaler_state_dict");
    if (rc == CT_OK && scaler && ctx->scaler && ct_value_dict_set(canon, "scaler_state_dict", ct_value_copy(scaler, false)))
        rc = ct_last_code();
    if (rc != CT_OK) {
        ct_value_free(canon);
        return rc;
    }
    *out = canon;
    return CT_OK;
}

/* Appends ", name" (or "name" first) to buf. */
static void add(char *buf, size_t len, const char *name) {
    size_t used = strlen(buf);
    if (used < len) snprintf(buf + used, len - used, "%s%s", used ? ", " : "", name);
}

/* The console line: what was loaded, and what of the checkpoint was not. */
static void report(const ct_context *ctx, const ct_value *state, const char *where, const char *dir) {
    char loaded[256] = "", skipped[1024] = "", part[64];
    for (size_t g = 0; g < NUM_GROUPS; g++) {
        int n = count(ctx, g);
        snprintf(part, sizeof part, "%d %s", n, n == 1 ? groups[g].one : groups[g].many);
        add(loaded, sizeof loaded, part);
    }
    bool scaler_loaded = ctx->scaler && ct_value_dict_get(state, "scaler_state_dict");
    if (scaler_loaded) add(loaded, sizeof loaded, "the grad scaler");
    for (size_t i = 0; i < ct_value_len(state); i++) {
        const char *key = NULL;
        int64_t ikey = 0;
        ct_value_dict_at(state, i, &key, &ikey);
        bool used = key && scaler_loaded && strcmp(key, "scaler_state_dict") == 0;
        for (size_t g = 0; key && g < NUM_GROUPS; g++)
            used |= strcmp(key, groups[g].key) == 0 || strcmp(key, groups[g].old_key) == 0;
        if (used) continue;
        if (key) add(skipped, sizeof skipped, key);
        else {
            snprintf(part, sizeof part, "%lld", (long long)ikey);
            add(skipped, sizeof skipped, part);
        }
    }
    static const char *const files[] = {"trial_state.pkl", "workload_sequencer.pkl"};
    char path[4200];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (exists(path, false)) add(skipped, sizeof skipped, files[i]);
    }
    snprintf(path, sizeof path, "%s/%s", dir, CT_CKPT_METADATA_FILE);
    json_t *meta = json_load_file(path, 0, NULL);
    if (json_object_get(meta, "trial_state")) add(skipped, sizeof skipped, "metadata.json trial_state");
    json_decref(meta);
    printf("warm start from %s: %s; %s%s\n", where, loaded, skipped[0] ? "skipped " : "nothing skipped", skipped);
    fflush(stdout);
}

/* A ctrial checkpoint lists its files with their CRCs: check them first.
 * Determined's metadata.json does not. */
static int verify_if_ctrial(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, CT_CKPT_METADATA_FILE);
    struct stat st; /* a FIFO would block json_load_file, a device never end */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return fail(dir, "%s is not a regular file", CT_CKPT_METADATA_FILE);
    json_t *meta = json_load_file(path, 0, NULL);
    bool ctrial = json_is_object(json_object_get(meta, "files"));
    json_decref(meta);
    if (!ctrial || ct_ckpt_verify(dir) == CT_OK) return CT_OK;
    return fail(dir, "%s", ct_last_error());
}

int cti_context_warm_start(ct_context *ctx, const char *dir) {
    if (!ctx || !dir || !dir[0]) return ct_set_error(CT_EINVAL, "cti_context_warm_start: no context or directory");
    if (!exists(dir, true)) return fail(dir, "no such directory");
    char path[4200] = "", where[4300];
    size_t which = 0;
    for (; which < NUM_STATE_FILES; which++) {
        snprintf(path, sizeof path, "%s/%s", dir, state_files[which]);
        if (exists(path, false)) break;
    }
    if (which == NUM_STATE_FILES)
        return fail(dir, "no state_dict.pth (nor determined/state_dict.pth, pedl/state_dict.pth or checkpoint.pt): "
                    "not a checkpoint directory");
    if (which == 0) snprintf(where, sizeof where, "%s", dir);
    else snprintf(where, sizeof where, "%s (%s)", dir, state_files[which]);
    int rc = verify_if_ctrial(dir);
    if (rc != CT_OK) return rc;

    ct_value *state = NULL, *canon = NULL;
    if (cti_pth_load_mapped(path, &state) != CT_OK)
        return ct_last_code() == CT_ENOMEM ? ct_set_error(CT_ENOMEM, "warm start from %s: not enough memory to load "
                                                                     "it: %s", where, ct_last_error())
                                           : fail(where, "%s", ct_last_error());
    rc = canonical(ctx, state, where, &canon);
    if (rc == CT_OK && cti_context_restore_trained(ctx, canon, dir) != CT_OK) rc = restated(where, dir);
    if (rc == CT_OK && ctx->rank == 0 && !ctx->opts.quiet) report(ctx, state, where, dir);
    ct_value_free(canon);
    ct_value_free(state);
    return rc;
}
