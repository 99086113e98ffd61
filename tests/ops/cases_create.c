/* tests/ops/cases_create.c — creation, random draws, conversions, reading and
 * writing values, queries, generator state. Twins: cases_create.py. */
#define _POSIX_C_SOURCE 200809L /* dup, dup2, fileno: capturing ct_print */
#include "parity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether what ct_print(t) writes to stdout holds every `want` string (the
 * values with libtorch's 4 decimals, and its type footer). */
static void put_printed(const char *key, const ct_tensor *t, const char *const *want) {
    char text[4096] = "";
    FILE *tmp = tmpfile();
    fflush(stdout);
    int saved = dup(1);
    if (!tmp || saved < 0 || dup2(fileno(tmp), 1) < 0) {
        put_failure("capturing stdout");
        return;
    }
    int rc = ct_print(t);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    rewind(tmp);
    size_t n = fread(text, 1, sizeof text - 1, tmp);
    text[n] = '\0';
    fclose(tmp);
    if (rc != 0) put_failure(key);
    bool all = true;
    for (; *want; want++) all = all && strstr(text, *want) != NULL;
    if (!all) fprintf(stderr, "%s: printed %s\n", key, text);
    put_bool(key, all);
}

void case_rng_inputs(void) {
    /* Every other case relies on these matching torch's own draws. */
    put("randn_f32", RN(3, 4));
    put("randn_f32_17", RN(17));
    put("randn_f64", RN64(2, 3));
    put("randn_f16", ct_randn(S(5), &F16));
    put("randn_bf16", ct_randn(S(5), &BF16));
    put("randn_null_opts", ct_randn(S(4), NULL));
    put("randn_grad", RNG(2));
    put("rand_f32", ct_rand(S(5), &F32));
    put("rand_f64", ct_rand(S(2, 2), &F64));
    put("rand_grad", ct_rand(S(3), &F32G));
    put("randint_i64", ct_randint(-3, 7, S(4, 5), &I64));
    put("randint_i32", ct_randint(0, 100, S(6), &I32));
    put("randint_f32", ct_randint(0, 10, S(3), &F32));
    put("randperm_10", ct_randperm(10, &I64));
    put("randperm_40_i32", ct_randperm(40, &I32));
    put("randn_after", RN(3));
}

void case_creation(void) {
    put("zeros", ct_zeros(S(2, 3), NULL));
    put("zeros_0d", ct_zeros(0, NULL, &F64));
    put("ones_i64", ct_ones(S(4), &I64));
    put("ones_grad", ct_ones(S(2), &F32G));
    put("full_f64", ct_full(S(2, 2), 3.5, &F64));
    put("full_i32", ct_full(S(3), 7, &I32));
    put("full_bool", ct_full(S(2), 1, &BOOLT));
    put("full_empty", ct_full(S(2, 0), 1, NULL));
    put("scalar", ct_scalar_tensor(2.5, NULL));
    put("scalar_i64", ct_scalar_tensor(-4, &I64));
    put("arange_f32", ct_arange(0, 10, 3, NULL));
    put("arange_f64", ct_arange(1, 2, 0.25, &F64));
    put("arange_frac_f64", ct_arange(0, 1, 0.1, &F64));
    put("arange_i64", ct_arange(0, 5, 1, &I64));
    put("arange_i32_step", ct_arange(-6, 7, 4, &I32));
    put("arange_neg", ct_arange(5, 0, -1.5, NULL));
    put("linspace", ct_linspace(0, 1, 5, NULL));
    put("linspace_f64", ct_linspace(-2, 2, 7, &F64));
    put("linspace_1", ct_linspace(3, 9, 1, NULL));
    put("linspace_i64", ct_linspace(0, 10, 4, &I64));
    ct_tensor *ref = ct_full(S(2, 3), 5, &I32);
    put("zeros_like", ct_zeros_like(ref));
    put("ones_like", ct_ones_like(ref));
    put("full_like", ct_full_like(ref, 2));
    ct_tensor *g = RNG(2);
    put("zeros_like_of_grad", ct_zeros_like(g));
    put_meta("empty", ct_empty(S(3, 2), &F64));
    put_meta("empty_like", ct_empty_like(ref));
    put_meta("empty_grad", ct_empty(S(2), &F32G));
}

