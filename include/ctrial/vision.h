/*
 * ctrial/vision.h — images: decoding, image folders, segmentation folders,
 * CIFAR, and torchvision's transforms.
 *
 * What torchvision's ImageFolder pipeline is in Python,
 *
 *     train = ImageFolder("data/train", transform=v2.Compose([
 *         v2.RandomResizedCrop(224), v2.RandomHorizontalFlip(),
 *         ToTensor(), v2.Normalize(mean, std)]))   # ToTensor: x.float().div(255)
 *
 * is, in C:
 *
 *     ct_dataset *folder = ct_dataset_image_folder("data/train", NULL);
 *     ct_transform *steps[] = {
 *         ct_tf_random_resized_crop(224, 224, 0.08, 1.0, 3.0 / 4, 4.0 / 3),
 *         ct_tf_random_horizontal_flip(0.5),
 *         ct_tf_to_tensor(),
 *         ct_tf_normalize(3, mean, std),
 *     };
 *     ct_dataset *train = ct_dataset_transform(folder, 0, ct_tf_compose(4, steps));
 *     ct_dataset_free(folder);               // train holds its own reference
 *     // sample i: (image float32 [3, 224, 224], label int64 0-dim)
 *
 * A segmentation model's images and masks, transformed together as v2
 * transforms (image, tv_tensors.Mask(mask)) (the mask: one draw, NEAREST,
 * untouched by colour steps),
 *
 *     ct_dataset *pairs = ct_dataset_segmentation_folder("pets/images", "pets/annotations/trimaps", NULL);
 *     ct_transform *seg[] = {
 *         ct_tf_random_resized_crop(256, 256, 0.5, 1.0, 3.0 / 4, 4.0 / 3),
 *         ct_tf_random_horizontal_flip(0.5),
 *         ct_tf_color_jitter(0.2, 0.2, 0.2, 0),
 *         ct_tf_to_tensor(),
 *         ct_tf_normalize(3, mean, std),
 *     };
 *     ct_dataset *seg_train = ct_dataset_transform_pair(pairs, 0, 1, ct_tf_compose(5, seg));
 *     ct_dataset_free(pairs);
 *     // sample i: (image float32 [3, 256, 256], mask int64 [256, 256])
 *
 * Intended usage:
 *   1. Decode with ct_image_read / ct_image_decode, or let a dataset do it:
 *      ct_dataset_image_folder (one folder per class), ct_dataset_cifar,
 *      ct_dataset_segmentation_folder (images and masks paired by name;
 *      masks are int64 class maps [H, W], ct_image_read_mask).
 *      Images are uint8 (uint16 for 16-bit PNGs, but for a folder's in
 *      any mode but UNCHANGED) tensors [C, H, W], as
 *      torchvision.io.decode_image returns them.
 *   2. Build the transforms (ct_tf_*), chain them with ct_tf_compose, and
 *      attach them with ct_dataset_transform (ct_dataset_transform_pair
 *      for an image and its mask). They run per record on the loader's
 *      worker threads (data.h's ct_dataset_map).
 *   3. Random transforms draw from the record's generator (ct_rng, seeded
 *      by ct_record_seed(loader seed, epoch, index)), so a record's
 *      augmentation depends on nothing else: not the number of workers,
 *      not the batch it lands in, not a resume.
 *
 * Parity. Each transform computes what torchvision.transforms.v2 computes
 * on the tensor decode_image returns, with the same ATen operators in the
 * same order, so with the same parameters the output is the same, pixel
 * for pixel (tests/vision). Random parameters are drawn by torchvision's
 * rules from a torch generator: a Python dataset that calls
 * torch.manual_seed(ct_record_seed(seed, epoch, index)) before applying
 * the v2 transforms draws the same crops, flips and jitters. torchvision's
 * PIL path (ImageFolder's default loader) resizes with Pillow's own
 * fixed-point code: its pixels can differ from these by one level.
 */
#ifndef CTRIAL_VISION_H
#define CTRIAL_VISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== decoding ============================================================ */

/* torchvision.io.ImageReadMode, with its values. */
typedef enum {
    CT_IMAGE_UNCHANGED = 0,  /* the file's own channels */
    CT_IMAGE_GRAY = 1,
    CT_IMAGE_GRAY_ALPHA = 2,
    CT_IMAGE_RGB = 3,
    CT_IMAGE_RGB_ALPHA = 4,
} ct_image_mode;

