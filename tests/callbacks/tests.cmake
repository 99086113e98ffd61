# Stock callbacks (callback.h) against Lightning's: early stopping fed the
# same metric sequences as lightning.pytorch.callbacks.EarlyStopping, and
# its state across a resume. Skipped (77) without lightning.
ct_c_program(es_trial ${CMAKE_CURRENT_LIST_DIR}/es_trial.c)
target_include_directories(es_trial PRIVATE ${PROJECT_SOURCE_DIR}/tests)
ct_py_test(callbacks_early_stopping ${CMAKE_CURRENT_LIST_DIR}/test_early_stopping.py $<TARGET_FILE:es_trial>)
set_tests_properties(callbacks_early_stopping PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# The learning-rate monitor: Lightning's LearningRateMonitor names over three
# optimizers, StepLR's rates in every training line and in TensorBoard.
ct_c_program(lr_trial ${CMAKE_CURRENT_LIST_DIR}/lr_trial.c)
target_include_directories(lr_trial PRIVATE ${PROJECT_SOURCE_DIR}/tests)
ct_py_test(callbacks_lr_monitor ${CMAKE_CURRENT_LIST_DIR}/test_lr_monitor.py $<TARGET_FILE:lr_trial>)
set_tests_properties(callbacks_lr_monitor PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
# The weight average (ct_ctx_add_ema) against Lightning's EMAWeightAveraging:
# training and validation losses, the averaged state dict beside the model
# in the checkpoint, and a resume.
ct_c_program(ema_trial ${CMAKE_CURRENT_LIST_DIR}/ema_trial.c)
ct_py_test(callbacks_ema ${CMAKE_CURRENT_LIST_DIR}/test_ema.py $<TARGET_FILE:ema_trial>)
set_tests_properties(callbacks_ema PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
