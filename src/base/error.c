/* src/base/error.c — the thread-local error state (error.h).
 *
 * Every layer records its failures here, the shim included (through
 * ct_set_error), so that pure-C code links, runs and reports errors without
 * libtorch. A message longer than the buffer is cut at a character
 * boundary. Formatting goes through a local buffer first: callers often pass
 * ct_last_error() itself as an argument, to prefix the message they got.
 * No failure is left without words: an empty message gets the code's
 * description. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctrial/error.h"

enum { MSG_MAX = 4096 };

static _Thread_local int tl_code = CT_OK;
static _Thread_local char tl_msg[MSG_MAX];

const char *ct_err_name(int code) {
    switch (code) {
#define NAME_(name, value, phrase, meaning) \
    case CT_##name: return "CT_" #name;
        CT_ERRNO_MAP(NAME_)
#undef NAME_
    default: return "CT_UNKNOWN";
    }
}

const char *ct_strerror(int code) {
    switch (code) {
#define STRERROR_(name, value, phrase, meaning) \
    case CT_##name: return "CT_" #name ": " phrase;
        CT_ERRNO_MAP(STRERROR_)
#undef STRERROR_
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
    /* Never an error without words: an empty message, or a prefix over one
     * ("state_dict: " around a failure that said nothing), gets the code's
     * own description. */
    if (code != CT_OK && (len == 0 || (len >= 2 && strcmp(buf + len - 2, ": ") == 0))) {
        snprintf(buf + len, sizeof buf - len, "%s (no further detail)", ct_strerror(code));
        len = strlen(buf);
    }
    memcpy(tl_msg, buf, len + 1);
    tl_code = code;
    return code;
}
