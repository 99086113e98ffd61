/* bench/loader/bench_shards.c — token windows per second from llm.c shards
 * (ct_dataset_shards through the loader) beside the disk's sequential read
 * rate of the same files:
 *
 *   bench_shards DIR [MTOKENS] [BLOCK] [BATCH] [WORKERS]
 *
 * Writes MTOKENS million random uint16 tokens (32) as 4 shards under DIR
 * (kept for later runs), then:
 *   read   — each file evicted from the page cache (posix_fadvise
 *            DONTNEED) and read front to back in 1 MiB read()s (cold),
 *            then again from the page cache (warm), and front to back with
 *            O_DIRECT in 4 MiB reads (direct): the device itself, past
 *            every page cache. On a virtual machine "cold" can still be
 *            served by the host's cache (this project's VM: cold 1.6-2
 *            GB/s, direct 0.33-0.48 GB/s, a first read after writing
 *            0.48 GB/s): direct is the disk's sequential read rate;
 *   random — every offset an item (CT_WINDOWS_RANDOM), the loader's
 *            shuffle, batches of BATCH (8) windows of BLOCK (1024) tokens,
 *            WORKERS (2) workers, as many windows as the files hold tokens
 *            / BLOCK, cold (files evicted first) then warm;
 *   sequential — the non-overlapping windows (CT_WINDOWS_SEQUENTIAL), in
 *            order, one pass, cold then warm.
 * A window is BLOCK tokens, 2 * BLOCK bytes of the file (x; y overlaps it
 * but for one token): windows/s x 2 * BLOCK is the rate to compare with the
 * read rate. The rates leave out the loader's set-up and first batch
 * (setup_s: opening the shards, and for random windows drawing the
 * shuffle's permutation of every offset, once a pass); a pass of random
 * windows is MTOKENS million windows, of which the run takes 1 / BLOCK.
 * Prints one JSON object. Not a test: nothing is asserted. */
#define _GNU_SOURCE /* O_DIRECT */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ctrial/ctrial.h>

#define SHARDS 4

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char paths[SHARDS][4096];

/* Drops the file's clean pages from the page cache (no root needed). */
static int evict(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    fdatasync(fd);
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return rc;
}

static void evict_all(void) {
    for (int s = 0; s < SHARDS; s++)
        if (evict(paths[s]) != 0) fprintf(stderr, "bench_shards: cannot evict %s\n", paths[s]);
}

/* Bytes per second reading every shard front to back. */
static double read_rate(void) {
    static char buf[1 << 20];
    double t0 = now_s(), bytes = 0;
    for (int s = 0; s < SHARDS; s++) {
        int fd = open(paths[s], O_RDONLY);
        ssize_t got;
        while (fd >= 0 && (got = read(fd, buf, sizeof buf)) > 0) bytes += (double)got;
        if (fd >= 0) close(fd);
    }
    return bytes / (now_s() - t0);
}

/* Bytes per second reading every shard with O_DIRECT (aligned 4 MiB
 * reads; the unaligned tail is read without it). 0 where O_DIRECT is
 * refused (tmpfs). */
static double direct_read_rate(void) {
    enum { CHUNK = 4 << 20 };
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, CHUNK) != 0) return 0;
    double t0 = now_s(), bytes = 0;
    for (int s = 0; s < SHARDS; s++) {
        int fd = open(paths[s], O_RDONLY | O_DIRECT);
        if (fd < 0) {
            free(buf);
            return 0;
        }
        ssize_t got;
        while ((got = read(fd, buf, CHUNK)) > 0) bytes += (double)got;
        close(fd);
    }
    free(buf);
    return bytes / (now_s() - t0);
}

