/* The loader over an iterable dataset (ct_loader_iterable): exact batches in
 * one-pass and training (repeat) mode, sharding across a simulated rank and
 * world size, pass ends and resets, positions replayed (from creation, while
 * running, across pass ends), the training loop's hooks (data/loader.h:
 * this test links module data), failures of the user's code, and nothing
 * leaked. */
#include <stdlib.h>

#include "ct_test.h"
#include "data/loader.h"

/* ---- an iterator over records 0..n-1 --------------------------------------- */

typedef struct {
    int64_t n;         /* records per pass */
    int64_t pos;       /* the next record */
    int64_t shift;     /* added to every record (a non-deterministic iterator moves it) */
    int64_t drift;     /* added to shift at every reset */
    int64_t fail_at;   /* next fails at this record (-1: never) */
    int64_t odd_at;    /* the record here has a tensor of another shape (-1: never) */
    int fail_resets_after; /* resets that succeed before one fails (-1: never fails) */
    int resets, nexts;
    int *freed;        /* incremented by free */
    bool tensors;      /* records are {"x": float [2] of i, "i": int i}; else int i */
} counter;

static int counter_reset(void *self) {
    counter *c = self;
    if (c->fail_resets_after == 0) return ct_set_error(CT_EIO, "cannot rewind the stream");
    if (c->fail_resets_after > 0) c->fail_resets_after--;
    c->resets++;
    c->pos = 0;
    c->shift += c->drift;
    return 0;
}

static ct_value *counter_next(void *self) {
    counter *c = self;
    c->nexts++;
    if (c->pos >= c->n) return NULL; /* the end of the pass: no error */
    int64_t i = c->pos++;
    if (i == c->fail_at) {
        ct_set_error(CT_EIO, "bad block at record %lld", (long long)i);
        return NULL;
    }
    int64_t v = i + c->shift;
    if (!c->tensors) return ct_value_int(v);
    float x[3] = {(float)v, (float)v, (float)v};
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "x", ct_value_tensor(ct_from_data(x, 1, (int64_t[]){i == c->odd_at ? 3 : 2}, CT_F32)));
    ct_value_dict_set(d, "i", ct_value_int(v));
    return d;
}

static void counter_free(void *self) {
    counter *c = self;
    if (c->freed) (*c->freed)++;
    free(c);
}

static const ct_iterable_vtable counter_vt = {counter_reset, counter_next, counter_free};

static counter *new_counter(int64_t n) {
    counter *c = calloc(1, sizeof *c);
    c->n = n;
    c->fail_at = c->odd_at = -1;
    c->fail_resets_after = -1;
    return c;
}

static ct_loader *iterable(counter *c, int64_t bs, bool drop_last, bool repeat, int rank, int ws) {
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = bs;
    o.drop_last = drop_last;
    o.repeat = repeat;
    o.rank = rank;
    o.world_size = ws;
    return ct_loader_iterable(&counter_vt, c, &o);
}

/* The records of a batch: its int64 leaf ("i" of a dict batch, or the batch
 * itself). Returns the count, -1 when it is no such batch. */
static int64_t records(const ct_value *b, int64_t *out, int64_t cap) {
    ct_tensor *t = ct_value_kind_of(b) == CT_VALUE_DICT ? ct_batch_get(b, "i") : ct_batch_tensor(b);
    if (!t || ct_dtype_of(t) != CT_I64) return -1;
    int64_t n = ct_numel(t);
    if (n > cap || ct_read(t, out, (size_t)n * sizeof *out) != 0) return -1;
    return n;
}

/* One token per call of next, the training loop's way: a batch "a,b,c", or
 * "|" at the end of a pass (then a reset). Writes `count` tokens into buf,
 * space-separated; "ERR" on a failure. */
