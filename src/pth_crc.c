/* src/pth_crc.c — CRC-32 for PyTorch files, and ct_file_checksum (ckpt.h).
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
#define _POSIX_C_SOURCE 200809L /* posix_fadvise */
#include "pth_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PTH_CRC_CLMUL 1
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

#ifdef PTH_CRC_CLMUL
/* The folding constants of the bit-reflected CRC-32 polynomial 0x04C11DB7
 * (the paper's k1..k5, and P(x) with mu for the final Barrett reduction). */
static const uint64_t k1k2[2] __attribute__((aligned(16))) = {0x0154442bd4, 0x01c6e41596};
static const uint64_t k3k4[2] __attribute__((aligned(16))) = {0x01751997d0, 0x00ccaa009e};
static const uint64_t k5k0[2] __attribute__((aligned(16))) = {0x0163cd6124, 0x0000000000};
static const uint64_t poly[2] __attribute__((aligned(16))) = {0x01db710641, 0x01f7011641};

/* The CRC state (zlib's value inverted) after len bytes, len >= 64 and a
 * multiple of 16. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_fold(uint32_t state,
                                                                   const unsigned char *p,
                                                                   size_t len) {
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8;
    /* Four 128-bit lanes, the state xored into the first bytes. */
    x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(p + 0x00)), _mm_cvtsi32_si128((int)state));
    x2 = _mm_loadu_si128((const __m128i *)(p + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(p + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(p + 0x30));
    p += 64;
    len -= 64;
    /* Fold each lane 512 bits forward onto the next 64 bytes. */
    x0 = _mm_load_si128((const __m128i *)k1k2);
    while (len >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), _mm_loadu_si128((const __m128i *)(p + 0x00)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), _mm_loadu_si128((const __m128i *)(p + 0x10)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), _mm_loadu_si128((const __m128i *)(p + 0x20)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), _mm_loadu_si128((const __m128i *)(p + 0x30)));
        p += 64;
        len -= 64;
    }
    /* Fold the four lanes into one, then the remaining 16-byte blocks. */
    x0 = _mm_load_si128((const __m128i *)k3k4);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, x0, 0x11), x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, x0, 0x11), x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, x0, 0x11), x4), x5);
    while (len >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)p);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, x0, 0x11), x2), x5);
        p += 16;
        len -= 16;
    }
    /* 128 bits to 64, then to 32 (k5), then Barrett reduction modulo P. */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
    x0 = _mm_loadl_epi64((const __m128i *)k5k0);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, x3), x0, 0x00), x2);
    x0 = _mm_load_si128((const __m128i *)poly);
    x2 = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, x3), x0, 0x10), x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

static bool have_clmul(void) {
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}
#endif

uint32_t ct_pth_crc32(uint32_t crc, const void *buf, size_t len) {
    const unsigned char *p = buf;
#ifdef PTH_CRC_CLMUL
    if (len >= 64 && have_clmul()) {
        size_t blocks = len & ~(size_t)15;
        crc = ~crc_fold(~crc, p, blocks);
        p += blocks;
        len -= blocks;
    }
#endif
    return crc_zlib(crc, p, len);
}

uint32_t ct_pth_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    /* z_off_t is 64 bits wide on the LP64 systems ctrial builds on. */
    return (uint32_t)crc32_combine(crc_a, crc_b, (z_off_t)len_b);
}

int ct_file_checksum(const char *path, ct_file_sum *out) {
    if (!path || !out) return ct_set_error(CT_EINVAL, "ct_file_checksum: %s is NULL", !path ? "path" : "out");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ct_set_error(CT_EIO, "ct_file_checksum: %s: cannot open (%s)", path, strerror(errno));
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    enum { CHUNK = 4 << 20 };
    unsigned char *buf = malloc(CHUNK);
    int rc = buf ? 0 : ct_set_error(CT_ENOMEM, "ct_file_checksum: %s: out of host memory", path);
    uint64_t total = 0;
    uint32_t crc = 0;
    while (rc == 0) {
        ssize_t got = read(fd, buf, CHUNK);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) rc = ct_set_error(CT_EIO, "ct_file_checksum: %s: read failed after %llu bytes (%s)",
                                       path, (unsigned long long)total, strerror(errno));
        if (got <= 0) break;
        crc = ct_pth_crc32(crc, buf, (size_t)got);
        total += (uint64_t)got;
    }
    free(buf);
    close(fd);
    if (rc) return rc;
    out->nbytes = total;
    out->crc32 = crc;
    return 0;
}
