# Data-parallel training end to end (issue 6): dist_trial.c run through
# ct_main under mpirun -np 1/2/3 and without mpirun by a Python driver —
# start-up broadcast, N ranks = 1 rank at the same global batch size (OneVar,
# MLP), validation metrics, custom reducers' round-robin order, checkpoints
# moving between world sizes, crashed ranks, SIGTERM, evaluate_full_dataset.
# Only in builds with MPI; skipped (77) where mpirun is not on PATH.
set(_df ${CMAKE_CURRENT_LIST_DIR})
ct_c_program(dist_trial ${_df}/dist_trial.c)
# Determined's multi-rank semantics (issue 15): uneven epochs with every
# period in epochs, per-batch metrics across ranks, stop requests, hook
# ranks, backward, object collectives; mpirun -np 2 with a timeout each.
ct_c_program(semantics_trial ${_df}/semantics_trial.c)
if(CTRIAL_HAVE_MPI)
  ct_py_test(dist_semantics ${_df}/test_semantics.py $<TARGET_FILE:semantics_trial>)
  set_tests_properties(dist_semantics PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
  if(CTRIAL_SANITIZE)
    set_property(TEST dist_semantics APPEND PROPERTY ENVIRONMENT
      "LSAN_OPTIONS=fast_unwind_on_malloc=0:print_suppressions=0:suppressions=${PROJECT_SOURCE_DIR}/tests/dist/lsan.supp")
  endif()
endif()
if(CTRIAL_HAVE_MPI)
  ct_py_test(dist_fit ${_df}/test_dist_fit.py $<TARGET_FILE:dist_trial>)
  set_tests_properties(dist_fit PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77)
  if(CTRIAL_SANITIZE)
    # The ranks are sanitizer builds too (every memory error still aborts
    # them), but without the leak check at exit: in the 3-rank resume of a
    # 2-rank checkpoint, LeakSanitizer's own tracer crashes after
    # MPI_Finalize ("Tracer caught signal 11 ... LeakSanitizer has
    # encountered a fatal error") in most runs, with nothing leaked. The
    # multi-rank leak checks stay in the ct_mpi_test tests and
    # dist_semantics.
    set_property(TEST dist_fit APPEND PROPERTY ENVIRONMENT "ASAN_OPTIONS=abort_on_error=1:detect_leaks=0")
  endif()
endif()
# BatchNorm's running statistics under 2 ranks with shards of different
# scale (issue 17): every reported validation metric is the checkpointed
# model's, evaluated in PyTorch, and a resumed run validates as the
# uninterrupted one does.
ct_c_program(bn_trial ${_df}/bn_trial.c)
if(CTRIAL_HAVE_MPI)
  ct_py_test(dist_batchnorm ${_df}/test_bn.py $<TARGET_FILE:bn_trial>)
  set_tests_properties(dist_batchnorm PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
  if(CTRIAL_SANITIZE)
    set_property(TEST dist_batchnorm APPEND PROPERTY ENVIRONMENT
      "LSAN_OPTIONS=fast_unwind_on_malloc=0:print_suppressions=0:suppressions=${PROJECT_SOURCE_DIR}/tests/dist/lsan.supp")
  endif()
endif()
