# libFuzzer runs of the IDX and CSV parsers and of the PyTorch file format
# (fuzz/run.sh): fuzz/CMakeLists.txt, a CMake project of its own, builds the
# pure-C modules formats and pth with clang, libFuzzer's coverage and ASan +
# UBSan under BUILD_DIR/fuzz, with no libtorch and no libctrial. Being
# sanitized already, it is skipped by the suite's sanitizer pass (noasan),
# which would only repeat it.
add_test(NAME fuzz_datasets COMMAND bash ${PROJECT_SOURCE_DIR}/fuzz/run.sh ${PROJECT_BINARY_DIR}
         ${PROJECT_SOURCE_DIR} 10)
set_tests_properties(fuzz_datasets PROPERTIES LABELS noasan TIMEOUT 300)
