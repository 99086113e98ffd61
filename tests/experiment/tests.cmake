# tests/experiment — hyperparameter searches through ct_main (src/experiment):
# ASHA's promoted trials train exactly as straight through, a search stopped
# (SIGTERM) or killed (SIGKILL) resumes to the same end, restarts and errored
# trials, grid order and Determined's draws, refusals naming the key, the
# cluster-only keys' warning. Runs tests/ckpt's ckpt_trial.
ct_py_test(experiment_search ${CMAKE_CURRENT_LIST_DIR}/test_search.py $<TARGET_FILE:ckpt_trial>)
set_tests_properties(experiment_search PROPERTIES TIMEOUT 600)
