# tests/dist — ranks and collectives (ct_dist_*), the post-accumulate-grad
# hook, and bucketed gradient averaging (src/dist/grad_sync.c, internal: the
# tests link module dist). The MPI tests run under mpirun with 1-3 ranks
# (ct_mpi_test) and also as a plain process (one rank, no MPI at all).
set(_dist ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(dist_grad_hook ${_dist}/test_grad_hook.c)

ct_c_test(dist_collectives ${_dist}/test_collectives.c)
ct_mpi_test(dist_collectives_np1 1 dist_collectives)
ct_mpi_test(dist_collectives_np2 2 dist_collectives)
ct_mpi_test(dist_collectives_np3 3 dist_collectives)
# 5 ranks: ctrial's all-reduce folds the fifth into a power of two (issue 17).
ct_mpi_test(dist_collectives_np5 5 dist_collectives)

# The all-reduce schedules (src/dist/allreduce_steps.c: the ring and
# halving-doubling) run on simulated ranks in one process.
ct_c_test(dist_allreduce_steps ${_dist}/test_allreduce_steps.c MODULES dist)

# grad_sync.c reaches NCCL through nccl_comm.c for CUDA buckets.
ct_c_test(dist_grad_sync ${_dist}/test_grad_sync.c MODULES dist)
# A sharded optimizer's state gathered on rank 0 (src/dist/shard.c): what it
# receives lies in its spill file (cti_shard_is_spilled), for as long as a
# tensor holds those bytes.
ct_c_test(dist_shard_spill ${_dist}/test_shard_spill.c MODULES dist)
ct_mpi_test(dist_shard_spill_np2 2 dist_shard_spill)
ct_mpi_test(dist_grad_sync_np2 2 dist_grad_sync)
ct_mpi_test(dist_grad_sync_np3 3 dist_grad_sync)
# The same checks on the ring of MPI messages (ranks of one machine use
# shared memory unless told not to).
ct_mpi_test(dist_grad_sync_np2_ring 2 dist_grad_sync)
ct_mpi_test(dist_grad_sync_np3_ring 3 dist_grad_sync)
if(TEST dist_grad_sync_np2_ring)
  set_property(TEST dist_grad_sync_np2_ring dist_grad_sync_np3_ring APPEND PROPERTY ENVIRONMENT CTRIAL_GRAD_SYNC=ring)
endif()
# Halving-doubling through every rank (4 ranks), and asked for where the
# ranks are not a power of two (3: the ring).
ct_mpi_test(dist_grad_sync_np4_halving 4 dist_grad_sync)
ct_mpi_test(dist_grad_sync_np3_halving 3 dist_grad_sync)
if(TEST dist_grad_sync_np4_halving)
  set_property(TEST dist_grad_sync_np4_halving dist_grad_sync_np3_halving APPEND PROPERTY ENVIRONMENT
               CTRIAL_GRAD_SYNC=halving-doubling)
endif()
# Several hosts, faked on this machine: 2 hosts of 2 and of 3 ranks (shared
# memory on each, a ring between them), 4 hosts of 2 (halving-doubling
# between them), and uneven hosts: 2 + 1 ranks (one share, the second rank
# of the first host only copies) and 3 + 2 (two shares).
ct_mpi_test(dist_grad_sync_np4_2hosts 4 dist_grad_sync)
ct_mpi_test(dist_grad_sync_np6_2hosts 6 dist_grad_sync)
ct_mpi_test(dist_grad_sync_np8_4hosts 8 dist_grad_sync)
ct_mpi_test(dist_grad_sync_np3_uneven 3 dist_grad_sync)
ct_mpi_test(dist_grad_sync_np5_uneven 5 dist_grad_sync)
if(TEST dist_grad_sync_np4_2hosts)
  set_property(TEST dist_grad_sync_np4_2hosts dist_grad_sync_np8_4hosts dist_grad_sync_np3_uneven APPEND PROPERTY
               ENVIRONMENT CTRIAL_GRAD_SYNC_HOST_RANKS=2)
  set_property(TEST dist_grad_sync_np6_2hosts dist_grad_sync_np5_uneven APPEND PROPERTY ENVIRONMENT
               CTRIAL_GRAD_SYNC_HOST_RANKS=3)
endif()
# Two ranks in a cpuset of one CPU (taskset; mpirun binds nothing): they
# find they share it, and yield while they wait.
find_program(TASKSET_EXECUTABLE taskset)
if(TEST dist_grad_sync_np2 AND TASKSET_EXECUTABLE)
  add_test(NAME dist_grad_sync_np2_one_cpu
    COMMAND ${TASKSET_EXECUTABLE} -c 0 ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe --allow-run-as-root
            --bind-to none ${MPIEXEC_PREFLAGS} $<TARGET_FILE:dist_grad_sync> ${MPIEXEC_POSTFLAGS})
  get_test_property(dist_grad_sync_np2 ENVIRONMENT _np2_env)
  set_tests_properties(dist_grad_sync_np2_one_cpu PROPERTIES TIMEOUT 120 LABELS mpi
                       ENVIRONMENT "${_np2_env};CT_TEST_ONE_CPU=1")
endif()

# Collectives on CUDA tensors through NCCL (src/dist/nccl_comm.c, called
# directly too). On a machine without a GPU per rank it prints "SKIP: ..."
# after the checks that need none, and passes.
ct_c_test(dist_cuda ${_dist}/test_dist_cuda.c MODULES dist)
ct_mpi_test(dist_cuda_np2 2 dist_cuda)
# Label cuda: what tools/gpu-check.sh runs on a GPU (CUDA buckets and
# collectives, through NCCL or host memory).
set_property(TEST dist_cuda dist_grad_sync APPEND PROPERTY LABELS cuda)
if(TEST dist_cuda_np2)
  set_property(TEST dist_cuda_np2 dist_grad_sync_np2 APPEND PROPERTY LABELS cuda)
endif()
