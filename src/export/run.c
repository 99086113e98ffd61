/* src/export/run.c — a graph of an exported program, compiled once into a
 * plan of steps and run node by node through the dispatcher (ops.h).
 *
 * Compiling (cti_export_plan_new) does everything that does not depend on
 * the inputs: each ATen or custom operator is found by name (an unknown
 * one fails the load, naming the node and its line of Python), each
 * node's arguments become a ct_arg array with its constants in place and
 * a list of the slots to copy in before the call (tensors, sizes computed
 * from a dynamic batch, the module's device), and each value's last use is
 * found, so a tensor the graph no longer needs is freed after that node,
 * as Python drops it (autograd keeps what backward needs). In eval mode a
 * graph traced in train() has its flags rewritten here (ctrial/export.h).
 *
 * Running (cti_export_plan_run) is then, per node: fill the slots in, call
 * (ct_op_call_n, or ct_op_call_value when the operator returns sizes),
 * store the results, free the dead. Python's operators on sizes are
 * pyops.c's; torch.no_grad() blocks (wrap_with_set_grad_enabled) run
 * their own plan inside a grad-mode guard.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/ops.h"
#include "export/exported.h"

typedef enum {
    STEP_OP,       /* an operator of the dispatcher */
    STEP_SYM_SIZE, /* aten.sym_size.int(t, dim), read here */
    STEP_PYOP,     /* _operator.mul and friends (pyops.c) */
    STEP_GRAD,     /* higher_order.wrap_with_set_grad_enabled(enabled, body, *args) */
    STEP_SKIP,     /* eval mode: BatchNorm's num_batches_tracked.add_(1), not run; its result is its input */
} step_kind;

/* One slot copied into an argument before a call. */
typedef enum {
    F_TENSOR, F_INT, F_FLOAT, F_BOOL, F_LIST_TENSOR, F_LIST_OPT_TENSOR, F_LIST_INT, F_LIST_FLOAT, F_LIST_BOOL, F_DEVICE
} fill_kind;

typedef struct {
    fill_kind kind;
    uint32_t arg, elem;
    int32_t slot;
} fill;

typedef struct {
    step_kind kind;
    const cti_pt2_node *node;
    const ct_op *op;
    ct_arg *args;
    size_t nargs;
    fill *fills;
    size_t nfills;
    void **lists; /* the arrays the list arguments point into */
    size_t nlists;
    bool value_call;    /* the operator returns a size or a number: ct_op_call_value */
    size_t nflat;       /* tensors it returns, lists flattened */
    int32_t *flat_slots; /* per returned tensor: its slot, or -1 (unused) */
    int32_t *dead;      /* slots whose tensors are dead after this step */
    size_t ndead;
    int pyop;
    cti_export_plan *body; /* STEP_GRAD */
    bool grad_enabled;
} step;

struct cti_export_plan {
    const cti_pt2_graph *g;
    char *what;
    step *steps;
    size_t nsteps;
};

/* ---- messages ---------------------------------------------------------------------------- */

/* Prefixes the pending error with the plan and the node. Returns the code. */
static int node_failed(const cti_export_plan *p, const cti_pt2_node *node) {
    char where[768], msg[2048];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    return ct_set_error(ct_last_code() ? ct_last_code() : CT_ETORCH, "%s: %s: %s", p->what,
                        cti_pt2_node_text(node, where, sizeof where), msg);
}

static int node_error(const cti_export_plan *p, const cti_pt2_node *node, int code, const char *fmt, const char *a,
                      const char *b) {
    char where[768], msg[2048];
    snprintf(msg, sizeof msg, fmt, a, b);
    return ct_set_error(code, "%s: %s: %s", p->what, cti_pt2_node_text(node, where, sizeof where), msg);
}

/* ---- compiling ----------------------------------------------------------------------------- */

static void *list_alloc(step *s, size_t n, size_t elem) {
    void *p = calloc(n ? n : 1, elem);
    if (!p) return NULL;
    void **lists = realloc(s->lists, (s->nlists + 1) * sizeof *lists);
    if (!lists) {
        free(p);
        return NULL;
    }
    s->lists = lists;
    s->lists[s->nlists++] = p;
    return p;
}

