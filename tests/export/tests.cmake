# tests/export — ct_nn_load_exported (ctrial/export.h): torch.export
# programs read from .pt2 archives and run node by node.
set(_ex ${CMAKE_CURRENT_LIST_DIR})
ct_c_program(export_tool ${_ex}/export_tool.c)
