/* src/base/error.c — the thread-local error state (error.h).
 *
 * Every layer records its failures here, the shim included (through
 * ct_set_error), so that pure-C code links, runs and reports errors without
 * libtorch. A message longer than the buffer is cut at a character
 * boundary. Formatting goes through a local buffer first: callers often pass
 * ct_last_error() itself as an argument, to prefix the message they got. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctrial/error.h"

enum { MSG_MAX = 4096 };

static _Thread_local int tl_code = CT_OK;
static _Thread_local char tl_msg[MSG_MAX];

const char *ct_strerror(int code) {
    switch (code) {
    case CT_OK: return "CT_OK: success";
    case CT_EINVAL: return "CT_EINVAL: invalid argument";
    case CT_ESHAPE: return "CT_ESHAPE: shape mismatch";
    case CT_EDTYPE: return "CT_EDTYPE: wrong dtype";
    case CT_EDEVICE: return "CT_EDEVICE: wrong or unavailable device";
    case CT_EINDEX: return "CT_EINDEX: index out of range";
    case CT_ENOMEM: return "CT_ENOMEM: out of memory";
    case CT_ENOTSUP: return "CT_ENOTSUP: not supported";
    case CT_EIO: return "CT_EIO: input/output error";
    case CT_EFORMAT: return "CT_EFORMAT: malformed input";
    case CT_ESTATE: return "CT_ESTATE: object in the wrong state";
    case CT_ETORCH: return "CT_ETORCH: libtorch error";
    case CT_ECONFIG: return "CT_ECONFIG: bad configuration";
    case CT_ETRIAL: return "CT_ETRIAL: trial callback failed";
    case CT_EDIST: return "CT_EDIST: distributed failure";
    case CT_ECHECKPOINT: return "CT_ECHECKPOINT: bad checkpoint";
    case CT_ENAN: return "CT_ENAN: loss is not finite";
    case CT_EEXIT: return "CT_EEXIT: the trial asked to exit";
    default: return "unknown ctrial error code";
    }
}

const char *ct_last_error(void) { return tl_msg; }

int ct_last_code(void) { return tl_code; }

void ct_clear_error(void) {
    tl_code = CT_OK;
    tl_msg[0] = '\0';
}

int ct_set_error(int code, const char *fmt, ...) {
    char buf[MSG_MAX] = "";
    int n = 0;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        n = vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
    }
    if (n < 0) buf[0] = '\0';
    /* A cut inside a UTF-8 sequence would leave an invalid string. */
    size_t len = strlen(buf);
    if (n >= (int)sizeof buf)
        while (len > 0 && ((unsigned char)buf[len - 1] & 0xC0) == 0x80) len--;
    if (len > 0 && n >= (int)sizeof buf && ((unsigned char)buf[len - 1] & 0xC0) == 0xC0) len--;
    buf[len] = '\0';
    memcpy(tl_msg, buf, len + 1);
    tl_code = code;
    return code;
}
