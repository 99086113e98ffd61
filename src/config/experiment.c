/* src/config/experiment.c — the JSON experiment config (a subset of Determined's) read
 * with jansson into ct_fit_opts (see config.h).
 *
 * Every key is known: each object of the config has a table of its keys and
 * a handler per key, and a key in no table is an error naming its full path.
 * Determined keys that mean nothing to a single local trial but that users
 * commonly carry over (description, labels, entrypoint, workspace, project,
 * max_restarts, resources.slots_per_trial, records_per_epoch, ...) are
 * type-checked and ignored, so a typo in them is still caught.
 */
#include "config/experiment.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "base/value_json.h"
#include "config/period.h"
#include "config/yaml.h"

/* ---- owned storage ---------------------------------------------------------- */

int cti_config_init(cti_config *c) {
    memset(c, 0, sizeof *c);
    c->fit = ct_fit_defaults();
    c->search = cti_searcher_defaults();
    c->max_restarts = 5;
    c->hparams = ct_value_dict();
    if (!c->hparams) return ct_set_error(CT_ENOMEM, "config: out of memory");
    return 0;
}

void cti_config_free(cti_config *c) {
    if (!c) return;
    for (size_t i = 0; i < c->nstrs; i++) free(c->strs[i]);
    free(c->strs);
    free(c->name);
    ct_value_free(c->hparams);
    ct_value_free(c->data);
    ct_value_free(c->whole);
    json_decref(c->hp_spec);
    cti_hp_space_free(c->space);
    memset(c, 0, sizeof *c);
}

const char *cti_config_keep(cti_config *c, const char *s) {
    if (c->nstrs == c->capstrs) {
        size_t cap = c->capstrs ? 2 * c->capstrs : 8;
        char **p = realloc(c->strs, cap * sizeof *p);
        if (!p) goto oom;
        c->strs = p;
        c->capstrs = cap;
    }
    char *copy = malloc(strlen(s) + 1);
    if (!copy) goto oom;
    strcpy(copy, s);
    c->strs[c->nstrs++] = copy;
    return copy;
oom:
    ct_set_error(CT_ENOMEM, "config: out of memory");
    return NULL;
}

/* ---- the loader and its messages -------------------------------------------- */

typedef struct {
    cti_config *c;
    const char *label; /* the file name (or the string's label) for messages */
} loader;

/* Key paths; CT_CONFIG_FROM_MAX leaves room for the file name in front. */
#define PATH_MAX_ 256

/* Records "<label>: <message>" as CT_ECONFIG. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int fail(const loader *L, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ct_set_error(CT_ECONFIG, "%s: %s", L->label, msg);
}

static const char *json_kind(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static void join(char *dst, const char *parent, const char *key) {
    if (parent[0]) snprintf(dst, PATH_MAX_, "%s.%s", parent, key);
    else snprintf(dst, PATH_MAX_, "%s", key);
}

static int want_type(const loader *L, const char *path, const json_t *v, bool ok,
                     const char *what) {
    if (ok) return 0;
    return fail(L, "'%s' must be %s, got %s", path, what, json_kind(v));
}

static int get_string(const loader *L, const char *path, const json_t *v, const char **out) {
    if (want_type(L, path, v, json_is_string(v), "a string")) return CT_ECONFIG;
    *out = json_string_value(v);
    return 0;
}

static int get_bool(const loader *L, const char *path, const json_t *v, bool *out) {
    if (want_type(L, path, v, json_is_boolean(v), "a boolean")) return CT_ECONFIG;
    *out = json_is_true(v);
    return 0;
}

/* An integer in [min, max]; the message says what was expected. */
static int get_int(const loader *L, const char *path, const json_t *v, int64_t min, int64_t max,
                   int64_t *out) {
    const char *what = min == 1 ? "a positive integer" : min == 0 ? "a non-negative integer"
                                                                  : "an integer";
    if (want_type(L, path, v, json_is_integer(v), what)) return CT_ECONFIG;
    int64_t i = (int64_t)json_integer_value(v);
    if (i < min || i > max) {
        if (i > max) return fail(L, "'%s' is %lld, at most %lld", path, (long long)i, (long long)max);
        return fail(L, "'%s' must be %s, got %lld", path, what, (long long)i);
    }
    *out = i;
    return 0;
}

/* An integer in [min, INT_MAX], for the config's int fields. */
static int get_int32(const loader *L, const char *path, const json_t *v, int min, int *out) {
    int64_t n = 0;
    if (get_int(L, path, v, min, INT_MAX, &n)) return CT_ECONFIG;
    *out = (int)n;
    return 0;
}

/* ---- objects: a table of known keys ---------------------------------------- */

typedef int (*key_fn)(loader *L, const char *path, json_t *v);
typedef struct {
    const char *key;
    key_fn fn;
} key_entry;

/* Calls each key's handler in the file's order; an unknown key is an error
 * naming its full path. */
static int walk(loader *L, const char *path, json_t *obj, const key_entry *keys) {
    if (!path[0] && !json_is_object(obj))
        return fail(L, "the config must be a JSON object, got %s", json_kind(obj));
    if (want_type(L, path, obj, json_is_object(obj), "an object")) return CT_ECONFIG;
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        char sub[PATH_MAX_];
        join(sub, path, k);
        const key_entry *e = keys;
        while (e->key && strcmp(e->key, k) != 0) e++;
        if (!e->key) return fail(L, "unknown key '%s'", sub);
        int rc = e->fn(L, sub, v);
        if (rc) return rc;
    }
    return 0;
}

/* Keys accepted for compatibility with Determined configs and ignored; the
 * type is still checked so that a wrong value is not silently dropped. */
static int ignore_string(loader *L, const char *path, json_t *v) {
    const char *s;
    return get_string(L, path, v, &s);
}

static int ignore_bool(loader *L, const char *path, json_t *v) {
    bool b;
    return get_bool(L, path, v, &b);
}

static int ignore_count(loader *L, const char *path, json_t *v) {
    int64_t i;
    return get_int(L, path, v, 0, INT64_MAX, &i);
}

static int ignore_labels(loader *L, const char *path, json_t *v) {
    if (want_type(L, path, v, json_is_array(v), "an array of strings")) return CT_ECONFIG;
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) {
        if (!json_is_string(item))
            return fail(L, "'%s[%zu]' must be a string, got %s", path, i, json_kind(item));
    }
    return 0;
}

/* ---- JSON -> ct_value -------------------------------------------------------- */

static ct_value *to_value(loader *L, const char *path, json_t *j, bool hparam_specs);

static ct_value *oom(void) {
    ct_set_error(CT_ENOMEM, "config: out of memory");
    return NULL;
}

static bool is_sampled_type(const char *type) {
    return strcmp(type, "int") == 0 || strcmp(type, "double") == 0 || strcmp(type, "log") == 0 ||
           strcmp(type, "categorical") == 0;
}

/* A hyperparameter spec whose value the searcher draws. */
static bool is_sampled_spec(const json_t *j) {
    const char *type = json_string_value(json_object_get(j, "type"));
    return json_is_object(j) && type && is_sampled_type(type);
}

/* Determined's hyperparameter spec {"type": "const", "val": v} stands for v.
 * The other types are drawn per trial (search/space.c checks them when the
 * config is finished); until then they stand as None. */
