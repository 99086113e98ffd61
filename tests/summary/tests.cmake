# TensorBoard summaries of the trial's own data (ctrial/summary.h, module
# summary; the records are src/formats/tbevents.c's). summary_unit: NULL
# writers, every error path, write failures, the bucket edges.
# summary_parity: summary_write writes histograms, images and text through
# both layers and test_summary.py compares them with what
# torch.utils.tensorboard writes for the same inputs, read back with
# TensorBoard's own readers.
set(_summary ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(summary_unit ${_summary}/test_summary_unit.c MODULES summary)
ct_c_program(summary_write ${_summary}/summary_write.c MODULES summary)
ct_py_test(summary_parity ${_summary}/test_summary.py $<TARGET_FILE:summary_write>)
