/* src/dist/agree.h — ranks agreeing on a status. Internal to ctrial.
 *
 * Before a collective that a rank may fail to reach (it failed on its own:
 * a trial error, no memory), every rank learns whether any failed, so that
 * none is left waiting for one that has left. The loop agrees after each
 * step that can fail on one rank; the value collectives of value_wire.c
 * agree before and after moving bytes. */
#ifndef CTRIAL_DIST_AGREE_H
#define CTRIAL_DIST_AGREE_H

#include <stdint.h>

#include "ctrial/dist.h"

/* Every rank's status `rc` in one all-reduce. Returns rc on a rank that
 * failed (its own error kept), CT_EDIST "rank N failed (its message is on
 * its own stderr)" naming the lowest failing rank on the others, CT_OK when
 * none failed. Collective; with one rank it returns rc. */
int cti_ranks_agree(int rc);

/* ct_dist_allreduce_i64 under another name in the collective timeout's
 * message (watch.h): what the ranks agree on ("a stop signal"). */
int cti_dist_allreduce_i64_as(int64_t *values, int n, ct_dist_op op, const char *what);

#endif
