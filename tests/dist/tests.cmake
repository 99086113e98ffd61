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

ct_c_test(dist_grad_sync ${_dist}/test_grad_sync.c ${PROJECT_SOURCE_DIR}/src/grad_sync.c)
target_include_directories(dist_grad_sync PRIVATE ${PROJECT_SOURCE_DIR}/src)
if(CTRIAL_HAVE_MPI)
  target_link_libraries(dist_grad_sync PRIVATE MPI::MPI_C)
endif()
ct_mpi_test(dist_grad_sync_np2 2 dist_grad_sync)
ct_mpi_test(dist_grad_sync_np3 3 dist_grad_sync)
