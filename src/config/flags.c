/* src/config/flags.c — ct_main's flags (see flags.h), over the experiment
 * config.
 *
 * The flags live in one table that both the parser and --help read, so the
 * help cannot drift from what is accepted. Flags override the config file
 * whatever their position: --config is applied first, the rest in order. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/flags.h"
#include "config/period.h"

/* ---- value syntax ------------------------------------------------------------ */

/* A decimal integer >= 0 with nothing else around it. */
static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = (uint64_t)v;
    return true;
}

static bool parse_count(const char *s, int64_t *out) {
    uint64_t v;
    if (!parse_u64(s, &v) || v > (uint64_t)INT64_MAX) return false;
    *out = (int64_t)v;
    return true;
}

static int period_syntax(const char *flag, const char *s, bool allow_off, bool allow_schedule) {
    return ct_set_error(CT_ECONFIG, "%s: expected N, Nb, Ne, Nr, batches:N, epochs:N or "
                                    "records:N with N >= 1%s%s, got '%s'", flag,
                        allow_off ? ", 0 or never" : "",
                        allow_schedule ? ", or a schedule batches:a,b,c / epochs:a,b,c" : "", s);
}

/* "batches:a,b,c" -> a schedule; the points are parsed in place. */
static int parse_schedule(const char *flag, const char *s, ct_unit unit, const char *list,
                          ct_period *out) {
    int64_t pts[CT_SCHEDULE_MAX];
    int n = 0;
    char buf[1024];
    if (strlen(list) >= sizeof buf) return ct_set_error(CT_ECONFIG, "%s: schedule too long", flag);
    strcpy(buf, list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == CT_SCHEDULE_MAX)
            return ct_set_error(CT_ECONFIG, "%s: more than %d points in '%s'", flag,
                                CT_SCHEDULE_MAX, s);
        if (!parse_count(tok, &pts[n]) || pts[n] < 1)
            return ct_set_error(CT_ECONFIG, "%s: schedule point '%s' in '%s' is not an integer "
                                            ">= 1", flag, tok, s);
        n++;
    }
    /* strtok_r skips empty fields: "batches:1,,2" and "batches:5," must not pass. */
    if (n == 0 || list[0] == ',' || list[strlen(list) - 1] == ',' || strstr(list, ",,"))
        return period_syntax(flag, s, true, true);
    *out = ct_schedule(unit, n, pts);
    return out->unit == CT_NEVER ? ct_set_error(CT_ECONFIG, "%s: %s", flag, ct_last_error()) : 0;
}

int cti_parse_period(const char *flag, const char *s, bool allow_off, bool allow_schedule,
                    ct_period *out) {
    if (allow_off && (strcmp(s, "never") == 0 || strcmp(s, "0") == 0)) {
        *out = ct_never();
        return 0;
    }
    static const struct {
        const char *name;
        char suffix;
        ct_unit unit;
    } units[] = {{"batches", 'b', CT_BATCHES}, {"epochs", 'e', CT_EPOCHS}, {"records", 'r', CT_RECORDS}};
    ct_unit unit = CT_BATCHES; /* a bare number counts batches */
    char num[64];
    const char *colon = strchr(s, ':');
    size_t len = strlen(s);
    if (colon) {
        size_t u = 0, plen = (size_t)(colon - s);
        while (u < 3 && !(strlen(units[u].name) == plen && strncmp(units[u].name, s, plen) == 0)) u++;
        if (u == 3) return period_syntax(flag, s, allow_off, allow_schedule);
        unit = units[u].unit;
        if (strchr(colon + 1, ',')) {
            if (!allow_schedule)
                return ct_set_error(CT_ECONFIG, "%s: '%s' is a schedule; a single length is "
                                                "needed here", flag, s);
            if (unit == CT_RECORDS)
                return ct_set_error(CT_ECONFIG, "%s: schedules are in batches or epochs, got '%s'",
                                    flag, s);
            return parse_schedule(flag, s, unit, colon + 1, out);
        }
        snprintf(num, sizeof num, "%s", colon + 1);
    } else {
        if (len == 0 || len >= sizeof num) return period_syntax(flag, s, allow_off, allow_schedule);
        memcpy(num, s, len + 1);
        for (size_t u = 0; u < 3; u++)
            if (num[len - 1] == units[u].suffix) {
                unit = units[u].unit;
                num[len - 1] = '\0';
            }
    }
    int64_t n;
    if (!parse_count(num, &n)) return period_syntax(flag, s, allow_off, allow_schedule);
    if (n < 1)
        return ct_set_error(CT_ECONFIG, "%s: must be >= 1%s, got '%s'", flag,
                            allow_off ? " (0 or never alone turn it off)" : "", s);
    out->unit = unit;
    out->n = n;
    out->num_points = 0;
    return 0;
}

