/* libFuzzer target: ct_main's flags over an experiment config (module
 * config: cti_main_parse_with, cti_config_load_file, cti_config_finish), with
 * no libtorch.
 *
 * The input is the config file's text, a NUL byte, then the command line's
 * arguments separated by NUL bytes; the input's size modulo 4 picks the
 * number of ranks (1 to 4). The config is written to a scratch file and
 * passed as "--config FILE" before the arguments, unless the text is empty.
 * The program declares its own flags of every type (ct_flag), as
 * ct_main_ex's callers do. Beyond "no crash, no leak, no undefined
 * behaviour", it checks that
 *  - a failure is CT_ECONFIG (or CT_ENOMEM) with a message, and parsing
 *    again gives the same code and message (nothing depends on the run);
 *  - a success (other than --help / --version) leaves options ct_fit can
 *    take: a global batch size, when given, of at least one record per rank, a
 *    max_length of at least one batch or epoch (records turned into
 *    batches, no schedule), and a seed in 0..2^31-1;
 *  - the program's flags were written only with values of their type.
 * Built by fuzz/CMakeLists.txt, run by fuzz/run.sh. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/flags.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_ARGS = 64 };

typedef struct {
    bool on;
    int64_t n;
    double x;
    const char *s;
} program_flags;

static int parse(int argc, char **argv, int world, program_flags *pf, cti_main_args *a) {
    const ct_flag flags[] = {
        {"--augment", CT_FLAG_BOOL, &pf->on, NULL, "a switch"},
        {"--hidden", CT_FLAG_INT, &pf->n, "N", "an integer"},
        {"--scale", CT_FLAG_DOUBLE, &pf->x, "X", "a number"},
        {"--data-dir", CT_FLAG_STRING, &pf->s, "DIR", "a string"},
    };
    /* The parser itself, below ct_main_ex (which would take the struct by
     * its size): module cli is not linked here. */
    ct_main_params p = {.size = sizeof p, .flags = flags, .num_flags = sizeof flags / sizeof flags[0]};
    *pf = (program_flags){.n = 7, .x = 0.5, .s = "default"};
    return cti_main_parse_with(argc, argv, world, &p, a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t text_len = nul ? (size_t)(nul - data) : size;

    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_config_%ld.json", (long)getpid());
    if (text_len > 0) {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(data, 1, text_len, f) != text_len || fclose(f) != 0) abort();
    }

    /* argv: the program, --config FILE, then the NUL-separated rest (a copy,
     * so every argument is a string of its own). */
    size_t rest_len = nul ? size - text_len - 1 : 0;
    char *rest = malloc(rest_len + 1);
    if (!rest) return 0;
    if (rest_len) memcpy(rest, nul + 1, rest_len);
    rest[rest_len] = 0;
    char *argv[MAX_ARGS + 4];
    int argc = 0;
    argv[argc++] = "fuzz_config";
    if (text_len > 0) {
        argv[argc++] = "--config";
        argv[argc++] = path;
    }
    for (size_t at = 0; nul && at <= rest_len && argc < MAX_ARGS; at += strlen(rest + at) + 1) argv[argc++] = rest + at;
    argv[argc] = NULL;
    int world = 1 + (int)(size % 4);

    program_flags pf;
    cti_main_args a;
    int rc = parse(argc, argv, world, &pf, &a);
    if (rc) {
        if (rc != CT_ECONFIG && rc != CT_ENOMEM) abort();
        if (rc != ct_last_code() || !ct_last_error()[0]) abort();
        char *first = strdup(ct_last_error());
        cti_main_args_free(&a);
        program_flags pf2;
        cti_main_args b;
        if (parse(argc, argv, world, &pf2, &b) != rc || (first && strcmp(first, ct_last_error()) != 0)) abort();
        cti_main_args_free(&b);
        free(first);
        ct_clear_error();
    } else {
        const ct_fit_opts *o = &a.cfg.fit;
        if (!a.help && !a.version) {
            if (o->global_batch_size != 0 && o->global_batch_size < world) abort(); /* 0: ct_fit asks for it */
            const ct_period *m = &o->max_length;
            if ((m->unit != CT_BATCHES && m->unit != CT_EPOCHS) || m->num_points || m->n < 1) abort();
            if (o->seed > INT32_MAX) abort();
        }
        if (!isfinite(pf.x)) abort();
        if (!pf.s) abort();
        cti_main_args_free(&a);
    }
    free(rest);
    if (text_len > 0) unlink(path);
    return 0;
}