/* Decodes a whole JPEG or PNG file held in memory (the format is told by
 * its first bytes, not by a name) into a NEW tensor [C, H, W]: uint8, or
 * uint16 for a 16-bit PNG (torch.uint16, as torchvision gives it; host byte
 * order), as torchvision.io.decode_image(data, mode) does, laid out as its
 * result is: a view of an [H, W, C] tensor (channels last). In detail:
 *   - JPEG (libjpeg-turbo): GRAY and RGB are libjpeg's own conversions; a
 *     CMYK/YCCK file is converted as torchvision converts it (Adobe's
 *     inverted CMYK). UNCHANGED keeps the file's components (1 or 3; a
 *     CMYK/YCCK file is CT_ENOTSUP). GRAY_ALPHA and RGB_ALPHA, which
 *     torchvision refuses for JPEG, are GRAY and RGB with an opaque alpha
 *     channel (255) after them.
 *   - PNG (libpng): the same libpng transformations torchvision asks for
 *     (gray to RGB, palette to RGB, alpha stripped or added opaque, RGB to
 *     gray with weights 0.2989 / 0.587 / 0.114), 1-, 2- and 4-bit gray
 *     expanded to 8, Adam7 interlacing undone; tRNS is ignored but for a
 *     palette image, whose alpha it gives. Where torchvision goes wrong,
 *     this gives what the mode says: in UNCHANGED mode a palette image is
 *     RGB (torchvision returns the palette's indices, packed when under 8
 *     bits); the alpha added in GRAY_ALPHA and RGB_ALPHA is opaque (255 or
 *     65535) also for 1-, 2- and 4-bit gray (torchvision: 1, 3 or 15) and
 *     for a palette image without tRNS (torchvision: misaligned rows).
 * libjpeg's and libpng's warnings are ignored, as torchvision ignores them
 * (a JPEG whose scan data is damaged decodes to what libjpeg makes of it).
 * `name` (a path, or NULL) appears in messages. Errors: empty data or a
 * file cut short anywhere, even after its image data, which torchvision
 * does not read (CT_EFORMAT, "Image is incomplete or truncated"), data
 * that is neither format (CT_ENOTSUP, "not a JPEG or PNG file"), a corrupt
 * file (CT_EFORMAT with libjpeg's or libpng's message), an unsupported bit
 * depth or colour space (CT_ENOTSUP), and, so that a hostile header cannot
 * take a worker's memory or time, an image over 2^31 bytes decoded (over
 * 65500 pixels a side for JPEG) or over the pixel limit below, or a
 * progressive JPEG of more than 1000 scans (CT_ENOTSUP); a PNG chunk that
 * claims more bytes than the file has left is a truncation (CT_EFORMAT),
 * and no compressed PNG text or ICC profile is inflated past 8 MiB (libpng
 * drops the chunk). Never a crash. */
CT_API ct_tensor *ct_image_decode(const void *data, size_t size, ct_image_mode mode, const char *name);
/* The decompression-bomb limit, as PIL's Image.MAX_IMAGE_PIXELS (which
 * torchvision's ImageFolder loader obeys): an image of more than twice
 * max_pixels pixels is refused before it is decoded, as PIL raises
 * DecompressionBombError. Default PIL's 89,478,485 (so 178,956,970
 * pixels); 0 or less lifts it. Process-wide, for every decoder and
 * loader worker; returns the previous value. */
CT_API int64_t ct_image_set_max_pixels(int64_t max_pixels);
/* ct_image_decode of the file at path (CT_EIO naming it when unreadable or
 * not a regular file, CT_EFORMAT when larger than 2^31 bytes). */
CT_API ct_tensor *ct_image_read(const char *path, ct_image_mode mode);

/* A segmentation mask: a NEW int64 tensor [H, W] of class indices, what
 * torch.as_tensor(np.array(PIL.Image.open(file))).long() gives. A palette
 * PNG (VOC's SegmentationClass) gives its palette's indices, not their
 * colours (tRNS ignored); a grayscale PNG (Oxford-IIIT Pet's trimaps) its
 * values: 8- and 16-bit as stored, 1-bit as 0 and 1, 2- and 4-bit scaled
 * to 8 bits as PIL scales them (x 85, x 17); a grayscale JPEG its values.
 * Anything with colour or alpha channels (RGB, RGBA, gray + alpha, a
 * colour JPEG: np.array would give [H, W, C], not a class map) is
 * CT_EFORMAT naming the file; other errors and limits as ct_image_decode's
 * (data, size, name) and ct_image_read's (path). */
