/* src/search/space.h — Determined's hyperparameter space: the config's
 * `hyperparameters`, parsed and checked, sampled as Determined's random and
 * adaptive searchers sample it, and enumerated as its grid searcher does.
 * Internal to ctrial (the searchers use it).
 *
 * Forms, per key (Determined's HyperparameterV0):
 *   a scalar, null or a list                  const: that value
 *   {"type": "const", "val": V}               const
 *   {"type": "int", "minval": I, "maxval": I, "count": N?}     inclusive integers
 *   {"type": "double", "minval": X, "maxval": X, "count": N?}
 *   {"type": "log", "minval": X, "maxval": X, "base": B, "count": N?}   B^x
 *   {"type": "categorical", "vals": [...]}
 *   an object without "type"                  a nested group
 * minval < maxval strictly, base > 0, count >= 1; a grid needs count for
 * int, double and log. Stricter than Determined: an empty categorical is
 * refused (Determined's random search panics on it, its grid makes no
 * trial).
 *
 * Order: names sorted by bytes at every level (Determined sorts the top
 * level; it walks a nested group in Go's random map order when sampling,
 * so the two agree whenever no nested group has two children that draw).
 */
#ifndef CTRIAL_SEARCH_SPACE_H
#define CTRIAL_SEARCH_SPACE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "base/mt19937.h"

typedef struct cti_hp_space cti_hp_space;

/* The space of `hps` (borrowed; an object), checked for a grid search when
 * `grid`. `path` names it in messages ("hyperparameters"). New space, or
 * NULL + CT_ECONFIG naming the key ("hyperparameters.lr: minval (0.5) must
 * be less than maxval (0.1)"). */
cti_hp_space *cti_hp_space_new(const json_t *hps, const char *path, bool grid);
void cti_hp_space_free(cti_hp_space *s);

/* One draw, Determined's sampleAll: each hyperparameter in order, an int
 * uniform over [minval, maxval] (masked rejection), a double uniform on
 * [minval, maxval), a log base^uniform, a categorical a uniform pick, a
 * const nothing drawn. NEW JSON object (nested groups as objects), or NULL
 * + CT_ENOMEM. */
json_t *cti_hp_space_sample(const cti_hp_space *s, cti_mt19937 *mt);

/* Determined's grid: one axis per leaf, the first axis varying slowest.
 * Points per axis: int min(count, maxval - minval + 1) values
 * round(minval + i (maxval - minval) / (count - 1)) (the middle, rounded
 * half away from zero, when count is 1); double and log the same without
 * rounding (log: base to that power); const its value; categorical its
 * values in order. An empty space has no point (Determined: no trial). */
int64_t cti_hp_space_grid_len(const cti_hp_space *s);
/* Point k of the grid, in that order: NEW JSON object, or NULL + error
 * (CT_EINDEX when k is out of range). Determined creates the grid's trials
 * from its last point back to its first. */
json_t *cti_hp_space_grid_point(const cti_hp_space *s, int64_t k);

/* Determined's draws on mt: numpy's random_sample, [0, 1) with 53 bits. */
double cti_hp_unit(cti_mt19937 *mt);

#endif
