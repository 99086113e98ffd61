/* tests/profiler/test_profiler.c — profiler.h on the CPU: the traces a
 * schedule writes (which files, which ProfilerStep#k ranges, aten ops and
 * record_function ranges inside), stop in the middle of a window, repeat 0,
 * record_shapes, CUDA asked for without a GPU, the errors (bad options, an
 * unusable directory, a write that fails, a second profiler, another
 * thread). The expected steps follow torch.profiler.schedule's rules, worked
 * out by hand in each test; test_profiler_parity.py checks many schedules
 * against torch.profiler itself. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, nftw */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <ftw.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ct_test.h"

static char root[] = "/tmp/ct_profiler_XXXXXX";

/* ---- helpers ---------------------------------------------------------------- */

/* root/sub */
static const char *path_in(const char *sub) {
    static char buf[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", root, sub);
    return buf[i];
}

/* A small MLP (4 -> 8 -> ReLU -> 2) with SGD: one step is a forward inside a
 * "ct_forward" range, backward and an optimizer step. */
typedef struct {
    ct_module *net;
    ct_optim *opt;
    ct_device dev;
} mlp;

static mlp mlp_on(ct_device dev) {
    mlp m;
    ct_module *layers[] = {ct_nn_linear(4, 8, true), ct_nn_relu(), ct_nn_linear(8, 2, true)};
    m.net = ct_nn_sequential(3, layers);
    m.dev = dev;
    CHECK_OK(ct_nn_to_device(m.net, dev));
    ct_sgd_opts o = ct_sgd_defaults();
    o.lr = 0.1;
    m.opt = ct_optim_sgd(m.net, &o);
    CHECK(m.net && m.opt);
    return m;
}

static mlp mlp_new(void) { return mlp_on(ct_cpu()); }

static void mlp_free(mlp m) {
    ct_optim_free(m.opt);
    ct_nn_free(m.net);
}

static void train_step(mlp m) {
    ct_scope *s = ct_scope_begin();
    ct_record_function *r = ct_record_function_begin("ct_forward");
    CHECK(r != NULL);
    ct_tensor *loss = ct_sum(ct_nn_forward(m.net, ct_randn(CT_SHAPE(5, 4), &(ct_topts){.device = m.dev})));
    ct_record_function_end(r);
    CHECK_OK(ct_optim_zero_grad(m.opt, true));
    CHECK_OK(ct_backward(loss));
    CHECK_OK(ct_optim_step(m.opt));
    ct_scope_end(s);
}

/* A trace: its JSON, the ProfilerStep#k numbers in it (sorted, distinct). */
typedef struct {
    json_t *root;
    int steps[64];
    int nsteps;
} trace;

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static bool load_trace(const char *path, trace *t) {
    json_error_t err;
    memset(t, 0, sizeof *t);
    t->root = json_load_file(path, 0, &err);
    if (!t->root) {
        fprintf(stderr, "%s: not JSON: %s (line %d)\n", path, err.text, err.line);
        return false;
    }
    json_t *ev = json_object_get(t->root, "traceEvents");
    if (!json_is_array(ev)) {
        fprintf(stderr, "%s: no traceEvents list\n", path);
        return false;
    }
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        int k;
        if (!name || sscanf(name, "ProfilerStep#%d", &k) != 1) continue;
        bool seen = false;
        for (int j = 0; j < t->nsteps; j++) seen = seen || t->steps[j] == k;
        if (!seen && t->nsteps < 64) t->steps[t->nsteps++] = k;
    }
    qsort(t->steps, (size_t)t->nsteps, sizeof(int), cmp_int);
    return true;
}

/* Events named `name` (and with category `cat` unless NULL). */
static int count_events(const trace *t, const char *name, const char *cat) {
    json_t *ev = json_object_get(t->root, "traceEvents");
    size_t i;
    json_t *e;
    int n = 0;
    json_array_foreach(ev, i, e) {
        const char *en = json_string_value(json_object_get(e, "name"));
        const char *ec = json_string_value(json_object_get(e, "cat"));
        if (en && !strcmp(en, name) && (!cat || (ec && !strcmp(ec, cat)))) n++;
    }
    return n;
}

