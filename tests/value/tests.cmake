# ct_value: the tree type of state dicts.
ct_c_test(value_basic ${CMAKE_CURRENT_LIST_DIR}/test_value.c)
# ct_value trees as bytes between ranks (src/value_wire.c, compiled in: its
# symbols are hidden in the library): round trips, layout, damaged buffers.
ct_c_test(value_wire ${CMAKE_CURRENT_LIST_DIR}/test_value_wire.c ${PROJECT_SOURCE_DIR}/src/value_wire.c)
