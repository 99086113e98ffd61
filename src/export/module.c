/* src/export/module.c — ct_nn_load_exported (ctrial/export.h): a .pt2
 * archive into a ct_module whose forward runs the exported graph.
 *
 * Loading, in order:
 *   1. the archive is opened and its programs chosen (pt2/archive.c): the
 *      training program ("model") and the eval one ("eval"), if any;
 *   2. the training program's weights become the module's parameters and
 *      buffers, in the graph signature's order, inside child modules named
 *      by the state-dict names' prefixes and made in named_modules()
 *      order, so that state_dict() lists them as Python does; tied weights
 *      are one tensor registered under both names;
 *   3. each program is compiled into a plan (run.c); its graph inputs are
 *      bound once to the module's tensors (parameters, buffers) or to its
 *      own lifted constants; the eval program shares the module's tensors
 *      by name.
 *
 * A call (forward): the caller's args and kwargs are flattened by the
 * program's input spec and checked against what was traced (dtype, rank,
 * static sizes, the ranges of dynamic ones), the plan runs, buffers the
 * graph returns as mutated are copied back, and the user outputs are
 * rebuilt by the output spec into Python's tuples, lists and dicts.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/pth_tensors.h"
#include "ctrial/export.h"
#include "export/exported.h"

static const char *const kTypeName = "ExportedProgram";

/* One program, ready to run. */
typedef struct {
    cti_pt2_program *prog;     /* owned, unless `shared` */
    bool shared;              /* the training program run with eval()'s flags */
    cti_export_plan *plan;
    ct_tensor **inputs;       /* per graph input: a parameter or buffer (borrowed), a constant (owned), or NULL */
    bool *owns_input;         /* constants */
    const char **buffers;     /* per graph input: its buffer's name, or NULL (eval rewrite) */
    size_t *user;             /* the graph inputs of the caller's leaves, in flat order */
    size_t nuser;
} program;

typedef struct {
    char *path;
    char what[600];           /* "m.pt2: program 'model'", for messages */
    program train, eval;
    ct_device traced_on;
    ct_module *self;
} exported;

ct_export_opts ct_export_default_opts(void) { return (ct_export_opts){NULL, NULL}; }

static void program_clear(program *p) {
    cti_export_plan_free(p->plan);
    size_t n = p->prog ? p->prog->graph.ninputs : 0;
    for (size_t i = 0; p->inputs && i < n; i++)
        if (p->owns_input[i]) ct_tensor_free(p->inputs[i]);
    free(p->inputs);
    free(p->owns_input);
    free(p->buffers);
    free(p->user);
    if (!p->shared) cti_pt2_program_free(p->prog);
    memset(p, 0, sizeof *p);
}

static void exported_free(void *user) {
    exported *ex = user;
    if (!ex) return;
    program_clear(&ex->eval);
    program_clear(&ex->train);
    free(ex->path);
    free(ex);
}

/* ---- the module's tree ------------------------------------------------------------------ */

/* The containers made so far, by their dotted name. */
typedef struct {
    char **names;
    ct_module **mods;
    size_t n, cap;
} tree;

static void tree_free(tree *t) {
    for (size_t i = 0; i < t->n; i++) free(t->names[i]);
    free(t->names);
    free(t->mods);
}

/* The container of dotted name path[0, len) ("" is root), made with its
 * parents when missing. Borrowed, or NULL + error. */
static ct_module *container(tree *t, ct_module *root, const char *path, size_t len) {
    if (len == 0) return root;
    for (size_t i = 0; i < t->n; i++)
        if (strlen(t->names[i]) == len && !strncmp(t->names[i], path, len)) return t->mods[i];
    const char *dot = NULL;
    for (size_t i = len; i-- > 0;)
        if (path[i] == '.') {
            dot = path + i;
            break;
        }
    ct_module *parent = container(t, root, path, dot ? (size_t)(dot - path) : 0);
    if (!parent) return NULL;
    const char *leaf = dot ? dot + 1 : path;
    size_t llen = len - (size_t)(leaf - path);
    char name[256];
    if (llen == 0 || llen >= sizeof name) {
        ct_set_error(CT_EFORMAT, "the state-dict name '%.*s' has an empty or overlong part", (int)len, path);
        return NULL;
    }
    memcpy(name, leaf, llen);
    name[llen] = '\0';
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 32;
        char **names = realloc(t->names, cap * sizeof *names);
        if (names) t->names = names;
        ct_module **mods = realloc(t->mods, cap * sizeof *mods);
        if (mods) t->mods = mods;
        if (!names || !mods) {
            ct_set_error(CT_ENOMEM, "out of host memory");
            return NULL;
        }
        t->cap = cap;
    }
    ct_module *m = ct_nn_add_module(parent, name, ct_nn_module("Module", NULL, NULL, NULL));
    if (!m || !(t->names[t->n] = malloc(len + 1))) return m ? (ct_set_error(CT_ENOMEM, "out of host memory"), NULL) : NULL;
    memcpy(t->names[t->n], path, len);
    t->names[t->n][len] = '\0';
    t->mods[t->n++] = m;
    return m;
}

/* Whether some state name lies under module `fqn`. */
static bool holds_state(const cti_pt2_tensors *w, const char *fqn) {
    size_t n = strlen(fqn);
    for (size_t i = 0; i < w->n; i++)
        if (!strncmp(w->items[i].name, fqn, n) && w->items[i].name[n] == '.') return true;
    return false;
}

static long find_tensor(const cti_pt2_tensors *w, const char *name) {
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->items[i].name, name)) return (long)i;
    return -1;
}

/* Registers state tensor `i` of w (a parameter, or a buffer) in the tree.
 * registered[i] receives the module's handle (borrowed). */