static int add_fill(step *s, fill_kind kind, size_t arg, size_t elem, int32_t slot) {
    fill *f = realloc(s->fills, (s->nfills + 1) * sizeof *f);
    if (!f) return ct_set_error(CT_ENOMEM, "out of host memory");
    s->fills = f;
    s->fills[s->nfills++] = (fill){kind, (uint32_t)arg, (uint32_t)elem, slot};
    return 0;
}

static bool same_device(ct_device a, ct_device b) { return a.type == b.type && (a.type == CT_CPU || a.index == b.index); }

/* A list argument: an array the step owns, its constants in place, a
 * fill for each element a slot gives (a tensor, or a size computed from a
 * dynamic one). */
static int lay_list(step *s, const cti_pt2_arg *a, ct_arg *x, size_t at) {
    static const struct {
        size_t size;
        fill_kind fill;
    } kinds[] = {[CT_PT2_TENSORS] = {sizeof(ct_tensor *), F_LIST_TENSOR},
                 [CT_PT2_OPT_TENSORS] = {sizeof(ct_tensor *), F_LIST_OPT_TENSOR},
                 [CT_PT2_INTS] = {sizeof(int64_t), F_LIST_INT},
                 [CT_PT2_FLOATS] = {sizeof(double), F_LIST_FLOAT},
                 [CT_PT2_BOOLS] = {sizeof(bool), F_LIST_BOOL}};
    void *v = list_alloc(s, a->n, kinds[a->kind].size);
    if (!v) return ct_set_error(CT_ENOMEM, "out of host memory");
    switch (a->kind) {
    case CT_PT2_INTS: *x = ct_arg_ints(a->n, v); break;
    case CT_PT2_FLOATS: *x = ct_arg_floats(a->n, v); break;
    case CT_PT2_BOOLS: *x = ct_arg_bools(a->n, v); break;
    default: *x = ct_arg_tensors(a->n, v); break;
    }
    for (size_t i = 0; i < a->n; i++) {
        if (a->slots[i] >= 0) {
            if (add_fill(s, kinds[a->kind].fill, at, i, a->slots[i])) return ct_last_code();
        } else if (a->kind == CT_PT2_INTS) ((int64_t *)v)[i] = a->ints[i];
        else if (a->kind == CT_PT2_FLOATS) ((double *)v)[i] = a->floats[i];
        else if (a->kind == CT_PT2_BOOLS) ((bool *)v)[i] = a->bools[i];
    }
    return 0;
}

/* The ct_arg for argument a of a node, with its fills. */
static int lay_arg(const cti_export_plan *p, step *s, const cti_pt2_node *node, const cti_pt2_arg *a, size_t at,
                   ct_device traced_on) {
    const cti_pt2_graph *g = p->g;
    ct_arg *x = &s->args[at];
    switch (a->kind) {
    case CT_PT2_NONE:
        if (a->s)
            return node_error(p, node, CT_ENOTSUP, "argument '%s' is %s, which ctrial cannot pass to an operator",
                              a->name ? a->name : "", a->s);
        *x = CT_NONE;
        return 0;
    case CT_PT2_TENSOR: *x = CT_T(NULL); return add_fill(s, F_TENSOR, at, 0, a->slot);
    case CT_PT2_INT: *x = CT_I(a->i); return 0;
    case CT_PT2_FLOAT: *x = CT_F(a->f); return 0;
    case CT_PT2_BOOL: *x = CT_B(a->b); return 0;
    case CT_PT2_STR:
    case CT_PT2_MEMORY_FORMAT: *x = CT_S(a->s); return 0;
    case CT_PT2_LAYOUT:
        if (a->i != 7)
            return node_error(p, node, CT_ENOTSUP, "argument '%s' asks for a layout other than strided%s",
                              a->name ? a->name : "", "");
        *x = CT_S("strided");
        return 0;
    case CT_PT2_DTYPE: *x = CT_DTYPE(a->dtype); return 0;
    case CT_PT2_DEVICE:
        *x = CT_DEVICE(a->device);
        return same_device(a->device, traced_on) ? add_fill(s, F_DEVICE, at, 0, -1) : 0;
    case CT_PT2_SYM: {
        cti_pt2_slot_kind k = g->slot_kinds[a->slot];
        *x = k == CT_PT2_SLOT_INT ? CT_I(0) : k == CT_PT2_SLOT_FLOAT ? CT_F(0) : CT_B(false);
        return add_fill(s, k == CT_PT2_SLOT_INT ? F_INT : k == CT_PT2_SLOT_FLOAT ? F_FLOAT : F_BOOL, at, 0, a->slot);
    }
    case CT_PT2_TENSORS:
    case CT_PT2_OPT_TENSORS:
    case CT_PT2_INTS:
    case CT_PT2_FLOATS:
    case CT_PT2_BOOLS: return lay_list(s, a, x, at);
    case CT_PT2_GRAPH:
        return node_error(p, node, CT_ENOTSUP, "argument '%s' is a graph, which only a higher-order operator takes%s",
                          a->name ? a->name : "", "");
    }
    return node_error(p, node, CT_EFORMAT, "argument '%s' is of an unknown kind%s", a->name ? a->name : "", "");
}

