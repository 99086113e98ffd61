/* Prints the index stream of ct_loader for configurations read from stdin,
 * one per line:
 *
 *     n seed shuffle repeat rank world_size batch_size drop_last skip workers tokens fast user
 *
 * The dataset's sample i is i itself (fast: a TensorDataset over arange(n),
 * batched by its get_batch; else a user dataset returning the int i, batched
 * by ct_collate), so a batch is its own list of indices. user: the same
 * chain built with ct_sampler_* and given as the loader's own sampler, moved
 * to `skip` by ct_loader_set_position. For each line it prints
 * "len=<ct_loader_len>", then `tokens` tokens: a batch as "i,j,k", the end
 * of a pass as "|" (and then resets), or one "ERR <message>" when the loader
 * is refused. test_chain.py computes the same with Determined's samplers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <ctrial/ctrial.h>

static int64_t int_len(void *self) { return *(int64_t *)self; }
static ct_value *int_get(void *self, int64_t i) { return ct_value_int(i); }

static ct_dataset *dataset(int64_t n, int fast) {
    if (fast) {
        ct_tensor *t = ct_arange(0, (double)n, 1, &(ct_topts){.dtype = CT_I64});
        ct_dataset *d = ct_dataset_tensors(1, &t);
        ct_tensor_free(t);
        return d;
    }
    int64_t *len = malloc(sizeof *len);
    *len = n;
    ct_dataset_vtable vt = {.len = int_len, .get = int_get, .free = free};
    return ct_dataset_new(&vt, len);
}

static int print_batch(const ct_value *b) {
    ct_tensor *t = ct_batch_tensor(b);
    int64_t n = ct_numel(t);
    int64_t *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    if (!idx || ct_dtype_of(t) != CT_I64 || ct_read(t, idx, (size_t)n * sizeof *idx) != 0) {
        free(idx);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) printf(i ? ",%" PRId64 : "%" PRId64, idx[i]);
    free(idx);
    return 0;
}

int main(void) {
    long long n, seed, skip;
    int shuffle, repeat, rank, ws, drop_last, workers, tokens, fast, user;
    long long bs;
    while (scanf("%lld %lld %d %d %d %d %lld %d %lld %d %d %d %d", &n, &seed, &shuffle, &repeat, &rank,
                 &ws, &bs, &drop_last, &skip, &workers, &tokens, &fast, &user) == 13) {
        ct_loader_opts o = ct_loader_defaults();
        o.batch_size = bs;
        o.shuffle = shuffle;
        o.seed = (uint64_t)seed;
        o.repeat = repeat;
        o.rank = rank;
        o.world_size = ws;
        o.drop_last = drop_last;
        o.skip_batches = skip;
        o.num_workers = workers;
        if (user) {
            ct_sampler *s = shuffle ? ct_sampler_shuffle(n, (uint64_t)seed) : ct_sampler_sequential(n);
            if (repeat) s = ct_sampler_repeat(s);
            o.sampler = ct_sampler_batch(ct_sampler_shard(s, rank, ws), bs, drop_last);
        }
        ct_loader *l = ct_loader_new(dataset(n, fast), &o);
        if (l && user && ct_loader_set_position(l, skip) != 0) {
            ct_loader_free(l);
            l = NULL;
        }
        if (!l) {
            printf("ERR %s\n", ct_last_error());
            continue;
        }
        printf("len=%lld ", (long long)ct_loader_len(l));
        for (int k = 0; k < tokens; k++) {
            ct_value *b = NULL;
            int r = ct_loader_next(l, &b);
            if (k) putchar(' ');
            if (r == 0) {
                putchar('|');
                if (ct_loader_reset(l) != 0) r = -1;
            } else if (r < 0 || print_batch(b) != 0) {
                r = -1;
            }
            ct_value_free(b);
            if (r < 0) {
                printf("ERR %s", ct_last_error());
                break;
            }
        }
        putchar('\n');
        ct_loader_free(l);
    }
    return 0;
}