static int count_cat(const trace *t, const char *cat) {
    json_t *ev = json_object_get(t->root, "traceEvents");
    size_t i;
    json_t *e;
    int n = 0;
    json_array_foreach(ev, i, e) {
        const char *ec = json_string_value(json_object_get(e, "cat"));
        if (ec && !strcmp(ec, cat)) n++;
    }
    return n;
}

/* The trace holds exactly the ProfilerStep ranges `want` (n of them), each
 * once and as a user_annotation, plus `per_step` "ct_forward" ranges and
 * the MLP's aten ops per recorded step. */
static void check_trace(const char *path, int n, const int *want, int per_step) {
    trace t;
    CHECK(load_trace(path, &t));
    if (!t.root) return;
    CHECK(t.nsteps == n);
    for (int i = 0; i < n && i < t.nsteps; i++) {
        CHECK(t.steps[i] == want[i]);
        char name[64];
        snprintf(name, sizeof name, "ProfilerStep#%d", want[i]);
        CHECK(count_events(&t, name, "user_annotation") == 1);
    }
    if (t.nsteps != n) {
        fprintf(stderr, "%s: ProfilerStep numbers:", path);
        for (int i = 0; i < t.nsteps; i++) fprintf(stderr, " %d", t.steps[i]);
        fprintf(stderr, "\n");
    }
    if (per_step > 0) {
        CHECK(count_events(&t, "ct_forward", "user_annotation") == per_step * n);
        CHECK(count_events(&t, "aten::addmm", "cpu_op") == 2 * per_step * n);
        CHECK(count_events(&t, "aten::linear", "cpu_op") == 2 * per_step * n);
        CHECK(count_events(&t, "aten::mm", "cpu_op") > 0); /* backward */
    }
    json_decref(t.root);
}

