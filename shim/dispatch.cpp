// shim/dispatch.cpp — every registered operator by name (ctrial/ops.h).
//
// A name is looked up once in libtorch's dispatcher (an exact overload) or
// in the JIT's operator registry (a family of overloads, in the order
// Python's torch.ops tries them) and kept in a table. A call binds the C
// arguments to the schema's arguments — positional, keyword, defaults —
// converting each to the IValue its type takes, then calls the operator
// boxed through the dispatcher, which runs autograd, autocast and the
// device's kernel as for any call from Python or C++.
#include "internal.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ScalarOps.h>
#include <ATen/core/stack.h>
#include <c10/core/MemoryFormat.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "ctrial/ops.h"

using ct::Failure;

struct ct_op {
    std::string name;                         // as looked up: "aten::add" or "aten::add.Tensor"
    std::vector<c10::OperatorHandle> handles; // one for an overload, the family's in torch.ops' order
    bool exact = false;                       // an overload was named: a number may stand for a Tensor
};

namespace {

// ---- finding operators ------------------------------------------------------------------

std::shared_mutex g_mu;
std::unordered_map<std::string, std::unique_ptr<ct_op>> g_ops;

// "add" -> "aten::add"; "aten::add.Tensor" -> ("aten::add", "Tensor").
// Returns whether an overload was named ("aten::relu." names relu's
// default overload, whose name is empty).
bool split_name(const std::string &name, std::string &qualified, std::string &overload) {
    std::string full = name.find("::") == std::string::npos ? "aten::" + name : name;
    size_t dot = full.find('.', full.find("::") + 2);
    qualified = full.substr(0, dot);
    overload = dot == std::string::npos ? "" : full.substr(dot + 1);
    return dot != std::string::npos;
}

std::string similar(const std::string &qualified) {
    std::string out;
    try {
        int n = 0;
        for (const c10::Symbol &s : torch::jit::findSimilarOperators(c10::Symbol::fromQualString(qualified))) {
            if (n++ == 5) break; // the closest few
            out += out.empty() ? " (did you mean " : ", ";
            out += s.toQualString();
        }
    } catch (...) {
    }
    return out.empty() ? out : out + "?)";
}

std::unique_ptr<ct_op> resolve(const std::string &name) {
    std::string qualified, overload;
    bool exact = split_name(name, qualified, overload);
    if (qualified.size() <= 6 || qualified.find("::") == 0 || qualified.back() == ':')
        throw Failure{CT_EINVAL, "'" + name + "' is not an operator name (\"aten::add\", \"aten::add.Tensor\")"};
    auto op = std::make_unique<ct_op>();
    op->name = overload.empty() ? qualified : qualified + "." + overload;
    auto &d = c10::Dispatcher::singleton();
    if (exact) {
        // torch.ops calls the overload with no name "default" (aten::relu.default)
        auto h = d.findSchema({qualified, overload == "default" ? "" : overload});
        if (!h) {
            std::string others;
            for (const auto &o : torch::jit::getAllSortedOperatorsFor(c10::Symbol::fromQualString(qualified))) {
                if (!o->isC10Op()) continue; // TorchScript's own, which have no kernel to call
                const std::string &o_name = o->schema().overload_name();
                others += (others.empty() ? "" : ", ") + (o_name.empty() ? "default" : o_name);
            }
            throw Failure{CT_EINVAL, "no operator named " + op->name +
                                         (others.empty() ? similar(qualified)
                                                         : " (" + qualified + "'s overloads: " + others + ")")};
        }
        op->handles.push_back(*h);
        op->exact = true;
        return op;
    }
    for (const auto &o : torch::jit::getAllSortedOperatorsFor(c10::Symbol::fromQualString(qualified))) {
        if (!o->isC10Op()) continue; // JIT-only builtins (prim:: control flow) have no kernel to call
        auto h = d.findSchema({o->schema().name(), o->schema().overload_name()});
        if (h) op->handles.push_back(*h);
    }
    if (op->handles.empty()) throw Failure{CT_EINVAL, "no operator named " + qualified + similar(qualified)};
    return op;
}

const ct_op *find_slow(const char *name, const char *fn);

// The operators this thread found last, by the address of the name it
// passed (a string literal, usually) and its text: a call by name skips
// the string hash and the lock. Entries are never stale: operators are
// never removed from the table.
struct Recent {
    const char *ptr = nullptr;
    char name[64];
    const ct_op *op = nullptr;
};
thread_local Recent tl_recent[8];
thread_local unsigned tl_next_recent = 0;

const ct_op *find(const char *name, const char *fn) {
    if (!name) {
        ct::fail(CT_EINVAL, fn, "the operator's name is NULL");
        return nullptr;
    }
    for (const Recent &r : tl_recent)
        if (r.ptr == name && std::strcmp(r.name, name) == 0) return r.op;
    const ct_op *op = find_slow(name, fn);
    if (op && std::strlen(name) < sizeof tl_recent[0].name) {
        Recent &r = tl_recent[tl_next_recent++ % 8];
        r.ptr = name;
        std::strcpy(r.name, name);
        r.op = op;
    }
    return op;
}

const ct_op *find_slow(const char *name, const char *fn) {
    std::string key(name);
    {
        std::shared_lock<std::shared_mutex> lock(g_mu);
        auto it = g_ops.find(key);
        if (it != g_ops.end()) return it->second.get();
    }
    try {
        auto op = resolve(key); // a miss is looked up again next time: a library may register it meanwhile
        std::unique_lock<std::shared_mutex> lock(g_mu);
        auto &slot = g_ops[key];
        if (!slot) slot = std::move(op);
        return slot.get();
    } catch (...) {
        ct::fail_exception(fn);
        return nullptr;
    }
}

// ---- binding arguments to a schema ------------------------------------------------------

const char *kind_name(ct_arg_kind k) {
    switch (k) {
    case CT_ARG_TENSOR: return "a Tensor";
    case CT_ARG_INT: return "an int";
    case CT_ARG_FLOAT: return "a float";
    case CT_ARG_BOOL: return "a bool";
    case CT_ARG_NONE: return "None";
    case CT_ARG_STR: return "a str";
    case CT_ARG_DTYPE: return "a dtype";
    case CT_ARG_DEVICE: return "a Device";
    case CT_ARG_INTS: return "an int list";
    case CT_ARG_FLOATS: return "a float list";
    case CT_ARG_BOOLS: return "a bool list";
    case CT_ARG_TENSORS: return "a Tensor list";
    default: return "an argument of unknown kind";
    }
}

std::string ordinal(size_t i) {
    static const char *const th[] = {"th", "st", "nd", "rd"};
    size_t n = i + 1;
    size_t k = (n % 100 >= 11 && n % 100 <= 13) || n % 10 > 3 ? 0 : n % 10;
    return std::to_string(n) + th[k];
}

// Binding runs once per overload tried, so a mismatch is a `false`, not an
// exception, and builds no message: when no overload fits, the binding is
// run again with `why` to say what did not.
// What was given, for a message: its kind, and for a list of n > 0 items
// whose pointer is NULL (ct_arg_ints(4, NULL)), that too.
std::string given(const ct_arg &x) {
    size_t n = 0;
    const void *v = nullptr;
    switch (x.kind) {
    case CT_ARG_INTS: n = x.u.ints.n, v = x.u.ints.v; break;
    case CT_ARG_FLOATS: n = x.u.floats.n, v = x.u.floats.v; break;
    case CT_ARG_BOOLS: n = x.u.bools.n, v = x.u.bools.v; break;
    case CT_ARG_TENSORS: n = x.u.tensors.n, v = x.u.tensors.v; break;
    default: break;
    }
    std::string s = kind_name(x.kind);
    if (n && !v) s += " of " + std::to_string(n) + " items whose pointer is NULL";
    return s;
}

bool no(const c10::Argument &a, const ct_arg &got, std::string *why) {
    if (why) *why = "takes " + a.type()->str() + ", got " + given(got);
    return false;
}

bool no(std::string *why, const std::string &text) {
    if (why) *why = text;
    return false;
}

// The tensor of handle h given for argument a (the index-th; element
// `elem` of a list, or -1): a NULL or freed handle fails the call whatever
// the overload, naming the argument (the name is built only then).
const at::Tensor &tensor_of(const ct_tensor *h, const c10::Argument &a, size_t index, long elem) {
    if (h && h->magic == ct::kLive) return h->t;
    std::string what = "argument '" + a.name() + "' (" + ordinal(index) + ")" +
                       (elem >= 0 ? "[" + std::to_string(elem) + "]" : "");
    if (!h) throw Failure{ct::error_pending() ? ct_last_code() : CT_EINVAL,
                          ct::error_pending() ? std::string(ct_last_error()) : what + " is NULL"};
    throw Failure{CT_ESTATE, what + " is a freed tensor"};
}

bool memory_format(const char *s, c10::IValue &out, std::string *why) {
    static const struct {
        const char *name;
        c10::MemoryFormat f;
    } formats[] = {{"contiguous_format", c10::MemoryFormat::Contiguous},
                   {"channels_last", c10::MemoryFormat::ChannelsLast},
                   {"channels_last_3d", c10::MemoryFormat::ChannelsLast3d},
                   {"preserve_format", c10::MemoryFormat::Preserve}};
    for (const auto &f : formats)
        if (!std::strcmp(s, f.name)) {
            out = f.f;
            return true;
        }
    return no(why, std::string("takes a memory format (contiguous_format, channels_last, channels_last_3d, "
                               "preserve_format), got '") + s + "'");
}

// Sets out to the IValue an argument of C kind `x` gives for schema type
// `type`; false when it does not fit. `index` names the argument in the
// message of a NULL or freed tensor, which fails the call whatever the
// overload.
// A Python number where an exact overload takes a Tensor (torch.export
// writes `aten.add_.Tensor(t, 1)`): a 0-dim "wrapped number", which type
// promotion treats as Python's arg parser makes it treat a scalar.
at::Tensor wrapped_number(const ct_arg &x) {
    at::Tensor t = x.kind == CT_ARG_INT    ? at::scalar_to_tensor(c10::Scalar(x.u.i))
                   : x.kind == CT_ARG_FLOAT ? at::scalar_to_tensor(c10::Scalar(x.u.f))
                                            : at::scalar_to_tensor(c10::Scalar(x.u.b));
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return t;
}

bool convert(const c10::Argument &a, const c10::TypePtr &type, const ct_arg &x, size_t index, c10::IValue &out,
             std::string *why, bool numbers_as_tensors) {
    using K = c10::TypeKind;
    switch (type->kind()) {
    case K::OptionalType:
        if (x.kind == CT_ARG_NONE) {
            out = c10::IValue();
            return true;
        }
        return convert(a, type->castRaw<c10::OptionalType>()->getElementType(), x, index, out, why,
                       numbers_as_tensors);
    case K::TensorType:
        if (numbers_as_tensors && (x.kind == CT_ARG_INT || x.kind == CT_ARG_FLOAT || x.kind == CT_ARG_BOOL)) {
            out = wrapped_number(x);
            return true;
        }
        if (x.kind != CT_ARG_TENSOR) return no(a, x, why);
        out = tensor_of(x.u.t, a, index, -1);
        return true;
    case K::IntType:
    case K::SymIntType:
        if (x.kind == CT_ARG_INT) out = x.u.i;
        else if (x.kind == CT_ARG_BOOL) out = static_cast<int64_t>(x.u.b);
        else return no(a, x, why);
        return true;
    case K::FloatType:
    case K::SymFloatType:
        if (x.kind == CT_ARG_FLOAT) out = x.u.f;
        else if (x.kind == CT_ARG_INT) out = static_cast<double>(x.u.i);
        else return no(a, x, why);
        return true;
    case K::BoolType:
    case K::SymBoolType:
        if (x.kind != CT_ARG_BOOL) return no(a, x, why);
        out = x.u.b;
        return true;
    case K::NumberType: // Scalar
        if (x.kind == CT_ARG_INT) out = c10::Scalar(x.u.i);
        else if (x.kind == CT_ARG_FLOAT) out = c10::Scalar(x.u.f);
        else if (x.kind == CT_ARG_BOOL) out = c10::Scalar(x.u.b);
        else return no(a, x, why);
        return true;
    case K::StringType:
        if (x.kind != CT_ARG_STR) return no(a, x, why);
        if (!x.u.s) return no(why, "takes a str, got NULL");
        out = std::string(x.u.s);
        return true;
    case K::ScalarTypeType: {
        if (x.kind != CT_ARG_DTYPE) return no(a, x, why);
        at::ScalarType s;
        if (!ct::to_scalar_type(x.u.dtype, &s)) return no(why, "takes a dtype, got " + std::to_string(x.u.dtype));
        out = s;
        return true;
    }
    case K::DeviceObjType:
        if (x.kind == CT_ARG_DEVICE) out = ct::to_device(x.u.device);
        else if (x.kind == CT_ARG_STR && x.u.s) out = c10::Device(std::string(x.u.s));
        else return no(a, x, why);
        return true;
    case K::MemoryFormatType:
        if (x.kind != CT_ARG_STR || !x.u.s) return no(a, x, why);
        return memory_format(x.u.s, out, why);
    case K::LayoutType:
        if (x.kind != CT_ARG_STR || !x.u.s || std::strcmp(x.u.s, "strided") != 0)
            return no(why, std::string("takes a layout (only \"strided\" from C), got ") + kind_name(x.kind));
        out = c10::kStrided;
        return true;
    case K::ListType: {
        const c10::TypePtr &elem = type->castRaw<c10::ListType>()->getElementType();
        auto fixed = a.N(); // int[2]: one int stands for the whole list
        switch (elem->kind()) {
        case K::IntType:
        case K::SymIntType:
            if (x.kind == CT_ARG_INT && fixed) out = std::vector<int64_t>(static_cast<size_t>(*fixed), x.u.i);
            else if (x.kind == CT_ARG_INTS && (!x.u.ints.n || x.u.ints.v))
                out = std::vector<int64_t>(x.u.ints.v, x.u.ints.v + x.u.ints.n);
            else return no(a, x, why);
            return true;
        case K::FloatType:
            if (x.kind == CT_ARG_FLOATS && (!x.u.floats.n || x.u.floats.v))
                out = std::vector<double>(x.u.floats.v, x.u.floats.v + x.u.floats.n);
            else if (x.kind == CT_ARG_INTS && (!x.u.ints.n || x.u.ints.v))
                out = std::vector<double>(x.u.ints.v, x.u.ints.v + x.u.ints.n);
            else return no(a, x, why);
            return true;
        case K::BoolType: {
            if (x.kind != CT_ARG_BOOLS || (x.u.bools.n && !x.u.bools.v)) return no(a, x, why);
            c10::List<bool> l;
            for (size_t i = 0; i < x.u.bools.n; i++) l.push_back(x.u.bools.v[i]);
            out = l;
            return true;
        }
        case K::TensorType: {
            if (x.kind != CT_ARG_TENSORS || (x.u.tensors.n && !x.u.tensors.v)) return no(a, x, why);
            std::vector<at::Tensor> l;
            l.reserve(x.u.tensors.n);
            for (size_t i = 0; i < x.u.tensors.n; i++)
                l.push_back(tensor_of(x.u.tensors.v[i], a, index, static_cast<long>(i)));
            out = l;
            return true;
        }
        case K::OptionalType: { // Tensor?[] (index): NULL entries are None
            if (x.kind != CT_ARG_TENSORS || (x.u.tensors.n && !x.u.tensors.v)) return no(a, x, why);
            c10::List<std::optional<at::Tensor>> l;
            for (size_t i = 0; i < x.u.tensors.n; i++) {
                const ct_tensor *h = x.u.tensors.v[i];
                if (h) l.push_back(tensor_of(h, a, index, static_cast<long>(i)));
                else l.push_back(std::nullopt);
            }
            out = l;
            return true;
        }
        default: break;
        }
        break;
    }
    default: break; // Generator: only through Generator?, as None
    }
    return no(why, "has type " + type->str() + ", which C cannot pass (only None where it is optional)");
}

// Fills stack with the call's arguments for schema s: false when they do
// not fit, *why (when not NULL) saying which and how.
bool bind_args(const c10::FunctionSchema &s, size_t nargs, const ct_arg *args, torch::jit::Stack &stack,
               std::string *why, bool numbers_as_tensors) {
    const auto &params = s.arguments();
    size_t npos = 0;
    while (npos < nargs && !args[npos].name) npos++;
    for (size_t i = npos; i < nargs; i++)
        if (!args[i].name) return no(why, "a positional argument (the " + ordinal(i) + ") follows keyword arguments");
    if (npos > params.size())
        return no(why, "takes " + std::to_string(params.size()) + " arguments, got " + std::to_string(npos));
    // given[i]: the argument for params[i] (NULL: none); no allocation for
    // the schemas there are (the longest has a few dozen parameters).
    const ct_arg *given_small[64];
    std::vector<const ct_arg *> given_large;
    const ct_arg **given = given_small;
    if (params.size() > 64) {
        given_large.resize(params.size());
        given = given_large.data();
    }
    std::fill(given, given + params.size(), nullptr);
    for (size_t i = 0; i < npos; i++) {
        if (params[i].kwarg_only())
            return no(why, "takes " + std::to_string(i) + " positional arguments, got " + std::to_string(npos) +
                               " ('" + params[i].name() + "' is keyword-only)");
        given[i] = &args[i];
    }
    for (size_t k = npos; k < nargs; k++) {
        size_t i = 0;
        while (i < params.size() && params[i].name() != args[k].name) i++;
        if (i == params.size()) return no(why, "has no argument named '" + std::string(args[k].name) + "'");
        if (given[i]) return no(why, "argument '" + params[i].name() + "' is given twice");
        given[i] = &args[k];
    }
    stack.clear();
    stack.reserve(params.size());
    for (size_t i = 0; i < params.size(); i++) {
        const c10::Argument &a = params[i];
        if (!given[i]) {
            if (!a.default_value())
                return no(why, "argument '" + a.name() + "' (" + ordinal(i) + ") is missing");
            stack.push_back(*a.default_value());
            continue;
        }
        c10::IValue v;
        if (!convert(a, a.real_type(), *given[i], i, v, why, numbers_as_tensors)) {
            if (why) *why = "argument '" + a.name() + "' (" + ordinal(i) + ") " + *why;
            return false;
        }
        stack.push_back(std::move(v));
    }
    return true;
}

std::string schema_text(const c10::OperatorHandle &h) {
    std::ostringstream os;
    os << h.schema();
    return os.str();
}

// Binds args to the first overload that takes them and calls it; the
// results are left on the returned stack.
torch::jit::Stack call(const ct_op *op, size_t nargs, const ct_arg *args) {
    if (nargs && !args) throw Failure{CT_EINVAL, "args is NULL"};
    // A NULL tensor argument is an earlier op's failure: keep its message.
    for (size_t i = 0; i < nargs; i++)
        if (args[i].kind == CT_ARG_TENSOR && !args[i].u.t && ct::error_pending())
            throw Failure{ct_last_code(), ct_last_error()};
    torch::jit::Stack stack;
    for (const c10::OperatorHandle &h : op->handles)
        if (bind_args(h.schema(), nargs, args, stack, nullptr, op->exact)) {
            h.callBoxed(stack);
            return stack;
        }
    std::string msg, why;
    if (op->handles.size() == 1) {
        bind_args(op->handles[0].schema(), nargs, args, stack, &msg, op->exact);
        throw Failure{CT_EINVAL, msg};
    }
    msg = "no overload takes these arguments:";
    for (const c10::OperatorHandle &h : op->handles) {
        bind_args(h.schema(), nargs, args, stack, &why, op->exact);
        msg += "\n  " + schema_text(h) + ": " + why;
    }
    throw Failure{CT_EINVAL, msg};
}

const char *fn_name(const ct_op *op) { return op->name.c_str(); }

void add_result(const c10::IValue &v, std::vector<at::Tensor> &out) {
    if (v.isTensor()) out.push_back(v.toTensor());
    else if (v.isTensorList())
        for (const at::Tensor &t : v.toTensorVector()) out.push_back(t);
    else if (v.isList())
        for (const c10::IValue &e : v.toListRef()) add_result(e, out);
    else if (v.isNone()) out.push_back(at::Tensor());
    else if (v.isTuple())
        for (const c10::IValue &e : v.toTupleRef().elements()) add_result(e, out);
}

// A result as a value tree (NEW).
ct_value *to_value(const c10::IValue &v) {
    if (v.isTensor()) {
        if (!v.toTensor().defined()) return ct_value_none();
        return ct_value_tensor(ct::wrap_unscoped(v.toTensor()));
    }
    if (v.isNone()) return ct_value_none();
    if (v.isBool()) return ct_value_bool(v.toBool());
    if (v.isInt()) return ct_value_int(v.toInt());
    if (v.isSymInt()) return ct_value_int(v.toSymInt().guard_int(__FILE__, __LINE__));
    if (v.isDouble()) return ct_value_float(v.toDouble());
    if (v.isString()) return ct_value_str(v.toStringRef().c_str());
    if (v.isScalar()) {
        c10::Scalar s = v.toScalar();
        if (s.isBoolean()) return ct_value_bool(s.toBool());
        if (s.isIntegral(false)) return ct_value_int(s.toLong());
        return ct_value_float(s.toDouble());
    }
    if (v.isList() || v.isTuple()) {
        ct_value *l = v.isTuple() ? ct_value_tuple() : ct_value_list();
        const auto &elems = v.isTuple() ? v.toTupleRef().elements().vec() : v.toListRef().vec();
        for (const c10::IValue &e : elems) {
            ct_value *x = to_value(e);
            if (!x || ct_value_list_append(l, x) != 0) {
                ct_value_free(x);
                ct_value_free(l);
                throw Failure{CT_ENOMEM, "out of host memory building the result"};
            }
        }
        return l;
    }
    throw Failure{CT_ENOTSUP, "returned " + v.tagKind() + ", which ctrial has no value for"};
}

}  // namespace