static int register_state(tree *t, ct_module *root, const cti_pt2_tensors *w, size_t i, bool parameter,
                          bool persistent, ct_tensor **registered) {
    if (registered[i]) return 0;
    const cti_pt2_tensor *item = &w->items[i];
    const char *dot = strrchr(item->name, '.'), *leaf = dot ? dot + 1 : item->name;
    ct_module *m = container(t, root, item->name, dot ? (size_t)(dot - item->name) : 0);
    if (!m) return ct_last_code();
    if (item->alias_of >= 0 && !registered[item->alias_of] && /* the tensor it ties to comes first */
        register_state(t, root, w, (size_t)item->alias_of, parameter, persistent, registered))
        return ct_last_code();
    const ct_tensor *src = item->alias_of >= 0 ? registered[item->alias_of] : ct_value_get_tensor(item->leaf);
    ct_tensor *t2 = ct_keep(ct_alias(src));
    if (!t2) return ct_last_code();
    ct_tensor *got = parameter ? ct_nn_add_parameter(m, leaf, t2) : ct_nn_add_buffer(m, leaf, t2, persistent);
    if (!got) return ct_last_code();
    registered[i] = got;
    return 0;
}

/* The module's parameters and buffers from the training program's weights:
 * first those the signature names, in its order, then any other entry of
 * the weights (a state-dict entry the forward never reads). */
static int build_state(ct_module *root, const cti_pt2_program *p, const cti_pt2_tensors *w, const cti_pt2_tensors *c,
                       ct_tensor **inputs, bool *owns) {
    tree t = {0};
    ct_tensor **reg_w = calloc(w->n + 1, sizeof *reg_w), **reg_c = calloc(c->n + 1, sizeof *reg_c);
    int rc = reg_w && reg_c ? 0 : ct_set_error(CT_ENOMEM, "out of host memory");
    for (size_t i = 0; !rc && i < p->nmodules; i++)
        if (holds_state(w, p->modules[i]) && !container(&t, root, p->modules[i], strlen(p->modules[i])))
            rc = ct_last_code();
    for (size_t i = 0; !rc && i < p->graph.ninputs; i++) {
        const cti_pt2_in_spec *sp = &p->in_specs[i];
        if (sp->kind == CT_PT2_IN_PARAMETER || sp->kind == CT_PT2_IN_BUFFER) {
            bool param = sp->kind == CT_PT2_IN_PARAMETER, persistent = param || sp->persistent;
            const cti_pt2_tensors *from = persistent ? w : c;
            ct_tensor **reg = persistent ? reg_w : reg_c;
            long k = find_tensor(from, sp->target);
            if (k < 0 && !persistent && (k = find_tensor(w, sp->target)) >= 0) from = w, reg = reg_w;
            if (k < 0) {
                rc = ct_set_error(CT_EFORMAT, "the %s '%s' has no weights in the archive (truncated or damaged?)",
                                  param ? "parameter" : "buffer", sp->target);
                break;
            }
            if (!(rc = register_state(&t, root, from, (size_t)k, param, persistent, reg))) inputs[i] = reg[k];
        } else if (sp->kind == CT_PT2_IN_CONSTANT_TENSOR) {
            long k = find_tensor(c, sp->target);
            if (k < 0) {
                rc = ct_set_error(CT_EFORMAT, "the constant '%s' is missing from the archive", sp->target);
                break;
            }
            long o = c->items[k].alias_of >= 0 ? c->items[k].alias_of : k;
            if (!(inputs[i] = ct_keep(ct_alias(ct_value_get_tensor(c->items[o].leaf))))) rc = ct_last_code();
            owns[i] = true;
        }
    }
    for (size_t i = 0; !rc && i < w->n; i++)
        if (!reg_w[i]) rc = register_state(&t, root, w, i, w->items[i].is_param, true, reg_w);
    tree_free(&t);
    free(reg_w);
    free(reg_c);
    return rc;
}

/* Frozen parameters (requires_grad=False in Python) stay frozen. */
static int freeze_as_traced(const cti_pt2_program *p, ct_tensor **inputs) {
    for (size_t i = 0; i < p->graph.ninputs; i++) {
        if (p->in_specs[i].kind != CT_PT2_IN_PARAMETER) continue;
        const cti_pt2_meta *m = p->graph.slot_meta[p->graph.inputs[i].slot];
        if (m && !m->requires_grad && ct_set_requires_grad(inputs[i], false)) return ct_last_code();
    }
    return 0;
}

/* ---- programs -------------------------------------------------------------------------- */

static int check_program(const exported *ex, const cti_pt2_program *p) {
    for (size_t i = 0; i < p->graph.noutputs; i++) {
        cti_pt2_out_kind k = p->out_specs[i].kind;
        if (k == CT_PT2_OUT_GRADIENT)
            return ct_set_error(CT_ENOTSUP, "%s: program '%s' is a joint forward-backward graph (it returns "
                                "gradients): export the forward alone (torch.export.export)", ex->path, p->name);
        if (k == CT_PT2_OUT_TOKEN)
            return ct_set_error(CT_ENOTSUP, "%s: program '%s' threads effect tokens (ops with side effects), which "
                                "ctrial cannot run", ex->path, p->name);
    }
    for (size_t i = 0; i < p->graph.ninputs; i++) {
        cti_pt2_in_kind k = p->in_specs[i].kind;
        if (k == CT_PT2_IN_CUSTOM_OBJ || k == CT_PT2_IN_TOKEN)
            return ct_set_error(CT_ENOTSUP, "%s: program '%s' takes %s '%s', which ctrial cannot make", ex->path,
                                p->name, k == CT_PT2_IN_TOKEN ? "an effect token" : "a script object",
                                p->in_specs[i].target);
    }
    return 0;
}

