/* tests/config/test_flags.c — ct_main's flags: every flag, flags over the
 * config file, repeated --hparam with JSON values and dotted keys, the length
 * and period syntax, bad values naming their flag, --help listing every
 * flag, ct_exit_code, and ct_main end to end against a ct_fit defined here
 * (it records the options it receives and returns what the test asks). */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/launch.h"
#include "ctrial/config.h"
#include "config/flags.h"
#include "ct_test.h"

/* ---- a ct_fit that records ----------------------------------------------------------- */

static struct {
    int calls;
    int status; /* what ct_fit returns */
    ct_fit_opts opts;
    char output_dir[256], device[64], resume[256];
    ct_value *hparams;
} fit_seen;

int ct_fit(const ct_trial *trial, const ct_fit_opts *o) {
    fit_seen.calls++;
    fit_seen.opts = *o;
    /* The strings die with ct_main's config: keep copies. */
    snprintf(fit_seen.output_dir, sizeof fit_seen.output_dir, "%s", o->output_dir);
    snprintf(fit_seen.device, sizeof fit_seen.device, "%s", o->device ? o->device : "(null)");
    snprintf(fit_seen.resume, sizeof fit_seen.resume, "%s", o->resume ? o->resume : "(null)");
    ct_value_free(fit_seen.hparams);
    fit_seen.hparams = ct_value_copy(o->hparams, false);
    if (fit_seen.status) return ct_set_error(fit_seen.status, "the stub failed on purpose");
    return 0;
}

static const ct_trial stub_trial = {.name = "stub"};

/* ---- helpers -------------------------------------------------------------------------- */

static char config_path[] = "/tmp/ct_flags_XXXXXX";

static void write_config(void) {
    int fd = mkstemp(config_path);
    FILE *f = fdopen(fd, "w");
    fputs("{\"name\": \"cfg\",\n"
          " \"hyperparameters\": {\"global_batch_size\": 64, \"lr\": 0.01, \"act\": \"relu\",\n"
          "                     \"opt\": {\"name\": \"adam\", \"betas\": [0.9, 0.999]}},\n"
          " \"searcher\": {\"name\": \"single\", \"metric\": \"acc\", \"max_length\": {\"batches\": 1000}},\n"
          " \"min_validation_period\": {\"batches\": 100},\n"
          " \"min_checkpoint_period\": {\"epochs\": 1},\n"
          " \"checkpoint_policy\": \"best\",\n"
          " \"reproducibility\": {\"experiment_seed\": 7}}\n",
          f);
    fclose(f);
}

#define ARGC(a) ((int)(sizeof(a) / sizeof *(a)))

/* Parses argv (NULL-terminated list after the program name) for `world`
 * ranks; returns the status, *a filled (free it). */
static int parse(cti_main_args *a, int world, const char **args) {
    char *argv[64] = {"prog"};
    int argc = 1;
    for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    return cti_main_parse(argc, argv, world, a);
}

/* The parse fails with CT_ECONFIG and `needle` in the message. */
static void expect_fail(int line, const char *needle, const char **args) {
    cti_main_args a;
    int rc = parse(&a, 1, args);
    ct_test_checks++;
    if (rc != CT_ECONFIG || ct_last_code() != CT_ECONFIG || !strstr(ct_last_error(), needle)) {
        ct_test_failures++;
        fprintf(stderr, "%s:%d: expected CT_ECONFIG with \"%s\", got rc %d: \"%s\"\n", __FILE__,
                line, needle, rc, ct_last_error());
    }
    ct_clear_error();
    cti_main_args_free(&a);
}
#define FAIL(needle, ...) expect_fail(__LINE__, needle, (const char *[]){__VA_ARGS__, NULL})

/* Captures what `stream` (stdout or stderr) receives between start and end. */
typedef struct {
    int fd, saved;
    FILE *tmp;
} capture;

static void cap_start(capture *c, FILE *stream) {
    fflush(stream);
    c->fd = fileno(stream);
    c->saved = dup(c->fd);
    c->tmp = tmpfile();
    dup2(fileno(c->tmp), c->fd);
}

static char *cap_end(capture *c, FILE *stream) {
    fflush(stream);
    dup2(c->saved, c->fd);
    close(c->saved);
    long n = ftell(c->tmp);
    char *buf = calloc(1, (size_t)n + 1);
    rewind(c->tmp);
    if (fread(buf, 1, (size_t)n, c->tmp) != (size_t)n) buf[0] = '\0';
    fclose(c->tmp);
    return buf;
}

/* ---- every flag over the config -------------------------------------------------------- */

