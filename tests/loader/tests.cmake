# tests/loader — collate, batches and the threaded loader.
set(_loader ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(loader_collate ${_loader}/test_collate.c)
