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

void cti_fit_catch_stop_signals_until_exit(void);

#endif
