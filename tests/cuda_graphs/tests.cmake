# CUDA graphs (ct_fit_opts.cuda_graphs, cuda.h's ct_cuda_graph_*): refusals,
# argument errors and error wording everywhere; capture, replay, re-capture
# and parity with eager training where a GPU is present (a SKIP line
# otherwise). The config/flag test links module config, as tests/config does.
ct_c_test(cuda_graphs ${CMAKE_CURRENT_LIST_DIR}/test_cuda_graphs.c)
set_tests_properties(cuda_graphs PROPERTIES TIMEOUT 300)
ct_c_test(cuda_graphs_config ${CMAKE_CURRENT_LIST_DIR}/test_cuda_graphs_config.c MODULES config)
set_property(TEST cuda_graphs APPEND PROPERTY LABELS cuda)