CT_API ct_tensor *ct_image_decode_mask(const void *data, size_t size, const char *name);
CT_API ct_tensor *ct_image_read_mask(const char *path);

/* ==== datasets ============================================================ */

/*
 * torchvision.datasets.ImageFolder: root/<class>/.../<file>. Classes are the
 * sub-folders of root, sorted by name (byte order, as Python sorts them),
 * numbered from 0; each class's files are found recursively (symbolic
 * links followed), directories visited in sorted order and their files
 * sorted, as torchvision's make_dataset walks them. Sample i is the tuple
 * (image [C, H, W] as ct_image_read gives it in `mode`, label int64 0-dim),
 * except that in any mode but UNCHANGED a 16-bit PNG is uint8, each
 * sample's high byte, as ImageFolder's loader (PIL) gives it, so that it
 * collates beside 8-bit files (for 16-bit gray, PIL saturates at 255
 * instead). Images are decoded when a sample is fetched (on the loader's workers);
 * images of different sizes collate only after a transform that gives them
 * one size (ct_dataset_transform).
 *
 * Which files count: those whose name ends (case-insensitively, the
 * extension too: torchvision lower-cases only the name) in one of
 * `extensions`; by default torchvision's IMG_EXTENSIONS (.jpg .jpeg .png
 * .ppm .bmp .pgm .tif .tiff .webp). ctrial decodes JPEG and PNG, whatever
 * a file's name: a file that counts and whose name says another format
 * (.ppm .bmp .pgm .tif .tiff .webp .gif) is refused at creation
 * (CT_ENOTSUP naming it), rather than training on a different set than
 * torchvision would; pass extensions {".jpg", ".jpeg", ".png"} to leave
 * such files out. Hidden files and folders count, as in torchvision; the
 * root is taken as given (no "~" expansion). A folder reached again
 * through a symbolic link inside itself is not walked again.
 *
 * Errors at creation, each naming the path: root missing or not a
 * directory, a folder that cannot be read (CT_EIO; os.walk would skip
 * it), no class folder, a class folder with no file that counts unless
 * allow_empty (CT_EINVAL, as torchvision's FileNotFoundError). A file that
 * fails to decode is an error of the batch that holds it, naming the file
 * (the loader adds the index). New dataset.
 */
typedef struct {
    ct_image_mode mode;                  /* (CT_IMAGE_RGB: ImageFolder's loader converts to RGB) */
    const char *const *extensions;       /* NULL: torchvision's IMG_EXTENSIONS (NULL) */
    int num_extensions;                  /* >= 1 when extensions is given */
    bool allow_empty;                    /* empty class folders are allowed (false) */
} ct_image_folder_opts;

CT_API ct_image_folder_opts ct_image_folder_defaults(void);
/* o NULL: ct_image_folder_defaults(). */
CT_API ct_dataset *ct_dataset_image_folder(const char *root, const ct_image_folder_opts *o);
/* The classes of an image-folder dataset (its `classes`): their number, or
 * -1 + CT_EINVAL when d is not one (a subset or a transform of one is not:
 * ask the folder itself). */
CT_API int64_t ct_image_folder_num_classes(const ct_dataset *d);
/* Class k's name, BORROWED (lives as long as d), or NULL + error. */
CT_API const char *ct_image_folder_class(const ct_dataset *d, int64_t k);
/* Sample i's file (its path under root, as torchvision's samples[i][0]),
 * BORROWED, or NULL + error. */
CT_API const char *ct_image_folder_path(const ct_dataset *d, int64_t i);