/* The graph inputs the caller's flat leaves go to, in order. */
static int lay_user(program *pr) {
    const cti_pt2_program *p = pr->prog;
    pr->user = calloc(p->graph.ninputs + 1, sizeof *pr->user);
    pr->buffers = calloc(p->graph.ninputs + 1, sizeof *pr->buffers);
    if (!pr->user || !pr->buffers) return ct_set_error(CT_ENOMEM, "out of host memory");
    for (size_t i = 0; i < p->graph.ninputs; i++) {
        cti_pt2_in_kind k = p->in_specs[i].kind;
        if (k == CT_PT2_IN_USER || k == CT_PT2_IN_CONSTANT_INPUT) pr->user[pr->nuser++] = i;
        if (k == CT_PT2_IN_BUFFER) pr->buffers[i] = p->in_specs[i].target;
    }
    if (p->in_spec && p->in_spec->nleaves != pr->nuser)
        return ct_set_error(CT_EFORMAT, "program '%s': its input spec has %zu leaves for %zu user inputs", p->name,
                            p->in_spec->nleaves, pr->nuser);
    return 0;
}

static int plan(exported *ex, program *pr, bool eval_rewrite) {
    cti_export_mode mode = {eval_rewrite, pr->buffers};
    char what[700];
    snprintf(what, sizeof what, "%s: program '%s'%s", ex->path, pr->prog->name,
             eval_rewrite ? " (eval mode, flags rewritten)" : "");
    pr->plan = cti_export_plan_new(&pr->prog->graph, what, ex->traced_on, &mode);
    return pr->plan ? 0 : ct_last_code();
}

/* The eval program: its parameters and buffers are the module's, by name;
 * its constants its own. */
static int bind_eval(exported *ex, program *pr, const cti_pt2_archive *a) {
    const cti_pt2_program *p = pr->prog;
    cti_pt2_tensors c = {0};
    int rc = check_program(ex, p);
    if (!rc) rc = cti_pt2_read_tensors(a, p->name, true, cti_pth_libtorch_tensors(), &c);
    if (!rc && (!(pr->inputs = calloc(p->graph.ninputs + 1, sizeof *pr->inputs)) ||
                !(pr->owns_input = calloc(p->graph.ninputs + 1, sizeof *pr->owns_input))))
        rc = ct_set_error(CT_ENOMEM, "out of host memory");
    for (size_t i = 0; !rc && i < p->graph.ninputs; i++) {
        const cti_pt2_in_spec *sp = &p->in_specs[i];
        if (sp->kind == CT_PT2_IN_PARAMETER || sp->kind == CT_PT2_IN_BUFFER) {
            /* the module's tensor of that name: the one the training program
             * reads, else a state-dict entry it never reads */
            const cti_pt2_program *tp = ex->train.prog;
            for (size_t k = 0; !pr->inputs[i] && k < tp->graph.ninputs; k++)
                if (ex->train.inputs[k] && !ex->train.owns_input[k] && !strcmp(tp->in_specs[k].target, sp->target))
                    pr->inputs[i] = ex->train.inputs[k];
            for (size_t k = 0; !pr->inputs[i] && k < ct_nn_state_size(ex->self); k++) {
                const char *name = NULL;
                ct_tensor *t = ct_nn_state_at(ex->self, k, &name);
                if (name && !strcmp(name, sp->target)) pr->inputs[i] = t;
            }
            if (!pr->inputs[i])
                rc = ct_set_error(CT_EFORMAT, "%s: the eval program '%s' reads '%s', which the training program "
                                  "'%s' does not have: export both from one module", ex->path, p->name, sp->target,
                                  ex->train.prog->name);
        } else if (sp->kind == CT_PT2_IN_CONSTANT_TENSOR) {
            long k = find_tensor(&c, sp->target);
            if (k < 0) rc = ct_set_error(CT_EFORMAT, "%s: the constant '%s' of program '%s' is missing", ex->path,
                                         sp->target, p->name);
            else {
                long o = c.items[k].alias_of >= 0 ? c.items[k].alias_of : k;
                pr->owns_input[i] = true;
                if (!(pr->inputs[i] = ct_keep(ct_alias(ct_value_get_tensor(c.items[o].leaf))))) rc = ct_last_code();
            }
        }
    }
    cti_pt2_tensors_free(&c);
    if (!rc) rc = lay_user(pr);
    if (!rc) rc = plan(ex, pr, false);
    return rc;
}

/* The program the archive's training graph runs as: opts->program, else
 * "model", else the only one. */
