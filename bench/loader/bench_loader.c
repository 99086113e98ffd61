/* bench/loader/bench_loader.c — measures ctrial's loader; run.py drives it
 * and puts the figures next to torch.utils.data.DataLoader's.
 *
 *   bench_loader throughput WORKERS EPOCHS [THREADS]
 *       MNIST-shaped data (60000 float32 [1, 28, 28] + int64 labels) in a
 *       ct_dataset_tensors, batch 64, shuffle on; one warm-up epoch, then
 *       EPOCHS timed epochs. THREADS > 0 sets libtorch's intra-op threads
 *       (the calling thread's: with 0 workers the loading runs there).
 *       Prints {"records_per_s": [...], ...}.
 *
 *   bench_loader overlap WORKERS BATCHES SAMPLE_US COMPUTE_MS
 *       A training loop whose per-batch compute (a busy loop of COMPUTE_MS)
 *       is longer than loading a batch (64 gets that each cost SAMPLE_US of
 *       busy work, then collate). Prints the time ct_loader_next waited in
 *       all and after the first batch: with workers it should be ~0.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ctrial/ctrial.h>

enum { N = 60000, BATCH = 64 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Burns CPU for `seconds`, like compute would (a sleep would free the core). */
static void busy(double seconds) {
    double end = now_s() + seconds;
    while (now_s() < end) {}
}

/* 60000 MNIST-shaped samples: random images, labels 0..9. */
static ct_dataset *mnist_like(void) {
    ct_manual_seed(0);
    ct_tensor *t[2] = {ct_rand(CT_SHAPE(N, 1, 28, 28), NULL), ct_randint(0, 10, CT_SHAPE(N), NULL)};
    ct_dataset *d = ct_dataset_tensors(2, t);
    ct_tensor_free(t[0]);
    ct_tensor_free(t[1]);
    return d;
}

static int throughput(int workers, int epochs, int threads) {
    if (threads > 0) ct_set_num_threads(threads);
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = BATCH;
    o.shuffle = true;
    o.seed = 1;
    o.num_workers = workers;
    ct_loader *l = ct_loader_new(mnist_like(), &o);
    if (!l) {
        fprintf(stderr, "ct_loader_new: %s\n", ct_last_error());
        return 1;
    }
    printf("{\"workers\": %d, \"threads\": %d, \"records_per_s\": [", workers, ct_get_num_threads());
    for (int e = -1; e < epochs; e++) { /* epoch -1 warms up */
        double t0 = now_s();
        int64_t records = 0;
        ct_value *b;
        int r;
        while ((r = ct_loader_next(l, &b)) == 1) {
            records += ct_batch_length(b);
            ct_value_free(b);
        }
        double dt = now_s() - t0;
        if (r < 0 || records != N || ct_loader_reset(l) != 0) {
            fprintf(stderr, "epoch %d: %lld records: %s\n", e, (long long)records, ct_last_error());
            return 1;
        }
        if (e >= 0) printf(e ? ", %.0f" : "%.0f", (double)records / dt);
    }
    printf("]}\n");
    ct_loader_free(l);
    return 0;
}

/* A dataset whose get costs SAMPLE_US of CPU (decoding, augmenting...). */
typedef struct {
    ct_dataset *inner;
    double sample_s;
} slow_ds;

static int64_t slow_len(void *self) { return ct_dataset_len(((slow_ds *)self)->inner); }

static ct_value *slow_get(void *self, int64_t i) {
    slow_ds *d = self;
    busy(d->sample_s);
    return ct_dataset_get(d->inner, i);
}

static void slow_free(void *self) {
    ct_dataset_free(((slow_ds *)self)->inner);
    free(self);
}

static int overlap(int workers, int batches, double sample_us, double compute_ms) {
    slow_ds *s = malloc(sizeof *s);
    s->inner = mnist_like();
    s->sample_s = sample_us * 1e-6;
    ct_dataset_vtable vt = {.len = slow_len, .get = slow_get, .free = slow_free};
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = BATCH;
    o.shuffle = true;
    o.repeat = true;
    o.num_workers = workers;
    ct_loader *l = ct_loader_new(ct_dataset_new(&vt, s), &o);
    if (!l) {
        fprintf(stderr, "ct_loader_new: %s\n", ct_last_error());
        return 1;
    }
    double t0 = now_s(), first = 0;
    for (int k = 0; k < batches; k++) {
        ct_value *b;
        if (ct_loader_next(l, &b) != 1) {
            fprintf(stderr, "batch %d: %s\n", k, ct_last_error());
            return 1;
        }
        if (k == 0) first = ct_loader_wait_seconds(l);
        busy(compute_ms * 1e-3); /* the training step */
        ct_value_free(b);
    }
    double total = now_s() - t0, wait = ct_loader_wait_seconds(l);
    printf("{\"workers\": %d, \"batches\": %d, \"load_ms_per_batch\": %.2f, \"compute_ms\": %.2f, "
           "\"total_s\": %.3f, \"wait_s\": %.4f, \"wait_first_s\": %.4f, \"wait_after_first_s\": %.4f}\n",
           workers, batches, BATCH * sample_us * 1e-3, compute_ms, total, wait, first, wait - first);
    ct_loader_free(l);
    return 0;
}

int main(int argc, char **argv) {
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "throughput") == 0)
        return throughput(atoi(argv[2]), atoi(argv[3]), argc == 5 ? atoi(argv[4]) : 0);
    if (argc == 6 && strcmp(argv[1], "overlap") == 0)
        return overlap(atoi(argv[2]), atoi(argv[3]), atof(argv[4]), atof(argv[5]));
    fprintf(stderr, "usage: %s throughput WORKERS EPOCHS [THREADS]\n"
                    "       %s overlap WORKERS BATCHES SAMPLE_US COMPUTE_MS\n", argv[0], argv[0]);
    return 2;
}
