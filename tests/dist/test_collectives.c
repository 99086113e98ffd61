/* ct_dist_* collectives (src/dist/dist.c) under mpirun -np 1/2/3 and as a plain
 * process (one rank: every call a no-op that returns 0). Each rank offers
 * values derived from its rank, so every result is known in closed form:
 * broadcast from the first and the last rank, allreduce SUM/AVG/MAX/MIN on
 * float32/float64/int64, raw-byte broadcast, int64 allreduce, gather of
 * different lengths per rank (one rank sends nothing) on two roots, barrier,
 * and the refusals — AVG on integer and bool tensors among them, refused on
 * every rank before anything is sent, so the next collective pairs up.
 * Also (issue 17): broadcast from every root (the binomial tree), an
 * all-reduce and a broadcast of 12 MB (more than one 4 MiB chunk) whose
 * result has the same bits on every rank, the collective timeout's API,
 * and a rank that arrives 0.5 s late within a 5 s timeout (no abort). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include <ctrial/config.h>

#include "ct_test.h"

static int R, P;

/* t[i] as a double. */
static double at(const ct_tensor *t, int64_t i) {
    ct_tensor *v = ct_select(t, 0, i);
    double x = NAN;
    ct_item(v, &x);
    ct_tensor_free(v);
    return x;
}

/* A 1-D tensor of dtype holding {r + 1, -(r + 1), 2r, 7} for rank r. */
static ct_tensor *rank_values(ct_dtype dtype) {
    double v[4] = {R + 1, -(R + 1), 2 * R, 7};
    ct_tensor *t = ct_from_data(v, CT_SHAPE(4), CT_F64);
    ct_tensor *out = ct_to_dtype(t, dtype);
    ct_tensor_free(t);
    return out;
}

static void test_broadcast(ct_dtype dtype) {
    for (int root = 0; root < P; root++) {
        ct_tensor *t = rank_values(dtype);
        CHECK_OK(ct_dist_broadcast(t, root));
        CHECK_NEAR(at(t, 0), root + 1, 0);
        CHECK_NEAR(at(t, 1), -(root + 1), 0);
        CHECK_NEAR(at(t, 2), 2 * root, 0);
        CHECK(ct_dtype_of(t) == dtype);
        ct_tensor_free(t);
    }
}

