/* tests/export/export_tool.c — ct_nn_load_exported driven by the Python
 * tests of tests/export/ (test_export.py), through files:
 *
 *   export_tool forward MODEL.pt2 IN.pth OUT.pth [--eval] [--program NAME] [--eval-program NAME]
 *       IN.pth holds {"args": [...], "kwargs": {...}, "calls": n, "seed": s,
 *       "autocast": "bf16", "load": state_dict}; the state dict is loaded
 *       into the module first (strict), the generators are seeded s (ct_manual_seed,
 *       when given), the calls run in a CPU autocast region when asked, and the
 *       module is called n times (default 1) in train mode (or in eval mode
 *       under no_grad, as the loop validates); OUT.pth
 *       receives {"out": the last call's result, "state": the module's
 *       state_dict afterwards, "grads": {name: grad} of a backward from the
 *       sum of every floating output tensor (train mode only)}.
 *   export_tool info MODEL.pt2
 *       prints the parameters (name, shape) and the inputs and outputs as
 *       JSON lines.
 *   export_tool load MODEL.pt2
 *       loads it, prints "ok", or the error on stderr with exit 3 and the
 *       code's name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

static int fail(const char *what) {
    fprintf(stderr, "export_tool: %s: %s: %s\n", what, ct_strerror(ct_last_code()), ct_last_error());
    return 3;
}

/* Every floating tensor of v added into *sum (a NEW tensor or NULL). */
static int add_outputs(const ct_value *v, ct_tensor **sum) {
    ct_value_kind k = ct_value_kind_of(v);
    if (k == CT_VALUE_TENSOR) {
        ct_tensor *t = ct_value_get_tensor(v);
        if (!ct_dtype_is_floating(ct_dtype_of(t)) || !ct_requires_grad(t)) return 0;
        ct_tensor *s = ct_sum(t);
        *sum = *sum ? ct_add(*sum, s) : s;
        return *sum ? 0 : -1;
    }
    for (size_t i = 0; (k == CT_VALUE_LIST || k == CT_VALUE_TUPLE || k == CT_VALUE_DICT) && i < ct_value_len(v); i++) {
        const ct_value *e = k == CT_VALUE_DICT ? ct_value_dict_at(v, i, NULL, NULL) : ct_value_list_get(v, i);
        if (add_outputs(e, sum)) return -1;
    }
    return 0;
}

static int forward(int argc, char **argv) {
    ct_export_opts o = ct_export_default_opts();
    bool eval = false;
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "--eval")) eval = true;
        else if (!strcmp(argv[i], "--program") && i + 1 < argc) o.program = argv[++i];
        else if (!strcmp(argv[i], "--eval-program") && i + 1 < argc) o.eval_program = argv[++i];
    }
    ct_module *m = ct_nn_load_exported(argv[2], &o);
    ct_value *in = NULL, *out = NULL, *res = NULL;
    int rc = m ? 0 : fail("load");
    if (!rc && ct_pth_load(argv[3], &in)) rc = fail("inputs");
    if (rc) goto done;
    const ct_value *args = ct_value_dict_get(in, "args"), *kwargs = ct_value_dict_get(in, "kwargs");
    int64_t calls = 1;
    if (ct_value_dict_get(in, "calls")) ct_value_get_int(ct_value_dict_get(in, "calls"), &calls);
    const ct_value *load = ct_value_dict_get(in, "load");
    if (load && ct_nn_load_state_dict(m, load, true)) {
        rc = fail("load_state_dict");
        goto done;
    }
    const ct_value *ac = ct_value_dict_get(in, "autocast");
    bool autocast = ac && ct_value_get_str(ac) && !strcmp(ct_value_get_str(ac), "bf16");
    int64_t seed = 0;
    if (ct_value_dict_get(in, "seed") && !ct_value_get_int(ct_value_dict_get(in, "seed"), &seed)) ct_manual_seed((uint64_t)seed);
    ct_nn_train(m, !eval);
    for (int64_t c = 0; c < calls; c++) {
        ct_value_free(out);
        ct_scope *s = ct_scope_begin();
        ct_guard *g = eval ? ct_no_grad() : NULL; /* as the loop validates */
        if (autocast) ct_autocast_enter(CT_CPU, CT_BF16);
        out = ct_nn_call(m, args, kwargs);
        if (autocast) ct_autocast_exit();
        ct_guard_end(g);
        ct_scope_end(s);
        if (!out) {
            rc = fail("forward");
            goto done;
        }
    }
    res = ct_value_dict();
    ct_value *grads = ct_value_dict();
    if (!eval) {
        ct_scope *s = ct_scope_begin();
        ct_tensor *sum = NULL;
        if (add_outputs(out, &sum) || (sum && ct_backward(sum))) rc = fail("backward");
        ct_scope_end(s);
        for (size_t i = 0; !rc && i < ct_nn_num_params(m); i++) {
            const char *name;
            ct_tensor *g = ct_grad(ct_nn_param_at(m, i, &name));
            if (g) ct_value_dict_set(grads, name, ct_value_tensor(ct_keep(g)));
        }
    }
    ct_value_dict_set(res, "out", out);
    out = NULL;
    ct_value_dict_set(res, "state", ct_nn_state_dict(m));
    ct_value_dict_set(res, "grads", grads);
    if (!rc && ct_pth_save(argv[4], res, NULL, NULL)) rc = fail("save");
done:
    ct_value_free(res);
    ct_value_free(out);
    ct_value_free(in);
    ct_nn_free(m);
    return rc;
}

static int info(const char *path) {
    ct_module *m = ct_nn_load_exported(path, NULL);
    if (!m) return fail("load"); /* nothing to free */
    for (size_t i = 0; i < ct_nn_state_size(m); i++) {
        const char *name;
        ct_tensor *t = ct_nn_state_at(m, i, &name);
        char d[128];
        ct_describe(t, d, sizeof d);
        printf("{\"state\": \"%s\", \"describe\": \"%s\", \"requires_grad\": %s}\n", name, d,
               ct_requires_grad(t) ? "true" : "false");
    }
    printf("{\"num_params\": %zu}\n", ct_nn_num_params(m));
    size_t ni = 0, no = 0;
    ct_nn_exported_arity(m, &ni, &no);
    for (size_t k = 0; k < ni + no; k++) {
        ct_exported_tensor t;
        int rc = k < ni ? ct_nn_exported_input(m, k, &t) : ct_nn_exported_output(m, k - ni, &t);
        if (rc) {
            printf("{\"%s\": %zu, \"error\": %d}\n", k < ni ? "input" : "output", k < ni ? k : k - ni, rc);
            ct_clear_error();
            continue;
        }
        printf("{\"%s\": %zu, \"name\": \"%s\", \"dtype\": \"%s\", \"size\": [", k < ni ? "input" : "output",
               k < ni ? k : k - ni, t.name, ct_dtype_name(t.dtype));
        for (int d = 0; d < t.ndim; d++) printf("%s%lld", d ? ", " : "", (long long)t.size[d]);
        printf("]}\n");
    }
    ct_nn_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 5 && !strcmp(argv[1], "forward")) return forward(argc, argv);
    if (argc == 3 && !strcmp(argv[1], "info")) return info(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "load")) {
        ct_module *m = ct_nn_load_exported(argv[2], NULL);
        if (!m) return fail("load");
        ct_nn_free(m);
        printf("ok\n");
        return 0;
    }
    fprintf(stderr, "usage: export_tool forward MODEL.pt2 IN.pth OUT.pth [--eval] | info MODEL.pt2 | load MODEL.pt2\n");
    return 2;
}
