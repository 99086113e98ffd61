# Mixed precision (amp.h): autocast regions and GradScaler's rules through the
# C API, and parity with torch.autocast + torch.amp.GradScaler (losses,
# scales, skipped steps, weights, state dicts: bit for bit).
set(_amp ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(amp_api ${_amp}/test_amp.c)
target_link_libraries(amp_api PRIVATE Threads::Threads)
ct_c_program(amp_parity ${_amp}/amp_parity.c)
ct_py_test(amp_parity_torch ${_amp}/test_amp_parity.py $<TARGET_FILE:amp_parity>)
set_property(TEST amp_api APPEND PROPERTY LABELS cuda)
