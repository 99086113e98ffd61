# Optimizers: parity with torch.optim (values and state_dict layout, both
# directions of load_state_dict), and the C API's errors and round trips.
ct_c_program(optim_parity ${CMAKE_CURRENT_LIST_DIR}/optim_parity.c ${CMAKE_CURRENT_LIST_DIR}/json_value.c)
ct_py_test(optim_parity_torch ${CMAKE_CURRENT_LIST_DIR}/test_optim_parity.py $<TARGET_FILE:optim_parity>)
ct_c_test(optim_api ${CMAKE_CURRENT_LIST_DIR}/test_optim_api.c)
