/* src/dist/allreduce_steps.c — an all-reduce as a list of message steps
 * (allreduce_steps.h). */
#include "dist/allreduce_steps.h"

#include <stdlib.h>

static bool power_of_two(int p) { return p > 0 && (p & (p - 1)) == 0; }

cti_ar_algo cti_ar_choose(int p, int64_t bytes) {
    return p >= 4 && power_of_two(p) && bytes / p <= CT_AR_HD_MAX_SHARE ? CT_AR_HALVING_DOUBLING : CT_AR_RING;
}

bool cti_ar_fits(cti_ar_algo algo, int p) { return algo == CT_AR_RING || power_of_two(p); }

const char *cti_ar_name(cti_ar_algo algo) { return algo == CT_AR_RING ? "ring" : "halving-doubling"; }

/* a mod p in 0 .. p-1 for any a (C's % keeps the sign). */
static int mod(int a, int p) { return ((a % p) + p) % p; }

void cti_ar_chunk(int64_t at, int64_t n, int p, int c, int64_t *off, int64_t *len) {
    int64_t even = n / p, rest = n % p;
    *off = at + c * even + (c < rest ? c : rest);
    *len = even + (c < rest);
}

/* The ring: in reduce-scatter step t rank r sends chunk r - t to the right
 * and adds chunk r - t - 1 from the left (each chunk but its own, r, is
 * received, and first added, exactly once); after p - 1 steps it owns the
 * sum of chunk r + 1, and the all-gather passes the owned chunks around. */
static void ring(int p, int r, int64_t at, int64_t n, cti_ar_step *st) {
    int right = mod(r + 1, p), left = mod(r - 1, p);
    for (int t = 0; t < 2 * (p - 1); t++) {
        bool reduce = t < p - 1;
        int u = reduce ? t : t - (p - 1);
        int send_c = reduce ? mod(r - u, p) : mod(r + 1 - u, p);
        int recv_c = reduce ? mod(r - u - 1, p) : mod(r - u, p);
        cti_ar_step *s = &st[t];
        *s = (cti_ar_step){.send_to = right, .recv_from = left, .add = reduce, .first = reduce,
                          .last = t == p - 2};
        cti_ar_chunk(at, n, p, send_c, &s->send_off, &s->send_len);
        cti_ar_chunk(at, n, p, recv_c, &s->recv_off, &s->recv_len);
    }
}

/* Halving-doubling (p = 2^k): in step s the rank d = p >> (s + 1) away
 * shares this rank's range; of its two halves, the rank whose bit d is 0
 * keeps the lower one. Each sends the half the other keeps and adds the
 * other's copy of its own; after k steps each owns the sum of one p-th.
 * The doubling retraces the steps: each sends what it owns and receives
 * the half it gave away, now summed. */
static void halving_doubling(int p, int r, int64_t at, int64_t n, cti_ar_step *st) {
    int k = 0;
    while ((1 << k) < p) k++;
    int64_t lo = at, hi = at + n;
    for (int s = 0; s < k; s++) {
        int d = p >> (s + 1);
        int64_t mid = lo + (hi - lo) / 2;
        bool lower = (r & d) == 0;
        cti_ar_step *a = &st[s];
        *a = (cti_ar_step){.send_to = r ^ d, .recv_from = r ^ d, .add = true, .first = s == 0, .last = s == k - 1};
        a->send_off = lower ? mid : lo;
        a->send_len = lower ? hi - mid : mid - lo;
        a->recv_off = lower ? lo : mid;
        a->recv_len = lower ? mid - lo : hi - mid;
        lo = a->recv_off;
        hi = lo + a->recv_len;
    }
    for (int s = k - 1; s >= 0; s--) {
        const cti_ar_step *down = &st[s];
        cti_ar_step *b = &st[2 * k - 1 - s];
        *b = (cti_ar_step){.send_to = down->send_to, .recv_from = down->recv_from};
        b->send_off = down->recv_off; /* what this rank kept there, now summed */
        b->send_len = down->recv_len;
        b->recv_off = down->send_off; /* what it gave away, summed by the other */
        b->recv_len = down->send_len;
    }
}

int cti_ar_steps(cti_ar_algo algo, int p, int r, int64_t at, int64_t n, cti_ar_step **out) {
    *out = NULL;
    if (p < 2 || r < 0 || r >= p || n < 0 || !cti_ar_fits(algo, p)) return -1;
    int count = 2 * (p - 1);
    if (algo == CT_AR_HALVING_DOUBLING) {
        count = 0;
        while ((1 << (count / 2)) < p) count += 2;
    }
    cti_ar_step *st = calloc((size_t)count, sizeof *st);
    if (!st) return -1;
    if (algo == CT_AR_RING) ring(p, r, at, n, st);
    else halving_doubling(p, r, at, n, st);
    *out = st;
    return count;
}

int cti_ar_reduce_steps(int p, int r, int root, int64_t at, int64_t n, cti_ar_step **out) {
    *out = NULL;
    if (p < 2 || r < 0 || r >= p || root < 0 || root >= p || n < 0) return -1;
    int count = r == root ? p - 1 : 1;
    cti_ar_step *st = calloc((size_t)count, sizeof *st);
    if (!st) return -1;
    if (r != root) {
        st[0] = (cti_ar_step){.send_to = root, .recv_from = CT_AR_NOBODY, .send_off = at, .send_len = n,
                              .recv_off = at};
    } else {
        for (int k = 0, q = 0; q < p; q++) {
            if (q == root) continue;
            st[k] = (cti_ar_step){.send_to = CT_AR_NOBODY, .recv_from = q, .send_off = at, .recv_off = at,
                                  .recv_len = n, .add = true, .first = k == 0, .last = k == p - 2};
            k++;
        }
    }
    *out = st;
    return count;
}
