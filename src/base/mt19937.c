/* src/base/mt19937.c — numpy's legacy MT19937 (RandomState), reproduced bit for
 * bit: seeding (mt19937_seed), the 32-bit generator, random_interval and the
 * Fisher-Yates order of RandomState.shuffle; and the same generator a block
 * at a time (torch's CPU generator runs it too: dropout masks).
 *
 * The block loops are written for the vectorizer (src/CMakeLists.txt builds
 * this file at -O3), and on x86-64 each is also compiled for AVX2 and picked
 * at load time: the twist's two loops read words 1 and 397 ahead (or 227
 * behind) of the one they write, and tempering and the bernoulli test are
 * per word, so 8 words at a time give what one at a time gives. */
#include "base/mt19937.h"

#include <math.h>

#include "base/vector_clones.h"

#define N 624
#define M 397
#define MATRIX_A 0x9908b0dfU
#define UPPER_MASK 0x80000000U
#define LOWER_MASK 0x7fffffffU

void cti_mt19937_seed(cti_mt19937 *mt, uint32_t seed) {
    for (int pos = 0; pos < N; pos++) {
        mt->key[pos] = seed;
        seed = 1812433253U * (seed ^ (seed >> 30)) + (uint32_t)pos + 1U;
    }
    mt->pos = N;
}

/* Regenerates the whole state block (numpy's mt19937_gen). */
VECTOR_CLONES static void generate(cti_mt19937 *mt) {
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

/* MT19937's output function: one state word tempered. */
static inline uint32_t temper1(uint32_t y) {
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

uint32_t cti_mt19937_next32(cti_mt19937 *mt) {
    if (mt->pos == N) generate(mt);
    return temper1(mt->key[mt->pos++]);
}

VECTOR_CLONES static void temper(const uint32_t *key, uint32_t *out, int n) {
    for (int i = 0; i < n; i++) out[i] = temper1(key[i]);
}

void cti_mt19937_fill(cti_mt19937 *mt, uint32_t *out, size_t n) {
    while (n > 0) {
        if (mt->pos == N) generate(mt);
        int take = N - mt->pos;
        if ((size_t)take > n) take = (int)n;
        temper(mt->key + mt->pos, out, take);
        mt->pos += take;
        out += take;
        n -= (size_t)take;
    }
}

/* u < p for u = k * 2^-53 (k < 2^53, exact in a double) is k < p * 2^53,
 * which for an integer k is k < ceil(p * 2^53): a 64-bit integer compare. */
VECTOR_CLONES static void bernoulli_block(const uint32_t *r, float *out, int n, uint64_t below, float value) {
    for (int i = 0; i < n; i++) {
        uint64_t k = (((uint64_t)r[2 * i] << 32) | r[2 * i + 1]) & ((UINT64_C(1) << 53) - 1);
        out[i] = k < below ? value : 0.0f;
    }
}

void cti_mt19937_bernoulli_f32(cti_mt19937 *mt, float *out, size_t n, double p, float value) {
    enum { BLOCK = 1024 };
    uint32_t r[2 * BLOCK];
    double t = ceil(p * 9007199254740992.0); /* 2^53; a NaN p keeps every draw out, as u < NaN does */
    uint64_t below = !(t > 0) ? 0 : t >= 9007199254740992.0 ? UINT64_C(1) << 53 : (uint64_t)t;
    while (n > 0) {
        int take = n < BLOCK ? (int)n : BLOCK;
        cti_mt19937_fill(mt, r, 2 * (size_t)take);
        bernoulli_block(r, out, take, below, value);
        out += take;
        n -= (size_t)take;
    }
}

uint64_t cti_mt19937_interval(cti_mt19937 *mt, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max, value;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    if (max <= 0xffffffffU) {
        while ((value = (cti_mt19937_next32(mt) & mask)) > max) {
        }
    } else {
        do {
            uint64_t hi = cti_mt19937_next32(mt);
            value = ((hi << 32) | cti_mt19937_next32(mt)) & mask;
        } while (value > max);
    }
    return value;
}

void cti_mt19937_shuffle(cti_mt19937 *mt, int64_t *a, int64_t n) {
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = (int64_t)cti_mt19937_interval(mt, (uint64_t)i);
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
