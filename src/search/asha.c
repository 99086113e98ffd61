/* src/search/asha.c — adaptive ASHA's brackets and rungs (asha.h), with
 * Determined's arithmetic: Go's float64 operations, int() truncating. */
#include "search/asha.h"

#include <math.h>
#include <string.h>

#include "ctrial/error.h"

double cti_go_log(double x) {
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    const double l1 = 6.666666666666735130e-01, l2 = 3.999999999940941908e-01, l3 = 2.857142874366239149e-01,
                 l4 = 2.222219843214978396e-01, l5 = 1.818357216161805012e-01, l6 = 1.531383769920937332e-01,
                 l7 = 1.479819860511658591e-01;
    if (isnan(x) || (isinf(x) && x > 0)) return x;
    if (x < 0) return NAN;
    if (x == 0) return -INFINITY;
    int ki;
    double f1 = frexp(x, &ki);
    if (f1 < 0.7071067811865476) { /* Sqrt2 / 2 */
        f1 *= 2;
        ki--;
    }
    double f = f1 - 1, k = (double)ki;
    double s = f / (2 + f), s2 = s * s, s4 = s2 * s2;
    double t1 = s2 * (l1 + s4 * (l3 + s4 * (l5 + s4 * l7)));
    double t2 = s4 * (l2 + s4 * (l4 + s4 * l6));
    double r = t1 + t2, hfsq = 0.5 * f * f;
    return k * ln2_hi - ((hfsq - (s * (hfsq + r) + k * ln2_lo)) - f);
}

cti_asha_opts cti_asha_defaults(void) {
    return (cti_asha_opts){.max_concurrent_trials = 16, .divisor = 4, .max_rungs = 5, .mode = CT_ASHA_STANDARD};
}

static int check(const cti_asha_opts *o) {
    if (o->max_trials < 1) return ct_set_error(CT_ECONFIG, "searcher.max_trials: must be >= 1, got %lld", (long long)o->max_trials);
    if (o->max_length < 1)
        return ct_set_error(CT_ECONFIG, "searcher.max_length: must be >= 1, got %lld", (long long)o->max_length);
    if (o->max_concurrent_trials < 0)
        return ct_set_error(CT_ECONFIG, "searcher.max_concurrent_trials: must be >= 0, got %lld",
                            (long long)o->max_concurrent_trials);
    if (!(o->divisor > 1)) return ct_set_error(CT_ECONFIG, "searcher.divisor: must be > 1, got %g", o->divisor);
    if (o->max_rungs < 1) return ct_set_error(CT_ECONFIG, "searcher.max_rungs: must be >= 1, got %d", o->max_rungs);
    if ((int)o->mode < (int)CT_ASHA_AGGRESSIVE || (int)o->mode > (int)CT_ASHA_CONSERVATIVE)
        return ct_set_error(CT_ECONFIG, "searcher.mode: must be aggressive, standard or conservative");
    if (o->bracket_rungs && (o->n_bracket_rungs < 1 || o->n_bracket_rungs > CT_ASHA_MAX_BRACKETS))
        return ct_set_error(CT_ECONFIG, "searcher.bracket_rungs: must list 1 to %d brackets", CT_ASHA_MAX_BRACKETS);
    for (int i = 0; o->bracket_rungs && i < o->n_bracket_rungs; i++)
        if (o->bracket_rungs[i] < 1 || o->bracket_rungs[i] > CT_ASHA_MAX_RUNGS)
            return ct_set_error(CT_ECONFIG, "searcher.bracket_rungs[%d]: a bracket has 1 to %d rungs, got %d", i,
                                CT_ASHA_MAX_RUNGS, o->bracket_rungs[i]);
    return 0;
}

static int by_rungs_desc(const cti_asha_bracket *a, const cti_asha_bracket *b) { return b->rungs - a->rungs; }

int cti_asha_plan_make(const cti_asha_opts *o, cti_asha_plan *out) {
    memset(out, 0, sizeof *out);
    int rc = check(o);
    if (rc) return rc;
    double d = o->divisor;
    if (o->bracket_rungs) {
        out->n = o->n_bracket_rungs;
        for (int i = 0; i < out->n; i++) out->b[i].rungs = o->bracket_rungs[i];
    } else {
        /* the top rung holds at least one trial and one unit */
        int64_t m = o->max_rungs;
        int64_t by_length = (int64_t)(cti_go_log((double)o->max_length) / cti_go_log(d)) + 1;
        int64_t by_trials = (int64_t)(cti_go_log((double)o->max_trials) / cti_go_log(d)) + 1;
        if (by_length < m) m = by_length;
        if (by_trials < m) m = by_trials;
        if (m > CT_ASHA_MAX_RUNGS) m = CT_ASHA_MAX_RUNGS;
        int64_t first = o->mode == CT_ASHA_AGGRESSIVE ? m : o->mode == CT_ASHA_STANDARD ? (m - 1) / 2 + 1 : 1;
        for (int64_t r = first; r <= m; r++) out->b[out->n++].rungs = (int)r;
    }
    /* most rungs first (a stable insertion sort keeps equal ones in order) */
    for (int i = 1; i < out->n; i++)
        for (int j = i; j > 0 && by_rungs_desc(&out->b[j - 1], &out->b[j]) > 0; j--) {
            cti_asha_bracket t = out->b[j];
            out->b[j] = out->b[j - 1];
            out->b[j - 1] = t;
        }
    /* getBracketMaxTrials */
    double w[CT_ASHA_MAX_BRACKETS], total = 0;
    for (int i = 0; i < out->n; i++) total += w[i] = pow(d, out->b[i].rungs - 1) / out->b[i].rungs;
    int64_t given = 0;
    for (int i = 0; i < out->n; i++) {
        int64_t t = (int64_t)(w[i] / total * (double)o->max_trials);
        out->b[i].max_trials = t > 1 ? t : 1;
        given += out->b[i].max_trials;
    }
    if (o->max_trials > given) out->b[0].max_trials += o->max_trials - given;
    /* getBracketMaxConcurrentTrials */
    int64_t mc = o->max_concurrent_trials;
    for (int i = 0; i < out->n; i++) {
        if (mc == 0) {
            int64_t last = out->b[out->n - 1].max_trials, di = (int64_t)d;
            out->b[i].max_concurrent = last > di ? last : di;
        } else {
            int64_t all = mc > out->n ? mc : out->n;
            out->b[i].max_concurrent = all / out->n + (i < all % out->n);
        }
        out->b[i].initial = out->b[i].max_concurrent < out->b[i].max_trials ? out->b[i].max_concurrent
                                                                            : out->b[i].max_trials;
        /* makeRungs: absolute lengths */
        for (int k = 0; k < out->b[i].rungs; k++) {
            int64_t u = (int64_t)((double)o->max_length / pow(d, out->b[i].rungs - k - 1));
            out->b[i].units[k] = u > 1 ? u : 1;
        }
    }
    return 0;
}
