/* src/base/clock.h — the two clocks ctrial reads. Internal to ctrial.
 *
 * Durations (the loop's time shares, the loader's waits, gradient
 * communication) use the monotonic clock, which never steps; what a person
 * or another program reads as a date (metrics.jsonl's "time", checkpoint
 * metadata, TensorBoard's wall_time) uses the wall clock. */
#ifndef CTRIAL_BASE_CLOCK_H
#define CTRIAL_BASE_CLOCK_H

/* Seconds on CLOCK_MONOTONIC: for measuring durations. */
double cti_clock_monotonic(void);
/* Seconds since the Unix epoch (CLOCK_REALTIME): for timestamps. */
double cti_clock_wall(void);

#endif
