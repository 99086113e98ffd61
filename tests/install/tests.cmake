# The installed package works for a program outside the tree.
add_test(NAME install_consumer COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
# Sanitizer flags are not part of the installed package's link line.
set_tests_properties(install_consumer PROPERTIES LABELS noasan)
