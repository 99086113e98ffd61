# tests/nn/transformer.cmake — nn.MultiheadAttention and the transformer
# layers (src/nn/attention.c, transformer.c): parity with torch.nn (the
# cases are transformer_cases.json; transformer_dump runs them in C and
# test_transformer_parity.py in Python), and the errors of bad input.
ct_c_program(nn_transformer_dump ${_nn}/transformer_dump.c)
ct_py_test(nn_transformer_parity ${_nn}/test_transformer_parity.py $<TARGET_FILE:nn_transformer_dump>)

ct_c_test(nn_transformer_errors ${_nn}/transformer_errors.c)