static int choose(const cti_pt2_archive *a, const ct_export_opts *o, const char **train, const char **eval) {
    char list[512] = "";
    for (size_t i = 0; i < a->nmodels; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", i ? ", " : "", a->models[i]);
    if (o->program) {
        if (!cti_pt2_has_model(a, o->program))
            return ct_set_error(CT_EINVAL, "%s: no program '%s' in the archive (it has %s)", a->path, o->program,
                                list);
        *train = o->program;
    } else if (cti_pt2_has_model(a, "model")) *train = "model";
    else if (a->nmodels == 1) *train = a->models[0];
    else
        return ct_set_error(CT_EINVAL, "%s: the archive has several programs (%s) and none is 'model': name the "
                            "training one in ct_export_opts.program", a->path, list);
    *eval = NULL;
    if (o->eval_program && o->eval_program[0]) {
        if (!cti_pt2_has_model(a, o->eval_program))
            return ct_set_error(CT_EINVAL, "%s: no program '%s' in the archive (it has %s)", a->path, o->eval_program,
                                list);
        *eval = o->eval_program;
    } else if (!o->eval_program && strcmp(*train, "eval") && cti_pt2_has_model(a, "eval")) *eval = "eval";
    return 0;
}

static ct_value *forward(ct_module *self, const ct_value *args, const ct_value *kwargs);

ct_module *ct_nn_load_exported(const char *path, const ct_export_opts *opts) {
    ct_export_opts o = opts ? *opts : ct_export_default_opts();
    if (!path) {
        ct_set_error(CT_EINVAL, "ct_nn_load_exported: path is NULL");
        return NULL;
    }
    cti_pt2_archive a;
    if (cti_pt2_open(path, &a)) return NULL;
    exported *ex = calloc(1, sizeof *ex);
    cti_pt2_tensors w = {0}, c = {0};
    const char *train = NULL, *eval = NULL;
    int rc = ex && (ex->path = malloc(strlen(path) + 1)) && strcpy(ex->path, path) ? 0 : ct_set_error(CT_ENOMEM, "out of host memory");
    if (!rc) rc = choose(&a, &o, &train, &eval);
    if (!rc && !(ex->train.prog = cti_pt2_read_program(&a, train))) rc = ct_last_code();
    if (!rc) rc = check_program(ex, ex->train.prog);
    if (!rc) rc = cti_pt2_read_tensors(&a, train, false, cti_pth_libtorch_tensors(), &w);
    if (!rc) rc = cti_pt2_read_tensors(&a, train, true, cti_pth_libtorch_tensors(), &c);
    ct_module *self = NULL;
    if (!rc && !(self = ct_nn_module_value(kTypeName, forward, ex, exported_free))) rc = ct_last_code();
    if (self) ex->self = self;
    const cti_pt2_program *p = ex ? ex->train.prog : NULL;
    if (!rc) {
        snprintf(ex->what, sizeof ex->what, "%s: program '%s'", path, train);
        ex->traced_on = ct_cpu();
        for (size_t i = 0; i < p->graph.ninputs; i++) {
            const cti_pt2_meta *m = p->graph.inputs[i].slot >= 0 ? p->graph.slot_meta[p->graph.inputs[i].slot] : NULL;
            if (m && p->in_specs[i].kind == CT_PT2_IN_PARAMETER) {
                ex->traced_on = m->device;
                break;
            }
        }
        size_t n = p->graph.ninputs + 1;
        if (!(ex->train.inputs = calloc(n, sizeof *ex->train.inputs)) ||
            !(ex->train.owns_input = calloc(n, sizeof *ex->train.owns_input)))
            rc = ct_set_error(CT_ENOMEM, "out of host memory");
    }
    if (!rc) rc = build_state(self, p, &w, &c, ex->train.inputs, ex->train.owns_input);
    if (!rc) rc = freeze_as_traced(p, ex->train.inputs);
    if (!rc) rc = lay_user(&ex->train);
    if (!rc) rc = plan(ex, &ex->train, false);
    if (!rc && eval) {
        if (!(ex->eval.prog = cti_pt2_read_program(&a, eval))) rc = ct_last_code();
        else rc = bind_eval(ex, &ex->eval, &a);
    } else if (!rc) {
        /* the training graph with eval()'s flags, on the same inputs */
        ex->eval = ex->train;
        ex->eval.shared = true;
        ex->eval.plan = NULL;
        ex->eval.inputs = NULL;
        ex->eval.owns_input = NULL;
        ex->eval.buffers = NULL;
        ex->eval.user = NULL;
        ex->eval.nuser = 0;
        size_t n = p->graph.ninputs + 1;
        if (!(ex->eval.inputs = calloc(n, sizeof *ex->eval.inputs)) ||
            !(ex->eval.owns_input = calloc(n, sizeof *ex->eval.owns_input)))
            rc = ct_set_error(CT_ENOMEM, "out of host memory");
        for (size_t i = 0; !rc && i < p->graph.ninputs; i++)
            if (ex->train.inputs[i] && ex->train.owns_input[i]) {
                ex->eval.inputs[i] = ct_keep(ct_alias(ex->train.inputs[i]));
                ex->eval.owns_input[i] = true;
                if (!ex->eval.inputs[i]) rc = ct_last_code();
            } else ex->eval.inputs[i] = ex->train.inputs[i];
        if (!rc) rc = lay_user(&ex->eval);
        if (!rc) rc = plan(ex, &ex->eval, true);
    }
    cti_pt2_tensors_free(&w);
    cti_pt2_tensors_free(&c);
    cti_pt2_close(&a);
    if (rc) {
        if (self) ct_nn_free(self); /* frees ex too */
        else exported_free(ex);
        return NULL;
    }
    return self;
}

/* ---- a call ------------------------------------------------------------------------------ */

static const char *ordinal(size_t i, char *buf, size_t len) {
    static const char *const th[] = {"th", "st", "nd", "rd"};
    size_t n = i + 1, k = (n % 100 >= 11 && n % 100 <= 13) || n % 10 > 3 ? 0 : n % 10;
    snprintf(buf, len, "%zu%s", n, th[k]);
    return buf;
}

/* The name of user input j (its forward argument's, when known). */
static const char *user_name(const program *pr, size_t j) {
    const cti_pt2_program *p = pr->prog;
    const char *t = p->in_specs[pr->user[j]].target;
    return t && t[0] ? t : j < p->narg_names ? p->arg_names[j] : "?";
}

/* Flattens value v by spec s into leaves[*k ...]. `path` names v. */
static int flatten(const exported *ex, const cti_pt2_spec *s, const ct_value *v, const ct_value **leaves, size_t *k,
                   const char *path) {
    if (s->kind == CT_PT2_SPEC_LEAF) {
        leaves[(*k)++] = v;
        return 0;
    }
    ct_value_kind vk = v ? ct_value_kind_of(v) : CT_VALUE_NONE;
    char sub[256];
    if (s->kind == CT_PT2_SPEC_DICT) {
        if (vk != CT_VALUE_DICT || ct_value_len(v) != s->n)
            return ct_set_error(CT_EINVAL, "%s: %s must be a dict of %zu keys, as the program was exported with; got "
                                "a %s of %zu", ex->what, path, s->n, ct_value_kind_name(vk), v ? ct_value_len(v) : 0);
        for (size_t i = 0; i < s->n; i++) {
            const ct_value *e = s->int_keys[i] ? ct_value_dict_get_int(v, strtoll(s->keys[i], NULL, 10))
                                               : ct_value_dict_get(v, s->keys[i]);
            if (!e)
                return ct_set_error(CT_EINVAL, "%s: %s has no key '%s', which the program was exported with",
                                    ex->what, path, s->keys[i]);
            snprintf(sub, sizeof sub, "%s['%s']", path, s->keys[i]);
            if (flatten(ex, &s->children[i], e, leaves, k, sub)) return ct_last_code();
        }
        return 0;
    }
    if ((vk != CT_VALUE_TUPLE && vk != CT_VALUE_LIST) || ct_value_len(v) != s->n)
        return ct_set_error(CT_EINVAL, "%s: %s must be a %s of %zu, as the program was exported with; got a %s of %zu",
                            ex->what, path, s->kind == CT_PT2_SPEC_LIST ? "list" : "tuple", s->n,
                            ct_value_kind_name(vk), v ? ct_value_len(v) : 0);
    for (size_t i = 0; i < s->n; i++) {
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        if (flatten(ex, &s->children[i], ct_value_list_get(v, i), leaves, k, sub)) return ct_last_code();
    }
    return 0;
}

/* The caller's (args, kwargs) as the program's flat user inputs. */
static int flatten_call(const exported *ex, const program *pr, const ct_value *args, const ct_value *kwargs,
                        const ct_value **leaves) {
    const cti_pt2_spec *in = pr->prog->in_spec;
    size_t nargs = args ? ct_value_len(args) : 0, nkw = kwargs ? ct_value_len(kwargs) : 0, k = 0;
    if (!in || in->kind != CT_PT2_SPEC_TUPLE || in->n != 2) { /* no spec: the flat inputs, by position */
        if (nargs != pr->nuser || nkw)
            return ct_set_error(CT_EINVAL, "%s: takes %zu positional arguments, got %zu (and %zu keywords)", ex->what,
                                pr->nuser, nargs, nkw);
        for (size_t i = 0; i < nargs; i++) leaves[i] = ct_value_list_get(args, i);
        return 0;
    }
    const cti_pt2_spec *pos = &in->children[0], *kw = &in->children[1];
    if (nargs != pos->n)
        return ct_set_error(CT_EINVAL, "%s: takes %zu positional argument%s, got %zu", ex->what, pos->n,
                            pos->n == 1 ? "" : "s", nargs);
    for (size_t i = 0; i < pos->n; i++) {
        char path[128], o[32];
        const char *name = i < pr->prog->narg_names ? pr->prog->arg_names[i] : NULL;
        if (name) snprintf(path, sizeof path, "argument '%s'", name);
        else snprintf(path, sizeof path, "the %s argument", ordinal(i, o, sizeof o));
        if (flatten(ex, &pos->children[i], ct_value_list_get(args, i), leaves, &k, path)) return ct_last_code();
    }
    if (kw->kind != CT_PT2_SPEC_DICT) return ct_set_error(CT_EFORMAT, "%s: the keywords' spec is not a dict", ex->what);
    for (size_t i = 0; i < nkw; i++) { /* every keyword given is one the program knows */
        const char *key = NULL;
        ct_value_dict_at(kwargs, i, &key, NULL);
        bool known = false;
        for (size_t j = 0; key && j < kw->n; j++) known = known || !strcmp(kw->keys[j], key);
        if (!known)
            return ct_set_error(CT_EINVAL, "%s: keyword argument '%s' was not given when the program was exported",
                                ex->what, key ? key : "?");
    }
    for (size_t i = 0; i < kw->n; i++) {
        const ct_value *e = kwargs ? ct_value_dict_get(kwargs, kw->keys[i]) : NULL;
        char path[300];
        snprintf(path, sizeof path, "keyword argument '%s'", kw->keys[i]);
        if (!e) { /* absent: a constant input keeps its exported value; a tensor is missing */
            size_t first = k;
            for (size_t j = 0; j < kw->children[i].nleaves; j++) leaves[k++] = NULL;
            if (kw->children[i].nleaves == 1 && pr->prog->in_specs[pr->user[first]].kind == CT_PT2_IN_CONSTANT_INPUT)
                continue;
            return ct_set_error(CT_EINVAL, "%s: %s is missing", ex->what, path);
        }
        if (flatten(ex, &kw->children[i], e, leaves, &k, path)) return ct_last_code();
    }
    return 0;
}

typedef struct {
    const char *symbol;
    int64_t value;
    const char *input; /* where it was bound */
} binding;

static int check_dims(const exported *ex, const program *pr, size_t j, const ct_tensor *t, const cti_pt2_meta *m,
                      binding *b, size_t *nb, size_t maxb) {
    char want[256], got[256], o[32];
    int nd = ct_ndim(t);
    const char *name = user_name(pr, j);
    bool dtype_ok = !m->dtype_known || ct_dtype_of(t) == m->dtype;
    if (!dtype_ok || nd != m->ndim) {
        ct_describe(t, got, sizeof got);
        return ct_set_error(dtype_ok ? CT_ESHAPE : CT_EDTYPE, "%s: input '%s' (%s) must be %s, got %s", ex->what,
                            name, ordinal(j, o, sizeof o), cti_pt2_meta_text(m, want, sizeof want), got);
    }
    for (int d = 0; d < nd; d++) {
        const cti_pt2_dim *dim = &m->dims[d];
        int64_t size = ct_size(t, d);
        if (dim->size >= 0 && size != dim->size) {
            ct_describe(t, got, sizeof got);
            return ct_set_error(CT_ESHAPE, "%s: input '%s' (%s) must be %s (dimension %d was exported static), got %s",
                                ex->what, name, ordinal(j, o, sizeof o), cti_pt2_meta_text(m, want, sizeof want), d,
                                got);
        }
        if (dim->size >= 0 || !dim->symbol) continue;
        size_t i = 0;
        while (i < *nb && strcmp(b[i].symbol, dim->symbol)) i++;
        if (i < *nb) {
            if (b[i].value != size)
                return ct_set_error(CT_ESHAPE, "%s: dimension %d of input '%s' is %s, which is %" PRId64 " in input "
                                    "'%s' but %" PRId64 " here", ex->what, d, name, dim->symbol, b[i].value, b[i].input,
                                    size);
            continue;
        }
        for (size_t r = 0; r < pr->prog->nranges; r++) {
            const cti_pt2_range *rg = &pr->prog->ranges[r];
            if (strcmp(rg->symbol, dim->symbol) || (size >= rg->min && size <= rg->max)) continue;
            char hi[32];
            if (rg->max == INT64_MAX) snprintf(hi, sizeof hi, "inf");
            else snprintf(hi, sizeof hi, "%" PRId64, rg->max);
            return ct_set_error(CT_ESHAPE, "%s: dimension %d of input '%s' (%s) must be in [%" PRId64 ", %s] as exported, "
                                "got %" PRId64, ex->what, d, name, dim->symbol, rg->min, hi, size);
        }
        if (*nb < maxb) b[(*nb)++] = (binding){dim->symbol, size, name};
    }
    return 0;
}

/* The graph's constant for a constant input equals what the caller gave. */
static bool same_constant(const cti_pt2_arg *c, const ct_value *v) {
    ct_value_kind k = ct_value_kind_of(v);
    int64_t i;
    double f;
    bool b;
    switch (c->kind) {
    case CT_PT2_NONE: return k == CT_VALUE_NONE;
    case CT_PT2_INT: return k == CT_VALUE_INT && !ct_value_get_int(v, &i) && i == c->i;
    case CT_PT2_FLOAT:
        return (k == CT_VALUE_FLOAT && !ct_value_get_float(v, &f) && f == c->f) ||
               (k == CT_VALUE_INT && !ct_value_get_int(v, &i) && (double)i == c->f);
    case CT_PT2_BOOL: return k == CT_VALUE_BOOL && !ct_value_get_bool(v, &b) && b == c->b;
    case CT_PT2_STR: return k == CT_VALUE_STR && !strcmp(ct_value_get_str(v), c->s);
    default: return false;
    }
}

/* The caller's leaves into the graph inputs' values, checked. */
static int bind_inputs(const exported *ex, const program *pr, const ct_value **leaves, cti_export_value *vals) {
    const cti_pt2_graph *g = &pr->prog->graph;
    binding b[64];
    size_t nb = 0;
    for (size_t i = 0; i < g->ninputs; i++)
        if (pr->inputs[i]) vals[g->inputs[i].slot] = (cti_export_value){pr->inputs[i], false, 0, 0, false};
    for (size_t j = 0; j < pr->nuser; j++) {
        const cti_pt2_arg *in = &g->inputs[pr->user[j]];
        const ct_value *v = leaves[j];
        const char *name = user_name(pr, j);
        char o[32];
        if (pr->prog->in_specs[pr->user[j]].kind == CT_PT2_IN_CONSTANT_INPUT) {
            if (v && !same_constant(in, v))
                return ct_set_error(CT_EINVAL, "%s: input '%s' was exported as a constant and takes no other value "
                                    "(export the program with the value you pass, or make it a tensor)", ex->what, name);
            continue;
        }
        if (in->kind == CT_PT2_TENSOR) {
            const ct_tensor *t = v && ct_value_kind_of(v) == CT_VALUE_TENSOR ? ct_value_get_tensor(v) : NULL;
            if (!t)
                return ct_set_error(CT_EINVAL, "%s: input '%s' (%s) must be a tensor, got %s", ex->what, name,
                                    ordinal(j, o, sizeof o), v ? ct_value_kind_name(ct_value_kind_of(v)) : "nothing");
            const cti_pt2_meta *m = g->slot_meta[in->slot];
            if (m && check_dims(ex, pr, j, t, m, b, &nb, sizeof b / sizeof b[0])) return ct_last_code();
            vals[in->slot] = (cti_export_value){(ct_tensor *)t, false, 0, 0, false};
        } else if (in->kind == CT_PT2_SYM) {
            cti_export_value *x = &vals[in->slot];
            int64_t i = 0;
            double f = 0;
            bool bb = false;
            ct_value_kind k = v ? ct_value_kind_of(v) : CT_VALUE_NONE;
            if (k == CT_VALUE_INT && !ct_value_get_int(v, &i)) x->i = i, x->f = (double)i, x->b = i != 0;
            else if (k == CT_VALUE_FLOAT && !ct_value_get_float(v, &f)) x->f = f, x->i = (int64_t)f, x->b = f != 0;
            else if (k == CT_VALUE_BOOL && !ct_value_get_bool(v, &bb)) x->b = bb, x->i = bb, x->f = bb;
            else
                return ct_set_error(CT_EINVAL, "%s: input '%s' (%s) must be a number, got %s", ex->what, name,
                                    ordinal(j, o, sizeof o), ct_value_kind_name(k));
        }
    }
    return 0;
}

/* One output leaf as a NEW value. */
static ct_value *output_leaf(const cti_pt2_graph *g, const cti_pt2_arg *a, cti_export_value *vals) {
    switch (a->kind) {
    case CT_PT2_TENSOR: {
        ct_tensor *t = vals[a->slot].t;
        return t ? ct_value_tensor(ct_alias(t)) : ct_value_none();
    }
    case CT_PT2_SYM: {
        const cti_export_value *v = &vals[a->slot];
        cti_pt2_slot_kind k = g->slot_kinds[a->slot];
        return k == CT_PT2_SLOT_INT ? ct_value_int(v->i) : k == CT_PT2_SLOT_FLOAT ? ct_value_float(v->f)
                                                                                  : ct_value_bool(v->b);
    }
    case CT_PT2_INT: return ct_value_int(a->i);
    case CT_PT2_FLOAT: return ct_value_float(a->f);
    case CT_PT2_BOOL: return ct_value_bool(a->b);
    case CT_PT2_STR: return ct_value_str(a->s);
    case CT_PT2_NONE: return ct_value_none();
    default: ct_set_error(CT_ENOTSUP, "an output of a kind ctrial cannot return"); return NULL;
    }
}

/* The user outputs leaves[*k ...] built by spec s: NEW value. */
static ct_value *unflatten(const cti_pt2_spec *s, ct_value *const *leaves, size_t *k) {
    if (s->kind == CT_PT2_SPEC_LEAF) return ct_value_copy(leaves[(*k)++], false);
    ct_value *c = s->kind == CT_PT2_SPEC_DICT ? ct_value_dict() : s->kind == CT_PT2_SPEC_LIST ? ct_value_list()
                                                                                             : ct_value_tuple();
    for (size_t i = 0; c && i < s->n; i++) {
        ct_value *e = unflatten(&s->children[i], leaves, k);
        int rc = !e ? ct_last_code()
                 : s->kind != CT_PT2_SPEC_DICT ? ct_value_list_append(c, e)
                 : s->int_keys[i] ? ct_value_dict_set_int(c, strtoll(s->keys[i], NULL, 10), e)
                                  : ct_value_dict_set(c, s->keys[i], e);
        if (rc) {
            ct_value_free(c);
            return NULL;
        }
    }
    return c;
}

static ct_value *outputs(const exported *ex, const program *pr, cti_export_value *vals) {
    const cti_pt2_program *p = pr->prog;
    const cti_pt2_graph *g = &p->graph;
    ct_value **leaves = calloc(g->noutputs + 1, sizeof *leaves);
    if (!leaves) {
        ct_set_error(CT_ENOMEM, "out of host memory");
        return NULL;
    }
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; !rc && i < g->noutputs; i++) {
        cti_pt2_out_kind k = p->out_specs[i].kind;
        if (k != CT_PT2_OUT_USER && k != CT_PT2_OUT_LOSS) continue;
        if (!(leaves[n++] = output_leaf(g, &g->outputs[i], vals))) rc = ct_last_code();
    }
    ct_value *r = NULL;
    if (!rc) {
        size_t k = 0;
        if (p->out_spec && p->out_spec->nleaves == n) r = unflatten(p->out_spec, leaves, &k);
        else if (p->out_spec) ct_set_error(CT_EFORMAT, "%s: the output spec has %zu leaves for %zu outputs", ex->what,
                                           p->out_spec->nleaves, n);
        else if (n == 1) r = ct_value_copy(leaves[0], false);
        else {
            r = ct_value_tuple();
            for (size_t i = 0; r && i < n; i++)
                if (ct_value_list_append(r, ct_value_copy(leaves[i], false))) {
                    ct_value_free(r);
                    r = NULL;
                }
        }
    }
    for (size_t i = 0; i < n; i++) ct_value_free(leaves[i]);
    free(leaves);
    return r;
}

