/* src/base/opts.h — option structs that carry their size (docs/design.md,
 * "A stable ABI"). Internal to ctrial.
 *
 * An option struct that may grow starts with `uint32_t size`, which the
 * caller's inline `*_defaults()` sets to sizeof the struct as the caller
 * was compiled. The library reads only that many bytes, takes its own
 * defaults for the rest, and refuses a struct bigger than it knows (a
 * program built against a newer ctrial). */
#ifndef CTRIAL_BASE_OPTS_H
#define CTRIAL_BASE_OPTS_H

#include <stddef.h>

/* Fills the first `size` bytes of the caller's struct `o` (at most
 * `lib_size`, the library's sizeof; a bigger tail is zeroed) from the
 * library's `defaults`, and sets its size field to `size`. */
void cti_opts_init(void *o, size_t size, const void *defaults, size_t lib_size);

/* Copies the caller's struct `src` into `dst` (the library's sizeof is
 * `lib_size`): `defaults` first, then the caller's `size` bytes over them,
 * so the fields an older caller lacks keep their defaults; dst's size
 * becomes `lib_size`. `min_size`: the smallest size ever released (the
 * struct's required fields end there). Returns CT_OK, or CT_EINVAL naming
 * `type` and the `init` function for a size of 0 (not made by it), below
 * `min_size`, or past `lib_size` (built against a newer ctrial). */
int cti_opts_take(void *dst, const void *src, const void *defaults, size_t lib_size, size_t min_size,
                 const char *type, const char *init);

#endif
