/* src/base/launch.c — the launcher's environment (see launch.h). */
#include "base/launch.h"

#include <errno.h>
#include <stdlib.h>

/* The first of `names` that is set, as a count in [0, 2^30); `def` when none
 * is set or the first one set is not such a number. */
static int env_count(const char *const *names, int def) {
    for (; *names; names++) {
        const char *s = getenv(*names);
        if (!s || !*s) continue;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        return errno || *end || v < 0 || v >= 1L << 30 ? def : (int)v;
    }
    return def;
}

/* The launchers' world-size variables, first set wins. Slurm's srun sets
 * SLURM_STEP_NUM_TASKS in every task of a step (its PMIx plugin sets no
 * size of its own; the batch script, outside any step, has none), and
 * comes last: an mpirun inside an allocation starts its daemons with srun,
 * and its ranks inherit that step's variables beside mpirun's own. */
static const char *const size_names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS",
                                         NULL};

int cti_launch_world_size(void) {
    int n = env_count(size_names, 1);
    return n >= 1 ? n : 1;
}

int cti_launch_by_launcher(void) {
    for (const char *const *n = size_names; *n; n++)
        if (getenv(*n)) return 1;
    return 0;
}

int cti_launch_world_rank(void) {
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", NULL};
    return env_count(names, 0);
}