static ct_value *from_spec(loader *L, const char *path, json_t *j, const char *type) {
    if (is_sampled_type(type)) {
        L->c->hp_sampled = true;
        ct_value *none = ct_value_none();
        return none ? none : oom();
    }
    if (strcmp(type, "const") != 0) {
        fail(L, "'%s.type' is '%s', expected one of const, int, double, log, categorical (or a plain value)",
             path, type);
        return NULL;
    }
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) {
        if (strcmp(k, "type") != 0 && strcmp(k, "val") != 0) {
            fail(L, "unknown key '%s.%s'", path, k);
            return NULL;
        }
    }
    json_t *val = json_object_get(j, "val");
    if (!val) {
        fail(L, "'%s.val' is missing", path);
        return NULL;
    }
    char sub[PATH_MAX_];
    join(sub, path, "val");
    return to_value(L, sub, val, false);
}

static ct_value *object_to_value(loader *L, const char *path, json_t *j, bool hparam_specs) {
    json_t *type = json_object_get(j, "type");
    if (hparam_specs && json_is_string(type)) return from_spec(L, path, j, json_string_value(type));
    ct_value *d = ct_value_dict();
    if (!d) return oom();
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) {
        char sub[PATH_MAX_];
        join(sub, path, k);
        ct_value *item = to_value(L, sub, v, hparam_specs);
        if (!item || ct_value_dict_set(d, k, item)) {
            ct_value_free(d);
            return NULL;
        }
    }
    return d;
}

static ct_value *array_to_value(loader *L, const char *path, json_t *j) {
    ct_value *list = ct_value_list();
    if (!list) return oom();
    size_t i;
    json_t *v;
    json_array_foreach(j, i, v) {
        char sub[PATH_MAX_];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        ct_value *item = to_value(L, sub, v, false);
        if (!item || ct_value_list_append(list, item)) {
            ct_value_free(list);
            return NULL;
        }
    }
    return list;
}

/* A NEW value for j: objects become dicts (insertion order kept), arrays
 * lists, integers ints, reals floats, null None. */
static ct_value *to_value(loader *L, const char *path, json_t *j, bool hparam_specs) {
    ct_value *v = NULL;
    switch (json_typeof(j)) {
    case JSON_OBJECT: return object_to_value(L, path, j, hparam_specs);
    case JSON_ARRAY: return array_to_value(L, path, j);
    case JSON_STRING: v = ct_value_str(json_string_value(j)); break;
    case JSON_INTEGER: v = ct_value_int((int64_t)json_integer_value(j)); break;
    case JSON_REAL: v = ct_value_float(json_real_value(j)); break;
    case JSON_TRUE: v = ct_value_bool(true); break;
    case JSON_FALSE: v = ct_value_bool(false); break;
    case JSON_NULL: v = ct_value_none(); break;
    }
    return v ? v : oom();
}

/* global_batch_size must be a positive integer: Determined divides it by
 * the number of ranks to get each rank's batch. At most
 * CT_GLOBAL_BATCH_SIZE_MAX: a loader sizes its index lists by it. */
static bool gbs_ok(const ct_value *v) {
    int64_t n = 0;
    return ct_value_kind_of(v) == CT_VALUE_INT && ct_value_get_int(v, &n) == 0 && n >= 1 &&
           n <= CT_GLOBAL_BATCH_SIZE_MAX;
}

static void describe(const ct_value *v, char *buf, size_t n) {
    int64_t i;
    double d;
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_INT: ct_value_get_int(v, &i); snprintf(buf, n, "%lld", (long long)i); break;
    case CT_VALUE_FLOAT: ct_value_get_float(v, &d); snprintf(buf, n, "%g (a float)", d); break;
    case CT_VALUE_STR: snprintf(buf, n, "'%s'", ct_value_get_str(v)); break;
    default: snprintf(buf, n, "a %s", ct_value_kind_name(ct_value_kind_of(v))); break;
    }
}

/* What is wrong with a global_batch_size that is not gbs_ok, for messages:
 * "must be a positive integer, got 'x'" or "is N, at most M (...)". */
static void gbs_wrong(const ct_value *v, char *buf, size_t n) {
    int64_t i = 0;
    if (ct_value_kind_of(v) == CT_VALUE_INT && ct_value_get_int(v, &i) == 0 && i > CT_GLOBAL_BATCH_SIZE_MAX) {
        snprintf(buf, n, "is %lld, at most %lld (a batch of more records than any machine holds)", (long long)i,
                 (long long)CT_GLOBAL_BATCH_SIZE_MAX);
        return;
    }
    char got[64];
    describe(v, got, sizeof got);
    snprintf(buf, n, "must be a positive integer, got %s", got);
}

static int on_hyperparameters(loader *L, const char *path, json_t *v) {
    if (want_type(L, path, v, json_is_object(v), "an object")) return CT_ECONFIG;
    /* Built key by key: the hyperparameters object itself is a container,
     * never a spec, even with a hyperparameter named "type". */
    ct_value *hp = ct_value_dict();
    if (!hp) return CT_ENOMEM;
    const char *k;
    json_t *item;
    json_object_foreach(v, k, item) {
        char sub[PATH_MAX_];
        join(sub, path, k);
        ct_value *x = to_value(L, sub, item, true);
        if (!x || ct_value_dict_set(hp, k, x)) {
            ct_value_free(hp);
            return ct_last_code();
        }
    }
    const ct_value *gbs = ct_value_dict_get(hp, "global_batch_size");
    if (gbs && !is_sampled_spec(json_object_get(v, "global_batch_size")) && !gbs_ok(gbs)) {
        char got[160];
        gbs_wrong(gbs, got, sizeof got);
        ct_value_free(hp);
        return fail(L, "'%s.global_batch_size' %s", path, got);
    }
    json_t *spec = json_deep_copy(v);
    if (!spec) {
        ct_value_free(hp);
        return ct_set_error(CT_ENOMEM, "config: out of memory");
    }
    json_decref(L->c->hp_spec);
    L->c->hp_spec = spec;
    ct_value_free(L->c->hparams);
    L->c->hparams = hp;
    return 0;
}

static int on_data(loader *L, const char *path, json_t *v) {
    ct_value *d = to_value(L, path, v, false);
    if (!d) return ct_last_code();
    ct_value_free(L->c->data);
    L->c->data = d;
    return 0;
}

/* ---- lengths and periods ------------------------------------------------------ */

/* {batches: n} | {epochs: n} | {records: n}, n >= 1. Records stay records
 * until cti_config_finish knows the final global_batch_size. */
static int get_length(loader *L, const char *path, json_t *v, bool is_max_length, ct_period *out,
                      char *from) {
    if (!json_is_object(v))
        return fail(L, "'%s' must be an object such as {\"batches\": N}, got %s", path,
                    json_kind(v));
    static const struct {
        const char *key;
        ct_unit unit;
    } units[] = {{"batches", CT_BATCHES}, {"epochs", CT_EPOCHS}, {"records", CT_RECORDS}};
    int found = 0;
    const char *k;
    json_t *n;
    json_object_foreach(v, k, n) {
        char sub[PATH_MAX_];
        join(sub, path, k);
        size_t u = 0;
        while (u < 3 && strcmp(units[u].key, k) != 0) u++;
        if (u == 3) return fail(L, "unknown key '%s'", sub);
        if (json_is_array(n)) {
            if (is_max_length) return fail(L, "'%s' is a schedule; max_length must be one length", sub);
            return fail(L, "'%s' is a schedule, which the config does not take (ct_schedule or "
                           "the flag form batches:a,b,c do)", sub);
        }
        int64_t len = 0;
        if (get_int(L, sub, n, 1, INT64_MAX, &len)) return CT_ECONFIG;
        if (found++) return fail(L, "'%s' must have exactly one of batches, epochs, records", path);
        out->unit = units[u].unit;
        out->n = len;
        out->num_points = 0;
        snprintf(from, CT_CONFIG_FROM_MAX, "%s: '%s'", L->label, sub);
    }
    if (!found) return fail(L, "'%s' must have one of batches, epochs, records", path);
    return 0;
}

