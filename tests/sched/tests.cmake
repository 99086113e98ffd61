# LR schedulers: parity with torch.optim.lr_scheduler (every lr, momentum,
# state_dict layout, resuming in all directions), and the C API's errors,
# refused loads and round trips. The JSON <-> ct_value helpers are the
# optimizer tests'.
ct_c_program(sched_parity ${CMAKE_CURRENT_LIST_DIR}/sched_parity.c ${PROJECT_SOURCE_DIR}/tests/optim/json_value.c)
target_include_directories(sched_parity PRIVATE ${PROJECT_SOURCE_DIR}/tests/optim)
ct_py_test(sched_parity_torch ${CMAKE_CURRENT_LIST_DIR}/test_sched_parity.py $<TARGET_FILE:sched_parity>)
ct_c_test(sched_api ${CMAKE_CURRENT_LIST_DIR}/test_sched_api.c)
