# Stock callbacks (callback.h) against Lightning's: early stopping fed the
# same metric sequences as lightning.pytorch.callbacks.EarlyStopping, and
# its state across a resume. Skipped (77) without lightning.
ct_c_program(es_trial ${CMAKE_CURRENT_LIST_DIR}/es_trial.c)
target_include_directories(es_trial PRIVATE ${PROJECT_SOURCE_DIR}/tests)
ct_py_test(callbacks_early_stopping ${CMAKE_CURRENT_LIST_DIR}/test_early_stopping.py $<TARGET_FILE:es_trial>)
set_tests_properties(callbacks_early_stopping PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