static int on_min_validation_period(loader *L, const char *path, json_t *v) {
    return get_length(L, path, v, false, &L->c->fit.validation_period, L->c->validation_from);
}

static int on_min_checkpoint_period(loader *L, const char *path, json_t *v) {
    return get_length(L, path, v, false, &L->c->fit.checkpoint_period, L->c->checkpoint_from);
}

/* Determined's scheduling_unit: batches between training metric reports. */
static int on_scheduling_unit(loader *L, const char *path, json_t *v) {
    int64_t n = 0;
    if (get_int(L, path, v, 1, INT64_MAX, &n)) return CT_ECONFIG;
    L->c->fit.reporting_period = ct_batches(n);
    return 0;
}

/* ---- searcher ------------------------------------------------------------------ */

static int on_searcher_name(loader *L, const char *path, json_t *v) {
    static const cti_searcher_kind kinds[] = {CT_SEARCHER_SINGLE, CT_SEARCHER_RANDOM, CT_SEARCHER_GRID,
                                             CT_SEARCHER_ADAPTIVE_ASHA, CT_SEARCHER_ASYNC_HALVING};
    const char *s;
    if (get_string(L, path, v, &s)) return CT_ECONFIG;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (strcmp(s, cti_searcher_kind_name(kinds[i])) == 0) {
            L->c->search.kind = kinds[i];
            return 0;
        }
    if (strcmp(s, "adaptive") == 0 || strcmp(s, "adaptive_simple") == 0 || strcmp(s, "sync_halving") == 0 ||
        strcmp(s, "custom") == 0)
        return fail(L, "'%s': the '%s' searcher has been removed from Determined and is not supported; use "
                       "'adaptive_asha'", path, s);
    return fail(L, "'%s' is '%s', expected one of single, random, grid, adaptive_asha, async_halving", path, s);
}

static int on_max_trials(loader *L, const char *path, json_t *v) {
    return get_int(L, path, v, 1, INT32_MAX, &L->c->search.max_trials);
}

static int on_max_concurrent_trials(loader *L, const char *path, json_t *v) {
    return get_int(L, path, v, 0, INT32_MAX, &L->c->search.max_concurrent_trials);
}

static int on_stop_once(loader *L, const char *path, json_t *v) { return get_bool(L, path, v, &L->c->search.stop_once); }

static int on_max_rungs(loader *L, const char *path, json_t *v) {
    int64_t n = 0;
    if (get_int(L, path, v, 1, CT_ASHA_MAX_RUNGS, &n)) return CT_ECONFIG;
    L->c->search.max_rungs = (int)n;
    return 0;
}

static int on_num_rungs(loader *L, const char *path, json_t *v) {
    int64_t n = 0;
    if (get_int(L, path, v, 1, CT_ASHA_MAX_RUNGS, &n)) return CT_ECONFIG;
    L->c->search.num_rungs = (int)n;
    return 0;
}

/* Determined: a number > 1 (1.5 is allowed). */
static int on_divisor(loader *L, const char *path, json_t *v) {
    if (want_type(L, path, v, json_is_number(v), "a number greater than 1")) return CT_ECONFIG;
    double d = json_number_value(v);
    if (!(d > 1) || !isfinite(d)) return fail(L, "'%s' must be a number greater than 1, got %g", path, d);
    L->c->search.divisor = d;
    return 0;
}

static int on_mode(loader *L, const char *path, json_t *v) {
    const char *s;
    if (get_string(L, path, v, &s)) return CT_ECONFIG;
    if (strcmp(s, "aggressive") == 0) L->c->search.mode = CT_ASHA_AGGRESSIVE;
    else if (strcmp(s, "standard") == 0) L->c->search.mode = CT_ASHA_STANDARD;
    else if (strcmp(s, "conservative") == 0) L->c->search.mode = CT_ASHA_CONSERVATIVE;
    else return fail(L, "'%s' must be one of aggressive, standard, conservative, got '%s'", path, s);
    return 0;
}

/* A list of rung counts, one bracket each (Determined takes any list;
 * counts below 1 make it divide by zero, so they are refused). */
static int on_bracket_rungs(loader *L, const char *path, json_t *v) {
    if (want_type(L, path, v, json_is_array(v), "an array of rung counts")) return CT_ECONFIG;
    if (json_array_size(v) > CT_ASHA_MAX_BRACKETS)
        return fail(L, "'%s' has %zu brackets, at most %d", path, json_array_size(v), CT_ASHA_MAX_BRACKETS);
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) {
        char sub[PATH_MAX_];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        int64_t n = 0;
        if (get_int(L, sub, item, 1, CT_ASHA_MAX_RUNGS, &n)) return CT_ECONFIG;
        L->c->search.bracket_rungs[i] = (int)n;
    }
    L->c->search.n_bracket_rungs = (int)json_array_size(v);
    return 0;
}

/* Determined 0.38's form of adaptive_asha's length: max_time units of
 * time_metric, which PyTorchTrial reports as "batches" or "epochs".
 * Checked (and turned into max_length) once the searcher is walked. */
static int on_time_metric(loader *L, const char *path, json_t *v) {
    const char *s;
    if (get_string(L, path, v, &s)) return CT_ECONFIG;
    if (strcmp(s, "batches") != 0 && strcmp(s, "epochs") != 0 && strcmp(s, "records") != 0)
        return fail(L, "'%s' is '%s': ctrial measures a trial's progress in batches, epochs or records", path, s);
    return 0;
}

static int on_max_time(loader *L, const char *path, json_t *v) {
    int64_t n;
    return get_int(L, path, v, 1, INT64_MAX, &n);
}

static int on_searcher_metric(loader *L, const char *path, json_t *v) {
    const char *s;
    if (get_string(L, path, v, &s)) return CT_ECONFIG;
    if (!s[0]) return fail(L, "'%s' is empty", path);
    s = cti_config_keep(L->c, s);
    if (!s) return CT_ENOMEM;
    L->c->fit.searcher_metric = s;
    return 0;
}

static int on_smaller_is_better(loader *L, const char *path, json_t *v) {
    return get_bool(L, path, v, &L->c->fit.smaller_is_better);
}

static int on_max_length(loader *L, const char *path, json_t *v) {
    return get_length(L, path, v, true, &L->c->fit.max_length, L->c->max_length_from);
}

/* Determined's warm start names a checkpoint by its UUID (or a trial by its
 * id) in the master's database; ctrial, on one machine, takes the
 * checkpoint's path in the top-level "warm_start". */
static int on_source_checkpoint(loader *L, const char *path, json_t *v) {
    if (json_is_null(v)) return 0;
    return fail(L, "'%s' names a checkpoint in Determined's database; ctrial takes the checkpoint directory's "
                "path instead: \"warm_start\": \"DIR\" at the top level (or --warm-start DIR)", path);
}

/* Which searchers take each key beyond the common ones (Determined's
 * schemas have additionalProperties false per searcher). */
