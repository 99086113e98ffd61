/* src/pt2/pt2.h — torch.export's .pt2 archive in pure C: its programs as
 * plain C data, its weights and constants made through the caller's
 * cti_pth_tensors table (pth/pth.h). Internal to ctrial.
 *
 * torch.export.save (torch 2.11) and torch.export.pt2_archive's
 * package_pt2 write an uncompressed zip (read by pth/zip_read.c) whose
 * entries live in one folder, <archive>/:
 *
 *     archive_format                          "pt2"
 *     archive_version, .data/version, byteorder ("little")
 *     models/<name>.json                      one ExportedProgram each; a
 *                                             single program is "model"
 *     data/weights/<name>_weights_config.json state-dict name -> {path_name,
 *                                             is_param, use_pickle, tensor_meta}
 *     data/weights/weight_<i>                 one storage's raw bytes
 *     data/constants/<name>_constants_config.json, tensor_<i>, custom_obj_<i>
 *     data/sample_inputs/<name>.pt            (not read)
 *
 * A program's JSON is torch/_export/serde/schema.py's ExportedProgram
 * (schema 8): a graph of nodes, each an operator ("torch.ops.aten.conv2d.
 * default"), a Python operator on sizes ("_operator.mul") or a
 * higher-order operator with graphs of its own, over named values; the
 * graph signature, which says which graph input is a parameter, a buffer,
 * a constant or the user's; and the pytree specs of the user's inputs and
 * outputs.
 *
 * graph.c turns the JSON into a cti_pt2_program whose every name is a slot
 * index checked to be defined before it is used, so the interpreter above
 * the shim (src/export/) indexes arrays and never looks a name up;
 * treespec.c reads the pytree specs; archive.c finds the programs and
 * reads the storages. Every field is untrusted: a bad one is CT_EFORMAT
 * naming the file, the entry and the JSON path. This module calls no shim
 * function, so it is fuzzed without libtorch (fuzz/fuzz_pt2.c).
 */
#ifndef CTRIAL_PT2_PT2_H
#define CTRIAL_PT2_PT2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrial/tensor.h"
#include "ctrial/value.h"
#include "pth/pth.h"

/* ---- values and arguments ------------------------------------------------------------ */

/* What a slot holds while a graph runs. */
typedef enum {
    CT_PT2_SLOT_TENSOR,
    CT_PT2_SLOT_INT,   /* a SymInt */
    CT_PT2_SLOT_FLOAT, /* a SymFloat */
    CT_PT2_SLOT_BOOL,  /* a SymBool */
} cti_pt2_slot_kind;

/* One argument (or output) of a node, of the graph or of the signature. */
typedef enum {
    CT_PT2_NONE,
    CT_PT2_TENSOR,      /* slot */
    CT_PT2_TENSORS,     /* n slots */
    CT_PT2_OPT_TENSORS, /* n slots, -1 for None (Tensor?[]) */
    CT_PT2_INT,         /* i */
    CT_PT2_FLOAT,       /* f */
    CT_PT2_BOOL,        /* b */
    CT_PT2_STR,         /* s */
    CT_PT2_INTS,        /* n: ints, or slots (>= 0) where a SymInt stands */
    CT_PT2_FLOATS,      /* n: floats, or slots */
    CT_PT2_BOOLS,       /* n: bools, or slots */
    CT_PT2_SYM,         /* slot: a SymInt, SymFloat or SymBool (the slot's kind says) */
    CT_PT2_DTYPE,       /* dtype; i holds the serialized ScalarType */
    CT_PT2_MEMORY_FORMAT, /* s: "contiguous_format", "channels_last", ... */
    CT_PT2_LAYOUT,      /* i: 7 strided (the only one accepted) */
    CT_PT2_DEVICE,      /* device */
    CT_PT2_GRAPH,       /* graph: a higher-order operator's body */
} cti_pt2_arg_kind;

typedef struct cti_pt2_graph cti_pt2_graph;

typedef struct {
    cti_pt2_arg_kind kind;
    char *name;       /* the schema's name of the argument ("" for Python and higher-order operators) */
    bool keyword;     /* passed by keyword (ArgumentKind KEYWORD) */
    int32_t slot;     /* TENSOR, SYM; -1 otherwise */
    int64_t i;
    double f;
    bool b;
    char *s;
    ct_dtype dtype;
    ct_device device;
    size_t n;         /* the lists */
    int32_t *slots;   /* per element: a slot, or -1 (a constant below, or None) */
    int64_t *ints;
    double *floats;
    bool *bools;
    cti_pt2_graph *graph;
} cti_pt2_arg;

