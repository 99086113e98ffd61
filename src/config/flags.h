/* src/config/flags.h — ct_main's flags over the experiment config (flags.c).
 * Internal to ctrial.
 *
 *     cti_main_args a;
 *     if (cti_main_parse(argc, argv, cti_launch_world_size(), &a) == 0 && !a.help)
 *         rc = ct_fit(trial, &a.cfg.fit);
 *     cti_main_args_free(&a);
 */
#ifndef CTRIAL_CONFIG_FLAGS_H
#define CTRIAL_CONFIG_FLAGS_H

#include <stdbool.h>
#include <stdio.h>

#include "config/experiment.h"

typedef struct {
    cti_config cfg; /* what the flags and the config file produced */
    bool help;     /* --help was given: print cti_main_usage, exit 0 */
    bool version;  /* --version was given: print ctrial's version, exit 0 */
} cti_main_args;

/* Parses ct_main's flags (--config first, the others over it in order) and
 * finishes the config for `world_size` ranks. On failure *out still needs
 * cti_main_args_free. With --help or --version nothing else is parsed. */
int cti_main_parse(int argc, char **argv, int world_size, cti_main_args *out);
/* The same with a program's own flags (p->flags; p may be NULL), which are
 * checked first (names, types, clashes with ctrial's) and written through
 * their value pointers as they are met. */
int cti_main_parse_with(int argc, char **argv, int world_size, const ct_main_params *p, cti_main_args *out);
void cti_main_args_free(cti_main_args *a);

/* The --help text: every flag with a one-line description; with p, the
 * program's description and flags too. */
void cti_main_usage(FILE *f, const char *prog);
void cti_main_usage_with(FILE *f, const char *prog, const ct_main_params *p);

/* A flag's period or length: N, Nb, Ne, Nr, batches:N, epochs:N, records:N;
 * with allow_off also 0 / never; with allow_schedule batches:a,b,c and
 * epochs:a,b,c. Errors name `flag`. */
int cti_parse_period(const char *flag, const char *s, bool allow_off, bool allow_schedule,
                    ct_period *out);

#endif
