/* src/base/files.h — directories, whole files and file checksums. Internal
 * to ctrial (ckpt.h's ct_file_checksum, module ckpt, is cti_files_checksum). */
#ifndef CTRIAL_BASE_FILES_H
#define CTRIAL_BASE_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "ctrial/ckpt.h" /* ct_file_sum */
#include "ctrial/error.h"

/* mkdir -p: `path` and its missing parents (mode 0777 less the umask); an
 * existing directory is fine. `what` names it in the message ("output
 * directory": CT_EIO "cannot create output directory PATH: PART: errno's
 * text"). Returns a status. */
int cti_make_dirs(const char *path, const char *what);
/* rm -r: path and everything under it (links are removed, not followed);
 * what cannot be removed stays, silently. */
void cti_remove_tree(const char *path);

/* Opens path for reading, refusing what is not a regular file (a FIFO, a
 * device such as /dev/zero or a link to one, a directory, a socket) before
 * reading anything and without blocking on it: a FIFO without a writer
 * would block open(2), and a device or a FIFO never ends a read. `who`
 * starts the message (NULL: none): CT_EIO "WHO: PATH: not a regular file (a
 * FIFO)"; CT_EIO "WHO: PATH: cannot open (errno's text)". Returns the file
 * descriptor (O_CLOEXEC, blocking) or a negative code. */
int cti_open_regular(const char *path, const char *who);
/* The same check without opening: 0 when path is a regular file (or a link
 * to one), else the same CT_EIO. */
int cti_check_regular(const char *path, const char *who);

/* Reads n bytes at byte `at` of the file open as fd into buf, as the
 * datasets that hold a file open read their items (pread: several threads
 * at once). `size` is the file's size when it was opened and checked.
 * Returns 0, or CT_EIO "WHO: PATH: why" when the file cannot be read or is
 * shorter now ("the file changed while in use: ...", rewritten in place
 * while in use). Not mmap: a file truncated under a mapping kills the
 * process with SIGBUS where a short read is an error. */
int cti_read_at(int fd, void *buf, size_t n, uint64_t at, uint64_t size, const char *who, const char *path);

/* Reads a whole regular file (cti_open_regular) as it is, no gzip, into a
 * malloc'd buffer with a '\0' after its `*size` bytes; more than max_bytes
 * is CT_EFORMAT "PATH: larger than N bytes". 0 or a code naming the file;
 * on success the caller frees *data. */
int cti_read_file_raw(const char *path, size_t max_bytes, char **data, size_t *size);

/* Reads a whole file into a malloc'd buffer (gzip-compressed files are
 * decompressed; plain files are read unchanged). Only a regular file is read
 * (cti_open_regular). 0, or CT_EIO / CT_EFORMAT / CT_ENOMEM naming the file. On success the caller frees *data. */
int cti_read_file(const char *path, unsigned char **data, size_t *size);

/* Size and CRC-32 of the regular file at path, streamed: ckpt.h's
 * ct_file_checksum (its messages name that call). Returns a status. */
int cti_files_checksum(const char *path, ct_file_sum *out);

#endif
