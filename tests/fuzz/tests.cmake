# The libFuzzer runs (fuzz/run.sh): fuzz/CMakeLists.txt, a CMake project of
# its own, builds ctrial's C modules with clang, libFuzzer's coverage and
# ASan + UBSan under BUILD_DIR/fuzz. The pure-C targets (IDX, CSV, gzip,
# the experiment config and flags, PyTorch's file format) link no libtorch;
# the others (value_wire, the records reader, llm.c's token shards, JPEG
# and PNG decoding, resuming from a checkpoint) link this build's shim as it is, uninstrumented, from
# the archive below, with libtorch. Being sanitized already, it is left out
# of the sanitizer build, which would only repeat it (and whose shim is
# gcc's ASan's).
if(CTRIAL_SANITIZE)
  return()
endif()
add_library(ctrial_shim_archive STATIC $<TARGET_OBJECTS:ctrial_shim>)
set_target_properties(ctrial_shim_archive PROPERTIES OUTPUT_NAME ctrial_shim
                      ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fuzz-shim)
add_test(NAME fuzz_inputs COMMAND bash ${PROJECT_SOURCE_DIR}/fuzz/run.sh ${PROJECT_BINARY_DIR}
         ${PROJECT_SOURCE_DIR} 6)
set_tests_properties(fuzz_inputs PROPERTIES LABELS noasan TIMEOUT 400)