/* ---- the flags ------------------------------------------------------------------- */

typedef int (*flag_fn)(cti_config *c, const char *flag, const char *val);

static int keep_into(cti_config *c, const char **field, const char *flag, const char *val) {
    if (!val[0]) return ct_set_error(CT_ECONFIG, "%s: empty value", flag);
    const char *kept = cti_config_keep(c, val);
    if (!kept) return CT_ENOMEM;
    *field = kept;
    return 0;
}

static int f_hparam(cti_config *c, const char *flag, const char *val) {
    return cti_config_set_hparam(c, val);
}

static int set_period(cti_config *c, const char *flag, const char *val, bool is_max, ct_period *p,
                      char *from) {
    if (cti_parse_period(flag, val, !is_max, !is_max, p)) return CT_ECONFIG;
    snprintf(from, CT_CONFIG_FROM_MAX, "%s %s", flag, val);
    return 0;
}

static int f_max_length(cti_config *c, const char *flag, const char *val) {
    return set_period(c, flag, val, true, &c->fit.max_length, c->max_length_from);
}

static int f_validation_period(cti_config *c, const char *flag, const char *val) {
    return set_period(c, flag, val, false, &c->fit.validation_period, c->validation_from);
}

static int f_checkpoint_period(cti_config *c, const char *flag, const char *val) {
    return set_period(c, flag, val, false, &c->fit.checkpoint_period, c->checkpoint_from);
}

static int f_checkpoint_policy(cti_config *c, const char *flag, const char *val) {
    if (strcmp(val, "best") == 0) c->fit.checkpoint_policy = CT_CKPT_BEST;
    else if (strcmp(val, "all") == 0) c->fit.checkpoint_policy = CT_CKPT_ALL;
    else if (strcmp(val, "none") == 0) c->fit.checkpoint_policy = CT_CKPT_NONE;
    else return ct_set_error(CT_ECONFIG, "%s: expected best, all or none, got '%s'", flag, val);
    return 0;
}

static int f_output(cti_config *c, const char *flag, const char *val) {
    return keep_into(c, &c->fit.output_dir, flag, val);
}

static int f_resume(cti_config *c, const char *flag, const char *val) {
    return keep_into(c, &c->fit.resume, flag, val);
}

static int f_evaluate(cti_config *c, const char *flag, const char *val) {
    return keep_into(c, &c->evaluate, flag, val);
}

static int f_warm_start(cti_config *c, const char *flag, const char *val) {
    return keep_into(c, &c->fit.warm_start, flag, val);
}

/* Determined's experiment seeds are 0 to 2^31 - 1. */
static int f_seed(cti_config *c, const char *flag, const char *val) {
    uint64_t seed;
    if (!parse_u64(val, &seed))
        return ct_set_error(CT_ECONFIG, "%s: expected an integer >= 0, got '%s'", flag, val);
    if (seed > (uint64_t)CT_SEED_MAX)
        return ct_set_error(CT_ECONFIG, "%s: %s is out of range: experiment seeds are 0 to %lld, as Determined's",
                            flag, val, (long long)CT_SEED_MAX);
    c->fit.seed = seed;
    return 0;
}

static int f_device(cti_config *c, const char *flag, const char *val) {
    ct_device d;
    if (ct_device_parse(val, &d) != 0)
        return ct_set_error(CT_ECONFIG, "%s: expected cpu, cuda or cuda:N, got '%s'", flag, val);
    return keep_into(c, &c->fit.device, flag, val);
}

