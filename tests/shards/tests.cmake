# Token shards (data.h: ct_dataset_shards, llm.c's .bin files). The parity
# test writes shards with numpy as llm.c's write_datafile does and compares
# every window ctrial reads with numpy's slicing; the C test covers every
# bad input, the lazy vocabulary check, ct_shard_write and sharding across
# ranks through the loader; the charlm test trains from shards written by
# `charlm shard` and from the text, and compares the per-batch losses.
set(_sh ${CMAKE_CURRENT_LIST_DIR})
ct_c_program(shards_dump ${_sh}/shards_dump.c)
ct_py_test(shards_parity ${_sh}/test_shards_parity.py $<TARGET_FILE:shards_dump>)
ct_c_test(shards_errors ${_sh}/test_shards.c)
if(CTRIAL_BUILD_EXAMPLES)
  ct_py_test(examples_charlm_shards_match_text ${_sh}/check_charlm_shards.py $<TARGET_FILE:charlm>)
  set_tests_properties(examples_charlm_shards_match_text PROPERTIES TIMEOUT 180)
endif()
