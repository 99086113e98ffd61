/* libFuzzer target: the .pt2 reader of ct_nn_load_exported (src/pt2/) on
 * arbitrary bytes, with modules pt2, pth and base alone: no libtorch. Its
 * tensors are plain records (record_tensors.h). Two kinds of input:
 *  - a zip archive ("PK..."): opened from memory (cti_pt2_open_buffer),
 *    every program read and parsed, every weight and constant made;
 *  - anything else: a program's JSON, parsed directly (ct_pt2_program_
 *    parse), which a mutated archive rarely reaches past its CRCs.
 * Beyond "no crash, no leak, no undefined behaviour", it checks that
 *  - a failure is CT_EFORMAT, CT_ENOTSUP or CT_ENOMEM with nothing out;
 *  - a program that parses is one the interpreter can index without a
 *    check: every slot an argument or output names exists and is of the
 *    kind the argument says (a tensor where a tensor goes), every graph
 *    input has a signature entry, and nested graphs likewise;
 *  - every view made of a weight lies inside its storage (record_tensors
 *    aborts otherwise), and once the tensors are freed no storage is left.
 * Built by fuzz/CMakeLists.txt, run by fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pt2/pt2.h"
#include "record_tensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_slot(const cti_pt2_graph *g, int32_t slot, int kind) {
    if (slot < 0 || (size_t)slot >= g->nslots) abort();
    if (kind >= 0 && (int)g->slot_kinds[slot] != kind) abort();
}

static void check_graph(const cti_pt2_graph *g);

static void check_arg(const cti_pt2_graph *g, const cti_pt2_arg *a) {
    switch (a->kind) {
    case CT_PT2_TENSOR: check_slot(g, a->slot, CT_PT2_SLOT_TENSOR); break;
    case CT_PT2_SYM:
        check_slot(g, a->slot, -1);
        if (g->slot_kinds[a->slot] == CT_PT2_SLOT_TENSOR) abort();
        break;
    case CT_PT2_TENSORS:
    case CT_PT2_OPT_TENSORS:
        for (size_t i = 0; i < a->n; i++)
            if (a->slots[i] >= 0 || a->kind == CT_PT2_TENSORS) check_slot(g, a->slots[i], CT_PT2_SLOT_TENSOR);
        break;
    case CT_PT2_INTS:
    case CT_PT2_FLOATS:
    case CT_PT2_BOOLS:
        for (size_t i = 0; i < a->n; i++)
            if (a->slots[i] >= 0) check_slot(g, a->slots[i], -1);
        if ((a->kind == CT_PT2_INTS && a->n && !a->ints) || (a->kind == CT_PT2_FLOATS && a->n && !a->floats) ||
            (a->kind == CT_PT2_BOOLS && a->n && !a->bools))
            abort();
        break;
    case CT_PT2_STR:
    case CT_PT2_MEMORY_FORMAT:
        if (!a->s) abort();
        break;
    case CT_PT2_GRAPH:
        if (!a->graph) abort();
        check_graph(a->graph);
        break;
    default: break;
    }
}

static void check_graph(const cti_pt2_graph *g) {
    for (size_t i = 0; i < g->nslots; i++)
        if (!g->slot_names[i]) abort();
    for (size_t i = 0; i < g->ninputs; i++) check_arg(g, &g->inputs[i]);
    for (size_t i = 0; i < g->noutputs; i++) check_arg(g, &g->outputs[i]);
    for (size_t k = 0; k < g->nnodes; k++) {
        const cti_pt2_node *n = &g->nodes[k];
        if (!n->target) abort();
        for (size_t i = 0; i < n->nin; i++) {
            if (!n->in[i].name) abort();
            check_arg(g, &n->in[i]);
        }
        for (size_t i = 0; i < n->nout; i++) check_arg(g, &n->out[i]);
    }
}

static void check_spec(const cti_pt2_spec *s) {
    size_t leaves = s->kind == CT_PT2_SPEC_LEAF;
    for (size_t i = 0; i < s->n; i++) {
        check_spec(&s->children[i]);
        leaves += s->children[i].nleaves;
        if (s->kind == CT_PT2_SPEC_DICT && !s->keys[i]) abort();
    }
    if (leaves != s->nleaves) abort();
}

static void check_program(const cti_pt2_program *p) {
    check_graph(&p->graph);
    for (size_t i = 0; i < p->graph.ninputs; i++)
        if (!p->in_specs[i].target) abort();
    for (size_t i = 0; i < p->graph.noutputs; i++)
        if (!p->out_specs[i].target) abort();
    if (p->in_spec) check_spec(p->in_spec);
    if (p->out_spec) check_spec(p->out_spec);
}

static void expect_failure(void) {
    int rc = ct_last_code();
    if (rc != CT_EFORMAT && rc != CT_ENOTSUP && rc != CT_ENOMEM) abort();
    ct_clear_error();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || data[0] != 'P' || data[1] != 'K') {
        cti_pt2_program *p = cti_pt2_program_parse((const char *)data, size, "model", "fuzz.json");
        if (!p) expect_failure();
        else check_program(p);
        cti_pt2_program_free(p);
        return 0;
    }
    cti_pt2_archive a;
    if (cti_pt2_open_buffer(data, size, "fuzz.pt2", &a)) {
        expect_failure();
        return 0;
    }
    for (size_t m = 0; m < a.nmodels; m++) {
        cti_pt2_program *p = cti_pt2_read_program(&a, a.models[m]);
        if (!p) expect_failure();
        else check_program(p);
        cti_pt2_program_free(p);
        for (int constants = 0; constants < 2; constants++) {
            cti_pt2_tensors t;
            if (cti_pt2_read_tensors(&a, a.models[m], constants, &record_tensors, &t)) {
                if (t.n || t.items) abort();
                expect_failure();
                continue;
            }
            for (size_t i = 0; i < t.n; i++) {
                const cti_pt2_tensor *x = &t.items[i];
                if (!x->name || (x->alias_of >= 0 ? x->leaf || (size_t)x->alias_of >= i : !x->leaf)) abort();
            }
            cti_pt2_tensors_free(&t);
        }
    }
    cti_pt2_close(&a);
    if (record_live_storages) abort();
    return 0;
}
