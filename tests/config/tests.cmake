# The experiment config, ct_main's flags, periods and exit codes. The parsing
# layer is internal (hidden in libctrial), so its sources are compiled into
# the tests; test_flags defines ct_fit itself to see what ct_main hands over
# (the program's definition wins over libctrial's).
ct_c_test(config_load ${CMAKE_CURRENT_LIST_DIR}/test_config.c
  ${PROJECT_SOURCE_DIR}/src/config.c ${PROJECT_SOURCE_DIR}/src/period.c)
target_include_directories(config_load PRIVATE ${PROJECT_SOURCE_DIR}/src)

ct_c_test(config_flags ${CMAKE_CURRENT_LIST_DIR}/test_flags.c
  ${PROJECT_SOURCE_DIR}/src/config.c ${PROJECT_SOURCE_DIR}/src/period.c
  ${PROJECT_SOURCE_DIR}/src/main.c)
target_include_directories(config_flags PRIVATE ${PROJECT_SOURCE_DIR}/src)
