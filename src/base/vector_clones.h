/* src/base/vector_clones.h — VECTOR_CLONES: a loop function compiled twice
 * on x86-64, for AVX2 and for the baseline, the one the CPU can run picked
 * at load time (GCC and Clang's target_clones; nothing elsewhere). For the
 * files built at -O3 so that their loops vectorize (src/CMakeLists.txt):
 * base/mt19937.c, dist/spans.c. Internal to ctrial. */
#ifndef CTRIAL_BASE_VECTOR_CLONES_H
#define CTRIAL_BASE_VECTOR_CLONES_H

#if defined(__x86_64__) && defined(__ELF__) && (defined(__clang__) ? __clang_major__ >= 14 : __GNUC__ >= 6)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_CLONES
#endif

#endif
