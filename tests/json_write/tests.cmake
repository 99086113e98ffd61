# src/base/json_write.c: JSON text whose reals are Python's repr(float).
# Against jansson's json_dumps (the same text but for the reals, read back
# bit for bit, the same failures) and against Python (repr of ~50 000
# doubles, documents equal to json.dumps). Pure C: links base only.
ct_c_test(json_write_jansson ${CMAKE_CURRENT_LIST_DIR}/test_json_write.c MODULES base)
ct_c_program(json_repr_dump ${CMAKE_CURRENT_LIST_DIR}/repr_dump.c MODULES base)
ct_py_test(json_write_python ${CMAKE_CURRENT_LIST_DIR}/test_repr.py $<TARGET_FILE:json_repr_dump>)