/* Buffers, parameters and inputs the graph returns as mutated get the new
 * values (a functional graph's; the training IR mutates in place). */
static int apply_mutations(const exported *ex, const program *pr, const ct_value **leaves, cti_export_value *vals) {
    const cti_pt2_program *p = pr->prog;
    for (size_t i = 0; i < p->graph.noutputs; i++) {
        const cti_pt2_out_spec *sp = &p->out_specs[i];
        if (sp->kind != CT_PT2_OUT_BUFFER_MUTATION && sp->kind != CT_PT2_OUT_PARAMETER_MUTATION &&
            sp->kind != CT_PT2_OUT_USER_INPUT_MUTATION)
            continue;
        ct_tensor *dst = NULL;
        for (size_t j = 0; j < p->graph.ninputs && !dst; j++) {
            const cti_pt2_in_spec *in = &p->in_specs[j];
            if (strcmp(in->target, sp->target)) continue;
            if (sp->kind == CT_PT2_OUT_USER_INPUT_MUTATION && in->kind == CT_PT2_IN_USER) {
                for (size_t u = 0; u < pr->nuser; u++)
                    if (pr->user[u] == j && leaves[u]) dst = ct_value_get_tensor(leaves[u]);
            } else if (sp->kind != CT_PT2_OUT_USER_INPUT_MUTATION) dst = pr->inputs[j];
        }
        const ct_tensor *src = vals[p->graph.outputs[i].slot].t;
        if (!dst || !src)
            return ct_set_error(CT_EFORMAT, "%s: the graph mutates '%s', which it does not take", ex->what, sp->target);
        if (dst == src) continue;
        ct_guard *g = ct_no_grad();
        int rc = ct_copy_(dst, src);
        ct_guard_end(g);
        if (rc) return rc;
    }
    return 0;
}

