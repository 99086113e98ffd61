# Images (vision.h): decoding JPEG and PNG, and ImageFolder. The parity
# tests write images and folder trees with Pillow and compare what ctrial
# reads (decode_dump, folder_dump) with torchvision's decode_image and
# ImageFolder, pixel for pixel; the C tests encode their images with libpng
# and libjpeg (image_write.c): every truncation and corruption of a file,
# the errors and limits of the decoder, and an image folder read by the
# threaded loader.
set(_vi ${CMAKE_CURRENT_LIST_DIR})
ct_c_program(vision_decode_dump ${_vi}/decode_dump.c)
ct_py_test(vision_decode_parity ${_vi}/test_decode_parity.py $<TARGET_FILE:vision_decode_dump>)
set_tests_properties(vision_decode_parity PROPERTIES TIMEOUT 300)
ct_c_test(vision_decode_errors ${_vi}/test_decode_errors.c ${_vi}/image_write.c)
target_link_libraries(vision_decode_errors PRIVATE PNG::PNG JPEG::JPEG ZLIB::ZLIB)
# Decoding with the first crop cut by the decoder (ct_image_decode_transform,
# and ct_dataset_transform of a folder) against decoding whole, then
# transforming: every JPEG sampling, boxes everywhere, damaged files.
ct_c_test(vision_decode_box ${_vi}/test_decode_box.c ${_vi}/image_write.c)
target_link_libraries(vision_decode_box PRIVATE PNG::PNG JPEG::JPEG ZLIB::ZLIB)
ct_c_program(vision_folder_dump ${_vi}/folder_dump.c)
ct_py_test(vision_image_folder ${_vi}/test_image_folder.py $<TARGET_FILE:vision_folder_dump>)
ct_c_test(vision_folder_loader ${_vi}/test_image_folder.c ${_vi}/image_write.c)
target_link_libraries(vision_folder_loader PRIVATE PNG::PNG JPEG::JPEG)
# Segmentation folders (images and masks paired by name) and transforms
# applied to an image and its mask at once: seg_dump's samples and draws
# (ct_dataset_get_drawn, a two-worker loader) against a Python dataset of
# decode_image and np.array(PIL.Image.open(mask)) under v2 on (Image, Mask),
# bit for bit; the refusals, each naming the file or the shapes.
ct_c_program(vision_seg_dump ${_vi}/seg_dump.c)
ct_py_test(vision_segmentation ${_vi}/test_segmentation.py $<TARGET_FILE:vision_seg_dump>)
ct_c_test(vision_segmentation_errors ${_vi}/test_segmentation_errors.c ${_vi}/image_write.c)
target_link_libraries(vision_segmentation_errors PRIVATE PNG::PNG JPEG::JPEG ZLIB::ZLIB)
