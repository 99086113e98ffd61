# Checkpoints (ckpt.h): the trial in ckpt_trial.c run through ct_main by
# Python drivers — exact resume, preemption, kill -9, refusals, retention,
# loading for use, ctrial-ckpt — and interop with Python's torch.
set(_ck ${CMAKE_CURRENT_LIST_DIR})
ct_c_program(ckpt_trial ${_ck}/ckpt_trial.c)
ct_py_test(ckpt_resume ${_ck}/test_resume.py $<TARGET_FILE:ckpt_trial> $<TARGET_FILE:ctrial-ckpt>)
set_tests_properties(ckpt_resume PROPERTIES TIMEOUT 600)
# Interop with Python's torch: Python continues a ctrial checkpoint (losses,
# weights, Adam and StepLR state), ctrial warm-starts from a Python
# state_dict, predict matches, the layout torch.load shows.
ct_py_test(ckpt_interop ${_ck}/test_interop.py $<TARGET_FILE:ckpt_trial>)
ct_c_test(ckpt_api ${_ck}/test_ckpt_api.c)
# A background checkpoint's snapshot (src/fit/snapshot.c): equal to the
# state, in memory of its own, copied by two threads past 4 MB.
ct_c_test(ckpt_snapshot ${_ck}/test_snapshot.c MODULES fit)
# ctrial-ckpt list on a run's output folder: every checkpoint in training
# order, the searcher metric, best and latest, damaged and uncommitted ones.
ct_py_test(ckpt_tool ${_ck}/test_ckpt_tool.py $<TARGET_FILE:ckpt_trial> $<TARGET_FILE:ctrial-ckpt>)
# Checkpoints in commit order, never by the clock: a run whose wall clock
# steps back (clock_shift, an LD_PRELOAD library moving CLOCK_REALTIME)
# still resumes from and keeps the checkpoint that trained furthest.
add_library(clock_shift SHARED ${_ck}/clock_shift.c)
target_link_libraries(clock_shift PRIVATE ${CMAKE_DL_LIBS})
ct_py_test(ckpt_clock ${_ck}/test_ckpt_clock.py $<TARGET_FILE:ckpt_trial> $<TARGET_FILE:ctrial-ckpt>
           $<TARGET_FILE:clock_shift>)
# Damaged checkpoints (metadata.json missing, empty, garbled, a key missing
# or of the wrong type, a CRC-32 that does not match; state_dict.pth
# damaged): --resume latest refuses them with exit 3, naming them and the
# latest intact one, never starts over or falls back silently.
ct_py_test(ckpt_damaged ${_ck}/test_ckpt_damaged.py $<TARGET_FILE:ckpt_trial> $<TARGET_FILE:ctrial-ckpt>)
# A FIFO or a device (a link to /dev/zero) as state_dict.pth, metadata.json,
# a .pth or a data file (IDX, CSV, records, .pth: read_data) is refused as
# "not a regular file" instead of blocking or reading forever.
ct_c_program(read_data ${_ck}/read_data.c)
ct_py_test(ckpt_not_regular ${_ck}/test_ckpt_not_regular.py $<TARGET_FILE:ckpt_trial> $<TARGET_FILE:ctrial-ckpt>
           $<TARGET_FILE:read_data>)
# Tampered and absurd checkpoint state (issue 17): each field of
# metadata.json's trial_state, the optimizer's and the aggregation window's
# state in state_dict.pth, edited in a copy of a real checkpoint, is refused
# with exit code 3 naming the field, within a timeout (a hang fails); and
# config values that overflowed or exited 1 are config errors (exit 2).
ct_py_test(ckpt_tamper ${_ck}/test_tamper.py $<TARGET_FILE:ckpt_trial>)
set_tests_properties(ckpt_tamper PROPERTIES TIMEOUT 900)
