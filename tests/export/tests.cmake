# tests/export — ct_nn_load_exported (ctrial/export.h): torch.export
# programs read from .pt2 archives and run node by node.
set(_ex ${CMAKE_CURRENT_LIST_DIR})
ct_c_program(export_tool ${_ex}/export_tool.c)
ct_py_test(export_parity ${_ex}/test_export.py $<TARGET_FILE:export_tool> parity)
ct_py_test(export_errors ${_ex}/test_export.py $<TARGET_FILE:export_tool> errors)
set_tests_properties(export_parity export_errors PROPERTIES TIMEOUT 600)
