/* ctrial/summary.h without Python: a NULL writer (the context's on ranks
 * other than 0) accepts everything; every bad argument is refused with
 * CT_EINVAL under the public function's name and writes nothing; a failed
 * write makes the writer refuse the rest; the histogram edges are torch's.
 * test_summary.py checks what the records hold against torch. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ct_test.h"
#include "formats/tbevents.h"

static char dir[256];

static long long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static void test_null_writer(void) {
    ct_scope *s = ct_scope_begin();
    ct_tensor *t = ct_ones(CT_SHAPE(3, 4, 4), NULL);
    /* Arguments are not even looked at: a trial logs unconditionally. */
    CHECK_OK(ct_summary_add_scalar(NULL, "x", 1.0, 0));
    CHECK_OK(ct_summary_add_scalar(NULL, NULL, 1.0, 0));
    CHECK_OK(ct_summary_add_histogram(NULL, "h", t, 0));
    CHECK_OK(ct_summary_add_histogram(NULL, "h", NULL, 0));
    CHECK_OK(ct_summary_add_image(NULL, "i", t, 0));
    CHECK_OK(ct_summary_add_image(NULL, "i", NULL, 0));
    CHECK_OK(ct_summary_add_text(NULL, "t", "x", 0));
    CHECK_OK(ct_summary_add_text(NULL, "t", NULL, 0));
    CHECK_OK(ct_summary_flush(NULL));
    CHECK_OK(ct_summary_close(NULL));
    CHECK(ct_summary_path(NULL) == NULL);
    ct_scope_end(s);
}