static void stream(ct_loader *l, int count, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < count && at < len; k++) {
        ct_value *b = NULL;
        int r = ct_loader_next(l, &b);
        if (k) at += (size_t)snprintf(buf + at, len - at, " ");
        if (r == 0) {
            at += (size_t)snprintf(buf + at, len - at, "|");
            if (ct_loader_reset(l) != 0) r = -1;
        } else if (r == 1) {
            int64_t idx[64];
            int64_t n = records(b, idx, 64);
            for (int64_t i = 0; i < n && at < len; i++)
                at += (size_t)snprintf(buf + at, len - at, i ? ",%lld" : "%lld", (long long)idx[i]);
            if (n < 0) r = -1;
        }
        ct_value_free(b);
        if (r < 0) {
            snprintf(buf + at, len - at, "ERR");
            return;
        }
    }
}

#define CHECK_STREAM(l, count, want)                                                   \
    do {                                                                                \
        char got_[4096];                                                                \
        stream((l), (count), got_, sizeof got_);                                        \
        CHECK(!strcmp(got_, (want)));                                                   \
        if (strcmp(got_, (want))) fprintf(stderr, "  got:  %s\n  want: %s\n", got_, (want)); \
    } while (0)

/* ---- tests --------------------------------------------------------------------- */

/* One pass per reset: batch_size records per batch, the short last batch
 * (or none under drop_last), 0 at the end and 0 again; the iterator reset
 * before every pass, at creation first. Length unknown, not an error. */
static void test_one_pass(void) {
    counter *c = new_counter(10);
    ct_loader *l = iterable(c, 4, false, false, 0, 1);
    CHECK(l != NULL);
    CHECK(c->resets == 1 && c->nexts == 0); /* reset at creation, nothing read */
    CHECK(cti_loader_is_iterable(l));
    ct_clear_error();
    CHECK(ct_loader_len(l) == -1 && ct_loader_num_samples(l) == -1);
    CHECK(ct_last_code() == CT_OK); /* unknown, not an error */
    CHECK_OK(ct_loader_reset(l)); /* the pass has not begun: nothing happens */
    CHECK(c->resets == 1);
    CHECK_STREAM(l, 10, "0,1,2,3 4,5,6,7 8,9 | 0,1,2,3 4,5,6,7 8,9 | 0,1,2,3 4,5,6,7");
    CHECK(c->resets == 3 && ct_loader_position(l) == 8);
    ct_value *b = (ct_value *)l;
    CHECK(ct_loader_next(l, &b) == 1 && b);
    ct_value_free(b);
    CHECK(ct_loader_next(l, &b) == 0 && b == NULL);
    CHECK(ct_loader_next(l, &b) == 0 && b == NULL); /* still the end */
    CHECK(ct_loader_position(l) == 9);
    /* a reset mid-pass reads the rest of the pass (dropped), counting it */
    CHECK_OK(ct_loader_reset(l));
    CHECK(ct_loader_next(l, &b) == 1);
    ct_value_free(b);
    CHECK(ct_loader_position(l) == 10);
    CHECK_OK(ct_loader_reset(l));
    CHECK(ct_loader_position(l) == 12);
    CHECK_STREAM(l, 4, "0,1,2,3 4,5,6,7 8,9 |");
    ct_loader_free(l);

    /* drop_last: the short batch is dropped */
    l = iterable(new_counter(10), 4, true, false, 0, 1);
    CHECK_STREAM(l, 7, "0,1,2,3 4,5,6,7 | 0,1,2,3 4,5,6,7 | 0,1,2,3");
    ct_loader_free(l);
    /* a batch as long as the pass, and a pass that divides evenly */
    l = iterable(new_counter(3), 3, true, false, 0, 1);
    CHECK_STREAM(l, 4, "0,1,2 | 0,1,2 |");
    ct_loader_free(l);
    /* an empty pass: 0 straight away, every time */
    l = iterable(new_counter(0), 2, false, false, 0, 1);
    CHECK_STREAM(l, 3, "| | |");
    ct_loader_free(l);

    /* records that are trees: dict batches, tensors stacked */
    c = new_counter(5);
    c->tensors = true;
    l = iterable(c, 2, false, false, 0, 1);
    CHECK(ct_loader_next(l, &b) == 1);
    ct_tensor *x = ct_batch_get(b, "x");
    int64_t shape[2];
    float xs[4];
    CHECK(ct_shape(x, shape, 2) == 2 && shape[0] == 2 && shape[1] == 2);
    CHECK(ct_read(x, xs, sizeof xs) == 0 && xs[0] == 0 && xs[2] == 1);
    CHECK(ct_batch_length(b) == 2);
    ct_value_free(b);
    CHECK_STREAM(l, 3, "2,3 4 |");
    ct_loader_free(l);
}