static void test_allreduce(ct_dtype dtype) {
    /* Sums over r = 0 .. P-1 of r + 1 and of 2r. */
    double s1 = P * (P + 1) / 2.0, s2 = (double)P * (P - 1);
    struct {
        ct_dist_op op;
        double want[4];
    } cases[] = {
        {CT_DIST_SUM, {s1, -s1, s2, 7.0 * P}},
        {CT_DIST_AVG, {s1 / P, -s1 / P, s2 / P, 7}},
        {CT_DIST_MAX, {P, -1, 2 * (P - 1), 7}},
        {CT_DIST_MIN, {1, -P, 0, 7}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ct_tensor *t = rank_values(dtype);
        int rc = ct_dist_allreduce(t, cases[k].op);
        if (dtype == CT_I64 && cases[k].op == CT_DIST_AVG) {
            /* The mean of integers is not an integer: refused, as
             * torch.distributed refuses ReduceOp.AVG on integer tensors. */
            CHECK(rc == CT_EDTYPE);
            CHECK_ERR(CT_EDTYPE, "CT_DIST_AVG");
            ct_tensor_free(t);
            continue;
        }
        CHECK_OK(rc);
        for (int i = 0; i < 4; i++) {
            double tol = dtype == CT_F32 ? 1e-6 * fabs(cases[k].want[i]) : 0;
            if (fabs(at(t, i) - cases[k].want[i]) > tol)
                fprintf(stderr, "rank %d: %s op %d [%d] = %g, want %g\n", R, ct_dtype_name(dtype),
                        (int)cases[k].op, i, at(t, i), cases[k].want[i]);
            CHECK_NEAR(at(t, i), cases[k].want[i], tol);
        }
        ct_tensor_free(t);
    }
}

static void test_bytes(void) {
    char buf[32];
    for (int root = 0; root < P; root += P > 1 ? P - 1 : 1) {
        snprintf(buf, sizeof buf, "from rank %d", R);
        CHECK_OK(ct_dist_broadcast_bytes(buf, sizeof buf, root));
        char want[32];
        snprintf(want, sizeof want, "from rank %d", root);
        CHECK(strcmp(buf, want) == 0);
    }
    CHECK_OK(ct_dist_broadcast_bytes(NULL, 0, 0));

    struct {
        ct_dist_op op;
        int64_t want[3];
    } cases[] = {
        {CT_DIST_SUM, {(int64_t)P * (P - 1) / 2, P, -(int64_t)P * (P - 1) / 2}},
        {CT_DIST_MAX, {P - 1, 1, 0}},
        {CT_DIST_MIN, {0, 1, -(P - 1)}},
        {CT_DIST_AVG, {(int64_t)(P - 1) / 2, 1, -(int64_t)(P - 1) / 2}}, /* integer division, as documented */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t v[3] = {R, 1, -R};
        CHECK_OK(ct_dist_allreduce_i64(v, 3, cases[k].op));
        for (int i = 0; i < 3; i++) CHECK(v[i] == cases[k].want[i]);
    }
    CHECK_OK(ct_dist_allreduce_i64(NULL, 0, CT_DIST_SUM));
}

/* Rank r sends r + 3 bytes of 'a' + r, except rank 1, which sends none. */
static size_t gather_len(int r) { return r == 1 ? 0 : (size_t)r + 3; }

static void test_gather(void) {
    for (int root = 0; root < P; root += P > 1 ? P - 1 : 1) {
        char mine[16];
        memset(mine, 'a' + R, sizeof mine);
        void *out = (void *)&out; /* must be reset to NULL off the root */
        size_t *lens = calloc((size_t)P, sizeof *lens);
        CHECK_OK(ct_dist_gather_bytes(mine, gather_len(R), root, &out, lens));
        if (R == root) {
            CHECK(out != NULL);
            const char *p = out;
            for (int r = 0; r < P && out; r++) {
                CHECK(lens[r] == gather_len(r));
                for (size_t i = 0; i < lens[r]; i++) CHECK(p[i] == 'a' + r);
                p += lens[r];
            }
        } else {
            CHECK(out == NULL);
        }
        free(out);
        free(lens);
    }
}

/* AVG on int64 and bool tensors is refused with CT_EDTYPE on every rank
 * before anything is sent (they keep their values), so no rank is left in a
 * collective: the SUM that follows pairs up as usual. One rank refuses it
 * too, so that a program does not fail only under mpirun. */
static void test_avg_refused(void) {
    ct_tensor *ints = rank_values(CT_I64);
    ct_tensor *flags = ct_ones(CT_SHAPE(3), &(ct_topts){.dtype = CT_BOOL});
    CHECK(ct_dist_allreduce(ints, CT_DIST_AVG) == CT_EDTYPE);
    CHECK_ERR(CT_EDTYPE, "int64");
    CHECK(ct_dist_allreduce(flags, CT_DIST_AVG) == CT_EDTYPE);
    CHECK_ERR(CT_EDTYPE, "bool");
    CHECK_NEAR(at(ints, 0), R + 1, 0);
    CHECK_NEAR(at(flags, 2), 1, 0);
    CHECK_OK(ct_dist_allreduce(ints, CT_DIST_SUM));
    CHECK_NEAR(at(ints, 0), P * (P + 1) / 2.0, 0);
    CHECK_NEAR(at(ints, 3), 7.0 * P, 0);
    ct_tensor_free(flags);
    ct_tensor_free(ints);
}

static void test_refusals(void) {
    CHECK(ct_dist_allreduce(NULL, CT_DIST_SUM) == CT_EINVAL);
    ct_clear_error();
    CHECK(ct_dist_broadcast(NULL, 0) == CT_EINVAL);
    ct_clear_error();
    ct_tensor *t = ct_ones(CT_SHAPE(2, 3), NULL);
#if CTRIAL_HAVE_MPI
    /* (A build without MPI accepts any op: it never reduces.) */
    CHECK(ct_dist_allreduce(t, (ct_dist_op)42) == CT_EINVAL);
    ct_clear_error();
#endif
    /* Empty tensors: nothing to move, on any number of ranks. */
    ct_tensor *empty = ct_zeros(CT_SHAPE(0), NULL);
    CHECK_OK(ct_dist_allreduce(empty, CT_DIST_SUM));
    CHECK_OK(ct_dist_broadcast(empty, 0));
    /* Non-contiguous and half tensors cannot be handed to MPI; one rank
     * never looks at them. */
    ct_tensor *tr = ct_t(t);
    ct_tensor *half = ct_ones(CT_SHAPE(2), &(ct_topts){.dtype = CT_F16});
    if (P > 1) {
        CHECK(ct_dist_allreduce(tr, CT_DIST_SUM) == CT_EINVAL);
        CHECK_ERR(CT_EINVAL, "contiguous");
        CHECK(ct_dist_broadcast(half, 0) == CT_EDTYPE);
        CHECK_ERR(CT_EDTYPE, "float16");
    } else {
        CHECK_OK(ct_dist_allreduce(tr, CT_DIST_SUM));
        CHECK_OK(ct_dist_broadcast(half, 0));
        CHECK_NEAR(at(half, 0), 1, 0);
    }
    ct_tensor_free(half);
    ct_tensor_free(tr);
    ct_tensor_free(empty);
    ct_tensor_free(t);
}

/* 3M float32 values (12 MB): rank r offers i * (r + 1) / 1024 at i. The
 * sum over ranks is i * P(P+1)/2 / 1024; every rank must hold the same
 * bits (the loop keeps weights equal by it). A broadcast of the same size
 * from the last rank too. */
static void test_large(void) {
    enum { N = 3 << 20 };
    float *v = malloc((size_t)N * sizeof *v);
    CHECK(v != NULL);
    if (!v) return;
    for (int64_t i = 0; i < N; i++) v[i] = (float)i * (float)(R + 1) / 1024.0f;
    ct_tensor *t = ct_from_data(v, CT_SHAPE(N), CT_F32);
    CHECK_OK(ct_dist_allreduce(t, CT_DIST_SUM));
    CHECK_OK(ct_read(t, v, (size_t)N * sizeof *v));
    double k = P * (P + 1) / 2.0 / 1024.0, worst = 0;
    uint64_t sum = 0;
    for (int64_t i = 0; i < N; i++) {
        double want = (double)i * k;
        worst = fmax(worst, fabs(v[i] - want) / fmax(1.0, want));
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        sum = sum * 31 + bits;
    }
    CHECK(worst < 1e-6);
    int64_t lo = (int64_t)(sum >> 1), hi = lo; /* the same bits everywhere: MIN == MAX */
    CHECK_OK(ct_dist_allreduce_i64(&lo, 1, CT_DIST_MIN));
    CHECK_OK(ct_dist_allreduce_i64(&hi, 1, CT_DIST_MAX));
    CHECK(lo == hi);
    for (int64_t i = 0; i < N; i++) v[i] = (float)(R * 7 + (int)(i % 13));
    ct_tensor *b = ct_from_data(v, CT_SHAPE(N), CT_F32);
    CHECK_OK(ct_dist_broadcast(b, P - 1));
    CHECK_OK(ct_read(b, v, (size_t)N * sizeof *v));
    int bad = 0;
    for (int64_t i = 0; i < N; i++) bad += v[i] != (float)((P - 1) * 7 + (int)(i % 13));
    CHECK(bad == 0);
    ct_tensor_free(t);
    ct_tensor_free(b);
    free(v);
}

/* The timeout's API; a rank 0.5 s late is within a 5 s timeout. */
static void test_timeout(void) {
    const char *env = getenv("CTRIAL_DIST_TIMEOUT");
    double before = ct_dist_timeout();
    if (!env || !*env) CHECK_NEAR(before, 1800, 0); /* the default: 30 minutes */
    CHECK(ct_dist_set_timeout(-1) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_dist_set_timeout");
    CHECK(ct_dist_set_timeout(NAN) == CT_EINVAL);
    CHECK_NEAR(ct_dist_timeout(), before, 0); /* a refused value changes nothing */
    CHECK_OK(ct_dist_set_timeout(INFINITY));
    CHECK_NEAR(ct_dist_timeout(), 0, 0);
    CHECK_OK(ct_dist_set_timeout(5));
    CHECK_NEAR(ct_dist_timeout(), 5, 0);
    if (R == P - 1) nanosleep(&(struct timespec){0, 500000000}, NULL);
    int64_t v = R;
    CHECK_OK(ct_dist_allreduce_i64(&v, 1, CT_DIST_MAX));
    CHECK(v == P - 1);
    CHECK_OK(ct_dist_set_timeout(before));
}

int main(void) {
    if (ct_dist_init() != 0) {
        fprintf(stderr, "ct_dist_init: %s\n", ct_last_error());
        return 1;
    }
    CHECK_OK(ct_dist_init()); /* idempotent */
    R = ct_dist_rank();
    P = ct_dist_size();
    const char *env = getenv("OMPI_COMM_WORLD_SIZE");
    CHECK(P == (env ? atoi(env) : 1));
    CHECK(R >= 0 && R < P);
    CHECK(ct_dist_is_distributed() == (P > 1));
    CHECK(ct_dist_local_rank() >= 0 && ct_dist_local_rank() < ct_dist_local_size());
    CHECK(ct_dist_local_size() <= P);

    const ct_dtype dtypes[] = {CT_F32, CT_F64, CT_I64};
    for (size_t i = 0; i < 3; i++) {
        test_broadcast(dtypes[i]);
        test_allreduce(dtypes[i]);
    }
    test_bytes();
    test_gather();
    test_avg_refused();
    test_refusals();
    test_large();
    test_timeout();
    CHECK_OK(ct_dist_barrier());

    return ct_test_dist_result("dist_collectives");
}
