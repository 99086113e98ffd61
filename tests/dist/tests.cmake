# tests/dist — ranks and collectives (ct_dist_*), the post-accumulate-grad
# hook, and bucketed gradient averaging (src/grad_sync.c, compiled in: it is
# internal to the library). The MPI tests run under mpirun with 1-3 ranks
# (ct_mpi_test) and also as a plain process (one rank, no MPI at all).
set(_dist ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(dist_grad_hook ${_dist}/test_grad_hook.c)
