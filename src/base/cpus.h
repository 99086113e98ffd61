/* src/base/cpus.h — the CPUs a run may use, and the intra-op thread count
 * ct_fit picks when the user names none. Internal to ctrial. */
#ifndef CTRIAL_BASE_CPUS_H
#define CTRIAL_BASE_CPUS_H

#include <stdint.h>

/* CPUs this process may run on (its affinity mask: taskset, a launcher's
 * binding); the online CPUs when the mask cannot be read. >= 1. */
int cti_cpus_usable(void);
/* CPUs online on the machine. >= 1. */
int cti_cpus_online(void);

/* The CPUs this process may run on as a bit set, CPU i at bit i % 64 of
 * word i / 64 (CT_CPU_WORDS words: CPUs 0 .. 1023): the affinity mask, or
 * the first online CPUs when the mask cannot be read. The ranks of a host
 * OR theirs together to count the CPUs they share. */
enum { CT_CPU_WORDS = 16 };
void cti_cpus_usable_set(uint64_t words[CT_CPU_WORDS]);
/* The number of CPUs in such a set. */
int cti_cpus_count_set(const uint64_t words[CT_CPU_WORDS]);
/* How many CPUs' worth of time the whole machine left idle during the next
 * `seconds` (two readings of /proc/stat, the process sleeping between
 * them); -1 when it cannot be measured (no /proc/stat). */
double cti_cpus_idle(double seconds);

/* The CPUs one of `local_ranks` processes on a host may take: its share
 * of the `host_cpus` they may run on together, no more than the `usable`
 * CPUs of its own mask. Ranks bound one to a core get 1; ranks that share
 * a cpuset (or the whole machine) divide it. >= 1. */
int cti_cpus_share(int usable, int host_cpus, int local_ranks);

/* The default intra-op thread count for one of `local_ranks` processes on
 * this host, which may run on `host_cpus` CPUs together (dist/host.h):
 * its share of them (cti_cpus_share), but no more than its share of the
 * CPUs idle now, measured over 0.1 s: threads on CPUs other programs keep
 * busy make every parallel region wait for the slowest (10x slower on a
 * loaded machine; bench/threads). >= 1. *idle is the idle CPUs measured
 * (-1: unknown). */
int cti_cpus_default_threads(int local_ranks, int host_cpus, double *idle);

#endif
