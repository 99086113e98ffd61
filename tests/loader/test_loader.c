/* The threaded loader: the same batches for any number of workers, one-pass
 * (validation) and repeat (training) modes, positions saved and restored,
 * user samplers and collates, and failures that never hang: a failing get,
 * a sample of the wrong shape, stopping mid-pass with full queues. Every
 * loader is freed with no thread and no tensor handle left behind. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "ct_test.h"

/* ---- a dataset whose sample i is (float32 [3] filled with i, int i) ----- */

typedef struct {
    int64_t n;
    int64_t fail_at;  /* get fails here (-1: never) */
    int64_t odd_at;   /* the sample here has shape [4] (-1: never) */
    long delay_us;    /* each get sleeps this long */
    atomic_long gets;
} index_ds;

static int64_t ids_len(void *self) { return ((index_ds *)self)->n; }

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static ct_value *ids_get(void *self, int64_t i) {
    index_ds *d = self;
    atomic_fetch_add(&d->gets, 1);
    if (d->delay_us) sleep_us(d->delay_us);
    if (i == d->fail_at) {
        ct_set_error(CT_EIO, "cannot read record %lld", (long long)i);
        return NULL;
    }
    float x[4] = {(float)i, (float)i, (float)i, (float)i};
    ct_value *s = ct_value_tuple();
    ct_value_list_append(s, ct_value_tensor(ct_from_data(x, 1, (int64_t[]){i == d->odd_at ? 4 : 3}, CT_F32)));
    ct_value_list_append(s, ct_value_int(i));
    return s;
}

static void ids_free(void *self) { free(self); }

static ct_dataset *make_ds(int64_t n, int64_t fail_at, int64_t odd_at, long delay_us) {
    index_ds *d = calloc(1, sizeof *d);
    d->n = n;
    d->fail_at = fail_at;
    d->odd_at = odd_at;
    d->delay_us = delay_us;
    ct_dataset_vtable vt = {.len = ids_len, .get = ids_get, .free = ids_free};
    return ct_dataset_new(&vt, d);
}

/* TensorDataset over arange(n): sample i is the 0-dim int64 i; batches come
 * from its get_batch fast path. */
static ct_dataset *arange_ds(int64_t n) {
    ct_tensor *t = ct_arange(0, (double)n, 1, &(ct_topts){.dtype = CT_I64});
    ct_dataset *d = ct_dataset_tensors(1, &t);
    ct_tensor_free(t);
    return d;
}

/* The dataset indices of a batch: its int64 leaf (the labels of index_ds,
 * the batch itself for arange_ds). Returns the count. */