static int f_threads(cti_config *c, const char *flag, const char *val) {
    uint64_t n;
    if (!parse_u64(val, &n) || n < 1 || n > 4096)
        return ct_set_error(CT_ECONFIG, "%s: expected a number of threads >= 1, got '%s'", flag, val);
    c->fit.num_threads = (int)n;
    return 0;
}

/* Seconds, finite and >= 0; 0 and "never" mean no timeout (ct_fit_opts
 * takes INFINITY for that: its 0 is "the default"). */
static int f_dist_timeout(cti_config *c, const char *flag, const char *val) {
    char *end;
    errno = 0;
    double s = strcmp(val, "never") == 0 ? 0.0 : strtod(val, &end);
    if (strcmp(val, "never") != 0 && (errno || end == val || *end || !isfinite(s) || s < 0))
        return ct_set_error(CT_ECONFIG, "%s: expected seconds, a number >= 0 (0 or never: no timeout), got '%s'",
                            flag, val);
    c->fit.dist_timeout = s == 0.0 ? INFINITY : s;
    return 0;
}

static int f_test_mode(cti_config *c, const char *flag, const char *val) {
    c->fit.test_mode = true;
    return 0;
}

static int f_stop_on_nan(cti_config *c, const char *flag, const char *val) {
    c->fit.stop_on_nan = true;
    return 0;
}

static int f_deterministic(cti_config *c, const char *flag, const char *val) {
    c->fit.deterministic = true;
    return 0;
}

static int f_cuda_graphs(cti_config *c, const char *flag, const char *val) {
    c->fit.cuda_graphs = true;
    return 0;
}

static int f_quiet(cti_config *c, const char *flag, const char *val) {
    c->fit.quiet = true;
    return 0;
}

static int f_background_checkpoints(cti_config *c, const char *flag, const char *val) {
    c->fit.background_checkpoints = true;
    return 0;
}

static int f_shard_optimizer(cti_config *c, const char *flag, const char *val) {
    c->fit.shard_optimizer = true;
    return 0;
}

static int f_overwrite(cti_config *c, const char *flag, const char *val) {
    c->fit.overwrite = true;
    return 0;
}

static int f_no_tensorboard(cti_config *c, const char *flag, const char *val) {
    c->fit.tensorboard = false;
    return 0;
}

typedef struct {
    const char *name;
    const char *arg; /* NULL: takes no value */
    const char *help;
    flag_fn fn;      /* NULL: handled by cti_main_parse itself */
} flag_def;

