/* src/pth/pickle_read.c — a small pickle machine for the data.pkl of
 * torch.save files, the equivalent of torch.load(weights_only=True).
 *
 * It runs the opcodes that Python's pickle (protocols 2 to 5) emits for
 * state dicts: containers, numbers, strings, the memo, and REDUCE of a
 * handful of allowed globals (collections.OrderedDict, the torch._utils
 * rebuild functions, the typed storage classes). Any other global is refused
 * when it is named, before anything could call it; so are sets, class
 * instances and integers beyond 64 bits, none of which a ct_value can hold.
 *
 * Numpy's pickles are read too, because checkpoints carry them (Determined
 * saves np.random.get_state()): an array (numpy.core.multiarray._reconstruct
 * of numpy.ndarray, then BUILD with its shape, dtype, order and raw bytes;
 * or protocol 5's numpy.core.numeric._frombuffer) becomes a tensor of its
 * values, a numpy scalar (numpy.core.multiarray.scalar) a number, and
 * numpy.dtype is understood only as their argument. Numpy 2 names the
 * module numpy._core: both spellings are allowed. The raw bytes arrive as
 * bytes objects: protocol 3+'s BINBYTES, or under protocol 2
 * _codecs.encode(<latin-1 text>, "latin1") and builtins.bytes() for empty
 * ones; a bytes object that is left in the result is refused. Dtypes are
 * bool, int8-64, uint8-64 and float16-64 (little- or big-endian); uint16
 * and uint32 arrays widen to int32 and int64 tensors (the same values: ctrial
 * has no such tensors), uint64 arrays and every other dtype (complex,
 * object, strings, structured, datetime) are refused naming it.
 *
 * Objects live in the machine as nodes that it owns all together (a list
 * of every node made, freed at the end): the memo lets a pickle refer to
 * one object from several places, a container may be filled after it was
 * memoized, and a hostile pickle can even put a list inside itself. At STOP
 * the result is converted to a ct_value tree, copying what is shared
 * (tensors are shared, not copied: new handles to the same tensor). The
 * tensors themselves are the caller's: storages come from env->storage and
 * tensor leaves from env->tensors (pth.h), so the machine runs with or
 * without libtorch. Every count and length comes from the untrusted file
 * and is checked before use; nesting, memo indexes and the size of the
 * converted tree are bounded, so a hostile pickle costs an error, not a
 * crash or a runaway allocation.
 */
#include "pth/pth.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_DIMS = CT_PTH_MAX_DIMS, /* of a tensor */
    MAX_DEPTH = 1000,           /* nesting of the converted tree */
    NAME_MAX_LEN = 200,
};

/* O_STR may hold NUL bytes inside the machine (latin-1 text of raw bytes
 * does); a ct_value string or a key cannot, which is checked where one is
 * made. O_NDARRAY is numpy's array before BUILD gives it its state (it then
 * becomes an O_TENSOR in place, so the memo sees the same object). */
typedef enum {
    O_NONE, O_BOOL, O_INT, O_FLOAT, O_STR, O_TUPLE, O_LIST, O_DICT, O_TENSOR, O_GLOBAL, O_STORAGE,
    O_BYTES, O_DTYPE, O_NDARRAY
} okind;

static const char *const kind_names[] = {"None",   "bool",   "int",     "float", "str",         "tuple",
                                         "list",   "dict",   "tensor",  "global", "storage",    "bytes",
                                         "numpy dtype",      "numpy array"};

/* The globals a file may name. */
typedef enum {
    G_ORDERED_DICT, G_REBUILD_TENSOR, G_REBUILD_PARAMETER, G_REBUILD_PARAMETER_STATE, G_STORAGE,
    G_CODECS_ENCODE, G_BYTES, G_NP_RECONSTRUCT, G_NP_NDARRAY, G_NP_DTYPE, G_NP_SCALAR, G_NP_FROMBUFFER
} gkind;

static const char *const global_names[] = {"collections.OrderedDict", "torch._utils._rebuild_tensor_v2",
                                           "torch._utils._rebuild_parameter",
                                           "torch._utils._rebuild_parameter_with_state", "a torch storage class",
                                           "_codecs.encode", "builtins.bytes", "numpy.core.multiarray._reconstruct",
                                           "numpy.ndarray", "numpy.dtype", "numpy.core.multiarray.scalar",
                                           "numpy.core.numeric._frombuffer"};

typedef struct obj obj;
struct obj {
    okind kind;
    bool ordered; /* a dict made by OrderedDict(): BUILD may drop its state */
    obj *next;    /* the machine's list of every node */
    union {
        bool b;
        int64_t i;
        double d;
        struct {
            char *s; /* NUL-terminated; a str may hold NULs before len */
            size_t len;
        } str;        /* O_STR and O_BYTES */
        struct {
            obj **items; /* a dict holds key, value, key, value, ... */
            size_t len, cap;
        } seq;
        ct_value *leaf; /* a tensor leaf, owned by the node */
        struct {
            gkind kind;
            ct_dtype dtype; /* of a storage class */
        } g;
        struct {
            void *storage; /* borrowed from the environment */
            ct_dtype dtype;
            int64_t numel; /* its size in elements of dtype */
        } st;
        struct {
            char kind;  /* 'b' bool, 'i' signed, 'u' unsigned, 'f' float */
            int size;   /* bytes per element: 1, 2, 4 or 8 */
            char order; /* '<', '>', '|' or '=' (native, until BUILD says) */
            bool built; /* BUILD set its state */
        } np;           /* O_DTYPE */
    } u;
};

typedef struct {
    const unsigned char *p;
    size_t n, pos;
    size_t op_at;  /* offset of the opcode being run */
    unsigned char op;
    const cti_pth_unpickle_env *env;
    obj **stack;
    size_t sp, scap;
    size_t *marks;
    size_t nmarks, mcap;
    obj **memo;
    size_t memo_cap, memo_count;
    obj *all; /* every node made, newest first */
    size_t budget; /* values the conversion may still create */
    size_t copied; /* bytes made by _codecs.encode and numpy arrays so far */
} vm;

/* ---- messages --------------------------------------------------------------------- */