#define FOR_RANDOM (1u << CT_SEARCHER_RANDOM)
#define FOR_GRID (1u << CT_SEARCHER_GRID)
#define FOR_ADAPTIVE (1u << CT_SEARCHER_ADAPTIVE_ASHA)
#define FOR_ASYNC (1u << CT_SEARCHER_ASYNC_HALVING)
#define FOR_ASHA (FOR_ADAPTIVE | FOR_ASYNC)
static const struct {
    const char *key;
    unsigned searchers;
} searcher_only[] = {
    {"max_trials", FOR_RANDOM | FOR_ASHA}, {"max_concurrent_trials", FOR_RANDOM | FOR_GRID | FOR_ASHA},
    {"mode", FOR_ADAPTIVE}, {"divisor", FOR_ASHA}, {"max_rungs", FOR_ADAPTIVE}, {"bracket_rungs", FOR_ADAPTIVE},
    {"num_rungs", FOR_ASYNC}, {"stop_once", FOR_ASHA}, {"time_metric", FOR_ASHA}, {"max_time", FOR_ASHA},
};

/* time_metric + max_time (Determined 0.38) as max_length. */
static int time_as_length(loader *L, const char *path, json_t *v) {
    json_t *metric = json_object_get(v, "time_metric"), *time = json_object_get(v, "max_time");
    if (!metric && !time) return 0;
    if (!metric || !time)
        return fail(L, "'%s.%s' needs '%s.%s'", path, metric ? "time_metric" : "max_time", path,
                    metric ? "max_time" : "time_metric");
    if (json_object_get(v, "max_length"))
        return fail(L, "'%s' has both max_length and max_time: give one", path);
    json_t *len = json_pack("{sI}", json_string_value(metric), json_integer_value(time));
    if (!len) return ct_set_error(CT_ENOMEM, "config: out of memory");
    char sub[PATH_MAX_];
    join(sub, path, "max_time");
    int rc = get_length(L, sub, len, true, &L->c->fit.max_length, L->c->max_length_from);
    json_decref(len);
    return rc;
}

static int on_searcher(loader *L, const char *path, json_t *v) {
    static const key_entry keys[] = {{"name", on_searcher_name},
                                     {"metric", on_searcher_metric},
                                     {"smaller_is_better", on_smaller_is_better},
                                     {"max_length", on_max_length},
                                     {"source_checkpoint_uuid", on_source_checkpoint},
                                     {"source_trial_id", on_source_checkpoint},
                                     {"max_trials", on_max_trials},
                                     {"max_concurrent_trials", on_max_concurrent_trials},
                                     {"mode", on_mode},
                                     {"divisor", on_divisor},
                                     {"max_rungs", on_max_rungs},
                                     {"num_rungs", on_num_rungs},
                                     {"bracket_rungs", on_bracket_rungs},
                                     {"stop_once", on_stop_once},
                                     {"time_metric", on_time_metric},
                                     {"max_time", on_max_time},
                                     {NULL, NULL}};
    if (walk(L, path, v, keys)) return CT_ECONFIG;
    if (!json_object_get(v, "name"))
        return fail(L, "'%s.name' is missing (single, random, grid, adaptive_asha or async_halving)", path);
    cti_searcher_kind kind = L->c->search.kind;
    const char *name = cti_searcher_kind_name(kind);
    for (size_t i = 0; i < sizeof searcher_only / sizeof *searcher_only; i++)
        if (json_object_get(v, searcher_only[i].key) && !(searcher_only[i].searchers & (1u << kind)))
            return fail(L, "'%s.%s' is not a key of searcher '%s'", path, searcher_only[i].key, name);
    if ((kind == CT_SEARCHER_RANDOM || cti_searcher_kind_is_asha(kind)) && !json_object_get(v, "max_trials"))
        return fail(L, "'%s.max_trials' is missing: searcher '%s' needs the number of trials", path, name);
    if (kind == CT_SEARCHER_ASYNC_HALVING && !json_object_get(v, "num_rungs"))
        return fail(L, "'%s.num_rungs' is missing: searcher 'async_halving' needs the number of rungs", path);
    /* Determined from 0.38 on stops trials early and never promotes (its
     * asha_stopping.go); stop_once false keeps the promotions of before. */
    if (cti_searcher_kind_is_asha(kind) && !json_object_get(v, "stop_once")) L->c->search.stop_once = true;
    return time_as_length(L, path, v);
}

/* ---- checkpoints ------------------------------------------------------------------ */

static int on_checkpoint_policy(loader *L, const char *path, json_t *v) {
    const char *s;
    if (get_string(L, path, v, &s)) return CT_ECONFIG;
    if (strcmp(s, "best") == 0) L->c->fit.checkpoint_policy = CT_CKPT_BEST;
    else if (strcmp(s, "all") == 0) L->c->fit.checkpoint_policy = CT_CKPT_ALL;
    else if (strcmp(s, "none") == 0) L->c->fit.checkpoint_policy = CT_CKPT_NONE;
    else return fail(L, "'%s' must be one of best, all, none, got '%s'", path, s);
    return 0;
}

/* The storage's string keys: checked here, used once the walk is done. */
static int on_storage_string(loader *L, const char *path, json_t *v) {
    const char *s;
    if (get_string(L, path, v, &s)) return CT_ECONFIG;
    if (!s[0]) return fail(L, "'%s' is empty", path);
    return 0;
}

/* A key of Determined's that has no value here (null, its default) or a string. */
static int on_storage_optional(loader *L, const char *path, json_t *v) {
    return json_is_null(v) ? 0 : on_storage_string(L, path, v);
}

static int on_save_trial_latest(loader *L, const char *path, json_t *v) {
    return get_int32(L, path, v, 0, &L->c->fit.save_trial_latest);
}

static int on_save_trial_best(loader *L, const char *path, json_t *v) {
    return get_int32(L, path, v, 0, &L->c->fit.save_trial_best);
}

/* A string of the storage's that the run keeps (NULL when absent or null). */
static int keep_storage_string(loader *L, json_t *obj, const char *key, const char **out) {
    const char *s = json_string_value(json_object_get(obj, key));
    if (!s) return 0;
    if (!(*out = cti_config_keep(L->c, s))) return CT_ENOMEM;
    return 0;
}

/* Determined's storage types: shared_fs (host_path[/storage_path]),
 * directory (container_path) and s3 (bucket, prefix, endpoint_url,
 * access_key, secret_key: checkpoints uploaded there, their local copies in
 * output/checkpoints); gcs and azure are refused, naming the way through
 * S3. Each type takes its own keys, as Determined's schemas do. */
