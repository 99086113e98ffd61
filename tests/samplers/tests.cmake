# Samplers against numpy's RandomState and Determined's Python chain.
ct_c_program(sampler_dump ${CMAKE_CURRENT_LIST_DIR}/sampler_dump.c)
ct_py_test(sampler_parity ${CMAKE_CURRENT_LIST_DIR}/sampler_parity.py $<TARGET_FILE:sampler_dump>)
