/* ct_dataset_cifar's refusals: each bad input returns NULL with the right
 * code and a message naming the file (and the record of a bad label),
 * never a crash: a missing file of the split, a partial record, an empty
 * file, a label out of range (CIFAR-10's label, CIFAR-100's coarse and fine
 * labels), a bad kind, a NULL dir, a file cut short while the dataset
 * holds it (CT_EIO naming it, never SIGBUS). The files are written here,
 * byte by byte; a good split is read back to show the test's files are
 * right. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctrial/vision.h>

#include "ct_test.h"

static char root[256];

static const char *path_of(const char *dir, const char *name) {
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s%s%s", root, dir, name ? "/" : "", name ? name : "");
    return p;
}

/* dir/name: n records of `label_bytes` label bytes (labels[r * label_bytes
 * ...]) and 3072 image bytes, then `extra` bytes of a partial record. */
static const char *write_file(const char *dir, const char *name, int n, int label_bytes,
                              const unsigned char *labels, int extra) {
    mkdir(path_of(dir, NULL), 0777);
    const char *p = path_of(dir, name);
    FILE *f = fopen(p, "wb");
    unsigned char img[3072];
    for (int r = 0; f && r < n; r++) {
        for (int i = 0; i < 3072; i++) img[i] = (unsigned char)(r * 31 + i);
        if (fwrite(labels + r * label_bytes, 1, (size_t)label_bytes, f) != (size_t)label_bytes ||
            fwrite(img, 1, sizeof img, f) != sizeof img)
            break;
    }
    if (!f || (extra && fwrite(img, 1, (size_t)extra, f) != (size_t)extra) || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(2);
    }
    return p;
}

/* The call returned NULL with `code` and a message holding `where` (the
 * file) and `needle`. */
#define CHECK_REFUSED(call, code, where, needle)                                \
    do {                                                                        \
        ct_dataset *d_ = (call);                                                \
        CHECK(d_ == NULL);                                                      \
        ct_dataset_free(d_);                                                    \
        CHECK(strstr(ct_last_error(), (where)) != NULL);                        \
        CHECK_ERR(code, needle);                                                \
    } while (0)

static const unsigned char L10[4] = {0, 9, 3, 5};

/* A CIFAR-10 split: the five training batches (3, 1, 2, 1, 4 records) and
 * a test batch (2). */
static void write_cifar10(const char *dir) {
    const int n[5] = {3, 1, 2, 1, 4};
    char name[32];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "data_batch_%d.bin", i + 1);
        write_file(dir, name, n[i], 1, L10, 0);
    }
    write_file(dir, "test_batch.bin", 2, 1, L10, 0);
}

static void test_good(void) {
    write_cifar10("c10");
    const unsigned char l100[6] = {19, 99, 0, 0, 7, 42}; /* (coarse, fine) per record */
    write_file("c100", "train.bin", 3, 2, l100, 0);
    write_file("c100", "test.bin", 1, 2, l100, 0);
    ct_dataset *d = ct_dataset_cifar(path_of("c10", NULL), CT_CIFAR10, true);
    CHECK(d && ct_dataset_len(d) == 11);
    ct_value *s = d ? ct_dataset_get(d, 4) : NULL; /* the second file's only record: label 0 */
    int64_t label = -1;
    CHECK(s && ct_item_int(ct_batch_at(s, 1), &label) == 0 && label == 0);
    CHECK(s && ct_ndim(ct_batch_at(s, 1)) == 0 && ct_dtype_of(ct_batch_at(s, 0)) == CT_U8);
    ct_value_free(s);
    ct_dataset_free(d);
    d = ct_dataset_cifar(path_of("c10", NULL), CT_CIFAR10, false);
    CHECK(d && ct_dataset_len(d) == 2);
    /* cut short while in use (rewritten in place): the record past the cut
     * is CT_EIO naming the file, the one before it still reads */
    CHECK(truncate(path_of("c10", "test_batch.bin"), 3073 + 100) == 0);
    s = d ? ct_dataset_get(d, 1) : NULL;
    CHECK(s == NULL);
    CHECK(strstr(ct_last_error(), "test_batch.bin") != NULL);
    CHECK_ERR(CT_EIO, "the file changed while in use: it held 6146 bytes when opened and holds 3173 now");
    s = d ? ct_dataset_get_batch(d, (const int64_t[]){0}, 1) : NULL;
    CHECK(s && ct_read(ct_batch_at(s, 1), &label, sizeof label) == 0 && label == 0);
    ct_value_free(s);
    ct_dataset_free(d);
    write_file("c10", "test_batch.bin", 2, 1, L10, 0);
    d = ct_dataset_cifar(path_of("c100", NULL), CT_CIFAR100, true);
    CHECK(d && ct_dataset_len(d) == 3);
    s = d ? ct_dataset_get(d, 0) : NULL; /* the fine label, not the coarse one */
    CHECK(s && ct_item_int(ct_batch_at(s, 1), &label) == 0 && label == 99);
    ct_value_free(s);
    ct_dataset_free(d);
}