static int on_checkpoint_storage(loader *L, const char *path, json_t *v) {
    if (want_type(L, path, v, json_is_object(v), "an object")) return CT_ECONFIG;
    json_t *tv = json_object_get(v, "type");
    char tpath[PATH_MAX_];
    join(tpath, path, "type");
    const char *type = "shared_fs";
    if (tv && get_string(L, tpath, tv, &type)) return CT_ECONFIG;
    static const key_entry shared_fs[] = {{"type", on_storage_string},
                                          {"host_path", on_storage_string},
                                          {"storage_path", on_storage_string},
                                          {"propagation", ignore_string},
                                          {"save_trial_latest", on_save_trial_latest},
                                          {"save_trial_best", on_save_trial_best},
                                          /* one trial: the experiment's best is the trial's */
                                          {"save_experiment_best", ignore_count},
                                          {NULL, NULL}};
    static const key_entry directory[] = {{"type", on_storage_string},
                                          {"container_path", on_storage_string},
                                          {"save_trial_latest", on_save_trial_latest},
                                          {"save_trial_best", on_save_trial_best},
                                          {"save_experiment_best", ignore_count},
                                          {NULL, NULL}};
    static const key_entry s3[] = {{"type", on_storage_string},
                                   {"bucket", on_storage_string},
                                   {"prefix", on_storage_optional},
                                   {"endpoint_url", on_storage_optional},
                                   {"access_key", on_storage_optional},
                                   {"secret_key", on_storage_optional},
                                   {"save_trial_latest", on_save_trial_latest},
                                   {"save_trial_best", on_save_trial_best},
                                   {"save_experiment_best", ignore_count},
                                   {NULL, NULL}};
    if (strcmp(type, "gcs") == 0)
        return fail(L, "'%s' is 'gcs': Google Cloud Storage is reached through its S3-compatible API here: type "
                    "'s3' with endpoint_url 'https://storage.googleapis.com' and an HMAC key as access_key and "
                    "secret_key", tpath);
    if (strcmp(type, "azure") == 0)
        return fail(L, "'%s' is 'azure': Azure Blob Storage is reached through an S3-compatible gateway here (MinIO's "
                    "gateway, for one): type 's3' with the gateway's endpoint_url", tpath);
    bool is_s3 = strcmp(type, "s3") == 0, is_dir = strcmp(type, "directory") == 0;
    if (!is_s3 && !is_dir && strcmp(type, "shared_fs") != 0)
        return fail(L, "'%s' is '%s'; expected 'shared_fs', 'directory' or 's3'", tpath, type);
    if (walk(L, path, v, is_s3 ? s3 : is_dir ? directory : shared_fs)) return CT_ECONFIG;
    ct_fit_opts *f = &L->c->fit;
    if (is_s3) {
        const char *bucket = json_string_value(json_object_get(v, "bucket"));
        const char *prefix = json_string_value(json_object_get(v, "prefix"));
        if (!bucket) return fail(L, "'%s' of type 's3' needs 'bucket'", path);
        if (strchr(bucket, '/')) return fail(L, "'%s.bucket' is '%s': a bucket's name has no '/'", path, bucket);
        char url[2048];
        int n = snprintf(url, sizeof url, "s3://%s%s%s", bucket, prefix ? "/" : "", prefix ? prefix : "");
        if (n < 0 || (size_t)n >= sizeof url) return fail(L, "'%s.prefix' is too long", path);
        if (!(f->checkpoint_storage = cti_config_keep(L->c, url))) return CT_ENOMEM;
        return keep_storage_string(L, v, "endpoint_url", &f->s3_endpoint_url) ||
                       keep_storage_string(L, v, "access_key", &f->s3_access_key) ||
                       keep_storage_string(L, v, "secret_key", &f->s3_secret_key)
                   ? CT_ENOMEM
                   : 0;
    }
    if (is_dir) {
        const char *dir = json_string_value(json_object_get(v, "container_path"));
        if (!dir) return fail(L, "'%s' of type 'directory' needs 'container_path'", path);
        return keep_storage_string(L, v, "container_path", &f->checkpoint_dir) ? CT_ENOMEM : 0;
    }
    const char *host = json_string_value(json_object_get(v, "host_path"));
    const char *sub = json_string_value(json_object_get(v, "storage_path"));
    if (sub && !host) return fail(L, "'%s.storage_path' needs '%s.host_path'", path, path);
    if (!host) return 0;
    /* Determined stores checkpoints in host_path/storage_path. */
    char dir[4096];
    int n = sub ? snprintf(dir, sizeof dir, "%s/%s", host, sub) : snprintf(dir, sizeof dir, "%s", host);
    if (n < 0 || (size_t)n >= sizeof dir) return fail(L, "'%s.host_path' is too long", path);
    const char *kept = cti_config_keep(L->c, dir);
    if (!kept) return CT_ENOMEM;
    f->checkpoint_dir = kept;
    return 0;
}

/* ---- the rest ---------------------------------------------------------------------- */

/* Determined's experiment seeds are 0 to 2^31 - 1. */
static int on_experiment_seed(loader *L, const char *path, json_t *v) {
    int64_t seed = 0;
    if (get_int(L, path, v, 0, CT_SEED_MAX, &seed)) return CT_ECONFIG;
    L->c->fit.seed = (uint64_t)seed;
    return 0;
}

/* ctrial's own key beside Determined's seed: deterministic algorithms. */
static int on_deterministic(loader *L, const char *path, json_t *v) {
    return get_bool(L, path, v, &L->c->fit.deterministic);
}

static int on_reproducibility(loader *L, const char *path, json_t *v) {
    static const key_entry keys[] = {
        {"experiment_seed", on_experiment_seed}, {"deterministic", on_deterministic}, {NULL, NULL}};
    return walk(L, path, v, keys);
}

static int on_aggregation_frequency(loader *L, const char *path, json_t *v) {
    return get_int32(L, path, v, 1, &L->c->fit.aggregation_frequency);
}

/* ctrial's own key (DistributedDataParallel's bucket_cap_mb): megabytes of
 * gradients per all-reduce bucket under mpirun. */
static int on_bucket_cap_mb(loader *L, const char *path, json_t *v) {
    return get_int(L, path, v, 1, 1 << 20, &L->c->fit.bucket_cap_mb) ? CT_ECONFIG : 0;
}

/* ctrial's own keys: the training step as a CUDA graph (trial.h). */
static int on_cuda_graphs(loader *L, const char *path, json_t *v) {
    return get_bool(L, path, v, &L->c->fit.cuda_graphs);
}

static int on_cuda_graph_warmup(loader *L, const char *path, json_t *v) {
    return get_int32(L, path, v, 1, &L->c->fit.cuda_graph_warmup);
}

/* ctrial's own key: glibc's heap thresholds set for training
 * (ct_fit_opts.tune_malloc; false leaves malloc alone). */
static int on_tune_malloc(loader *L, const char *path, json_t *v) {
    return get_bool(L, path, v, &L->c->fit.tune_malloc);
}

/* Determined's mixed_precision: apex's opt levels. O1 (autocast, with
 * dynamic loss scaling) is AMP. O2 and O3 keep the weights in half
 * precision, which PyTorch's AMP does not do: Determined accepts them, so
 * they run as O1 and ct_main says so (amp_level). */
static int on_mixed_precision(loader *L, const char *path, json_t *v) {
    const char *s = "O0";
    if (!json_is_null(v) && get_string(L, path, v, &s)) return CT_ECONFIG;
    bool o2 = strcmp(s, "O2") == 0 || strcmp(s, "O3") == 0;
    if (strcmp(s, "O0") != 0 && strcmp(s, "O1") != 0 && !o2)
        return fail(L, "'%s' must be O0, O1, O2 or O3, got '%s'", path, s);
    L->c->fit.mixed_precision = strcmp(s, "O0") != 0;
    snprintf(L->c->amp_level, sizeof L->c->amp_level, "%s", o2 ? s : "");
    return 0;
}

static int on_background_checkpoints(loader *L, const char *path, json_t *v) {
    return get_bool(L, path, v, &L->c->fit.background_checkpoints);
}

static int on_shard_optimizer(loader *L, const char *path, json_t *v) {
    return get_bool(L, path, v, &L->c->fit.shard_optimizer);
}

static int on_average_aggregated_gradients(loader *L, const char *path, json_t *v) {
    if (json_is_null(v)) return 0;
    return get_bool(L, path, v, &L->c->fit.average_aggregated_gradients);
}