/* Rank r of n takes records k with k % n == r, k counted from 0 in each
 * pass: every record reaches exactly one rank. */
static void test_shards(void) {
    static const char *want[3] = {
        "0,3 6,9 | 0,3 6,9 |",
        "1,4 7 | 1,4 7 |",
        "2,5 8 | 2,5 8 |",
    };
    for (int r = 0; r < 3; r++) {
        ct_loader *l = iterable(new_counter(10), 2, false, false, r, 3);
        CHECK_STREAM(l, 6, want[r]);
        ct_loader_free(l);
    }
    /* drop_last per rank */
    ct_loader *l = iterable(new_counter(10), 2, true, false, 1, 3);
    CHECK_STREAM(l, 4, "1,4 | 1,4 |");
    ct_loader_free(l);
    /* a rank with nothing: rank 3 of 4 over 3 records */
    l = iterable(new_counter(3), 2, false, false, 3, 4);
    CHECK_STREAM(l, 2, "| |");
    CHECK(ct_loader_set_position(l, 1) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "gives this rank no batch: the position cannot be reached");
    ct_loader_free(l);
}

/* Training mode: repeat -> shard -> batch. The iterator is reset at each
 * end and read on; the shard count runs across passes, so rank r's j-th
 * record is (r + j * n) % len; batches span pass ends; no 0 ever. */
static void test_repeat(void) {
    for (int ws = 1; ws <= 3; ws++) {
        for (int r = 0; r < ws; r++) {
            counter *c = new_counter(5);
            ct_loader *l = iterable(c, 3, r == 0, true, r, ws); /* drop_last changes nothing */
            char want[512];
            size_t at = 0;
            int64_t j = 0;
            for (int b = 0; b < 8; b++)
                for (int i = 0; i < 3; i++, j++)
                    at += (size_t)snprintf(want + at, sizeof want - at, b == 0 && i == 0 ? "%lld" : i ? ",%lld" : " %lld",
                                           (long long)((r + j * ws) % 5));
            CHECK_STREAM(l, 8, want);
            CHECK(ct_loader_position(l) == 8);
            CHECK(c->resets == 1 + (int)((r + (j - 1) * ws) / 5)); /* one per pass begun */
            CHECK_OK(ct_loader_reset(l)); /* one endless stream: no-op */
            CHECK(ct_loader_position(l) == 8);
            ct_loader_free(l);
        }
    }
    /* exact, by hand: rank 1 of 2 over 5 records, batches of 3 */
    ct_loader *l = iterable(new_counter(5), 3, false, true, 1, 2);
    CHECK_STREAM(l, 4, "1,3,0 2,4,1 3,0,2 4,1,3");
    ct_loader_free(l);
    /* an empty pass cannot repeat */
    l = iterable(new_counter(0), 2, false, true, 0, 1);
    CHECK(l == NULL || ct_loader_next(l, &(ct_value *){NULL}) == CT_EINVAL);
    ct_loader_free(l);
    ct_clear_error();
    l = iterable(new_counter(0), 2, false, false, 0, 1);
    CHECK_OK(cti_loader_use_training_chain(l, 0, 1, 0));
    ct_value *b = NULL;
    CHECK(ct_loader_next(l, &b) == CT_EINVAL && b == NULL);
    CHECK_ERR(CT_EINVAL, "pass 0 is empty: a repeating loader would never yield a batch");
    ct_loader_free(l);
}

/* Positions replay the iterator: from creation (skip_batches) and while
 * running, backwards and forwards, across pass ends, in both modes, the
 * next batch is the uninterrupted loader's. */