static void test_every_flag(void) {
    cti_main_args a;
    /* --max-length before --config: flags still win over the file. */
    int rc = parse(&a, 2, (const char *[]){
        "--max-length", "3e", "--config", config_path,
        "--hparam", "lr=0.5", "--hparam", "opt.name=\"sgd\"", "--hparam", "opt.momentum=0.9",
        "--hparam", "act=gelu", "--hparam", "tags=[1, \"x\"]", "--hparam", "flag=true",
        "--hparam", "nothing=null", "--hparam", "obj={\"a\": {\"b\": 2}}",
        "--hparam", "new.deep.key=1e-3", "--hparam", "text=not json {",
        "--validation-period=batches:30,10,20", "--checkpoint-period", "never",
        "--checkpoint-policy", "none", "--output", "out1", "--resume", "latest", "--test-mode",
        "--seed", "42", "--device", "cuda:1", "--stop-on-nan", "--no-tensorboard", "--quiet",
        "--dist-timeout", "2.5", "--deterministic", "--shard-optimizer", NULL});
    CHECK_OK(rc);
    CHECK(!a.help);
    const ct_fit_opts *o = &a.cfg.fit;
    CHECK(o->max_length.unit == CT_EPOCHS && o->max_length.n == 3);
    CHECK(o->validation_period.unit == CT_BATCHES && o->validation_period.num_points == 3 &&
          o->validation_period.points[0] == 10 && o->validation_period.points[1] == 20 &&
          o->validation_period.points[2] == 30);
    CHECK(o->checkpoint_period.unit == CT_NEVER);
    CHECK(o->checkpoint_policy == CT_CKPT_NONE);
    CHECK(strcmp(o->output_dir, "out1") == 0);
    CHECK(strcmp(o->resume, "latest") == 0);
    CHECK(o->test_mode && o->stop_on_nan && o->quiet && !o->tensorboard && o->deterministic && o->shard_optimizer);
    /* the whole config file, for ct_ctx_experiment_config */
    CHECK(ct_value_get_str(ct_value_dict_get(ct_value_dict_get(o->experiment_config, "searcher"), "metric")) &&
          strcmp(ct_value_get_str(ct_value_dict_get(ct_value_dict_get(o->experiment_config, "searcher"), "metric")),
                 "acc") == 0);
    CHECK(o->seed == 42);
    CHECK(strcmp(o->device, "cuda:1") == 0);
    CHECK(o->dist_timeout == 2.5);
    /* from the config, untouched by flags */
    CHECK(strcmp(o->searcher_metric, "acc") == 0);
    CHECK(o->global_batch_size == 64);
    CHECK(strcmp(a.cfg.name, "cfg") == 0);

    /* Existing keys are replaced in place (order kept), new keys appended. */
    ct_value *hp = ct_value_dict();
    ct_value_dict_set(hp, "global_batch_size", ct_value_int(64));
    ct_value_dict_set(hp, "lr", ct_value_float(0.5));
    ct_value_dict_set(hp, "act", ct_value_str("gelu"));
    ct_value *opt = ct_value_dict();
    ct_value_dict_set(opt, "name", ct_value_str("sgd"));
    ct_value *betas = ct_value_list();
    ct_value_list_append(betas, ct_value_float(0.9));
    ct_value_list_append(betas, ct_value_float(0.999));
    ct_value_dict_set(opt, "betas", betas);
    ct_value_dict_set(opt, "momentum", ct_value_float(0.9));
    ct_value_dict_set(hp, "opt", opt);
    ct_value *tags = ct_value_list();
    ct_value_list_append(tags, ct_value_int(1));
    ct_value_list_append(tags, ct_value_str("x"));
    ct_value_dict_set(hp, "tags", tags);
    ct_value_dict_set(hp, "flag", ct_value_bool(true));
    ct_value_dict_set(hp, "nothing", ct_value_none());
    ct_value *obj = ct_value_dict(), *inner = ct_value_dict();
    ct_value_dict_set(inner, "b", ct_value_int(2));
    ct_value_dict_set(obj, "a", inner);
    ct_value_dict_set(hp, "obj", obj);
    ct_value *nw = ct_value_dict(), *deep = ct_value_dict();
    ct_value_dict_set(deep, "key", ct_value_float(1e-3));
    ct_value_dict_set(nw, "deep", deep);
    ct_value_dict_set(hp, "new", nw);
    ct_value_dict_set(hp, "text", ct_value_str("not json {"));
    CHECK(o->hparams == a.cfg.hparams && ct_value_equal(o->hparams, hp));
    ct_value_free(hp);
    cti_main_args_free(&a);
}

