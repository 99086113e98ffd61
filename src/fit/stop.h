/* src/fit/stop.h — stop signals (SIGTERM, SIGINT) for the whole process.
 * Internal to ctrial.
 *
 * ct_fit catches them while it runs (loop.c). ct_main, which owns its
 * process, calls cti_fit_catch_stop_signals_until_exit first thing: from
 * then on until the process exits a stop signal is recorded, never fatal.
 * One caught before ct_fit stops that run before training; one caught
 * after ct_fit returned is only recorded, so that a repeated SIGTERM while
 * the program ends does not kill it (143) after a clean stop. */
#ifndef CTRIAL_FIT_STOP_H
#define CTRIAL_FIT_STOP_H

#include <signal.h>

void cti_fit_catch_stop_signals_until_exit(void);
/* Blocks SIGTERM and SIGINT on the calling thread (*old receives the mask
 * to give back with pthread_sigmask): while a checkpoint is written, and in
 * a thread that writes one, which leaves them to the thread that trains. */
void cti_fit_block_stop_signals(sigset_t *old);

#endif