/*
 * Images and their segmentation masks, paired by name: image
 * images_dir/<stem><ext> with mask masks_dir/<stem><mask_suffix>, e.g.
 * Oxford-IIIT Pet's images/Abyssinian_1.jpg with
 * annotations/trimaps/Abyssinian_1.png, or VOC's 2007_000032.jpg with
 * SegmentationClass/2007_000032.png (from a folder of the segmentation
 * split's images: JPEGImages also holds images without masks, which are
 * refused). The images are the files directly
 * in images_dir (sub-folders are not walked) whose name ends in one of the
 * extensions, as ct_dataset_image_folder counts them (case-insensitively;
 * a counted file of a format ctrial does not decode is refused), sorted by
 * name (byte order, as Python's sorted(os.listdir)); the stem is the name
 * without its extension (os.path.splitext). Sample i is the tuple (image
 * [C, H, W] decoded as ct_dataset_image_folder decodes it, mask int64
 * [H, W] as ct_image_read_mask gives it): what a PyTorch dataset returning
 * (decode_image(image, mode), torch.as_tensor(np.array(Image.open(mask)))
 * .long()) gives. Files are decoded when a sample is fetched (on the
 * loader's workers).
 *
 * Errors at creation, each naming the file or folder: a folder missing or
 * unreadable (CT_EIO); no image (CT_EINVAL); an image without its mask,
 * two images of one stem (CT_EINVAL); a file of masks_dir ending in
 * mask_suffix with no image of its stem (CT_EINVAL, unless
 * ignore_unpaired_masks; files that do not end in mask_suffix are
 * ignored). Errors of the sample that holds the file, naming it: an
 * unreadable or corrupt image or mask, a mask that is not a class map
 * (ct_image_read_mask), a mask whose size differs from its image's
 * (CT_ESHAPE naming both files and sizes). New dataset.
 */
typedef struct {
    ct_image_mode mode;                  /* the images' (CT_IMAGE_RGB); masks are always class maps */
    const char *const *extensions;       /* the images that count; NULL: torchvision's IMG_EXTENSIONS (NULL) */
    int num_extensions;                  /* >= 1 when extensions is given */
    const char *mask_suffix;             /* a mask's name is its image's stem + this (NULL: ".png") */
    bool ignore_unpaired_masks;          /* masks without an image are left out, not refused (false) */
} ct_segmentation_folder_opts;

CT_API ct_segmentation_folder_opts ct_segmentation_folder_defaults(void);
/* o NULL: ct_segmentation_folder_defaults(). */
CT_API ct_dataset *ct_dataset_segmentation_folder(const char *images_dir, const char *masks_dir,
                                                  const ct_segmentation_folder_opts *o);
/* Sample i's image and mask files (their paths under images_dir and
 * masks_dir, as given), BORROWED (they live as long as d), or NULL +
 * CT_EINVAL when d is not a segmentation folder itself, CT_EINDEX when i
 * is out of range. */
CT_API const char *ct_segmentation_folder_image_path(const ct_dataset *d, int64_t i);
CT_API const char *ct_segmentation_folder_mask_path(const ct_dataset *d, int64_t i);

/*
 * CIFAR-10 and CIFAR-100, from the "binary version" of each archive,
 * extracted: `dir` is cifar-10-batches-bin (data_batch_1.bin ..
 * data_batch_5.bin for training, test_batch.bin for testing) or
 * cifar-100-binary (train.bin, test.bin). Sample i is the tuple (image
 * uint8 [3, 32, 32], label int64 0-dim), the same images in the same order
 * as torchvision.datasets.CIFAR10 / CIFAR100 (which read the Python
 * version of the archive; its PIL image is this image channels-last):
 * CIFAR-100's label is the fine label, as torchvision's. The files are
 * held open and checked at creation (a file cut short later, while in use,
 * is CT_EIO naming it): a missing or unreadable file
 * (CT_EIO naming it), an empty file or a size that is not a whole number
 * of records (CT_EFORMAT naming the file and its size), a label out of
 * range (CT_EFORMAT naming the file and the record); a file may hold fewer
 * than 10000 records. A NULL dir or another kind is CT_EINVAL. New
 * dataset.
 */
typedef enum { CT_CIFAR10 = 10, CT_CIFAR100 = 100 } ct_cifar_kind;
CT_API ct_dataset *ct_dataset_cifar(const char *dir, ct_cifar_kind kind, bool train);

/* ==== transforms ========================================================== */

/*
 * A transform maps one image [C, H, W] (or a batch [..., C, H, W]) to a NEW
 * tensor. Geometric and colour transforms take uint8 or float images, as
 * torchvision's do; ct_tf_to_tensor turns uint8 into float32 in [0, 1] and
 * ct_tf_normalize takes float. Each constructor returns a new transform or
 * NULL + CT_EINVAL naming the bad argument; ct_tf_compose takes ownership
 * of its parts, ct_dataset_transform of its transform. Transforms are
 * immutable once built: one may serve every worker thread at once.
 */
typedef struct ct_transform ct_transform;

/* v2.Resize(size, antialias=True), bilinear: w == 0 resizes the smaller
 * edge to h keeping the aspect ratio (Resize(h): the longer edge becomes
 * int(h * long / short)), capped so that it is at most max_size when
 * max_size > 0; w > 0 gives exactly [h, w]. */
