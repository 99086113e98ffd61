/* src/base/launch.h — this process's place in its launch, as the launcher's
 * environment tells it before MPI starts. Internal to ctrial.
 *
 * mpirun (Open MPI), a PMI launcher (MPICH's hydra, Slurm's srun) and PMIx
 * each set a variable with the number of ranks and one with this rank, and
 * so does Slurm's srun for every task of a step. ct_main reads them to
 * parse its flags for the right world size and to let one rank speak; dist
 * starts MPI only when they say there is more than one. */
#ifndef CTRIAL_BASE_LAUNCH_H
#define CTRIAL_BASE_LAUNCH_H

/* Ranks in this launch (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE,
 * SLURM_STEP_NUM_TASKS, first set wins); 1 outside a launcher or when the
 * value is not a count. */
int cti_launch_world_size(void);
/* This process's rank (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK,
 * SLURM_PROCID); 0 outside a launcher. */
int cti_launch_world_rank(void);
/* Whether a launcher started this process (any of the variables above is
 * set), even for one rank: its output then goes through the launcher,
 * which may hand the process a pseudo-terminal (Open MPI does) although
 * nobody watches it as one. */
int cti_launch_by_launcher(void);

#endif