/* Appends path to a comma-separated list of keys (what one warning of
 * ct_main names); a path that does not fit is left out. */
static void list_key(char *keys, size_t cap, const char *path) {
    size_t n = strlen(keys);
    if (n + strlen(path) + 3 < cap) snprintf(keys + n, cap - n, "%s%s", n ? ", " : "", path);
}

/* The keys only Horovod acts on. */
static void horovod_only(loader *L, const char *path) {
    list_key(L->c->horovod_keys, sizeof L->c->horovod_keys, path);
}

/* Horovod's knobs: named when set to something other than Determined's
 * default (a full config copied from Determined says nothing). */
static int on_horovod_bool(loader *L, const char *path, json_t *v) {
    bool b = false;
    if (json_is_null(v)) return 0;
    if (get_bool(L, path, v, &b)) return CT_ECONFIG;
    if (b) horovod_only(L, path);
    return 0;
}

static int on_fusion_cycle_time(loader *L, const char *path, json_t *v) {
    int64_t ms = 1;
    if (json_is_null(v)) return 0;
    if (get_int(L, path, v, 0, INT64_MAX, &ms)) return CT_ECONFIG;
    if (ms != 1) horovod_only(L, path);
    return 0;
}

static int on_grad_updates_size_file(loader *L, const char *path, json_t *v) {
    const char *s;
    if (json_is_null(v)) return 0;
    if (get_string(L, path, v, &s)) return CT_ECONFIG;
    horovod_only(L, path);
    return 0;
}

/* Horovod's fusion buffer in MB is what a gradient bucket is here: it
 * sets bucket_cap_mb unless that is given too (0, Horovod's "no fusion",
 * is the smallest bucket, 1 MB). Checked here, applied after the walk. */
static int on_fusion_threshold(loader *L, const char *path, json_t *v) {
    int64_t mb = 64;
    if (json_is_null(v)) return 0;
    return get_int(L, path, v, 0, 1 << 20, &mb) ? CT_ECONFIG : 0;
}

static int on_optimizations(loader *L, const char *path, json_t *v) {
    static const key_entry keys[] = {{"aggregation_frequency", on_aggregation_frequency},
                                     {"bucket_cap_mb", on_bucket_cap_mb},
                                     {"cuda_graphs", on_cuda_graphs},
                                     {"cuda_graph_warmup", on_cuda_graph_warmup},
                                     {"tune_malloc", on_tune_malloc},
                                     {"background_checkpoints", on_background_checkpoints},
                                     {"shard_optimizer", on_shard_optimizer},
                                     /* ctrial always averages across ranks, as true does */
                                     {"average_training_metrics", ignore_bool},
                                     {"mixed_precision", on_mixed_precision},
                                     {"average_aggregated_gradients", on_average_aggregated_gradients},
                                     {"tensor_fusion_threshold", on_fusion_threshold},
                                     /* Horovod's alone */
                                     {"gradient_compression", on_horovod_bool},
                                     {"auto_tune_tensor_fusion", on_horovod_bool},
                                     {"tensor_fusion_cycle_time", on_fusion_cycle_time},
                                     {"grad_updates_size_file", on_grad_updates_size_file},
                                     {NULL, NULL}};
    if (walk(L, path, v, keys)) return CT_ECONFIG;
    json_t *fusion = json_object_get(v, "tensor_fusion_threshold");
    if (json_is_integer(fusion) && !json_object_get(v, "bucket_cap_mb")) {
        json_int_t mb = json_integer_value(fusion);
        L->c->fit.bucket_cap_mb = mb > 0 ? mb : 1;
    }
    return 0;
}

/* ctrial's own key: where the trial trains, "cpu", "cuda" or "cuda:N"
 * (--device overrides it; under mpirun "cuda" means each local rank's own
 * GPU). */
static int on_device(loader *L, const char *path, json_t *v) {
    const char *s;
    ct_device d;
    if (get_string(L, path, v, &s)) return CT_ECONFIG;
    if (ct_device_parse(s, &d) != 0) return fail(L, "'%s' must be cpu, cuda or cuda:N, got '%s'", path, s);
    L->c->fit.device = cti_config_keep(L->c, s);
    return L->c->fit.device ? 0 : ct_set_error(CT_ENOMEM, "config: out of memory");
}

/* Keys only a Determined cluster acts on (where and how its containers
 * run): accepted with any value and named in one warning (ct_main prints
 * c->cluster_keys), so Determined's own configs run unchanged. */
static int cluster_only(loader *L, const char *path, json_t *v) {
    (void)v;
    list_key(L->c->cluster_keys, sizeof L->c->cluster_keys, path);
    return 0;
}

/* Determined's records_per_epoch: epochs are the data's here; kept to be
 * compared with the data's length (a warning when they differ). */
static int on_records_per_epoch(loader *L, const char *path, json_t *v) {
    return get_int(L, path, v, 0, INT64_MAX, &L->c->fit.records_per_epoch);
}

/* ctrial's own key, as --dist-timeout: seconds a rank waits in a
 * collective (a number >= 0, or "never"; 0 and "never" wait forever). */
static int on_dist_timeout(loader *L, const char *path, json_t *v) {
    if (json_is_string(v) && strcmp(json_string_value(v), "never") == 0) {
        L->c->fit.dist_timeout = INFINITY;
        return 0;
    }
    if (want_type(L, path, v, json_is_number(v), "seconds, a number >= 0, or \"never\"")) return CT_ECONFIG;
    double s = json_number_value(v);
    if (!(s >= 0) || !isfinite(s))
        return fail(L, "'%s' must be seconds, a number >= 0 (0 or \"never\": no timeout), got %g", path, s);
    L->c->fit.dist_timeout = s == 0 ? INFINITY : s;
    return 0;
}

static int on_slots_per_trial(loader *L, const char *path, json_t *v) {
    return get_int32(L, path, v, 1, &L->c->slots_per_trial);
}

static int on_max_restarts(loader *L, const char *path, json_t *v) {
    L->c->max_restarts_given = true;
    return get_int32(L, path, v, 0, &L->c->max_restarts);
}

static int on_resources(loader *L, const char *path, json_t *v) {
    /* The number of ranks comes from mpirun; slots_per_trial splits them
     * into groups in a search. */
    static const key_entry keys[] = {{"slots_per_trial", on_slots_per_trial},
                                     {"device", on_device},
                                     {"dist_timeout", on_dist_timeout},
                                     {"resource_pool", cluster_only},
                                     {"max_slots", cluster_only},
                                     {"priority", cluster_only},
                                     {"weight", cluster_only},
                                     {"shm_size", cluster_only},
                                     {"agent_label", cluster_only},
                                     {"devices", cluster_only},
                                     {"is_single_node", cluster_only},
                                     {"native_parallel", cluster_only},
                                     {NULL, NULL}};
    return walk(L, path, v, keys);
}

static int on_name(loader *L, const char *path, json_t *v) {
    const char *s;
    if (get_string(L, path, v, &s)) return CT_ECONFIG;
    char *copy = malloc(strlen(s) + 1);
    if (!copy) return ct_set_error(CT_ENOMEM, "config: out of memory");
    strcpy(copy, s);
    free(L->c->name);
    L->c->name = copy;
    return 0;
}

/* ctrial's own key (Determined's searcher.source_checkpoint_uuid, by path):
 * a checkpoint directory, ctrial's or Determined's, whose models,
 * optimizers and LR schedulers start the trial (--warm-start overrides). */
