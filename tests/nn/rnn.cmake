# tests/nn/rnn.cmake — nn.RNN, nn.LSTM, nn.GRU (src/nn/rnn.c), included by
# tests.cmake. rnn_dump writes every case's initial state, outputs and
# gradients to a .pth that test_rnn_parity.py compares with torch's; the
# C test checks what Python cannot see: argument binding, constructor
# checks, codes and leaks.
ct_c_program(nn_rnn_dump ${_nn}/rnn_dump.c)
ct_py_test(nn_rnn_parity ${_nn}/test_rnn_parity.py $<TARGET_FILE:nn_rnn_dump>)

ct_c_test(nn_rnn_errors ${_nn}/rnn_errors.c)