CT_API ct_transform *ct_tf_resize(int64_t h, int64_t w, int64_t max_size);
/* v2.CenterCrop((h, w)): a crop larger than the image pads with zeros. */
CT_API ct_transform *ct_tf_center_crop(int64_t h, int64_t w);
/* v2.RandomResizedCrop((h, w), scale, ratio, antialias=True): a crop of
 * area scale * H * W and aspect ratio drawn log-uniformly in ratio (ten
 * tries, then the central crop), resized to [h, w]. torchvision's defaults
 * are scale (0.08, 1) and ratio (3/4, 4/3). Needs 0 < scale_lo <= scale_hi
 * and 0 < ratio_lo <= ratio_hi (torchvision only warns about a reversed
 * range). */
CT_API ct_transform *ct_tf_random_resized_crop(int64_t h, int64_t w, double scale_lo, double scale_hi,
                                               double ratio_lo, double ratio_hi);

typedef enum {
    CT_PAD_CONSTANT = 0, /* `fill` */
    CT_PAD_EDGE,         /* the edge pixel repeated */
    CT_PAD_REFLECT,      /* mirrored, edge not repeated: 3 2 | 1 2 3 | 2 1 */
    CT_PAD_SYMMETRIC,    /* mirrored, edge repeated:     2 1 | 1 2 3 | 3 2 */
} ct_pad_mode;

/* RandomCrop's padding: v2.RandomCrop(size, padding=(left, top, right,
 * bottom), pad_if_needed, fill, padding_mode). All zero: no padding. */
typedef struct {
    int64_t left, top, right, bottom;
    bool if_needed;   /* pad an image smaller than the crop to the crop's size (false) */
    double fill;      /* CT_PAD_CONSTANT's value (0) */
    ct_pad_mode mode; /* (CT_PAD_CONSTANT) */
} ct_crop_padding;

/* v2.RandomCrop((h, w), ...): pads (NULL: no padding), then crops [h, w] at
 * a uniformly drawn position. An image (padded) smaller than the crop is a
 * CT_ESHAPE error of its record. A mask (ct_transform_apply_pair) is padded
 * in the same mode, with the same fill, as v2 pads every input with a
 * single fill. */
CT_API ct_transform *ct_tf_random_crop(int64_t h, int64_t w, const ct_crop_padding *padding);
/* ct_tf_random_crop whose constant padding of a mask is mask_fill, the
 * image's still padding->fill: v2.RandomCrop(..., fill={tv_tensors.Image:
 * padding->fill, tv_tensors.Mask: mask_fill}), e.g. 255, the label that
 * CrossEntropyLoss(ignore_index=255) leaves out. */
CT_API ct_transform *ct_tf_random_crop_ex(int64_t h, int64_t w, const ct_crop_padding *padding, double mask_fill);
/* v2.RandomHorizontalFlip(p). */
CT_API ct_transform *ct_tf_random_horizontal_flip(double p);
/* v2.ColorJitter(brightness, contrast, saturation, hue), each a single
 * number as torchvision takes it: brightness b draws a factor in
 * [max(0, 1 - b), 1 + b] (contrast and saturation likewise), hue h in
 * [-h, h] (h <= 0.5); 0 leaves that adjustment out. The four adjustments
 * run in a random order, as torchvision's. */
CT_API ct_transform *ct_tf_color_jitter(double brightness, double contrast, double saturation, double hue);
/* ToTensor's scaling: uint8 to float32 divided by 255, uint16 divided by
 * 65535 (x.to(torch.float32).div(255), what transforms.ToTensor does to a
 * PIL image or an array; v2.ToDtype(torch.float32, scale=True) multiplies
 * by 1/255 instead, which differs in the last bit for about half the
 * values). Float images pass through; other integer dtypes are CT_EDTYPE.
 * Shape stays as it is. */
CT_API ct_transform *ct_tf_to_tensor(void);
/* v2.Normalize(mean, std): (x - mean[c]) / std[c] per channel; c values
 * each, copied (c == 1: the one value for every channel, else c must be
 * the image's channel count, CT_ESHAPE); every std must be non-zero.
 * Takes float images (CT_EDTYPE otherwise: ToTensor first). */
CT_API ct_transform *ct_tf_normalize(int c, const double *mean, const double *std);
/* v2.Compose: the n transforms in order; takes every one of them, also on
 * failure. */
