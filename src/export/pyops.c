/* src/export/pyops.c — the Python operators an exported graph applies to
 * sizes and other symbolic scalars (torch/_export/serde/serialize.py's
 * _SYM_OPS): `B * 4` traced from a dynamic batch size is a node
 * "_operator.mul" on the SymInt of aten.sym_size.int. They run here with
 * Python's meaning on the actual numbers: int // and % round toward minus
 * infinity, / gives a float, bool is an int in arithmetic.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "export/exported.h"

enum {
    OP_ADD, OP_SUB, OP_MUL, OP_FLOORDIV, OP_MOD, OP_POW, OP_TRUEDIV, OP_NEG, OP_POS,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_AND, OP_OR, OP_LSHIFT, OP_RSHIFT,
    OP_TRUNC, OP_CEIL, OP_FLOOR, OP_NOT, OP_INT, OP_FLOAT, OP_ITE, OP_MAX, OP_MIN, OP_SQRT,
};

static const struct {
    const char *name;
    int op, nargs;
} ops[] = {
    {"add", OP_ADD, 2},        {"sub", OP_SUB, 2},     {"mul", OP_MUL, 2},         {"floordiv", OP_FLOORDIV, 2},
    {"mod", OP_MOD, 2},        {"pow", OP_POW, 2},     {"truediv", OP_TRUEDIV, 2}, {"neg", OP_NEG, 1},
    {"pos", OP_POS, 1},        {"eq", OP_EQ, 2},       {"ne", OP_NE, 2},           {"lt", OP_LT, 2},
    {"le", OP_LE, 2},          {"gt", OP_GT, 2},       {"ge", OP_GE, 2},           {"and_", OP_AND, 2},
    {"or_", OP_OR, 2},         {"lshift", OP_LSHIFT, 2}, {"rshift", OP_RSHIFT, 2}, {"trunc", OP_TRUNC, 1},
    {"ceil", OP_CEIL, 1},      {"floor", OP_FLOOR, 1}, {"sym_not", OP_NOT, 1},     {"sym_int", OP_INT, 1},
    {"sym_float", OP_FLOAT, 1}, {"sym_ite", OP_ITE, 3}, {"sym_max", OP_MAX, 2},    {"sym_min", OP_MIN, 2},
    {"sym_sqrt", OP_SQRT, 1},  {"_sym_sqrt", OP_SQRT, 1},
};

int cti_export_pyop_find(const char *target) {
    static const char *const modules[] = {"_operator.", "operator.", "math.", "torch."};
    const char *name = NULL;
    for (size_t m = 0; m < sizeof modules / sizeof modules[0] && !name; m++)
        if (!strncmp(target, modules[m], strlen(modules[m]))) name = strrchr(target, '.') + 1;
    if (!name || !strncmp(target, "torch.ops.", 10)) return -1;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(name, ops[i].name)) return (int)i;
    return -1;
}

static bool is_float(const cti_export_number *x) { return x->kind == CT_PT2_SLOT_FLOAT; }
static double as_f(const cti_export_number *x) {
    return x->kind == CT_PT2_SLOT_FLOAT ? x->f : x->kind == CT_PT2_SLOT_BOOL ? (double)x->b : (double)x->i;
}
static int64_t as_i(const cti_export_number *x) { return x->kind == CT_PT2_SLOT_BOOL ? (int64_t)x->b : x->i; }
static bool truthy(const cti_export_number *x) {
    return x->kind == CT_PT2_SLOT_FLOAT ? x->f != 0 : x->kind == CT_PT2_SLOT_BOOL ? x->b : x->i != 0;
}

static cti_export_number num_i(int64_t i) { return (cti_export_number){CT_PT2_SLOT_INT, i, 0, false}; }
static cti_export_number num_f(double f) { return (cti_export_number){CT_PT2_SLOT_FLOAT, 0, f, false}; }
static cti_export_number num_b(bool b) { return (cti_export_number){CT_PT2_SLOT_BOOL, 0, 0, b}; }

static int64_t floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t ipow(int64_t base, int64_t exp) {
    int64_t r = 1;
    while (exp-- > 0) r *= base;
    return r;
}

static int compare(int op, const cti_export_number *a, const cti_export_number *b) {
    if (is_float(a) || is_float(b)) {
        double x = as_f(a), y = as_f(b);
        return op == OP_EQ ? x == y : op == OP_NE ? x != y : op == OP_LT ? x < y : op == OP_LE ? x <= y
               : op == OP_GT ? x > y : x >= y;
    }
    int64_t x = as_i(a), y = as_i(b);
    return op == OP_EQ ? x == y : op == OP_NE ? x != y : op == OP_LT ? x < y : op == OP_LE ? x <= y
           : op == OP_GT ? x > y : x >= y;
}

int cti_export_pyop_apply(int which, size_t n, const cti_export_number *a, cti_export_number *out) {
    if (which < 0 || (size_t)which >= sizeof ops / sizeof ops[0])
        return ct_set_error(CT_EINVAL, "unknown Python operator");
    int op = ops[which].op;
    if ((int)n != ops[which].nargs)
        return ct_set_error(CT_EINVAL, "%s takes %d arguments, got %zu", ops[which].name, ops[which].nargs, n);
    bool fl = is_float(&a[0]) || (n > 1 && is_float(&a[1]));
    switch (op) {
    case OP_ADD: *out = fl ? num_f(as_f(&a[0]) + as_f(&a[1])) : num_i(as_i(&a[0]) + as_i(&a[1])); return 0;
    case OP_SUB: *out = fl ? num_f(as_f(&a[0]) - as_f(&a[1])) : num_i(as_i(&a[0]) - as_i(&a[1])); return 0;
    case OP_MUL: *out = fl ? num_f(as_f(&a[0]) * as_f(&a[1])) : num_i(as_i(&a[0]) * as_i(&a[1])); return 0;
    case OP_FLOORDIV:
    case OP_MOD:
        if (fl ? as_f(&a[1]) == 0 : as_i(&a[1]) == 0)
            return ct_set_error(CT_EINVAL, "%s by zero", op == OP_MOD ? "modulo" : "integer division");
        if (fl) {
            double x = as_f(&a[0]), y = as_f(&a[1]), q = floor(x / y);
            *out = num_f(op == OP_FLOORDIV ? q : x - q * y);
        } else {
            int64_t x = as_i(&a[0]), y = as_i(&a[1]), q = floordiv(x, y);
            *out = num_i(op == OP_FLOORDIV ? q : x - q * y);
        }
        return 0;
    case OP_TRUEDIV:
        if (as_f(&a[1]) == 0) return ct_set_error(CT_EINVAL, "division by zero");
        *out = num_f(as_f(&a[0]) / as_f(&a[1]));
        return 0;
    case OP_POW:
        *out = !fl && as_i(&a[1]) >= 0 ? num_i(ipow(as_i(&a[0]), as_i(&a[1]))) : num_f(pow(as_f(&a[0]), as_f(&a[1])));
        return 0;
    case OP_NEG: *out = fl ? num_f(-as_f(&a[0])) : num_i(-as_i(&a[0])); return 0;
    case OP_POS: *out = fl ? num_f(as_f(&a[0])) : num_i(as_i(&a[0])); return 0;
    case OP_EQ: case OP_NE: case OP_LT: case OP_LE: case OP_GT: case OP_GE:
        *out = num_b(compare(op, &a[0], &a[1]));
        return 0;
    case OP_AND:
    case OP_OR:
        if (a[0].kind == CT_PT2_SLOT_BOOL && a[1].kind == CT_PT2_SLOT_BOOL)
            *out = num_b(op == OP_AND ? a[0].b && a[1].b : a[0].b || a[1].b);
        else
            *out = num_i(op == OP_AND ? as_i(&a[0]) & as_i(&a[1]) : as_i(&a[0]) | as_i(&a[1]));
        return 0;
    case OP_LSHIFT:
    case OP_RSHIFT:
        if (as_i(&a[1]) < 0 || as_i(&a[1]) > 63) return ct_set_error(CT_EINVAL, "shift count out of range");
        *out = num_i(op == OP_LSHIFT ? (int64_t)((uint64_t)as_i(&a[0]) << as_i(&a[1])) : as_i(&a[0]) >> as_i(&a[1]));
        return 0;
    case OP_TRUNC: *out = num_i(fl ? (int64_t)trunc(as_f(&a[0])) : as_i(&a[0])); return 0;
    case OP_CEIL: *out = num_i(fl ? (int64_t)ceil(as_f(&a[0])) : as_i(&a[0])); return 0;
    case OP_FLOOR: *out = num_i(fl ? (int64_t)floor(as_f(&a[0])) : as_i(&a[0])); return 0;
    case OP_NOT: *out = num_b(!truthy(&a[0])); return 0;
    case OP_INT: *out = num_i(fl ? (int64_t)trunc(as_f(&a[0])) : as_i(&a[0])); return 0;
    case OP_FLOAT: *out = num_f(as_f(&a[0])); return 0;
    case OP_ITE: *out = truthy(&a[0]) ? a[1] : a[2]; return 0;
    case OP_MAX:
    case OP_MIN: {
        bool first = compare(op == OP_MAX ? OP_GE : OP_LE, &a[0], &a[1]);
        *out = first ? a[0] : a[1];
        return 0;
    }
    case OP_SQRT:
        if (as_f(&a[0]) < 0) return ct_set_error(CT_EINVAL, "sqrt of a negative number");
        *out = num_f(sqrt(as_f(&a[0])));
        return 0;
    default: return ct_set_error(CT_EINVAL, "unknown Python operator");
    }
}
