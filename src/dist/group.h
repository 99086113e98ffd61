/* src/dist/group.h — the job's ranks split into groups, each with its own
 * collectives: a search trains one trial per group of
 * resources.slots_per_trial ranks (src/experiment). Internal to ctrial.
 *
 *     cti_dist_group_begin(world_rank / slots);   // collective over the job
 *     ct_fit(...);       // ct_dist_rank/size/local_* are the group's; every
 *                        // collective (MPI and NCCL) stays inside the group
 *     cti_dist_group_end();                       // the job's ranks again
 *
 * Between begin and end the group is the whole world as far as ctrial's
 * collectives, gradient averaging and NCCL communicators know; ct_dist_abort
 * still ends the whole job. */
#ifndef CTRIAL_DIST_GROUP_H
#define CTRIAL_DIST_GROUP_H

#include "ctrial/config.h"

/* Splits the job's ranks by `color` (ranks keep their order within a
 * group). Collective over every rank of the job; nesting is refused
 * (CT_ESTATE). A job of one rank only records it. 0 or CT_EDIST. */
int cti_dist_group_begin(int color);
/* Back to the job's ranks (collective over the job). */
int cti_dist_group_end(void);

#endif
