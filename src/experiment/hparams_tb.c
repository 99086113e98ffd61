/* src/experiment/hparams_tb.c — the search as TensorBoard's HParams
 * dashboard sees it (summary.h): the experiment in the search's folder,
 * each trial's session start and end in the trial's own folder, where its
 * validation scalars are. Nested hyperparameters are named group.name;
 * values that are not a number, a string or a bool (lists, null) are left
 * out, as TensorBoard has no type for them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "experiment/summary.h"
#include "formats/tb_hparams.h"
#include "formats/tbevents.h"

#define MAX_HPS 256

typedef struct {
    char names[MAX_HPS][256];
    cti_tb_hp_value values[MAX_HPS];
    cti_tb_hp_info infos[MAX_HPS];
    cti_tb_hp_value choices[MAX_HPS][16];
    size_t n;
} hp_list;

static bool scalar(const json_t *v, cti_tb_hp_value *out) {
    if (json_is_number(v) && isfinite(json_number_value(v))) *out = (cti_tb_hp_value){.kind = CT_TB_HP_NUMBER,
                                                                                     .number = json_number_value(v)};
    else if (json_is_string(v)) *out = (cti_tb_hp_value){.kind = CT_TB_HP_STRING, .string = json_string_value(v)};
    else if (json_is_boolean(v)) *out = (cti_tb_hp_value){.kind = CT_TB_HP_BOOL, .boolean = json_is_true(v)};
    else return false;
    return true;
}

/* One entry per leaf of `point` (a trial's values), with the domain its
 * spec gives when `spec` is not NULL. */
static void collect(hp_list *l, const json_t *spec, const json_t *point, const char *prefix) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)point, k, v) {
        if (l->n == MAX_HPS) return;
        const json_t *sp = json_object_get(spec, k);
        const char *type = json_string_value(json_object_get(sp, "type"));
        char name[256];
        snprintf(name, sizeof name, "%s%s", prefix, k);
        if (json_is_object(v) && !type) {
            char sub[260];
            snprintf(sub, sizeof sub, "%s.", name);
            collect(l, sp, v, sub);
            continue;
        }
        cti_tb_hp_value x;
        if (!scalar(v, &x)) continue;
        size_t i = l->n++;
        snprintf(l->names[i], sizeof l->names[i], "%s", name);
        x.name = l->names[i];
        l->values[i] = x;
        cti_tb_hp_info *info = &l->infos[i];
        *info = (cti_tb_hp_info){.name = l->names[i], .kind = x.kind, .domain = CT_TB_HP_ANY};
        if (!type) continue;
        double lo = json_number_value(json_object_get(sp, "minval")), hi = json_number_value(json_object_get(sp, "maxval"));
        if (strcmp(type, "int") == 0 || strcmp(type, "double") == 0) {
            info->domain = CT_TB_HP_INTERVAL, info->min = lo, info->max = hi;
        } else if (strcmp(type, "log") == 0) {
            double b = json_number_value(json_object_get(sp, "base"));
            double a = pow(b, lo), z = pow(b, hi);
            info->domain = CT_TB_HP_INTERVAL, info->min = a < z ? a : z, info->max = a < z ? z : a;
        } else if (strcmp(type, "categorical") == 0) {
            const json_t *vals = json_object_get(sp, "vals");
            size_t j, n = 0;
            json_t *c;
            bool same = json_array_size(vals) <= 16;
            json_array_foreach(vals, j, c) {
                if (!same) break;
                same = scalar(c, &l->choices[i][n]) && l->choices[i][n].kind == x.kind;
                n++;
            }
            if (same && n) info->domain = CT_TB_HP_DISCRETE, info->values = l->choices[i], info->n_values = n;
        }
        if (info->domain == CT_TB_HP_INTERVAL && !(isfinite(info->min) && isfinite(info->max)))
            info->domain = CT_TB_HP_ANY;
    }
}

int cti_exp_tb_experiment(const char *dir, const json_t *spec, const json_t *first_point, const char *metric) {
    hp_list *l = calloc(1, sizeof *l);
    if (!l) return ct_set_error(CT_ENOMEM, "search: out of memory");
    collect(l, spec, first_point, "");
    char tag[300];
    snprintf(tag, sizeof tag, "validation/%s", metric);
    const char *const tags[] = {tag, "training/loss"};
    cti_tb_writer *w = cti_tb_open(dir, ".hparams");
    int rc = w ? cti_tb_add_hparams_experiment(w, l->infos, l->n, tags, 2, 0) : ct_last_code();
    cti_tb_close(w);
    free(l);
    return rc;
}

int cti_exp_tb_session(const char *trial_dir, const json_t *point, bool start, cti_exp_state state) {
    hp_list *l = calloc(1, sizeof *l);
    if (!l) return ct_set_error(CT_ENOMEM, "search: out of memory");
    cti_tb_writer *w = cti_tb_open(trial_dir, ".hparams");
    int rc = !w ? ct_last_code() : 0;
    if (!rc && start) {
        collect(l, NULL, point, "");
        rc = cti_tb_add_hparams_session_start(w, NULL, l->values, l->n, 0);
    } else if (!rc) {
        rc = cti_tb_add_hparams_session_end(w, state == CT_EXP_ERRORED ? CT_TB_HP_STATUS_FAILURE
                                                                      : CT_TB_HP_STATUS_SUCCESS, 0);
    }
    cti_tb_close(w);
    free(l);
    return rc;
}
