/*
 * ctrial/main.h — the standard program: ct_main parses the flags and the
 * experiment config, runs one ct_fit or a search, and returns the exit
 * code; ct_main_ex adds the program's own flags. Module cli.
 *
 *     int main(int argc, char **argv) { return ct_main(argc, argv, &trial); }
 */
#ifndef CTRIAL_MAIN_H
#define CTRIAL_MAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trial.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The standard program: parses flags and the experiment config (YAML or
 * JSON)
 * (--help lists them), runs ct_fit (again from the latest checkpoint after
 * a failure, up to max_restarts times when the config gives it) or a
 * search, prints a one-line cause on failure and returns the process exit
 * code (ct_exit_code). It catches SIGTERM and
 * SIGINT from its first line until the process exits: one before ct_fit
 * stops the run before training (exit code 0, nothing to save), one after
 * it is recorded rather than fatal (docs/api/trial.md, "Stop signals"). */
CT_API int ct_main(int argc, char **argv, const ct_trial *trial);

/* A program's own flag, parsed by ct_main_ex with ctrial's (in any order,
 * "--name V" or "--name=V") and listed in --help under the program's
 * flags. The value is written where `value` points when the flag is given;
 * otherwise what is there stays (the default):
 *
 *     static const char *data_dir = "data";
 *     static int64_t hidden = 128;
 *     static bool augment = false;
 *     static const ct_flag flags[] = {
 *         {"--data-dir", CT_FLAG_STRING, &data_dir, "DIR", "where the CSV files are"},
 *         {"--hidden", CT_FLAG_INT, &hidden, "N", "hidden units"},
 *         {"--augment", CT_FLAG_BOOL, &augment, NULL, "random crops and flips"},
 *     };
 *     int main(int argc, char **argv) {
 *         ct_main_params p = ct_main_default_params();
 *         p.flags = flags;
 *         p.num_flags = sizeof flags / sizeof *flags;
 *         return ct_main_ex(argc, argv, &trial, &p);
 *     }
 *
 * A value that does not parse as its type is a config error naming the flag
 * (exit code 2). A name that does not start with "--", that repeats, or
 * that is one of ctrial's flags is refused before anything is parsed (the
 * message names it; exit code 2). */
typedef enum {
    CT_FLAG_BOOL,   /* bool *: a switch, true when given (takes no value) */
    CT_FLAG_INT,    /* int64_t *: a decimal integer, sign allowed */
    CT_FLAG_DOUBLE, /* double *: a number as strtod reads it in the "C" locale, finite */
    CT_FLAG_STRING, /* const char **: points into argv */
    CT_FLAG_TYPE_MAX_ENUM_ = 0x7fffffff
} ct_flag_type;

typedef struct {
    const char *name; /* "--data-dir" */
    ct_flag_type type;
    void *value;      /* where the value goes (see ct_flag_type) */
    const char *arg;  /* the value's name in --help ("DIR"); NULL: N, X or TEXT by type */
    const char *help; /* one line for --help */
} ct_flag;

/* Made by ct_main_default_params(), which sets its size (as ct_fit_opts). */
typedef struct {
    uint32_t size;           /* sizeof(ct_main_params) where it was made: never set by hand */
    const ct_flag *flags;    /* the program's own flags (NULL: none) */
    size_t num_flags;
    const char *description; /* a line under --help's usage line (NULL: none) */
    void *user;              /* ct_fit_opts.user: ct_ctx_user_data in the trial (NULL) */
} ct_main_params;

/* Fills the first `size` bytes of *p with the defaults (no flags, no
 * description, no user pointer) and sets p->size; see
 * ct_main_default_params(). */
CT_API void ct_main_params_init(ct_main_params *p, size_t size);
static inline ct_main_params ct_main_default_params(void) {
    ct_main_params p;
    ct_main_params_init(&p, sizeof p);
    return p;
}
/* ct_main with the program's own flags, description and user pointer;
 * ct_main(argc, argv, trial) is ct_main_ex with the default params. */
CT_API int ct_main_ex(int argc, char **argv, const ct_trial *trial, const ct_main_params *p);

/* Process exit codes (docs/design.md, "Contracts"): a preempted run that
 * checkpointed exits 0. */
enum {
    CT_EXIT_OK = 0,
    CT_EXIT_TRIAL = 1,      /* the trial (or libtorch) failed */
    CT_EXIT_CONFIG = 2,     /* bad flags or experiment config */
    CT_EXIT_CHECKPOINT = 3, /* bad checkpoint */
    CT_EXIT_NAN = 4,        /* non-finite loss with stop_on_nan */
    CT_EXIT_DIST = 5,       /* a rank was lost */
};
/* The exit code for a ct_fit result. */
CT_API int ct_exit_code(int status);

#ifdef __cplusplus
}
#endif
#endif