static void test_flag_forms(void) {
    static const struct {
        const char *arg;
        ct_unit unit;
        int64_t n;
    } lengths[] = {
        {"100", CT_BATCHES, 100},      {"100b", CT_BATCHES, 100},     {"3e", CT_EPOCHS, 3},
        {"batches:100", CT_BATCHES, 100}, {"epochs:3", CT_EPOCHS, 3},
        /* records / global_batch_size (64 from --hparam), at least one batch */
        {"records:6400", CT_BATCHES, 100}, {"6400r", CT_BATCHES, 100}, {"10r", CT_BATCHES, 1},
    };
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
        cti_main_args a;
        CHECK_OK(parse(&a, 1, (const char *[]){"--hparam", "global_batch_size=64", "--max-length",
                                                lengths[i].arg, "--validation-period",
                                                lengths[i].arg, NULL}));
        CHECK(a.cfg.fit.max_length.unit == lengths[i].unit && a.cfg.fit.max_length.n == lengths[i].n);
        CHECK(a.cfg.fit.validation_period.unit == lengths[i].unit &&
              a.cfg.fit.validation_period.n == lengths[i].n);
        CHECK(a.cfg.fit.global_batch_size == 64);
        cti_main_args_free(&a);
    }

    cti_main_args a;
    CHECK_OK(parse(&a, 1, (const char *[]){"--max-length=5", "--validation-period", "0",
                                            "--checkpoint-period", "epochs:4,2,2", NULL}));
    CHECK(a.cfg.fit.max_length.unit == CT_BATCHES && a.cfg.fit.max_length.n == 5);
    CHECK(a.cfg.fit.validation_period.unit == CT_NEVER);
    CHECK(a.cfg.fit.checkpoint_period.unit == CT_EPOCHS && a.cfg.fit.checkpoint_period.num_points == 2 &&
          a.cfg.fit.checkpoint_period.points[0] == 2 && a.cfg.fit.checkpoint_period.points[1] == 4);
    /* no config: the defaults */
    CHECK(strcmp(a.cfg.fit.output_dir, "output") == 0 && a.cfg.fit.device == NULL);
    CHECK(a.cfg.fit.checkpoint_policy == CT_CKPT_BEST && !a.cfg.fit.test_mode && !a.cfg.fit.quiet);
    cti_main_args_free(&a);

    /* A later flag wins; --hparam global_batch_size overrides the config's
     * before records are converted. */
    CHECK_OK(parse(&a, 1, (const char *[]){"--seed", "1", "--seed=2147483647",
                                            "--checkpoint-policy", "best", "--checkpoint-policy=all",
                                            "--device", "cpu", "--device=cuda", "--config",
                                            config_path, "--hparam", "global_batch_size=32",
                                            "--checkpoint-period", "records:320", NULL}));
    CHECK(a.cfg.fit.seed == 2147483647); /* Determined's largest */
    CHECK(a.cfg.fit.checkpoint_policy == CT_CKPT_ALL);
    CHECK(strcmp(a.cfg.fit.device, "cuda") == 0);
    CHECK(a.cfg.fit.global_batch_size == 32);
    CHECK(a.cfg.fit.checkpoint_period.unit == CT_BATCHES && a.cfg.fit.checkpoint_period.n == 10);
    /* config values no flag touched */
    CHECK(a.cfg.fit.max_length.unit == CT_BATCHES && a.cfg.fit.max_length.n == 1000);
    CHECK(a.cfg.fit.validation_period.unit == CT_BATCHES && a.cfg.fit.validation_period.n == 100);
    CHECK(a.cfg.fit.seed == 2147483647); /* the flag, not the config's 7 */
    cti_main_args_free(&a);

    /* --dist-timeout: seconds; 0 and never are no timeout (INFINITY: the
     * options' 0 means the default); without it, the default (0). */
    static const struct {
        const char *arg;
        double want;
    } timeouts[] = {{"0.5", 0.5}, {"600", 600}, {"1e3", 1000}, {"0", INFINITY}, {"never", INFINITY}};
    for (size_t i = 0; i < sizeof timeouts / sizeof *timeouts; i++) {
        CHECK_OK(parse(&a, 1, (const char *[]){"--max-length", "1", "--dist-timeout", timeouts[i].arg, NULL}));
        CHECK(a.cfg.fit.dist_timeout == timeouts[i].want);
        cti_main_args_free(&a);
    }
    CHECK_OK(parse(&a, 1, (const char *[]){"--max-length", "1", NULL}));
    CHECK(a.cfg.fit.dist_timeout == 0);
    cti_main_args_free(&a);

    /* Without flags, the config as is. */
    CHECK_OK(parse(&a, 1, (const char *[]){"--config", config_path, NULL}));
    CHECK(a.cfg.fit.seed == 7 && a.cfg.fit.checkpoint_policy == CT_CKPT_BEST);
    CHECK(a.cfg.fit.checkpoint_period.unit == CT_EPOCHS && a.cfg.fit.checkpoint_period.n == 1);
    cti_main_args_free(&a);
}