static const char *op_name(unsigned char c) {
    switch (c) {
    case CT_PKL_MARK: return "MARK";
    case CT_PKL_STOP: return "STOP";
    case CT_PKL_POP: return "POP";
    case CT_PKL_POP_MARK: return "POP_MARK";
    case CT_PKL_DUP: return "DUP";
    case CT_PKL_BINFLOAT: return "BINFLOAT";
    case CT_PKL_BININT: return "BININT";
    case CT_PKL_BININT1: return "BININT1";
    case CT_PKL_BININT2: return "BININT2";
    case CT_PKL_NONE: return "NONE";
    case CT_PKL_BINPERSID: return "BINPERSID";
    case CT_PKL_REDUCE: return "REDUCE";
    case CT_PKL_BINUNICODE: return "BINUNICODE";
    case CT_PKL_EMPTY_LIST: return "EMPTY_LIST";
    case CT_PKL_APPEND: return "APPEND";
    case CT_PKL_BUILD: return "BUILD";
    case CT_PKL_GLOBAL: return "GLOBAL";
    case CT_PKL_DICT: return "DICT";
    case CT_PKL_APPENDS: return "APPENDS";
    case CT_PKL_BINGET: return "BINGET";
    case CT_PKL_LONG_BINGET: return "LONG_BINGET";
    case CT_PKL_LIST: return "LIST";
    case CT_PKL_BINPUT: return "BINPUT";
    case CT_PKL_LONG_BINPUT: return "LONG_BINPUT";
    case CT_PKL_SETITEM: return "SETITEM";
    case CT_PKL_TUPLE: return "TUPLE";
    case CT_PKL_SETITEMS: return "SETITEMS";
    case CT_PKL_EMPTY_DICT: return "EMPTY_DICT";
    case CT_PKL_EMPTY_TUPLE: return "EMPTY_TUPLE";
    case CT_PKL_PROTO: return "PROTO";
    case CT_PKL_TUPLE1: return "TUPLE1";
    case CT_PKL_TUPLE2: return "TUPLE2";
    case CT_PKL_TUPLE3: return "TUPLE3";
    case CT_PKL_NEWTRUE: return "NEWTRUE";
    case CT_PKL_NEWFALSE: return "NEWFALSE";
    case CT_PKL_LONG1: return "LONG1";
    case CT_PKL_LONG4: return "LONG4";
    case CT_PKL_SHORT_BINUNICODE: return "SHORT_BINUNICODE";
    case CT_PKL_BINUNICODE8: return "BINUNICODE8";
    case CT_PKL_STACK_GLOBAL: return "STACK_GLOBAL";
    case CT_PKL_MEMOIZE: return "MEMOIZE";
    case CT_PKL_FRAME: return "FRAME";
    case CT_PKL_BINBYTES: return "BINBYTES";
    case CT_PKL_SHORT_BINBYTES: return "SHORT_BINBYTES";
    case CT_PKL_BINBYTES8: return "BINBYTES8";
    case CT_PKL_BYTEARRAY8: return "BYTEARRAY8";
    default: return NULL;
    }
}

/* Records "FILE: ENTRY, offset N (OPCODE): ..." as CT_EFORMAT (or `code`). */
static int fail_code(vm *m, int code, const char *fmt, ...) {
    char msg[600], op[24];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *name = op_name(m->op);
    if (!name) {
        snprintf(op, sizeof op, "opcode 0x%02x", m->op);
        name = op;
    }
    return ct_set_error(code, "%s: %s, offset %zu (%s): %s", m->env->file, m->env->entry, m->op_at, name, msg);
}
#define fail(m, ...) fail_code((m), CT_EFORMAT, __VA_ARGS__)

static int oom(vm *m) { return fail_code(m, CT_ENOMEM, "out of host memory"); }

/* ---- objects ---------------------------------------------------------------------- */

/* A new node, owned by the machine until cti_pth_unpickle returns. */
static obj *new_obj(vm *m, okind kind) {
    obj *o = calloc(1, sizeof *o);
    if (!o) {
        oom(m);
        return NULL;
    }
    o->kind = kind;
    o->next = m->all;
    m->all = o;
    return o;
}

static bool is_container(const obj *o) { return o->kind == O_TUPLE || o->kind == O_LIST || o->kind == O_DICT; }

static void free_all(vm *m) {
    while (m->all) {
        obj *o = m->all;
        m->all = o->next;
        if (is_container(o)) free(o->u.seq.items);
        else if (o->kind == O_STR || o->kind == O_BYTES) free(o->u.str.s);
        else if (o->kind == O_TENSOR) ct_value_free(o->u.leaf);
        free(o);
    }
}

/* Appends item to a container. */
static int seq_push(vm *m, obj *c, obj *item) {
    if (c->u.seq.len == c->u.seq.cap) {
        size_t cap = c->u.seq.cap ? c->u.seq.cap * 2 : 4;
        obj **p = realloc(c->u.seq.items, cap * sizeof *p);
        if (!p) return oom(m);
        c->u.seq.items = p;
        c->u.seq.cap = cap;
    }
    c->u.seq.items[c->u.seq.len++] = item;
    return 0;
}

/* ---- the stack, marks and memo ----------------------------------------------------------- */

static size_t floor_of(const vm *m) { return m->nmarks ? m->marks[m->nmarks - 1] : 0; }

/* Pushes o (NULL: a failed new_obj, whose error stands). */
static int push(vm *m, obj *o) {
    if (!o) return ct_last_code();
    if (m->sp == m->scap) {
        size_t cap = m->scap ? m->scap * 2 : 64;
        obj **p = realloc(m->stack, cap * sizeof *p);
        if (!p) return oom(m);
        m->stack = p;
        m->scap = cap;
    }
    m->stack[m->sp++] = o;
    return 0;
}

/* Pops the top value, or NULL + error when the stack is empty above the
 * innermost mark. */
static obj *pop(vm *m) {
    if (m->sp <= floor_of(m)) {
        fail(m, "the stack is empty%s", m->nmarks ? " above the MARK" : "");
        return NULL;
    }
    return m->stack[--m->sp];
}

/* The top value, borrowed. */
static obj *top(vm *m) {
    if (m->sp <= floor_of(m)) {
        fail(m, "the stack is empty%s", m->nmarks ? " above the MARK" : "");
        return NULL;
    }
    return m->stack[m->sp - 1];
}

static int push_mark(vm *m) {
    if (m->nmarks == m->mcap) {
        size_t cap = m->mcap ? m->mcap * 2 : 16;
        size_t *p = realloc(m->marks, cap * sizeof *p);
        if (!p) return oom(m);
        m->marks = p;
        m->mcap = cap;
    }
    m->marks[m->nmarks++] = m->sp;
    return 0;
}

/* The values above the innermost mark: moves them into container c (which
 * must not be on the stack) and removes the mark. */
static int take_marked(vm *m, obj *c) {
    if (!m->nmarks) return fail(m, "no MARK to collect values from");
    size_t mark = m->marks[--m->nmarks];
    int rc = 0;
    for (size_t i = mark; i < m->sp && !rc; i++) rc = seq_push(m, c, m->stack[i]);
    m->sp = mark;
    return rc;
}

static int memo_put(vm *m, size_t index) {
    obj *o = top(m);
    if (!o) return ct_last_code();
    /* Python numbers memo slots densely from 0; a far larger index is
     * hostile, and refusing it bounds the table by the pickle's size. */
    if (index > m->memo_count + 1024)
        return fail(m, "memo index %zu is out of range (%zu slots used)", index, m->memo_count);
    if (index >= m->memo_cap) {
        size_t cap = m->memo_cap ? m->memo_cap : 64;
        while (cap <= index) cap *= 2;
        obj **p = realloc(m->memo, cap * sizeof *p);
        if (!p) return oom(m);
        memset(p + m->memo_cap, 0, (cap - m->memo_cap) * sizeof *p);
        m->memo = p;
        m->memo_cap = cap;
    }
    if (!m->memo[index]) m->memo_count++;
    m->memo[index] = o;
    return 0;
}

static int memo_get(vm *m, size_t index) {
    if (index >= m->memo_cap || !m->memo[index]) return fail(m, "memo index %zu was never stored", index);
    return push(m, m->memo[index]);
}

/* ---- reading arguments ---------------------------------------------------------------------- */

/* The next k argument bytes, or NULL + error when the pickle ends first. */
static const unsigned char *arg(vm *m, size_t k) {
    if (m->n - m->pos < k) {
        fail(m, "the pickle ends inside the opcode's %zu-byte argument (truncated?)", k);
        return NULL;
    }
    const unsigned char *a = m->p + m->pos;
    m->pos += k;
    return a;
}

static uint64_t le(const unsigned char *a, size_t k) {
    uint64_t v = 0;
    for (size_t i = 0; i < k; i++) v |= (uint64_t)a[i] << (8 * i);
    return v;
}