CT_API ct_transform *ct_tf_compose(int n, ct_transform *const *transforms);
/* Frees a transform (and a composition's parts). Accepts NULL. */
CT_API void ct_transform_free(ct_transform *t);

/* Applies t to img with random draws from rng (NULL: no random transform
 * may be in t: CT_EINVAL). A NEW tensor, or NULL + error naming the
 * transform and the image's shape. */
CT_API ct_tensor *ct_transform_apply(const ct_transform *t, const ct_tensor *img, ct_rng *rng);

/* Applies t to an image [..., C, H, W] and its segmentation mask [..., H,
 * W] (the same H and W; any dtype, int64 from ct_image_read_mask) at
 * once, as v2 transforms (image, tv_tensors.Mask(mask)): one draw of each
 * step's random parameters, the same as ct_transform_apply draws for the
 * image alone, applied to both. Geometric steps (Resize, CenterCrop,
 * RandomResizedCrop, RandomCrop with its padding, RandomHorizontalFlip)
 * move the mask's pixels as the image's, resizing it with NEAREST (no
 * antialiasing), padding it with 0 (CenterCrop) or RandomCrop's mask fill
 * (ct_tf_random_crop_ex); ColorJitter, ToTensor and Normalize change the
 * image only. On success *img_out and *mask_out are NEW tensors (the mask
 * keeps its dtype and leading dims; either may share storage with its
 * input, a crop being a view) and 0 is returned; on failure both are NULL
 * and the error names the step and both shapes: CT_EINVAL (a NULL
 * argument, a random t without rng), CT_ESHAPE (an image of fewer than 3
 * dims, a mask of fewer than 2 or of another H or W), or a step's. */
CT_API int ct_transform_apply_pair(const ct_transform *t, const ct_tensor *img, const ct_tensor *mask, ct_rng *rng,
                                   ct_tensor **img_out, ct_tensor **mask_out);

/* Decodes an image (ct_image_decode's data, size, mode and name) and
 * applies t to it, drawing from rng: the same tensor as
 * ct_transform_apply(t, ct_image_decode(...), rng), pixel for pixel and
 * draw for draw, with less work when t starts with a crop inside the
 * image (RandomResizedCrop; CenterCrop and RandomCrop when they pad
 * nothing): that crop's box is drawn from the size in the file's header
 * and a JPEG decodes only the box (and 8 or 16 pixels around it), the
 * rest of the file being read but not turned into pixels. A PNG is
 * decoded whole. DALI calls this a fused decode-and-crop. A truncated or
 * corrupt file fails as in ct_image_decode, also outside the box. NEW
 * tensor, or NULL + error "ct_image_decode_transform: NAME: why". */
CT_API ct_tensor *ct_image_decode_transform(const void *data, size_t size, ct_image_mode mode, const char *name,
                                            const ct_transform *t, ct_rng *rng);
/* ct_image_decode_transform of the file at path (errors name the path, as
 * ct_image_read's). */
CT_API ct_tensor *ct_image_read_transform(const char *path, ct_image_mode mode, const ct_transform *t,
                                          ct_rng *rng);

/* The dataset d with t applied to field `field` of each sample (0 for a
 * sample that is a plain tensor; the image of ImageFolder's (image, label)),
 * per record on the loader's worker threads, through ct_dataset_map (for
 * an image folder itself and field 0, as each image is decoded:
 * ct_image_read_transform, the same samples with less work). Takes
 * t (also on failure); d is not taken: the new dataset holds its own
 * reference. A NULL d or t (a constructor that failed) keeps that
 * failure's message. New dataset. */
CT_API ct_dataset *ct_dataset_transform(ct_dataset *d, int field, ct_transform *t);
/* The dataset d with t applied jointly (ct_transform_apply_pair) to the
 * image in field image_field and the mask in field mask_field of each
 * sample (a tuple or list; 0 and 1 for ct_dataset_segmentation_folder's),
 * per record on the loader's worker threads through ct_dataset_map, so
 * the record's draws are those of ct_dataset_transform; other fields are
 * copied. Takes t (also on failure); d is not taken. Fields < 0 or equal
 * are CT_EINVAL; a sample whose fields are not tensors is an error of its
 * record. A NULL d or t keeps its constructor's message. New dataset. */
CT_API ct_dataset *ct_dataset_transform_pair(ct_dataset *d, int image_field, int mask_field, ct_transform *t);

#ifdef __cplusplus
}
#endif
#endif
