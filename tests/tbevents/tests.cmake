# TensorBoard event files (src/tbevents.c). The writer is internal to the
# library (hidden symbols), so each program compiles its own copy of it.
# test_tb_read.py reads a written file back with the tensorboard package's
# readers and shows that they notice a corrupted CRC.
set(_tb ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(tbevents_unit ${_tb}/test_tbevents.c ${PROJECT_SOURCE_DIR}/src/tbevents.c)
target_include_directories(tbevents_unit PRIVATE ${PROJECT_SOURCE_DIR}/src)
ct_c_program(tbevents_write ${_tb}/tb_write.c ${PROJECT_SOURCE_DIR}/src/tbevents.c)
target_include_directories(tbevents_write PRIVATE ${PROJECT_SOURCE_DIR}/src)
ct_py_test(tbevents_read ${_tb}/test_tb_read.py $<TARGET_FILE:tbevents_write>)