/* ---- scalars ------------------------------------------------------------------------------- */

static int push_int(vm *m, int64_t v) {
    obj *o = new_obj(m, O_INT);
    if (o) o->u.i = v;
    return push(m, o);
}

static int push_bool(vm *m, bool b) {
    obj *o = new_obj(m, O_BOOL);
    if (o) o->u.b = b;
    return push(m, o);
}

/* LONG1 / LONG4: little-endian two's complement of `len` bytes. */
static int push_long(vm *m, size_t len_bytes) {
    const unsigned char *a = arg(m, len_bytes);
    if (!a) return ct_last_code();
    uint64_t n = le(a, len_bytes);
    if (len_bytes == 4 && n > INT32_MAX) return fail(m, "negative length %" PRId32, (int32_t)n);
    if (n > 8) return fail(m, "an integer of %" PRIu64 " bytes is beyond 64 bits (ct_value ints are int64)", n);
    const unsigned char *b = arg(m, (size_t)n);
    if (!b) return ct_last_code();
    if (n == 0) return push_int(m, 0);
    uint64_t u = le(b, (size_t)n);
    if (n < 8 && (b[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n); /* sign-extend */
    return push_int(m, (int64_t)u);
}

static int push_float(vm *m) {
    const unsigned char *a = arg(m, 8);
    if (!a) return ct_last_code();
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u = u << 8 | a[i]; /* big-endian */
    obj *o = new_obj(m, O_FLOAT);
    if (o) memcpy(&o->u.d, &u, sizeof u);
    return push(m, o);
}

/* A NEW node of `kind` (O_STR or O_BYTES) holding a copy of s[0, n). */
static int push_text(vm *m, okind kind, const unsigned char *s, size_t n) {
    obj *o = new_obj(m, kind);
    if (!o) return ct_last_code();
    o->u.str.s = malloc(n + 1);
    if (!o->u.str.s) return oom(m); /* the node is the machine's: freed at the end */
    if (n) memcpy(o->u.str.s, s, n);
    o->u.str.s[n] = '\0';
    o->u.str.len = n;
    return push(m, o);
}

/* The next `len_bytes`-byte little-endian length and that many bytes. */
static const unsigned char *counted(vm *m, size_t len_bytes, const char *what, size_t *n) {
    const unsigned char *a = arg(m, len_bytes);
    if (!a) return NULL;
    uint64_t k = le(a, len_bytes);
    if (k > m->n - m->pos) {
        fail(m, "a %s of %" PRIu64 " bytes runs past the end of the pickle (%zu bytes left)", what, k,
             m->n - m->pos);
        return NULL;
    }
    const unsigned char *s = m->p + m->pos;
    m->pos += (size_t)k;
    *n = (size_t)k;
    return s;
}

/* A string whose length is a `len_bytes`-byte little-endian prefix. It may
 * hold NUL bytes here (latin-1 text of raw bytes does); a ct_value cannot,
 * which the conversion checks. */
static int push_str(vm *m, size_t len_bytes) {
    size_t n;
    const unsigned char *s = counted(m, len_bytes, "string", &n);
    if (!s) return ct_last_code();
    if (!cti_pth_utf8_valid(s, n)) return fail(m, "a string is not valid UTF-8");
    return push_text(m, O_STR, s, n);
}

/* BINBYTES and the like: a bytes object (numpy's raw data), refused if it
 * is left in the result. */
static int push_bytes(vm *m, size_t len_bytes) {
    size_t n;
    const unsigned char *s = counted(m, len_bytes, "bytes object", &n);
    return s ? push_text(m, O_BYTES, s, n) : ct_last_code();
}

static bool has_nul(const obj *o) { return o->kind == O_STR && strlen(o->u.str.s) != o->u.str.len; }

/* ---- globals ---------------------------------------------------------------------------------- */

static bool is(const char *s, size_t n, const char *lit) { return strlen(lit) == n && memcmp(s, lit, n) == 0; }

static bool ends_with(const char *s, size_t n, const char *lit) {
    size_t k = strlen(lit);
    return n >= k && memcmp(s + n - k, lit, k) == 0;
}

/* Pushes the global module.name if it is allowed; refuses it by name
 * otherwise. */
static int push_global(vm *m, const char *mod, size_t mlen, const char *name, size_t nlen) {
    int ml = mlen > NAME_MAX_LEN ? NAME_MAX_LEN : (int)mlen, nl = nlen > NAME_MAX_LEN ? NAME_MAX_LEN : (int)nlen;
    gkind kind;
    ct_dtype dtype = CT_F32;
    char cls[NAME_MAX_LEN + 1];
    if (is(mod, mlen, "collections") && is(name, nlen, "OrderedDict")) kind = G_ORDERED_DICT;
    else if (is(mod, mlen, "torch._utils") && is(name, nlen, "_rebuild_tensor_v2")) kind = G_REBUILD_TENSOR;
    else if (is(mod, mlen, "torch._utils") && is(name, nlen, "_rebuild_parameter")) kind = G_REBUILD_PARAMETER;
    else if (is(mod, mlen, "torch._utils") && is(name, nlen, "_rebuild_parameter_with_state"))
        kind = G_REBUILD_PARAMETER_STATE;
    else if (is(mod, mlen, "torch") && nlen <= NAME_MAX_LEN &&
             (memcpy(cls, name, nlen), cls[nlen] = '\0', cti_pth_storage_dtype(cls, &dtype)))
        kind = G_STORAGE;
    /* numpy's arrays and scalars, and the two ways protocol 2 spells bytes */
    else if (is(mod, mlen, "_codecs") && is(name, nlen, "encode")) kind = G_CODECS_ENCODE;
    else if ((is(mod, mlen, "__builtin__") || is(mod, mlen, "builtins")) && is(name, nlen, "bytes")) kind = G_BYTES;
    else if ((is(mod, mlen, "numpy.core.multiarray") || is(mod, mlen, "numpy._core.multiarray")) &&
             is(name, nlen, "_reconstruct"))
        kind = G_NP_RECONSTRUCT;
    else if ((is(mod, mlen, "numpy.core.multiarray") || is(mod, mlen, "numpy._core.multiarray")) &&
             is(name, nlen, "scalar"))
        kind = G_NP_SCALAR;
    else if ((is(mod, mlen, "numpy.core.numeric") || is(mod, mlen, "numpy._core.numeric")) &&
             is(name, nlen, "_frombuffer"))
        kind = G_NP_FROMBUFFER;
    else if (is(mod, mlen, "numpy") && is(name, nlen, "ndarray")) kind = G_NP_NDARRAY;
    else if (is(mod, mlen, "numpy") && is(name, nlen, "dtype")) kind = G_NP_DTYPE;
    else if (is(mod, mlen, "torch") && nlen > 7 && memcmp(name, "Complex", 7) == 0)
        return fail(m, "complex tensors are not supported (global 'torch.%.*s')", nl, name);
    else if (is(mod, mlen, "torch._utils") && is(name, nlen, "_rebuild_tensor_v3"))
        return fail(m, "a tensor of a dtype ctrial lacks (uint16/32/64, float8, ...: global "
                    "'torch._utils._rebuild_tensor_v3')");
    else if ((is(mod, mlen, "torch") && nlen > 1 && name[0] == 'Q' && ends_with(name, nlen, "Storage")) ||
             (is(mod, mlen, "torch._utils") && is(name, nlen, "_rebuild_qtensor")))
        return fail(m, "quantized tensors are not supported (global '%.*s.%.*s')", ml, mod, nl, name);
    else
        return fail(m, "refuses global '%.*s.%.*s': ct_pth_load reads dicts, lists, tuples, numbers, strings, "
                    "dense tensors and numpy arrays and scalars only (as torch.load(weights_only=True) would, more "
                    "strictly)",
                    ml, mod, nl, name);
    obj *o = new_obj(m, O_GLOBAL);
    if (o) {
        o->u.g.kind = kind;
        o->u.g.dtype = dtype;
    }
    return push(m, o);
}

/* GLOBAL: "module\nname\n" inline. */
static int op_global(vm *m) {
    const char *lines[2];
    size_t lens[2];
    for (int k = 0; k < 2; k++) {
        const unsigned char *s = m->p + m->pos, *nl = memchr(s, '\n', m->n - m->pos);
        if (!nl) return fail(m, "the global's name is not terminated by a newline (truncated?)");
        lines[k] = (const char *)s;
        lens[k] = (size_t)(nl - s);
        m->pos += lens[k] + 1;
    }
    return push_global(m, lines[0], lens[0], lines[1], lens[1]);
}

/* STACK_GLOBAL: module and name strings from the stack. */
static int op_stack_global(vm *m) {
    obj *name = pop(m);
    obj *mod = name ? pop(m) : NULL;
    int rc = 0;
    if (!mod) rc = ct_last_code();
    else if (mod->kind != O_STR || name->kind != O_STR) rc = fail(m, "module and name must be strings");
    else rc = push_global(m, mod->u.str.s, mod->u.str.len, name->u.str.s, name->u.str.len);
    return rc;
}

/* ---- containers ------------------------------------------------------------------------------ */

static int check_key(vm *m, const obj *k) {
    if (has_nul(k)) return fail(m, "a dict key holds a NUL byte (ct_value keys cannot)");
    if (k->kind == O_STR || k->kind == O_INT) return 0;
    return fail(m, "a dict key of type %s (ct_value dict keys are strings or ints)", kind_names[k->kind]);
}

/* TUPLE, LIST, DICT: the marked values become a new container. */
static int op_collect(vm *m, okind kind) {
    obj *c = new_obj(m, kind);
    if (!c) return ct_last_code();
    int rc = take_marked(m, c);
    if (!rc && kind == O_DICT) {
        if (c->u.seq.len % 2) rc = fail(m, "an odd number of values (%zu) for key-value pairs", c->u.seq.len);
        for (size_t i = 0; !rc && i < c->u.seq.len; i += 2) rc = check_key(m, c->u.seq.items[i]);
    }
    return rc ? rc : push(m, c);
}

/* TUPLE1..3: the top k values. */
static int op_tuple_n(vm *m, size_t k) {
    if (m->sp - floor_of(m) < k) return fail(m, "needs %zu values, the stack holds %zu", k, m->sp - floor_of(m));
    obj *c = new_obj(m, O_TUPLE);
    if (!c) return ct_last_code();
    int rc = 0;
    for (size_t i = m->sp - k; i < m->sp && !rc; i++) rc = seq_push(m, c, m->stack[i]);
    m->sp -= k;
    return rc ? rc : push(m, c);
}

/* APPEND(S), SETITEM(S): values into the container below them. `marked`:
 * the values are those above the innermost mark. */
static int op_fill(vm *m, okind want, bool marked) {
    size_t from;
    if (marked) {
        if (!m->nmarks) return fail(m, "no MARK to collect values from");
        from = m->marks[m->nmarks - 1];
    } else {
        size_t k = want == O_DICT ? 2 : 1;
        if (m->sp - floor_of(m) < k + 1)
            return fail(m, "needs a container and %zu values, the stack holds %zu", k, m->sp - floor_of(m));
        from = m->sp - k;
    }
    size_t below = marked ? (m->nmarks > 1 ? m->marks[m->nmarks - 2] : 0) : floor_of(m);
    if (from <= below) return fail(m, "no container below the values");
    obj *c = m->stack[from - 1];
    if (c->kind != want) return fail(m, "adds to a %s, not a %s", kind_names[c->kind], kind_names[want]);
    size_t count = m->sp - from;
    if (want == O_DICT && count % 2) return fail(m, "an odd number of values (%zu) for key-value pairs", count);
    for (size_t i = from; want == O_DICT && i < m->sp; i += 2)
        if (check_key(m, m->stack[i])) return ct_last_code();
    int rc = 0;
    for (size_t i = from; i < m->sp && !rc; i++) rc = seq_push(m, c, m->stack[i]);
    m->sp = from;
    if (marked) m->nmarks--;
    return rc;
}

/* ---- REDUCE of the allowed globals ---------------------------------------------------------------- */

static bool empty_dict_or_none(const obj *o) {
    return o->kind == O_NONE || (o->kind == O_DICT && o->u.seq.len == 0);
}

/* A tensor node owning leaf (freed when there is no node). */
static int tensor_obj(vm *m, ct_value *leaf, obj **out) {
    *out = new_obj(m, O_TENSOR);
    if (!*out) {
        ct_value_free(leaf);
        return ct_last_code();
    }
    (*out)->u.leaf = leaf;
    return 0;
}

/* torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
 * requires_grad, backward_hooks[, metadata]) */
static int rebuild_tensor(vm *m, obj *const *a, size_t n, obj **out) {
    if (n != 6 && n != 7) return fail(m, "_rebuild_tensor_v2 takes 6 or 7 arguments, got %zu", n);
    if (a[0]->kind != O_STORAGE) return fail(m, "_rebuild_tensor_v2 needs a storage, got a %s", kind_names[a[0]->kind]);
    if (a[1]->kind != O_INT || a[1]->u.i < 0) return fail(m, "_rebuild_tensor_v2: the offset is no int >= 0");
    if (a[2]->kind != O_TUPLE || a[3]->kind != O_TUPLE || a[2]->u.seq.len != a[3]->u.seq.len)
        return fail(m, "_rebuild_tensor_v2: size and stride must be tuples of one length");
    if (a[4]->kind != O_BOOL) return fail(m, "_rebuild_tensor_v2: requires_grad is a %s", kind_names[a[4]->kind]);
    if (!empty_dict_or_none(a[5])) return fail(m, "_rebuild_tensor_v2: backward hooks are not supported");
    if (n == 7 && !empty_dict_or_none(a[6])) return fail(m, "_rebuild_tensor_v2: tensor metadata is not supported");
    size_t ndim = a[2]->u.seq.len;
    if (ndim > MAX_DIMS) return fail(m, "a tensor of %zu dimensions (at most %d)", ndim, MAX_DIMS);
    int64_t size[MAX_DIMS], stride[MAX_DIMS], offset = a[1]->u.i, numel = 1, last = offset;
    bool empty = false;
    for (size_t d = 0; d < ndim; d++) {
        const obj *s = a[2]->u.seq.items[d], *t = a[3]->u.seq.items[d];
        if (s->kind != O_INT || t->kind != O_INT || s->u.i < 0 || t->u.i < 0)
            return fail(m, "_rebuild_tensor_v2: size and stride must be ints >= 0 (dim %zu)", d);
        size[d] = s->u.i;
        stride[d] = t->u.i;
        if (__builtin_mul_overflow(numel, size[d], &numel))
            return fail(m, "a tensor of more than 2^63 elements");
        if (size[d] == 0) empty = true;
    }
    ct_dtype dtype = a[0]->u.st.dtype;
    int64_t elems = a[0]->u.st.numel;
    for (size_t d = 0; !empty && d < ndim; d++) {
        int64_t span;
        if (__builtin_mul_overflow(size[d] - 1, stride[d], &span) || __builtin_add_overflow(last, span, &last))
            return fail(m, "a tensor reaching beyond element 2^63 of its storage");
    }
    if (empty ? offset > elems : last >= elems)
        return fail(m, "a %s tensor reaching element %" PRId64 " of a storage of %" PRId64 " elements",
                    ct_dtype_name(dtype), empty ? offset : last, elems);
    ct_value *leaf = m->env->tensors->view(a[0]->u.st.storage, dtype, offset, (int)ndim, size, stride, a[4]->u.b);
    return leaf ? tensor_obj(m, leaf, out) : fail(m, "%s", ct_last_error());
}

/* torch._utils._rebuild_parameter(data, requires_grad, hooks[, state]):
 * a tensor detached from data (sharing its storage) with requires_grad. */
static int rebuild_parameter(vm *m, obj *const *a, size_t n, size_t want, obj **out) {
    if (n != want) return fail(m, "_rebuild_parameter takes %zu arguments, got %zu", want, n);
    if (a[0]->kind != O_TENSOR || a[1]->kind != O_BOOL)
        return fail(m, "_rebuild_parameter needs a tensor and a bool, got a %s and a %s", kind_names[a[0]->kind],
                    kind_names[a[1]->kind]);
    if (!empty_dict_or_none(a[2])) return fail(m, "_rebuild_parameter: backward hooks are not supported");
    if (n == 4 && !empty_dict_or_none(a[3]))
        return fail(m, "_rebuild_parameter_with_state: parameter attributes are not supported");
    ct_value *leaf = m->env->tensors->parameter(a[0]->u.leaf, a[1]->u.b);
    return leaf ? tensor_obj(m, leaf, out) : fail(m, "%s", ct_last_error());
}

/* ---- numpy: bytes, dtypes, arrays and scalars ----------------------------------------------- */

/* Counts n more bytes copied out of the pickle. A pickle never needs more
 * than about three times its own size (latin-1 text to bytes, at most 1:1;
 * an array's bytes, at most doubled by widening, each bytes object used
 * once): one that reuses a memoized bytes object over and over to allocate
 * far more is refused. */
static int copy_budget(vm *m, size_t n) {
    size_t cap = 4 * m->n + 4096;
    if (n > cap || m->copied > cap - n)
        return fail(m, "numpy data would take more than %zu bytes, four times the pickle (a bytes object used "
                    "again and again?)", cap);
    m->copied += n;
    return 0;
}

/* _codecs.encode(text, "latin1"): protocol 2's bytes, one code point (at
 * most U+00FF) per byte. */
static int codecs_encode(vm *m, obj *const *a, size_t n, obj **out) {
    if (n != 2 || a[0]->kind != O_STR || a[1]->kind != O_STR || strcmp(a[1]->u.str.s, "latin1") != 0)
        return fail(m, "_codecs.encode is allowed only as (str, 'latin1'), protocol 2's spelling of bytes");
    const unsigned char *s = (const unsigned char *)a[0]->u.str.s;
    size_t len = a[0]->u.str.len, k = 0;
    if (copy_budget(m, len)) return ct_last_code();
    unsigned char *b = malloc(len + 1);
    if (!b) return oom(m);
    for (size_t i = 0; i < len; k++) { /* valid UTF-8: checked when the string was read */
        if (s[i] < 0x80) b[k] = s[i++];
        else if ((s[i] & 0xe0) == 0xc0 && s[i] <= 0xc3) {
            b[k] = (unsigned char)((s[i] & 0x03) << 6 | (s[i + 1] & 0x3f));
            i += 2;
        } else {
            free(b);
            return fail(m, "_codecs.encode: the text holds a character beyond U+00FF, not latin-1");
        }
    }
    obj *o = new_obj(m, O_BYTES);
    if (!o) {
        free(b);
        return ct_last_code();
    }
    b[k] = '\0';
    o->u.str.s = (char *)b;
    o->u.str.len = k;
    *out = o;
    return 0;
}

/* numpy.dtype(code, align, copy) for the codes numpy pickles: "b1", "i8",
 * "u4", "f2", ... */
static int np_dtype(vm *m, obj *const *a, size_t n, obj **out) {
    if (n != 3 || a[0]->kind != O_STR || a[1]->kind != O_BOOL || a[2]->kind != O_BOOL)
        return fail(m, "numpy.dtype takes (str, bool, bool) as numpy pickles it, got %zu arguments", n);
    const char *code = a[0]->u.str.s;
    char kind = code[0];
    int size = kind && code[1] >= '1' && code[1] <= '8' && !code[2] ? code[1] - '0' : 0;
    bool ok = (kind == 'b' && size == 1) || ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 ||
                                                                               size == 8)) ||
              (kind == 'f' && (size == 2 || size == 4 || size == 8));
    if (!ok || has_nul(a[0]))
        return fail(m, "numpy dtype '%.40s' is refused: ctrial reads numpy arrays and scalars of bool, int8-64, "
                    "uint8-64 and float16-64 only (no complex, object, string, structured or datetime dtypes)",
                    code);
    obj *o = new_obj(m, O_DTYPE);
    if (!o) return ct_last_code();
    o->u.np.kind = kind;
    o->u.np.size = size;
    o->u.np.order = '=';
    *out = o;
    return 0;
}

