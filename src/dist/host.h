/* src/dist/host.h — what a rank knows of its host's CPUs, found at
 * ct_dist_init. Internal to ctrial. */
#ifndef CTRIAL_DIST_HOST_H
#define CTRIAL_DIST_HOST_H

#include <stdbool.h>

/* The CPUs this host's ranks may run on together: their affinity masks
 * OR-ed (ranks bound one to a core: one each; ranks in one cpuset: its
 * size). One rank, or before ct_dist_init: this process's own. >= 1. */
int cti_dist_host_cpus(void);
/* More ranks on this host than those CPUs: a rank waiting in a collective
 * yields its CPU at every poll (watch.h). */
bool cti_dist_host_oversubscribed(void);

#endif
