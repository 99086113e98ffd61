/* The fuzzers compile the dataset sources with instrumentation and take the
 * rest of the library from libctrial.so, whose internal symbols are hidden.
 * This stands in for the one internal function those sources call from
 * another file (batch.c), through the public API; the fuzzed paths (built-in
 * datasets, which have get_batch) never reach it anyway. */
#include <stdint.h>

#include <ctrial/ctrial.h>

#include "data/batch.h"

ct_value *ct_collate_where(ct_value *const *samples, int64_t n, int64_t *bad_sample) {
    if (bad_sample) *bad_sample = -1;
    return ct_collate(samples, n);
}
