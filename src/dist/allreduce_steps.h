/* src/dist/allreduce_steps.h — an all-reduce over p ranks as a list of
 * steps, each one pair of messages (send a range of the buffer, receive a
 * range) and maybe an addition: what grad_sync.c's message transports
 * post and poll, one step at a time. Pure arithmetic, no MPI. Internal to
 * src/dist.
 *
 *     cti_ar_step *st = NULL;
 *     int n = cti_ar_steps(CT_AR_RING, p, r, 0, len, &st);   // NEW array
 *     for (int i = 0; i < n; i++) {
 *         receive st[i].recv_len elements from st[i].recv_from (into a
 *         scratch buffer when st[i].add, else at st[i].recv_off); send
 *         st[i].send_len at st[i].send_off to st[i].send_to; then, when
 *         st[i].add: buf[recv range] = own + scratch, where own is this
 *         rank's own values when st[i].first, else buf[recv range]; and
 *         divide by the ranks when st[i].last;
 *     }
 *     free(st);
 *
 * Before the first step the buffer must hold this rank's values in
 * st[0].send's range (the only range sent before its first addition); the
 * other ranges may stay wherever they are until their first addition
 * reads them. After the last step every rank's buffer holds the same
 * bits: every element is added up by one rank and copied to the others.
 *
 * Two algorithms, with the same bytes per rank, 2(p-1)/p of the buffer:
 *   CT_AR_RING               2(p-1) steps: p-1 reduce-scatter steps to the
 *                            right neighbour and from the left one, each
 *                            moving one p-th, then p-1 all-gather steps.
 *   CT_AR_HALVING_DOUBLING   2 log2(p) steps, p a power of two: recursive
 *                            halving (exchange half of the range with the
 *                            rank p/2, then p/4, ... away, keep and add the
 *                            other half), then recursive doubling back.
 * Latency decides between them: a bucket pays 2(p-1) message latencies on
 * the ring, 2 log2(p) halving and doubling (cti_ar_choose). */
#ifndef CTRIAL_DIST_ALLREDUCE_STEPS_H
#define CTRIAL_DIST_ALLREDUCE_STEPS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { CT_AR_RING, CT_AR_HALVING_DOUBLING } cti_ar_algo;

typedef struct {
    int send_to, recv_from;     /* ranks of the p */
    int64_t send_off, send_len; /* elements of the buffer */
    int64_t recv_off, recv_len;
    bool add;   /* what arrives is added into the receive range (else it lands there) */
    bool first; /* the range's first addition: this rank's own values are read where they are */
    bool last;  /* the range's last addition: it holds the sum over every rank after it */
} cti_ar_step;

/* Halving-doubling's limit, in bytes a rank (see cti_ar_choose). */
#define CT_AR_HD_MAX_SHARE ((int64_t)256 << 10)

/* The algorithm for `bytes` over p ranks: halving-doubling when p is a
 * power of two, at least 4 (at 2 both are one exchange each way), and a
 * rank's share, bytes / p, at most CT_AR_HD_MAX_SHARE; else the ring.
 * Below that share the ring's 2(p-1) latencies are a tenth of its time or
 * more on 10 GbE and InfiniBand alike (a share under about 9 alpha beta:
 * 25 us x 1.1 GB/s, 3 us x 11 GB/s), and halving-doubling pays 2 log2(p);
 * above it the bytes dominate, which both move alike (4 ranks on one
 * machine: 0.89-1.30x the ring at 10-100 MB, bench/dist table 1b), and the
 * ring keeps them: it only talks to neighbours, where halving-doubling's
 * first step exchanges half a bucket between every pair p/2 apart, all
 * across the middle of the network at once. */
cti_ar_algo cti_ar_choose(int p, int64_t bytes);
/* Whether algo works for p ranks (halving-doubling: a power of two). */
bool cti_ar_fits(cti_ar_algo algo, int p);
/* "ring" or "halving-doubling". A static string. */
const char *cti_ar_name(cti_ar_algo algo);

/* Piece c of the elements [at, at + n) cut into p pieces as even as they
 * go (the first n % p one longer): its first element and its length. The
 * ring's chunks, and the shares of a bucket on a host (grad_sync.c). */
void cti_ar_chunk(int64_t at, int64_t n, int p, int c, int64_t *off, int64_t *len);

/* The steps of `algo` for rank r of p (p >= 2, cti_ar_fits) over the
 * elements [at, at + n) of a buffer. Returns how many, with *out a NEW
 * array (free) — or -1 when out of memory, or p, r or algo do not fit
 * (*out NULL). */
int cti_ar_steps(cti_ar_algo algo, int p, int r, int64_t at, int64_t n, cti_ar_step **out);

/* No rank: a step's send_to or recv_from when it sends or receives
 * nothing (MPI_PROC_NULL to the poster). */
#define CT_AR_NOBODY (-1)

/* A reduce to one rank instead (a sharded optimizer's bucket, which only
 * its owner steps): root receives every other rank's copy of [at, at + n)
 * in rank order and adds it, p - 1 addition steps, the last dividing by
 * the ranks; every other rank has one step, sending its copy to root and
 * receiving nothing. Each rank sends or receives (p-1)/p of the buffer
 * over its buckets when roots take turns, half an all-reduce. Returns the
 * count with *out NEW, or -1 as cti_ar_steps. */
int cti_ar_reduce_steps(int p, int r, int root, int64_t at, int64_t n, cti_ar_step **out);

#endif
