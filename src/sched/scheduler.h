/* src/sched/scheduler.h — what the scheduler files share: the scheduler
 * object with its per-kind operations, LRScheduler's common step, and the
 * small builders/readers that write and check Python's state dicts.
 * Internal to ctrial.
 *
 * A scheduler mirrors one Python object field by field: `base` holds what
 * LRScheduler.__init__ sets (base_lrs, last_epoch, _step_count, _last_lr,
 * _is_initial); each kind embeds it first and adds its own fields. */
#ifndef CTRIAL_SCHED_SCHEDULER_H
#define CTRIAL_SCHED_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrial/sched.h"

/* math.pi (M_PI is not in ISO C). */
#define CT_PI 3.141592653589793

/* A Python number that keeps its type in state dicts (ReduceLROnPlateau's
 * default min_lr is the int 0; OneCycleLR's last end_step is an int). */
typedef struct {
    double v;
    bool is_int;
} cti_pynum;

typedef struct cti_sdict cti_sdict;
typedef struct cti_sreader cti_sreader;

typedef struct {
    const char *name; /* Python's class name */
    /* get_lr(): the chainable form, one lr per group into out. */
    int (*get_lr)(ct_sched *s, double *out);
    /* _get_closed_form_lr(), NULL where Python has none. */
    int (*closed_form)(ct_sched *s, double *out);
    /* step(); NULL: LRScheduler.step. */
    int (*step)(ct_sched *s);
    /* The state dict's entries in Python's __dict__ order. */
    void (*save)(const ct_sched *s, cti_sdict *d);
    /* Reads and checks every entry of sd; writes s only when apply (the
     * caller runs it once without, then once with, so that a refused
     * state changes nothing). */
    int (*load)(ct_sched *s, const ct_value *sd, bool apply);
    void (*destroy)(ct_sched *s); /* frees what the kind holds, not s */
} cti_sched_ops;

struct ct_sched {
    const cti_sched_ops *ops;
    ct_optim *opt;    /* borrowed */
    size_t ngroups;   /* the optimizer's groups when the scheduler was made */
    double *base_lrs; /* NULL for ReduceLROnPlateau and SequentialLR */
    double *last_lr;  /* _last_lr */
    double *next_lr;  /* get_lr()'s output: no allocation per step */
    int64_t last_epoch;
    int64_t step_count; /* _step_count */
    bool is_initial;    /* _is_initial: true during the constructor's step */
    bool adopted;       /* owned by a SequentialLR */
};

/* ---- sched.c: LRScheduler ------------------------------------------------- */

/* A zeroed scheduler of `size` bytes over opt with its per-group arrays
 * (base_lrs too when with_base). NULL + error when out of memory. */
ct_sched *cti_sched_alloc(size_t size, const cti_sched_ops *ops, ct_optim *opt, bool with_base,
                         const char *fn);
/* LRScheduler.__init__(optimizer, last_epoch=-1) after the kind's own
 * fields are set: initial_lr (setdefault), base_lrs, the first step. Frees
 * s and returns NULL on failure. */
ct_sched *cti_sched_init(ct_sched *s, const char *fn);
/* LRScheduler._initial_step(). */
int cti_sched_initial_step(ct_sched *s);
/* LRScheduler.step() and _update_lr(epoch) (has_epoch false: epoch=None,
 * the chainable form). ct_sched_step dispatches to the kind's own step. */
int cti_sched_base_step(ct_sched *s);
int cti_sched_update_lr(ct_sched *s, bool has_epoch, int64_t epoch);
/* Sets every group's lr to lrs[g], then reads _last_lr back. */
int cti_sched_apply_lrs(ct_sched *s, const double *lrs, const char *fn);
/* a / b, or Python's ZeroDivisionError as CT_EINVAL. */
int cti_py_div(double a, double b, double *out, const char *fn);
/* Every group's lr into out (_param_groups_val_list(optimizer, "lr")). */
int cti_sched_read_lrs(const ct_sched *s, double *out, const char *fn);
/* Fails (CT_ESTATE) when groups were added to the optimizer since. */
int cti_sched_check_groups(const ct_sched *s, const char *fn);
/* Whether group g has the numeric option `key`, without touching the
 * thread's last error when it has not. */
bool cti_sched_has_option(const ct_optim *o, size_t g, const char *key, double *out);
/* Python's // and % for ints (floor division). */
int64_t cti_py_floordiv(int64_t a, int64_t b);

/* The base fields in Python's order: base_lrs ... _last_lr. */
void cti_sched_save_base(const ct_sched *s, cti_sdict *d);
/* Reads and checks the base fields (apply: into s). */
void cti_sched_load_base(ct_sched *s, cti_sreader *r, bool apply);
#define CT_SCHED_BASE_KEYS \
    "base_lrs", "last_epoch", "_step_count", "_is_initial", "_get_lr_called_within_step", "_last_lr"

/* ---- state dict builder ----------------------------------------------------- */

/* Appends entries; the first failure (out of memory) is kept and the dict
 * is freed by ct_sdict_finish. */
struct cti_sdict {
    ct_value *d;
    bool bad;
};
void cti_sdict_put(cti_sdict *b, const char *key, ct_value *v); /* steals v */
void cti_sdict_int(cti_sdict *b, const char *key, int64_t v);
void cti_sdict_float(cti_sdict *b, const char *key, double v);
void cti_sdict_bool(cti_sdict *b, const char *key, bool v);
void cti_sdict_str(cti_sdict *b, const char *key, const char *v);
void cti_sdict_num(cti_sdict *b, const char *key, cti_pynum v);
void cti_sdict_floats(cti_sdict *b, const char *key, const double *v, size_t n);
ct_value *cti_pynum_value(cti_pynum v); /* new */

/* ---- state dict reader -------------------------------------------------------- */

/* Checks one state dict: its keys must be exactly `keys` (NULL-terminated;
 * _is_initial and _get_lr_called_within_step may be missing, as in older
 * torch), and each getter records the first wrong type or value. */
struct cti_sreader {
    const ct_value *sd;
    const ct_sched *s;
    int code;
    char msg[320];
};
void cti_sreader_start(cti_sreader *r, const ct_sched *s, const ct_value *sd,
                      const char *const *keys);
/* Sets the error (when one was found) and returns its code. */
int cti_sreader_end(cti_sreader *r);
void cti_sreader_fail(cti_sreader *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
const ct_value *cti_sread(cti_sreader *r, const char *key); /* NULL when missing */
int64_t cti_sread_int(cti_sreader *r, const char *key);
double cti_sread_float(cti_sreader *r, const char *key); /* int or float */
/* A factor every learning rate the scheduler sets is multiplied by (gamma):
 * a number in [lo, hi], else CT_EINVAL naming it, where the first step
 * would fail on the learning rate it makes (set_lr refuses a negative or
 * NaN one) or Python's constructor refuses it. */
double cti_sread_factor(cti_sreader *r, const char *key, double lo, double hi);
bool cti_sread_bool(cti_sreader *r, const char *key);
cti_pynum cti_sread_num(cti_sreader *r, const char *key);
const char *cti_sread_str(cti_sreader *r, const char *key); /* "" when wrong */
/* A list of n numbers (out may be NULL: check only). */
void cti_sread_floats(cti_sreader *r, const char *key, size_t n, double *out);

#endif
