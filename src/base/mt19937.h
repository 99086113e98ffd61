/* src/base/mt19937.h — the Mersenne Twister exactly as numpy's legacy
 * RandomState(seed) runs it, so a seed gives numpy's (and Determined's)
 * shuffles and searches (Determined samples hyperparameters with it). Internal to ctrial. */
#ifndef CTRIAL_BASE_MT19937_H
#define CTRIAL_BASE_MT19937_H

#include <stdint.h>

typedef struct {
    uint32_t key[624];
    int pos;
} ct_mt19937;

/* RandomState(seed) for an integer seed (numpy's mt19937_seed). */
void ct_mt19937_seed(ct_mt19937 *mt, uint32_t seed);
uint32_t ct_mt19937_next32(ct_mt19937 *mt);
/* A uniform integer in [0, max], by numpy's masked rejection (random_interval). */
uint64_t ct_mt19937_interval(ct_mt19937 *mt, uint64_t max);
/* RandomState.shuffle of a 1-d array of n int64 values, in place. */
void ct_mt19937_shuffle(ct_mt19937 *mt, int64_t *a, int64_t n);

#endif