/* The module's device: its first tensor's (the CPU when it has none). */
static ct_device module_device(const program *pr) {
    for (size_t i = 0; i < pr->prog->graph.ninputs; i++)
        if (pr->inputs[i] && !pr->owns_input[i]) return ct_device_of(pr->inputs[i]);
    return ct_cpu();
}

/* Lifted constants follow the module to its device (ct_nn_to_device moves
 * what the module registered; these are the program's own). */
static int place_constants(program *pr, ct_device device) {
    for (size_t i = 0; i < pr->prog->graph.ninputs; i++) {
        if (!pr->owns_input[i] || !pr->inputs[i]) continue;
        ct_device d = ct_device_of(pr->inputs[i]);
        if (d.type == device.type && (d.type == CT_CPU || d.index == device.index)) continue;
        ct_tensor *moved = ct_keep(ct_to_device(pr->inputs[i], device, false));
        if (!moved) return ct_last_code();
        ct_tensor_free(pr->inputs[i]);
        pr->inputs[i] = moved;
    }
    return 0;
}

static ct_value *forward(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    exported *ex = ct_nn_user(self);
    program *pr = ct_nn_is_training(self) ? &ex->train : &ex->eval;
    const cti_pt2_graph *g = &pr->prog->graph;
    const ct_value **leaves = calloc(pr->nuser + 1, sizeof *leaves);
    cti_export_value *vals = calloc(g->nslots + 1, sizeof *vals);
    ct_value *r = NULL;
    int rc = leaves && vals ? 0 : ct_set_error(CT_ENOMEM, "out of host memory");
    ct_device device = module_device(pr);
    if (!rc) rc = place_constants(pr, device);
    if (!rc) rc = flatten_call(ex, pr, args, kwargs, leaves);
    if (!rc) rc = bind_inputs(ex, pr, leaves, vals);
    if (!rc) rc = cti_export_plan_run(pr->plan, vals, device);
    if (!rc) rc = apply_mutations(ex, pr, leaves, vals);
    if (!rc) r = outputs(ex, pr, vals);
    if (vals) cti_export_values_clear(vals, g->nslots);
    free(vals);
    free(leaves);
    return r;
}

