/* The all-reduce schedules of src/dist/allreduce_steps.c, run on p
 * simulated ranks in one process: every step's messages pair up (what rank
 * q receives from rank r at step i is what r sends q at step i, same
 * range length), an addition never reads a range this rank has not got
 * yet, and afterwards every rank holds the mean of all ranks' values —
 * the same bits on every rank. For the ring at p = 2..9 and halving-
 * doubling at p = 2..32 (powers of two), over buffers of 0..41 elements at
 * offsets 0 and 5 of a larger one; and the choice between them. The
 * reduce to one rank (a sharded optimizer's buckets) at p = 2..9, every
 * root. */
#include <stdlib.h>

#include "ct_test.h"
#include "dist/allreduce_steps.h"

enum { PMAX = 32, SPAN = 60 };

/* Rank r's own value of element i (small integers: sums are exact). */
static double own(int r, int64_t i) { return (double)((r + 1) * 100 + i); }

/* Runs algo on p ranks over [at, at + n); returns the failures. */
static int simulate(cti_ar_algo algo, int p, int64_t at, int64_t n) {
    static double buf[PMAX][SPAN], scratch[PMAX][SPAN];
    static bool staged[PMAX][SPAN]; /* this rank's own value is in buf (or has been added there) */
    cti_ar_step *st[PMAX] = {0};
    int count = -1, fails = 0;
    for (int r = 0; r < p; r++) {
        int c = cti_ar_steps(algo, p, r, at, n, &st[r]);
        if (c < 0 || (count >= 0 && c != count)) fails++;
        count = c;
        for (int64_t i = 0; i < SPAN; i++) {
            buf[r][i] = -1e9; /* garbage: must never be read before it is written */
            staged[r][i] = false;
        }
        /* the caller's staging: step 0's send range */
        for (int64_t i = st[r][0].send_off; i < st[r][0].send_off + st[r][0].send_len; i++) {
            buf[r][i] = own(r, i);
            staged[r][i] = true;
        }
    }
    for (int s = 0; !fails && s < count; s++) {
        /* every rank sends, then every rank receives (messages in flight
         * carry the sender's values from before this step) */
        for (int q = 0; q < p; q++) {
            const cti_ar_step *mine = &st[q][s], *theirs = &st[mine->recv_from][s];
            if (theirs->send_to != q || theirs->send_len != mine->recv_len) {
                fprintf(stderr, "%s p=%d n=%lld step %d: rank %d expects %lld from %d, which sends %lld to %d\n",
                        cti_ar_name(algo), p, (long long)n, s, q, (long long)mine->recv_len, mine->recv_from,
                        (long long)theirs->send_len, theirs->send_to);
                fails++;
                continue;
            }
            for (int64_t j = 0; j < mine->recv_len; j++) {
                int64_t from = theirs->send_off + j;
                if (!staged[mine->recv_from][from]) fails++; /* sending what it never had */
                scratch[q][j] = buf[mine->recv_from][from];
            }
        }
        for (int q = 0; q < p; q++) {
            const cti_ar_step *m = &st[q][s];
            for (int64_t j = 0; j < m->recv_len; j++) {
                int64_t i = m->recv_off + j;
                if (!m->add) {
                    buf[q][i] = scratch[q][j];
                    staged[q][i] = true;
                    continue;
                }
                /* a first addition reads the rank's own value where it is;
                 * a later one reads the buffer, which must hold it */
                if (m->first == staged[q][i]) fails++;
                double a = m->first ? own(q, i) : buf[q][i];
                buf[q][i] = a + scratch[q][j];
                if (m->last) buf[q][i] *= 1.0 / p;
                staged[q][i] = true;
            }
        }
    }
    for (int64_t i = at; !fails && i < at + n; i++) {
        double sum = 0;
        for (int r = 0; r < p; r++) sum += own(r, i);
        for (int r = 0; r < p; r++) {
            if (!staged[r][i] || fabs(buf[r][i] - sum / p) > 1e-9 * sum ||
                memcmp(&buf[r][i], &buf[0][i], sizeof(double)) != 0) {
                fprintf(stderr, "%s p=%d at=%lld n=%lld: rank %d element %lld = %.17g, want %.17g\n",
                        cti_ar_name(algo), p, (long long)at, (long long)n, r, (long long)i, buf[r][i], sum / p);
                fails++;
                break;
            }
        }
    }
    for (int r = 0; r < p; r++) free(st[r]);
    return fails;
}

/* cti_ar_reduce_steps to `root` on p ranks over [at, at + n): every other
 * rank sends its range once, to root, and receives nothing; root receives
 * from each of them once, in rank order, adding (its own values read where
 * they are at the first), and ends with the mean. Returns the failures. */