static void count_and_free(void *data, void *ctx) {
    (*(int *)ctx)++;
    free(data);
}

void case_from_data(void) {
    put("f32", F32D(S(2, 3), 1.5f, -2.25f, 3.0e-8f, 1e30f, -0.0f, 7.0f));
    put("f64", F64D(S(4), 3.141592653589793, -1e-300, 1e300, 0.1));
    put("f64_0d", ct_from_data((const double[]){-2.75}, 0, NULL, CT_F64));
    put("f16", ct_from_data((const uint16_t[]){0x3C00, 0xC000, 0x7BFF, 0x0001}, S(2, 2), CT_F16));
    put("bf16", ct_from_data((const uint16_t[]){0x3F80, 0xC0A0, 0x7F7F, 0x0001}, S(4), CT_BF16));
    put("i64", I64D(S(4), INT64_MIN, INT64_MAX, -1, 0));
    put("i32", I32D(S(3), INT32_MIN, INT32_MAX, 5));
    put("u8", U8D(S(3), 0, 255, 128));
    put("bool", BOOLD(S(3), true, false, true));
    put("empty", ct_from_data(NULL, S(0), CT_F32));

    /* from_blob wraps caller memory: writes show through, and the deleter
     * runs once, when the last reference (here a view) goes. */
    int deleted = 0;
    float *mem = malloc(6 * sizeof *mem);
    for (int i = 0; i < 6; i++) mem[i] = (float)i;
    ct_tensor *blob = ct_from_blob(mem, S(2, 3), CT_F32, count_and_free, &deleted);
    put("blob", blob);
    mem[4] = 42.0f;
    put("blob_after_write", blob);
    ct_tensor *view = put("blob_view", ct_slice(blob, 1, 1, INT64_MAX, 1));
    ct_tensor_free(blob);
    put_int("deleted_while_view_lives", deleted);
    put("blob_view_after_free", view);
    ct_tensor_free(view);
    put_int("deleted_after_last_ref", deleted);
    if (!blob) free(mem);

    double caller_mem[3] = {1, 2, 3};
    ct_tensor *nd = ct_from_blob(caller_mem, S(3), CT_F64, NULL, NULL);
    put("blob_no_deleter_x2", ct_mul_scalar(nd, 2));
    caller_mem[0] = -1;
    put("blob_no_deleter_after_write", nd);
    ct_tensor_free(nd);
    int64_t ints[4] = {5, -6, 7, -8};
    ct_tensor *ib = ct_from_blob(ints, S(2, 2), CT_I64, NULL, NULL);
    put("blob_i64_t", ct_t(ib));
}

void case_to_dtype(void) {
    /* Every pair of the 8 dtypes, on values all of them can hold. */
    ct_tensor *base = F64D(S(2, 3), 0, 1, 2.5, 100, 3.75, 200);
    for (int i = 0; i < 8; i++) {
        ct_tensor *src = ct_to_dtype(base, ALL_DTYPES[i]);
        for (int j = 0; j < 8; j++) {
            char key[64];
            snprintf(key, sizeof key, "%s_to_%s", ct_dtype_name(ALL_DTYPES[i]), ct_dtype_name(ALL_DTYPES[j]));
            put(key, ct_to_dtype(src, ALL_DTYPES[j]));
        }
    }
    /* Rounding to half precision and back; gradients flow through casts. */
    ct_tensor *x = RNG(16);
    ct_tensor *h = put("f32_to_f16", ct_to_dtype(x, CT_F16));
    ct_tensor *b = put("f32_to_bf16", ct_to_dtype(x, CT_BF16));
    put("f16_back", ct_to_dtype(h, CT_F32));
    put("bf16_back", ct_to_dtype(b, CT_F32));
    ct_tensor *d = put("f32_to_f64", ct_to_dtype(x, CT_F64));
    put("f32_to_f32", ct_to_dtype(x, CT_F32));
    put("f32_to_i64", ct_to_dtype(x, CT_I64));
    put("f32_to_bool", ct_to_dtype(x, CT_BOOL));
    ct_tensor *y = RN64(7);
    put("f64_to_f32", ct_to_dtype(y, CT_F32));
    put("f64_to_bf16", ct_to_dtype(y, CT_BF16));
    BW(d, h);
    put_grad("x", x);
}

