# tests/experiment — hyperparameter searches through ct_main (src/experiment):
# ASHA's promoted trials train exactly as straight through, a search stopped
# (SIGTERM) or killed (SIGKILL) resumes to the same end, restarts and errored
# trials, grid order and Determined's draws, refusals naming the key, the
# cluster-only keys' warning. Runs tests/ckpt's ckpt_trial.
ct_py_test(experiment_search ${CMAKE_CURRENT_LIST_DIR}/test_search.py $<TARGET_FILE:ckpt_trial> $<TARGET_FILE:ctrial-ckpt>)
set_tests_properties(experiment_search PROPERTIES TIMEOUT 600)
# Under mpirun: ranks in groups of slots_per_trial, one trial per group —
# trials equal to one process's (groups of 1) and to one group's (groups of
# 2), ASHA's promoted trials exact, SIGTERM + resume, slots that do not
# divide the ranks refused. Only in builds with MPI (a build without it
# refuses a launch of several ranks: config_flags).
if(CTRIAL_HAVE_MPI)
  ct_py_test(experiment_search_mpi ${CMAKE_CURRENT_LIST_DIR}/test_search_mpi.py $<TARGET_FILE:ckpt_trial>)
  set_tests_properties(experiment_search_mpi PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
  if(CTRIAL_SANITIZE)
    # OpenMPI's own allocations that live until exit, as dist_semantics does.
    set_property(TEST experiment_search_mpi APPEND PROPERTY ENVIRONMENT
      "LSAN_OPTIONS=fast_unwind_on_malloc=0:print_suppressions=0:suppressions=${PROJECT_SOURCE_DIR}/tests/dist/lsan.supp")
  endif()
endif()
