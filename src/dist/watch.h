/* src/dist/watch.h — the collective timeout: a rank that waits in a
 * collective longer than ct_dist_timeout() ends the job, naming the ranks
 * that did not arrive. Internal to ctrial.
 *
 * Every collective ctrial makes over MPI is a set of nonblocking requests
 * polled by its caller (dist.c's collectives, point to point on a
 * communicator of their own; grad_sync.c's ring), so a waiting rank keeps
 * control. The poll loop calls cti_dist_watch_poll between polls:
 *
 *     cti_dist_watch w;
 *     cti_dist_watch_begin(&w, "the gradient all-reduce");
 *     while (!done) { MPI_Testall(...); if (!done) cti_dist_watch_poll(&w); }
 *     cti_dist_watch_end(&w);
 *
 * What that costs a collective that completes: a counter increment and
 * one clock reading at begin, and one clock reading per 16 polls while it
 * waits. After 2 ms of waiting it also yields the CPU once per 16 polls
 * (a rank waiting for a slower one on the same cores leaves them to it);
 * with more ranks on the machine than CPUs, at every poll from the start.
 *
 * Naming the stuck rank. A rank past the deadline asks every other rank,
 * on a second communicator, where it is; a rank inside any watched wait
 * answers at its next poll with the collective it waits in (its name and
 * this rank's count of collectives so far) and for how long. A rank that
 * gives no answer within a grace period (a tenth of the timeout, 1 to 10
 * s) is outside every collective: in the trial's code, in a callback, in a
 * blocking call, or dead. The lowest waiting rank then ends the job
 * (ct_dist_abort with CT_EXIT_DIST) with one line naming the ranks that
 * did not arrive, the collective and the timeout; the other waiting ranks
 * end it a grace period later if it is still running. */
#ifndef CTRIAL_DIST_WATCH_H
#define CTRIAL_DIST_WATCH_H

#include <stdint.h>

typedef struct {
    const char *what; /* the collective, for messages ("ct_dist_allreduce_i64", "the gradient all-reduce") */
    double start;     /* when this rank began waiting (monotonic seconds) */
    double next_serve;
    unsigned polls;
    int64_t seq;      /* this rank's count of collectives, this one included */
} cti_dist_watch;

/* A collective begins on this rank (under mpirun only). */
void cti_dist_watch_begin(cti_dist_watch *w, const char *what);
/* Between two polls of the collective's requests. Past the deadline it
 * does not return: the job ends. */
void cti_dist_watch_poll(cti_dist_watch *w);
/* The collective completed (or failed) on this rank. */
void cti_dist_watch_end(cti_dist_watch *w);

/* What the loop is at, for the timeout's message: `batches` points at the
 * number of batches trained (NULL: nothing to say). The pointer must stay
 * valid until it is replaced or cleared. */
void cti_dist_watch_progress(const int64_t *batches);

#endif
