# Every error path of tensor.h fails cleanly: a code, a message naming the
# problem, no crash, no leaked handles.
set(_errors ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(errors_args ${_errors}/errors_args.c)
ct_c_test(errors_ops ${_errors}/errors_ops.c)
ct_c_test(errors_scopes ${_errors}/errors_scopes.c)