/* BUILD of a dtype: (3, order, subarray, names, fields, elsize, alignment,
 * flags[, metadata]). Only plain dtypes: no subarray, names or fields. */
static int np_dtype_state(vm *m, obj *dt, const obj *state) {
    obj *const *a = state->u.seq.items;
    size_t n = state->kind == O_TUPLE ? state->u.seq.len : 0;
    if (dt->u.np.built) return fail(m, "sets the state of a numpy dtype twice");
    if ((n != 8 && n != 9) || a[0]->kind != O_INT || (a[0]->u.i != 3 && a[0]->u.i != 4) || a[1]->kind != O_STR ||
        a[1]->u.str.len != 1 || !strchr("<>|=", a[1]->u.str.s[0]) || a[5]->kind != O_INT || a[6]->kind != O_INT ||
        a[7]->kind != O_INT)
        return fail(m, "a numpy dtype's state is not (3, byte order, None, None, None, elsize, alignment, flags)");
    if (a[2]->kind != O_NONE || a[3]->kind != O_NONE || a[4]->kind != O_NONE)
        return fail(m, "structured or sub-array numpy dtypes are refused");
    dt->u.np.order = a[1]->u.str.s[0];
    dt->u.np.built = true;
    return 0;
}

static const char *np_name(const obj *dt) {
    int s = dt->u.np.size;
    switch (dt->u.np.kind) {
    case 'b': return "bool";
    case 'f': return s == 2 ? "float16" : s == 4 ? "float32" : "float64";
    case 'i': return s == 1 ? "int8" : s == 2 ? "int16" : s == 4 ? "int32" : "int64";
    default: return s == 1 ? "uint8" : s == 2 ? "uint16" : s == 4 ? "uint32" : "uint64";
    }
}