/* eval()'s meaning for an argument of a graph traced in train(): the value
 * to pass instead, or NULL to keep it (ctrial/export.h, docs/api/export.md). */
static bool has_running_stats(const cti_pt2_node *node) {
    for (size_t i = 0; i < node->nin; i++)
        if (!strcmp(node->in[i].name, "running_mean")) return node->in[i].kind == CT_PT2_TENSOR;
    return false;
}

static void rewrite_for_eval(const cti_pt2_node *node, const cti_pt2_arg *a, ct_arg *x) {
    if (!a->name) return;
    if (a->kind == CT_PT2_BOOL && (!strcmp(a->name, "train") || !strcmp(a->name, "training"))) {
        /* dropout's masks, RNN dropout, rrelu's random slopes off; BatchNorm
         * on its running statistics when it has them (Python passes
         * `training or running_mean is None`) */
        bool batch_norm = strstr(node->op, "batch_norm") != NULL;
        if (!batch_norm || has_running_stats(node)) *x = CT_B(false);
    } else if (a->kind == CT_PT2_BOOL && !strcmp(a->name, "use_input_stats") && has_running_stats(node)) {
        *x = CT_B(false); /* InstanceNorm with track_running_stats */
    } else if (a->kind == CT_PT2_FLOAT && !strcmp(a->name, "dropout_p")) {
        *x = CT_F(0.0); /* scaled_dot_product_attention's dropout */
    }
}

/* BatchNorm's `self.num_batches_tracked.add_(1)`, which eval() never runs. */
static bool counts_batches(const cti_pt2_node *node, const cti_export_mode *mode, const cti_pt2_graph *g) {
    if (!mode || !mode->eval_rewrite || !mode->buffers || strcmp(node->op, "aten::add_.Tensor") || node->nin < 1 ||
        node->nout != 1 || node->in[0].kind != CT_PT2_TENSOR)
        return false;
    for (size_t i = 0; i < g->ninputs; i++) {
        if (g->inputs[i].slot != node->in[0].slot || !mode->buffers[i]) continue;
        const char *b = mode->buffers[i], *want = "num_batches_tracked";
        size_t n = strlen(b), w = strlen(want);
        return n >= w && !strcmp(b + n - w, want) && (n == w || b[n - w - 1] == '.');
    }
    return false;
}

static size_t flat_count(const cti_pt2_arg *out) {
    return out->kind == CT_PT2_TENSORS || out->kind == CT_PT2_OPT_TENSORS ? out->n : 1;
}