// ---- entry points ---------------------------------------------------------------------------

extern "C" const ct_op *ct_op_find(const char *name) { return find(name, __func__); }

extern "C" int ct_op_schema(const ct_op *op, char *buf, size_t len) {
    if (!op) return ct::fail(CT_EINVAL, __func__, "op is NULL");
    std::string text;
    for (const c10::OperatorHandle &h : op->handles) text += (text.empty() ? "" : "\n") + schema_text(h);
    if (buf && len) std::snprintf(buf, len, "%s", text.c_str());
    return static_cast<int>(text.size());
}

extern "C" ct_tensor *ct_op_call(const ct_op *op, size_t nargs, const ct_arg *args) {
    if (!op) {
        if (!ct::error_pending()) ct::fail(CT_EINVAL, __func__, "op is NULL");
        return nullptr;
    }
    try {
        torch::jit::Stack out = call(op, nargs, args);
        if (out.size() != 1 || !out[0].isTensor())
            throw Failure{CT_EINVAL, "returns " + std::to_string(out.size()) + " values (" +
                                         (out.empty() ? "none" : out[0].tagKind()) +
                                         (out.size() > 1 ? ", ..." : "") + "), not one tensor: use ct_call_n or "
                                         "ct_call_value"};
        return ct::wrap(std::move(out[0]).toTensor());
    } catch (...) {
        ct::fail_exception(fn_name(op));
        return nullptr;
    }
}