/* One element of dtype dt at p, as an unsigned integer of its size. */
static uint64_t np_bits(const obj *dt, const unsigned char *p) {
    const uint16_t probe = 1;
    bool little = *(const unsigned char *)&probe;
    bool swap = (dt->u.np.order == '>' && little) || (dt->u.np.order == '<' && !little);
    int size = dt->u.np.size;
    uint64_t v = 0;
    unsigned char b[8];
    for (int i = 0; i < size; i++) b[i] = p[swap ? size - 1 - i : i]; /* now in host order */
    switch (size) {
    case 1: v = b[0]; break;
    case 2: { uint16_t x; memcpy(&x, b, 2); v = x; break; }
    case 4: { uint32_t x; memcpy(&x, b, 4); v = x; break; }
    default: memcpy(&v, b, 8); break;
    }
    return v;
}

static double half_to_double(uint16_t h) {
    int e = (h >> 10) & 0x1f, f = h & 0x3ff;
    double v = e == 0 ? ldexp(f, -24) : e == 31 ? (f ? NAN : INFINITY) : ldexp(f + 1024, e - 25);
    return h >> 15 ? -v : v;
}

/* numpy.core.multiarray.scalar(dtype, raw bytes): a number, as int() or
 * float() of it would give (bool for bool). */
