/* src/base/mt19937.h — the Mersenne Twister exactly as numpy's legacy
 * RandomState(seed) runs it, so a seed gives numpy's (and Determined's)
 * shuffles and searches (Determined samples hyperparameters with it). It is
 * also the engine of torch's CPU generator: the shim draws dropout masks
 * here, on a copy of that generator's state (shim/ops.cpp). Internal to ctrial. */
#ifndef CTRIAL_BASE_MT19937_H
#define CTRIAL_BASE_MT19937_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t key[624];
    int pos;
} cti_mt19937;

/* RandomState(seed) for an integer seed (numpy's mt19937_seed). */
void cti_mt19937_seed(cti_mt19937 *mt, uint32_t seed);
uint32_t cti_mt19937_next32(cti_mt19937 *mt);
/* n outputs of cti_mt19937_next32 into out, leaving the same state as n
 * calls would: the same numbers, drawn a block at a time by vectorized loops. */
void cti_mt19937_fill(cti_mt19937 *mt, uint32_t *out, size_t n);
/* torch's Tensor.bernoulli_(p) on the CPU generator, for n floats, and the
 * dropout scale with it: out[i] = value when u < p, else 0, where u is drawn
 * as ATen's bernoulli_distribution<double> draws it from two outputs (the
 * first the high half of a 64-bit word, whose low 53 bits times 2^-53 are
 * u). Takes 2n outputs. */
void cti_mt19937_bernoulli_f32(cti_mt19937 *mt, float *out, size_t n, double p, float value);
/* A uniform integer in [0, max], by numpy's masked rejection (random_interval). */
uint64_t cti_mt19937_interval(cti_mt19937 *mt, uint64_t max);
/* RandomState.shuffle of a 1-d array of n int64 values, in place. */
void cti_mt19937_shuffle(cti_mt19937 *mt, int64_t *a, int64_t n);

#endif
