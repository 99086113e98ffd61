/* src/base/files.h — directories, whole files and file checksums. Internal
 * to ctrial (ct_file_checksum is public, in ckpt.h). */
#ifndef CTRIAL_BASE_FILES_H
#define CTRIAL_BASE_FILES_H

#include <stddef.h>

#include "ctrial/error.h"

/* mkdir -p: `path` and its missing parents (mode 0777 less the umask); an
 * existing directory is fine. `what` names it in the message ("output
 * directory": CT_EIO "cannot create output directory PATH: PART: errno's
 * text"). Returns a status. */
int ct_make_dirs(const char *path, const char *what);

/* Reads a whole file into a malloc'd buffer (gzip-compressed files are
 * decompressed; plain files are read unchanged). 0, or CT_EIO / CT_EFORMAT /
 * CT_ENOMEM naming the file. On success the caller frees *data. */
int ct_read_file(const char *path, unsigned char **data, size_t *size);

#endif