/* Files in dir: how many, and whether `name` is one of them. */
static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void rm_rf(const char *p) { nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* ---- tests ------------------------------------------------------------------ */

static void test_defaults(void) {
    ct_profiler_opts o = ct_profiler_defaults();
    CHECK(o.schedule.skip_first == 0 && o.schedule.wait == 1 && o.schedule.warmup == 1);
    CHECK(o.schedule.active == 3 && o.schedule.repeat == 1 && o.schedule.skip_first_wait == 0);
    CHECK(o.cpu && o.cuda && !o.record_shapes && !o.profile_memory && !o.with_stack);
}

/* schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=2) over 12 steps:
 * step 0 skipped, cycle 0 = steps 1 (wait) 2 (warmup) 3 4 (recorded), cycle
 * 1 = 5 6 7 8, then nothing. The trace of cycle 0 is written by the step()
 * that ends step 4 (step_num becomes 5), cycle 1's by the one that ends 8.
 * The defaults ask for CUDA too: without a GPU that is ignored. */
static void test_schedule(void) {
    const char *dir = path_in("main");
    ct_profiler_opts o = ct_profiler_defaults();
    o.schedule = (ct_profiler_schedule){.skip_first = 1, .wait = 1, .warmup = 1, .active = 2, .repeat = 2};
    mlp m = mlp_new();
    ct_profiler *p = ct_profiler_new(&o, dir, "rank0");
    CHECK(p != NULL);
    if (!p) return;
    CHECK(!strcmp(ct_profiler_last_trace(p), ""));
    CHECK(ct_profiler_step_num(p) == 0);
    char seen[12][512];
    for (int i = 0; i < 12; i++) {
        train_step(m);
        CHECK_OK(ct_profiler_step(p));
        snprintf(seen[i], sizeof seen[i], "%s", ct_profiler_last_trace(p));
    }
    CHECK(ct_profiler_step_num(p) == 12);
    const char *t0 = path_in("main/rank0.0.pt.trace.json");
    const char *t1 = path_in("main/rank0.1.pt.trace.json");
    for (int i = 0; i < 12; i++) {
        /* after step() number i the step in progress is i + 1 */
        const char *want = i + 1 < 5 ? "" : i + 1 < 9 ? t0 : t1;
        CHECK(!strcmp(seen[i], want));
        if (strcmp(seen[i], want)) fprintf(stderr, "after step %d: last trace '%s', want '%s'\n", i, seen[i], want);
    }
    CHECK_OK(ct_profiler_stop(p));
    CHECK_OK(ct_profiler_stop(p)); /* idempotent */
    CHECK(!strcmp(ct_profiler_last_trace(p), t1));
    CHECK(ct_profiler_step(p) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "stopped");
    CHECK(count_files(dir) == 2);
    check_trace(t0, 2, (const int[]){3, 4}, 1);
    check_trace(t1, 2, (const int[]){7, 8}, 1);
    if (!ct_cuda_is_available()) {
        /* CUDA asked for and ignored: CPU events only. */
        trace t;
        CHECK(load_trace(t0, &t));
        CHECK(count_cat(&t, "cpu_op") > 0);
        CHECK(count_cat(&t, "kernel") == 0 && count_cat(&t, "cuda_runtime") == 0);
        json_decref(t.root);
    }
    ct_profiler_free(p);
    mlp_free(m);
}

/* schedule(wait=0, warmup=1, active=3): step 0 warms up, steps 1..3 would
 * be recorded. Stopped while step 2 is in progress (after two step()s):
 * the window is written with steps 1 and 2, as profile.__exit__ does. */
static void test_stop_mid_window(void) {
    ct_profiler_opts o = ct_profiler_defaults();
    o.schedule = (ct_profiler_schedule){.wait = 0, .warmup = 1, .active = 3, .repeat = 1};
    mlp m = mlp_new();
    ct_profiler *p = ct_profiler_new(&o, path_in("mid"), "w");
    CHECK(p != NULL);
    if (!p) return;
    for (int i = 0; i < 2; i++) {
        train_step(m);
        CHECK_OK(ct_profiler_step(p));
    }
    CHECK(!strcmp(ct_profiler_last_trace(p), ""));
    train_step(m); /* step 2's work, then the profiler stops */
    CHECK_OK(ct_profiler_stop(p));
    CHECK(!strcmp(ct_profiler_last_trace(p), path_in("mid/w.0.pt.trace.json")));
    check_trace(path_in("mid/w.0.pt.trace.json"), 2, (const int[]){1, 2}, 1);
    CHECK(count_files(path_in("mid")) == 1);
    ct_profiler_free(p);
    mlp_free(m);
}

/* repeat=0 keeps cycling: schedule(wait=1, warmup=1, active=1) over 10
 * steps records steps 2, 5 and 8 (cycles 0, 1, 2); step 10, in progress at
 * stop, is a warm-up: discarded, no fourth file. */
static void test_repeat_forever(void) {
    ct_profiler_opts o = ct_profiler_defaults();
    o.schedule = (ct_profiler_schedule){.wait = 1, .warmup = 1, .active = 1, .repeat = 0};
    mlp m = mlp_new();
    ct_profiler *p = ct_profiler_new(&o, path_in("forever"), "r");
    CHECK(p != NULL);
    if (!p) return;
    for (int i = 0; i < 10; i++) {
        train_step(m);
        CHECK_OK(ct_profiler_step(p));
    }
    CHECK_OK(ct_profiler_stop(p));
    CHECK(count_files(path_in("forever")) == 3);
    check_trace(path_in("forever/r.0.pt.trace.json"), 1, (const int[]){2}, 1);
    check_trace(path_in("forever/r.1.pt.trace.json"), 1, (const int[]){5}, 1);
    check_trace(path_in("forever/r.2.pt.trace.json"), 1, (const int[]){8}, 1);
    ct_profiler_free(p); /* after stop: only frees */
    mlp_free(m);
}

/* record_shapes adds each op's input shapes and profile_memory the
 * allocations, each flagged in the trace's metadata as torch does; freeing a
 * profiler that is still recording writes its window (free stops first).
 * Also the default name "<hostname>_<pid>". */
static void test_shapes_and_free(void) {
    ct_profiler_opts o = ct_profiler_defaults();
    o.schedule = (ct_profiler_schedule){.wait = 0, .warmup = 0, .active = 2, .repeat = 1};
    o.record_shapes = true;
    o.profile_memory = true;
    o.cuda = false;
    mlp m = mlp_new();
    ct_profiler *p = ct_profiler_new(&o, path_in("shapes"), NULL);
    CHECK(p != NULL);
    if (!p) return;
    train_step(m);
    ct_set_error(CT_ETRIAL, "pending");
    ct_profiler_free(p); /* step 0 recorded, step 1 not begun */
    CHECK_ERR(CT_ETRIAL, "pending"); /* free keeps the caller's error */
    char want[300], host[200] = "";
    gethostname(host, sizeof host - 1);
    snprintf(want, sizeof want, "shapes/%s_%ld.0.pt.trace.json", host, (long)getpid());
    trace t;
    CHECK(load_trace(path_in(want), &t));
    if (t.root) {
        CHECK(t.nsteps == 1 && t.steps[0] == 0);
        json_t *ev = json_object_get(t.root, "traceEvents");
        size_t i;
        json_t *e;
        int with_dims = 0;
        json_array_foreach(ev, i, e) {
            const char *en = json_string_value(json_object_get(e, "name"));
            json_t *dims = json_object_get(json_object_get(e, "args"), "Input Dims");
            /* addmm(self, mat1, mat2, beta, alpha): [[8], [5, 4], [4, 8], [], []] first */
            if (en && !strcmp(en, "aten::addmm") && json_is_array(dims) && json_array_size(dims) == 5 &&
                json_integer_value(json_array_get(json_array_get(dims, 1), 0)) == 5)
                with_dims++;
        }
        CHECK(with_dims == 2);
        CHECK(count_events(&t, "[memory]", "cpu_instant_event") > 0);
        CHECK(json_integer_value(json_object_get(t.root, "record_shapes")) == 1);
        CHECK(json_integer_value(json_object_get(t.root, "profile_memory")) == 1);
        CHECK(json_object_get(t.root, "with_stack") == NULL);
        json_decref(t.root);
    }
    mlp_free(m);
}

static void test_bad_options(void) {
    ct_profiler_opts o = ct_profiler_defaults();
    const char *dir = path_in("bad");
#define BAD(field, value, needle)                                 \
    do {                                                          \
        o = ct_profiler_defaults();                               \
        o.field = value;                                          \
        CHECK(ct_profiler_new(&o, dir, "x") == NULL);             \
        CHECK_ERR(CT_EINVAL, needle);                             \
    } while (0)
    BAD(schedule.skip_first, -1, "schedule.skip_first is -1 (need >= 0)");
    BAD(schedule.wait, -2, "schedule.wait is -2");
    BAD(schedule.warmup, -1, "schedule.warmup");
    BAD(schedule.repeat, -1, "schedule.repeat");
    BAD(schedule.active, 0, "schedule.active is 0 (need > 0");
    BAD(schedule.active, -3, "schedule.active is -3");
#undef BAD
    o = ct_profiler_defaults();
    o.cpu = o.cuda = false;
    CHECK(ct_profiler_new(&o, dir, "x") == NULL);
    CHECK_ERR(CT_EINVAL, "no activity");
    CHECK(ct_profiler_new(NULL, NULL, "x") == NULL);
    CHECK_ERR(CT_EINVAL, "dir is NULL");
    CHECK(ct_profiler_new(NULL, "", "x") == NULL);
    CHECK_ERR(CT_EINVAL, "dir is empty");
    CHECK(ct_profiler_new(NULL, dir, "") == NULL);
    CHECK_ERR(CT_EINVAL, "name is empty");
    CHECK(ct_profiler_new(NULL, dir, "a/b") == NULL);
    CHECK_ERR(CT_EINVAL, "contains '/'");
    CHECK(!exists(dir)); /* nothing made for a refused profiler */

    /* CUDA alone: fine on a GPU, refused without one. */
    o = ct_profiler_defaults();
    o.cpu = false;
    ct_profiler *p = ct_profiler_new(&o, path_in("cudaonly"), "x");
    if (ct_cuda_is_available()) {
        CHECK(p != NULL);
    } else {
        CHECK(p == NULL);
        CHECK_ERR(CT_EDEVICE, "no GPU");
    }
    ct_profiler_free(p);

    /* A directory that cannot be made: its parent is a file. */
    FILE *f = fopen(path_in("afile"), "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    CHECK(ct_profiler_new(NULL, path_in("afile/traces"), "x") == NULL);
    CHECK_ERR(CT_EIO, path_in("afile/traces"));
    CHECK(ct_profiler_new(NULL, path_in("afile"), "x") == NULL);
    CHECK_ERR(CT_EIO, "afile'");

    /* NULL handles */
    CHECK(ct_record_function_begin(NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "name is NULL");
    ct_record_function_end(NULL);
    ct_profiler_free(NULL);
    CHECK(ct_profiler_step(NULL) == CT_EINVAL);
    CHECK(ct_profiler_stop(NULL) == CT_EINVAL);
    ct_clear_error();
    CHECK(ct_profiler_last_trace(NULL) == NULL);
    CHECK(ct_profiler_step_num(NULL) == -1);
}

/* The directory disappears under a recording profiler: the write fails with
 * the path in the message, and the profiler goes on. */
static void test_write_failure(void) {
    ct_profiler_opts o = ct_profiler_defaults();
    o.schedule = (ct_profiler_schedule){.wait = 0, .warmup = 0, .active = 1, .repeat = 0};
    const char *dir = path_in("gone");
    mlp m = mlp_new();
    ct_profiler *p = ct_profiler_new(&o, dir, "g");
    CHECK(p != NULL);
    if (!p) return;
    train_step(m);
    rm_rf(dir);
    CHECK(ct_profiler_step(p) == CT_EIO);
    CHECK_ERR(CT_EIO, path_in("gone/g.0.pt.trace.json"));
    CHECK(!strcmp(ct_profiler_last_trace(p), ""));
    CHECK(mkdir(dir, 0755) == 0);
    train_step(m);
    CHECK_OK(ct_profiler_step(p)); /* the next cycle was traced */
    check_trace(path_in("gone/g.1.pt.trace.json"), 1, (const int[]){1}, 1);
    CHECK_OK(ct_profiler_stop(p)); /* writes step 2's (empty) window */
    CHECK(count_files(dir) == 2);
    ct_profiler_free(p);
    mlp_free(m);
}

/* One profiler per process until it is stopped. */
static void test_one_at_a_time(void) {
    ct_profiler *a = ct_profiler_new(NULL, path_in("one"), "a");
    CHECK(a != NULL);
    CHECK(ct_profiler_new(NULL, path_in("one"), "b") == NULL);
    CHECK_ERR(CT_ESTATE, "another ct_profiler is active in this process");
    CHECK_OK(ct_profiler_stop(a));
    ct_profiler *b = ct_profiler_new(NULL, path_in("one"), "b");
    CHECK(b != NULL);
    ct_profiler_free(b);
    ct_profiler_free(a);
    ct_profiler *c = ct_profiler_new(NULL, path_in("one"), "c");
    CHECK(c != NULL);
    ct_profiler_free(c);
}

static void *step_elsewhere(void *arg) {
    ct_profiler *p = arg;
    static int rc[2];
    rc[0] = ct_profiler_step(p) == CT_ESTATE && strstr(ct_last_error(), "another thread");
    rc[1] = ct_profiler_stop(p) == CT_ESTATE;
    return rc;
}

/* Step and stop belong to the thread that created the profiler. */
static void test_other_thread(void) {
    ct_profiler_opts o = ct_profiler_defaults();
    o.schedule = (ct_profiler_schedule){.wait = 0, .warmup = 0, .active = 2, .repeat = 1};
    ct_profiler *p = ct_profiler_new(&o, path_in("thread"), "t");
    CHECK(p != NULL);
    if (!p) return;
    pthread_t th;
    void *res = NULL;
    CHECK(pthread_create(&th, NULL, step_elsewhere, p) == 0);
    CHECK(pthread_join(th, &res) == 0);
    CHECK(res && ((int *)res)[0] && ((int *)res)[1]);
    CHECK(ct_profiler_step_num(p) == 0); /* nothing changed */
    CHECK_OK(ct_profiler_stop(p));
    check_trace(path_in("thread/t.0.pt.trace.json"), 1, (const int[]){0}, 0);
    ct_profiler_free(p);
}

/* On a GPU (skipped elsewhere): CUDA activity holds the kernels and the
 * runtime calls that launched them; backward, which libtorch runs on its
 * per-device autograd thread, is recorded too; CUDA alone (cpu = false)
 * records kernels but no ops. */
static void test_cuda(void) {
    if (!ct_cuda_is_available()) {
        printf("test_cuda: no GPU, skipped\n");
        return;
    }
    for (int cpu = 1; cpu >= 0; cpu--) {
        ct_profiler_opts o = ct_profiler_defaults();
        o.schedule = (ct_profiler_schedule){.wait = 0, .warmup = 1, .active = 2, .repeat = 1};
        o.cpu = cpu;
        mlp m = mlp_on(ct_cuda(0));
        for (int i = 0; i < 3; i++) train_step(m); /* CUDA's own start-up stays out */
        ct_profiler *p = ct_profiler_new(&o, path_in("cuda"), cpu ? "cpu_cuda" : "cuda");
        CHECK(p != NULL);
        if (!p) return;
        for (int i = 0; i < 4; i++) {
            train_step(m);
            CHECK_OK(ct_profiler_step(p));
        }
        CHECK_OK(ct_profiler_stop(p));
        trace t;
        CHECK(load_trace(ct_profiler_last_trace(p), &t));
        if (t.root) {
            int kernels = count_cat(&t, "kernel"), runtime = count_cat(&t, "cuda_runtime");
            int ops = count_cat(&t, "cpu_op");
            int bwd = count_events(&t, "autograd::engine::evaluate_function: AddmmBackward0", "cpu_op");
            printf("test_cuda(cpu=%d): %s: %d kernels, %d runtime calls, %d ops (%d AddmmBackward0)\n", cpu,
                   ct_profiler_last_trace(p), kernels, runtime, ops, bwd);
            CHECK(kernels > 0);
            if (cpu) {
                CHECK(t.nsteps == 2 && t.steps[0] == 1 && t.steps[1] == 2);
                CHECK(runtime > 0);
                CHECK(count_events(&t, "aten::addmm", "cpu_op") == 4);
                CHECK(bwd == 4);
            } else {
                CHECK(ops == 0 && t.nsteps == 0);
            }
            json_decref(t.root);
        }
        ct_profiler_free(p);
        mlp_free(m);
    }
}

int main(void) {
    if (!mkdtemp(root)) return 2;
    ct_manual_seed(0);
    test_defaults();
    test_schedule();
    test_stop_mid_window();
    test_repeat_forever();
    test_shapes_and_free();
    test_bad_options();
    test_write_failure();
    test_one_at_a_time();
    test_other_thread();
    test_cuda();
    /* CT_PROFILER_KEEP=1 keeps the traces to look at. */
    if (!ct_test_failures && !getenv("CT_PROFILER_KEEP")) rm_rf(root);
    else fprintf(stderr, "traces kept in %s\n", root);
    return ct_test_result("profiler_api");
}
