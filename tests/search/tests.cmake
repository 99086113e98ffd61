# tests/search — hyperparameter search (src/search, internal, pure C): the
# space of Determined's hyperparameters, checked, sampled and enumerated,
# against values worked out from Determined's code and unit tests.
set(_search ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(search_space ${_search}/test_space.c MODULES search)
