/* src/base/mt19937.c — numpy's legacy MT19937 (RandomState), reproduced bit for
 * bit: seeding (mt19937_seed), the 32-bit generator, random_interval and the
 * Fisher-Yates order of RandomState.shuffle. */
#include "base/mt19937.h"

#define N 624
#define M 397
#define MATRIX_A 0x9908b0dfU
#define UPPER_MASK 0x80000000U
#define LOWER_MASK 0x7fffffffU

void ct_mt19937_seed(ct_mt19937 *mt, uint32_t seed) {
    for (int pos = 0; pos < N; pos++) {
        mt->key[pos] = seed;
        seed = 1812433253U * (seed ^ (seed >> 30)) + (uint32_t)pos + 1U;
    }
    mt->pos = N;
}

/* Regenerates the whole state block (numpy's mt19937_gen). */
static void generate(ct_mt19937 *mt) {
    uint32_t y;
    int i;
    for (i = 0; i < N - M; i++) {
        y = (mt->key[i] & UPPER_MASK) | (mt->key[i + 1] & LOWER_MASK);
        mt->key[i] = mt->key[i + M] ^ (y >> 1) ^ (-(y & 1) & MATRIX_A);
    }
    for (; i < N - 1; i++) {
        y = (mt->key[i] & UPPER_MASK) | (mt->key[i + 1] & LOWER_MASK);
        mt->key[i] = mt->key[i + (M - N)] ^ (y >> 1) ^ (-(y & 1) & MATRIX_A);
    }
    y = (mt->key[N - 1] & UPPER_MASK) | (mt->key[0] & LOWER_MASK);
    mt->key[N - 1] = mt->key[M - 1] ^ (y >> 1) ^ (-(y & 1) & MATRIX_A);
    mt->pos = 0;
}

uint32_t ct_mt19937_next32(ct_mt19937 *mt) {
    if (mt->pos == N) generate(mt);
    uint32_t y = mt->key[mt->pos++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

uint64_t ct_mt19937_interval(ct_mt19937 *mt, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max, value;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    if (max <= 0xffffffffU) {
        while ((value = (ct_mt19937_next32(mt) & mask)) > max) {
        }
    } else {
        do {
            uint64_t hi = ct_mt19937_next32(mt);
            value = ((hi << 32) | ct_mt19937_next32(mt)) & mask;
        } while (value > max);
    }
    return value;
}

void ct_mt19937_shuffle(ct_mt19937 *mt, int64_t *a, int64_t n) {
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = (int64_t)ct_mt19937_interval(mt, (uint64_t)i);
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
