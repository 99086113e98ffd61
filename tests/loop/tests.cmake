# The loop's rules on Determined's OneVar fixture, with exact numbers.
ct_c_test(loop_onevar_rules ${CMAKE_CURRENT_LIST_DIR}/onevar_rules.c)