static void test_positions(void) {
    enum { M = 24 };
    for (int cfg = 0; cfg < 4; cfg++) {
        bool repeat = cfg & 1, drop = cfg & 2;
        int rank = 1, ws = 2;
        char ref[M][64];
        ct_loader *l = iterable(new_counter(11), 2, drop, repeat, rank, ws);
        /* the uninterrupted stream, batch by batch (pass ends dropped) */
        for (int k = 0; k < M; k++) {
            ct_value *b = NULL;
            int r = ct_loader_next(l, &b);
            if (r == 0) {
                CHECK_OK(ct_loader_reset(l));
                r = ct_loader_next(l, &b);
            }
            int64_t idx[2];
            int64_t n = r == 1 ? records(b, idx, 2) : -1;
            CHECK(n > 0);
            snprintf(ref[k], sizeof ref[k], n == 2 ? "%lld,%lld" : "%lld", (long long)idx[0], (long long)(n == 2 ? idx[1] : 0));
            ct_value_free(b);
        }
        ct_loader_free(l);
        for (int64_t k = 0; k <= 14; k++) {
            /* what follows k: up to 6 batches, "|" at pass ends */
            char want[512];
            size_t at = 0;
            int tokens = 0;
            for (int64_t j = k; j < k + 6; j++, tokens++) {
                /* one-pass: a pass of rank 1's 5 records in 2s is 3 batches (2 with drop_last) */
                int64_t per = drop ? 2 : 3;
                if (!repeat && j > k && j % per == 0) {
                    at += (size_t)snprintf(want + at, sizeof want - at, " |");
                    tokens++;
                }
                if (!repeat && j == k && j > 0 && j % per == 0) {
                    at += (size_t)snprintf(want + at, sizeof want - at, "|");
                    tokens++;
                }
                at += (size_t)snprintf(want + at, sizeof want - at, at ? " %s" : "%s", ref[j]);
            }
            ct_loader_opts o = ct_loader_defaults();
            o.batch_size = 2;
            o.drop_last = drop;
            o.repeat = repeat;
            o.rank = rank;
            o.world_size = ws;
            o.skip_batches = k;
            counter *c = new_counter(11);
            l = ct_loader_iterable(&counter_vt, c, &o);
            CHECK(l && ct_loader_position(l) == k);
            CHECK_STREAM(l, tokens, want);
            /* set_position backwards (a replay from the reset) */
            int resets = c->resets;
            CHECK_OK(ct_loader_set_position(l, k));
            CHECK(c->resets > resets);
            CHECK(ct_loader_position(l) == k);
            CHECK_STREAM(l, tokens, want);
            ct_loader_free(l);
            /* and forwards, from a loader mid-stream */
            l = iterable(new_counter(11), 2, drop, repeat, rank, ws);
            CHECK_STREAM(l, 1, ref[0]);
            CHECK_OK(ct_loader_set_position(l, k));
            CHECK_STREAM(l, tokens, want);
            ct_loader_free(l);
        }
    }
    /* a non-deterministic iterator: the replay is not the stream it was
     * (what the header warns about; nothing can detect it) */
    counter *c = new_counter(6);
    c->drift = 100;
    ct_loader *l = iterable(c, 2, false, false, 0, 1);
    CHECK_STREAM(l, 2, "100,101 102,103");
    CHECK_OK(ct_loader_set_position(l, 1));
    CHECK_STREAM(l, 1, "202,203");
    ct_loader_free(l);
}

/* The training loop's hooks: the training chain turns repeat on for the
 * rank and replays to the position; the validation shard is one-pass from
 * the beginning. Only an iterable loader says it is one. */
