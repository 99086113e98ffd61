# PyTorch files (ckpt.h, part 1): ct_pth_save / ct_pth_load round trips and
# damaged files in C; both directions against torch.save / torch.load
# (weights_only=True) through pth_tool, which links module ckpt (the engine
# of pth run with libtorch's tensors) to reach the internal switches (zip64
# everywhere, loading from memory, CRC, mapped loads).
ct_c_test(pth_roundtrip ${CMAKE_CURRENT_LIST_DIR}/test_pth_roundtrip.c ${CMAKE_CURRENT_LIST_DIR}/specimen.c)
target_link_libraries(pth_roundtrip PRIVATE ZLIB::ZLIB)
ct_c_program(pth_tool ${CMAKE_CURRENT_LIST_DIR}/pth_tool.c ${CMAKE_CURRENT_LIST_DIR}/specimen.c MODULES ckpt)
add_test(NAME pth_crc COMMAND pth_tool crc-selftest)
add_test(NAME pth_mapped COMMAND pth_tool mapped-selftest ${CMAKE_CURRENT_BINARY_DIR})
ct_py_test(pth_torch ${CMAKE_CURRENT_LIST_DIR}/test_pth_torch.py $<TARGET_FILE:pth_tool>)