/* ---- what it takes and returns ------------------------------------------------------------ */

bool ct_nn_is_exported(const ct_module *m) {
    return m && ct_nn_type(m) && !strcmp(ct_nn_type(m), kTypeName) && ct_nn_user(m);
}

static const exported *exported_of(const ct_module *m) {
    if (!ct_nn_is_exported(m)) {
        ct_set_error(CT_EINVAL, "not a module of ct_nn_load_exported (type %s)", m ? ct_nn_type(m) : "NULL");
        return NULL;
    }
    return ct_nn_user(m);
}

int ct_nn_exported_arity(const ct_module *m, size_t *n_inputs, size_t *n_outputs) {
    const exported *ex = exported_of(m);
    if (!ex) return CT_EINVAL;
    const cti_pt2_program *p = ex->train.prog;
    size_t n = 0;
    for (size_t i = 0; i < p->graph.noutputs; i++)
        n += p->out_specs[i].kind == CT_PT2_OUT_USER || p->out_specs[i].kind == CT_PT2_OUT_LOSS;
    if (n_inputs) *n_inputs = ex->train.nuser;
    if (n_outputs) *n_outputs = n;
    return 0;
}

static int describe(const exported *ex, const cti_pt2_arg *a, const char *name, ct_exported_tensor *out) {
    const cti_pt2_graph *g = &ex->train.prog->graph;
    const cti_pt2_meta *m = a->kind == CT_PT2_TENSOR ? g->slot_meta[a->slot] : NULL;
    if (!m) return ct_set_error(CT_ENOTSUP, "%s: '%s' is not a tensor", ex->what, name);
    if (!m->dtype_known)
        return ct_set_error(CT_ENOTSUP, "%s: '%s' is %s", ex->what, name, cti_pt2_scalar_type_name(m->scalar_type));
    if (m->ndim > CT_EXPORT_MAX_DIMS)
        return ct_set_error(CT_ENOTSUP, "%s: '%s' has more than %d dimensions", ex->what, name, CT_EXPORT_MAX_DIMS);
    *out = (ct_exported_tensor){name, m->dtype, m->ndim, {0}};
    for (int d = 0; d < m->ndim; d++) out->size[d] = m->dims[d].size;
    return 0;
}