static int on_warm_start(loader *L, const char *path, json_t *v) {
    const char *s;
    if (get_string(L, path, v, &s)) return CT_ECONFIG;
    if (!s[0]) return fail(L, "'%s' is empty", path);
    L->c->fit.warm_start = cti_config_keep(L->c, s);
    return L->c->fit.warm_start ? 0 : CT_ENOMEM;
}

static int on_perform_initial_validation(loader *L, const char *path, json_t *v) {
    return get_bool(L, path, v, &L->c->fit.step_zero_validation);
}

static const key_entry top_keys[] = {
    {"name", on_name},
    {"hyperparameters", on_hyperparameters},
    {"searcher", on_searcher},
    {"min_validation_period", on_min_validation_period},
    {"min_checkpoint_period", on_min_checkpoint_period},
    {"checkpoint_policy", on_checkpoint_policy},
    {"checkpoint_storage", on_checkpoint_storage},
    {"reproducibility", on_reproducibility},
    {"optimizations", on_optimizations},
    {"scheduling_unit", on_scheduling_unit},
    {"perform_initial_validation", on_perform_initial_validation},
    {"data", on_data},
    {"warm_start", on_warm_start},
    /* accepted as in Determined, and ignored */
    {"records_per_epoch", on_records_per_epoch},
    {"description", ignore_string},
    {"labels", ignore_labels},
    {"entrypoint", ignore_string},
    {"workspace", ignore_string},
    {"project", ignore_string},
    {"max_restarts", on_max_restarts},
    {"resources", on_resources},
    /* what only a cluster does: named in one warning, ignored */
    {"environment", cluster_only},
    {"bind_mounts", cluster_only},
    {"integrations", cluster_only},
    {"pbs", cluster_only},
    {"slurm", cluster_only},
    {"debug", cluster_only},
    {"profiling", cluster_only},
    {"log_policies", cluster_only},
    {"preemption_timeout", cluster_only},
    {"retention_policy", cluster_only},
    {"security", cluster_only},
    {"tensorboard_storage", cluster_only},
    {"data_layer", cluster_only},
    {NULL, NULL},
};

static int load_json(cti_config *c, json_t *root, const char *label) {
    loader L = {c, label};
    snprintf(c->origin, sizeof c->origin, "%s", label);
    int rc = walk(&L, "", root, top_keys);
    if (rc == 0) c->loaded = true;
    /* The whole config, as the trial reads it (ct_ctx_experiment_config). */
    if (rc == 0 && !(c->whole = cti_value_from_json(root))) rc = ct_last_code() ? ct_last_code() : CT_ENOMEM;
    return rc;
}

static int check_load(cti_config *c, const void *arg, const char *what) {
    if (!c || !arg) return ct_set_error(CT_EINVAL, "ct_config_load_%s: NULL argument", what);
    if (c->loaded) return ct_set_error(CT_ECONFIG, "config: only one experiment config may be given");
    return 0;
}

int cti_config_load_string(cti_config *c, const char *json, const char *label) {
    int rc = check_load(c, json, "string");
    if (rc) return rc;
    if (!label) label = "config";
    json_error_t err;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return ct_set_error(CT_ECONFIG, "%s:%d:%d: %s", label, err.line, err.column, err.text);
    rc = load_json(c, root, label);
    json_decref(root);
    return rc;
}

int cti_config_load_file(cti_config *c, const char *path) {
    int rc = check_load(c, path, "file");
    if (rc) return rc;
    /* A regular file only (a FIFO would block, /dev/zero never end), of a
     * size a config can have; the read's message names the file. */
    char *text = NULL;
    size_t len = 0;
    if (cti_read_file_raw(path, CT_CONFIG_FILE_MAX, &text, &len) != CT_OK)
        return ct_set_error(CT_ECONFIG, "%s", ct_last_error());
    /* YAML by its extension, as Determined's configs are written; JSON else */
    size_t n = strlen(path);
    bool yaml = (n > 5 && strcmp(path + n - 5, ".yaml") == 0) || (n > 4 && strcmp(path + n - 4, ".yml") == 0);
    json_error_t err;
    json_t *root = yaml ? cti_yaml_to_json(text, len, path) : json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    free(text);
    if (!root)
        return yaml ? ct_last_code() : ct_set_error(CT_ECONFIG, "%s:%d:%d: %s", path, err.line, err.column, err.text);
    rc = load_json(c, root, path);
    json_decref(root);
    return rc;
}

/* ---- --hparam -------------------------------------------------------------------- */

/* The value of --hparam k=VALUE: JSON when it parses as JSON (numbers, true,
 * null, "quoted", {...}, [...]), else the text itself, so lr=0.1 is a float
 * and opt=adam a string. NEW. */
static ct_value *hparam_value(const char *text) {
    json_error_t err;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
    if (!j) {
        ct_value *s = ct_value_str(text);
        return s ? s : oom();
    }
    loader L = {NULL, "--hparam"};
    ct_value *v = to_value(&L, "", j, false);
    json_decref(j);
    return v;
}

/* The dict that holds the last component of a dotted key, created as
 * needed; *last receives that component (inside buf). Borrowed. */
static ct_value *hparam_parent(cti_config *c, char *key, const char *full, char **last) {
    ct_value *d = c->hparams;
    char *part = key;
    for (char *dot; (dot = strchr(part, '.')); part = dot + 1) {
        *dot = '\0';
        if (!part[0]) break;
        ct_value *child = ct_value_dict_get(d, part);
        if (!child) {
            child = ct_value_dict();
            if (!child || ct_value_dict_set(d, part, child)) return oom();
        } else if (ct_value_kind_of(child) != CT_VALUE_DICT) {
            ct_set_error(CT_ECONFIG, "--hparam %s: '%s' is a %s, not a dict", full, part,
                         ct_value_kind_name(ct_value_kind_of(child)));
            return NULL;
        }
        d = child;
    }
    if (!part[0]) {
        ct_set_error(CT_ECONFIG, "--hparam %s: empty key component", full);
        return NULL;
    }
    *last = part;
    return d;
}

/* The same assignment in c->hp_spec, where it fixes the value a search would
 * draw: "--hparam lr=0.1" makes lr a constant in every trial. `key` is the
 * dotted key (not modified). */
static int spec_set(cti_config *c, const char *key, const char *full, const char *text) {
    if (!c->hp_spec && !(c->hp_spec = json_object())) return ct_set_error(CT_ENOMEM, "config: out of memory");
    json_error_t err;
    json_t *val = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
    if (!val) val = json_string(text);
    /* An object value is a constant, not a group or a spec. */
    if (val && json_is_object(val)) val = json_pack("{ssso}", "type", "const", "val", val);
    if (!val) return ct_set_error(CT_ENOMEM, "config: out of memory");
    json_t *d = c->hp_spec;
    char part[PATH_MAX_];
    const char *p = key;
    for (const char *dot; (dot = strchr(p, '.')); p = dot + 1) {
        snprintf(part, sizeof part, "%.*s", (int)(dot - p), p);
        json_t *child = json_object_get(d, part);
        if (!child) {
            child = json_object();
            if (!child || json_object_set_new(d, part, child)) goto oom;
        } else if (!json_is_object(child) || json_object_get(child, "type")) {
            json_decref(val);
            /* the value's kind as --hparam's dicts name it (ct_value's) */
            const char *kind = json_is_object(child) ? "hyperparameter spec" : json_is_integer(child) ? "int"
                             : json_is_real(child) ? "float" : json_is_string(child) ? "str"
                             : json_is_boolean(child) ? "bool" : json_is_array(child) ? "list" : "None";
            return ct_set_error(CT_ECONFIG, "--hparam %s: '%s' is a %s, not a dict", full, part, kind);
        }
        d = child;
    }
    if (json_object_set_new(d, p, val)) return ct_set_error(CT_ENOMEM, "config: out of memory");
    return 0;
oom:
    json_decref(val);
    return ct_set_error(CT_ENOMEM, "config: out of memory");
}

