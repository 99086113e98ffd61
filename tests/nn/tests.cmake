# tests/nn — modules, built-in layers, state dicts, gradient clipping.
# The *_dump programs write JSON that a Python script compares with torch.
set(_nn ${CMAKE_CURRENT_LIST_DIR})

ct_c_program(nn_init_dump ${_nn}/nn_init_dump.c)
ct_py_test(nn_init_parity ${_nn}/test_init_parity.py $<TARGET_FILE:nn_init_dump>)

ct_c_program(nn_train_dump ${_nn}/nn_train_dump.c)
ct_py_test(nn_train_parity ${_nn}/test_train_parity.py $<TARGET_FILE:nn_train_dump>)

ct_c_program(nn_forward_dump ${_nn}/nn_forward_dump.c)
ct_py_test(nn_forward_parity ${_nn}/test_forward_parity.py $<TARGET_FILE:nn_forward_dump>)

ct_c_test(nn_module ${_nn}/test_module.c)
ct_c_test(nn_module_value ${_nn}/test_module_value.c)
# ct_nn_callf / ct_nn_forwardf: a call written with a format equals
# ct_nn_call with the tuple and dict built by hand (transformer, attention,
# LSTM), every code, every malformed format.
ct_c_test(nn_callf ${_nn}/test_callf.c MODULES nn)

# The layers of issue 18, one file per family (each with its own parity
# programs and scripts): recurrent layers, attention and transformers, and
# the single-call layers of shim/layers_*.cpp.
include(${_nn}/rnn.cmake OPTIONAL)
include(${_nn}/transformer.cmake OPTIONAL)
include(${_nn}/layers_more.cmake OPTIONAL)
set_property(TEST nn_module APPEND PROPERTY LABELS cuda)
