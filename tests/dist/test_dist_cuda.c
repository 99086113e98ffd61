/* Collectives on CUDA tensors through NCCL, under mpirun -np 2 and as a
 * plain process: ct_dist_broadcast / ct_dist_allreduce on CUDA tensors
 * (libctrial's src/dist/nccl_comm.c), and ct_nccl_* directly with an explicit stream
 * (src/dist/nccl_comm.c compiled into this test, as grad_sync's test does with its
 * file: a second set of communicators, created in the same order on every
 * rank).
 *
 * Everywhere: the raw CUDA handles (ct_cuda_set_device, _current_stream,
 * _data_ptr) refuse a CPU tensor and a device that does not exist, and
 * ct_nccl_* refuse bad arguments on every rank before anything is sent —
 * without a GPU a valid call fails on every rank at ct_cuda_set_device and
 * no rank is left behind (the next collective works).
 *
 * With a GPU per rank (each rank on local_rank % device_count): allreduce
 * SUM/AVG/MAX/MIN of float32/bfloat16/int64 tensors holding rank-dependent
 * values, broadcast from the last rank, each checked exactly after
 * ct_cuda_synchronize; a 1M-element allreduce on the current stream passed
 * explicitly; a non-contiguous tensor and AVG on an integer tensor refused
 * on every rank, with the next collective still working; a bootstrap in
 * which one rank names a missing device fails on every rank, and the next
 * one succeeds.
 *
 * The collectives run twice: through the transport chosen (NCCL where each
 * rank has a GPU of its own; through host memory where ranks share one, as
 * on a one-GPU machine, or the build has no NCCL), then through host memory
 * by name (CTRIAL_CUDA_TRANSPORT=host). ct_nccl_* directly need a GPU per
 * rank.
 *
 * Without a GPU every rank prints one "SKIP: ..." line and passes. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include <ctrial/config.h>

#include "ct_test.h"
#include "dist/cuda_transport.h"
#include "dist/nccl_comm.h" /* src/dist/nccl_comm.h */

static int R, P, DEV;

/* A 1-D tensor of dtype on `device` holding {r + 1, -(r + 1), 2r, 7} for
 * rank r: small integers, exact in bfloat16 too. */
static ct_tensor *rank_values(ct_dtype dtype, ct_device device) {
    double v[4] = {R + 1, -(R + 1), 2 * R, 7};
    ct_tensor *t = ct_from_data(v, CT_SHAPE(4), CT_F64);
    ct_tensor *typed = ct_to_dtype(t, dtype);
    ct_tensor *out = ct_to_device(typed, device, false);
    ct_tensor_free(typed);
    ct_tensor_free(t);
    return out;
}

/* t's 4 values as doubles, once the device has run what was queued (the
 * collective is asynchronous to the host). */
static void read_back(const ct_tensor *t, double out[4]) {
    for (int i = 0; i < 4; i++) out[i] = NAN;
    CHECK_OK(ct_cuda_synchronize(DEV));
    ct_tensor *cpu = ct_to_device(t, ct_cpu(), false);
    ct_tensor *f64 = ct_to_dtype(cpu, CT_F64);
    CHECK_OK(ct_read(f64, out, 4 * sizeof(double)));
    ct_tensor_free(f64);
    ct_tensor_free(cpu);
}

static double tolerance(ct_dtype dtype, double want) {
    /* Exact with 2 ranks (AVG halves); 3 ranks round AVG's thirds. */
    return dtype == CT_I64 ? 0 : fabs(want) * (dtype == CT_BF16 ? 8e-3 : 1e-6);
}

static void check_values(const ct_tensor *t, ct_dtype dtype, const double want[4], const char *what) {
    double got[4];
    read_back(t, got);
    for (int i = 0; i < 4; i++) {
        if (!(fabs(got[i] - want[i]) <= tolerance(dtype, want[i])))
            fprintf(stderr, "rank %d: %s %s [%d] = %g, want %g\n", R, what, ct_dtype_name(dtype), i, got[i], want[i]);
        CHECK_NEAR(got[i], want[i], tolerance(dtype, want[i]));
    }
}

/* ---- everywhere ------------------------------------------------------------ */

