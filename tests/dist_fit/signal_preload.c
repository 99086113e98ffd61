/* tests/dist_fit/signal_preload.c — an LD_PRELOAD library for test_signals.py:
 * MPI_Init_thread first raises SIGTERM on the rank that
 * DIST_FIT_SIGTERM_IN_MPI_INIT names (OMPI_COMM_WORLD_RANK), then starts MPI
 * as usual. A stop signal during MPI's start-up, before ct_fit runs, at a
 * moment no timing can miss. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef int (*init_thread_fn)(int *, char ***, int, int *);

__attribute__((visibility("default"))) int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    const char *want = getenv("DIST_FIT_SIGTERM_IN_MPI_INIT"), *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (want && rank && atoi(want) == atoi(rank)) raise(SIGTERM);
    void *sym = dlsym(RTLD_NEXT, "MPI_Init_thread");
    init_thread_fn real = NULL;
    memcpy(&real, &sym, sizeof real);
    return real ? real(argc, argv, required, provided) : 1;
}
