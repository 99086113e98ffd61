# ct_value: the tree type of state dicts.
ct_c_test(value_basic ${CMAKE_CURRENT_LIST_DIR}/test_value.c)
# ct_value trees as bytes between ranks (src/dist/value_wire.c, internal:
# the test links module dist): round trips, layout, damaged buffers.
ct_c_test(value_wire ${CMAKE_CURRENT_LIST_DIR}/test_value_wire.c MODULES dist)