static int lay_op(cti_export_plan *p, step *s, const cti_pt2_node *node, ct_device traced_on, const cti_export_mode *mode) {
    const char *name = node->op;
    /* eval mode: BatchNorm's training-only op of the functional IR */
    if (mode && mode->eval_rewrite && !strcmp(name, "aten::_batch_norm_with_update.default"))
        name = "aten::_batch_norm_no_update.default";
    if (!(s->op = ct_op_find(name))) {
        char why[1024];
        snprintf(why, sizeof why, "%s", ct_last_error());
        return node_error(p, node, CT_EINVAL,
                          "%s (an operator of a library the program has not loaded: load it, e.g. with dlopen, "
                          "before ct_nn_load_exported)%s", why, "");
    }
    if (!strcmp(name, "aten::sym_size.int") && node->nin == 2 && node->in[0].kind == CT_PT2_TENSOR &&
        node->in[1].kind == CT_PT2_INT && node->nout == 1 && node->out[0].kind == CT_PT2_SYM) {
        s->kind = STEP_SYM_SIZE;
        return 0;
    }
    s->nargs = node->nin;
    s->args = calloc(s->nargs + 1, sizeof *s->args);
    if (!s->args) return ct_set_error(CT_ENOMEM, "out of host memory");
    /* positional arguments first, then keywords, as ct_call takes them */
    size_t at = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < node->nin; i++) {
            const cti_pt2_arg *a = &node->in[i];
            if (a->keyword != (pass == 1)) continue;
            if (lay_arg(p, s, node, a, at, traced_on)) return ct_last_code();
            if (mode && mode->eval_rewrite) rewrite_for_eval(node, a, &s->args[at]);
            if (a->keyword) s->args[at].name = a->name;
            at++;
        }
    for (size_t i = 0; i < node->nout; i++) {
        if (node->out[i].kind == CT_PT2_SYM) s->value_call = true;
        s->nflat += flat_count(&node->out[i]);
    }
    s->flat_slots = calloc(s->nflat + 1, sizeof *s->flat_slots);
    if (!s->flat_slots) return ct_set_error(CT_ENOMEM, "out of host memory");
    size_t k = 0;
    for (size_t i = 0; i < node->nout; i++) {
        const cti_pt2_arg *o = &node->out[i];
        if (o->kind == CT_PT2_TENSORS || o->kind == CT_PT2_OPT_TENSORS)
            for (size_t j = 0; j < o->n; j++) s->flat_slots[k++] = o->slots[j];
        else s->flat_slots[k++] = o->kind == CT_PT2_TENSOR ? o->slot : -1;
    }
    return 0;
}

static int lay_grad(cti_export_plan *p, step *s, const cti_pt2_node *node, ct_device traced_on) {
    if (node->nin < 2 || node->in[0].kind != CT_PT2_BOOL || node->in[1].kind != CT_PT2_GRAPH)
        return node_error(p, node, CT_EFORMAT, "expected (enabled, graph, *args)%s%s", "", "");
    const cti_pt2_graph *body = node->in[1].graph;
    if (body->ninputs != node->nin - 2 || body->noutputs != node->nout)
        return node_error(p, node, CT_EFORMAT, "its graph's inputs and outputs do not match the node's%s%s", "", "");
    for (size_t i = 2; i < node->nin; i++)
        if (node->in[i].kind != CT_PT2_TENSOR && node->in[i].kind != CT_PT2_SYM)
            return node_error(p, node, CT_ENOTSUP, "argument %s of a no_grad block is not a tensor or a size%s", "", "");
    for (size_t i = 0; i < node->nout; i++)
        if (node->out[i].kind != CT_PT2_TENSOR && node->out[i].kind != CT_PT2_SYM && node->out[i].kind != CT_PT2_NONE)
            return node_error(p, node, CT_ENOTSUP, "a no_grad block returns something other than tensors%s%s", "", "");
    s->kind = STEP_GRAD;
    s->grad_enabled = node->in[0].b;
    char what[512];
    snprintf(what, sizeof what, "%s: %s", p->what, node->name ? node->name : "wrap_with_set_grad_enabled");
    s->body = cti_export_plan_new(body, what, traced_on, NULL);
    return s->body ? 0 : ct_last_code();
}

