/* tools/ctrial-ckpt.c — look inside checkpoints and PyTorch files.
 *
 *     ctrial-ckpt list   DIR|FILE.pth   metadata, then every key with its dtype and shape
 *     ctrial-ckpt verify DIR            checks every file's size and CRC-32 (exit 0 if good)
 *     ctrial-ckpt latest CHECKPOINT_DIR prints the most recent committed checkpoint
 *
 * Exit codes: 0 good, 1 a bad or unreadable checkpoint, 2 bad usage. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <ctrial/ctrial.h>

static void print_value(const char *path, const ct_value *v);

/* One line per leaf: "path  float32 [128, 64]" or "path  0.001". */
static void print_leaf(const char *path, const ct_value *v) {
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_TENSOR: {
        char desc[256];
        ct_describe(ct_value_get_tensor(v), desc, sizeof desc);
        printf("%-60s tensor %s\n", path, desc);
        break;
    }
    case CT_VALUE_NONE: printf("%-60s None\n", path); break;
    case CT_VALUE_BOOL: {
        bool b = false;
        ct_value_get_bool(v, &b);
        printf("%-60s %s\n", path, b ? "True" : "False");
        break;
    }
    case CT_VALUE_INT: {
        int64_t i = 0;
        ct_value_get_int(v, &i);
        printf("%-60s %lld\n", path, (long long)i);
        break;
    }
    case CT_VALUE_FLOAT: {
        double d = 0;
        ct_value_get_float(v, &d);
        printf("%-60s %.17g\n", path, d);
        break;
    }
    case CT_VALUE_STR: printf("%-60s '%s'\n", path, ct_value_get_str(v)); break;
    default: printf("%-60s empty %s\n", path, ct_value_kind_name(ct_value_kind_of(v))); break;
    }
}

static void print_value(const char *path, const ct_value *v) {
    ct_value_kind k = ct_value_kind_of(v);
    size_t n = ct_value_len(v);
    if ((k != CT_VALUE_DICT && k != CT_VALUE_LIST && k != CT_VALUE_TUPLE) || n == 0) {
        print_leaf(path[0] ? path : "(root)", v);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char child[1024];
        const char *sep = path[0] ? "." : "";
        const ct_value *item;
        if (k == CT_VALUE_DICT) {
            const char *skey = NULL;
            int64_t ikey = 0;
            item = ct_value_dict_at(v, i, &skey, &ikey);
            if (skey) snprintf(child, sizeof child, "%s%s%s", path, sep, skey);
            else snprintf(child, sizeof child, "%s%s%lld", path, sep, (long long)ikey);
        } else {
            item = ct_value_list_get(v, i);
            snprintf(child, sizeof child, "%s[%zu]", path, i);
        }
        print_value(child, item);
    }
}

static int fail(const char *what) {
    fprintf(stderr, "ctrial-ckpt: %s: %s\n", what, ct_last_error());
    return 1;
}

static int list_pth(const char *file) {
    ct_value *v = NULL;
    if (ct_pth_load(file, &v) != 0) return fail(file);
    print_value("", v);
    ct_value_free(v);
    return 0;
}

static int list_checkpoint(const char *dir) {
    ct_value *meta = ct_ckpt_metadata(dir);
    if (!meta) return fail(dir);
    printf("== %s/metadata.json\n", dir);
    print_value("", meta);
    ct_value_free(meta);
    char file[4200];
    snprintf(file, sizeof file, "%s/state_dict.pth", dir);
    printf("== %s\n", file);
    return list_pth(file);
}

static int usage(void) {
    fprintf(stderr, "usage: ctrial-ckpt list DIR|FILE.pth\n"
                    "       ctrial-ckpt verify DIR\n"
                    "       ctrial-ckpt latest CHECKPOINT_DIR\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc != 3) return usage();
    const char *cmd = argv[1], *path = argv[2];
    if (strcmp(cmd, "list") == 0) {
        struct stat st;
        if (stat(path, &st) != 0) {
            fprintf(stderr, "ctrial-ckpt: %s: no such file or directory\n", path);
            return 1;
        }
        return S_ISDIR(st.st_mode) ? list_checkpoint(path) : list_pth(path);
    }
    if (strcmp(cmd, "verify") == 0) {
        if (ct_ckpt_verify(path) != 0) return fail("verify");
        printf("%s: OK\n", path);
        return 0;
    }
    if (strcmp(cmd, "latest") == 0) {
        char buf[4096];
        if (ct_ckpt_latest(path, buf, sizeof buf) != 0) return fail("latest");
        printf("%s\n", buf);
        return 0;
    }
    return usage();
}
