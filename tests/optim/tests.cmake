# Optimizers: parity with torch.optim (values and state_dict layout, both
# directions of load_state_dict), and the C API's errors and round trips.
ct_c_program(optim_parity ${CMAKE_CURRENT_LIST_DIR}/optim_parity.c ${CMAKE_CURRENT_LIST_DIR}/json_value.c)
# The runs in three tests that ctest -j runs side by side (LBFGS's, 100 steps
# of up to 25 closure calls each, take the longest).
ct_py_test(optim_parity_torch ${CMAKE_CURRENT_LIST_DIR}/test_optim_parity.py $<TARGET_FILE:optim_parity>
           SGD,Adam,AdamW,RMSprop,Adagrad)
ct_py_test(optim_parity_torch_adaptive ${CMAKE_CURRENT_LIST_DIR}/test_optim_parity.py $<TARGET_FILE:optim_parity>
           Adadelta,Adamax,NAdam,RAdam)
ct_py_test(optim_parity_torch_lbfgs ${CMAKE_CURRENT_LIST_DIR}/test_optim_parity.py $<TARGET_FILE:optim_parity> LBFGS)
ct_c_test(optim_api ${CMAKE_CURRENT_LIST_DIR}/test_optim_api.c)
