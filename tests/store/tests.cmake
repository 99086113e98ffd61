# Objects in S3 (src/store/s3.c) against moto's server on 127.0.0.1 with
# signatures checked, and a proxy that refuses, stalls and cuts requests:
# objects, multipart, pages, credentials, retries. Skipped (77) without
# moto[server].
ct_c_program(s3_tool ${CMAKE_CURRENT_LIST_DIR}/s3_tool.c MODULES store)
ct_py_test(store_s3 ${CMAKE_CURRENT_LIST_DIR}/test_s3.py $<TARGET_FILE:s3_tool>)
set_tests_properties(store_s3 PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# Checkpoints in S3 end to end (ckpt_trial through ct_main): the store
# mirrors the disk, a new machine resumes from it, kill -9 during an upload
# leaves no checkpoint, a refusing store fails the run naming it, earlier
# checkpoints are guarded, warm starts from s3://, gcs refused; ctrial-ckpt
# list/latest/best/verify on s3:// say what they say of the same checkpoints
# on disk, an upload cut off not listed.
ct_py_test(store_s3_checkpoints ${CMAKE_CURRENT_LIST_DIR}/test_s3_ckpt.py $<TARGET_FILE:ckpt_trial>
  $<TARGET_FILE:ctrial-ckpt>)
set_tests_properties(store_s3_checkpoints PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
