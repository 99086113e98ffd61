/* src/base/clock.c — the monotonic and the wall clock (see clock.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "base/clock.h"

#include <time.h>

static double seconds(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cti_clock_monotonic(void) { return seconds(CLOCK_MONOTONIC); }

double cti_clock_wall(void) { return seconds(CLOCK_REALTIME); }
