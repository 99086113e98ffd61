/* src/dist/comm.h — the MPI communicator of the ranks that work together
 * now, for the dist module's own MPI calls (grad_sync duplicates it, NCCL
 * is bootstrapped over it). Internal to src/dist (it includes mpi.h). */
#ifndef CTRIAL_DIST_COMM_H
#define CTRIAL_DIST_COMM_H

#include <mpi.h>

/* A group's communicator between cti_dist_group_begin and _end (group.h),
 * else MPI_COMM_WORLD. */
MPI_Comm cti_dist_base_comm(void);

/* Sets CT_EDIST, "WHO: rank R: CALL failed: MPI's text for err" ("rank R:
 * ..." when who is NULL), and returns it. R is this rank (ct_dist_rank). */
int cti_dist_mpi_failed(const char *who, const char *call, int err);

#endif
