# The experiment config, ct_main's flags, periods and exit codes: module
# config, which is pure C (config_load links it and base, no libtorch).
ct_c_test(config_load ${CMAKE_CURRENT_LIST_DIR}/test_config.c MODULES config)
# 100,000 hyperparameters load in a fraction of a second (ASan: a few);
# quadratic again, they would take minutes.
set_tests_properties(config_load PROPERTIES TIMEOUT 60)

# ct_main end to end against a ct_fit defined in the test, to see what
# ct_main hands over: the program links module config for the parsing layer
# and libctrial for ct_main, and exports its symbols so that libctrial's
# call to ct_fit reaches the program's (as LD_PRELOAD would).
ct_c_test(config_flags ${CMAKE_CURRENT_LIST_DIR}/test_flags.c MODULES config)
target_link_libraries(config_flags PRIVATE ctrial)
set_target_properties(config_flags PROPERTIES ENABLE_EXPORTS ON)

# YAML experiment configs (src/config/yaml.c, libyaml): Determined's own
# config layout in YAML equals its JSON form; the YAML 1.2 core schema's
# scalars; every refusal with its line and column.
ct_c_test(config_yaml ${CMAKE_CURRENT_LIST_DIR}/test_yaml.c MODULES config)

# The searcher's part of the config: Determined's own mnist_pytorch configs
# (before and after 0.38) load unchanged into the searcher's options and
# space; --hparam fixes a sampled value; single draws at once; the keys only
# a cluster uses are collected for ct_main's one warning.
ct_c_test(config_search ${CMAKE_CURRENT_LIST_DIR}/test_config_search.c MODULES config)
