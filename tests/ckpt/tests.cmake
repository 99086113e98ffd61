# Checkpoints (ckpt.h): the trial in ckpt_trial.c run through ct_main by
# Python drivers — exact resume, preemption, kill -9, refusals, retention,
# loading for use, ctrial-ckpt — and interop with Python's torch.
set(_ck ${CMAKE_CURRENT_LIST_DIR})
ct_c_program(ckpt_trial ${_ck}/ckpt_trial.c)
ct_py_test(ckpt_resume ${_ck}/test_resume.py $<TARGET_FILE:ckpt_trial> $<TARGET_FILE:ctrial-ckpt>)
set_tests_properties(ckpt_resume PROPERTIES TIMEOUT 600)
# Interop with Python's torch: Python continues a ctrial checkpoint (losses,
# weights, Adam and StepLR state), ctrial warm-starts from a Python
# state_dict, predict matches, the layout torch.load shows.
ct_py_test(ckpt_interop ${_ck}/test_interop.py $<TARGET_FILE:ckpt_trial>)
ct_c_test(ckpt_api ${_ck}/test_ckpt_api.c)
# ctrial-ckpt list on a run's output folder: every checkpoint in training
# order, the searcher metric, best and latest, damaged and uncommitted ones.
ct_py_test(ckpt_tool ${_ck}/test_ckpt_tool.py $<TARGET_FILE:ckpt_trial> $<TARGET_FILE:ctrial-ckpt>)
