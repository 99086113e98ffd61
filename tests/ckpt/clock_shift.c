/* tests/ckpt/clock_shift.c — an LD_PRELOAD library that moves the process's
 * wall clock: clock_gettime(CLOCK_REALTIME and _COARSE) and time() answer
 * CT_TEST_CLOCK_SHIFT seconds (an integer, negative for the past) away from
 * the real time; the monotonic clocks are left alone. Without the variable
 * nothing changes. test_ckpt_clock.py runs ckpt_trial under it to give a
 * later checkpoint an earlier "time" (a clock stepped back: NTP, another
 * host's clock). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

/* Exported whatever the build's default visibility. */
#define EXPORT __attribute__((visibility("default")))

static long long shift(void) {
    const char *s = getenv("CT_TEST_CLOCK_SHIFT");
    return s ? strtoll(s, NULL, 10) : 0;
}

EXPORT int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    if (rc == 0 && ts && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += (time_t)shift();
    return rc;
}

EXPORT time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
