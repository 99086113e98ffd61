ct_c_test(memory_train_loop ${CMAKE_CURRENT_LIST_DIR}/train_loop.c)