/* Windows per second: `windows` windows through a loader over the shards. */
static double window_rate(ct_window_mode mode, int64_t block, int64_t batch, int workers, int64_t windows,
                          double *setup_s) {
    const char *pat[1] = {paths[0]};
    char glob_pat[4200];
    snprintf(glob_pat, sizeof glob_pat, "%.*s*.bin", (int)(strlen(paths[0]) - strlen("000.bin")), paths[0]);
    pat[0] = glob_pat;
    ct_shards_opts so = ct_shards_defaults();
    so.block_size = block;
    so.windows = mode;
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = batch;
    o.shuffle = mode == CT_WINDOWS_RANDOM;
    o.seed = 1;
    o.num_workers = workers;
    double t0 = now_s();
    ct_loader *l = ct_loader_new(ct_dataset_shards(pat, 1, &so), &o);
    ct_value *b = NULL;
    if (!l || ct_loader_next(l, &b) != 1) { /* the first batch: the shuffle's permutation is drawn */
        fprintf(stderr, "bench_shards: %s\n", ct_last_error());
        exit(1);
    }
    ct_value_free(b);
    double t1 = now_s();
    *setup_s = t1 - t0;
    int64_t got = 0;
    while (got < windows && ct_loader_next(l, &b) == 1) {
        got += ct_batch_length(b);
        ct_value_free(b);
    }
    double dt = now_s() - t1;
    ct_loader_free(l);
    return (double)got / dt;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [MTOKENS] [BLOCK] [BATCH] [WORKERS]\n", argv[0]);
        return 2;
    }
    int64_t mtokens = argc > 2 ? atoll(argv[2]) : 32, block = argc > 3 ? atoll(argv[3]) : 1024,
            batch = argc > 4 ? atoll(argv[4]) : 8;
    int workers = argc > 5 ? atoi(argv[5]) : 2;
    int64_t per = mtokens * 1000000 / SHARDS;
    mkdir(argv[1], 0777);
    uint32_t *toks = NULL;
    for (int s = 0; s < SHARDS; s++) {
        snprintf(paths[s], sizeof paths[s], "%s/bench_%" PRId64 "M_%03d.bin", argv[1], mtokens, s);
        struct stat st;
        if (stat(paths[s], &st) == 0 && st.st_size == 1024 + 2 * per) continue;
        if (!toks && !(toks = malloc((size_t)per * sizeof *toks))) return 1;
        uint64_t x = 0x9E3779B97F4A7C15ull + (uint64_t)s;
        for (int64_t i = 0; i < per; i++) { /* xorshift: tokens below 50257, GPT-2's vocabulary */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            toks[i] = (uint32_t)(x % 50257);
        }
        if (ct_shard_write(paths[s], toks, per, 2) != 0) {
            fprintf(stderr, "bench_shards: %s\n", ct_last_error());
            return 1;
        }
    }
    free(toks);
    double file_bytes = (double)SHARDS * (double)(1024 + 2 * per);
    int64_t windows = SHARDS * per / block;
    evict_all();
    double cold_read = read_rate(), warm_read = read_rate(), direct_read = direct_read_rate();
    evict_all();
    double rand_setup, seq_setup, ignore;
    double rand_cold = window_rate(CT_WINDOWS_RANDOM, block, batch, workers, windows, &rand_setup);
    double rand_warm = window_rate(CT_WINDOWS_RANDOM, block, batch, workers, windows, &ignore);
    evict_all();
    double seq_cold = window_rate(CT_WINDOWS_SEQUENTIAL, block, batch, workers, windows, &seq_setup);
    double seq_warm = window_rate(CT_WINDOWS_SEQUENTIAL, block, batch, workers, windows, &ignore);
    double wb = 2.0 * (double)block; /* a window's bytes of the file */
    printf("{\"file_mb\": %.1f, \"block\": %" PRId64 ", \"batch\": %" PRId64 ", \"workers\": %d, \"windows\": %" PRId64
           ",\n \"read_mb_s\": {\"cold\": %.1f, \"warm\": %.1f, \"direct\": %.1f},\n"
           " \"random_windows_s\": {\"cold\": %.0f, \"warm\": %.0f}, \"random_mb_s\": {\"cold\": %.1f, \"warm\": %.1f},\n"
           " \"sequential_windows_s\": {\"cold\": %.0f, \"warm\": %.0f}, \"sequential_mb_s\": {\"cold\": %.1f, "
           "\"warm\": %.1f},\n \"setup_s\": {\"random\": %.3f, \"sequential\": %.3f},\n"
           " \"random_over_cold_read\": %.2f, \"sequential_over_cold_read\": %.2f,\n"
           " \"random_over_direct_read\": %.2f, \"sequential_over_direct_read\": %.2f}\n",
           file_bytes / 1e6, block, batch, workers, windows, cold_read / 1e6, warm_read / 1e6, direct_read / 1e6, rand_cold, rand_warm,
           rand_cold * wb / 1e6, rand_warm * wb / 1e6, seq_cold, seq_warm, seq_cold * wb / 1e6, seq_warm * wb / 1e6,
           rand_setup, seq_setup, rand_cold * wb / cold_read, seq_cold * wb / cold_read,
           direct_read > 0 ? rand_cold * wb / direct_read : 0, direct_read > 0 ? seq_cold * wb / direct_read : 0);
    return 0;
}
