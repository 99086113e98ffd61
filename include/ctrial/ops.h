/*
 * ctrial/ops.h — every registered operator, by name (libtorch's dispatcher).
 *
 * tensor.h wraps the common operators one by one. This header reaches all
 * the others: any ATen operator (about 2,600 schemas), and any operator an
 * extension library registers once the program has loaded it (torchvision's
 * nms and roi_align, a custom op of your own), called by the name and
 * overload Python's torch.ops uses, with autograd and autocast exactly as
 * from Python:
 *
 *     // torch.ops.aten.leaky_relu(x, 0.2)
 *     ct_tensor *y = CT_CALL("aten::leaky_relu", CT_T(x), CT_F(0.2));
 *     // F.interpolate(x, scale_factor=2, mode="bilinear") is, underneath:
 *     ct_tensor *up = CT_CALL("aten::upsample_bilinear2d.vec", CT_T(x), CT_NONE,
 *                             CT_KW("align_corners", CT_B(false)),
 *                             CT_KW("scale_factors", CT_FLOATS(2.0, 2.0)));
 *     // torch.max(x, dim=1) returns (values, indices)
 *     ct_tensor *out[2];
 *     CT_CALL_N("aten::max.dim", 2, out, CT_T(x), CT_KW("dim", CT_I(1)));
 *
 * Names. "ns::name.overload" picks one overload ("aten::add.Tensor"; an
 * operator's unnamed overload is ".default", as in torch.ops); without
 * ".overload" ("aten::add") the overloads are tried in the registry's order
 * and the first whose schema takes the arguments is called, as
 * torch.ops.aten.add does; without "ns::" the namespace is aten. The
 * schemas are what `torch.ops.aten.add.Tensor._schema` prints in Python
 * ("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor").
 *
 * Arguments. Positional arguments first, then keyword arguments (CT_KW) in
 * any order; an argument left out takes its schema default. Each is checked
 * against the schema before the call, and a mismatch is CT_EINVAL naming
 * the operator, the argument and what it takes:
 *   "aten::add.Tensor: argument 'other' (2nd) takes a Tensor, got a float"
 * What each schema type takes:
 *   Tensor            CT_T (a NULL tensor: the call fails, keeping the first
 *                     failure's message, as every op in tensor.h does); with
 *                     an overload named, also a number (CT_I, CT_F, CT_B):
 *                     a 0-dim "wrapped number" that promotes as a Python
 *                     scalar does (torch.ops.aten.add_.Tensor(t, 1))
 *   Tensor?           CT_T or CT_NONE
 *   int, SymInt       CT_I (or CT_B)          float   CT_F or CT_I
 *   bool              CT_B                    Scalar  CT_I, CT_F or CT_B
 *   str               CT_S                    ScalarType  CT_DTYPE
 *   int[], SymInt[]   CT_INTS (int[N] also takes one CT_I, repeated N times)
 *   float[]           CT_FLOATS (or CT_INTS)  bool[]  CT_BOOLS
 *   Tensor[]          CT_TENSORS              Tensor?[]  CT_TENSORS, NULL
 *                                                        entries being None
 *   Device            CT_DEVICE or CT_S("cuda:0")
 *   MemoryFormat      CT_S("contiguous_format" | "channels_last" |
 *                     "channels_last_3d" | "preserve_format")
 *   Layout            CT_S("strided")         Generator?  CT_NONE
 *   T?                CT_NONE, or what T takes
 * Arguments are borrowed: nothing passed in is freed or kept.
 *
 * Results. CT_CALL returns the single tensor the operator returns: a NEW
 * tensor in the current scope (tensor.h), NULL + error otherwise (an
 * operator that returns several values, or none, is CT_EINVAL: use
 * CT_CALL_N or CT_CALL_VALUE). An in-place operator ("aten::add_.Tensor")
 * returns a new handle to its `self`. Failures inside the operator are
 * reported as tensor.h's are (CT_ESHAPE, CT_EDTYPE, ...), the message
 * starting with the operator's name.
 *
 * Typed C functions generated from the schemas (one per overload, as tch-rs
 * generates for Rust) would add a C prototype for each of about 2,600
 * overloads to check the same things at compile time. Python's torch.ops,
 * which this mirrors, checks at call time, and the cost of the check is a
 * fraction of a microsecond (bench/ops); the hand-written functions of
 * tensor.h remain for the operators a model uses every step.
 */
