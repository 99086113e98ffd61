# The layering rule (docs/design.md, "Layers"): tools/check_layers.py fails
# when an #include or a call crosses it (the modules' objects are listed for
# it below), when the design document's table of modules drifts from the
# CMake lists, or when a pure-C module calls into the shim.
set(_layers_objects "")
foreach(m IN LISTS CTRIAL_MODULES)
  string(APPEND _layers_objects "${m}: $<JOIN:$<TARGET_OBJECTS:ctrial_${m}>, >\n")
endforeach()
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/layers_objects.txt CONTENT "${_layers_objects}")
ct_py_test(layers ${PROJECT_SOURCE_DIR}/tools/check_layers.py ${PROJECT_SOURCE_DIR}
           --objects ${PROJECT_BINARY_DIR}/layers_objects.txt)
# Every relative link and anchor in README.md and docs/ resolves.
ct_py_test(doc_links ${PROJECT_SOURCE_DIR}/tools/check_links.py ${PROJECT_SOURCE_DIR})