void case_clone_detach_contiguous(void) {
    ct_tensor *x = RNG(3, 4);
    ct_tensor *xt = ct_t(x);
    ct_tensor *c = put("clone_of_t", ct_clone(xt));
    ct_tensor *k = put("contiguous_of_t", ct_contiguous(xt));
    put("contiguous_of_contiguous", ct_contiguous(x));
    put_bool("t_is_contiguous", ct_is_contiguous(xt));
    ct_tensor *y = ct_clone(x);
    ct_tensor *d = put("detached", ct_detach(y));
    put_bool("detached_is_leaf", ct_is_leaf(d));
    put_int("detached_write_rc", ct_mul_scalar_(d, 2)); /* shares storage with y */
    put("y_after_detached_write", y);
    BW(c, k);
    put_grad("x", x);
}

void case_read_write(void) {
    double v = 0;
    int64_t iv = 0;
    put_int("item_0d_rc", ct_item(ct_scalar_tensor(2.5, NULL), &v));
    put_val("item_0d", v);
    put_int("item_1x1_rc", ct_item(ct_full(S(1, 1), 3.25, &F64), &v));
    put_val("item_1x1", v);
    put_int("item_of_int_rc", ct_item(ct_scalar_tensor(7, &I64), &v));
    put_val("item_of_int", v);
    put_int("item_of_bool_rc", ct_item(ct_scalar_tensor(1, &BOOLT), &v));
    put_val("item_of_bool", v);
    put_int("item_of_f16_rc", ct_item(ct_to_dtype(ct_scalar_tensor(0.1, &F64), CT_F16), &v));
    put_val("item_of_f16", v);
    ct_tensor *x = RNG(3);
    put_int("item_of_grad_rc", ct_item(ct_sum(ct_mul(x, x)), &v));
    put_val("item_of_grad", v);
    put_int("item_int_big_rc", ct_item_int(I64D(S(1), 9007199254740993LL), &iv));
    put_int("item_int_big", iv); /* above 2^53: must not pass through a double */
    put_int("item_int_i32_rc", ct_item_int(ct_scalar_tensor(-5, &I32), &iv));
    put_int("item_int_i32", iv);
    put_int("item_int_u8_rc", ct_item_int(U8D(S(1), 200), &iv));
    put_int("item_int_u8", iv);
    put_int("item_int_bool_rc", ct_item_int(ct_scalar_tensor(1, &BOOLT), &iv));
    put_int("item_int_bool", iv);

    /* ct_read: C-contiguous order whatever the strides, in the own dtype. */
    ct_tensor *m = RN(3, 4);
    float fbuf[12] = {0};
    put_int("read_t_rc", ct_read(ct_t(m), fbuf, sizeof fbuf));
    put_buffer("read_t", CT_F32, fbuf, 12);
    uint16_t hbuf[4] = {0};
    put_int("read_f16_rc", ct_read(ct_to_dtype(ct_select(m, 1, 2), CT_F16), hbuf, 3 * sizeof *hbuf));
    put_buffer("read_f16", CT_F16, hbuf, 3);
    bool bbuf[3] = {false, false, false};
    put_int("read_bool_rc", ct_read(ct_gt_scalar(ct_select(m, 1, 0), 0), bbuf, sizeof bbuf));
    put_buffer("read_bool", CT_BOOL, bbuf, 3);
    int64_t ibuf[5] = {0};
    put_int("read_i64_rc", ct_read(ct_arange(10, 0, -2, &I64), ibuf, sizeof ibuf));
    put_buffer("read_i64", CT_I64, ibuf, 5);
    double dbuf[1] = {0};
    put_int("read_0d_rc", ct_read(ct_scalar_tensor(-0.125, &F64), dbuf, sizeof dbuf));
    put_buffer("read_0d", CT_F64, dbuf, 1);

    /* ct_write: C-contiguous source into any tensor, views included. */
    ct_tensor *w = ct_zeros(S(2, 3), NULL);
    put_int("write_rc", ct_write(w, (const float[]){1, 2, 3, 4, 5, 6}, 6 * sizeof(float)));
    put("write", w);
    ct_tensor *base = ct_zeros(S(3, 2), NULL);
    put_int("write_view_rc", ct_write(ct_t(base), (const float[]){1, 2, 3, 4, 5, 6}, 6 * sizeof(float)));
    put("write_through_transposed_view", base);
    ct_tensor *wi = ct_zeros(S(3), &I64);
    put_int("write_i64_rc", ct_write(wi, (const int64_t[]){INT64_MAX, -3, 9007199254740993LL}, 3 * sizeof(int64_t)));
    put("write_i64", wi);
    /* Initialising a parameter: a leaf that requires grad. */
    put_int("write_grad_leaf_rc", ct_write(x, (const float[]){0.5f, -1.5f, 2.5f}, 3 * sizeof(float)));
    put("write_grad_leaf", x);

    /* ct_data_ptr: writes through it, and it honours a view's offset. */
    ct_tensor *d = ct_zeros(S(4), &F64);
    double *p = ct_data_ptr(d);
    if (p) {
        p[0] = -1;
        p[2] = 5;
    } else {
        put_failure("data_ptr");
    }
    put("data_ptr_write", d);
    ct_tensor *sl = ct_slice(ct_arange(0, 10, 1, &F64), 0, 3, 6, 1);
    double *ps = ct_data_ptr(sl);
    put_val("data_ptr_of_slice", ps ? ps[0] : NAN);
    int32_t *pi = ct_data_ptr(ct_full(S(2), 11, &I32));
    put_int("data_ptr_i32", pi ? pi[1] : -1);

    /* copy_ broadcasts and converts; an alias is the same tensor. */
    ct_tensor *dst = ct_zeros(S(3, 4), &F64);
    ct_tensor *src = RN(4);
    put_int("copy_rc", ct_copy_(dst, src));
    put("copy_broadcast_convert", dst);
    ct_tensor *a = RN(3);
    ct_tensor *al = ct_alias(a);
    put_int("alias_write_rc", ct_mul_scalar_(al, 2));
    put("alias_write_seen", a);
    ct_tensor_free(al);
    put_bool("alias_free_keeps_original", ct_is_defined(a));
    put("after_alias_free", a);
    put("to_device_cpu", ct_to_device(a, ct_cpu(), false));
}