static void test_bad_flags(void) {
    FAIL("unknown flag '--bogus'", "--max-length", "1", "--bogus");
    FAIL("unknown flag '--max_length'", "--max_length=1");
    FAIL("unexpected argument 'train'", "--max-length", "1", "train");
    FAIL("--quiet takes no value", "--max-length", "1", "--quiet=1");
    FAIL("--seed needs a value (N)", "--max-length", "1", "--seed");
    FAIL("--max-length: must be >= 1, got '0'", "--max-length", "0");
    FAIL("--max-length: expected N, Nb, Ne, Nr", "--max-length", "never");
    FAIL("--max-length: expected N, Nb, Ne, Nr", "--max-length", "abc");
    FAIL("--max-length: expected N, Nb, Ne, Nr", "--max-length", "-5");
    FAIL("--max-length: expected N, Nb, Ne, Nr", "--max-length", "steps:5");
    FAIL("--max-length: expected N, Nb, Ne, Nr", "--max-length", "3x");
    FAIL("--max-length: expected N, Nb, Ne, Nr", "--max-length", "");
    FAIL("--max-length: 'batches:10,20' is a schedule", "--max-length", "batches:10,20");
    FAIL("--validation-period: must be >= 1 (0 or never alone turn it off), got '0e'",
         "--max-length", "1", "--validation-period", "0e");
    FAIL("--validation-period: schedules are in batches or epochs", "--max-length", "1",
         "--validation-period", "records:1,2");
    FAIL("--checkpoint-period: schedule point '0' in 'batches:0,5' is not an integer >= 1",
         "--max-length", "1", "--checkpoint-period", "batches:0,5");
    FAIL("--checkpoint-period: expected N", "--max-length", "1", "--checkpoint-period",
         "batches:1,,2");
    FAIL("--dist-timeout: expected seconds, a number >= 0 (0 or never: no timeout), got '-1'", "--max-length", "1",
         "--dist-timeout", "-1");
    FAIL("--dist-timeout: expected seconds", "--max-length", "1", "--dist-timeout", "inf");
    FAIL("--dist-timeout: expected seconds", "--max-length", "1", "--dist-timeout", "nan");
    FAIL("--dist-timeout: expected seconds", "--max-length", "1", "--dist-timeout", "30s");
    FAIL("--dist-timeout needs a value (SECONDS)", "--max-length", "1", "--dist-timeout");
    FAIL("--checkpoint-policy: expected best, all or none, got 'sometimes'", "--max-length", "1",
         "--checkpoint-policy", "sometimes");
    FAIL("--seed: expected an integer >= 0, got '-1'", "--max-length", "1", "--seed", "-1");
    FAIL("--seed: expected an integer >= 0, got '12x'", "--max-length", "1", "--seed", "12x");
    FAIL("--seed: expected an integer >= 0, got '18446744073709551616'", "--max-length", "1",
         "--seed", "18446744073709551616");
    /* Determined's experiment seeds are 0 to 2^31 - 1 (issue 17): above
     * is a config error, not a failure once the loader shuffles. */
    FAIL("--seed: 2147483648 is out of range: experiment seeds are 0 to 2147483647, as Determined's",
         "--max-length", "1", "--seed", "2147483648");
    FAIL("--seed: 4294967296 is out of range", "--max-length", "1", "--seed", "4294967296");
    FAIL("--seed: 18446744073709551615 is out of range", "--max-length", "1", "--seed=18446744073709551615");
    /* A flag where a value belongs is the next flag, not the value (issue 17). */
    FAIL("--max-length needs a value (LEN); the next argument, --output, is a flag", "--max-length", "--output",
         "X");
    FAIL("--max-length needs a value (LEN); the next argument, --output=X, is a flag", "--max-length",
         "--output=X");
    FAIL("--output needs a value (DIR); the next argument, --quiet, is a flag", "--max-length", "1", "--output",
         "--quiet");
    FAIL("--seed needs a value (N); the next argument, --hparam, is a flag", "--max-length", "1", "--seed",
         "--hparam", "a=1");
    /* global_batch_size beyond what a loader can index (issue 17) */
    FAIL("--hparam global_batch_size: global_batch_size is 9223372036854775807, at most 1099511627776",
         "--max-length", "1", "--hparam", "global_batch_size=9223372036854775807");
    FAIL("--hparam global_batch_size: global_batch_size is 1099511627777, at most 1099511627776",
         "--max-length", "1", "--hparam", "global_batch_size=1099511627777");
    FAIL("--device: expected cpu, cuda or cuda:N, got 'gpu'", "--max-length", "1", "--device", "gpu");
    FAIL("--device: expected cpu, cuda or cuda:N, got 'cuda:x'", "--max-length", "1", "--device",
         "cuda:x");
    FAIL("--output: empty value", "--max-length", "1", "--output=");
    FAIL("--resume: empty value", "--max-length", "1", "--resume", "");
    FAIL("--hparam: expected KEY=VALUE, got 'lr'", "--max-length", "1", "--hparam", "lr");
    FAIL("--hparam: expected KEY=VALUE, got '=3'", "--max-length", "1", "--hparam", "=3");
    FAIL("--hparam a..b: empty key component", "--max-length", "1", "--hparam", "a..b=1");
    FAIL("--hparam a.: empty key component", "--max-length", "1", "--hparam", "a.=1");
    FAIL("--hparam lr.x: 'lr' is a float, not a dict", "--max-length", "1", "--hparam", "lr=0.1",
         "--hparam", "lr.x=1");
    FAIL("--hparam global_batch_size: global_batch_size must be a positive integer, got 'abc'",
         "--max-length", "1", "--hparam", "global_batch_size=abc");
    FAIL("--hparam global_batch_size: global_batch_size must be a positive integer, got 0",
         "--max-length", "1", "--hparam", "global_batch_size=0");
    FAIL("--hparam global_batch_size.x: global_batch_size must be a positive integer, got a dict",
         "--max-length", "1", "--hparam", "global_batch_size.x=1");
    FAIL("--config: given twice", "--config", config_path, "--config", config_path);
    FAIL("/nonexistent/c.json: cannot open", "--config", "/nonexistent/c.json");
    FAIL("--max-length records:100: records need hyperparameters.global_batch_size",
         "--max-length", "records:100");
    FAIL("no max_length: set searcher.max_length in the config or pass --max-length", "--seed", "1");

    /* global_batch_size against the ranks */
    cti_main_args a;
    const char *small[] = {"--max-length", "1", "--hparam", "global_batch_size=3", NULL};
    CHECK(parse(&a, 4, small) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "global_batch_size is 3, smaller than the number of ranks (4)");
    cti_main_args_free(&a);
    CHECK_OK(parse(&a, 3, small));
    CHECK(a.cfg.fit.global_batch_size == 3);
    cti_main_args_free(&a);
}

/* ---- --warm-start and the config's warm_start ------------------------------------------ */

