/* tests/ops/cases_shape.c — indexing, joining and views, with gradients.
 * Twins: cases_shape.py. */
#include "parity.h"

#include <stdio.h>

void case_slice(void) {
    ct_tensor *x = RNG(5, 6);
    outs o = {0};
    out(&o, "rows_1_4", ct_slice(x, 0, 1, 4, 1));
    out(&o, "cols_step_2", ct_slice(x, 1, 0, INT64_MAX, 2));
    out(&o, "cols_neg", ct_slice(x, 1, -4, -1, 1));
    out(&o, "rows_clamped_step_3", ct_slice(x, 0, -100, 100, 3));
    out(&o, "empty", ct_slice(x, 1, 5, 2, 1));
    out(&o, "last_dim_to_end", ct_slice(x, -1, 4, INT64_MAX, 1));
    out(&o, "slice_of_slice", ct_slice(ct_slice(x, 0, 1, INT64_MAX, 2), 1, 1, 5, 3));
    bw_outs(&o);
    put_grad("x", x);
}

void case_narrow_select(void) {
    ct_tensor *x = RNG(4, 5);
    outs o = {0};
    out(&o, "narrow_1_2_3", ct_narrow(x, 1, 2, 3));
    out(&o, "narrow_neg_start", ct_narrow(x, 0, -3, 2));
    out(&o, "select_0_2", ct_select(x, 0, 2));
    out(&o, "select_1_neg1", ct_select(x, 1, -1));
    out(&o, "select_to_0d", ct_select(ct_select(x, 0, -1), 0, 0));
    bw_outs(&o);
    put_grad("x", x);
}

void case_index(void) {
    ct_tensor *x = RNG(4, 5);
    ct_tensor *gidx = ct_randint(0, 5, S(4, 3), &I64);
    ct_tensor *src = RNG(2, 5);
    ct_tensor *mask = put("mask", ct_lt_scalar(ct_rand(S(4, 5), NULL), 0.4));
    ct_tensor *mask_row = put("mask_row", ct_lt_scalar(ct_rand(S(5), NULL), 0.5));
    /* unique per column: scatter's result is then defined */
    ct_tensor *sidx = I64D(S(2, 5), 0, 1, 2, 3, 0, 3, 2, 1, 0, 2);
    ct_tensor *aidx = I64D(S(2, 5), 0, 0, 1, 1, 3, 0, 2, 1, 3, 3);
    outs o = {0};
    out(&o, "index_select_0", ct_index_select(x, 0, I64D(S(3), 2, 0, 2)));
    out(&o, "index_select_1_i32", ct_index_select(x, 1, I32D(S(2), 4, 1)));
    out(&o, "index_select_neg_dim", ct_index_select(x, -1, I64D(S(1), 3)));
    out(&o, "gather", ct_gather(x, 1, gidx));
    out(&o, "scatter", ct_scatter(x, 0, sidx, src));
    out(&o, "scatter_add", ct_scatter_add(x, 0, aidx, src));
    out(&o, "masked_fill", ct_masked_fill(x, mask, -1.5));
    out(&o, "masked_fill_broadcast", ct_masked_fill(x, mask_row, 9));
    out(&o, "masked_select", ct_masked_select(x, mask));
    out(&o, "masked_select_broadcast", ct_masked_select(x, mask_row));
    bw_outs(&o);
    put_grad("x", x);
    put_grad("src", src);
    put("masked_fill_i64", ct_masked_fill(I64D(S(3), 1, 2, 3), BOOLD(S(3), false, true, true), -7));
}

