# The loop's rules on Determined's OneVar fixture, with exact numbers.
ct_c_test(loop_onevar_rules ${CMAKE_CURRENT_LIST_DIR}/onevar_rules.c)
# Custom reducers through ct_fit (for_training / for_validation, a class
# reducer, a named reducer returning a dict), read back from metrics.jsonl;
# one process and 2 ranks.
ct_c_test(loop_reducer_workloads ${CMAKE_CURRENT_LIST_DIR}/reducer_workloads.c)
ct_mpi_test(loop_reducer_workloads_np2 2 loop_reducer_workloads)
# Determined's semantics that ctrial once differed from (issue 15), one process.
ct_c_test(loop_semantics ${CMAKE_CURRENT_LIST_DIR}/semantics.c)
