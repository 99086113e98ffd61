/* src/base/crc32.c — zlib's CRC-32, fast (see crc32.h).
 *
 * Zip entries carry zlib's CRC-32 and ct_pth_load checks every one, so the
 * CRC runs over every byte loaded. zlib's table-driven crc32 does ~3 GB/s on
 * one core, slower than copying a file out of the page cache, which is all
 * torch.load does (it skips the check). On x86-64 CPUs with PCLMULQDQ the
 * same CRC is computed by carry-less multiplication instead, folding 64
 * bytes at a time (Gopal et al., "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ Instruction", Intel, 2009): 3-4x faster. Both
 * give identical results (tests/pth checks them against zlib at every
 * length and alignment); zlib does the short tails and every other CPU.
 */
#include "base/crc32.h"

#include <stdbool.h>
#include <zlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CT_CRC_CLMUL 1
#endif

/* zlib's crc32 takes an unsigned int length: feed it in 1 GiB pieces. */
static uint32_t crc_zlib(uint32_t crc, const unsigned char *p, size_t len) {
    while (len > 0) {
        uInt piece = len > (1u << 30) ? 1u << 30 : (uInt)len;
        crc = (uint32_t)crc32(crc, p, piece);
        p += piece;
        len -= piece;
    }
    return crc;
}

#ifdef CT_CRC_CLMUL
/* Folding constants of the bit-reflected CRC-32 polynomial 0x04C11DB7: to
 * fold a 128-bit lane forward by N bits, its low half is multiplied by
 * x^(N+32) mod P and its high half by x^(N-32) mod P (bit-reflected, shifted
 * left by one); N = 128 (k3k4), 512 (k1k2) and 2048 (k2048). k5 reduces 64
 * bits to 32, poly holds P(x) and mu for the final Barrett reduction. */
static const uint64_t k2048[2] __attribute__((aligned(16))) = {0x011542778a, 0x01322d1430};
static const uint64_t k1k2[2] __attribute__((aligned(16))) = {0x0154442bd4, 0x01c6e41596};
static const uint64_t k3k4[2] __attribute__((aligned(16))) = {0x01751997d0, 0x00ccaa009e};
static const uint64_t k5k0[2] __attribute__((aligned(16))) = {0x0163cd6124, 0x0000000000};
static const uint64_t poly[2] __attribute__((aligned(16))) = {0x01db710641, 0x01f7011641};

#define TARGET_CLMUL __attribute__((target("pclmul,sse4.1")))
#define TARGET_AVX512 __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1")))

/* x folded forward by the distance of k, xored with the next data d. */
TARGET_CLMUL static inline __m128i fold128(__m128i x, __m128i k, __m128i d) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), d);
}

/* Four lanes holding the state of 64 consecutive bytes: folds them into
 * one, then the remaining 16-byte blocks at p, and reduces to the CRC
 * state (zlib's value inverted). */
TARGET_CLMUL static uint32_t crc_finish(__m128i x1, __m128i x2, __m128i x3, __m128i x4, const unsigned char *p,
                                        size_t len) {
    __m128i k = _mm_load_si128((const __m128i *)k3k4);
    x1 = fold128(fold128(fold128(x1, k, x2), k, x3), k, x4);
    for (; len >= 16; p += 16, len -= 16) x1 = fold128(x1, k, _mm_loadu_si128((const __m128i *)p));
    /* 128 bits to 64, then to 32 (k5), then Barrett reduction modulo P. */
    __m128i x2_ = _mm_clmulepi64_si128(x1, k, 0x10), mask = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2_);
    __m128i k5 = _mm_loadl_epi64((const __m128i *)k5k0);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask), k5, 0x00), _mm_srli_si128(x1, 4));
    __m128i pm = _mm_load_si128((const __m128i *)poly);
    __m128i t = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask), pm, 0x10), mask);
    x1 = _mm_xor_si128(x1, _mm_clmulepi64_si128(t, pm, 0x00));
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

/* The CRC state after len bytes (len >= 64, a multiple of 16): four 128-bit
 * lanes folded 64 bytes at a time. */
TARGET_CLMUL static uint32_t crc_fold(uint32_t state, const unsigned char *p, size_t len) {
    __m128i x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)state));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    __m128i k = _mm_load_si128((const __m128i *)k1k2);
    for (p += 64, len -= 64; len >= 64; p += 64, len -= 64) {
        x1 = fold128(x1, k, _mm_loadu_si128((const __m128i *)p));
        x2 = fold128(x2, k, _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = fold128(x3, k, _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = fold128(x4, k, _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    return crc_finish(x1, x2, x3, x4, p, len);
}

/* x's four lanes folded forward by the distance of k, xored with d. */
TARGET_AVX512 static inline __m512i fold512(__m512i x, __m512i k, __m512i d) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11), d,
                                     0x96); /* a ^ b ^ c */
}

/* The same with 512-bit carry-less multiplication (AVX-512 VPCLMULQDQ):
 * sixteen lanes in four registers folded 256 bytes at a time, then into
 * one register, then 64-byte blocks; len >= 256, a multiple of 16. */
TARGET_AVX512 static uint32_t crc_fold_avx512(uint32_t state, const unsigned char *p, size_t len) {
    __m512i k = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)k2048));
    __m512i s = _mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128((int)state), 0);
    __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(p), s);
    __m512i x1 = _mm512_loadu_si512(p + 64), x2 = _mm512_loadu_si512(p + 128), x3 = _mm512_loadu_si512(p + 192);
    for (p += 256, len -= 256; len >= 256; p += 256, len -= 256) {
        x0 = fold512(x0, k, _mm512_loadu_si512(p));
        x1 = fold512(x1, k, _mm512_loadu_si512(p + 64));
        x2 = fold512(x2, k, _mm512_loadu_si512(p + 128));
        x3 = fold512(x3, k, _mm512_loadu_si512(p + 192));
    }
    k = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)k1k2));
    x0 = fold512(fold512(fold512(x0, k, x1), k, x2), k, x3);
    for (; len >= 64; p += 64, len -= 64) x0 = fold512(x0, k, _mm512_loadu_si512(p));
    return crc_finish(_mm512_extracti32x4_epi32(x0, 0), _mm512_extracti32x4_epi32(x0, 1),
                      _mm512_extracti32x4_epi32(x0, 2), _mm512_extracti32x4_epi32(x0, 3), p, len);
}

static bool have_clmul(void) {
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}

static bool have_avx512_clmul(void) {
    return have_clmul() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");
}
#endif

uint32_t cti_crc32(uint32_t crc, const void *buf, size_t len) {
    const unsigned char *p = buf;
#ifdef CT_CRC_CLMUL
    if (len >= 64 && have_clmul()) {
        size_t blocks = len & ~(size_t)15;
        crc = ~(blocks >= 256 && have_avx512_clmul() ? crc_fold_avx512(~crc, p, blocks) : crc_fold(~crc, p, blocks));
        p += blocks;
        len -= blocks;
    }
#endif
    return crc_zlib(crc, p, len);
}

uint32_t cti_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    /* z_off_t is 64 bits wide on the LP64 systems ctrial builds on. */
    return (uint32_t)crc32_combine(crc_a, crc_b, (z_off_t)len_b);
}
