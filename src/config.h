/* src/config.h — internal: the JSON experiment config (DESIGN.md, "Contracts
 * that users and tools see") and ct_main's flags, turned into ct_fit_opts.
 *
 * The sequence ct_main follows, and tests repeat piece by piece:
 *
 *     ct_config c;
 *     ct_config_init(&c);                          // ct_fit_defaults()
 *     ct_config_load_file(&c, "config.json");      // optional
 *     ct_config_set_hparam(&c, "opt.lr=0.1");      // flags override the config
 *     ct_config_finish(&c, world_size);            // records -> batches, checks
 *     ct_fit(trial, &c.fit);
 *     ct_config_free(&c);
 *
 * Every failure is CT_ECONFIG (CT_ENOMEM aside) with a message naming the
 * file and the key path ("config.json: unknown key 'searcher.metrc'") or the
 * flag ("--max-length: ..."), so that ct_main exits with CT_EXIT_CONFIG
 * before any training starts.
 */
#ifndef CT_CONFIG_H
#define CT_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "ctrial/trial.h"

/* Room for "config.json: 'searcher.max_length.records'" and the like. */
#define CT_CONFIG_FROM_MAX 512

typedef struct {
    /* The options for ct_fit; complete after ct_config_finish. Its strings,
     * hparams and data point into this struct: valid until ct_config_free. */
    ct_fit_opts fit;
    char *name;         /* the config's "name" (NULL when absent) */
    ct_value *hparams;  /* owned dict, never NULL after a successful init */
    ct_value *data;     /* owned, the config's "data" (NULL when absent) */
    /* Where each period was last set ("config.json: 'searcher.max_length'",
     * "--max-length"): records are turned into batches only in finish, once
     * global_batch_size is final, and the error must name the origin. */
    char max_length_from[CT_CONFIG_FROM_MAX];
    char validation_from[CT_CONFIG_FROM_MAX];
    char checkpoint_from[CT_CONFIG_FROM_MAX];
    bool loaded;        /* a config file or string was loaded */
    /* Owned copies of every string put in fit (see ct_config_keep). */
    char **strs;
    size_t nstrs, capstrs;
} ct_config;

/* Sets *c to ct_fit_defaults() with an empty hparams dict. 0 or CT_ENOMEM;
 * ct_config_free is safe after a failure. */
int ct_config_init(ct_config *c);
/* Frees what *c owns (accepts NULL and a failed init). */
void ct_config_free(ct_config *c);

/* Loads an experiment config over the defaults; the file's path (or
 * `label`, for a string) prefixes every message. Loading twice is refused. */
int ct_config_load_file(ct_config *c, const char *path);
int ct_config_load_string(ct_config *c, const char *json, const char *label);

/* A copy of s owned by *c (for the const char * fields of c->fit), or NULL
 * with CT_ENOMEM. */
const char *ct_config_keep(ct_config *c, const char *s);

/* --hparam's argument "key=value" / "a.b.c=value": the value is JSON when it
 * parses as JSON, else the string itself; dotted keys set nested dicts,
 * created as needed. Replaces an existing key in place. */
int ct_config_set_hparam(ct_config *c, const char *assignment);

/* Completes c->fit: global_batch_size from hparams (must not be smaller than
 * world_size), records turned into Batch(max(records / gbs, 1)),
 * max_length present, hparams and data wired in. */
int ct_config_finish(ct_config *c, int world_size);

/* ---- ct_main's flags (src/main.c) ---------------------------------------- */

typedef struct {
    ct_config cfg; /* what the flags and the config file produced */
    bool help;     /* --help was given: print ct_main_usage, exit 0 */
} ct_main_args;

/* Parses ct_main's flags (--config first, the others over it in order) and
 * finishes the config for `world_size` ranks. On failure *out still needs
 * ct_main_args_free. With --help nothing else is parsed. */
int ct_main_parse(int argc, char **argv, int world_size, ct_main_args *out);
void ct_main_args_free(ct_main_args *a);

/* The --help text: every flag with a one-line description. */
void ct_main_usage(FILE *f, const char *prog);

/* A flag's period or length: N, Nb, Ne, Nr, batches:N, epochs:N, records:N;
 * with allow_off also 0 / never; with allow_schedule batches:a,b,c and
 * epochs:a,b,c. Errors name `flag`. */
int ct_parse_period(const char *flag, const char *s, bool allow_off, bool allow_schedule,
                    ct_period *out);

/* Ranks in this launch, from mpirun's environment (OMPI_COMM_WORLD_SIZE,
 * PMI_SIZE); 1 outside mpirun. */
int ct_main_world_size(void);

#endif
