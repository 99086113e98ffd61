# The loop's rules on Determined's OneVar fixture, with exact numbers.
ct_c_test(loop_onevar_rules ${CMAKE_CURRENT_LIST_DIR}/onevar_rules.c)
# Custom reducers through ct_fit (for_training / for_validation, a class
# reducer, a named reducer returning a dict), read back from metrics.jsonl;
# one process and 2 ranks.
ct_c_test(loop_reducer_workloads ${CMAKE_CURRENT_LIST_DIR}/reducer_workloads.c)
ct_mpi_test(loop_reducer_workloads_np2 2 loop_reducer_workloads)
# Determined's semantics that ctrial once differed from (issue 15), one process.
ct_c_test(loop_semantics ${CMAKE_CURRENT_LIST_DIR}/semantics.c)
# The console (issue 16): the start-up summary, plain lines off a terminal,
# the checkpoints' last line, the ETA against the real remaining time, the
# live line on a pseudo-terminal; console_trial.c is a user's program with
# flags of its own (ct_main_ex).
ct_c_program(console_trial ${CMAKE_CURRENT_LIST_DIR}/console_trial.c)
# The share of CPUs a rank's default thread count starts from, for the
# layouts launchers make (pure C: links base only).
ct_c_test(loop_cpu_share ${CMAKE_CURRENT_LIST_DIR}/cpu_share.c MODULES base)
ct_py_test(loop_console ${CMAKE_CURRENT_LIST_DIR}/test_console.py $<TARGET_FILE:console_trial>)
# ct_fit's options past their limits (issue 17): no or an absurd global
# batch size, a seed beyond Determined's range, max_length in epochs past
# 2^63 batches are CT_ECONFIG before anything trains; a batch size near
# INT64_MAX is a named error in the loader and the samplers.
ct_c_test(loop_fit_limits ${CMAKE_CURRENT_LIST_DIR}/fit_limits.c)
# The fit module's objects on their own, with a fake position and options:
# the reporter (metrics.jsonl, timings, a resume's cut, the console) and the
# checkpointer (the policy's best, writing and retention, resume, an earlier
# run's results).
ct_c_test(loop_fit_objects ${CMAKE_CURRENT_LIST_DIR}/fit_objects.c MODULES fit)
# A closure in ct_ctx_step_optimizer_with (optimizer.step(closure), what
# LBFGS needs) through ct_fit: its refusals (a clip callback, a GradScaler,
# gradient aggregation; 2 ranks under mpirun), and the per-batch losses,
# closure calls and final weights against torch.optim's LBFGS and SGD.
ct_c_test(loop_closure ${CMAKE_CURRENT_LIST_DIR}/closure.c)
ct_mpi_test(loop_closure_np2 2 loop_closure)
ct_py_test(loop_closure_torch ${CMAKE_CURRENT_LIST_DIR}/test_closure.py $<TARGET_FILE:loop_closure>)
# error.h's rule: an error the program set and handled never reads as the
# failure of the next call into its code (ctrial clears it first): every
# trial function and callback finds nothing pending, a state_dict's NULL
# is "nothing" and an evaluation_reducer's "AVG"; real failures still fail.
ct_c_test(loop_stale_errors ${CMAKE_CURRENT_LIST_DIR}/stale_errors.c)
# Determined's test_max_batches_leq_steps_completed: a checkpoint at or past
# this run's max_length trains and validates nothing and ends without error.
ct_c_test(loop_past_end ${CMAKE_CURRENT_LIST_DIR}/past_end.c)
# Step for step with Determined's own loop (its Trainer, local mode): a
# trial with dropout gives the same losses, the DataLoader iterators'
# _base_seed draws included, with evaluate_batch and evaluate_full_dataset.
# Skipped (77) without the determined package.
ct_c_program(determined_order ${CMAKE_CURRENT_LIST_DIR}/determined_order.c)
ct_py_test(loop_determined_order ${CMAKE_CURRENT_LIST_DIR}/test_determined_order.py $<TARGET_FILE:determined_order>)
set_tests_properties(loop_determined_order PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77)
# --evaluate CHECKPOINT (ct_evaluate) and named validation loaders
# (ct_ctx_add_validation_loader): metrics against PyTorch's on the
# checkpoint's weights, evaluation.jsonl, nothing else changed.
ct_py_test(loop_evaluate ${CMAKE_CURRENT_LIST_DIR}/test_evaluate.py $<TARGET_FILE:determined_order>)
set_tests_properties(loop_evaluate PROPERTIES TIMEOUT 180)
