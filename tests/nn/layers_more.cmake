# The single-call layers of shim/layers_*.cpp after MaxPool2d in nn.h (included by
# tests.cmake, where _nn is this folder): a dump program and its parity
# script against torch.nn (initial state bit for bit, forward and backward,
# train and eval), and the errors of construction and forward in C.
ct_c_program(nn_layers_more_dump ${_nn}/layers_more_dump.c)
ct_py_test(nn_layers_more_parity ${_nn}/test_layers_more.py $<TARGET_FILE:nn_layers_more_dump>)
ct_c_test(nn_layers_more_errors ${_nn}/layers_more_errors.c)
