# libFuzzer runs of the IDX and CSV parsers (fuzz/): clang builds them with
# ASan + UBSan, so the sanitizer pass of the suite skips this test (noasan).
add_test(NAME fuzz_datasets COMMAND bash ${PROJECT_SOURCE_DIR}/fuzz/run.sh ${PROJECT_BINARY_DIR}
         ${PROJECT_SOURCE_DIR} 10)
set_tests_properties(fuzz_datasets PROPERTIES LABELS noasan TIMEOUT 300)
