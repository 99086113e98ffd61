/* tests/random/test_mt19937.c — cti_mt19937_fill and cti_mt19937_bernoulli_f32
 * (src/base/mt19937.c) give what cti_mt19937_next32 gives one word at a time:
 * the same words from any position of the state, the same state after, and
 * bernoulli draws equal to ATen's definition written out in doubles. */
#include <stdint.h>
#include <stdlib.h>

#include "base/mt19937.h"
#include "ct_test.h"

/* ATen's bernoulli_distribution<double> on random64(): two words, the first
 * the high half; its low 53 bits times 2^-53 against p. */
static float bernoulli_ref(cti_mt19937 *mt, double p, float value) {
    uint64_t hi = cti_mt19937_next32(mt), lo = cti_mt19937_next32(mt);
    double u = (double)(((hi << 32) | lo) & ((UINT64_C(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
    return u < p ? value : 0.0f;
}

static int same_state(const cti_mt19937 *a, const cti_mt19937 *b) {
    return a->pos == b->pos && memcmp(a->key, b->key, sizeof a->key) == 0;
}

int main(void) {
    /* numpy's RandomState(5489) starts 3499211612, 581869302 (the reference
     * MT19937's first outputs for that seed) */
    cti_mt19937 a, b;
    cti_mt19937_seed(&a, 5489);
    uint32_t first[2];
    cti_mt19937_fill(&a, first, 2);
    CHECK(first[0] == 3499211612u && first[1] == 581869302u);

    /* from many positions, lengths across one and several twists */
    const size_t lengths[] = {0, 1, 7, 8, 227, 396, 623, 624, 625, 1000, 1248, 5000};
    uint32_t *got = malloc(5000 * sizeof *got);
    for (int start = 0; start < 700; start += 37) {
        for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
            cti_mt19937_seed(&a, 12345u + (uint32_t)start);
            for (int i = 0; i < start; i++) cti_mt19937_next32(&a);
            b = a;
            cti_mt19937_fill(&a, got, lengths[l]);
            int equal = 1;
            for (size_t i = 0; i < lengths[l]; i++) equal &= got[i] == cti_mt19937_next32(&b);
            CHECK(equal);
            CHECK(same_state(&a, &b));
            CHECK(cti_mt19937_next32(&a) == cti_mt19937_next32(&b));
        }
    }

    /* bernoulli: probabilities at the edges of the 53-bit grid too */
    const double ps[] = {0.0, 1.0, 0.5, 0.1, 0.9, 1.0 / 3.0, 1e-300, 1.0 - 1.0 / 9007199254740992.0,
                         3.0 / 9007199254740992.0, 0.7 + 1.0 / 9007199254740992.0, -0.5, 2.0, NAN};
    float *mask = malloc(3000 * sizeof *mask);
    for (size_t k = 0; k < sizeof ps / sizeof *ps; k++) {
        const size_t counts[] = {1, 311, 312, 313, 1024, 1025, 3000};
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
            cti_mt19937_seed(&a, 99u + (uint32_t)(k * 7 + c));
            for (size_t i = 0; i < c * 101; i++) cti_mt19937_next32(&a);
            b = a;
            cti_mt19937_bernoulli_f32(&a, mask, counts[c], ps[k], 1.25f);
            int equal = 1;
            for (size_t i = 0; i < counts[c]; i++) {
                float want = bernoulli_ref(&b, ps[k], 1.25f);
                equal &= memcmp(&mask[i], &want, sizeof want) == 0;
            }
            CHECK(equal);
            CHECK(same_state(&a, &b));
        }
    }
    /* the rates come out near p: the draws are not all one side */
    cti_mt19937_seed(&a, 7);
    cti_mt19937_bernoulli_f32(&a, mask, 3000, 0.3, 1.0f);
    double kept = 0;
    for (int i = 0; i < 3000; i++) kept += mask[i];
    CHECK_NEAR(kept / 3000, 0.3, 0.03);
    free(got);
    free(mask);
    return ct_test_result("random_mt19937");
}
