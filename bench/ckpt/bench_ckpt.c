/* bench/ckpt/bench_ckpt.c — ct_pth_save / ct_pth_load timed; run.py drives
 * it and puts the figures next to torch.save / torch.load's.
 *
 *   bench_ckpt save SCENARIO FILE RUNS
 *       Builds the scenario's checkpoint (the same shapes run.py builds in
 *       Python), then saves it to FILE once to warm up and RUNS times timed
 *       (fsync off: torch.save does not fsync). Around each save the peak
 *       RSS is reset (/proc/self/clear_refs "5") and read back (VmHWM): the
 *       extra memory saving took. Prints {"bytes", "file_bytes",
 *       "seconds": [...], "extra_rss": [...]}.
 *
 *   bench_ckpt load FILE RUNS
 *       ct_pth_load of FILE, once to warm up and RUNS times timed (each
 *       tree freed before the next load). Prints {"seconds": [...],
 *       "extra_rss": [...]}.
 *
 * Scenarios: "tensors" (40 float32 tensors of 2 to 32 MB, 508 MB) and
 * "adam" (a 12-layer transformer-shaped model with its Adam state: every
 * parameter three times, a 0-dim step tensor each, ~500 MB in 400 tensors).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ctrial/ctrial.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* VmRSS or VmHWM of this process, in bytes. */
static long long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') kb = atoll(line + n + 1);
    if (f) fclose(f);
    return kb * 1024;
}

static void reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

static long long total_bytes;

static ct_value *randn_value(int ndim, const int64_t *shape) {
    ct_tensor *t = ct_randn(ndim, shape, NULL);
    total_bytes += ct_numel(t) * 4;
    return ct_value_tensor(t);
}

/* 40 float32 tensors, [MB * 256, 1024] for MB cycling through these. */
static ct_value *tensors(void) {
    static const int mb[] = {2, 4, 8, 16, 32, 3, 6, 12, 24, 20};
    ct_value *d = ct_value_dict();
    for (int i = 0; i < 40; i++) {
        char key[32];
        snprintf(key, sizeof key, "tensor%02d", i);
        ct_value_dict_set(d, key, randn_value(2, (const int64_t[]){mb[i % 10] * 256, 1024}));
    }
    return d;
}

typedef struct {
    char name[48];
    int ndim;
    int64_t shape[2];
} param;

/* The parameters of the "adam" scenario, in order; returns the count. */
static int params_of(param *p) {
    static const struct {
        const char *name;
        int ndim;
        int64_t shape[2];
    } layer[] = {
        {"attn.qkv.weight", 2, {1536, 512}}, {"attn.qkv.bias", 1, {1536, 0}}, {"attn.out.weight", 2, {512, 512}},
        {"attn.out.bias", 1, {512, 0}},      {"ln1.weight", 1, {512, 0}},     {"ln1.bias", 1, {512, 0}},
        {"mlp.fc1.weight", 2, {2048, 512}},  {"mlp.fc1.bias", 1, {2048, 0}},  {"mlp.fc2.weight", 2, {512, 2048}},
        {"mlp.fc2.bias", 1, {512, 0}},       {"ln2.weight", 1, {512, 0}},     {"ln2.bias", 1, {512, 0}},
    };
    int n = 0;
    p[n++] = (param){"embed.weight", 2, {8192, 512}};
    for (int l = 0; l < 12; l++) {
        for (size_t k = 0; k < sizeof layer / sizeof *layer; k++, n++) {
            snprintf(p[n].name, sizeof p[n].name, "layers.%d.%s", l, layer[k].name);
            p[n].ndim = layer[k].ndim;
            p[n].shape[0] = layer[k].shape[0];
            p[n].shape[1] = layer[k].shape[1];
        }
    }
    return n;
}

/* {"model": {name: param}, "optimizer": {"state": {i: {"step", "exp_avg",
 * "exp_avg_sq"}}, "param_groups": [{..., "params": [0..n)}]}, "epoch": 3},
 * as torch.optim.Adam's state_dict() lays it out. */