static const flag_def flags[] = {
    {"--config", "FILE", "experiment config, YAML or JSON (Determined's keys); flags override it", NULL},
    {"--hparam", "KEY=VALUE", "set a hyperparameter, repeatable (a.b=V: nested); VALUE is JSON "
                              "if it parses, else text", f_hparam},
    {"--max-length", "LEN", "train for LEN (overrides searcher.max_length)", f_max_length},
    {"--validation-period", "PERIOD", "validate every PERIOD (overrides min_validation_period)",
     f_validation_period},
    {"--checkpoint-period", "PERIOD", "checkpoint every PERIOD (overrides min_checkpoint_period)",
     f_checkpoint_period},
    {"--background-checkpoints", NULL, "write checkpoints during training from a snapshot in a thread, "
                                       "while training goes on (optimizations.background_checkpoints)",
     f_background_checkpoints},
    {"--shard-optimizer", NULL, "under mpirun, each rank keeps the optimizer state of its share of the "
                                "parameters only (optimizations.shard_optimizer)",
     f_shard_optimizer},
    {"--checkpoint-policy", "best|all|none", "checkpoint after a validation that improves the "
                                             "metric / after each / never",
     f_checkpoint_policy},
    {"--output", "DIR", "output directory: metrics.jsonl, checkpoints (default: output)", f_output},
    {"--resume", "PATH|latest", "resume from a checkpoint directory, or from the latest "
                                "checkpoint", f_resume},
    {"--overwrite", NULL, "replace an earlier run's results in the output directory (metrics.jsonl, "
                          "TensorBoard files, checkpoints) instead of refusing to start", f_overwrite},
    {"--evaluate", "CHECKPOINT", "validate a checkpoint (a directory, an s3:// URL, latest or best) on the "
                                 "trial's validation loaders and append its metrics to evaluation.jsonl; "
                                 "nothing is trained", f_evaluate},
    {"--warm-start", "DIR", "start a new trial from the models, optimizers and LR schedulers of "
                            "checkpoint DIR (ctrial's or Determined's), at batch 0 (overrides "
                            "warm_start)", f_warm_start},
    {"--test-mode", NULL, "train one batch, validate one batch, checkpoint and exit", f_test_mode},
    {"--seed", "N", "experiment seed, 0 to 2147483647 (overrides reproducibility.experiment_seed)", f_seed},
    {"--device", "cpu|cuda|cuda:N", "device to train on (default: cpu)", f_device},
    {"--threads", "N", "intra-op CPU threads per rank (default: this rank's share of the CPUs idle at start)", f_threads},
    {"--dist-timeout", "SECONDS", "under mpirun, end the job naming the ranks that do not reach a collective "
                                  "within SECONDS, also between a search's trials (default resources.dist_timeout, "
                                  "CTRIAL_DIST_TIMEOUT or 1800; 0 or never: wait forever)",
     f_dist_timeout},
    {"--stop-on-nan", NULL, "stop (exit code 4) when the training loss is not finite", f_stop_on_nan},
    {"--deterministic", NULL, "deterministic algorithms only (torch.use_deterministic_algorithms, cuDNN's "
                              "deterministic kernels)", f_deterministic},
    {"--cuda-graphs", NULL, "capture the training step in a CUDA graph after warm-up and replay it "
                            "(static shapes; optimizations.cuda_graphs)", f_cuda_graphs},
    {"--no-tensorboard", NULL, "write no TensorBoard event files (metrics.jsonl is still written)",
     f_no_tensorboard},
    {"--quiet", NULL, "print only errors", f_quiet},
    {"--version", NULL, "print ctrial's version and exit", NULL},
    {"--help", NULL, "print this help and exit", NULL},
};
#define NUM_FLAGS (sizeof flags / sizeof *flags)

/* ---- the program's own flags (ct_main_ex) ------------------------------------------- */

static const char *type_arg(const ct_flag *u) {
    if (u->arg) return u->arg;
    return u->type == CT_FLAG_INT ? "N" : u->type == CT_FLAG_DOUBLE ? "X" : u->type == CT_FLAG_STRING ? "TEXT" : NULL;
}

static const flag_def *find_flag(const char *name, size_t len);

/* The program's flags are well formed: names start with "--", none
 * repeats or is ctrial's, every one has a known type and a value pointer.
 * A mistake in the program, reported before any argument is read. */
static int check_program_flags(const ct_main_params *p) {
    if (!p || p->num_flags == 0) return 0;
    if (!p->flags) return ct_set_error(CT_ECONFIG, "ct_main_ex: num_flags is %zu but flags is NULL", p->num_flags);
    for (size_t i = 0; i < p->num_flags; i++) {
        const ct_flag *u = &p->flags[i];
        if (!u->name || strncmp(u->name, "--", 2) != 0 || !u->name[2] || strchr(u->name, '='))
            return ct_set_error(CT_ECONFIG, "ct_main_ex: flag %zu's name '%s' must be --NAME (without '=')", i,
                                u->name ? u->name : "(null)");
        if (find_flag(u->name, strlen(u->name)) || strcmp(u->name, "-h") == 0)
            return ct_set_error(CT_ECONFIG, "ct_main_ex: the program's flag %s is one of ctrial's flags", u->name);
        for (size_t j = 0; j < i; j++)
            if (strcmp(p->flags[j].name, u->name) == 0)
                return ct_set_error(CT_ECONFIG, "ct_main_ex: the program's flag %s is given twice", u->name);
        if ((unsigned)u->type > CT_FLAG_STRING)
            return ct_set_error(CT_ECONFIG, "ct_main_ex: flag %s has an unknown type %d", u->name, (int)u->type);
        if (!u->value) return ct_set_error(CT_ECONFIG, "ct_main_ex: flag %s has no value pointer", u->name);
    }
    return 0;
}

