/* Transforms' and maps' refusals (vision.h, data.h): bad constructor
 * arguments name the argument; a random transform applied without a
 * generator is refused; a NULL dataset or transform handed on from a
 * failed constructor keeps that constructor's message; a map function's
 * failure reaches ct_dataset_get and the loader naming the index; the
 * generators refuse empty ranges. Nothing leaks. */
#include <stdlib.h>

#include "ct_test.h"

static ct_value *fail_on_three(const ct_value *sample, ct_rng *rng, void *ctx) {
    (void)rng, (void)ctx;
    ct_tensor *t = ct_value_get_tensor(sample);
    double v = -1;
    if (t) ct_item(t, &v);
    if (v == 3) {
        ct_set_error(CT_EINVAL, "three is not allowed");
        return NULL;
    }
    return ct_value_copy(sample, true);
}

static int freed;
static void count_free(void *ctx) {
    (void)ctx;
    freed++;
}

int main(void) {
    ct_scope *scope = ct_scope_begin();
    /* constructors */
    CHECK(ct_tf_resize(0, 0, 0) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_tf_resize");
    CHECK(ct_tf_resize(32, 0, 16) == NULL);
    CHECK_ERR(CT_EINVAL, "max_size");
    CHECK(ct_tf_random_resized_crop(8, 8, 0.5, 0.2, 0.75, 1.33) == NULL);
    CHECK_ERR(CT_EINVAL, "scale");
    CHECK(ct_tf_random_horizontal_flip(1.5) == NULL);
    CHECK_ERR(CT_EINVAL, "p must be");
    CHECK(ct_tf_color_jitter(0.1, 0, 0, 0.6) == NULL);
    CHECK_ERR(CT_EINVAL, "hue");
    CHECK(ct_tf_normalize(3, (double[]){0.5, 0.5, 0.5}, (double[]){0.2, 0, 0.2}) == NULL);
    CHECK_ERR(CT_EINVAL, "division by zero");
    ct_crop_padding bad = {.left = -1};
    CHECK(ct_tf_random_crop(8, 8, &bad) == NULL);
    CHECK_ERR(CT_EINVAL, "padding");
    /* a compose of a failed part keeps the part's message, and frees the rest */
    ct_transform *parts[] = {ct_tf_to_tensor(), ct_tf_center_crop(0, 4)};
    CHECK(ct_tf_compose(2, parts) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_tf_center_crop");

    /* a random transform needs a generator */
    ct_transform *flip = ct_tf_random_horizontal_flip(0.5);
    ct_tensor *img = ct_zeros(CT_SHAPE(3, 4, 5), &(ct_topts){.dtype = CT_U8});
    CHECK(ct_transform_apply(flip, img, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "needs a ct_rng");
    ct_transform *resize = ct_tf_resize(2, 0, 0); /* deterministic: no generator needed */
    ct_tensor *small = ct_transform_apply(resize, img, NULL);
    CHECK(small && ct_size(small, 1) == 2 && ct_size(small, 2) == 2); /* 4x5 -> short edge 2: 2 x int(2*5/4) */
    ct_transform_free(resize);

    /* NULLs from failed constructors keep their messages */
    CHECK(ct_dataset_transform(ct_dataset_image_folder("/nonexistent/ctrial-images", NULL), 0, flip) == NULL);
    CHECK_ERR(CT_EIO, "/nonexistent/ctrial-images");
    ct_dataset *d = ct_dataset_tensors(1, (ct_tensor *[]){ct_arange(0, 6, 1, NULL)});
    CHECK(ct_dataset_transform(d, 0, ct_tf_resize(0, 0, 0)) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_tf_resize");
    CHECK(ct_dataset_transform(d, -1, ct_tf_to_tensor()) == NULL);
    CHECK_ERR(CT_EINVAL, "field");
    freed = 0;
    CHECK(ct_dataset_map(d, NULL, NULL, count_free) == NULL);
    CHECK_ERR(CT_EINVAL, "fn is NULL");
    CHECK(freed == 1);

    /* a failing map function: its message, with the index, from get and the loader */
    ct_dataset *m = ct_dataset_map(d, fail_on_three, NULL, count_free);
    CHECK(m != NULL);
    ct_value *v = ct_dataset_get(m, 2);
    CHECK(v != NULL);
    ct_value_free(v);
    CHECK(ct_dataset_get(m, 3) == NULL);
    CHECK_ERR(CT_EINVAL, "three is not allowed");
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = 2;
    o.num_workers = 2;
    ct_loader *l = ct_loader_new(ct_dataset_ref(m), &o);
    ct_value *b = NULL;
    CHECK(ct_loader_next(l, &b) == 1); /* 0, 1 */
    ct_value_free(b);
    CHECK(ct_loader_next(l, &b) < 0); /* 2, 3 */
    CHECK_ERR(CT_EINVAL, "dataset index 3");
    ct_loader_free(l);
    ct_dataset_free(m);
    CHECK(freed == 2);
    ct_dataset_free(d);

    /* generators */
    ct_rng *r = ct_rng_new(7);
    double u = 42;
    int64_t k = 42;
    CHECK(ct_rng_uniform(r, 1.0, 0.5, &u) == CT_EINVAL && u == 42);
    CHECK(ct_rng_randint(r, 3, 3, &k) == CT_EINVAL && k == 42);
    CHECK(ct_rng_randint(r, 3, 4, &k) == 0 && k == 3);
    CHECK(ct_rng_uniform(NULL, 0, 1, &u) == CT_EINVAL);
    ct_rng_free(r);
    ct_scope_end(scope);
    CHECK(ct_tensor_live_count() == 0);
    return ct_test_result("transforms_errors");
}