static void test_open(void) {
    CHECK(ct_summary_open(NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_summary_open: logdir is NULL");
    CHECK(ct_summary_open("") == NULL);
    CHECK_ERR(CT_EINVAL, "ct_summary_open: logdir is empty");
    char path[512], want[1200];
    snprintf(path, sizeof path, "%s/plain", dir);
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
    CHECK(ct_summary_open(path) == NULL);
    snprintf(want, sizeof want, "ct_summary_open: cannot create log directory %s", path);
    CHECK_ERR(CT_EIO, want);

    /* The name, next to another file in the same directory (the loop's). */
    snprintf(path, sizeof path, "%s/run/a", dir);
    cti_tb_writer *loop = cti_tb_open(path, "");
    ct_summary_writer *w = ct_summary_open(path);
    CHECK(loop && w);
    if (w && loop) {
        const char *p = ct_summary_path(w);
        size_t n = strlen(p);
        CHECK(strncmp(p, path, strlen(path)) == 0 && strstr(p, "/events.out.tfevents.") != NULL);
        CHECK(n > 8 && strcmp(p + n - 8, ".summary") == 0);
        CHECK(strcmp(p, cti_tb_path(loop)) != 0);
        CHECK(file_size(p) == 40); /* the file_version record, flushed */
    }
    CHECK_OK(ct_summary_close(w));
    cti_tb_close(loop);
}

static void test_errors(void) {
    char logdir[300];
    snprintf(logdir, sizeof logdir, "%s/errors", dir);
    ct_summary_writer *w = ct_summary_open(logdir);
    CHECK(w != NULL);
    if (!w) return;
    const char *path = ct_summary_path(w);
    CHECK_OK(ct_summary_flush(w));
    long long size0 = file_size(path);

    ct_scope *s = ct_scope_begin();
    ct_tensor *img = ct_ones(CT_SHAPE(3, 4, 5), NULL);
    ct_tensor *vals = ct_arange(0, 10, 1, NULL);

    CHECK(ct_summary_add_scalar(w, NULL, 1.0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_summary_add_scalar: ");
    CHECK(ct_summary_add_scalar(w, "", 1.0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "tag is empty");
    CHECK(ct_summary_add_scalar(w, "bad\xff", 1.0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "is not valid UTF-8 (byte 3)");

    CHECK(ct_summary_add_histogram(w, "h", NULL, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_summary_add_histogram: tag \"h\": values is NULL");
    CHECK(ct_summary_add_histogram(w, NULL, vals, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_summary_add_histogram: ");
    CHECK(ct_summary_add_histogram(w, "h", ct_zeros(CT_SHAPE(0, 3), NULL), 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "no values (tag \"h\")");
    CHECK(ct_summary_add_histogram(w, "h", ct_full(CT_SHAPE(4), NAN, NULL), 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "none of the 4 values lies within the histogram's edges");
    CHECK(ct_summary_add_histogram(w, "h", ct_full(CT_SHAPE(2), 1e21, NULL), 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_summary_add_histogram: ");

    CHECK(ct_summary_add_image(w, "i", NULL, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_summary_add_image: tag \"i\": img is NULL");
    CHECK(ct_summary_add_image(w, "i", ct_ones(CT_SHAPE(2, 4, 4), NULL), 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "2 channels (shape [2, 4, 4])");
    CHECK(ct_summary_add_image(w, "i", ct_ones(CT_SHAPE(8, 8, 3), NULL), 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "8 channels (shape [8, 8, 3])"); /* HWC is not CHW */
    CHECK(ct_summary_add_image(w, "i", ct_ones(CT_SHAPE(1, 3, 4, 4), NULL), 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "an image is C x H x W (or H x W), not [1, 3, 4, 4]");
    CHECK(ct_summary_add_image(w, "i", ct_ones(CT_SHAPE(16), NULL), 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "an image is C x H x W");
    CHECK(ct_summary_add_image(w, "i", ct_ones(CT_SHAPE(3, 0, 4), NULL), 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "image size 0 x 4");
    CHECK(ct_summary_add_image(w, "", img, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_summary_add_image: ");

    CHECK(ct_summary_add_text(w, "t", NULL, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_summary_add_text: ");
    CHECK(ct_summary_add_text(w, "t", "ab\xe2\x82", 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "text is not valid UTF-8 (byte 2");

    /* Nothing of the above reached the file; the writer still works. */
    CHECK_OK(ct_summary_flush(w));
    CHECK(file_size(path) == size0);
    CHECK_OK(ct_summary_add_scalar(w, "ok", 1.0, 1));
    CHECK_OK(ct_summary_add_histogram(w, "ok", vals, 1));
    CHECK_OK(ct_summary_add_image(w, "ok", img, 1));
    CHECK_OK(ct_summary_add_text(w, "ok", "fine", 1));
    CHECK_OK(ct_summary_flush(w));
    CHECK(file_size(path) > size0 + 100);
    ct_scope_end(s);
    CHECK_OK(ct_summary_close(w));
}

/* The formats layer's own checks (the summary layer never passes these). */
static void test_tb_errors(void) {
    char logdir[300];
    snprintf(logdir, sizeof logdir, "%s/tb", dir);
    cti_tb_writer *w = cti_tb_open(logdir, "");
    CHECK(w != NULL);
    if (!w) return;
    uint8_t px[12] = {0};
    double v[2] = {1.0, 2.0};
    CHECK(cti_tb_add_histogram(NULL, "h", v, 2, 0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "cti_tb_add_histogram: writer is NULL");
    CHECK(cti_tb_add_histogram(w, "h", NULL, 2, 0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "values is NULL");
    CHECK(cti_tb_add_histogram(w, "h", v, 2, 0, NAN) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "wall_time nan is not finite");
    CHECK(cti_tb_add_image(w, "i", px, 2, 2, 2, 0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "2 channels");
    CHECK(cti_tb_add_image(w, "i", px, -1, 2, 3, 0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "image size -1 x 2");
    CHECK(cti_tb_add_image(w, "i", NULL, 2, 2, 3, 0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "pixels are NULL");
    CHECK(cti_tb_add_text(w, "\xc0\xaf", "x", 0, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "cti_tb_add_text: ");
    CHECK_OK(cti_tb_add_image(w, "i", px, 2, 2, 3, 0, 0));
    CHECK_OK(cti_tb_add_image(w, "i", px, 1, 1, 1, 0, 0));
    CHECK_OK(cti_tb_add_histogram(w, "h", v, 2, 0, 0));
    cti_tb_close(w);
}

static void test_edges(void) {
    double e[CT_TB_HIST_EDGES];
    CHECK(cti_tb_hist_edges(e) == 774);
    CHECK(e[0] == 1e-12);
    CHECK(e[1] == 1.1000000000000002e-12); /* Python: 1e-12 * 1.1 */
    CHECK(e[773] == 9.920775621859783e+19);
    for (int i = 1; i < 774; i++) CHECK(e[i] == e[i - 1] * 1.1);
    CHECK(e[773] < 1e20 && e[773] * 1.1 >= 1e20);
}

/* A write that fails (file size limit: EFBIG) is CT_EIO naming the file;
 * the writer then refuses with CT_ESTATE, and close reports it. */
static void test_write_failure(void) {
    struct rlimit saved, lim;
    if (getrlimit(RLIMIT_FSIZE, &saved) != 0) return;
    signal(SIGXFSZ, SIG_IGN);
    char logdir[300];
    snprintf(logdir, sizeof logdir, "%s/full", dir);
    lim = saved;
    lim.rlim_cur = 3000;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    ct_summary_writer *w = ct_summary_open(logdir);
    CHECK(w != NULL);
    if (w) {
        ct_scope *s = ct_scope_begin();
        ct_tensor *noise = ct_rand(CT_SHAPE(3, 64, 64), NULL); /* ~12 KB of PNG */
        int rc = ct_summary_add_image(w, "noise", noise, 0);
        if (rc == 0) rc = ct_summary_flush(w);
        CHECK(rc == CT_EIO);
        CHECK(strstr(ct_last_error(), strerror(EFBIG)) != NULL);
        CHECK_ERR(CT_EIO, "ct_summary_");
        CHECK(ct_summary_add_scalar(w, "x", 1.0, 0) == CT_ESTATE);
        CHECK_ERR(CT_ESTATE, "ct_summary_add_scalar: ");
        CHECK(ct_summary_add_text(w, "x", "y", 0) == CT_ESTATE);
        CHECK_ERR(CT_ESTATE, "an earlier write failed");
        CHECK(ct_summary_close(w) == CT_ESTATE);
        CHECK_ERR(CT_ESTATE, "ct_summary_flush: ");
        ct_scope_end(s);
    }
    CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    signal(SIGXFSZ, SIG_DFL);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ct_summary_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    test_null_writer();
    test_open();
    test_errors();
    test_tb_errors();
    test_edges();
    test_write_failure();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ct_test_result("summary");
}
