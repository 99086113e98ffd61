# Module metrics (src/metrics/): reducing per-batch metrics over batches and
# ranks, custom reducers, and the lossless value collectives they travel by
# (dist/value_wire.h), with exact values on 1, 2 and 3 ranks.
ct_c_test(metrics_rules ${CMAKE_CURRENT_LIST_DIR}/test_metrics.c MODULES metrics)
ct_mpi_test(metrics_rules_np2 2 metrics_rules)
ct_mpi_test(metrics_rules_np3 3 metrics_rules)
