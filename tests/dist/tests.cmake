# tests/dist — ranks and collectives (ct_dist_*), the post-accumulate-grad
# hook, and bucketed gradient averaging (src/grad_sync.c, compiled in: it is
# internal to the library). The MPI tests run under mpirun with 1-3 ranks
# (ct_mpi_test) and also as a plain process (one rank, no MPI at all).
set(_dist ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(dist_grad_hook ${_dist}/test_grad_hook.c)

ct_c_test(dist_collectives ${_dist}/test_collectives.c)
ct_mpi_test(dist_collectives_np1 1 dist_collectives)
ct_mpi_test(dist_collectives_np2 2 dist_collectives)
ct_mpi_test(dist_collectives_np3 3 dist_collectives)

# Tests of internal code (src/grad_sync.c, src/nccl.c) compile it in, with
# what it links: MPI, and NCCL with CUDA's headers where the build has them.
function(ct_dist_internal_test name)
  ct_c_test(${name} ${ARGN})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  if(CTRIAL_HAVE_MPI)
    target_link_libraries(${name} PRIVATE MPI::MPI_C)
  endif()
  if(CTRIAL_HAVE_NCCL)
    target_link_libraries(${name} PRIVATE ctrial_nccl)
  endif()
endfunction()

# grad_sync.c reaches NCCL through nccl.c (internal too) for CUDA buckets.
ct_dist_internal_test(dist_grad_sync ${_dist}/test_grad_sync.c ${PROJECT_SOURCE_DIR}/src/grad_sync.c
                      ${PROJECT_SOURCE_DIR}/src/nccl.c)
ct_mpi_test(dist_grad_sync_np2 2 dist_grad_sync)
ct_mpi_test(dist_grad_sync_np3 3 dist_grad_sync)

# Collectives on CUDA tensors through NCCL (src/nccl.c, also compiled in to
# call ct_nccl_* directly). On a machine without a GPU per rank it prints
# "SKIP: ..." after the checks that need none, and passes.
ct_dist_internal_test(dist_cuda ${_dist}/test_dist_cuda.c ${PROJECT_SOURCE_DIR}/src/nccl.c)
ct_mpi_test(dist_cuda_np2 2 dist_cuda)
