/* src/vision/folder.h — what ct_dataset_transform asks of an image folder.
 * Internal to ctrial. */
#ifndef CTRIAL_VISION_FOLDER_H
#define CTRIAL_VISION_FOLDER_H

#include <stdbool.h>

#include "ctrial/vision.h"

/* Whether d is an image folder itself (not a subset or a transform of it). */
bool cti_image_folder_is(const ct_dataset *d);

/* The image folder d with t applied to each image as it is decoded
 * (ct_image_read_transform, seeded as ct_dataset_map seeds a record): the
 * samples of ct_dataset_map with t on field 0, pixel for pixel, decoding
 * only the box of a first crop. Takes t (also on failure); holds its own
 * reference to d. New dataset or NULL + error. */
ct_dataset *cti_image_folder_transformed(ct_dataset *d, ct_transform *t);

#endif