static int lay_step(cti_export_plan *p, step *s, const cti_pt2_node *node, ct_device traced_on,
                    const cti_export_mode *mode) {
    s->node = node;
    if (node->op) {
        if (counts_batches(node, mode, p->g)) {
            s->kind = STEP_SKIP;
            return 0;
        }
        s->kind = STEP_OP;
        return lay_op(p, s, node, traced_on, mode);
    }
    if (!strcmp(node->target, "torch.ops.higher_order.wrap_with_set_grad_enabled"))
        return lay_grad(p, s, node, traced_on);
    if ((s->pyop = cti_export_pyop_find(node->target)) >= 0) {
        if (node->nout != 1 || node->out[0].kind != CT_PT2_SYM)
            return node_error(p, node, CT_EFORMAT, "a Python operator must return one number%s%s", "", "");
        for (size_t i = 0; i < node->nin; i++) {
            cti_pt2_arg_kind k = node->in[i].kind;
            if (k != CT_PT2_SYM && k != CT_PT2_INT && k != CT_PT2_FLOAT && k != CT_PT2_BOOL)
                return node_error(p, node, CT_EFORMAT, "a Python operator takes numbers%s%s", "", "");
        }
        s->kind = STEP_PYOP;
        return 0;
    }
    if (!strncmp(node->target, "torch.ops.higher_order.", 23))
        return node_error(p, node, CT_ENOTSUP,
                          "the higher-order operator %s is not supported (control flow such as torch.cond, "
                          "and autocast blocks, cannot be trained from C yet; torch.no_grad() blocks can)%s",
                          node->target + 23, "");
    return node_error(p, node, CT_ENOTSUP, "%s is neither an operator (torch.ops.*) nor a Python operator on "
                      "sizes%s", node->target, "");
}

/* Each tensor's last use, and the steps after which they die. */
static int lay_lifetimes(cti_export_plan *p) {
    const cti_pt2_graph *g = p->g;
    size_t n = g->nslots;
    long *last = malloc((n ? n : 1) * sizeof *last);
    if (!last) return ct_set_error(CT_ENOMEM, "out of host memory");
    for (size_t i = 0; i < n; i++) last[i] = -1;
    for (size_t k = 0; k < p->nsteps; k++) {
        const cti_pt2_node *node = p->steps[k].node;
        for (size_t i = 0; i < node->nin; i++) {
            const cti_pt2_arg *a = &node->in[i];
            if (a->slot >= 0) last[a->slot] = (long)k;
            for (size_t j = 0; a->slots && j < a->n; j++)
                if (a->slots[j] >= 0) last[a->slots[j]] = (long)k;
        }
        for (size_t i = 0; i < node->nout; i++) {
            const cti_pt2_arg *o = &node->out[i];
            if (o->slot >= 0 && last[o->slot] < (long)k) last[o->slot] = (long)k;
            for (size_t j = 0; o->slots && j < o->n; j++)
                if (o->slots[j] >= 0 && last[o->slots[j]] < (long)k) last[o->slots[j]] = (long)k;
        }
    }
    for (size_t i = 0; i < g->noutputs; i++) {
        const cti_pt2_arg *a = &g->outputs[i];
        if (a->slot >= 0) last[a->slot] = (long)p->nsteps; /* kept for the caller */
        for (size_t j = 0; a->slots && j < a->n; j++)
            if (a->slots[j] >= 0) last[a->slots[j]] = (long)p->nsteps;
    }
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        if (last[i] < 0 || last[i] >= (long)p->nsteps || g->slot_kinds[i] != CT_PT2_SLOT_TENSOR) continue;
        step *s = &p->steps[last[i]];
        int32_t *d = realloc(s->dead, (s->ndead + 1) * sizeof *d);
        if (!d) rc = ct_set_error(CT_ENOMEM, "out of host memory");
        else {
            s->dead = d;
            s->dead[s->ndead++] = (int32_t)i;
        }
    }
    free(last);
    return rc;
}