static void test_warm_start(void) {
    cti_main_args a;
    CHECK_OK(parse(&a, 1, (const char *[]){"--max-length", "1", "--warm-start", "ckpts/a", NULL}));
    CHECK(a.cfg.fit.warm_start && strcmp(a.cfg.fit.warm_start, "ckpts/a") == 0 && !a.cfg.fit.resume);
    cti_main_args_free(&a);
    CHECK_OK(parse(&a, 1, (const char *[]){"--max-length", "1", NULL}));
    CHECK(a.cfg.fit.warm_start == NULL);
    cti_main_args_free(&a);

    /* The config's key, overridden by the flag whatever their order. */
    char path[] = "/tmp/ct_flags_warm_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs("{\"searcher\": {\"name\": \"single\", \"max_length\": {\"batches\": 5}},\n"
          " \"warm_start\": \"/runs/exp1/checkpoints/ckpt-000100-0badc0de\"}\n", f);
    fclose(f);
    CHECK_OK(parse(&a, 1, (const char *[]){"--config", path, NULL}));
    CHECK(a.cfg.fit.warm_start && strcmp(a.cfg.fit.warm_start, "/runs/exp1/checkpoints/ckpt-000100-0badc0de") == 0);
    cti_main_args_free(&a);
    CHECK_OK(parse(&a, 1, (const char *[]){"--warm-start=det/ckpt", "--config", path, NULL}));
    CHECK(a.cfg.fit.warm_start && strcmp(a.cfg.fit.warm_start, "det/ckpt") == 0);
    cti_main_args_free(&a);
    /* The config's warm_start starts the experiment; --resume continues it
     * later with the same config (the loop warm-starts only a run that
     * resumes nothing). */
    CHECK_OK(parse(&a, 1, (const char *[]){"--config", path, "--resume", "latest", NULL}));
    CHECK(a.cfg.fit.warm_start && a.cfg.fit.resume && strcmp(a.cfg.fit.resume, "latest") == 0);
    cti_main_args_free(&a);
    unlink(path);

    /* Both flags: one begins a new trial, the other continues an old one. */
    FAIL("--warm-start and --resume cannot be used together", "--max-length", "1", "--warm-start", "a",
         "--resume", "latest");
    FAIL("--warm-start and --resume cannot be used together", "--resume", "b", "--max-length", "1",
         "--warm-start=a");
    FAIL("--warm-start: empty value", "--max-length", "1", "--warm-start", "");
    FAIL("--warm-start needs a value (DIR)", "--max-length", "1", "--warm-start");
}

/* ---- --help ----------------------------------------------------------------------------- */

static void test_help(void) {
    static const char *all_flags[] = {
        "--config FILE", "--hparam KEY=VALUE", "--max-length LEN", "--validation-period PERIOD",
        "--checkpoint-period PERIOD", "--background-checkpoints", "--shard-optimizer", "--checkpoint-policy best|all|none",
        "--output DIR",
        "--resume PATH|latest", "--overwrite", "--evaluate CHECKPOINT", "--warm-start DIR", "--test-mode", "--seed N",
        "--device cpu|cuda|cuda:N",
        "--threads N", "--dist-timeout SECONDS", "--stop-on-nan", "--deterministic", "--cuda-graphs", "--no-tensorboard", "--quiet", "--version", "--help"};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cti_main_usage(f, "/usr/bin/mnist");
    fclose(f);
    CHECK(strncmp(text, "usage: mnist [flags]", 20) == 0);
    int lines = 0;
    for (const char *p = text; (p = strstr(p, "\n  --")); p++) lines++;
    CHECK(lines == (int)(sizeof all_flags / sizeof *all_flags)); /* one line per flag */
    for (size_t i = 0; i < sizeof all_flags / sizeof *all_flags; i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "\n  %s ", all_flags[i]);
        ct_test_checks++;
        if (!strstr(text, needle)) {
            ct_test_failures++;
            fprintf(stderr, "--help does not list '%s'\n", all_flags[i]);
        }
    }
    CHECK(strstr(text, "Ne (N epochs)") && strstr(text, "batches:a,b,c"));
    CHECK(strstr(text, "2 bad flags or config"));
    free(text);

    /* --help wins over anything else, even bad flags. */
    cti_main_args a;
    CHECK_OK(parse(&a, 1, (const char *[]){"--bogus", "-h", NULL}));
    CHECK(a.help);
    cti_main_args_free(&a);

    capture cap;
    cap_start(&cap, stdout);
    int code = ct_main(2, (char *[]){"prog", "--help", NULL}, &stub_trial);
    char *out = cap_end(&cap, stdout);
    CHECK(code == CT_EXIT_OK);
    CHECK(strncmp(out, "usage: prog [flags]", 19) == 0 && strstr(out, "--stop-on-nan"));
    free(out);

    /* --version prints the version and exits 0, whatever else is given. */
    cap_start(&cap, stdout);
    code = ct_main(3, (char *[]){"prog", "--bogus", "--version", NULL}, &stub_trial);
    out = cap_end(&cap, stdout);
    char want[64];
    snprintf(want, sizeof want, "ctrial %s\n", ct_version());
    CHECK(code == CT_EXIT_OK && strcmp(out, want) == 0 && strcmp(ct_version(), CTRIAL_VERSION_STRING) == 0);
    free(out);
}

/* ---- exit codes and ct_main --------------------------------------------------------------- */

static void test_exit_codes(void) {
    CHECK(ct_exit_code(CT_OK) == CT_EXIT_OK && CT_EXIT_OK == 0);
    CHECK(ct_exit_code(CT_ECONFIG) == CT_EXIT_CONFIG && CT_EXIT_CONFIG == 2);
    CHECK(ct_exit_code(CT_ECHECKPOINT) == CT_EXIT_CHECKPOINT && CT_EXIT_CHECKPOINT == 3);
    CHECK(ct_exit_code(CT_ENAN) == CT_EXIT_NAN && CT_EXIT_NAN == 4);
    CHECK(ct_exit_code(CT_EDIST) == CT_EXIT_DIST && CT_EXIT_DIST == 5);
    static const int trial_codes[] = {CT_EINVAL, CT_ESHAPE, CT_EDTYPE, CT_EDEVICE, CT_EINDEX,
                                      CT_ENOMEM, CT_ENOTSUP, CT_EIO, CT_EFORMAT, CT_ESTATE,
                                      CT_ETORCH, CT_ETRIAL, -99, 7};
    for (size_t i = 0; i < sizeof trial_codes / sizeof *trial_codes; i++)
        CHECK(ct_exit_code(trial_codes[i]) == CT_EXIT_TRIAL && CT_EXIT_TRIAL == 1);
}

