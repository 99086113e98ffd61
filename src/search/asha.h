/* src/search/asha.h — adaptive ASHA's plan: Determined's brackets, their
 * trials and concurrency, and each bracket's rungs (asha.c). Internal to
 * ctrial (the adaptive_asha searcher uses it).
 *
 * Determined (master/pkg/searcher/adaptive_asha.go, asha_stopping.go):
 *
 *   m = min(max_rungs, int(log L / log d) + 1, int(log T / log d) + 1)
 *   brackets' rungs: aggressive [m]; standard [(m-1)/2+1 .. m];
 *                    conservative [1 .. m]; or bracket_rungs as given;
 *                    most rungs first
 *   trials t_i = max(int(T w_i / sum w), 1), w = d^(r-1) / r; the rest of T
 *                to the first bracket
 *   concurrency: mc = max(mc, n) split evenly, the first mc % n one more;
 *                mc 0: max(t_last, int(d)) each
 *   rung k of r:  max(int(L / d^(r-1-k)), 1) units, absolute
 *
 * for T = max_trials, L = max_length in its units, d = divisor. log is Go's
 * math.Log (cti_go_log), not libm's: they disagree exactly at some powers
 * of d (d = 3: L or T = 243, 59049), where the rung count turns. */
#ifndef CTRIAL_SEARCH_ASHA_H
#define CTRIAL_SEARCH_ASHA_H

#include <stdint.h>

#define CT_ASHA_MAX_RUNGS 32    /* d >= 2 and L < 2^63: at most 64; the config is refused past 32 */
#define CT_ASHA_MAX_BRACKETS 32

typedef enum { CT_ASHA_AGGRESSIVE, CT_ASHA_STANDARD, CT_ASHA_CONSERVATIVE } cti_asha_mode;

/* searcher: adaptive_asha's keys (Determined's defaults in brackets). */
typedef struct {
    int64_t max_trials;            /* required, >= 1 */
    int64_t max_length;            /* required, >= 1, in the length's units */
    int64_t max_concurrent_trials; /* (16); 0: each bracket max(t_last, int(d)) */
    double divisor;                /* (4), > 1 */
    int max_rungs;                 /* (5), >= 1 */
    cti_asha_mode mode;             /* (standard) */
    const int *bracket_rungs;      /* NULL: from mode; else each >= 1 */
    int n_bracket_rungs;
} cti_asha_opts;

typedef struct {
    int rungs;
    int64_t max_trials, max_concurrent;
    int64_t initial;                   /* trials started at once: min(max_concurrent, max_trials) */
    int64_t units[CT_ASHA_MAX_RUNGS];  /* each rung's length, absolute */
} cti_asha_bracket;

typedef struct {
    int n;
    cti_asha_bracket b[CT_ASHA_MAX_BRACKETS];
} cti_asha_plan;

cti_asha_opts cti_asha_defaults(void);
/* The plan of o: 0, or CT_ECONFIG naming the key ("searcher.divisor: must
 * be > 1, got 1"). Stricter than Determined where Determined crashes or
 * divides by zero (max_length 0, a bracket of 0 rungs). */
int cti_asha_plan_make(const cti_asha_opts *o, cti_asha_plan *out);
/* Go's math.Log (FreeBSD's algorithm), bit for bit. */
double cti_go_log(double x);

#endif