static ct_value *adam(void) {
    param p[256];
    int n = params_of(p);
    ct_value *model = ct_value_dict(), *state = ct_value_dict(), *params = ct_value_list();
    for (int i = 0; i < n; i++) {
        ct_value_dict_set(model, p[i].name, randn_value(p[i].ndim, p[i].shape));
        ct_value *s = ct_value_dict();
        ct_value_dict_set(s, "step", ct_value_tensor(ct_scalar_tensor(100, NULL)));
        total_bytes += 4;
        ct_value_dict_set(s, "exp_avg", randn_value(p[i].ndim, p[i].shape));
        ct_value_dict_set(s, "exp_avg_sq", randn_value(p[i].ndim, p[i].shape));
        ct_value_dict_set_int(state, i, s);
        ct_value_list_append(params, ct_value_int(i));
    }
    ct_value *group = ct_value_dict(), *betas = ct_value_tuple();
    ct_value_list_append(betas, ct_value_float(0.9));
    ct_value_list_append(betas, ct_value_float(0.999));
    ct_value_dict_set(group, "lr", ct_value_float(1e-3));
    ct_value_dict_set(group, "betas", betas);
    ct_value_dict_set(group, "eps", ct_value_float(1e-8));
    ct_value_dict_set(group, "weight_decay", ct_value_float(0));
    ct_value_dict_set(group, "amsgrad", ct_value_bool(false));
    ct_value_dict_set(group, "params", params);
    ct_value *groups = ct_value_list();
    ct_value_list_append(groups, group);
    ct_value *opt = ct_value_dict();
    ct_value_dict_set(opt, "state", state);
    ct_value_dict_set(opt, "param_groups", groups);
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "model", model);
    ct_value_dict_set(d, "optimizer", opt);
    ct_value_dict_set(d, "epoch", ct_value_int(3));
    return d;
}

static int save(const char *scenario, const char *path, int runs) {
    ct_manual_seed(0);
    ct_value *v = strcmp(scenario, "adam") == 0 ? adam() : tensors();
    ct_file_sum sum = {0, 0};
    printf("{\"bytes\": %lld, \"seconds\": [", total_bytes);
    long long extra[64];
    for (int r = -1; r < runs && r < 64; r++) {
        reset_peak();
        long long before = status_kb("VmRSS");
        double t0 = now_s();
        if (ct_pth_save(path, v, NULL, &sum) != 0) {
            fprintf(stderr, "ct_pth_save: %s\n", ct_last_error());
            return 1;
        }
        double dt = now_s() - t0;
        if (r >= 0) {
            extra[r] = status_kb("VmHWM") - before;
            printf(r ? ", %.6f" : "%.6f", dt);
        }
    }
    printf("], \"extra_rss\": [");
    for (int r = 0; r < runs && r < 64; r++) printf(r ? ", %lld" : "%lld", extra[r]);
    printf("], \"file_bytes\": %llu}\n", (unsigned long long)sum.nbytes);
    ct_value_free(v);
    return 0;
}

static int load(const char *path, int runs) {
    printf("{\"seconds\": [");
    long long extra[64];
    for (int r = -1; r < runs && r < 64; r++) {
        reset_peak();
        long long before = status_kb("VmRSS");
        double t0 = now_s();
        ct_value *v = NULL;
        if (ct_pth_load(path, &v) != 0) {
            fprintf(stderr, "ct_pth_load: %s\n", ct_last_error());
            return 1;
        }
        double dt = now_s() - t0;
        if (r >= 0) {
            extra[r] = status_kb("VmHWM") - before;
            printf(r ? ", %.6f" : "%.6f", dt);
        }
        ct_value_free(v);
    }
    printf("], \"extra_rss\": [");
    for (int r = 0; r < runs && r < 64; r++) printf(r ? ", %lld" : "%lld", extra[r]);
    printf("]}\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "save") == 0) return save(argv[2], argv[3], atoi(argv[4]));
    if (argc == 4 && strcmp(argv[1], "load") == 0) return load(argv[2], atoi(argv[3]));
    fprintf(stderr, "usage: bench_ckpt save tensors|adam FILE RUNS | load FILE RUNS\n");
    return 2;
}