/* Writes a program flag's value (val is NULL for a switch). */
static int set_program_flag(const ct_flag *u, const char *val) {
    switch (u->type) {
    case CT_FLAG_BOOL: *(bool *)u->value = true; return 0;
    case CT_FLAG_STRING: *(const char **)u->value = val; return 0;
    case CT_FLAG_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(val, &end, 10);
        if (errno || end == val || *end)
            return ct_set_error(CT_ECONFIG, "%s: expected an integer, got '%s'", u->name, val);
        *(int64_t *)u->value = (int64_t)v;
        return 0;
    }
    case CT_FLAG_DOUBLE: {
        /* As a JSON number: the same in every locale, and never nan or inf. */
        json_t *j = json_loads(val, JSON_DECODE_ANY, NULL);
        bool ok = json_is_number(j);
        if (ok) *(double *)u->value = json_number_value(j);
        json_decref(j);
        return ok ? 0 : ct_set_error(CT_ECONFIG, "%s: expected a number, got '%s'", u->name, val);
    }
    default: return ct_set_error(CT_ECONFIG, "%s: unknown flag type", u->name);
    }
}

static void print_flag(FILE *f, const char *name, const char *arg, const char *help) {
    char left[64];
    snprintf(left, sizeof left, "%s%s%s", name, arg ? " " : "", arg ? arg : "");
    fprintf(f, "  %-34s %s\n", left, help ? help : "");
}

void cti_main_usage(FILE *f, const char *prog) { cti_main_usage_with(f, prog, NULL); }

void cti_main_usage_with(FILE *f, const char *prog, const ct_main_params *p) {
    const char *base = prog && prog[0] ? strrchr(prog, '/') : NULL;
    base = base ? base + 1 : prog && prog[0] ? prog : "trial";
    fprintf(f, "usage: %s [flags]\n\n", base);
    if (p && p->description) fprintf(f, "%s\n\n", p->description);
    if (p && p->num_flags > 0 && p->flags) {
        fprintf(f, "The program's flags:\n");
        for (size_t i = 0; i < p->num_flags; i++)
            print_flag(f, p->flags[i].name, type_arg(&p->flags[i]), p->flags[i].help);
        fputc('\n', f);
    }
    fprintf(f, "Trains the trial, Determined-style. Flags:\n");
    for (size_t i = 0; i < NUM_FLAGS; i++) print_flag(f, flags[i].name, flags[i].arg, flags[i].help);
    fputs("\nA flag's value may also follow '=' (--seed=3).\n"
          "LEN: N or Nb (N batches), Ne (N epochs), Nr (N records, divided by\n"
          "  hyperparameters.global_batch_size), or batches:N, epochs:N, records:N.\n"
          "PERIOD: a LEN, 0 or never (off), or a schedule batches:a,b,c / epochs:a,b,c.\n"
          "Exit codes: 0 done (or stopped after a checkpoint: resume with --resume latest),\n"
          "  1 trial error, 2 bad flags or config, 3 bad checkpoint, 4 non-finite loss,\n"
          "  5 a rank was lost.\n",
          f);
}

/* ---- parsing ---------------------------------------------------------------------- */

static const flag_def *find_flag(const char *name, size_t len) {
    for (size_t i = 0; i < NUM_FLAGS; i++)
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0) return &flags[i];
    return NULL;
}

/* Whether argument a is a flag this parser knows (ctrial's, -h, or the
 * program's; "--name=value" counts by its name): after a flag that takes a
 * value, such an argument is the next flag, not the value. A value that
 * merely starts with "--" is still a value. */
static bool is_flag(const char *a, const ct_main_params *p) {
    if (strcmp(a, "-h") == 0) return true;
    if (strncmp(a, "--", 2) != 0) return false;
    const char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    if (find_flag(a, len)) return true;
    for (size_t k = 0; p && k < p->num_flags; k++)
        if (p->flags[k].name && strlen(p->flags[k].name) == len && strncmp(p->flags[k].name, a, len) == 0) return true;
    return false;
}

/* Splits argv[*i] into its flag (one of ctrial's, *def, or the program's,
 * *user) and its value (from "=..." or the next argument, which *i then
 * skips; NULL for a switch). */