cti_export_plan *cti_export_plan_new(const cti_pt2_graph *g, const char *what, ct_device traced_on,
                                   const cti_export_mode *mode) {
    cti_export_plan *p = calloc(1, sizeof *p);
    if (!p || !(p->what = malloc(strlen(what) + 1)) || !(p->steps = calloc(g->nnodes + 1, sizeof *p->steps))) {
        ct_set_error(CT_ENOMEM, "out of host memory");
        cti_export_plan_free(p);
        return NULL;
    }
    strcpy(p->what, what);
    p->g = g;
    int rc = 0;
    for (size_t k = 0; !rc && k < g->nnodes; k++) {
        rc = lay_step(p, &p->steps[k], &g->nodes[k], traced_on, mode);
        p->nsteps = k + 1;
    }
    if (!rc) rc = lay_lifetimes(p);
    if (rc) {
        cti_export_plan_free(p);
        return NULL;
    }
    return p;
}

void cti_export_plan_free(cti_export_plan *p) {
    if (!p) return;
    for (size_t k = 0; p->steps && k < p->nsteps; k++) {
        step *s = &p->steps[k];
        free(s->args);
        free(s->fills);
        for (size_t i = 0; i < s->nlists; i++) free(s->lists[i]);
        free(s->lists);
        free(s->flat_slots);
        free(s->dead);
        cti_export_plan_free(s->body);
    }
    free(p->steps);
    free(p->what);
    free(p);
}

/* ---- running --------------------------------------------------------------------------- */

void cti_export_values_clear(cti_export_value *vals, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (vals[i].owned) ct_tensor_free(vals[i].t);
        vals[i] = (cti_export_value){0};
    }
}

static void set_tensor(cti_export_value *v, ct_tensor *t) {
    if (v->owned) ct_tensor_free(v->t);
    v->t = t;
    v->owned = t != NULL;
}

static int fill_in(const cti_export_plan *p, step *s, const cti_export_value *vals, ct_device device) {
    for (size_t i = 0; i < s->nfills; i++) {
        const fill *f = &s->fills[i];
        ct_arg *x = &s->args[f->arg];
        const cti_export_value *v = f->slot >= 0 ? &vals[f->slot] : NULL;
        switch (f->kind) {
        case F_TENSOR: /* an undefined tensor (an optional result) is None */
            if (v->t) *x = (ct_arg){CT_ARG_TENSOR, x->name, {.t = v->t}};
            else *x = (ct_arg){CT_ARG_NONE, x->name, {0}};
            break;
        case F_INT: x->u.i = v->i; break;
        case F_FLOAT: x->u.f = v->f; break;
        case F_BOOL: x->u.b = v->b; break;
        case F_LIST_TENSOR:
            if (!v->t) /* a Tensor[] element (not Tensor?[]) that an earlier node left undefined */
                return node_error(p, s->node, CT_EINVAL, "'%s' in a list of tensors is undefined%s",
                                  p->g->slot_names[f->slot], "");
            /* fall through */
        case F_LIST_OPT_TENSOR:
            ((const ct_tensor **)x->u.tensors.v)[f->elem] = v->t;
            break;
        case F_LIST_INT: ((int64_t *)x->u.ints.v)[f->elem] = v->i; break;
        case F_LIST_FLOAT: ((double *)x->u.floats.v)[f->elem] = v->f; break;
        case F_LIST_BOOL: ((bool *)x->u.bools.v)[f->elem] = v->b; break;
        case F_DEVICE: x->u.device = device; break;
        }
    }
    return 0;
}