static void test_handles(void) {
    ct_tensor *cpu = ct_ones(CT_SHAPE(3), NULL);
    CHECK(ct_cuda_data_ptr(cpu) == NULL);
    CHECK(ct_last_code() == (ct_cuda_is_built() ? CT_EDEVICE : CT_ENOTSUP));
    ct_clear_error();
    CHECK(ct_cuda_data_ptr(NULL) == NULL);
    CHECK(ct_last_code() != CT_OK);
    ct_clear_error();
    int missing = ct_cuda_device_count();
    CHECK(ct_cuda_set_device(missing) != CT_OK);
    CHECK(ct_last_code() == (ct_cuda_is_built() ? CT_EDEVICE : CT_ENOTSUP));
    ct_clear_error();
    CHECK(ct_cuda_set_device(-1) != CT_OK);
    ct_clear_error();
    CHECK(ct_cuda_current_stream(missing) == NULL);
    CHECK(ct_last_code() == (ct_cuda_is_built() ? CT_EDEVICE : CT_ENOTSUP));
    ct_clear_error();
    ct_tensor_free(cpu);
}

/* Refused on every rank before anything is sent: no rank waits. The
 * buffer is host memory that NCCL never sees. */
static void test_nccl_refusals(void) {
    float host[4] = {0};
    CHECK(cti_nccl_is_built() == (bool)CTRIAL_HAVE_NCCL);
    CHECK(cti_nccl_allreduce(host, 4, CT_F32, (ct_dist_op)42, 0, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "op 42");
    CHECK(cti_nccl_broadcast(host, 4, CT_F32, P, 0, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "root");
    if (P == 1) { /* one rank: nothing to send, nothing else looked at */
        CHECK_OK(cti_nccl_allreduce(host, 4, CT_BOOL, CT_DIST_AVG, 0, NULL));
        CHECK_OK(cti_nccl_broadcast(host, 4, CT_F32, 0, 0, NULL));
        return;
    }
    if (!cti_nccl_is_built()) {
        CHECK(cti_nccl_allreduce(host, 4, CT_F32, CT_DIST_SUM, 0, NULL) == CT_ENOTSUP);
        CHECK_ERR(CT_ENOTSUP, "without NCCL");
        return;
    }
    CHECK(cti_nccl_allreduce(host, 4, CT_BOOL, CT_DIST_SUM, 0, NULL) == CT_EDTYPE);
    CHECK_ERR(CT_EDTYPE, "bool");
    CHECK(cti_nccl_broadcast(host, 4, CT_I16, 0, 0, NULL) == CT_EDTYPE);
    CHECK_ERR(CT_EDTYPE, "int16");
    CHECK(cti_nccl_allreduce(host, 4, CT_I64, CT_DIST_AVG, 0, NULL) == CT_EDTYPE);
    CHECK_ERR(CT_EDTYPE, "CT_DIST_AVG");
    CHECK(cti_nccl_allreduce(NULL, 4, CT_F32, CT_DIST_SUM, 0, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(cti_nccl_allreduce(host, 4, CT_F32, CT_DIST_SUM, 128, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "out of range");
}

/* With no GPU on any rank a valid call fails on every rank where it makes
 * the device current, they agree on that, and the next collective still
 * works. */
static void test_nccl_without_gpu(void) {
    float host[4] = {0};
    if (P == 1 || !cti_nccl_is_built()) return;
    CHECK(cti_nccl_allreduce(host, 4, CT_F32, CT_DIST_SUM, 0, NULL) == CT_EDEVICE);
    CHECK_ERR(CT_EDEVICE, "ct_cuda_set_device");
    int64_t one = 1;
    CHECK_OK(ct_dist_allreduce_i64(&one, 1, CT_DIST_SUM));
    CHECK(one == P);
}

/* ---- with a GPU on every rank ----------------------------------------------- */

static void test_allreduce(ct_dtype dtype) {
    double s1 = P * (P + 1) / 2.0, s2 = (double)P * (P - 1);
    struct {
        ct_dist_op op;
        const char *name;
        double want[4];
    } cases[] = {
        {CT_DIST_SUM, "SUM", {s1, -s1, s2, 7.0 * P}},
        {CT_DIST_AVG, "AVG", {s1 / P, -s1 / P, s2 / P, 7}},
        {CT_DIST_MAX, "MAX", {P, -1, 2 * (P - 1), 7}},
        {CT_DIST_MIN, "MIN", {1, -P, 0, 7}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ct_tensor *t = rank_values(dtype, ct_cuda(DEV));
        CHECK(t != NULL);
        int rc = ct_dist_allreduce(t, cases[k].op);
        if (dtype == CT_I64 && cases[k].op == CT_DIST_AVG) { /* refused with one rank too */
            CHECK(rc == CT_EDTYPE);
            CHECK_ERR(CT_EDTYPE, "CT_DIST_AVG");
        } else {
            CHECK_OK(rc);
            check_values(t, dtype, cases[k].want, cases[k].name);
        }
        ct_tensor_free(t);
    }
}

static void test_broadcast(ct_dtype dtype) {
    int root = P - 1;
    ct_tensor *t = rank_values(dtype, ct_cuda(DEV));
    CHECK_OK(ct_dist_broadcast(t, root));
    double want[4] = {root + 1, -(root + 1), 2 * root, 7};
    check_values(t, dtype, want, "broadcast");
    CHECK(ct_dtype_of(t) == dtype && ct_device_of(t).type == CT_CUDA);
    ct_tensor_free(t);
}

/* Refused on every rank before anything is sent; then a collective that
 * every rank makes still works. */
static void test_refusals(void) {
    const ct_topts f32 = {.dtype = CT_F32, .device = ct_cuda(DEV)};
    const ct_topts i32 = {.dtype = CT_I32, .device = ct_cuda(DEV)};
    ct_tensor *m = ct_ones(CT_SHAPE(2, 2), &f32);
    ct_tensor *tr = ct_t(m);
    ct_tensor *ints = ct_ones(CT_SHAPE(3), &i32);
    ct_tensor *empty = ct_zeros(CT_SHAPE(0), &f32);
    CHECK(ct_cuda_data_ptr(m) != NULL);
    CHECK(ct_cuda_data_ptr(tr) == NULL);
    CHECK_ERR(CT_EINVAL, "contiguous");
    CHECK(ct_cuda_data_ptr(empty) == NULL);
    CHECK_ERR(CT_EINVAL, "no device memory");
    if (P > 1) {
        CHECK(ct_dist_allreduce(tr, CT_DIST_SUM) == CT_EINVAL);
        CHECK_ERR(CT_EINVAL, "contiguous");
        CHECK(ct_dist_broadcast(tr, 0) == CT_EINVAL);
        CHECK_ERR(CT_EINVAL, "contiguous");
    } else {
        CHECK_OK(ct_dist_allreduce(tr, CT_DIST_SUM));
    }
    CHECK(ct_dist_allreduce(ints, CT_DIST_AVG) == CT_EDTYPE); /* with one rank too */
    CHECK_ERR(CT_EDTYPE, "int32");
    CHECK_OK(ct_dist_allreduce(empty, CT_DIST_SUM));
    CHECK_OK(ct_dist_broadcast(empty, 0));
    /* No rank was left inside a collective: this one pairs up. */
    CHECK_OK(ct_dist_allreduce(m, CT_DIST_SUM));
    double want[4] = {P, P, P, P};
    check_values(m, CT_F32, want, "allreduce after refusals");
    ct_tensor_free(empty);
    ct_tensor_free(ints);
    ct_tensor_free(tr);
    ct_tensor_free(m);
}

/* ct_nccl_* as grad_sync uses them: raw device memory, an explicit stream.
 * The first call is this copy's first bootstrap, and the last rank names a
 * device that does not exist: every rank fails, none is left waiting, and
 * the next bootstrap (count 0: a communicator, nothing sent) succeeds. */
static void test_nccl_direct(void) {
    const int64_t n = 1 << 20;
    const ct_topts f32 = {.dtype = CT_F32, .device = ct_cuda(DEV)};
    ct_tensor *t = ct_full(CT_SHAPE(n), R + 1, &f32);
    void *p = ct_cuda_data_ptr(t);
    CHECK(p != NULL);
    ct_clear_error();
    void *stream = ct_cuda_current_stream(DEV); /* NULL is the default stream */
    CHECK(ct_last_code() == CT_OK);

    if (P > 1) {
        int dev = R == P - 1 ? ct_cuda_device_count() : DEV; /* missing on the last rank */
        int rc = cti_nccl_allreduce(p, 0, CT_F32, CT_DIST_SUM, dev, stream);
        CHECK(rc == (R == P - 1 ? CT_EDEVICE : CT_EDIST));
        CHECK_ERR(rc, R == P - 1 ? "does not exist" : "could not prepare");
    }
    CHECK_OK(cti_nccl_allreduce(p, 0, CT_F32, CT_DIST_SUM, DEV, stream));

    CHECK_OK(cti_nccl_allreduce(p, (size_t)n, CT_F32, CT_DIST_SUM, DEV, stream));
    ct_tensor *sum = ct_sum(t); /* queued after the collective on the same stream */
    double got = NAN;
    CHECK_OK(ct_item(sum, &got));
    /* n * (1 + ... + P) < 2^24: exact in float32. */
    CHECK_NEAR(got, (double)n * P * (P + 1) / 2, 0);
    ct_tensor_free(sum);

    /* Broadcast from rank 0 on the default stream (stream NULL). */
    ct_tensor *b = rank_values(CT_F32, ct_cuda(DEV));
    CHECK_OK(cti_nccl_broadcast(ct_cuda_data_ptr(b), 4, CT_F32, 0, DEV, NULL));
    double want[4] = {1, -1, 0, 7};
    check_values(b, CT_F32, want, "cti_nccl_broadcast");
    ct_tensor_free(b);
    ct_tensor_free(t);
    cti_nccl_finalize(); /* this copy's communicators; libctrial's go in ct_dist_finalize */
    cti_nccl_finalize(); /* twice is fine */
}

/* Whether every rank sees a GPU, and whether each has its own (NCCL
 * refuses two ranks on one); agreed, so all skip or none. *why says what is
 * missing; *none_anywhere: no rank sees a GPU at all. */
static bool gpus_for_every_rank(char *why, size_t len, bool *none_anywhere, bool *own) {
    int gpus = ct_cuda_device_count();
    int64_t v[3] = {!ct_cuda_is_available(), 0, 0}; /* none here; missing here; shared here */
    if (!ct_cuda_is_available()) {
        snprintf(why, len, "no GPU (libtorch %s CUDA)", ct_cuda_is_built() ? "has" : "has no");
        v[1] = 1;
    } else if (gpus < ct_dist_local_size()) {
        snprintf(why, len, "%d ranks on this host but %d GPU(s)", ct_dist_local_size(), gpus);
        v[2] = 1;
    }
    int64_t none = v[0];
    CHECK_OK(ct_dist_allreduce_i64(&none, 1, CT_DIST_MIN));
    CHECK_OK(ct_dist_allreduce_i64(v + 1, 2, CT_DIST_MAX));
    *none_anywhere = none != 0;
    *own = !v[2];
    if (v[1] && !why[0]) snprintf(why, len, "another host has no GPU");
    return !v[1];
}

int main(void) {
    if (!ct_test_dist_init(&R, &P)) return 1;
    test_handles();
    test_nccl_refusals();

    char why[128] = "";
    bool none_anywhere = false, own = false;
    if (!gpus_for_every_rank(why, sizeof why, &none_anywhere, &own)) {
        if (none_anywhere) test_nccl_without_gpu();
        printf("SKIP: %s: dist_cuda (rank %d of %d) checked only what needs no GPU\n", why, R, P);
    } else {
        DEV = ct_dist_local_rank() % ct_cuda_device_count();
        CHECK_OK(ct_cuda_set_device(DEV));
        /* Twice: the transport chosen (NCCL with a GPU per rank, else
         * through host memory), then through host memory by name. */
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) setenv("CTRIAL_CUDA_TRANSPORT", "host", 1);
            cti_cuda_transport_reset();
            const ct_dtype dtypes[] = {CT_F32, CT_BF16, CT_I64};
            for (size_t i = 0; i < 3; i++) {
                test_allreduce(dtypes[i]);
                test_broadcast(dtypes[i]);
            }
            test_refusals();
            if (P > 1 && R == 0)
                printf("dist_cuda pass %d: %s%s\n", pass,
                       cti_cuda_transport_why()[0] ? "through host memory: " : "NCCL", cti_cuda_transport_why());
            CHECK(P == 1 || (cti_cuda_transport_why()[0] != '\0') == (pass == 1 || !own || !cti_nccl_is_built()));
        }
        unsetenv("CTRIAL_CUDA_TRANSPORT");
        cti_cuda_transport_reset();
        if (own) test_nccl_direct();
        else if (R == 0) printf("SKIP: cti_nccl_* directly: %s: NCCL needs one per rank\n", why);
    }

    return ct_test_dist_result("dist_cuda");
}