static int np_scalar(vm *m, obj *const *a, size_t n, obj **out) {
    if (n != 2 || a[0]->kind != O_DTYPE || a[1]->kind != O_BYTES)
        return fail(m, "numpy.core.multiarray.scalar takes (dtype, bytes) as numpy pickles a number");
    const obj *dt = a[0];
    if (a[1]->u.str.len != (size_t)dt->u.np.size)
        return fail(m, "a numpy %s scalar of %zu bytes", np_name(dt), a[1]->u.str.len);
    uint64_t v = np_bits(dt, (const unsigned char *)a[1]->u.str.s);
    int size = dt->u.np.size;
    obj *o = NULL;
    if (dt->u.np.kind == 'b') {
        if ((o = new_obj(m, O_BOOL))) o->u.b = v != 0;
    } else if (dt->u.np.kind == 'f') {
        if ((o = new_obj(m, O_FLOAT))) {
            if (size == 2) o->u.d = half_to_double((uint16_t)v);
            else if (size == 4) {
                float f;
                uint32_t u = (uint32_t)v;
                memcpy(&f, &u, 4);
                o->u.d = f;
            } else memcpy(&o->u.d, &v, 8);
        }
    } else if (dt->u.np.kind == 'u' && size == 8 && v > INT64_MAX) {
        return fail(m, "a numpy uint64 scalar %" PRIu64 " is beyond 64 bits (ct_value ints are int64)", v);
    } else if ((o = new_obj(m, O_INT))) {
        if (dt->u.np.kind == 'i' && size < 8 && (v >> (8 * size - 1)) & 1) v |= ~(uint64_t)0 << (8 * size);
        o->u.i = (int64_t)v;
    }
    if (!o) return ct_last_code();
    *out = o;
    return 0;
}

/* The tensor of a numpy array: `shape` (a tuple of ints), dtype dt, C or
 * Fortran order, raw bytes. A NEW leaf in *leaf. uint16 and uint32 widen to
 * int32 and int64; bools become 0 or 1. */
static int np_array(vm *m, const obj *shape, const obj *dt, bool fortran, const obj *raw, ct_value **leaf) {
    if (shape->kind != O_TUPLE) return fail(m, "a numpy array's shape is a %s, not a tuple", kind_names[shape->kind]);
    if (dt->kind != O_DTYPE) return fail(m, "a numpy array's dtype is a %s", kind_names[dt->kind]);
    if (raw->kind != O_BYTES)
        return fail(m, "a numpy array's data is a %s, not bytes (object arrays are refused)", kind_names[raw->kind]);
    size_t ndim = shape->u.seq.len;
    if (ndim > MAX_DIMS) return fail(m, "a numpy array of %zu dimensions (at most %d)", ndim, MAX_DIMS);
    int64_t size[MAX_DIMS], stride[MAX_DIMS], numel = 1;
    for (size_t d = 0; d < ndim; d++) {
        const obj *s = shape->u.seq.items[d];
        if (s->kind != O_INT || s->u.i < 0) return fail(m, "a numpy array's shape holds no int >= 0 (dim %zu)", d);
        size[d] = s->u.i;
        if (__builtin_mul_overflow(numel, size[d], &numel)) return fail(m, "a numpy array of more than 2^63 elements");
    }
    int in = dt->u.np.size;
    if ((uint64_t)numel > raw->u.str.len / (uint64_t)in || (uint64_t)numel * (uint64_t)in != raw->u.str.len)
        return fail(m, "a numpy %s array of %" PRId64 " elements holds %zu bytes", np_name(dt), numel,
                    raw->u.str.len);
    ct_dtype dtype;
    int outsz = in;
    switch (dt->u.np.kind) {
    case 'b': dtype = CT_BOOL; break;
    case 'f': dtype = in == 2 ? CT_F16 : in == 4 ? CT_F32 : CT_F64; break;
    case 'i': dtype = in == 1 ? CT_I8 : in == 2 ? CT_I16 : in == 4 ? CT_I32 : CT_I64; break;
    default:
        if (in == 8) return fail(m, "a numpy uint64 array: ctrial has no uint64 tensors (nor room in int64)");
        dtype = in == 1 ? CT_U8 : in == 2 ? CT_I32 : CT_I64;
        outsz = in == 1 ? 1 : 2 * in;
        break;
    }
    /* Contiguous strides in elements, as torch gives them (a 0 size counts 1). */
    int64_t acc = 1;
    for (size_t k = 0; k < ndim; k++) {
        size_t d = fortran ? k : ndim - 1 - k;
        stride[d] = acc;
        if (__builtin_mul_overflow(acc, size[d] ? size[d] : 1, &acc))
            return fail(m, "a numpy array whose strides pass 2^63 elements");
    }
    if (copy_budget(m, (size_t)numel * (size_t)outsz)) return ct_last_code();
    unsigned char *dst = NULL;
    void *storage = m->env->tensors->storage_new((uint64_t)numel * (uint64_t)outsz, &dst);
    if (!storage) return fail_code(m, ct_last_code() ? ct_last_code() : CT_ENOMEM, "%s", ct_last_error());
    const unsigned char *src = (const unsigned char *)raw->u.str.s;
    for (int64_t i = 0; i < numel; i++) {
        uint64_t v = np_bits(dt, src + i * in);
        if (dt->u.np.kind == 'b') v = v != 0;
        unsigned char *o = dst + i * outsz;
        switch (outsz) {
        case 1: o[0] = (unsigned char)v; break;
        case 2: { uint16_t x = (uint16_t)v; memcpy(o, &x, 2); break; }
        case 4: { uint32_t x = (uint32_t)v; memcpy(o, &x, 4); break; }
        default: memcpy(o, &v, 8); break;
        }
    }
    *leaf = m->env->tensors->view(storage, dtype, 0, (int)ndim, size, stride, false);
    m->env->tensors->storage_release(storage); /* the view keeps it */
    return *leaf ? 0 : fail(m, "%s", ct_last_error());
}

/* numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b'): an array
 * waiting for BUILD. */
static int np_reconstruct(vm *m, obj *const *a, size_t n, obj **out) {
    if (n != 3 || a[0]->kind != O_GLOBAL || a[0]->u.g.kind != G_NP_NDARRAY || a[1]->kind != O_TUPLE ||
        a[2]->kind != O_BYTES)
        return fail(m, "numpy's _reconstruct is allowed only as (numpy.ndarray, shape, bytes)");
    *out = new_obj(m, O_NDARRAY);
    return *out ? 0 : ct_last_code();
}