static int run_main(const char **args, char **err) {
    char *argv[64] = {"prog"};
    int argc = 1;
    for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    argv[argc] = NULL;
    capture cap;
    cap_start(&cap, stderr);
    int code = ct_main(argc, argv, &stub_trial);
    *err = cap_end(&cap, stderr);
    return code;
}

static void test_ct_main(void) {
    char *err;
    /* success: ct_fit sees the parsed options */
    fit_seen.calls = 0;
    fit_seen.status = 0;
    int code = run_main((const char *[]){"--config", config_path, "--hparam", "lr=0.25",
                                          "--device", "cuda:0", "--output", "o2", NULL}, &err);
    CHECK(code == CT_EXIT_OK && fit_seen.calls == 1);
    CHECK(err[0] == '\0');
    CHECK(fit_seen.opts.max_length.unit == CT_BATCHES && fit_seen.opts.max_length.n == 1000);
    CHECK(fit_seen.opts.seed == 7 && fit_seen.opts.global_batch_size == 64);
    CHECK(strcmp(fit_seen.output_dir, "o2") == 0 && strcmp(fit_seen.device, "cuda:0") == 0);
    CHECK(strcmp(fit_seen.resume, "(null)") == 0);
    double lr = 0;
    CHECK_OK(ct_value_get_float(ct_value_dict_get(fit_seen.hparams, "lr"), &lr));
    CHECK(lr == 0.25);
    free(err);

    /* ct_fit's failure: its code picks the exit code, one line on stderr */
    static const struct {
        int status, code;
    } fails[] = {{CT_ENAN, CT_EXIT_NAN}, {CT_ECHECKPOINT, CT_EXIT_CHECKPOINT}, {CT_EDIST, CT_EXIT_DIST},
                 {CT_ETRIAL, CT_EXIT_TRIAL}, {CT_ECONFIG, CT_EXIT_CONFIG}};
    for (size_t i = 0; i < sizeof fails / sizeof *fails; i++) {
        fit_seen.status = fails[i].status;
        code = run_main((const char *[]){"--max-length", "5", NULL}, &err);
        CHECK(code == fails[i].code);
        char want[256];
        snprintf(want, sizeof want, "ctrial: %s: the stub failed on purpose\n",
                 ct_strerror(fails[i].status));
        CHECK(strcmp(err, want) == 0);
        free(err);
    }
    fit_seen.status = 0;
    ct_clear_error();

    /* a bad flag: exit 2 before ct_fit, the cause names the flag */
    fit_seen.calls = 0;
    code = run_main((const char *[]){"--max-length", "5", "--seed", "x", NULL}, &err);
    CHECK(code == CT_EXIT_CONFIG && fit_seen.calls == 0);
    char want[256];
    snprintf(want, sizeof want, "ctrial: %s: --seed: expected an integer >= 0, got 'x'\n",
             ct_strerror(CT_ECONFIG));
    CHECK(strcmp(err, want) == 0);
    free(err);
    code = run_main((const char *[]){NULL}, &err);
    CHECK(code == CT_EXIT_CONFIG && fit_seen.calls == 0 && strstr(err, "no max_length"));
    free(err);

    /* mpirun's world size checks global_batch_size; a run error names the rank */
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_RANK", "2", 1);
    CHECK(cti_launch_world_size() == 4);
    code = run_main((const char *[]){"--max-length", "5", "--hparam", "global_batch_size=2", NULL},
                    &err);
    CHECK(code == CT_EXIT_CONFIG && fit_seen.calls == 0);
    CHECK(err[0] == '\0'); /* a config error is reported by rank 0 only */
    free(err);
    fit_seen.status = CT_EDIST;
    code = run_main((const char *[]){"--max-length", "5", "--hparam", "global_batch_size=8", NULL},
                    &err);
#if CTRIAL_HAVE_MPI
    CHECK(code == CT_EXIT_DIST && fit_seen.calls == 1 && fit_seen.opts.global_batch_size == 8);
    CHECK(strncmp(err, "ctrial[rank 2]: ", 16) == 0);
#else
    /* A build without MPI refuses a launch of several ranks before the fit, saying why. */
    CHECK(code != 0 && fit_seen.calls == 0 && strstr(err, "built without MPI") != NULL);
#endif
    free(err);
    fit_seen.status = 0;
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    code = run_main((const char *[]){"--max-length", "5", "--hparam", "global_batch_size=2", NULL},
                    &err);
    CHECK(code == CT_EXIT_CONFIG && strstr(err, "smaller than the number of ranks (4)"));
    free(err);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
    setenv("PMI_SIZE", "3", 1);
    CHECK(cti_launch_world_size() == 3);
    setenv("PMI_SIZE", "junk", 1);
    CHECK(cti_launch_world_size() == 1);
    unsetenv("PMI_SIZE");
    CHECK(cti_launch_world_size() == 1);
    /* srun's step (srun --mpi=pmix sets PMIX_RANK but no size) */
    setenv("SLURM_STEP_NUM_TASKS", "6", 1);
    setenv("SLURM_PROCID", "5", 1);
    CHECK(cti_launch_world_size() == 6 && cti_launch_world_rank() == 5 && cti_launch_by_launcher());
    setenv("PMIX_RANK", "4", 1);
    CHECK(cti_launch_world_rank() == 4);
    /* mpirun inside an allocation: its ranks also carry the step of the
     * srun that started its daemons (one task per node); mpirun's win */
    setenv("OMPI_COMM_WORLD_SIZE", "16", 1);
    setenv("OMPI_COMM_WORLD_RANK", "9", 1);
    CHECK(cti_launch_world_size() == 16 && cti_launch_world_rank() == 9);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("PMIX_RANK");
    unsetenv("SLURM_STEP_NUM_TASKS");
    unsetenv("SLURM_PROCID");
    CHECK(cti_launch_world_size() == 1 && cti_launch_world_rank() == 0 && !cti_launch_by_launcher());

    /* a NULL trial is the program's mistake, not the config's */
    capture cap;
    cap_start(&cap, stderr);
    code = ct_main(1, (char *[]){"prog", NULL}, NULL);
    err = cap_end(&cap, stderr);
    CHECK(code == CT_EXIT_TRIAL && strstr(err, "ct_main: trial is NULL"));
    free(err);
    ct_clear_error();
}