static void test_files(void) {
    /* A training split without its third batch: the one named. */
    write_cifar10("missing");
    const char *p = path_of("missing", "data_batch_3.bin");
    CHECK(unlink(p) == 0);
    CHECK_REFUSED(ct_dataset_cifar(path_of("missing", NULL), CT_CIFAR10, true), CT_EIO, p, "cannot open");
    /* ... while its test split is whole. */
    ct_dataset *d = ct_dataset_cifar(path_of("missing", NULL), CT_CIFAR10, false);
    CHECK(d != NULL);
    ct_dataset_free(d);
    /* No such directory; the Python version's directory. */
    p = path_of("nowhere", "test_batch.bin");
    CHECK_REFUSED(ct_dataset_cifar(path_of("nowhere", NULL), CT_CIFAR10, false), CT_EIO, p, "binary version");
    /* A directory where a file should be. */
    write_cifar10("dir");
    p = path_of("dir", "test_batch.bin");
    CHECK(unlink(p) == 0 && mkdir(p, 0777) == 0);
    CHECK_REFUSED(ct_dataset_cifar(path_of("dir", NULL), CT_CIFAR10, false), CT_EIO, p, "not a regular file");

    /* A partial record at the end of the fourth batch: 2 records and 100 bytes. */
    write_cifar10("partial");
    p = write_file("partial", "data_batch_4.bin", 2, 1, L10, 100);
    CHECK_REFUSED(ct_dataset_cifar(path_of("partial", NULL), CT_CIFAR10, true), CT_EFORMAT, p,
                  "holds 6246 bytes, not a whole number of 3073-byte CIFAR-10 records (2 records and 100 bytes "
                  "over)");
    /* CIFAR-100's 3074-byte records read as CIFAR-10's. */
    const unsigned char l100[2] = {1, 2};
    p = write_file("c100as10", "test_batch.bin", 1, 2, l100, 0);
    CHECK_REFUSED(ct_dataset_cifar(path_of("c100as10", NULL), CT_CIFAR10, false), CT_EFORMAT, p,
                  "holds 3074 bytes, not a whole number");
    /* An empty file. */
    p = write_file("empty", "test.bin", 0, 2, l100, 0);
    CHECK_REFUSED(ct_dataset_cifar(path_of("empty", NULL), CT_CIFAR100, false), CT_EFORMAT, p,
                  "is empty (0 bytes): no 3074-byte CIFAR-100 record");
}

static void test_labels(void) {
    /* Label 10 in record 2 of CIFAR-10's fifth batch. */
    write_cifar10("label10");
    const unsigned char bad10[4] = {0, 9, 10, 1};
    const char *p = write_file("label10", "data_batch_5.bin", 4, 1, bad10, 0);
    CHECK_REFUSED(ct_dataset_cifar(path_of("label10", NULL), CT_CIFAR10, true), CT_EFORMAT, p,
                  "record 2 (byte 6146) has label 10; CIFAR-10's labels are 0..9");
    /* Label 255 in the test batch's first record. */
    const unsigned char bad255[1] = {255};
    p = write_file("label255", "test_batch.bin", 1, 1, bad255, 0);
    CHECK_REFUSED(ct_dataset_cifar(path_of("label255", NULL), CT_CIFAR10, false), CT_EFORMAT, p,
                  "record 0 (byte 0) has label 255");
    /* CIFAR-100: fine label 100 in record 1; coarse label 20 in record 2. */
    const unsigned char fine[6] = {19, 99, 0, 100, 0, 0};
    p = write_file("fine100", "train.bin", 3, 2, fine, 0);
    CHECK_REFUSED(ct_dataset_cifar(path_of("fine100", NULL), CT_CIFAR100, true), CT_EFORMAT, p,
                  "record 1 (byte 3075) has fine label 100; CIFAR-100's fine labels are 0..99");
    const unsigned char coarse[6] = {19, 99, 0, 0, 20, 5};
    p = write_file("coarse20", "test.bin", 3, 2, coarse, 0);
    CHECK_REFUSED(ct_dataset_cifar(path_of("coarse20", NULL), CT_CIFAR100, false), CT_EFORMAT, p,
                  "record 2 (byte 6148) has coarse label 20; CIFAR-100's coarse labels are 0..19");
}

static void test_args(void) {
    write_cifar10("args");
    CHECK_REFUSED(ct_dataset_cifar(path_of("args", NULL), (ct_cifar_kind)11, true), CT_EINVAL, "ct_dataset_cifar",
                  "kind must be CT_CIFAR10 (10) or CT_CIFAR100 (100) (kind 11)");
    CHECK_REFUSED(ct_dataset_cifar(path_of("args", NULL), (ct_cifar_kind)0, false), CT_EINVAL, "ct_dataset_cifar",
                  "(kind 0)");
    CHECK_REFUSED(ct_dataset_cifar(NULL, CT_CIFAR10, true), CT_EINVAL, "ct_dataset_cifar", "dir is NULL");
    /* A CIFAR-10 directory read as CIFAR-100: its files are not there. */
    const char *p = path_of("args", "train.bin");
    CHECK_REFUSED(ct_dataset_cifar(path_of("args", NULL), CT_CIFAR100, true), CT_EIO, p,
                  "cifar-100-binary holds train.bin and test.bin");
}

int main(void) {
    snprintf(root, sizeof root, "%s/ct_cifar_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 2;
    }
    size_t live = ct_tensor_live_count();
    test_good();
    test_files();
    test_labels();
    test_args();
    CHECK(ct_tensor_live_count() == live);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return ct_test_result("cifar_errors");
}