/* A result of ct_op_call_value into the output o of the node. */
static int store_value(const cti_export_plan *p, const step *s, const cti_pt2_arg *o, const ct_value *r,
                       cti_export_value *vals) {
    ct_value_kind k = ct_value_kind_of(r);
    if (o->kind == CT_PT2_NONE) return 0;
    if (o->kind == CT_PT2_SYM) {
        cti_export_value *v = &vals[o->slot];
        cti_pt2_slot_kind want = p->g->slot_kinds[o->slot];
        int64_t i = 0;
        double f = 0;
        bool b = false;
        if (k == CT_VALUE_INT && !ct_value_get_int(r, &i)) v->i = i, v->f = (double)i, v->b = i != 0;
        else if (k == CT_VALUE_FLOAT && !ct_value_get_float(r, &f)) v->f = f, v->i = (int64_t)f, v->b = f != 0;
        else if (k == CT_VALUE_BOOL && !ct_value_get_bool(r, &b)) v->b = b, v->i = b, v->f = b;
        else return node_error(p, s->node, CT_ETORCH, "returned a %s where the graph expects a number%s",
                               ct_value_kind_name(k), "");
        (void)want;
        return 0;
    }
    if (o->kind == CT_PT2_TENSOR) {
        if (k == CT_VALUE_NONE) return 0;
        if (k != CT_VALUE_TENSOR)
            return node_error(p, s->node, CT_ETORCH, "returned a %s where the graph expects a tensor%s",
                              ct_value_kind_name(k), "");
        set_tensor(&vals[o->slot], ct_alias(ct_value_get_tensor(r)));
        return vals[o->slot].t ? 0 : ct_last_code();
    }
    if (ct_value_len(r) != o->n || (k != CT_VALUE_LIST && k != CT_VALUE_TUPLE))
        return node_error(p, s->node, CT_ETORCH, "returned a %s where the graph expects a list of tensors%s",
                          ct_value_kind_name(k), "");
    for (size_t j = 0; j < o->n; j++) {
        const ct_value *e = ct_value_list_get(r, j);
        if (o->slots[j] < 0 || ct_value_kind_of(e) != CT_VALUE_TENSOR) continue;
        set_tensor(&vals[o->slots[j]], ct_alias(ct_value_get_tensor(e)));
        if (!vals[o->slots[j]].t) return ct_last_code();
    }
    return 0;
}

static int run_op(const cti_export_plan *p, step *s, cti_export_value *vals) {
    const cti_pt2_node *node = s->node;
    if (s->value_call) {
        ct_value *r = ct_op_call_value(s->op, s->nargs, s->args);
        if (!r) return node_failed(p, node);
        int rc = 0;
        if (node->nout == 1) rc = store_value(p, s, &node->out[0], r, vals);
        else if (ct_value_len(r) != node->nout)
            rc = node_error(p, node, CT_ETORCH, "returned a different number of results than the graph expects%s%s",
                            "", "");
        else
            for (size_t i = 0; !rc && i < node->nout; i++)
                rc = store_value(p, s, &node->out[i], ct_value_list_get(r, i), vals);
        ct_value_free(r);
        return rc;
    }
    ct_tensor *small[8], **out = s->nflat <= 8 ? small : malloc(s->nflat * sizeof *out);
    if (!out) return ct_set_error(CT_ENOMEM, "out of host memory");
    int got = ct_op_call_n(s->op, s->nargs, s->args, s->nflat, out);
    int rc = 0;
    if (got < 0) rc = node_failed(p, node);
    else if ((size_t)got != s->nflat) {
        char n1[32], n2[32];
        snprintf(n1, sizeof n1, "%d", got);
        snprintf(n2, sizeof n2, "%zu", s->nflat);
        rc = node_error(p, node, CT_ETORCH, "returned %s tensors where the graph expects %s", n1, n2);
    }
    for (size_t i = 0; got >= 0 && i < s->nflat; i++) {
        if (!rc && s->flat_slots[i] >= 0) set_tensor(&vals[s->flat_slots[i]], out[i]);
        else ct_tensor_free(out[i]);
    }
    if (out != small) free(out);
    return rc;
}

static int run_pyop(const cti_export_plan *p, step *s, cti_export_value *vals) {
    const cti_pt2_node *node = s->node;
    cti_export_number args[3], r;
    if (node->nin > 3) return node_error(p, node, CT_EFORMAT, "too many arguments%s%s", "", "");
    for (size_t i = 0; i < node->nin; i++) {
        const cti_pt2_arg *a = &node->in[i];
        if (a->kind == CT_PT2_SYM) {
            const cti_export_value *v = &vals[a->slot];
            cti_pt2_slot_kind k = p->g->slot_kinds[a->slot];
            args[i] = (cti_export_number){k, v->i, v->f, v->b};
        } else if (a->kind == CT_PT2_INT) args[i] = (cti_export_number){CT_PT2_SLOT_INT, a->i, 0, false};
        else if (a->kind == CT_PT2_FLOAT) args[i] = (cti_export_number){CT_PT2_SLOT_FLOAT, 0, a->f, false};
        else args[i] = (cti_export_number){CT_PT2_SLOT_BOOL, 0, 0, a->b};
    }
    if (cti_export_pyop_apply(s->pyop, node->nin, args, &r)) return node_failed(p, node);
    cti_export_value *v = &vals[node->out[0].slot];
    v->i = r.kind == CT_PT2_SLOT_FLOAT ? (int64_t)r.f : r.kind == CT_PT2_SLOT_BOOL ? r.b : r.i;
    v->f = r.kind == CT_PT2_SLOT_FLOAT ? r.f : (double)v->i;
    v->b = r.kind == CT_PT2_SLOT_BOOL ? r.b : v->i != 0 || v->f != 0;
    return 0;
}