static void test_hooks(void) {
    counter *c = new_counter(7);
    ct_loader *l = iterable(c, 2, false, false, 0, 1);
    CHECK_STREAM(l, 2, "0,1 2,3");
    /* rank 1 of 2, repeat: records k = 1, 3, 5, ... of 0..6 0..6 ...:
     * 1,3 5,0 2,4 6,1 3,5 0,2; from position 3 */
    CHECK_OK(cti_loader_use_training_chain(l, 1, 2, 3));
    CHECK(ct_loader_position(l) == 3);
    CHECK_STREAM(l, 3, "6,1 3,5 0,2");
    CHECK(cti_loader_is_iterable(l));
    CHECK(ct_loader_len(l) == -1);
    CHECK(cti_loader_use_training_chain(l, 2, 2, 0) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "rank 2 is not in [0, world_size 2)");
    /* validation: rank 2 of 3, one pass per reset, from the beginning */
    CHECK_OK(cti_loader_use_validation_shard(l, 2, 3));
    CHECK(ct_loader_position(l) == 0);
    CHECK_STREAM(l, 4, "2,5 | 2,5 |");
    CHECK_OK(cti_loader_use_device(l, ct_cpu()));
    CHECK_STREAM(l, 1, "2,5");
    ct_loader_free(l);

    ct_tensor *t = ct_arange(0, 4, 1, &(ct_topts){.dtype = CT_I64});
    ct_loader *map = ct_loader_new(ct_dataset_tensors(1, &t), NULL);
    ct_tensor_free(t);
    CHECK(map && !cti_loader_is_iterable(map));
    CHECK(!cti_loader_is_iterable(NULL));
    ct_loader_free(map);
}

static ct_value *count_collate(ct_value *const *samples, int64_t n, void *ctx) {
    (*(int *)ctx)++;
    return ct_value_int(n);
}

/* Failures of the user's code stop the loader, naming the record and the
 * pass; options that make no sense for an iterable are refused; self is
 * freed once whatever happens. */
