# tests/search — hyperparameter search (src/search, internal, pure C): the
# space of Determined's hyperparameters, checked, sampled and enumerated,
# against values worked out from Determined's code and unit tests.
set(_search ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(search_space ${_search}/test_space.c MODULES search)
# adaptive ASHA's brackets, trials, concurrency and rungs against Determined's
# unit tests and worked examples; Go's log where libm's turns a rung count.
ct_c_test(search_asha_plan ${_search}/test_asha_plan.c MODULES search)
# One ASHA bracket's decisions (promotion and stop_once), driven as
# Determined's op-based tests drive them (one FIFO of operations), with
# their expected training lengths per trial.
ct_c_test(search_asha_rungs ${_search}/test_asha_rungs.c MODULES search)
# The searchers behind one interface: adaptive_asha as Determined's
# tournament of brackets (both rules), random's concurrency and count,
# grid's order, a single trial's request id and seed.
ct_c_test(search_searcher ${_search}/test_searcher.c MODULES search)
