# Datasets (data.h): TensorDataset, IDX/MNIST, records, CSV. The parity test
# writes files with numpy and compares what ctrial reads bit for bit; the C
# tests cover the generic dataset, its errors and every bad input.
set(_ds ${CMAKE_CURRENT_LIST_DIR})
ct_c_program(datasets_dump ${_ds}/datasets_dump.c)
ct_py_test(datasets_parity ${_ds}/test_datasets_parity.py $<TARGET_FILE:datasets_dump>)
ct_c_test(datasets_api ${_ds}/test_dataset_api.c)
ct_c_test(datasets_errors ${_ds}/test_dataset_errors.c)
target_link_libraries(datasets_errors PRIVATE ZLIB::ZLIB) # writes .gz test files
# The dataset tools: random_split, Subset and ConcatDataset against torch,
# mean/std against numpy (tools_dump + test_dataset_tools.py); their errors,
# ownership and the concatenation's merged batches (test_dataset_tools.c).
ct_c_program(datasets_tools_dump ${_ds}/tools_dump.c)
ct_py_test(datasets_tools_parity ${_ds}/test_dataset_tools.py $<TARGET_FILE:datasets_tools_dump>)
ct_c_test(datasets_tools ${_ds}/test_dataset_tools.c)