int ct_nn_exported_input(const ct_module *m, size_t i, ct_exported_tensor *out) {
    const exported *ex = exported_of(m);
    if (!ex) return CT_EINVAL;
    if (!out) return ct_set_error(CT_EINVAL, "ct_nn_exported_input: out is NULL");
    if (i >= ex->train.nuser)
        return ct_set_error(CT_EINDEX, "%s: input %zu of %zu", ex->what, i, ex->train.nuser);
    return describe(ex, &ex->train.prog->graph.inputs[ex->train.user[i]], user_name(&ex->train, i), out);
}

int ct_nn_exported_output(const ct_module *m, size_t i, ct_exported_tensor *out) {
    const exported *ex = exported_of(m);
    if (!ex) return CT_EINVAL;
    if (!out) return ct_set_error(CT_EINVAL, "ct_nn_exported_output: out is NULL");
    const cti_pt2_program *p = ex->train.prog;
    for (size_t k = 0, n = 0; k < p->graph.noutputs; k++) {
        if (p->out_specs[k].kind != CT_PT2_OUT_USER && p->out_specs[k].kind != CT_PT2_OUT_LOSS) continue;
        if (n++ != i) continue;
        const cti_pt2_arg *a = &p->graph.outputs[k];
        return describe(ex, a, a->slot >= 0 ? p->graph.slot_names[a->slot] : "a constant", out);
    }
    return ct_set_error(CT_EINDEX, "%s: output %zu does not exist", ex->what, i);
}
