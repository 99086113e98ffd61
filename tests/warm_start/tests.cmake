# Warm starts (ckpt.md, "Warm start"): a new trial takes the models,
# optimizers and LR schedulers of a checkpoint that Determined's
# PyTorchTrial._save wrote (built by the script with torch: numpy's and
# Python's RNG states, trial_state.pkl, load_data.json, metadata.json; also
# Determined's older layouts and locations) or that ctrial wrote, and
# nothing of its position, RNG, callbacks or trial state.
#
# warm_start: cti_context_warm_start itself (warm_start_trial links module
# fit's internals): weights, optimizer, scheduler and scaler state equal
# Python's bit for bit, the console line, every refusal.
# warm_start_fit: the same through ct_fit with ct_fit_opts.warm_start: the
# run starts at batch 0 from the loaded state.
set(_ws ${CMAKE_CURRENT_LIST_DIR})
ct_c_program(warm_start_trial ${_ws}/warm_start_trial.c MODULES fit)
ct_py_test(warm_start ${_ws}/test_warm_start.py $<TARGET_FILE:warm_start_trial> direct)
ct_py_test(warm_start_fit ${_ws}/test_warm_start.py $<TARGET_FILE:warm_start_trial> fit)