void case_join(void) {
    ct_tensor *a = RNG(2, 3), *b = RNG(1, 3), *c = RNG(3, 3), *d = RNG(2, 2), *e = RNG(2, 3);
    ct_tensor *x = RNG(7, 3), *y = RNG(2, 7), *z = RNG(6, 2);
    outs o = {0};
    out(&o, "cat_0", ct_cat(3, (ct_tensor *[]){a, b, c}, 0));
    out(&o, "cat_neg1", ct_cat(2, (ct_tensor *[]){a, d}, -1));
    out(&o, "cat_one", ct_cat(1, (ct_tensor *[]){a}, 0));
    out(&o, "stack_0", ct_stack(2, (ct_tensor *[]){a, e}, 0));
    out(&o, "stack_2", ct_stack(2, (ct_tensor *[]){a, e}, 2));
    out(&o, "stack_neg2", ct_stack(2, (ct_tensor *[]){a, e}, -2));

    ct_tensor *sp[4] = {NULL, NULL, NULL, NULL};
    put_int("split_n", ct_split(x, 3, 0, sp, 4));
    out(&o, "split_0", sp[0]);
    out(&o, "split_1", sp[1]);
    out(&o, "split_2", sp[2]);
    put_bool("split_3_untouched", sp[3] == NULL);
    ct_tensor *few[3] = {NULL, NULL, NULL};
    put_int("split_more_than_max", ct_split(x, 1, 1, few, 1));
    out(&o, "split_first_only", few[0]);
    put_bool("split_rest_untouched", few[1] == NULL && few[2] == NULL);
    put_int("split_count_only", ct_split(x, 2, 0, NULL, 0));

    ct_tensor *ch[4] = {NULL, NULL, NULL, NULL};
    put_int("chunk_n", ct_chunk(y, 3, 1, ch, 4));
    out(&o, "chunk_0", ch[0]);
    out(&o, "chunk_1", ch[1]);
    out(&o, "chunk_2", ch[2]);
    ct_tensor *ch2[5] = {NULL, NULL, NULL, NULL, NULL};
    put_int("chunk_fewer_n", ct_chunk(z, 4, 0, ch2, 5)); /* 6 rows in chunks of 2: 3 */
    out(&o, "chunk_fewer_0", ch2[0]);
    out(&o, "chunk_fewer_1", ch2[1]);
    out(&o, "chunk_fewer_2", ch2[2]);
    put_bool("chunk_fewer_3_untouched", ch2[3] == NULL);
    bw_outs(&o);
    put_grad("a", a);
    put_grad("b", b);
    put_grad("c", c);
    put_grad("d", d);
    put_grad("e", e);
    put_grad("x", x);
    put_grad("y", y);
    put_grad("z", z);
    put("cat_i64", ct_cat(2, (ct_tensor *[]){I64D(S(2), 1, 2), I64D(S(1), 3)}, 0));
}

void case_views(void) {
    ct_tensor *x = RNG(2, 3, 4), *m = RNG(3, 5), *y = RNG(1, 3, 1, 2), *z = RNG(1, 2, 1), *q = RNG(4, 5);
    outs o = {0};
    out(&o, "reshape", ct_reshape(x, S(-1, 4)));
    out(&o, "view", ct_view(x, S(3, -1)));
    ct_tensor *p = out(&o, "permute", ct_permute(x, S(2, 0, 1)));
    out(&o, "permute_neg", ct_permute(x, S(-1, -3, -2)));
    out(&o, "transpose_0_2", ct_transpose(x, 0, 2));
    out(&o, "transpose_neg", ct_transpose(x, -1, -2));
    out(&o, "t", ct_t(m));
    out(&o, "flatten_1_end", ct_flatten(x, 1, -1));
    out(&o, "flatten_0_1", ct_flatten(x, 0, 1));
    out(&o, "flatten_all", ct_flatten(x, 0, -1));
    out(&o, "unsqueeze_0", ct_unsqueeze(x, 0));
    out(&o, "unsqueeze_neg1", ct_unsqueeze(x, -1));
    out(&o, "unsqueeze_1", ct_unsqueeze(x, 1));
    out(&o, "squeeze", ct_squeeze(y));
    out(&o, "squeeze_dim_2", ct_squeeze_dim(y, 2));
    out(&o, "squeeze_dim_not_1", ct_squeeze_dim(y, 1));
    out(&o, "squeeze_dim_neg", ct_squeeze_dim(y, -4));
    out(&o, "expand", ct_expand(z, S(3, -1, 4)));
    out(&o, "expand_new_dim", ct_expand(z, S(5, 1, 2, 3)));
    out(&o, "repeat_more_dims", ct_repeat(m, S(2, 1, 3)));
    out(&o, "repeat", ct_repeat(z, S(1, 2, 2)));
    out(&o, "tril_0", ct_tril(q, 0));
    out(&o, "tril_neg1", ct_tril(q, -1));
    out(&o, "triu_1", ct_triu(q, 1));
    out(&o, "triu_neg2", ct_triu(q, -2));
    out(&o, "tril_batched", ct_tril(x, 1));
    out(&o, "triu_all_zero", ct_triu(x, 10));
    out(&o, "reshape_copy", ct_reshape(p, S(-1)));
    out(&o, "view_of_permuted", ct_view(p, S(4, 6)));
    bw_outs(&o);
    put_grad("x", x);
    put_grad("m", m);
    put_grad("y", y);
    put_grad("z", z);
    put_grad("q", q);
}
