/* tf_dump CASES — each line IN H W C DTYPE SEED OUT STEP... applies torchvision-style
 * transforms (vision.h) to one image for test_transforms_parity.py.
 *
 * IN holds the image as raw bytes [H, W, C] of DTYPE (u8 or f32), which
 * becomes the [C, H, W] view torchvision.io.decode_image gives (a permuted
 * HWC buffer). The steps are composed in order and drawn from
 * ct_rng_new(SEED); SEED "none" applies them without a generator. OUT gets
 * a text line "DTYPE D0 D1 ..." and the result's bytes, contiguous. On an
 * error it prints the message on stdout and exits 3.
 *
 * Steps: resize:H:W:MAX  center:H:W  rrc:H:W:S0:S1:R0:R1
 * crop:H:W:L:T:R:B:IFNEEDED:FILL:MODE (MODE constant|edge|reflect|symmetric)
 * flip:P  jitter:B:C:S:H  totensor  normalize:M0,M1,..:S0,S1,.. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

/* "0.5,0.25,..." into v (at most 8); returns the count. */
static int parse_list(const char *s, double *v) {
    int n = 0;
    while (s && *s && n < 8) {
        char *end;
        v[n++] = strtod(s, &end);
        s = *end == ',' ? end + 1 : NULL;
    }
    return n;
}

static ct_transform *parse_step(const char *step) {
    char name[32];
    double v[10] = {0};
    const char *rest = strchr(step, ':');
    size_t len = rest ? (size_t)(rest - step) : strlen(step);
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, step, len);
    name[len] = '\0';
    if (strcmp(name, "normalize") == 0) {
        double mean[8], std[8];
        const char *second = rest ? strchr(rest + 1, ':') : NULL;
        int c = parse_list(rest ? rest + 1 : NULL, mean);
        parse_list(second ? second + 1 : NULL, std);
        return ct_tf_normalize(c, mean, std);
    }
    int n = 0;
    for (const char *p = rest; p && n < 10; p = strchr(p + 1, ':')) {
        const char *a = p + 1;
        v[n++] = strncmp(a, "constant", 8) == 0    ? CT_PAD_CONSTANT
                 : strncmp(a, "edge", 4) == 0      ? CT_PAD_EDGE
                 : strncmp(a, "reflect", 7) == 0   ? CT_PAD_REFLECT
                 : strncmp(a, "symmetric", 9) == 0 ? CT_PAD_SYMMETRIC
                                                   : atof(a);
    }
    if (strcmp(name, "resize") == 0) return ct_tf_resize((int64_t)v[0], (int64_t)v[1], (int64_t)v[2]);
    if (strcmp(name, "center") == 0) return ct_tf_center_crop((int64_t)v[0], (int64_t)v[1]);
    if (strcmp(name, "rrc") == 0) return ct_tf_random_resized_crop((int64_t)v[0], (int64_t)v[1], v[2], v[3], v[4], v[5]);
    if (strcmp(name, "crop") == 0) {
        ct_crop_padding pad = {(int64_t)v[2], (int64_t)v[3], (int64_t)v[4], (int64_t)v[5], v[6] != 0, v[7],
                               (ct_pad_mode)(int)v[8]};
        return ct_tf_random_crop((int64_t)v[0], (int64_t)v[1], &pad);
    }
    if (strcmp(name, "flip") == 0) return ct_tf_random_horizontal_flip(v[0]);
    if (strcmp(name, "jitter") == 0) return ct_tf_color_jitter(v[0], v[1], v[2], v[3]);
    if (strcmp(name, "totensor") == 0) return ct_tf_to_tensor();
    fprintf(stderr, "tf_dump: unknown step %s\n", name);
    exit(2);
}

/* One case: argv as documented at the top (without the program's name). */
static int run_case(int argc, char **argv) {
    int64_t h = atoll(argv[1]), w = atoll(argv[2]), c = atoll(argv[3]);
    ct_dtype dtype = strcmp(argv[4], "f32") == 0 ? CT_F32 : CT_U8;
    size_t bytes = (size_t)(h * w * c) * ct_dtype_size(dtype);
    void *buf = malloc(bytes ? bytes : 1);
    FILE *in = fopen(argv[0], "rb");
    if (!buf || !in || fread(buf, 1, bytes, in) != bytes) return 2;
    fclose(in);
    ct_scope *scope = ct_scope_begin();
    ct_tensor *hwc = ct_from_data(buf, 3, (int64_t[]){h, w, c}, dtype);
    ct_tensor *img = ct_permute(hwc, 3, (int64_t[]){2, 0, 1});
    free(buf);
    int nsteps = argc - 7;
    ct_transform **steps = calloc((size_t)nsteps, sizeof *steps);
    for (int i = 0; i < nsteps; i++) steps[i] = parse_step(argv[7 + i]);
    ct_transform *t = ct_tf_compose(nsteps, steps);
    free(steps);
    ct_rng *rng = strcmp(argv[5], "none") == 0 ? NULL : ct_rng_new(strtoull(argv[5], NULL, 10));
    ct_tensor *out = t ? ct_transform_apply(t, img, rng) : NULL;
    FILE *f = fopen(argv[6], "wb");
    if (!f) return 2;
    if (!out) {
        fprintf(f, "error %d %s\n", ct_last_code(), ct_last_error());
    } else {
        ct_tensor *dense = ct_contiguous(out);
        fprintf(f, "%s", ct_dtype_name(ct_dtype_of(dense)));
        for (int i = 0; i < ct_ndim(dense); i++) fprintf(f, " %lld", (long long)ct_size(dense, i));
        fprintf(f, "\n");
        fwrite(ct_data_ptr(dense), ct_dtype_size(ct_dtype_of(dense)), (size_t)ct_numel(dense), f);
    }
    fclose(f);
    ct_rng_free(rng);
    ct_transform_free(t);
    ct_scope_end(scope);
    return 0;
}

/* tf_dump CASES: one case per line of the file CASES, its fields separated
 * by spaces. */
int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: tf_dump CASES\n");
        return 2;
    }
    FILE *cases = fopen(argv[1], "r");
    char line[4096];
    while (cases && fgets(line, sizeof line, cases)) {
        char *args[64];
        int n = 0;
        for (char *tok = strtok(line, " \n"); tok && n < 64; tok = strtok(NULL, " \n")) args[n++] = tok;
        if (n < 8) continue;
        int rc = run_case(n, args);
        if (rc) return rc;
    }
    if (!cases) return 2;
    fclose(cases);
    return ct_tensor_live_count() == 0 ? 0 : 4; /* every tensor freed */
}
