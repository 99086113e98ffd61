/* src/base/version.c — the library's version, as loaded at run time. */
#include "ctrial/ctrial.h"

const char *ct_version(void) { return CTRIAL_VERSION_STRING; }
