# CIFAR-10 and CIFAR-100 (vision.h: ct_dataset_cifar). The parity test
# writes small synthetic archives with numpy in both versions, the binary
# one ctrial reads and the Python one torchvision reads, and compares every
# sample ctrial gives (get, get_batch, a shuffled 2-worker loader) with
# torchvision.datasets.CIFAR10 / CIFAR100's; the C test covers every bad
# input: a missing file, a partial record, an empty file, labels out of
# range, a bad kind.
set(_cf ${CMAKE_CURRENT_LIST_DIR})
ct_c_program(cifar_dump ${_cf}/cifar_dump.c)
ct_py_test(cifar_parity ${_cf}/test_cifar_parity.py $<TARGET_FILE:cifar_dump>)
ct_c_test(cifar_errors ${_cf}/test_cifar_errors.c)