/* ---- the program's own flags (ct_main_ex) ---------------------------------------------------- */

static const char *data_dir = "data";
static int64_t hidden = 128;
static double dropout = 0.5;
static bool augment = false;
static const ct_flag program_flags[] = {
    {"--data-dir", CT_FLAG_STRING, &data_dir, "DIR", "where the CSV files are"},
    {"--hidden", CT_FLAG_INT, &hidden, NULL, "hidden units"},
    {"--dropout", CT_FLAG_DOUBLE, &dropout, "P", "dropout probability"},
    {"--augment", CT_FLAG_BOOL, &augment, NULL, "random crops and flips"},
};

/* ct_main_ex with program_flags (or `flags` when not NULL) and args; stderr
 * and stdout captured. */
static int run_main_ex(const ct_flag *flags, size_t n, const char **args, char **out, char **err) {
    char *argv[64] = {"prog"};
    int argc = 1;
    for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    argv[argc] = NULL;
    ct_main_params p = ct_main_default_params();
    p.flags = flags ? flags : program_flags;
    p.num_flags = flags ? n : sizeof program_flags / sizeof *program_flags;
    p.description = "Trains an MLP on a CSV table.";
    p.user = &hidden;
    capture ce, co;
    cap_start(&ce, stderr);
    cap_start(&co, stdout);
    int code = ct_main_ex(argc, argv, &stub_trial, &p);
    *out = cap_end(&co, stdout);
    *err = cap_end(&ce, stderr);
    return code;
}