/* One call. */
typedef struct {
    char *name;    /* the node's name ("conv2d") */
    char *target;  /* as serialized: "torch.ops.aten.conv2d.default", "_operator.mul" */
    char *op;      /* the dispatcher's name of an ATen or custom operator ("aten::conv2d.default"); NULL for others */
    char *source;  /* the user's line that made it ("File "m.py", line 10, in forward: x = self.conv(x)"), or NULL */
    cti_pt2_arg *in;
    size_t nin;
    cti_pt2_arg *out; /* TENSOR, TENSORS, SYM or NONE each */
    size_t nout;
} cti_pt2_node;

/* A dimension of a tensor the graph takes. */
typedef struct {
    int64_t size;  /* >= 0 when static; -1 when symbolic */
    char *symbol;  /* symbolic: the one symbol it is ("s77"), or NULL for an expression */
} cti_pt2_dim;

/* What the graph was traced with for one of its tensors. */
typedef struct {
    int64_t scalar_type; /* serialized ScalarType */
    bool dtype_known;    /* scalar_type is one of ct_dtype's */
    ct_dtype dtype;
    int ndim;
    cti_pt2_dim *dims;
    ct_device device;
    bool requires_grad;
} cti_pt2_meta;

struct cti_pt2_graph {
    size_t nslots;
    char **slot_names;
    cti_pt2_slot_kind *slot_kinds;
    cti_pt2_meta **slot_meta; /* per slot: what the tracer saw of a tensor, or NULL */
    cti_pt2_arg *inputs;      /* placeholders: TENSOR or SYM, or a constant (a constant input) */
    size_t ninputs;
    cti_pt2_arg *outputs;
    size_t noutputs;
    cti_pt2_node *nodes;
    size_t nnodes;
};

/* ---- pytree specs (treespec.c) -------------------------------------------------------- */

typedef enum {
    CT_PT2_SPEC_LEAF,  /* a tensor, a number or None */
    CT_PT2_SPEC_TUPLE, /* tuple, namedtuple (whose fields become a tuple's items) */
    CT_PT2_SPEC_LIST,
    CT_PT2_SPEC_DICT,  /* dict, OrderedDict, defaultdict: keys in context */
} cti_pt2_spec_kind;

typedef struct cti_pt2_spec {
    cti_pt2_spec_kind kind;
    char *type;        /* as written ("builtins.tuple"), for messages; NULL for a leaf */
    size_t n;
    struct cti_pt2_spec *children;
    char **keys;       /* DICT: each key as text */
    bool *int_keys;    /* DICT: whether key i is an int (its text is decimal) */
    size_t nleaves;    /* leaves under this node */
} cti_pt2_spec;

/* Parses a treespec_dumps string (format 1). NEW spec or NULL + CT_EFORMAT
 * naming `what`. */
cti_pt2_spec *cti_pt2_spec_parse(const char *text, const char *what);
void cti_pt2_spec_free(cti_pt2_spec *s); /* accepts NULL */

/* ---- programs (graph.c) ----------------------------------------------------------------- */

typedef enum {
    CT_PT2_IN_USER,            /* the caller's: a tensor or a SymInt */
    CT_PT2_IN_CONSTANT_INPUT,  /* the caller's, specialized to a constant (graph input is the constant) */
    CT_PT2_IN_PARAMETER,
    CT_PT2_IN_BUFFER,
    CT_PT2_IN_CONSTANT_TENSOR, /* a tensor the forward made, lifted out: data/constants */
    CT_PT2_IN_TOKEN,
    CT_PT2_IN_CUSTOM_OBJ,
} cti_pt2_in_kind;

typedef struct {
    cti_pt2_in_kind kind;
    char *target;    /* the state-dict or constant name; the user input's name */
    bool persistent; /* BUFFER */
} cti_pt2_in_spec;

typedef enum {
    CT_PT2_OUT_USER,
    CT_PT2_OUT_LOSS,
    CT_PT2_OUT_BUFFER_MUTATION,
    CT_PT2_OUT_PARAMETER_MUTATION,
    CT_PT2_OUT_USER_INPUT_MUTATION,
    CT_PT2_OUT_GRADIENT, /* to a parameter or a user input: joint graphs, refused */
    CT_PT2_OUT_TOKEN,
} cti_pt2_out_kind;

typedef struct {
    cti_pt2_out_kind kind;
    char *target; /* the mutated buffer, parameter or user input */
} cti_pt2_out_spec;