extern "C" int ct_op_call_n(const ct_op *op, size_t nargs, const ct_arg *args, size_t nout, ct_tensor **out) {
    for (size_t i = 0; out && i < nout; i++) out[i] = nullptr;
    if (nout && !out) return ct::fail(CT_EINVAL, __func__, "out is NULL");
    if (!op) return ct::error_pending() ? ct_last_code() : ct::fail(CT_EINVAL, __func__, "op is NULL");
    try {
        torch::jit::Stack results = call(op, nargs, args);
        std::vector<at::Tensor> ts;
        for (const c10::IValue &v : results) add_result(v, ts);
        for (size_t i = 0; i < nout && i < ts.size(); i++) out[i] = ts[i].defined() ? ct::wrap(ts[i]) : nullptr;
        return static_cast<int>(ts.size());
    } catch (...) {
        for (size_t i = 0; out && i < nout; i++) {
            ct_tensor_free(out[i]);
            out[i] = nullptr;
        }
        return ct::fail_exception(fn_name(op));
    }
}

extern "C" ct_value *ct_op_call_value(const ct_op *op, size_t nargs, const ct_arg *args) {
    if (!op) {
        if (!ct::error_pending()) ct::fail(CT_EINVAL, __func__, "op is NULL");
        return nullptr;
    }
    try {
        torch::jit::Stack results = call(op, nargs, args);
        if (results.empty()) return ct_value_none(); // as torch.ops returns None for "-> ()"
        if (results.size() == 1) return to_value(results[0]);
        c10::IValue all = c10::ivalue::Tuple::create(std::move(results));
        return to_value(all);
    } catch (...) {
        ct::fail_exception(fn_name(op));
        return nullptr;
    }
}

extern "C" ct_tensor *ct_call(const char *name, size_t nargs, const ct_arg *args) {
    const ct_op *op = find(name, "ct_call");
    return op ? ct_op_call(op, nargs, args) : nullptr;
}

extern "C" int ct_call_n(const char *name, size_t nargs, const ct_arg *args, size_t nout, ct_tensor **out) {
    for (size_t i = 0; out && i < nout; i++) out[i] = nullptr;
    const ct_op *op = find(name, "ct_call_n");
    return op ? ct_op_call_n(op, nargs, args, nout, out) : ct_last_code();
}

extern "C" ct_value *ct_call_value(const char *name, size_t nargs, const ct_arg *args) {
    const ct_op *op = find(name, "ct_call_value");
    return op ? ct_op_call_value(op, nargs, args) : nullptr;
}
