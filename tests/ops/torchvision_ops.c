/* tests/ops/torchvision_ops.c — the C half of test_torchvision.py:
 * torchvision's operators called by name (ctrial/ops.h) once the program
 * has loaded torchvision's library.
 *
 *     torchvision_ops LIBPYTHON TORCHVISION_C_SO OUT.pth
 *
 * The torchvision wheel ships its operators in torchvision/_C.so, which
 * links libtorch_python; the program loads libpython first (RTLD_GLOBAL,
 * for the symbols: no interpreter is started), then _C.so, whose static
 * initialisers register torchvision::nms, roi_align, roi_pool, ... with the
 * dispatcher. Then:
 *   nms        boxes [20, 4] (x1, y1, x2, y2), scores [20], IoU 0.5
 *   roi_align  input [2, 3, 16, 16] (grad), rois [6, 5], scale 0.5,
 *              4 x 4, sampling ratio 2, aligned; the input's gradient of
 *              (out * cos(arange)).sum()
 *   roi_pool   the same input and rois, 3 x 3: (output, argmax)
 * OUT.pth: {"boxes", "scores", "keep", "input", "rois", "align",
 * "align_grad", "pool", "pool_argmax"}. Exit 0, or 1 with the error. */
#include <dlfcn.h>
#include <stdio.h>

#include <ctrial/ctrial.h>

static int fail(const char *what, const char *why) {
    fprintf(stderr, "torchvision_ops: %s: %s\n", what, why);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s LIBPYTHON TORCHVISION_C_SO OUT.pth\n", argv[0]);
        return 2;
    }
    if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) return fail(argv[1], dlerror());
    if (!dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL)) return fail(argv[2], dlerror());
    ct_set_num_threads(1);
    ct_scope *s = ct_scope_begin();
    ct_manual_seed(0);

    /* nms: boxes with x2 > x1, y2 > y1 */
    ct_tensor *corner = ct_mul_scalar(ct_rand(CT_SHAPE(20, 2), NULL), 10);
    ct_tensor *size = ct_add_scalar(ct_mul_scalar(ct_rand(CT_SHAPE(20, 2), NULL), 5), 1);
    ct_tensor *boxes = ct_cat(2, (ct_tensor *const[]){corner, ct_add(corner, size)}, 1);
    ct_tensor *scores = ct_rand(CT_SHAPE(20), NULL);
    ct_tensor *keep = CT_CALL("torchvision::nms", CT_T(boxes), CT_T(scores), CT_F(0.5));

    /* roi_align and roi_pool on rois [batch index, x1, y1, x2, y2] in input coordinates / 0.5 */
    ct_tensor *input = ct_randn(CT_SHAPE(2, 3, 16, 16), &(ct_topts){.requires_grad = true});
    ct_tensor *idx = ct_to_dtype(ct_randint(0, 2, CT_SHAPE(6, 1), NULL), CT_F32);
    ct_tensor *xy = ct_mul_scalar(ct_rand(CT_SHAPE(6, 2), NULL), 16);
    ct_tensor *wh = ct_add_scalar(ct_mul_scalar(ct_rand(CT_SHAPE(6, 2), NULL), 12), 2);
    ct_tensor *rois = ct_cat(3, (ct_tensor *const[]){idx, xy, ct_add(xy, wh)}, 1);
    ct_tensor *align = CT_CALL("torchvision::roi_align", CT_T(input), CT_T(rois), CT_F(0.5), CT_I(4), CT_I(4),
                               CT_I(2), CT_B(true));
    ct_tensor *w = ct_reshape(ct_cos(ct_arange(0, (double)ct_numel(align), 1, NULL)), CT_SHAPE(6, 3, 4, 4));
    if (!align || ct_backward(ct_sum(ct_mul(align, w))) != 0) return fail("roi_align", ct_last_error());
    ct_tensor *pool[2];
    if (CT_CALL_N("torchvision::roi_pool", 2, pool, CT_T(ct_detach(input)), CT_T(rois), CT_F(0.5), CT_I(3), CT_I(3)) != 2)
        return fail("roi_pool", ct_last_error());
    if (!keep) return fail("nms", ct_last_error());

    ct_value *out = ct_value_dict();
    ct_value_dict_set(out, "boxes", ct_value_tensor(ct_alias(boxes)));
    ct_value_dict_set(out, "scores", ct_value_tensor(ct_alias(scores)));
    ct_value_dict_set(out, "keep", ct_value_tensor(ct_alias(keep)));
    ct_value_dict_set(out, "input", ct_value_tensor(ct_detach(input)));
    ct_value_dict_set(out, "rois", ct_value_tensor(ct_alias(rois)));
    ct_value_dict_set(out, "align", ct_value_tensor(ct_detach(align)));
    ct_value_dict_set(out, "align_grad", ct_value_tensor(ct_grad(input)));
    ct_value_dict_set(out, "pool", ct_value_tensor(pool[0]));
    ct_value_dict_set(out, "pool_argmax", ct_value_tensor(pool[1]));
    int rc = ct_pth_save(argv[3], out, NULL, NULL);
    ct_value_free(out);
    ct_scope_end(s);
    return rc == 0 ? 0 : fail(argv[3], ct_last_error());
}