/* BUILD of an array: ([1,] shape, dtype, is_fortran, raw bytes). The node
 * becomes the tensor. */
static int np_array_state(vm *m, obj *arr, const obj *state) {
    size_t n = state->kind == O_TUPLE ? state->u.seq.len : 0;
    obj *const *a = state->u.seq.items;
    if (n == 5) {
        if (a[0]->kind != O_INT || a[0]->u.i != 1) return fail(m, "a numpy array's state has version other than 1");
        a++;
        n--;
    }
    if (n != 4 || a[2]->kind != O_BOOL)
        return fail(m, "a numpy array's state is not (1, shape, dtype, is_fortran, bytes)");
    ct_value *leaf = NULL;
    int rc = np_array(m, a[0], a[1], a[2]->u.b, a[3], &leaf);
    if (rc) return rc;
    arr->kind = O_TENSOR;
    arr->u.leaf = leaf;
    return 0;
}

/* numpy.core.numeric._frombuffer(buffer, dtype, shape, order): protocol
 * 5's array. */
static int np_frombuffer(vm *m, obj *const *a, size_t n, obj **out) {
    if (n != 4 || a[3]->kind != O_STR || (strcmp(a[3]->u.str.s, "C") && strcmp(a[3]->u.str.s, "F")))
        return fail(m, "numpy's _frombuffer is allowed only as (bytes, dtype, shape, 'C' or 'F')");
    ct_value *leaf = NULL;
    int rc = np_array(m, a[2], a[1], a[3]->u.str.s[0] == 'F', a[0], &leaf);
    return rc ? rc : tensor_obj(m, leaf, out);
}

static int op_reduce(vm *m) {
    obj *args = pop(m);
    obj *f = args ? pop(m) : NULL;
    obj *res = NULL;
    int rc = 0;
    if (!f) rc = ct_last_code();
    else if (f->kind != O_GLOBAL) rc = fail(m, "calls a %s, not a global", kind_names[f->kind]);
    else if (args->kind != O_TUPLE) rc = fail(m, "the arguments are a %s, not a tuple", kind_names[args->kind]);
    else {
        obj *const *a = args->u.seq.items;
        size_t n = args->u.seq.len;
        switch (f->u.g.kind) {
        case G_ORDERED_DICT:
            if (n != 0) rc = fail(m, "OrderedDict with %zu arguments (Python pickles it with none)", n);
            else if ((res = new_obj(m, O_DICT))) res->ordered = true;
            else rc = ct_last_code();
            break;
        case G_REBUILD_TENSOR: rc = rebuild_tensor(m, a, n, &res); break;
        case G_REBUILD_PARAMETER: rc = rebuild_parameter(m, a, n, 3, &res); break;
        case G_REBUILD_PARAMETER_STATE: rc = rebuild_parameter(m, a, n, 4, &res); break;
        case G_STORAGE: rc = fail(m, "a storage class cannot be called"); break;
        case G_CODECS_ENCODE: rc = codecs_encode(m, a, n, &res); break;
        case G_BYTES:
            if (n != 0) rc = fail(m, "builtins.bytes is allowed only without arguments (empty bytes)");
            else if ((res = new_obj(m, O_BYTES)) && !(res->u.str.s = calloc(1, 1))) rc = oom(m);
            else if (!res) rc = ct_last_code();
            break;
        case G_NP_RECONSTRUCT: rc = np_reconstruct(m, a, n, &res); break;
        case G_NP_NDARRAY: rc = fail(m, "numpy.ndarray cannot be called (only handed to _reconstruct)"); break;
        case G_NP_DTYPE: rc = np_dtype(m, a, n, &res); break;
        case G_NP_SCALAR: rc = np_scalar(m, a, n, &res); break;
        case G_NP_FROMBUFFER: rc = np_frombuffer(m, a, n, &res); break;
        }
    }
    return rc ? rc : push(m, res);
}

/* BUILD: sets the state of the object below. Accepted: an OrderedDict's
 * (a state_dict's _metadata, dropped), a numpy dtype's and a numpy array's. */
static int op_build(vm *m) {
    obj *state = pop(m);
    obj *o = state ? top(m) : NULL;
    int rc = 0;
    if (!o) rc = ct_last_code();
    else if (o->kind == O_DTYPE) rc = np_dtype_state(m, o, state);
    else if (o->kind == O_NDARRAY) rc = np_array_state(m, o, state);
    else if (o->kind != O_DICT || !o->ordered)
        rc = fail(m, "sets the state of a %s (only an OrderedDict's _metadata, a numpy dtype's and a numpy array's "
                  "are accepted)",
                  o->kind == O_GLOBAL ? global_names[o->u.g.kind] : kind_names[o->kind]);
    return rc;
}

/* BINPERSID: ('storage', torch.<Class>, key, location, numel). */
static int op_persid(vm *m) {
    obj *pid = pop(m);
    if (!pid) return ct_last_code();
    obj *const *a = pid->u.seq.items;
    int rc = 0;
    if (pid->kind != O_TUPLE || pid->u.seq.len != 5 || a[0]->kind != O_STR || strcmp(a[0]->u.str.s, "storage") ||
        a[1]->kind != O_GLOBAL || a[1]->u.g.kind != G_STORAGE || a[2]->kind != O_STR || has_nul(a[2]) ||
        a[3]->kind != O_STR || a[4]->kind != O_INT || a[4]->u.i < 0)
        rc = fail(m, "a persistent id that is not ('storage', <storage class>, key, location, numel)");
    void *storage = NULL;
    if (!rc && !(storage = m->env->storage(m->env->ctx, a[2]->u.str.s, a[1]->u.g.dtype, a[4]->u.i)))
        rc = fail_code(m, ct_last_code(), "%s", ct_last_error());
    obj *st = rc ? NULL : new_obj(m, O_STORAGE);
    if (st) {
        st->u.st.storage = storage;
        st->u.st.dtype = a[1]->u.g.dtype;
        st->u.st.numel = a[4]->u.i;
    }
    return rc ? rc : push(m, st);
}

/* ---- the loop --------------------------------------------------------------------------------- */