static void test_errors(void) {
    int freed = 0;
    counter *c = new_counter(10);
    c->fail_at = 6;
    c->freed = &freed;
    ct_loader *l = iterable(c, 4, false, false, 0, 1);
    ct_value *b = NULL;
    CHECK(ct_loader_next(l, &b) == 1);
    ct_value_free(b);
    CHECK(ct_loader_next(l, &b) == CT_EIO && b == NULL);
    CHECK_ERR(CT_EIO, "the iterable dataset failed reading record 6 of pass 0: bad block at record 6");
    CHECK(ct_loader_next(l, &b) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "stopped after an error");
    CHECK(ct_loader_reset(l) == CT_ESTATE);
    CHECK(ct_loader_set_position(l, 0) == CT_ESTATE);
    ct_clear_error();
    ct_loader_free(l);
    CHECK(freed == 1);

    /* a sample of the wrong shape: named by its record number */
    c = new_counter(10);
    c->tensors = true;
    c->odd_at = 5;
    l = iterable(c, 4, false, false, 0, 1);
    CHECK(ct_loader_next(l, &b) == 1);
    ct_value_free(b);
    CHECK(ct_loader_next(l, &b) == CT_ESHAPE);
    CHECK_ERR(CT_ESHAPE, "the iterable dataset's record 5 of pass 0: ct_collate: sample 1");
    ct_loader_free(l);

    /* a user collate, on the calling thread */
    int calls = 0;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = 3;
    o.collate = count_collate;
    o.collate_ctx = &calls;
    l = ct_loader_iterable(&counter_vt, new_counter(7), &o);
    int64_t got[3];
    for (int k = 0; k < 3; k++) {
        CHECK(ct_loader_next(l, &b) == 1 && ct_value_get_int(b, &got[k]) == 0);
        ct_value_free(b);
    }
    CHECK(calls == 3 && got[0] == 3 && got[1] == 3 && got[2] == 1);
    ct_loader_free(l);

    /* the reset fails: at creation (self freed), or at a later pass */
    freed = 0;
    c = new_counter(3);
    c->freed = &freed;
    c->fail_resets_after = 0;
    CHECK(iterable(c, 2, false, false, 0, 1) == NULL);
    CHECK_ERR(CT_EIO, "the iterable dataset's reset failed (pass 0): cannot rewind the stream");
    CHECK(freed == 1);
    c = new_counter(3);
    c->fail_resets_after = 1;
    l = iterable(c, 2, false, true, 0, 1);
    CHECK(ct_loader_next(l, &b) == 1);
    ct_value_free(b);
    CHECK(ct_loader_next(l, &b) == CT_EIO);
    CHECK_ERR(CT_EIO, "reset failed (pass 1)");
    ct_loader_free(l);

    /* refused options; self freed all the same */
    freed = 0;
    o = ct_loader_defaults();
    o.shuffle = true;
    c = new_counter(3);
    c->freed = &freed;
    CHECK(ct_loader_iterable(&counter_vt, c, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "cannot shuffle an iterable dataset");
    o = ct_loader_defaults();
    o.sampler = ct_sampler_sequential(3); /* taken */
    c = new_counter(3);
    c->freed = &freed;
    CHECK(ct_loader_iterable(&counter_vt, c, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_loader_opts.sampler must be NULL");
    o = ct_loader_defaults();
    o.batch_size = 0;
    c = new_counter(3);
    c->freed = &freed;
    CHECK(ct_loader_iterable(&counter_vt, c, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "batch_size 0 must be >= 1");
    o = ct_loader_defaults();
    o.rank = 2;
    o.world_size = 2;
    c = new_counter(3);
    c->freed = &freed;
    CHECK(ct_loader_iterable(&counter_vt, c, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "rank 2 is not in [0, world_size 2)");
    o = ct_loader_defaults();
    o.skip_batches = -1;
    c = new_counter(3);
    c->freed = &freed;
    CHECK(ct_loader_iterable(&counter_vt, c, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "skip_batches -1 is negative");
    CHECK(freed == 5);
    CHECK(ct_loader_iterable(NULL, NULL, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "the vtable is NULL");
    CHECK(ct_loader_iterable(&(ct_iterable_vtable){.reset = counter_reset}, NULL, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "vt->next is NULL");
    /* skip_batches past what a one-pass rank can reach */
    o = ct_loader_defaults();
    o.skip_batches = 3;
    CHECK(ct_loader_iterable(&counter_vt, new_counter(0), &o) == NULL);
    CHECK_ERR(CT_EINVAL, "the position cannot be reached");
    /* num_workers is ignored: no thread, same stream */
    o = ct_loader_defaults();
    o.num_workers = 4;
    o.batch_size = 2;
    l = ct_loader_iterable(&counter_vt, new_counter(3), &o);
    CHECK_STREAM(l, 3, "0,1 2 |");
    ct_loader_free(l);
}

/* On a GPU: batches arrive on the device, pinned or not. */
static void test_device(void) {
    if (!ct_cuda_is_available()) {
        printf("no GPU: device test skipped\n");
        return;
    }
    for (int pin = 0; pin < 2; pin++) {
        counter *c = new_counter(9);
        c->tensors = true;
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = 4;
        o.pin_memory = pin;
        o.device = pin ? ct_cuda(0) : ct_cpu();
        ct_loader *l = ct_loader_iterable(&counter_vt, c, &o);
        if (!pin) CHECK_OK(cti_loader_use_device(l, ct_cuda(0))); /* the loop's hook */
        ct_value *b = NULL;
        int n = 0;
        while (ct_loader_next(l, &b) == 1) {
            CHECK(ct_device_of(ct_batch_get(b, "x")).type == CT_CUDA);
            CHECK(ct_device_of(ct_batch_get(b, "i")).type == CT_CUDA);
            n++;
            ct_value_free(b);
        }
        CHECK(n == 3);
        ct_loader_free(l);
    }
}

int main(void) {
    size_t live = ct_tensor_live_count();
    test_one_pass();
    test_shards();
    test_repeat();
    test_positions();
    test_hooks();
    test_errors();
    test_device();
    printf("live tensors %zu -> %zu\n", live, ct_tensor_live_count());
    CHECK(ct_tensor_live_count() == live);
    return ct_test_result("loader_iterable");
}