int cti_config_set_hparam(cti_config *c, const char *assignment) {
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return ct_set_error(CT_ECONFIG, "--hparam: expected KEY=VALUE, got '%s'", assignment);
    size_t klen = (size_t)(eq - assignment);
    char *key = malloc(klen + 1);
    if (!key) return ct_set_error(CT_ENOMEM, "config: out of memory");
    memcpy(key, assignment, klen);
    key[klen] = '\0';
    char full[PATH_MAX_];
    snprintf(full, sizeof full, "%s", key);

    int rc = spec_set(c, key, full, eq + 1);
    char *last = NULL;
    ct_value *parent = rc ? NULL : hparam_parent(c, key, full, &last);
    ct_value *val = parent ? hparam_value(eq + 1) : NULL;
    if (!val) rc = ct_last_code();
    else if (ct_value_dict_set(parent, last, val)) rc = ct_last_code();
    free(key);
    if (rc) return rc;

    /* Checked here rather than in finish so the message names the flag. */
    const ct_value *gbs = ct_value_dict_get(c->hparams, "global_batch_size");
    if (strncmp(full, "global_batch_size", 17) == 0 && (full[17] == '\0' || full[17] == '.') &&
        !gbs_ok(gbs)) {
        char got[160];
        gbs_wrong(gbs, got, sizeof got);
        return ct_set_error(CT_ECONFIG, "--hparam %s: global_batch_size %s", full, got);
    }
    return 0;
}

/* ---- finishing ------------------------------------------------------------------- */

/* Records -> batches (period.h), naming where a period in records came from
 * when there is no global batch size to divide by. */
static int resolve_records(ct_period *p, int64_t gbs, const char *from) {
    if (cti_period_in_batches(p, gbs)) return 0;
    return ct_set_error(CT_ECONFIG, "%s: records need hyperparameters.global_batch_size "
                                    "(in the config or --hparam global_batch_size=N)", from);
}

bool cti_config_is_search(const cti_config *c) { return c->search.kind != CT_SEARCHER_SINGLE; }

/* The space of the sampled hyperparameters (and of every search, so that a
 * grid counts its points), checked; searcher single draws its trial's
 * values from it at once, as Determined's single search does. */
static int finish_space(cti_config *c) {
    bool search = cti_config_is_search(c);
    if (!c->hp_sampled && !search) return 0;
    json_t *empty = c->hp_spec ? NULL : json_object();
    c->space = cti_hp_space_new(c->hp_spec ? c->hp_spec : empty, "hyperparameters",
                               c->search.kind == CT_SEARCHER_GRID);
    json_decref(empty);
    if (!c->space) return ct_set_error(ct_last_code(), "%s: %s", c->origin[0] ? c->origin : "config", ct_last_error());
    if (search) return 0;
    cti_mt19937 mt;
    cti_mt19937_seed(&mt, (uint32_t)c->fit.seed);
    json_t *point = cti_hp_space_sample(c->space, &mt);
    ct_value *hp = point ? cti_value_from_json(point) : NULL;
    json_decref(point);
    if (!hp) return ct_last_code() ? ct_last_code() : ct_set_error(CT_ENOMEM, "config: out of memory");
    ct_value_free(c->hparams);
    c->hparams = hp;
    return 0;
}

/* A search's own checks: its ranks per trial, and the plan of
 * adaptive_asha (whose errors name the searcher's keys). */
static int finish_search(cti_config *c, int world_size) {
    c->search.max_length = c->fit.max_length.n;
    c->search.smaller_is_better = c->fit.smaller_is_better;
    c->search.seed = (uint32_t)c->fit.seed;
    int slots = c->slots_per_trial ? c->slots_per_trial : 1;
    if (world_size % slots != 0)
        return ct_set_error(CT_ECONFIG, "%s: 'resources.slots_per_trial' is %d, which does not divide the %d ranks "
                            "of this job: a search trains each trial on a group of slots_per_trial ranks",
                            c->origin, slots, world_size);
    if (!cti_searcher_kind_is_asha(c->search.kind)) return 0;
    cti_searcher *s = cti_searcher_new(&c->search, c->space);
    if (!s) return ct_set_error(ct_last_code(), "%s: %s", c->origin, ct_last_error());
    cti_searcher_free(s);
    return 0;
}

int cti_config_finish(cti_config *c, int world_size) {
    if (world_size < 1) return ct_set_error(CT_EINVAL, "cti_config_finish: world_size %d", world_size);
    int rc = finish_space(c);
    if (rc) return rc;
    bool search = cti_config_is_search(c);
    /* A trial of a search trains on slots_per_trial ranks. */
    int trial_ranks = search ? (c->slots_per_trial ? c->slots_per_trial : 1) : world_size;
    const ct_value *gbs = ct_value_dict_get(c->hparams, "global_batch_size");
    if (search && c->hp_spec && is_sampled_spec(json_object_get(c->hp_spec, "global_batch_size"))) gbs = NULL;
    bool has_gbs = c->hp_spec && json_object_get(c->hp_spec, "global_batch_size");
    int64_t n = 0;
    if (gbs) {
        if (!gbs_ok(gbs) || ct_value_get_int(gbs, &n)) {
            char got[160];
            gbs_wrong(gbs, got, sizeof got);
            return ct_set_error(CT_ECONFIG, "hyperparameters.global_batch_size %s", got);
        }
        /* Each rank trains global_batch_size / world_size records a batch. */
        if (n < trial_ranks)
            return ct_set_error(CT_ECONFIG, "hyperparameters.global_batch_size is %lld, smaller "
                                            "than the number of ranks (%d)", (long long)n,
                                trial_ranks);
        if (!search) c->fit.global_batch_size = n;
    }
    if (search) {
        /* Records stay records: each trial's ct_fit divides each length
         * by its own global_batch_size, as Determined does per rung. */
        const char *from = c->fit.max_length.unit == CT_RECORDS         ? c->max_length_from
                         : c->fit.validation_period.unit == CT_RECORDS ? c->validation_from
                         : c->fit.checkpoint_period.unit == CT_RECORDS ? c->checkpoint_from
                                                                        : NULL;
        if (from && !has_gbs)
            return ct_set_error(CT_ECONFIG, "%s: records need hyperparameters.global_batch_size (in the config or "
                                            "--hparam global_batch_size=N)", from);
    } else if (resolve_records(&c->fit.max_length, n, c->max_length_from) ||
               resolve_records(&c->fit.validation_period, n, c->validation_from) ||
               resolve_records(&c->fit.checkpoint_period, n, c->checkpoint_from)) {
        return CT_ECONFIG;
    }
    if (c->fit.max_length.unit == CT_NEVER)
        return ct_set_error(CT_ECONFIG, "no max_length: set searcher.max_length in the config "
                                        "or pass --max-length");
    if (search && (rc = finish_search(c, world_size))) return rc;
    c->fit.hparams = c->hparams;
    c->fit.data = c->data;
    c->fit.experiment_config = c->whole;
    return 0;
}