/* Runs one opcode; sets *done at STOP. */
static int step(vm *m, obj **result, bool *done) {
    const unsigned char *a;
    switch (m->op) {
    case CT_PKL_PROTO:
        if (!(a = arg(m, 1))) return ct_last_code();
        return a[0] > 5 ? fail(m, "pickle protocol %d is newer than 5", a[0]) : 0;
    case CT_PKL_FRAME: return arg(m, 8) ? 0 : ct_last_code();
    case CT_PKL_STOP:
        if (m->nmarks || m->sp != 1)
            return fail(m, "the pickle stops with %zu values on the stack and %zu open MARKs (one value and no "
                        "MARK expected)", m->sp, m->nmarks);
        *result = m->stack[--m->sp];
        *done = true;
        return 0;
    case CT_PKL_MARK: return push_mark(m);
    case CT_PKL_POP: return pop(m) ? 0 : ct_last_code();
    case CT_PKL_POP_MARK: {
        if (!m->nmarks) return fail(m, "no MARK to pop");
        m->sp = m->marks[--m->nmarks];
        return 0;
    }
    case CT_PKL_DUP: {
        obj *o = top(m);
        return o ? push(m, o) : ct_last_code();
    }
    case CT_PKL_NONE: return push(m, new_obj(m, O_NONE));
    case CT_PKL_NEWTRUE: return push_bool(m, true);
    case CT_PKL_NEWFALSE: return push_bool(m, false);
    case CT_PKL_BININT: return (a = arg(m, 4)) ? push_int(m, (int32_t)(uint32_t)le(a, 4)) : ct_last_code();
    case CT_PKL_BININT1: return (a = arg(m, 1)) ? push_int(m, a[0]) : ct_last_code();
    case CT_PKL_BININT2: return (a = arg(m, 2)) ? push_int(m, (int64_t)le(a, 2)) : ct_last_code();
    case CT_PKL_LONG1: return push_long(m, 1);
    case CT_PKL_LONG4: return push_long(m, 4);
    case CT_PKL_BINFLOAT: return push_float(m);
    case CT_PKL_SHORT_BINUNICODE: return push_str(m, 1);
    case CT_PKL_BINUNICODE: return push_str(m, 4);
    case CT_PKL_BINUNICODE8: return push_str(m, 8);
    case CT_PKL_EMPTY_TUPLE: return push(m, new_obj(m, O_TUPLE));
    case CT_PKL_EMPTY_LIST: return push(m, new_obj(m, O_LIST));
    case CT_PKL_EMPTY_DICT: return push(m, new_obj(m, O_DICT));
    case CT_PKL_TUPLE: return op_collect(m, O_TUPLE);
    case CT_PKL_LIST: return op_collect(m, O_LIST);
    case CT_PKL_DICT: return op_collect(m, O_DICT);
    case CT_PKL_TUPLE1: return op_tuple_n(m, 1);
    case CT_PKL_TUPLE2: return op_tuple_n(m, 2);
    case CT_PKL_TUPLE3: return op_tuple_n(m, 3);
    case CT_PKL_APPEND: return op_fill(m, O_LIST, false);
    case CT_PKL_APPENDS: return op_fill(m, O_LIST, true);
    case CT_PKL_SETITEM: return op_fill(m, O_DICT, false);
    case CT_PKL_SETITEMS: return op_fill(m, O_DICT, true);
    case CT_PKL_BINPUT: return (a = arg(m, 1)) ? memo_put(m, a[0]) : ct_last_code();
    case CT_PKL_LONG_BINPUT: return (a = arg(m, 4)) ? memo_put(m, (size_t)le(a, 4)) : ct_last_code();
    case CT_PKL_MEMOIZE: return memo_put(m, m->memo_count);
    case CT_PKL_BINGET: return (a = arg(m, 1)) ? memo_get(m, a[0]) : ct_last_code();
    case CT_PKL_LONG_BINGET: return (a = arg(m, 4)) ? memo_get(m, (size_t)le(a, 4)) : ct_last_code();
    case CT_PKL_GLOBAL: return op_global(m);
    case CT_PKL_STACK_GLOBAL: return op_stack_global(m);
    case CT_PKL_REDUCE: return op_reduce(m);
    case CT_PKL_BUILD: return op_build(m);
    case CT_PKL_BINPERSID: return op_persid(m);
    case CT_PKL_BINBYTES: return push_bytes(m, 4);
    case CT_PKL_SHORT_BINBYTES: return push_bytes(m, 1);
    case CT_PKL_BINBYTES8:
    case CT_PKL_BYTEARRAY8: return push_bytes(m, 8); /* a bytearray: numpy's protocol 5 buffers */
    case 0x8f: case 0x90: case 0x91: /* EMPTY_SET, ADDITEMS, FROZENSET */
        return fail(m, "sets are not supported (a ct_value cannot hold them)");
    case 0x81: case 0x92: case 'o': case 'i': /* NEWOBJ, NEWOBJ_EX, OBJ, INST */
        return fail(m, "creating class instances is refused");
    default:
        return fail(m, "unsupported opcode 0x%02x ('%c'): not one torch.save or pickle protocol 2+ emits for "
                    "state dicts", m->op, m->op >= 0x20 && m->op < 0x7f ? m->op : '?');
    }
}

/* ---- the result as a ct_value --------------------------------------------------------------------- */

static ct_value *to_value(vm *m, const obj *o, int depth) {
    if (depth > MAX_DEPTH) {
        fail(m, "the value is nested deeper than %d levels", MAX_DEPTH);
        return NULL;
    }
    if (m->budget == 0) {
        fail(m, "the pickle's shared objects expand to more values than %zu", (size_t)16 * m->n + 4096);
        return NULL;
    }
    m->budget--;
    switch (o->kind) {
    case O_NONE: return ct_value_none();
    case O_BOOL: return ct_value_bool(o->u.b);
    case O_INT: return ct_value_int(o->u.i);
    case O_FLOAT: return ct_value_float(o->u.d);
    case O_STR:
        if (has_nul(o)) {
            fail(m, "a string holds a NUL byte (ct_value strings cannot)");
            return NULL;
        }
        return ct_value_str(o->u.str.s);
    case O_TENSOR: return ct_value_copy(o->u.leaf, false);
    case O_TUPLE:
    case O_LIST: {
        ct_value *v = o->kind == O_TUPLE ? ct_value_tuple() : ct_value_list();
        for (size_t i = 0; v && i < o->u.seq.len; i++) {
            ct_value *item = to_value(m, o->u.seq.items[i], depth + 1);
            if (!item || ct_value_list_append(v, item)) {
                ct_value_free(v);
                v = NULL;
            }
        }
        return v;
    }
    case O_DICT: {
        ct_value *v = ct_value_dict();
        for (size_t i = 0; v && i < o->u.seq.len; i += 2) {
            const obj *k = o->u.seq.items[i];
            ct_value *item = to_value(m, o->u.seq.items[i + 1], depth + 1);
            int rc = !item ? -1
                     : k->kind == O_STR ? ct_value_dict_set(v, k->u.str.s, item)
                                        : ct_value_dict_set_int(v, k->u.i, item);
            if (rc) {
                ct_value_free(v);
                v = NULL;
            }
        }
        return v;
    }
    case O_GLOBAL:
        fail(m, "the value holds %s itself, which is no ct_value", global_names[o->u.g.kind]);
        return NULL;
    case O_STORAGE:
        fail(m, "the value holds a bare %s storage (not a tensor), which is no ct_value", ct_dtype_name(o->u.st.dtype));
        return NULL;
    case O_BYTES: fail(m, "bytes values are not supported (a ct_value cannot hold them)"); return NULL;
    case O_DTYPE: fail(m, "the value holds a numpy dtype itself, which is no ct_value"); return NULL;
    case O_NDARRAY: fail(m, "a numpy array whose state was never set (no BUILD)"); return NULL;
    }
    fail(m, "unknown object kind %d", (int)o->kind);
    return NULL;
}

int cti_pth_unpickle(const unsigned char *p, size_t n, const cti_pth_unpickle_env *env, ct_value **out) {
    *out = NULL;
    vm m = {.p = p, .n = n, .env = env};
    m.budget = 16 * n + 4096;
    obj *result = NULL;
    bool done = false;
    int rc = 0;
    while (!rc && !done) {
        if (m.pos >= m.n) {
            m.op_at = m.pos;
            rc = fail(&m, "the pickle ends without STOP (truncated?)");
            break;
        }
        m.op_at = m.pos;
        m.op = m.p[m.pos++];
        rc = step(&m, &result, &done);
    }
    if (!rc) {
        m.op = CT_PKL_STOP;
        *out = to_value(&m, result, 0);
        if (!*out) rc = ct_last_code() ? ct_last_code() : CT_ENOMEM;
    }
    free_all(&m);
    free(m.stack);
    free(m.marks);
    free(m.memo);
    return rc;
}