void case_queries(void) {
    ct_tensor *x = RN(2, 3, 4);
    ct_tensor *p = ct_permute(x, S(2, 0, 1));
    put_int("ndim", ct_ndim(x));
    put_int("size_1", ct_size(x, 1));
    put_int("size_neg1", ct_size(x, -1));
    put_int("stride_0", ct_stride(x, 0));
    put_int("stride_p_neg1", ct_stride(p, -1));
    put_int("numel", ct_numel(x));
    int64_t shp[3] = {-7, -7, -7};
    put_int("shape_ret_max2", ct_shape(x, shp, 2));
    put_int("shape_0", shp[0]);
    put_int("shape_1", shp[1]);
    put_int("shape_2_untouched", shp[2]);
    ct_tensor *s = ct_scalar_tensor(1, &I64);
    put_int("ndim_0d", ct_ndim(s));
    put_int("numel_0d", ct_numel(s));
    put_int("numel_empty", ct_numel(ct_zeros(S(3, 0), NULL)));
    put_bool("x_contiguous", ct_is_contiguous(x));
    put_bool("p_contiguous", ct_is_contiguous(p));
    put_bool("x_defined", ct_is_defined(x));
    char buf[64];
    ct_describe(x, buf, sizeof buf);
    put_str("describe", buf);
    ct_describe(s, buf, sizeof buf);
    put_str("describe_0d", buf);
    ct_describe(ct_zeros(S(5), &BF16), buf, sizeof buf);
    put_str("describe_bf16", buf);
    ct_describe(x, buf, 5);
    put_str("describe_truncated", buf);
    for (int i = 0; i < 8; i++) {
        char key[64];
        snprintf(key, sizeof key, "name_%d", i);
        put_str(key, ct_dtype_name(ALL_DTYPES[i]));
        snprintf(key, sizeof key, "size_%d", i);
        put_int(key, (int64_t)ct_dtype_size(ALL_DTYPES[i]));
        snprintf(key, sizeof key, "floating_%d", i);
        put_bool(key, ct_dtype_is_floating(ALL_DTYPES[i]));
        snprintf(key, sizeof key, "dtype_of_%d", i);
        put_bool(key, ct_dtype_of(ct_zeros(S(1), &(ct_topts){.dtype = ALL_DTYPES[i]})) == ALL_DTYPES[i]);
    }
    ct_device dev = ct_device_of(x);
    put_int("device_of_type", dev.type);
    const char *texts[] = {"cpu", "cuda", "cuda:3", "cuda:12"};
    for (int i = 0; i < 4; i++) {
        ct_device d = {CT_CPU, -1};
        char key[64];
        snprintf(key, sizeof key, "parse_%s_rc", texts[i]);
        put_int(key, ct_device_parse(texts[i], &d));
        snprintf(key, sizeof key, "parse_%s_type", texts[i]);
        put_int(key, d.type);
        if (d.type == CT_CUDA) {
            snprintf(key, sizeof key, "parse_%s_index", texts[i]);
            put_int(key, d.index);
        }
        ct_device_format(d, buf, sizeof buf);
        snprintf(key, sizeof key, "format_%s", texts[i]);
        put_str(key, buf);
    }
    ct_device_format(ct_cuda(12), buf, 4);
    put_str("format_truncated", buf);
    put_int("set_num_threads", ct_set_num_threads(1));
    put_int("get_num_threads", ct_get_num_threads());
    put_str("torch_version", ct_torch_version());
    /* "Prints the values in libtorch's C++ layout" */
    put_printed("print_f32", F32D(S(2, 2), 1, 2.5f, -3, 4),
                (const char *[]){" 1.0000", " 2.5000", "-3.0000", " 4.0000", "[ CPUFloatType{2,2} ]", NULL});
    put_printed("print_i64", I64D(S(3), 1, 2, 3),
                (const char *[]){" 1\n", " 2\n", " 3\n", "[ CPULongType{3} ]", NULL});
}

void case_rng_state(void) {
    put("state_after_seed_0", ct_rng_get_state(ct_cpu()));
    put("a", RN(5));
    ct_tensor *s = ct_rng_get_state(ct_cpu());
    put("b", RN(5));
    put("u", ct_rand(S(3), &F64));
    put("perm", ct_randperm(7, &I64));
    put_int("set_state_rc", ct_rng_set_state(ct_cpu(), s));
    put("b_again", RN(5));
    put("u_again", ct_rand(S(3), &F64));
    put("perm_again", ct_randperm(7, &I64));
    put("state_copy_unchanged", s);
    put_int("seed_rc", ct_manual_seed(123));
    put("seed_123", RN(3));
    ct_manual_seed(UINT64_C(0xFFFFFFFFFFFF));
    put("seed_large", ct_rand(S(3), NULL));
}
