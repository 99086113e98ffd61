/* src/config/experiment.h — the JSON experiment config, turned into
 * ct_fit_opts (docs/design.md, "Contracts"). Internal to ctrial.
 *
 * The sequence ct_main follows, and tests repeat piece by piece:
 *
 *     cti_config c;
 *     cti_config_init(&c);                          // ct_fit_defaults()
 *     cti_config_load_file(&c, "config.json");      // optional
 *     cti_config_set_hparam(&c, "opt.lr=0.1");      // flags override the config
 *     cti_config_finish(&c, world_size);            // records -> batches, checks
 *     ct_fit(trial, &c.fit);
 *     cti_config_free(&c);
 *
 * Every failure is CT_ECONFIG (CT_ENOMEM aside) with a message naming the
 * file and the key path ("config.json: unknown key 'searcher.metrc'") or the
 * flag ("--max-length: ..."), so that ct_main exits with CT_EXIT_CONFIG
 * before any training starts.
 */
#ifndef CTRIAL_CONFIG_EXPERIMENT_H
#define CTRIAL_CONFIG_EXPERIMENT_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "ctrial/trial.h"
#include "search/searcher.h"

/* Room for "config.json: 'searcher.max_length.records'" and the like. */
#define CT_CONFIG_FROM_MAX 512

typedef struct {
    /* The options for ct_fit; complete after cti_config_finish. Its strings,
     * hparams and data point into this struct: valid until cti_config_free. */
    ct_fit_opts fit;
    char *name;         /* the config's "name" (NULL when absent) */
    ct_value *hparams;  /* owned dict, never NULL after a successful init */
    ct_value *data;     /* owned, the config's "data" (NULL when absent) */
    ct_value *whole;    /* owned, the whole config as loaded (NULL when none was) */
    /* Where each period was last set ("config.json: 'searcher.max_length'",
     * "--max-length"): records are turned into batches only in finish, once
     * global_batch_size is final, and the error must name the origin. */
    char max_length_from[CT_CONFIG_FROM_MAX];
    char validation_from[CT_CONFIG_FROM_MAX];
    char checkpoint_from[CT_CONFIG_FROM_MAX];
    bool loaded;        /* a config file or string was loaded */
    char origin[256];   /* the config file's name (or string's label) for messages ("" before a load) */
    /* The searcher's own keys (searcher.h; metric, smaller_is_better and
     * max_length are in fit). search.max_length is fit.max_length's n, in
     * its unit, after finish. */
    cti_searcher_opts search;
    json_t *hp_spec;      /* owned: the hyperparameters as written, --hparam applied (NULL: none given) */
    cti_hp_space *space;   /* owned, after finish: hp_spec's space (NULL: no hyperparameter samples) */
    bool hp_sampled;      /* hp_spec holds an int, double, log or categorical */
    int max_restarts;     /* max_restarts: a failed trial's retries in a search (5) */
    bool max_restarts_given; /* the config gives it: a single trial restarts too (ct_main) */
    const char *evaluate;    /* --evaluate CHECKPOINT: ct_evaluate instead of ct_fit (kept) */
    int slots_per_trial;  /* resources.slots_per_trial: ranks per trial in a search (0: not given) */
    char cluster_keys[512]; /* "environment, bind_mounts": keys only a Determined cluster uses, ignored */
    char horovod_keys[512]; /* optimizations that only Horovod acts on, given other than their defaults: ignored */
    char amp_level[4];    /* optimizations.mixed_precision O2 or O3, which run as O1 ("" otherwise) */
    /* Owned copies of every string put in fit (see cti_config_keep). */
    char **strs;
    size_t nstrs, capstrs;
} cti_config;

/* Sets *c to ct_fit_defaults() with an empty hparams dict. 0 or CT_ENOMEM;
 * cti_config_free is safe after a failure. */
int cti_config_init(cti_config *c);
/* Frees what *c owns (accepts NULL and a failed init). */
void cti_config_free(cti_config *c);

/* The largest config file read (a config is a few KB; this is no limit a
 * real one meets, and keeps a wrong path from filling memory). */
#define CT_CONFIG_FILE_MAX (64u << 20)

/* Loads an experiment config over the defaults; the file's path (or
 * `label`, for a string) prefixes every message. Only a regular file is
 * read (a FIFO or a device is CT_ECONFIG naming it). Loading twice is
 * refused. */
int cti_config_load_file(cti_config *c, const char *path);
int cti_config_load_string(cti_config *c, const char *json, const char *label);

/* A copy of s owned by *c (for the const char * fields of c->fit), or NULL
 * with CT_ENOMEM. */
const char *cti_config_keep(cti_config *c, const char *s);

/* --hparam's argument "key=value" / "a.b.c=value": the value is JSON when it
 * parses as JSON, else the string itself; dotted keys set nested dicts,
 * created as needed. Replaces an existing key in place. */
int cti_config_set_hparam(cti_config *c, const char *assignment);

/* Completes c->fit: global_batch_size from hparams (must not be smaller than
 * world_size), records turned into Batch(max(records / gbs, 1)),
 * max_length present, hparams and data wired in. With sampled
 * hyperparameters it builds c->space (a bad spec is CT_ECONFIG naming its
 * key); searcher single then draws its one trial's hyperparameters into
 * c->hparams. A search (cti_config_is_search) keeps periods in records as
 * records (each trial's ct_fit turns them into batches by its own
 * global_batch_size, Determined's rule for every rung length) and checks
 * that slots_per_trial divides world_size. */
int cti_config_finish(cti_config *c, int world_size);

/* The config asks for more than one trial: searcher random, grid or
 * adaptive_asha (src/experiment runs it); single is one ct_fit. */
bool cti_config_is_search(const cti_config *c);

#endif
