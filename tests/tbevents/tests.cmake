# TensorBoard event files (src/formats/tbevents.c), internal to the library:
# the programs link module formats (pure C, no libtorch). test_tb_read.py
# reads a written file back with the tensorboard package's readers and shows
# that they notice a corrupted CRC.
set(_tb ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(tbevents_unit ${_tb}/test_tbevents.c MODULES formats)
ct_c_program(tbevents_write ${_tb}/tb_write.c MODULES formats)
ct_py_test(tbevents_read ${_tb}/test_tb_read.py $<TARGET_FILE:tbevents_write>)
