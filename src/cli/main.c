/* src/cli/main.c — ct_main: the standard program around a trial (its flags,
 * the experiment config, ct_fit, exit codes). See trial.h and config/flags.h. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "base/launch.h"
#include "base/opts.h"
#include "config/flags.h"
#include "experiment/experiment.h"
#include "fit/stop.h"
#include "ctrial/ctrial.h"
#include "ctrial/dist.h"

/* Failures a restart from the latest checkpoint may get past (the trial's
 * code, libtorch, I/O, a non-finite loss), as a search retries them; not a
 * config error, a bad checkpoint, memory, a lost rank or the trial's exit. */
static bool restartable(int rc) {
    return rc == CT_ETRIAL || rc == CT_ETORCH || rc == CT_EIO || rc == CT_ENAN || rc == CT_EFORMAT ||
           rc == CT_ESHAPE || rc == CT_EDTYPE || rc == CT_EINDEX || rc == CT_ESTATE || rc == CT_EINVAL;
}

/* One trial: ct_fit, and when the config gives max_restarts, a failed run
 * restarted from its latest checkpoint up to that many times, as Determined
 * restarts a trial (a search's trials restart in cti_experiment_run). Not
 * under mpirun, where a failed rank ends the job (run it again with
 * --resume latest). */
static int fit_with_restarts(const ct_trial *trial, const cti_config *c) {
    ct_fit_opts o = c->fit;
    int limit = c->max_restarts_given && !ct_dist_is_distributed() ? c->max_restarts : 0;
    for (int n = 0;; n++) {
        int rc = ct_fit(trial, &o);
        if (rc == CT_OK || n >= limit || !restartable(rc)) return rc;
        fprintf(stderr, "ctrial: the trial failed (%s: %s); restarting it from its latest checkpoint (restart %d of "
                "%d)\n", ct_err_name(rc), ct_last_error(), n + 1, limit);
        o.resume = "latest";
        o.overwrite = false;
    }
}

int ct_exit_code(int status) {
    switch (status) {
    case CT_OK: return CT_EXIT_OK;
    case CT_ECONFIG: return CT_EXIT_CONFIG;
    case CT_ECHECKPOINT: return CT_EXIT_CHECKPOINT;
    case CT_ENAN: return CT_EXIT_NAN;
    case CT_EDIST: return CT_EXIT_DIST;
    default: return CT_EXIT_TRIAL;
    }
}

/* The one-line cause on stderr; under mpirun each rank's line says which
 * rank failed, since their outputs are interleaved. */
static void report(int status, int world) {
    if (world > 1)
        fprintf(stderr, "ctrial[rank %d]: %s: %s\n", cti_launch_world_rank(), ct_strerror(status),
                ct_last_error());
    else
        fprintf(stderr, "ctrial: %s: %s\n", ct_strerror(status), ct_last_error());
}

static const ct_main_params main_defaults = {.size = sizeof(ct_main_params)};

void ct_main_params_init(ct_main_params *p, size_t size) { cti_opts_init(p, size, &main_defaults, sizeof main_defaults); }

int ct_main(int argc, char **argv, const ct_trial *trial) { return ct_main_ex(argc, argv, trial, NULL); }