#ifndef CTRIAL_OPS_H
#define CTRIAL_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- arguments ----------------------------------------------------------------------- */

typedef enum {
    CT_ARG_TENSOR,
    CT_ARG_INT,
    CT_ARG_FLOAT,
    CT_ARG_BOOL,
    CT_ARG_NONE,
    CT_ARG_STR,
    CT_ARG_DTYPE,
    CT_ARG_DEVICE,
    CT_ARG_INTS,
    CT_ARG_FLOATS,
    CT_ARG_BOOLS,
    CT_ARG_TENSORS,
    CT_ARG_KIND_MAX_ENUM_ = 0x7fffffff
} ct_arg_kind;

/* One argument: positional when name is NULL, else the keyword `name`. */
typedef struct {
    ct_arg_kind kind;
    const char *name;
    union {
        const ct_tensor *t;
        int64_t i;
        double f;
        bool b;
        const char *s;
        ct_dtype dtype;
        ct_device device;
        struct {
            const int64_t *v;
            size_t n;
        } ints;
        struct {
            const double *v;
            size_t n;
        } floats;
        struct {
            const bool *v;
            size_t n;
        } bools;
        struct {
            const ct_tensor *const *v;
            size_t n;
        } tensors;
    } u;
} ct_arg;

static inline ct_arg ct_arg_tensor(const ct_tensor *t) { ct_arg a = {CT_ARG_TENSOR, NULL, {0}}; a.u.t = t; return a; }
static inline ct_arg ct_arg_int(int64_t i) { ct_arg a = {CT_ARG_INT, NULL, {0}}; a.u.i = i; return a; }
static inline ct_arg ct_arg_float(double f) { ct_arg a = {CT_ARG_FLOAT, NULL, {0}}; a.u.f = f; return a; }
static inline ct_arg ct_arg_bool(bool b) { ct_arg a = {CT_ARG_BOOL, NULL, {0}}; a.u.b = b; return a; }
static inline ct_arg ct_arg_none(void) { ct_arg a = {CT_ARG_NONE, NULL, {0}}; return a; }
static inline ct_arg ct_arg_str(const char *s) { ct_arg a = {CT_ARG_STR, NULL, {0}}; a.u.s = s; return a; }
static inline ct_arg ct_arg_dtype(ct_dtype d) { ct_arg a = {CT_ARG_DTYPE, NULL, {0}}; a.u.dtype = d; return a; }
static inline ct_arg ct_arg_device(ct_device d) { ct_arg a = {CT_ARG_DEVICE, NULL, {0}}; a.u.device = d; return a; }
static inline ct_arg ct_arg_ints(size_t n, const int64_t *v) {
    ct_arg a = {CT_ARG_INTS, NULL, {0}};
    a.u.ints.v = v;
    a.u.ints.n = n;
    return a;
}
static inline ct_arg ct_arg_floats(size_t n, const double *v) {
    ct_arg a = {CT_ARG_FLOATS, NULL, {0}};
    a.u.floats.v = v;
    a.u.floats.n = n;
    return a;
}
static inline ct_arg ct_arg_bools(size_t n, const bool *v) {
    ct_arg a = {CT_ARG_BOOLS, NULL, {0}};
    a.u.bools.v = v;
    a.u.bools.n = n;
    return a;
}
static inline ct_arg ct_arg_tensors(size_t n, const ct_tensor *const *v) {
    ct_arg a = {CT_ARG_TENSORS, NULL, {0}};
    a.u.tensors.v = v;
    a.u.tensors.n = n;
    return a;
}
/* The argument as the keyword `name`. */
static inline ct_arg ct_arg_kw(const char *name, ct_arg a) { a.name = name; return a; }