static int run_grad(const cti_export_plan *p, step *s, cti_export_value *vals, ct_device device) {
    const cti_pt2_node *node = s->node;
    const cti_pt2_graph *body = s->body->g;
    cti_export_value *inner = calloc(body->nslots + 1, sizeof *inner);
    if (!inner) return ct_set_error(CT_ENOMEM, "out of host memory");
    for (size_t i = 0; i < body->ninputs; i++) {
        const cti_pt2_arg *a = &node->in[i + 2];
        if (body->inputs[i].slot < 0) continue;
        inner[body->inputs[i].slot] = vals[a->slot];
        inner[body->inputs[i].slot].owned = false; /* borrowed from the outer graph */
    }
    ct_guard *g = s->grad_enabled ? ct_enable_grad() : ct_no_grad();
    int rc = cti_export_plan_run(s->body, inner, device);
    ct_guard_end(g);
    for (size_t i = 0; !rc && i < node->nout; i++) {
        const cti_pt2_arg *o = &node->out[i], *src = &body->outputs[i];
        if (o->kind == CT_PT2_NONE || src->slot < 0) continue;
        cti_export_value *from = &inner[src->slot];
        if (o->kind == CT_PT2_SYM) {
            vals[o->slot].i = from->i, vals[o->slot].f = from->f, vals[o->slot].b = from->b;
            continue;
        }
        if (from->owned) {
            set_tensor(&vals[o->slot], from->t);
            from->owned = false;
        } else set_tensor(&vals[o->slot], from->t ? ct_alias(from->t) : NULL);
    }
    cti_export_values_clear(inner, body->nslots);
    free(inner);
    return rc;
}

int cti_export_plan_run(cti_export_plan *p, cti_export_value *vals, ct_device device) {
    for (size_t k = 0; k < p->nsteps; k++) {
        step *s = &p->steps[k];
        const cti_pt2_node *node = s->node;
        int rc = 0;
        switch (s->kind) {
        case STEP_OP:
            rc = fill_in(p, s, vals, device);
            if (!rc) rc = run_op(p, s, vals);
            break;
        case STEP_SYM_SIZE: {
            const ct_tensor *t = vals[node->in[0].slot].t;
            int64_t dim = node->in[1].i, nd = ct_ndim(t);
            if (!t || dim < -nd || dim >= nd) {
                char d[32];
                snprintf(d, sizeof d, "%" PRId64, dim);
                rc = node_error(p, node, CT_EINDEX, "dimension %s of '%s' does not exist", d,
                                p->g->slot_names[node->in[0].slot]);
            } else vals[node->out[0].slot].i = ct_size(t, (int)dim);
            break;
        }
        case STEP_PYOP: rc = run_pyop(p, s, vals); break;
        case STEP_GRAD: rc = run_grad(p, s, vals, device); break;
        case STEP_SKIP: {
            cti_export_value *in = &vals[node->in[0].slot];
            if (node->out[0].kind == CT_PT2_TENSOR) set_tensor(&vals[node->out[0].slot], in->t ? ct_alias(in->t) : NULL);
            break;
        }
        }
        if (rc) return rc;
        for (size_t i = 0; i < s->ndead; i++) {
            cti_export_value *v = &vals[s->dead[i]];
            if (v->owned) {
                ct_tensor_free(v->t);
                v->t = NULL;
                v->owned = false;
            }
        }
    }
    return 0;
}
