# The profiler (profiler.h): the traces a schedule writes, their contents,
# stop mid-window, repeat 0, the errors; and parity with torch.profiler's
# schedule and step ranges, schedule by schedule.
set(_profiler ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(profiler_api ${_profiler}/test_profiler.c)
target_link_libraries(profiler_api PRIVATE Threads::Threads)
ct_c_program(profiler_parity ${_profiler}/profiler_parity.c)
ct_py_test(profiler_parity_torch ${_profiler}/test_profiler_parity.py $<TARGET_FILE:profiler_parity>)
