# torchvision's transforms (vision.h) and the per-record seeds they draw
# from (data.h: ct_dataset_map, ct_record_seed). The parity test applies
# each transform, alone and in the pipelines people use, to images of
# several sizes, channel counts and dtypes under many seeds, and compares
# with torchvision.transforms.v2 after torch.manual_seed(seed): the same
# pixels and the same draws.
set(_tf ${CMAKE_CURRENT_LIST_DIR})
ct_c_program(tf_dump ${_tf}/tf_dump.c)
ct_py_test(transforms_parity ${_tf}/test_transforms_parity.py $<TARGET_FILE:tf_dump>)
# The per-record seeds through the loader: a Python twin reproduces every
# augmented record from ct_record_seed's documented formula; the batches
# are the same on 0 and 2 workers and after a resume.
ct_c_program(map_dump ${_tf}/map_dump.c)
ct_py_test(transforms_per_record ${_tf}/test_map.py $<TARGET_FILE:map_dump>)
# Refusals: constructor arguments, a random transform without a generator,
# messages kept from failed constructors, a failing map function through
# get and the loader.
ct_c_test(transforms_errors ${_tf}/test_transform_errors.c)
