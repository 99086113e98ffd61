/* src/base/cpus.c — usable and idle CPUs, and the default thread count
 * (see cpus.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "base/cpus.h"

#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int cti_cpus_online(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (int)n : 1;
}

int cti_cpus_usable(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= 1) return CPU_COUNT(&set);
    return cti_cpus_online();
}

void cti_cpus_usable_set(uint64_t words[CT_CPU_WORDS]) {
    memset(words, 0, CT_CPU_WORDS * sizeof *words);
    cpu_set_t set;
    bool ok = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= 1;
    int n = ok ? CPU_SETSIZE : cti_cpus_online();
    for (int i = 0; i < n && i < 64 * CT_CPU_WORDS; i++)
        if (!ok || CPU_ISSET(i, &set)) words[i / 64] |= (uint64_t)1 << (i % 64);
}

int cti_cpus_count_set(const uint64_t words[CT_CPU_WORDS]) {
    int n = 0;
    for (int w = 0; w < CT_CPU_WORDS; w++) n += __builtin_popcountll(words[w]);
    return n;
}

/* The first line of /proc/stat: the machine's total and idle (idle +
 * iowait) time in clock ticks. */
static int read_stat(double *total, double *idle) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long v[10] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5], &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    if (n < 5) return -1;
    /* user nice system idle iowait irq softirq steal (guest and guest_nice
     * are already in user and nice) */
    *total = 0;
    for (int i = 0; i < 8 && i < n; i++) *total += (double)v[i];
    *idle = (double)v[3] + (double)v[4];
    return 0;
}

double cti_cpus_idle(double seconds) {
    double t0, i0, t1, i1;
    if (read_stat(&t0, &i0) != 0) return -1;
    struct timespec ts = {(time_t)seconds, (long)((seconds - floor(seconds)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
    if (read_stat(&t1, &i1) != 0 || t1 <= t0) return -1;
    return (i1 - i0) / (t1 - t0) * cti_cpus_online();
}

int cti_cpus_share(int usable, int host_cpus, int local_ranks) {
    if (local_ranks < 1) local_ranks = 1;
    int share = host_cpus / local_ranks;
    if (share > usable) share = usable;
    return share >= 1 ? share : 1;
}

int cti_cpus_default_threads(int local_ranks, int host_cpus, double *idle) {
    if (local_ranks < 1) local_ranks = 1;
    int share = cti_cpus_share(cti_cpus_usable(), host_cpus, local_ranks);
    double free_cpus = cti_cpus_idle(0.1);
    if (idle) *idle = free_cpus;
    /* A CPU counts as free when at least 70% of it was idle. */
    int free_share = free_cpus >= 0 ? (int)floor(free_cpus / local_ranks + 0.3) : share;
    int n = free_share < share ? free_share : share;
    return n >= 1 ? n : 1;
}
