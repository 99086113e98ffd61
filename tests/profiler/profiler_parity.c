/* tests/profiler/profiler_parity.c — runs ct_profiler schedules for
 * test_profiler_parity.py, which runs the same ones through torch.profiler.
 *
 *     profiler_parity OUTDIR TAG:SKIP_FIRST,WAIT,WARMUP,ACTIVE,REPEAT,SKIP_FIRST_WAIT,NSTEPS ...
 *
 * For each case: a CPU profiler writing into OUTDIR/TAG as "c", NSTEPS steps
 * (a little matmul work, then ct_profiler_step), then ct_profiler_stop. Each
 * trace written is printed as "TRACE TAG WHEN PATH", WHEN being the step
 * number after the ct_profiler_step that wrote it, or "stop". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

static void work(void) {
    ct_scope *s = ct_scope_begin();
    ct_record_function *r = ct_record_function_begin("work");
    ct_tensor *a = ct_randn(CT_SHAPE(8, 8), NULL);
    (void)ct_sum(ct_matmul(a, a));
    ct_record_function_end(r);
    ct_scope_end(s);
}

static int run_case(const char *outdir, const char *spec) {
    char tag[64];
    int v[7];
    if (sscanf(spec, "%63[^:]:%d,%d,%d,%d,%d,%d,%d", tag, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) != 8) {
        fprintf(stderr, "bad case '%s'\n", spec);
        return 1;
    }
    ct_profiler_opts o = ct_profiler_defaults();
    o.cuda = false;
    o.schedule = (ct_profiler_schedule){.skip_first = v[0], .wait = v[1], .warmup = v[2], .active = v[3],
                                        .repeat = v[4], .skip_first_wait = v[5]};
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", outdir, tag);
    ct_profiler *p = ct_profiler_new(&o, dir, "c");
    if (!p) {
        fprintf(stderr, "%s: %s\n", tag, ct_last_error());
        return 1;
    }
    char last[1024] = "";
    for (int i = 0; i < v[6]; i++) {
        work();
        if (ct_profiler_step(p) != 0) {
            fprintf(stderr, "%s: %s\n", tag, ct_last_error());
            return 1;
        }
        if (strcmp(last, ct_profiler_last_trace(p))) {
            snprintf(last, sizeof last, "%s", ct_profiler_last_trace(p));
            printf("TRACE %s %lld %s\n", tag, (long long)ct_profiler_step_num(p), last);
        }
    }
    if (ct_profiler_stop(p) != 0) {
        fprintf(stderr, "%s: %s\n", tag, ct_last_error());
        return 1;
    }
    if (strcmp(last, ct_profiler_last_trace(p))) printf("TRACE %s stop %s\n", tag, ct_profiler_last_trace(p));
    ct_profiler_free(p);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s OUTDIR TAG:SKIP_FIRST,WAIT,WARMUP,ACTIVE,REPEAT,SKIP_FIRST_WAIT,NSTEPS ...\n", argv[0]);
        return 2;
    }
    for (int i = 2; i < argc; i++)
        if (run_case(argv[1], argv[i])) return 1;
    return 0;
}