static int simulate_reduce(int p, int root, int64_t at, int64_t n) {
    double sum[SPAN] = {0}, mine[SPAN];
    int fails = 0, next = 0; /* the rank root should hear from next */
    cti_ar_step *st = NULL;
    for (int r = 0; r < p; r++) {
        int c = cti_ar_reduce_steps(p, r, root, at, n, &st);
        if (r != root && (c != 1 || st[0].send_to != root || st[0].recv_from != CT_AR_NOBODY ||
                          st[0].send_off != at || st[0].send_len != n || st[0].recv_len != 0 || st[0].add))
            fails++;
        if (r == root && c != p - 1) fails++;
        for (int k = 0; r == root && !fails && k < c; k++) {
            while (next == root) next++;
            const cti_ar_step *m = &st[k];
            if (m->send_to != CT_AR_NOBODY || m->send_len != 0 || m->recv_from != next++ || m->recv_off != at ||
                m->recv_len != n || !m->add || m->first != (k == 0) || m->last != (k == c - 1))
                fails++;
            for (int64_t i = 0; i < n; i++) {
                double a = m->first ? own(root, at + i) : mine[i];
                mine[i] = a + own(m->recv_from, at + i);
                if (m->last) mine[i] *= 1.0 / p;
            }
        }
        for (int64_t i = 0; i < n; i++) sum[i] += own(r, at + i);
        free(st);
        st = NULL;
    }
    for (int64_t i = 0; !fails && i < n; i++)
        if (fabs(mine[i] - sum[i] / p) > 1e-9 * sum[i]) fails++;
    if (fails) fprintf(stderr, "reduce p=%d root=%d at=%lld n=%lld: %d failures\n", p, root, (long long)at, (long long)n, fails);
    return fails;
}

int main(void) {
    for (int p = 2; p <= 9; p++)
        for (int64_t n = 0; n <= 41; n++)
            for (int64_t at = 0; at <= 5; at += 5) CHECK(simulate(CT_AR_RING, p, at, n) == 0);
    for (int p = 2; p <= PMAX; p *= 2)
        for (int64_t n = 0; n <= 41; n++)
            for (int64_t at = 0; at <= 5; at += 5) CHECK(simulate(CT_AR_HALVING_DOUBLING, p, at, n) == 0);
    for (int p = 2; p <= 9; p++)
        for (int root = 0; root < p; root++)
            for (int64_t n = 0; n <= 41; n += 7) CHECK(simulate_reduce(p, root, 5, n) == 0);

    /* step counts: 2(p-1) on the ring, 2 log2(p) halving and doubling */
    cti_ar_step *st = NULL;
    CHECK(cti_ar_steps(CT_AR_RING, 8, 3, 0, 100, &st) == 14);
    free(st);
    CHECK(cti_ar_steps(CT_AR_HALVING_DOUBLING, 8, 3, 0, 100, &st) == 6);
    free(st);
    /* what does not fit */
    CHECK(cti_ar_steps(CT_AR_HALVING_DOUBLING, 6, 0, 0, 100, &st) == -1 && st == NULL);
    CHECK(cti_ar_steps(CT_AR_RING, 1, 0, 0, 100, &st) == -1);
    CHECK(cti_ar_steps(CT_AR_RING, 4, 4, 0, 100, &st) == -1);
    CHECK(cti_ar_fits(CT_AR_RING, 6) && !cti_ar_fits(CT_AR_HALVING_DOUBLING, 6) &&
          cti_ar_fits(CT_AR_HALVING_DOUBLING, 16));
    /* the choice: halving-doubling from 4 ranks on, when a power of two,
     * for shares of at most 256 KiB a rank */
    CHECK(cti_ar_choose(2, 1000) == CT_AR_RING && cti_ar_choose(3, 1000) == CT_AR_RING &&
          cti_ar_choose(6, 1000) == CT_AR_RING);
    CHECK(cti_ar_choose(4, 1000) == CT_AR_HALVING_DOUBLING && cti_ar_choose(4, 4 * CT_AR_HD_MAX_SHARE) ==
          CT_AR_HALVING_DOUBLING);
    CHECK(cti_ar_choose(4, 4 * CT_AR_HD_MAX_SHARE + 4) == CT_AR_RING);
    /* a 25 MiB bucket: the ring up to 64 ranks, halving-doubling from 128 */
    CHECK(cti_ar_choose(64, (int64_t)25 << 20) == CT_AR_RING && cti_ar_choose(128, (int64_t)25 << 20) ==
          CT_AR_HALVING_DOUBLING);
    CHECK(strcmp(cti_ar_name(CT_AR_RING), "ring") == 0 && strcmp(cti_ar_name(CT_AR_HALVING_DOUBLING), "halving-doubling") == 0);
    return ct_test_result("dist_allreduce_steps");
}
