# src/base/mt19937.c: the block generator against the word-at-a-time one,
# and the bernoulli test of dropout masks against its scalar definition
# (pure C: links base only). Python's own masks: tests/ops' dropout cases.
ct_c_test(random_mt19937 ${CMAKE_CURRENT_LIST_DIR}/test_mt19937.c MODULES base)
