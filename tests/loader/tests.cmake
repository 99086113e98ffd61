# tests/loader — collate, batches and the threaded loader.
set(_loader ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(loader_collate ${_loader}/test_collate.c)
ct_c_test(loader_threads ${_loader}/test_loader.c)
set_tests_properties(loader_threads PROPERTIES TIMEOUT 120)
ct_c_program(loader_stream ${_loader}/loader_stream.c)
ct_py_test(loader_chain ${_loader}/test_chain.py $<TARGET_FILE:loader_stream>)
# The loader over an iterable dataset; it calls the training loop's hooks
# (src/data/loader.h, internal), so it links module data.
ct_c_test(loader_iterable ${_loader}/test_iterable.c MODULES data)
# The loader's batch and image memory pool (src/data/pool.h, internal).
ct_c_test(loader_pool ${_loader}/test_pool.c MODULES data)
set_property(TEST loader_collate loader_threads APPEND PROPERTY LABELS cuda) # pinned memory, batches on the GPU