/* Short forms for argument lists. */
#define CT_T(t) ct_arg_tensor(t)
#define CT_I(i) ct_arg_int(i)
#define CT_F(f) ct_arg_float(f)
#define CT_B(b) ct_arg_bool(b)
#define CT_NONE ct_arg_none()
#define CT_S(s) ct_arg_str(s)
#define CT_DTYPE(d) ct_arg_dtype(d)
#define CT_DEVICE(d) ct_arg_device(d)
#define CT_INTS(...) ct_arg_ints(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t), (const int64_t[]){__VA_ARGS__})
#define CT_FLOATS(...) ct_arg_floats(sizeof((const double[]){__VA_ARGS__}) / sizeof(double), (const double[]){__VA_ARGS__})
#define CT_BOOLS(...) ct_arg_bools(sizeof((const bool[]){__VA_ARGS__}) / sizeof(bool), (const bool[]){__VA_ARGS__})
#define CT_TENSORS(...)                                                                        \
    ct_arg_tensors(sizeof((const ct_tensor *const[]){__VA_ARGS__}) / sizeof(const ct_tensor *), \
                   (const ct_tensor *const[]){__VA_ARGS__})
#define CT_KW(name, arg) ct_arg_kw(name, arg)

/* ---- calling --------------------------------------------------------------------------- */

/* An operator found by name (opaque; lives as long as the process, or until
 * the library that registered it is unloaded, which ctrial does not
 * support). Looking one up once and calling it through ct_op_call skips
 * the name's lookup (a hash of the string) on every call. */
typedef struct ct_op ct_op;

/* The operator (or, without an overload, the family of overloads) named
 * `name`: BORROWED, or NULL + CT_EINVAL "no operator named ..." (an
 * extension's operators exist once its library is loaded). */
CT_API const ct_op *ct_op_find(const char *name);
/* The schema the overload was registered with, as Python prints it
 * ("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) ->
 * Tensor"),
 * into buf (truncated to len); every overload's, one per line, for a
 * family. Returns the full length, or a negative code. */
CT_API int ct_op_schema(const ct_op *op, char *buf, size_t len);

/* Calls op and returns its single tensor result: NEW, or NULL + error. */
CT_API ct_tensor *ct_op_call(const ct_op *op, size_t nargs, const ct_arg *args);
/* Calls op; its tensor results (a tuple's, or a Tensor[]'s elements) go to
 * out[0..nout) as NEW tensors (NULL for an undefined one). Returns how many
 * tensors it returned (possibly more than nout: the rest are dropped), or a
 * negative code with every out[i] NULL. */
CT_API int ct_op_call_n(const ct_op *op, size_t nargs, const ct_arg *args, size_t nout, ct_tensor **out);
/* Calls op and returns every result as a NEW value tree: a single result as
 * it is, several as a tuple, none as None; tensors as leaves
 * (ct_value_tensor), Tensor[] as a list, int, float, bool, str and None as
 * scalars (a ScalarType result is ATen's number for it, as torch.ops
 * gives: 6 for float32, not CT_F32). NULL + error on failure. */
CT_API ct_value *ct_op_call_value(const ct_op *op, size_t nargs, const ct_arg *args);

/* The same by name: ct_op_find, then the call. */
CT_API ct_tensor *ct_call(const char *name, size_t nargs, const ct_arg *args);
CT_API int ct_call_n(const char *name, size_t nargs, const ct_arg *args, size_t nout, ct_tensor **out);
CT_API ct_value *ct_call_value(const char *name, size_t nargs, const ct_arg *args);

/* ct_call(name, <the arguments>) with the count filled in:
 * CT_CALL("aten::gelu", CT_T(x), CT_KW("approximate", CT_S("tanh"))). */
#define CT_CALL(name, ...) \
    ct_call((name), sizeof((const ct_arg[]){__VA_ARGS__}) / sizeof(ct_arg), (const ct_arg[]){__VA_ARGS__})
#define CT_CALL_N(name, nout, out, ...)                                                                  \
    ct_call_n((name), sizeof((const ct_arg[]){__VA_ARGS__}) / sizeof(ct_arg), (const ct_arg[]){__VA_ARGS__}, \
              (nout), (out))
#define CT_CALL_VALUE(name, ...) \
    ct_call_value((name), sizeof((const ct_arg[]){__VA_ARGS__}) / sizeof(ct_arg), (const ct_arg[]){__VA_ARGS__})

#ifdef __cplusplus
}
#endif
#endif
