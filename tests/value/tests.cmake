# ct_value: the tree type of state dicts.
ct_c_test(value_basic ${CMAKE_CURRENT_LIST_DIR}/test_value.c)