static int next_flag(int argc, char **argv, int *i, const ct_main_params *p, const flag_def **def,
                     const ct_flag **user, const char **val) {
    const char *a = argv[*i];
    if (strcmp(a, "-h") == 0) a = "--help";
    if (strncmp(a, "--", 2) != 0)
        return ct_set_error(CT_ECONFIG, "unexpected argument '%s' (see --help)", a);
    const char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    *def = find_flag(a, len);
    *user = NULL;
    for (size_t k = 0; !*def && p && k < p->num_flags; k++)
        if (strlen(p->flags[k].name) == len && strncmp(p->flags[k].name, a, len) == 0) *user = &p->flags[k];
    if (!*def && !*user) return ct_set_error(CT_ECONFIG, "unknown flag '%.*s' (see --help)", (int)len, a);
    const char *name = *def ? (*def)->name : (*user)->name;
    const char *arg = *def ? (*def)->arg : type_arg(*user);
    if (!arg) {
        if (eq) return ct_set_error(CT_ECONFIG, "%s takes no value, got '%s'", name, a);
        *val = NULL;
    } else if (eq) {
        *val = eq + 1;
    } else if (*i + 1 < argc && argv[*i + 1] && !is_flag(argv[*i + 1], p)) {
        *val = argv[++*i];
    } else if (*i + 1 < argc && argv[*i + 1]) {
        /* "--max-length --output X": the next argument is a flag, not a value. */
        return ct_set_error(CT_ECONFIG, "%s needs a value (%s); the next argument, %s, is a flag", name, arg,
                            argv[*i + 1]);
    } else {
        return ct_set_error(CT_ECONFIG, "%s needs a value (%s)", name, arg);
    }
    return 0;
}

int cti_main_parse(int argc, char **argv, int world_size, cti_main_args *out) {
    return cti_main_parse_with(argc, argv, world_size, NULL, out);
}

int cti_main_parse_with(int argc, char **argv, int world_size, const ct_main_params *p, cti_main_args *out) {
    memset(out, 0, sizeof *out);
    int rc = cti_config_init(&out->cfg);
    if (rc || (rc = check_program_flags(p))) return rc;
    for (int i = 1; i < argc; i++)
        if (argv[i] && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
            out->help = true;
            return 0;
        } else if (argv[i] && strcmp(argv[i], "--version") == 0) {
            out->version = true;
            return 0;
        }
    /* Pass 1: the config file, so that every other flag overrides it. */
    const char *config = NULL;
    for (int i = 1; i < argc; i++) {
        const flag_def *def;
        const ct_flag *user;
        const char *val;
        if ((rc = next_flag(argc, argv, &i, p, &def, &user, &val))) return rc;
        if (user || def->fn) continue;
        if (config) return ct_set_error(CT_ECONFIG, "--config: given twice");
        if (!val[0]) return ct_set_error(CT_ECONFIG, "--config: empty value");
        config = val;
    }
    if (config && (rc = cti_config_load_file(&out->cfg, config))) return rc;
    /* Pass 2: the other flags in order (a later one wins). */
    bool warm_flag = false;
    for (int i = 1; i < argc; i++) {
        const flag_def *def;
        const ct_flag *user;
        const char *val;
        next_flag(argc, argv, &i, p, &def, &user, &val); /* checked in pass 1 */
        if (user && (rc = set_program_flag(user, val))) return rc;
        if (def && def->fn && (rc = def->fn(&out->cfg, def->name, val))) return rc;
        warm_flag |= def && def->fn == f_warm_start;
    }
    if (p) out->cfg.fit.user = p->user;
    /* A warm start begins a new trial, a resume continues one. The config's
     * warm_start alone is not in the way: it applies to the experiment's
     * first run, and a later --resume continues from its checkpoints (the
     * loop warm-starts only a run that resumes nothing). */
    if (warm_flag && out->cfg.fit.resume)
        return ct_set_error(CT_ECONFIG, "--warm-start and --resume cannot be used together: a warm start "
                                        "begins a new trial from a checkpoint's weights, a resume continues the "
                                        "trial that wrote it");
    return cti_config_finish(&out->cfg, world_size);
}

void cti_main_args_free(cti_main_args *a) {
    if (a) cti_config_free(&a->cfg);
}

