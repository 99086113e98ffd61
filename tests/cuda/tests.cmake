# Training on a GPU end to end (ckpt_trial with --device cuda): CPU parity,
# exact resume with the GPU's RNG state, AMP, memory reporting. Skipped
# (exit 77, shown by ctest) where no GPU is present.
ct_py_test(cuda_fit ${CMAKE_CURRENT_LIST_DIR}/test_cuda_fit.py $<TARGET_FILE:ckpt_trial>)
set_tests_properties(cuda_fit PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
# ResNet-18 on a GPU with --deterministic: two runs bit-identical, and the
# first steps equal torchvision's in PyTorch's deterministic mode. Skipped
# without a GPU.
ct_py_test(cuda_resnet_deterministic ${CMAKE_CURRENT_LIST_DIR}/test_cuda_resnet.py $<TARGET_FILE:resnet>)
set_tests_properties(cuda_resnet_deterministic PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
set_property(TEST cuda_fit cuda_resnet_deterministic APPEND PROPERTY LABELS cuda)
