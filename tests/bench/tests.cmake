# bench/compare's floor, the hand-written libtorch loop, keeps training what
# plain PyTorch trains: the same first losses on all five workloads.
ct_py_test(bench_libtorch_loop_matches_pytorch ${CMAKE_CURRENT_LIST_DIR}/check_libtorch_loop.py
           $<TARGET_FILE:libtorch_loop>)
set_tests_properties(bench_libtorch_loop_matches_pytorch PROPERTIES TIMEOUT 300)