static void test_program_flags(void) {
    char *out, *err;
    /* Defaults stay when the flags are not given; the user pointer reaches ct_fit. */
    fit_seen.calls = 0;
    int code = run_main_ex(NULL, 0, (const char *[]){"--max-length", "5", NULL}, &out, &err);
    CHECK(code == CT_EXIT_OK && fit_seen.calls == 1 && fit_seen.opts.user == &hidden);
    CHECK(strcmp(data_dir, "data") == 0 && hidden == 128 && dropout == 0.5 && !augment);
    free(out);
    free(err);

    /* Given, in both forms, mixed with ctrial's flags in any order. */
    code = run_main_ex(NULL, 0,
                       (const char *[]){"--hidden=-3", "--max-length", "5", "--data-dir", "/srv/csv", "--augment",
                                        "--dropout", "1e-1", "--seed", "4", NULL},
                       &out, &err);
    CHECK(code == CT_EXIT_OK && fit_seen.calls == 2 && fit_seen.opts.seed == 4);
    CHECK(strcmp(data_dir, "/srv/csv") == 0 && hidden == -3 && dropout == 0.1 && augment);
    free(out);
    free(err);

    /* Bad values name the flag; exit 2 before ct_fit. */
    static const struct {
        const char *flag, *value, *want;
    } bad[] = {{"--hidden", "12x", "--hidden: expected an integer, got '12x'"},
               {"--hidden", "", "--hidden: expected an integer, got ''"},
               {"--hidden", "99999999999999999999", "--hidden: expected an integer"},
               {"--dropout", "nan", "--dropout: expected a number, got 'nan'"},
               {"--dropout", "0,5", "--dropout: expected a number, got '0,5'"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        code = run_main_ex(NULL, 0, (const char *[]){"--max-length", "5", bad[i].flag, bad[i].value, NULL}, &out,
                           &err);
        CHECK(code == CT_EXIT_CONFIG && fit_seen.calls == 2 && strstr(err, bad[i].want));
        free(out);
        free(err);
    }
    code = run_main_ex(NULL, 0, (const char *[]){"--max-length", "5", "--augment=yes", NULL}, &out, &err);
    CHECK(code == CT_EXIT_CONFIG && strstr(err, "--augment takes no value"));
    free(out);
    free(err);
    code = run_main_ex(NULL, 0, (const char *[]){"--max-length", "5", "--data-dir", NULL}, &out, &err);
    CHECK(code == CT_EXIT_CONFIG && strstr(err, "--data-dir needs a value (DIR)"));
    free(out);
    free(err);
    /* A known flag where a value belongs, the program's or ctrial's, is the
     * next flag (issue 17); what only looks like one is a value. */
    code = run_main_ex(NULL, 0, (const char *[]){"--max-length", "5", "--data-dir", "--augment", NULL}, &out, &err);
    CHECK(code == CT_EXIT_CONFIG && fit_seen.calls == 2 &&
          strstr(err, "--data-dir needs a value (DIR); the next argument, --augment, is a flag"));
    free(out);
    free(err);
    code = run_main_ex(NULL, 0, (const char *[]){"--max-length", "--output", "X", NULL}, &out, &err);
    CHECK(code == CT_EXIT_CONFIG && fit_seen.calls == 2 &&
          strstr(err, "--max-length needs a value (LEN); the next argument, --output, is a flag") &&
          !strstr(err, "unexpected argument"));
    free(out);
    free(err);

    /* --help lists the description and the program's flags, then ctrial's. */
    code = run_main_ex(NULL, 0, (const char *[]){"--help", NULL}, &out, &err);
    CHECK(code == CT_EXIT_OK && fit_seen.calls == 2);
    CHECK(strstr(out, "usage: prog [flags]\n\nTrains an MLP on a CSV table.\n\nThe program's flags:\n"));
    CHECK(strstr(out, "\n  --data-dir DIR ") && strstr(out, "\n  --hidden N ") && strstr(out, "\n  --dropout P ") &&
          strstr(out, "\n  --augment ") && strstr(out, "random crops and flips\n"));
    CHECK(strstr(out, "--augment") < strstr(out, "--config FILE"));
    free(out);
    free(err);

    /* Mistakes in the table are refused before anything is parsed. */
    static const struct {
        ct_flag f;
        const char *want;
    } wrong[] = {{{"--seed", CT_FLAG_INT, &hidden, NULL, ""}, "the program's flag --seed is one of ctrial's flags"},
                 {{"data-dir", CT_FLAG_STRING, &data_dir, NULL, ""}, "name 'data-dir' must be --NAME"},
                 {{"--a=b", CT_FLAG_STRING, &data_dir, NULL, ""}, "name '--a=b' must be --NAME"},
                 {{"--x", (ct_flag_type)9, &hidden, NULL, ""}, "flag --x has an unknown type 9"},
                 {{"--x", CT_FLAG_INT, NULL, NULL, ""}, "flag --x has no value pointer"}};
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        code = run_main_ex(&wrong[i].f, 1, (const char *[]){"--max-length", "5", NULL}, &out, &err);
        CHECK(code == CT_EXIT_CONFIG && fit_seen.calls == 2 && strstr(err, wrong[i].want));
        free(out);
        free(err);
    }
    const ct_flag twice[] = {{"--x", CT_FLAG_BOOL, &augment, NULL, ""}, {"--x", CT_FLAG_BOOL, &augment, NULL, ""}};
    code = run_main_ex(twice, 2, (const char *[]){"--max-length", "5", NULL}, &out, &err);
    CHECK(code == CT_EXIT_CONFIG && strstr(err, "the program's flag --x is given twice"));
    free(out);
    free(err);
    /* An older program's params (docs/design.md, "A stable ABI"): flags,
     * no description and no user pointer, at exactly that size on the
     * heap. Its flags parse; the rest are defaults. A struct not made by
     * ct_main_default_params() is a config error. */
    {
        /* ct_main_params as a program built before `description` and
         * `user` existed has it. */
        typedef struct {
            uint32_t size;
            const ct_flag *flags;
            size_t num_flags;
        } main_params_v0;
        _Static_assert(sizeof(main_params_v0) == offsetof(ct_main_params, description), "an older layout");
        main_params_v0 *old = malloc(sizeof *old);
        ct_main_params_init((ct_main_params *)(void *)old, sizeof *old);
        CHECK(old->size == sizeof *old && old->flags == NULL && old->num_flags == 0);
        old->flags = program_flags;
        old->num_flags = sizeof program_flags / sizeof *program_flags;
        char *argv[] = {"prog", "--help", NULL};
        capture ce, co;
        cap_start(&ce, stderr);
        cap_start(&co, stdout);
        code = ct_main_ex(2, argv, &stub_trial, (const ct_main_params *)(void *)old);
        out = cap_end(&co, stdout);
        err = cap_end(&ce, stderr);
        CHECK(code == CT_EXIT_OK && strstr(out, "usage: prog [flags]\n\nThe program's flags:\n") &&
              strstr(out, "\n  --data-dir DIR "));
        free(out);
        free(err);
        free(old);
        ct_main_params zero = {0};
        cap_start(&ce, stderr);
        cap_start(&co, stdout);
        code = ct_main_ex(2, argv, &stub_trial, &zero);
        out = cap_end(&co, stdout);
        err = cap_end(&ce, stderr);
        CHECK(code == CT_EXIT_CONFIG &&
              strstr(err, "ct_main_params.size is 0: make the struct with ct_main_default_params()"));
        free(out);
        free(err);
    }
    /* A value that starts with "--" but is no flag is still a value. */
    code = run_main_ex(NULL, 0, (const char *[]){"--max-length", "5", "--data-dir", "--srv", "--output", "--o", NULL},
                       &out, &err);
    CHECK(code == CT_EXIT_OK && fit_seen.calls == 3 && strcmp(data_dir, "--srv") == 0 &&
          strcmp(fit_seen.output_dir, "--o") == 0);
    free(out);
    free(err);
    ct_clear_error();
}

int main(void) {
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_SIZE");
    write_config();
    test_every_flag();
    test_flag_forms();
    test_bad_flags();
    test_warm_start();
    test_help();
    test_exit_codes();
    test_ct_main();
    test_program_flags();
    unlink(config_path);
    ct_value_free(fit_seen.hparams);
    return ct_test_result("config_flags");
}