static int64_t batch_indices(const ct_value *b, int64_t *out, int64_t cap) {
    ct_tensor *t = ct_value_kind_of(b) == CT_VALUE_TENSOR ? ct_batch_tensor(b) : ct_batch_at(b, 1);
    int64_t n = ct_numel(t);
    if (n > cap || ct_read(t, out, (size_t)n * sizeof *out) != 0) return -1;
    return n;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int count_threads(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* Reads `count` batches, calling reset at each end of a pass (one-pass
 * mode): the loader's stream. Returns how many it got. */
static int read_stream(ct_loader *l, ct_value **out, int count) {
    int got = 0, ends = 0;
    while (got < count) {
        ct_value *b = NULL;
        int r = ct_loader_next(l, &b);
        if (r < 0) break;
        if (r == 0) {
            if (++ends > count + 2 || ct_loader_reset(l) != 0) break;
            continue;
        }
        out[got++] = b;
    }
    return got;
}

static bool same_stream(ct_value **a, ct_value **b, int n) {
    for (int i = 0; i < n; i++)
        if (!ct_value_equal(a[i], b[i])) return false;
    return true;
}

static void free_stream(ct_value **s, int n) {
    for (int i = 0; i < n; i++) ct_value_free(s[i]);
}

/* ---- tests ------------------------------------------------------------------- */

/* The batches do not depend on the number of workers, in either mode, with
 * shuffle on or off, for get + collate and for the get_batch fast path. */
static void test_workers_identical(void) {
    enum { M = 40 };
    static const int workers[] = {0, 1, 2, 4};
    for (int cfg = 0; cfg < 8; cfg++) {
        bool shuffle = cfg & 1, repeat = cfg & 2, fast = cfg & 4;
        ct_value *ref[M], *got[M];
        int nref = 0;
        for (size_t w = 0; w < sizeof workers / sizeof *workers; w++) {
            ct_loader_opts o = ct_loader_defaults();
            o.batch_size = 8;
            o.shuffle = shuffle;
            o.seed = 7;
            o.repeat = repeat;
            o.num_workers = workers[w];
            ct_loader *l = ct_loader_new(fast ? arange_ds(103) : make_ds(103, -1, -1, 0), &o);
            CHECK(l != NULL);
            CHECK(ct_loader_len(l) == 13);
            ct_value **dst = w == 0 ? ref : got;
            int n = read_stream(l, dst, M);
            CHECK(n == M);
            if (w == 0) nref = n;
            else {
                bool same = n == nref && same_stream(ref, got, n);
                if (!same) fprintf(stderr, "cfg %d: %d workers differ\n", cfg, workers[w]);
                CHECK(same);
                free_stream(got, n);
            }
            ct_loader_free(l);
        }
        /* Every index once per pass: 13 batches of 8 (the last of 7); a
         * repeating stream's batches run on across passes instead. */
        int64_t idx[8], seen[103] = {0};
        int64_t total = 0;
        for (int i = 0; i < 13 && !repeat; i++) {
            int64_t n = batch_indices(ref[i], idx, 8);
            CHECK(n == (i == 12 ? 7 : 8));
            for (int64_t k = 0; k < n; k++) seen[idx[k]]++, total++;
        }
        for (int i = 0; i < 103 && !repeat; i++) CHECK(seen[i] == 1);
        free_stream(ref, nref);
    }
}

/* A loader restored at position k serves what an uninterrupted one serves
 * from k on: through skip_batches at creation and set_position while
 * running, across epoch boundaries, with shuffle, in both modes. */
static void test_positions(void) {
    enum { M = 60 };
    for (int cfg = 0; cfg < 4; cfg++) {
        bool repeat = cfg & 1, fast = cfg & 2;
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = 5;
        o.shuffle = true;
        o.seed = 1234;
        o.repeat = repeat;
        o.drop_last = true;
        o.num_workers = 2;
        ct_dataset *ds = fast ? arange_ds(37) : make_ds(37, -1, -1, 0);
        ct_loader *l = ct_loader_new(ct_dataset_ref(ds), &o);
        CHECK(ct_loader_len(l) == 7);
        ct_value *ref[M];
        CHECK(read_stream(l, ref, M) == M);
        ct_loader_free(l);

        static const int64_t ks[] = {0, 1, 6, 7, 8, 14, 20, 33};
        for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
            int64_t k = ks[i];
            int n = M - (int)k;
            ct_value *got[M];
            /* restored at creation */
            o.skip_batches = k;
            l = ct_loader_new(ct_dataset_ref(ds), &o);
            CHECK(ct_loader_position(l) == k);
            CHECK(read_stream(l, got, n) == n && same_stream(ref + k, got, n));
            free_stream(got, n);
            ct_loader_free(l);
            /* moved while running, backwards and forwards */
            o.skip_batches = 3;
            l = ct_loader_new(ct_dataset_ref(ds), &o);
            CHECK(read_stream(l, got, 9) == 9);
            free_stream(got, 9);
            CHECK_OK(ct_loader_set_position(l, k));
            CHECK(ct_loader_position(l) == k);
            bool same = read_stream(l, got, n) == n && same_stream(ref + k, got, n);
            if (!same) fprintf(stderr, "repeat %d fast %d: set_position(%lld) differs\n", repeat, fast, (long long)k);
            CHECK(same);
            free_stream(got, n);
            ct_loader_free(l);
        }
        o.skip_batches = 0;
        free_stream(ref, M);
        ct_dataset_free(ds);
    }
}

/* One-pass mode: len batches then 0 (and 0 again), reset starts the next
 * pass, a reset mid-pass skips the rest of it, a reset before the pass has
 * begun changes nothing. */
static void test_one_pass(void) {
    for (int workers = 0; workers <= 3; workers += 3) {
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = 8;
        o.num_workers = workers;
        ct_loader *l = ct_loader_new(make_ds(103, -1, -1, 0), &o);
        CHECK(ct_loader_len(l) == 13 && ct_loader_num_samples(l) == 103);
        CHECK_OK(ct_loader_reset(l)); /* nothing served yet: no-op */
        ct_value *b = NULL;
        int64_t idx[8];
        for (int pass = 0; pass < 2; pass++) {
            int n = 0;
            int64_t first = -1;
            while (ct_loader_next(l, &b) == 1) {
                if (n++ == 0) {
                    batch_indices(b, idx, 8);
                    first = idx[0];
                }
                ct_value_free(b);
            }
            CHECK(n == 13 && first == 0);
            CHECK(ct_loader_next(l, &b) == 0 && b == NULL); /* still the end */
            CHECK(ct_loader_position(l) == 13 * (pass + 1));
            CHECK_OK(ct_loader_reset(l));
        }
        /* mid-pass: the next batch is the first of the next pass */
        CHECK(ct_loader_next(l, &b) == 1);
        ct_value_free(b);
        CHECK(ct_loader_next(l, &b) == 1);
        ct_value_free(b);
        CHECK_OK(ct_loader_reset(l));
        CHECK(ct_loader_position(l) == 13 * 3);
        CHECK(ct_loader_next(l, &b) == 1);
        CHECK(batch_indices(b, idx, 8) == 8 && idx[0] == 0);
        ct_value_free(b);
        ct_loader_free(l);

        /* sharding and drop_last set the length: rank 2 of 3 gets 34 samples */
        o.world_size = 3;
        o.rank = 2;
        l = ct_loader_new(make_ds(103, -1, -1, 0), &o);
        CHECK(ct_loader_len(l) == 5);
        int n = 0;
        while (ct_loader_next(l, &b) == 1) {
            int64_t k = batch_indices(b, idx, 8);
            CHECK(k >= 1 && idx[0] % 3 == 2);
            n++;
            ct_value_free(b);
        }
        CHECK(n == 5);
        ct_loader_free(l);
        o.drop_last = true;
        l = ct_loader_new(make_ds(103, -1, -1, 0), &o);
        CHECK(ct_loader_len(l) == 4);
        ct_loader_free(l);
    }
}

/* A get failing at index 37 reaches ct_loader_next at its batch's turn,
 * after the batches before it, naming the index; the loader is stopped. */
static void test_get_error(void) {
    for (int workers = 0; workers <= 4; workers += 2) {
        for (int user = 0; user < 2; user++) {
            ct_loader_opts o = ct_loader_defaults();
            o.batch_size = 8;
            o.num_workers = workers;
            ct_loader *l = ct_loader_new(make_ds(100, 37, -1, 0), &o);
            if (user) { /* the same through a user sampler */
                ct_loader_free(l);
                o.sampler = ct_sampler_batch(ct_sampler_sequential(100), 8, false);
                l = ct_loader_new(make_ds(100, 37, -1, 0), &o);
            }
            ct_value *b = NULL;
            int good = 0, r;
            while ((r = ct_loader_next(l, &b)) == 1) {
                good++;
                ct_value_free(b);
            }
            CHECK(good == 4 && r == CT_EIO && b == NULL);
            CHECK(strstr(ct_last_error(), "dataset index 37") != NULL);
            CHECK_ERR(CT_EIO, "cannot read record 37");
            CHECK(ct_loader_next(l, &b) == CT_ESTATE);
            CHECK_ERR(CT_ESTATE, "stopped after an error");
            CHECK(ct_loader_reset(l) == CT_ESTATE);
            ct_clear_error();
            ct_loader_free(l);
        }
    }
}

/* A sample of the wrong shape: the collate error names its dataset index,
 * through the fast-path entry (ct_dataset_get_batch) and a user collate. */
static ct_value *wrapping_collate(ct_value *const *samples, int64_t n, void *ctx) {
    atomic_fetch_add((atomic_long *)ctx, 1);
    return ct_collate(samples, n);
}

static void test_shape_error(void) {
    for (int user = 0; user < 2; user++) {
        atomic_long calls = 0;
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = 8;
        o.num_workers = 2;
        if (user) {
            o.collate = wrapping_collate;
            o.collate_ctx = &calls;
        }
        ct_loader *l = ct_loader_new(make_ds(64, -1, 21, 0), &o);
        ct_value *b = NULL;
        int good = 0, r;
        while ((r = ct_loader_next(l, &b)) == 1) {
            good++;
            ct_value_free(b);
        }
        CHECK(good == 2 && r == CT_ESHAPE);
        if (user) {
            CHECK(atomic_load(&calls) >= 3);
            CHECK_ERR(CT_ESHAPE, "collate function failed on dataset indices 16, 17, 18, 19, ... (8 in all)");
        } else {
            CHECK_ERR(CT_ESHAPE, "dataset index 21: ct_collate: sample 5: [0]: shape [4] differs from sample 0's [3]");
        }
        ct_loader_free(l);
    }
}

/* Stopping never hangs: freeing right after creation, mid-pass with every
 * slot full and 4 workers idle, and with workers in the middle of slow gets. */
static void test_stop_promptly(void) {
    alarm(20); /* a hang fails the test instead of the whole suite timing out */
    for (int i = 0; i < 20; i++) { /* free right after creation */
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = 4;
        o.num_workers = 4;
        o.shuffle = i % 2;
        ct_loader_free(ct_loader_new(make_ds(1000, -1, -1, i % 3 ? 0 : 200), &o));
    }
    for (int slow = 0; slow < 2; slow++) {
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = 4;
        o.num_workers = 4;
        o.prefetch_batches = 16;
        o.repeat = true;
        o.shuffle = true;
        ct_loader *l = ct_loader_new(make_ds(5000, -1, -1, slow ? 20000 : 0), &o);
        ct_value *b = NULL;
        for (int k = 0; k < 3; k++) {
            CHECK(ct_loader_next(l, &b) == 1);
            ct_value_free(b);
        }
        sleep_us(slow ? 1000 : 100000); /* fast: the queue fills up; slow: gets under way */
        double t0 = now_s();
        ct_loader_free(l);
        double took = now_s() - t0;
        printf("free with %s workers: %.1f ms\n", slow ? "busy" : "idle (queue full)", took * 1e3);
        CHECK(took < (slow ? 1.0 : 0.5)); /* at most one 80 ms batch load per worker, slow */
    }
    alarm(0);
}

/* Time waiting in ct_loader_next is measured: large when the loader is the
 * bottleneck, about nothing after the first batch when compute is longer
 * than a load (the workers run ahead). */
static void test_wait_seconds(void) {
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = 4;
    o.num_workers = 2;
    o.repeat = true;
    /* 4 gets of 1 ms per batch: about 2 ms per batch with 2 workers */
    ct_loader *l = ct_loader_new(make_ds(1000, -1, -1, 1000), &o);
    ct_value *b = NULL;
    CHECK(ct_loader_wait_seconds(l) == 0);
    for (int k = 0; k < 10; k++) {
        CHECK(ct_loader_next(l, &b) == 1);
        ct_value_free(b);
    }
    double starved = ct_loader_wait_seconds(l);
    CHECK(starved > 0.005);
    double after_first = 0;
    for (int k = 0; k < 10; k++) {
        CHECK(ct_loader_next(l, &b) == 1);
        ct_value_free(b);
        if (k == 0) after_first = ct_loader_wait_seconds(l);
        sleep_us(20000); /* "compute" 20 ms, ten times a load */
    }
    double fed = ct_loader_wait_seconds(l) - after_first;
    printf("wait: %.1f ms over 10 back-to-back batches, %.2f ms over 9 batches behind 20 ms of compute\n",
           starved * 1e3, fed * 1e3);
    CHECK(fed < 0.02);
    ct_loader_free(l);
}

/* The opt-out: the user's own chain, each item one batch. */
static void test_user_sampler(void) {
    for (int workers = 0; workers <= 2; workers += 2) {
        ct_loader_opts o = ct_loader_defaults();
        o.num_workers = workers;
        o.batch_size = 999; /* ignored */
        o.sampler = ct_sampler_batch(ct_sampler_sequential(20), 6, false);
        ct_loader *l = ct_loader_new(arange_ds(20), &o);
        CHECK(ct_loader_len(l) == 4); /* ct_sampler_len: ceil(20 / 6) */
        ct_value *b = NULL;
        int64_t idx[6];
        int sizes[8], n = 0;
        while (ct_loader_next(l, &b) == 1 && n < 8) {
            sizes[n++] = (int)batch_indices(b, idx, 6);
            ct_value_free(b);
        }
        CHECK(n == 4 && sizes[0] == 6 && sizes[3] == 2);
        CHECK_OK(ct_loader_reset(l));
        CHECK(ct_loader_next(l, &b) == 1 && batch_indices(b, idx, 6) == 6 && idx[0] == 0);
        ct_value_free(b);
        /* forward only: to position 6 = the third batch of the second pass */
        CHECK(ct_loader_set_position(l, 2) == CT_ENOTSUP);
        CHECK_ERR(CT_ENOTSUP, "cannot be rewound");
        CHECK_OK(ct_loader_set_position(l, 6));
        CHECK(ct_loader_next(l, &b) == 1 && batch_indices(b, idx, 6) == 6 && idx[0] == 12);
        ct_value_free(b);
        CHECK(ct_loader_position(l) == 7);
        /* across a pass end: 7 -> 9 is the second batch of the third pass */
        CHECK_OK(ct_loader_set_position(l, 9));
        CHECK(ct_loader_next(l, &b) == 1 && batch_indices(b, idx, 6) == 6 && idx[0] == 6);
        ct_value_free(b);
        /* a reset mid-pass with batches in flight */
        CHECK_OK(ct_loader_reset(l));
        CHECK(ct_loader_next(l, &b) == 1 && batch_indices(b, idx, 6) == 6 && idx[0] == 0);
        ct_value_free(b);
        ct_loader_free(l);
    }
    /* a repeating user chain never ends a pass: a reset gives up, no hang */
    ct_loader_opts o = ct_loader_defaults();
    o.sampler = ct_sampler_batch(ct_sampler_repeat(ct_sampler_sequential(5)), 2, false);
    ct_loader *l = ct_loader_new(arange_ds(5), &o);
    ct_value *b = NULL;
    CHECK(ct_loader_next(l, &b) == 1);
    ct_value_free(b);
    CHECK(ct_loader_reset(l) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "did not end its pass");
    ct_loader_free(l);
}

/* A user chain as the training loop runs it: ct_loader_len is the chain's
 * ct_sampler_len; at the end of each pass (next answers 0) a reset starts
 * the next and the position keeps counting; set_position lands on the batch
 * an uninterrupted loader serves there, across pass ends, from a fresh
 * loader and from a running one with batches in flight. */
static void test_user_chain_passes(void) {
    /* exact: sequential(10) -> batch(4): [0..3] [4..7] [8, 9] | ... */
    static const int64_t first[] = {0, 4, 8};
    static const int64_t sizes[] = {4, 4, 2};
    for (int workers = 0; workers <= 2; workers += 2) {
        ct_loader_opts o = ct_loader_defaults();
        o.num_workers = workers;
        o.sampler = ct_sampler_batch(ct_sampler_sequential(10), 4, false);
        ct_loader *l = ct_loader_new(arange_ds(10), &o);
        CHECK(ct_loader_len(l) == 3);
        ct_value *b = NULL;
        int64_t idx[4];
        for (int k = 0; k < 12; k++) { /* four passes, the loop's way */
            int r = ct_loader_next(l, &b);
            if (r == 0) {
                CHECK(k % 3 == 0 && k > 0);
                CHECK(ct_loader_position(l) == k);
                CHECK_OK(ct_loader_reset(l));
                r = ct_loader_next(l, &b);
            }
            CHECK(r == 1);
            int64_t n = batch_indices(b, idx, 4);
            CHECK(n == sizes[k % 3] && idx[0] == first[k % 3] && idx[n - 1] == first[k % 3] + n - 1);
            ct_value_free(b);
            CHECK(ct_loader_position(l) == k + 1);
        }
        ct_loader_free(l);
        /* drop_last shortens the pass and the length */
        o.sampler = ct_sampler_batch(ct_sampler_sequential(10), 4, true);
        l = ct_loader_new(arange_ds(10), &o);
        CHECK(ct_loader_len(l) == 2);
        int served = 0;
        while (ct_loader_next(l, &b) == 1) {
            served++;
            ct_value_free(b);
        }
        CHECK(served == 2);
        ct_loader_free(l);
    }

    /* a shuffled, sharded chain: a new permutation per pass; rank 1 of 3
     * of 23 samples gets 8 per pass, in batches of 3, 3, 2 */
    enum { M = 30 };
    for (int workers = 0; workers <= 2; workers += 2) {
        ct_loader_opts o = ct_loader_defaults();
        o.num_workers = workers;
        o.sampler = ct_sampler_batch(ct_sampler_shard(ct_sampler_shuffle(23, 99), 1, 3), 3, false);
        ct_loader *l = ct_loader_new(arange_ds(23), &o);
        CHECK(ct_loader_len(l) == 3);
        ct_value *ref[M];
        CHECK(read_stream(l, ref, M) == M);
        CHECK(ct_loader_position(l) == M);
        ct_loader_free(l);
        /* the stream is the chain's, pass after pass */
        ct_sampler *s = ct_sampler_batch(ct_sampler_shard(ct_sampler_shuffle(23, 99), 1, 3), 3, false);
        int64_t want[3], got[3];
        bool same = true;
        for (int k = 0; k < M; k++) {
            int64_t n = ct_sampler_next(s, want, 3);
            if (n == 0) n = ct_sampler_next(s, want, 3);
            same = same && batch_indices(ref[k], got, 3) == n && !memcmp(got, want, (size_t)n * sizeof *got);
            same = same && n == (k % 3 == 2 ? 2 : 3);
        }
        CHECK(same);
        ct_sampler_free(s);
        for (int64_t k = 0; k <= 12; k++) {
            ct_value *rest[M];
            int n = M - (int)k;
            /* a fresh loader moved to k */
            o.sampler = ct_sampler_batch(ct_sampler_shard(ct_sampler_shuffle(23, 99), 1, 3), 3, false);
            l = ct_loader_new(arange_ds(23), &o);
            CHECK_OK(ct_loader_set_position(l, k));
            CHECK(ct_loader_position(l) == k);
            bool ok = read_stream(l, rest, n) == n && same_stream(ref + k, rest, n);
            if (!ok) fprintf(stderr, "workers %d: user chain set_position(%lld) differs\n", workers, (long long)k);
            CHECK(ok);
            free_stream(rest, n);
            ct_loader_free(l);
            /* a running loader, batches in flight, moved forward from 1 */
            o.sampler = ct_sampler_batch(ct_sampler_shard(ct_sampler_shuffle(23, 99), 1, 3), 3, false);
            l = ct_loader_new(arange_ds(23), &o);
            if (k >= 1) {
                CHECK(read_stream(l, rest, 1) == 1);
                free_stream(rest, 1);
                CHECK_OK(ct_loader_set_position(l, k));
                CHECK(read_stream(l, rest, n) == n && same_stream(ref + k, rest, n));
                free_stream(rest, n);
            }
            ct_loader_free(l);
        }
        free_stream(ref, M);
    }
    CHECK(ct_sampler_len(NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "ct_sampler_len: sampler is NULL");
}

/* Bad options are refused at creation, naming the option; the dataset (and
 * a user sampler) are dropped all the same. */
static void test_bad_options(void) {
    ct_loader_opts o = ct_loader_defaults();
    CHECK(ct_loader_new(make_ds(0, -1, -1, 0), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "the dataset is empty (0 samples)");
    CHECK(ct_loader_new(NULL, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "dataset is NULL");
    o.batch_size = 0;
    CHECK(ct_loader_new(make_ds(10, -1, -1, 0), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "batch_size 0 must be >= 1");
    o = ct_loader_defaults();
    o.rank = 3;
    o.world_size = 2;
    CHECK(ct_loader_new(make_ds(10, -1, -1, 0), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "rank 3 is not in [0, world_size 2)");
    o = ct_loader_defaults();
    o.num_workers = -1;
    o.sampler = ct_sampler_sequential(10); /* freed with the refusal */
    CHECK(ct_loader_new(make_ds(10, -1, -1, 0), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "num_workers -1");
    o = ct_loader_defaults();
    o.repeat = true;
    o.world_size = 8;
    o.rank = 5;
    CHECK(ct_loader_new(make_ds(4, -1, -1, 0), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "rank 5 of 8 gets none of the dataset's 4 samples");
    o = ct_loader_defaults();
    o.shuffle = true;
    o.seed = 1ULL << 33;
    CHECK(ct_loader_new(make_ds(4, -1, -1, 0), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "seed");
    if (!ct_cuda_is_available()) {
        o = ct_loader_defaults();
        o.device = ct_cuda(0);
        CHECK(ct_loader_new(make_ds(4, -1, -1, 0), &o) == NULL);
        CHECK_ERR(CT_EDEVICE, "device cuda:0");
        /* pin_memory without a GPU is ignored, as torch's DataLoader does */
        o = ct_loader_defaults();
        o.pin_memory = true;
        ct_loader *l = ct_loader_new(make_ds(4, -1, -1, 0), &o);
        ct_value *b = NULL;
        CHECK(l && ct_loader_next(l, &b) == 1);
        ct_value_free(b);
        ct_loader_free(l);
    }
    ct_value *b = (ct_value *)&o;
    CHECK(ct_loader_next(NULL, &b) == CT_EINVAL && b == NULL);
    CHECK(ct_loader_set_position(NULL, 0) == CT_EINVAL);
    ct_clear_error();
    ct_loader_free(NULL);
}

/* Workers run libtorch single-threaded, as torch's DataLoader workers do:
 * with 2 intra-op threads asked for, a batch big enough for a parallel
 * gather would otherwise give every worker an OpenMP thread of its own.
 * Counted as the difference between 3 workers and 1, since asking for 2
 * threads also starts libtorch's process-wide pools. */
static int threads_while_loading(int workers) {
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = 64; /* rows of 1024 floats: a parallel gather */
    o.num_workers = workers;
    o.repeat = true;
    ct_tensor *x = ct_zeros(CT_SHAPE(4096, 1024), NULL);
    ct_loader *l = ct_loader_new(ct_dataset_tensors(1, &x), &o);
    ct_tensor_free(x);
    ct_value *b = NULL;
    for (int k = 0; k < 8; k++) {
        CHECK(ct_loader_next(l, &b) == 1);
        ct_value_free(b);
    }
    int n = count_threads();
    ct_loader_free(l);
    return n;
}

static void test_worker_threads(void) {
    int old = ct_get_num_threads();
    ct_set_num_threads(2);
    int one = threads_while_loading(1), three = threads_while_loading(3);
    printf("threads while loading: %d with 1 worker, %d with 3\n", one, three);
    CHECK(three - one == 2);
    ct_set_num_threads(old);
}

/* With a GPU the batch arrives on it (pinned first when asked). */
static void test_device(void) {
    if (!ct_cuda_is_available()) {
        printf("no GPU: device test skipped\n");
        return;
    }
    for (int pin = 0; pin < 2; pin++) {
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = 16;
        o.num_workers = 2;
        o.pin_memory = pin;
        o.device = ct_cuda(0);
        ct_loader *l = ct_loader_new(make_ds(40, -1, -1, 0), &o);
        ct_value *b = NULL;
        int n = 0;
        while (ct_loader_next(l, &b) == 1) {
            CHECK(ct_device_of(ct_batch_at(b, 0)).type == CT_CUDA);
            CHECK(ct_device_of(ct_batch_at(b, 1)).type == CT_CUDA);
            int64_t idx[16];
            CHECK(batch_indices(b, idx, 16) >= 8 && idx[0] == 16 * n);
            n++;
            ct_value_free(b);
        }
        CHECK(n == 3);
        ct_loader_free(l);
    }
}

/* Batch memory, used again once a batch is freed (data/pool.h; its own
 * test is loader_pool), is never used again while a batch is held: a batch
 * kept across many later ones, and one kept after its loader is freed,
 * still hold their values. */
static void test_batch_memory(void) {
    for (int workers = 0; workers <= 2; workers += 2) {
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = 8;
        o.num_workers = workers;
        o.repeat = true;
        ct_loader *l = ct_loader_new(make_ds(64, -1, -1, 0), &o);
        CHECK(l != NULL);
        ct_value *held = NULL, *b = NULL;
        CHECK(ct_loader_next(l, &held) == 1);
        ct_tensor *want = ct_clone(ct_batch_at(held, 0));
        void *held_at = ct_data_ptr(ct_batch_at(held, 0));
        int clash = 0;
        for (int k = 0; k < 64; k++) {
            CHECK(ct_loader_next(l, &b) == 1);
            void *at = ct_data_ptr(ct_batch_at(b, 0));
            clash += at == held_at;
            /* batch 1 + k holds records 8 (1 + k) .. +7, each filled with its index */
            float first[3] = {-1};
            ct_tensor *row = ct_select(ct_batch_at(b, 0), 0, 0);
            CHECK(ct_read(row, first, sizeof first) == 0 && first[0] == (float)((8 * (1 + k)) % 64));
            ct_tensor_free(row);
            ct_value_free(b);
        }
        CHECK(clash == 0);   /* the held batch's memory was never handed out */
        CHECK(ct_test_same(ct_batch_at(held, 0), want));
        ct_loader_free(l);
        CHECK(ct_test_same(ct_batch_at(held, 0), want)); /* outlives its loader */
        ct_value_free(held);
        ct_tensor_free(want);
    }
}

int main(void) {
    /* Warm up libtorch (its own thread pools) before counting threads. */
    ct_loader_opts o = ct_loader_defaults();
    o.num_workers = 1;
    ct_loader *warm = ct_loader_new(make_ds(4, -1, -1, 0), &o);
    ct_value *b = NULL;
    ct_loader_next(warm, &b);
    ct_value_free(b);
    ct_loader_free(warm);
    /* And CUDA: its first use (test_device) starts the driver's own threads,
     * which stay for the life of the process. */
    if (ct_cuda_is_available()) ct_tensor_free(ct_zeros(CT_SHAPE(1), &(ct_topts){.device = ct_cuda(0)}));
    int threads = count_threads();
    size_t live = ct_tensor_live_count();

    test_workers_identical();
    test_positions();
    test_one_pass();
    test_get_error();
    test_shape_error();
    test_stop_promptly();
    test_wait_seconds();
    test_user_sampler();
    test_user_chain_passes();
    test_bad_options();
    test_device();
    test_batch_memory();

    printf("threads %d -> %d, live tensors %zu -> %zu\n", threads, count_threads(), live,
           ct_tensor_live_count());
    CHECK(count_threads() == threads);
    CHECK(ct_tensor_live_count() == live);
    test_worker_threads(); /* last: it starts libtorch's thread pools */
    return ct_test_result("loader_threads");
}
