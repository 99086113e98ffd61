# The HParams plugin's summaries (src/formats/tb_hparams.c), internal to the
# library: the programs link module formats (pure C, no libtorch).
# test_hp_read.py reads a search written by hp_write with the tensorboard
# package's readers and its HParams plugin, and compares the summaries with
# torch.utils.tensorboard's hparams().
set(_hp ${CMAKE_CURRENT_LIST_DIR})
ct_c_test(tb_hparams_unit ${_hp}/test_tb_hparams.c MODULES formats)
ct_c_program(tb_hparams_write ${_hp}/hp_write.c MODULES formats)
ct_py_test(tb_hparams_read ${_hp}/test_hp_read.py $<TARGET_FILE:tb_hparams_write>)
