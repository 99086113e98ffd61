# The examples, run as a user runs them: through ct_main with their JSON
# configs, from the source tree, writing into the build tree; the checks read
# metrics.jsonl (check_example.py says what each check asserts).
if(NOT CTRIAL_BUILD_EXAMPLES)
  return() # -DCTRIAL_BUILD_EXAMPLES=OFF: there are no example programs to run
endif()
set(_check ${CMAKE_CURRENT_LIST_DIR}/check_example.py)

# OneVar: every reported number is the fixture's; the last validation after
# 100 batches is 0.998^(2*100).
ct_py_test(examples_onevar_exact ${_check} $<TARGET_FILE:onevar> examples/onevar/onevar.json onevar)

# The README's promise: the CNN with its default config reaches 95% on the
# bundled digits in under a minute (about 15 s on one thread of a busy 2-core
# machine; the timeout leaves room for a loaded CI box).
ct_py_test(examples_mnist_cnn_default_95pct_under_a_minute ${_check}
           $<TARGET_FILE:mnist> examples/mnist/mnist_cnn.json accuracy 0.95)
set_tests_properties(examples_mnist_cnn_default_95pct_under_a_minute PROPERTIES TIMEOUT 180)

ct_py_test(examples_mnist_mlp_90pct ${_check} $<TARGET_FILE:mnist> examples/mnist/mnist_mlp.json accuracy 0.90)

# adaptive.yaml, the README's search: 16 trials of adaptive ASHA, each closed
# once, the best above 90% with its checkpoint kept (0.926 from seed 0).
ct_py_test(examples_mnist_adaptive_search ${_check} $<TARGET_FILE:mnist> examples/mnist/adaptive.yaml search 16 0.90)

# The GAN trains both models to the end with finite losses.
ct_py_test(examples_gan_finite ${_check} $<TARGET_FILE:gan> examples/gan/gan.json finite d_loss,g_loss)

# Bad configs stop before training with exit code 2, naming what is wrong:
# an unknown key (with its path) and a hyperparameter value the trial refuses.
ct_py_test(examples_bad_config_unknown_key ${_check} $<TARGET_FILE:onevar>
           ${CMAKE_CURRENT_LIST_DIR}/bad_config.json config-error searcher.max_lenght)
ct_py_test(examples_bad_hparam_value ${_check} $<TARGET_FILE:mnist> examples/mnist/mnist_cnn.json
           config-error model -- --hparam model=resnet)

# charlm (check_charlm.py): 40 batches with a falling loss, then `charlm
# sample` from the checkpoint; and its first 30 batches equal to the same
# model in plain PyTorch (bench/gpu/torch_eager.py).
ct_py_test(examples_charlm_trains_and_samples ${CMAKE_CURRENT_LIST_DIR}/check_charlm.py
           $<TARGET_FILE:charlm> train-and-sample)
ct_py_test(examples_charlm_matches_pytorch ${CMAKE_CURRENT_LIST_DIR}/check_charlm.py
           $<TARGET_FILE:charlm> matches-pytorch)
set_tests_properties(examples_charlm_trains_and_samples examples_charlm_matches_pytorch
                     PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77)

# charlm's LSTM model (charlm_lstm.json): the same losses as PyTorch's
# RNNModel, its checkpoint loads into it (strict) with the same validation
# loss, and it samples.
ct_py_test(examples_charlm_lstm_matches_pytorch ${CMAKE_CURRENT_LIST_DIR}/check_charlm.py $<TARGET_FILE:charlm> lstm)
# resnet (check_resnet.py): the same losses as torchvision's resnet18, whose
# load_state_dict(strict=True) takes the checkpoint and gives ctrial's
# validation numbers.
ct_py_test(examples_resnet_matches_torchvision ${CMAKE_CURRENT_LIST_DIR}/check_resnet.py $<TARGET_FILE:resnet>)
# resnet on image folders (check_resnet_folder.py): the digits written as PNG
# and JPEG folders, ImageFolder + v2 augmentation per record: the same
# losses as torchvision, and the checkpoint's validation.
ct_py_test(examples_resnet_folder_matches_torchvision ${CMAKE_CURRENT_LIST_DIR}/check_resnet_folder.py
           $<TARGET_FILE:resnet>)
set_tests_properties(examples_charlm_lstm_matches_pytorch examples_resnet_matches_torchvision
                     examples_resnet_folder_matches_torchvision
                     PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# ResNet-18 steps under ASan take minutes and check nothing the release run
# does not: the decoders, the folder and the loader's threads are under the
# sanitizers in tests/vision and tests/transforms.
set_tests_properties(examples_resnet_folder_matches_torchvision PROPERTIES LABELS noasan)

# Models exported from Python (check_exported.py): torchvision's resnet18
# and mobilenet_v3_small and a ViT through examples/exported, a GPT and an
# LSTM through charlm's "exported" model: 20 batches equal to PyTorch's
# training of the same modules, the validation equal to their eval(), the
# checkpoint loading into them (strict), a resume bit-identical, and 2
# ranks equal to data parallelism computed in PyTorch (and to 1 rank where
# the model has neither BatchNorm nor dropout).
foreach(_m resnet18 mobilenet_v3_small vit gpt lstm)
  ct_py_test(examples_exported_${_m} ${CMAKE_CURRENT_LIST_DIR}/check_exported.py
             $<TARGET_FILE:exported> $<TARGET_FILE:charlm> ${_m})
  set_tests_properties(examples_exported_${_m} PROPERTIES TIMEOUT 900 LABELS noasan)
endforeach()