int ct_main_ex(int argc, char **argv, const ct_trial *trial, const ct_main_params *p) {
    /* ct_main owns the process: SIGTERM and SIGINT are caught from here
     * until it exits (fit/stop.h). One before ct_fit (MPI's start, the
     * flags) stops the run before training, with nothing to save; one after
     * it (a repeated SIGTERM while the process ends) cannot turn a clean
     * stop into death by signal. */
    cti_fit_catch_stop_signals_until_exit();
    int world = cti_launch_world_size();
    if (!trial) {
        ct_set_error(CT_EINVAL, "ct_main: trial is NULL");
        report(CT_EINVAL, world);
        return CT_EXIT_TRIAL;
    }
    /* The program's params as this library's struct (base/opts.h): a
     * program built against an older ctrial gets the defaults of what it
     * lacks. */
    ct_main_params params = main_defaults;
    int rc = p ? cti_opts_take(&params, p, &main_defaults, sizeof params, offsetof(ct_main_params, flags),
                              "ct_main_params", "ct_main_default_params")
               : CT_OK;
    p = &params;
    cti_main_args args = {0};
    if (rc == CT_OK) rc = cti_main_parse_with(argc, argv, world, p, &args);
    if (rc) {
        /* Every rank parses the same flags and fails the same way: one line
         * is enough. Any failure here (also out of memory) is a config one:
         * nothing ran. */
        if (cti_launch_world_rank() == 0) report(rc, world);
        /* mpirun ends the job at the first rank that exits with an error,
         * and may kill rank 0 before its line has reached mpirun: the
         * others leave a moment later. */
        else if (world > 1) nanosleep(&(struct timespec){.tv_sec = 1}, NULL);
        cti_main_args_free(&args);
        return CT_EXIT_CONFIG;
    }
    if (args.help || args.version) {
        if (cti_launch_world_rank() == 0 && args.help) cti_main_usage_with(stdout, argc > 0 && argv ? argv[0] : NULL, p);
        if (cti_launch_world_rank() == 0 && args.version) printf("ctrial %s\n", ct_version());
        cti_main_args_free(&args);
        return CT_EXIT_OK;
    }
    /* Keys only a Determined cluster acts on: named once, then ignored. */
    if (args.cfg.cluster_keys[0] && cti_launch_world_rank() == 0)
        fprintf(stderr, "ctrial: warning: %s: ignoring what only a Determined cluster uses: %s\n", args.cfg.origin,
                args.cfg.cluster_keys);
    if (args.cfg.horovod_keys[0] && cti_launch_world_rank() == 0)
        fprintf(stderr, "ctrial: warning: %s: ignoring what only Horovod acts on (ctrial's gradient all-reduce is "
                "its own, in full precision, its buckets sized by optimizations.bucket_cap_mb): %s\n",
                args.cfg.origin, args.cfg.horovod_keys);
    if (args.cfg.amp_level[0] && cti_launch_world_rank() == 0)
        fprintf(stderr, "ctrial: warning: %s: optimizations.mixed_precision is %s: apex's half-precision weights "
                "have no equivalent here, so it runs as O1: AMP (float16 autocast with a GradScaler, float32 "
                "weights)\n", args.cfg.origin, args.cfg.amp_level);
    /* A single trial trains on the ranks mpirun started, whatever slots_per_trial says. */
    if (!cti_config_is_search(&args.cfg) && args.cfg.slots_per_trial > world && cti_launch_world_rank() == 0)
        fprintf(stderr, "ctrial: warning: %s: resources.slots_per_trial is %d, but this run has %d rank%s: it trains "
                "on %d (start it with mpirun -np %d for %d)\n", args.cfg.origin, args.cfg.slots_per_trial, world,
                world == 1 ? "" : "s", world, args.cfg.slots_per_trial, args.cfg.slots_per_trial);
    rc = ct_dist_init();
    if (rc == CT_OK && args.cfg.evaluate && cti_config_is_search(&args.cfg))
        rc = ct_set_error(CT_ECONFIG, "--evaluate: %s is a search: evaluate one trial's checkpoint with that "
                          "trial's config (its hyperparameters are in the trial's folder)", args.cfg.origin);
    else if (rc == CT_OK && args.cfg.evaluate) rc = ct_evaluate(trial, &args.cfg.fit, args.cfg.evaluate, NULL);
    else if (rc == CT_OK && cti_config_is_search(&args.cfg)) rc = cti_experiment_run(trial, &args.cfg);
    else if (rc == CT_OK) rc = fit_with_restarts(trial, &args.cfg);
    cti_main_args_free(&args);
    if (rc && ct_dist_is_distributed()) {
        /* The other ranks may be waiting for this one in a collective: end
         * the whole job, naming this rank and the cause. */
        char why[2300];
        snprintf(why, sizeof why, "%s: %s", ct_strerror(rc), ct_last_error());
        ct_dist_abort(ct_exit_code(rc), why);
    }
    if (rc) report(rc, world);
    /* Preempted under mpirun: if mpirun itself was signalled it is shutting
     * down (and kills the ranks a second later), so MPI_Finalize may never
     * return. The checkpoint is committed; MPI ends at exit (atexit), after
     * the caller of ct_main has had its turn. (Every rank knows the signal,
     * whichever rank got it: ct_fit_stop_signal is agreed.) */
    if (!(rc == CT_OK && ct_fit_stop_signal() && ct_dist_is_distributed())) ct_dist_finalize();
    return ct_exit_code(rc);
}
