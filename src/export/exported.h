/* src/export/exported.h — what the files of module export share: a graph
 * of a .pt2 program (pt2/pt2.h) compiled into a plan that run.c executes
 * node by node through the dispatcher (ops.h), and the values it runs on.
 * Internal to ctrial.
 *
 * module.c builds the ct_module (ctrial/export.h): parameters and buffers
 * under their state-dict names, one plan per program, and the forward that
 * binds the caller's arguments to the graph's inputs and builds the
 * outputs back into the tuples and dicts Python returned. run.c makes and
 * runs plans; pyops.c computes the graph's Python operators on sizes
 * (_operator.mul on a batch size).
 */
#ifndef CTRIAL_EXPORT_EXPORTED_H
#define CTRIAL_EXPORT_EXPORTED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrial/tensor.h"
#include "pt2/pt2.h"

/* A slot's value while a graph runs: a tensor (owned: a NEW handle the
 * run made, freed after its last use; else borrowed: a parameter, a
 * buffer, the caller's input) or a SymInt, SymFloat or SymBool. */
typedef struct {
    ct_tensor *t;
    bool owned;
    int64_t i;
    double f;
    bool b;
} cti_export_value;

typedef struct cti_export_plan cti_export_plan;

/* How a plan treats the flags of a graph traced in train() mode. */
typedef struct {
    bool eval_rewrite;          /* run it with eval()'s meaning (ctrial/export.h) */
    const char *const *buffers; /* per graph input: its buffer's state-dict name, or NULL */
} cti_export_mode;

/* Compiles graph g: every operator found in the dispatcher, every argument
 * laid out as a ct_arg (constants once, slots filled per call), the last
 * use of every value. `what` ("m.pt2: program 'model'") starts messages;
 * the graph's device arguments that name `traced_on` follow the module's
 * device at run time. NEW plan, or NULL + error naming the node. g must
 * outlive the plan. */
cti_export_plan *cti_export_plan_new(const cti_pt2_graph *g, const char *what, ct_device traced_on,
                                   const cti_export_mode *mode);
void cti_export_plan_free(cti_export_plan *p); /* accepts NULL */

/* Runs the plan on vals[0 .. g->nslots), whose graph inputs the caller has
 * set (borrowed). Afterwards the graph outputs' values are in vals (the
 * caller takes what it returns, then cti_export_values_clear). `device` is
 * the module's. Returns a status; the message names the node that failed
 * and the line of Python that made it. */
int cti_export_plan_run(cti_export_plan *p, cti_export_value *vals, ct_device device);
/* Frees the tensors vals[0..n) own and zeroes them. */
void cti_export_values_clear(cti_export_value *vals, size_t n);

/* ---- Python's operators on sizes (pyops.c) -------------------------------------------- */

/* The operator of a node's target ("_operator.mul", "math.trunc",
 * "torch.sym_max"), or -1 when it is none of them. */
int cti_export_pyop_find(const char *target);
/* Applies pyop `op` to n arguments; each argument is a number with its
 * kind (CT_PT2_SLOT_INT, _FLOAT or _BOOL: Python's int, float, bool) and
 * the result's kind is set as Python's would be. Returns a status
 * (CT_EINVAL for a wrong count, division by zero...). */
typedef struct {
    cti_pt2_slot_kind kind;
    int64_t i;
    double f;
    bool b;
} cti_export_number;
int cti_export_pyop_apply(int op, size_t n, const cti_export_number *args, cti_export_number *out);

#endif
