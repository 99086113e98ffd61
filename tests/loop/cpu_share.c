/* The CPUs a rank's default thread count starts from (src/base/cpus.c,
 * cti_cpus_share): its share of the CPUs its host's ranks may run on
 * together, capped by its own affinity mask — the layouts a launcher
 * makes, with this machine's CPU count out of the picture. Also the bit
 * set that the ranks OR together (cti_cpus_usable_set) against the mask
 * count (cti_cpus_usable). */
#include "base/cpus.h"
#include "ct_test.h"

int main(void) {
    /* one process on a 64-CPU machine, unbound: all of them */
    CHECK(cti_cpus_share(64, 64, 1) == 64);
    /* 4 ranks, unbound: a quarter each */
    CHECK(cti_cpus_share(64, 64, 4) == 16);
    /* 4 ranks bound one to a core (mpirun --bind-to core): 1 each */
    CHECK(cti_cpus_share(1, 4, 4) == 1);
    /* 2 ranks bound to 8 cores each (--map-by ppr:2:node:PE=8) */
    CHECK(cti_cpus_share(8, 16, 2) == 8);
    /* 4 ranks sharing a cpuset of 8 out of 64 (srun --cpu-bind=none in a
     * cgroup): 2 each, not the cpuset's 8 each */
    CHECK(cti_cpus_share(8, 8, 4) == 2);
    /* more ranks than CPUs: still 1 */
    CHECK(cti_cpus_share(2, 2, 5) == 1);
    CHECK(cti_cpus_share(1, 1, 0) == 1);

    uint64_t set[CT_CPU_WORDS];
    cti_cpus_usable_set(set);
    CHECK(cti_cpus_count_set(set) == cti_cpus_usable());
    uint64_t two[CT_CPU_WORDS] = {0x5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (uint64_t)1 << 63};
    CHECK(cti_cpus_count_set(two) == 3);
    return ct_test_result("loop_cpu_share");
}