/* A symbol's range (range_constraints). */
typedef struct {
    char *symbol;
    int64_t min, max; /* max INT64_MAX when unbounded */
} cti_pt2_range;

typedef struct {
    char *name;               /* the model's name in the archive ("model") */
    int schema_major, schema_minor;
    bool training_ir;         /* verifiers name "TRAINING" (torch.export.export's IR) */
    cti_pt2_graph graph;
    cti_pt2_in_spec *in_specs; /* one per graph input, in order */
    cti_pt2_out_spec *out_specs; /* one per graph output */
    cti_pt2_spec *in_spec;     /* (args, kwargs), or NULL when the program has none */
    cti_pt2_spec *out_spec;
    char **arg_names;         /* forward_arg_names, or NULL */
    size_t narg_names;
    char **modules;           /* the submodules' names in named_modules() order (module_call_graph) */
    size_t nmodules;
    cti_pt2_range *ranges;
    size_t nranges;
} cti_pt2_program;

/* The highest schema major version this reader knows (torch 2.11 writes 8). */
enum { CT_PT2_SCHEMA_MAJOR = 8 };

/* Parses models/<name>.json, json[0, n). `what` names it in messages
 * ("model.pt2: models/model.json"). NEW program or NULL + CT_EFORMAT
 * naming the path of what is wrong (CT_ENOTSUP for a newer schema). */
cti_pt2_program *cti_pt2_program_parse(const char *json, size_t n, const char *name, const char *what);
void cti_pt2_program_free(cti_pt2_program *p); /* accepts NULL */

/* The dtype of a serialized ScalarType; false when ctrial has none. */
bool cti_pt2_dtype(int64_t scalar_type, ct_dtype *out);
/* "float32" or "complex64" or "ScalarType 99": a serialized ScalarType's name. */
const char *cti_pt2_scalar_type_name(int64_t scalar_type);
/* "node 'conv2d' (aten::conv2d.default)" and the source line when known,
 * into buf; returns buf. */
const char *cti_pt2_node_text(const cti_pt2_node *node, char *buf, size_t len);
/* "f32[s77, 3, 32, 32]" into buf; returns buf. */
const char *cti_pt2_meta_text(const cti_pt2_meta *m, char *buf, size_t len);

/* ---- archives (archive.c) ----------------------------------------------------------------- */

typedef struct {
    cti_pth_src src;
    cti_pth_zip zip;
    char *path;
    char **models;  /* the names of models/<name>.json, sorted */
    size_t nmodels;
} cti_pt2_archive;

/* Opens path (or, with cti_pt2_open_buffer, an archive in memory, which
 * must outlive the archive) and checks that it is a .pt2 archive of a
 * format this reader knows; lists its models. Returns a status; on
 * failure *a holds nothing to close. */
int cti_pt2_open(const char *path, cti_pt2_archive *a);
int cti_pt2_open_buffer(const void *data, size_t size, const char *name, cti_pt2_archive *a);
void cti_pt2_close(cti_pt2_archive *a);

/* Whether the archive has a model of that name. */
bool cti_pt2_has_model(const cti_pt2_archive *a, const char *model);
/* Reads and parses models/<model>.json: NEW program or NULL + error. */
cti_pt2_program *cti_pt2_read_program(const cti_pt2_archive *a, const char *model);

/* One entry of a weights or constants config. */
typedef struct {
    char *name;     /* the state-dict (or constant) name */
    bool is_param;
    ct_value *leaf; /* NEW tensor leaf of tensors->view on its storage; NULL when alias_of >= 0 */
    long alias_of;  /* the index of an earlier entry that is the same tensor (the same
                       storage, offset, sizes, strides and dtype: tied weights), else -1 */
} cti_pt2_tensor;

typedef struct {
    cti_pt2_tensor *items; /* in the config's order */
    size_t n;
} cti_pt2_tensors;

/* Reads data/weights/<model>_weights_config.json (constants: data/
 * constants/<model>_constants_config.json) and every storage it names,
 * CRC-checked, making storages and views with `tensors` (storage_new,
 * storage_release, view). Tensors pickled by torch.save (tensor
 * subclasses) and custom objects are refused (CT_ENOTSUP, naming them).
 * Returns a status; on failure *out holds nothing to free. */
int cti_pt2_read_tensors(const cti_pt2_archive *a, const char *model, bool constants, const cti_pth_tensors *tensors,
                        cti_pt2_tensors *out);
void cti_pt2_tensors_free(cti_pt2_tensors *t);

#endif
