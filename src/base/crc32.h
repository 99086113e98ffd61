/* src/base/crc32.h — zlib's CRC-32, 3-4 times faster on x86-64 CPUs with
 * carry-less multiplication. Internal to ctrial.
 *
 * Zip entries carry this CRC and ct_pth_load checks every one, so it runs
 * over every byte a checkpoint loads; checkpoint metadata records it for
 * every file (ct_file_checksum). */
#ifndef CTRIAL_BASE_CRC32_H
#define CTRIAL_BASE_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* zlib's crc32(crc, buf, len) for any len (zlib takes 32-bit lengths).
 * Start with crc = 0. */
uint32_t cti_crc32(uint32_t crc, const void *buf, size_t len);
/* The CRC of A followed by B from crc(A), crc(B) and B's length (zlib's
 * crc32_combine). */
uint32_t cti_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

#endif
