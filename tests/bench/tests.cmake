# bench/compare's floor, the hand-written libtorch loop, keeps training what
# plain PyTorch trains: the same first losses on all five workloads.
ct_py_test(bench_libtorch_loop_matches_pytorch ${CMAKE_CURRENT_LIST_DIR}/check_libtorch_loop.py
           $<TARGET_FILE:libtorch_loop>)
# Not under the sanitizers: the program is the benchmark's libtorch floor,
# not ctrial's code, and its ASan run took 45-85 s of the suite.
set_tests_properties(bench_libtorch_loop_matches_pytorch PROPERTIES TIMEOUT 300 LABELS noasan)
