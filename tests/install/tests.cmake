# The installed package works for programs outside the tree, from a moved
# prefix, and against another copy of libtorch (tests/install/run.sh). The
# last argument is the run path the installed libctrial.so must record; the
# trials it runs find libtorch through it, so the test expects it to name the
# libtorch this build links (CTRIAL_TORCH_RPATH left empty).
list(JOIN CTRIAL_INSTALL_TORCH_RPATH ":" _ctrial_install_rpath)
add_test(NAME install_consumer COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run.sh
  ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR} "${_ctrial_install_rpath}")
# Sanitizer flags are not part of the installed package's link line.
set_tests_properties(install_consumer PROPERTIES LABELS noasan)
