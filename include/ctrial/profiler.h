/*
 * ctrial/profiler.h — libtorch's profiler on a schedule (torch.profiler.profile
 * with torch.profiler.schedule), writing Chrome/Perfetto traces.
 *
 * A profiler counts steps (one step is one training batch) and follows
 * torch.profiler.schedule(wait, warmup, active, repeat, skip_first): it skips
 * the first `skip_first` steps, then runs cycles of `wait` idle steps,
 * `warmup` steps traced and thrown away (the tracer's start-up cost stays out
 * of the numbers) and `active` steps recorded; at the end of each cycle's
 * last active step it writes the cycle's trace, a Chrome trace JSON file
 * that chrome://tracing, ui.perfetto.dev and TensorBoard's profiler plugin
 * (torch-tb-profiler) open. Each step is a `ProfilerStep#<n>` range in the
 * trace, so the timeline shows one range per batch, with the aten ops,
 * autograd nodes and named ranges (ct_record_function_begin) inside it and,
 * on a GPU, the CUDA runtime calls and kernels they launched:
 *
 *     ct_profiler_opts o = ct_profiler_defaults();  // wait 1, warmup 1, active 3, repeat 1
 *     ct_profiler *prof = ct_profiler_new(&o, "output/profiler", "rank0");
 *     if (!prof) return fprintf(stderr, "%s\n", ct_last_error()), 1;
 *     for (int64_t b = 0; b < n_batches; b++) {        // batch b is ProfilerStep#b
 *         ct_scope *s = ct_scope_begin();
 *         ct_record_function *r = ct_record_function_begin("forward");
 *         ct_tensor *loss = ct_cross_entropy(ct_nn_forward(net, x), y);
 *         ct_record_function_end(r);
 *         ct_optim_zero_grad(opt, true);
 *         ct_backward(loss);
 *         ct_optim_step(opt);
 *         ct_scope_end(s);
 *         if (ct_profiler_step(prof) != 0)              // prof.step()
 *             fprintf(stderr, "%s\n", ct_last_error());
 *     }
 *     ct_profiler_free(prof);  // stops first: a window still recording is written
 *
 * With the defaults, step 0 waits, step 1 warms up, steps 2..4 are recorded
 * and the ct_profiler_step call that ends step 4 writes
 * output/profiler/rank0.0.pt.trace.json.
 *
 * Trace files are named `<name>.<cycle>.pt.trace.json`, the cycle counted
 * from 0: torch.profiler.tensorboard_trace_handler's
 * `<worker>.<number>.pt.trace.json`, the only names TensorBoard's profiler
 * plugin lists (it shows `name` as the worker and the cycle as the span). A
 * file of the same name is replaced, so give each run and each rank its own
 * `name` or directory.
 *
 * One profiler per process. libtorch keeps a single profiler session per
 * process (Kineto's), so ct_profiler_new refuses a second profiler until the
 * first is stopped (CT_ESTATE), and refuses when libtorch's profiler is
 * already enabled on the calling thread by someone else.
 *
 * Threads. The profiler records the ops run on the thread that created it
 * and on the threads libtorch hands that thread's state to: autograd's
 * backward worker threads (CUDA backward runs on one per device) and
 * at::launch tasks. Ops run on other threads (the data loader's workers,
 * threads you start) are not recorded. CUDA activity (kernels, copies,
 * memsets) comes from CUPTI and covers the whole process. libtorch keeps the
 * profiler's state per thread, so create, step and stop a profiler on one
 * thread (CT_ESTATE elsewhere) and end each record_function range on the
 * thread that began it. A profiler has no internal lock.
 */
#ifndef CTRIAL_PROFILER_H
#define CTRIAL_PROFILER_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_profiler ct_profiler;
typedef struct ct_record_function ct_record_function;

/* torch.profiler.schedule(wait=, warmup=, active=, repeat=, skip_first=,
 * skip_first_wait=). Steps are numbered from 0. Step s is idle while
 * s < skip_first; after that, with t = s - skip_first (+ wait when
 * skip_first_wait), cycle t / (wait + warmup + active) is idle for its
 * first `wait` steps, warms up for `warmup` steps and records `active`
 * steps; once `repeat` cycles are done (repeat > 0) every later step is
 * idle. */
typedef struct {
    int skip_first;      /* steps ignored before the first cycle (0); >= 0 */
    int wait;            /* idle steps at the start of each cycle (1); >= 0 */
    int warmup;          /* steps traced but discarded (1); >= 0; 0 skews the
                            first recorded step, as torch warns */
    int active;          /* steps recorded and written (3); >= 1 */
    int repeat;          /* cycles; 0 = until the profiler stops (1); >= 0 */
    int skip_first_wait; /* nonzero: the first cycle starts without its
                            `wait` steps, as in torch 2.11 (0) */
} ct_profiler_schedule;

typedef struct {
    ct_profiler_schedule schedule;
    bool cpu;            /* ProfilerActivity.CPU: ops and ranges (true) */
    bool cuda;           /* ProfilerActivity.CUDA: CUDA runtime calls, kernels,
                            copies (true; ignored, with no error, where no GPU
                            is present) */
    bool record_shapes;  /* input shapes and dtypes of each op (false) */
    bool profile_memory; /* tensor allocations and frees (false) */
    bool with_stack;     /* the call stacks libtorch knows (TorchScript,
                            Python); ops called from C have none (false) */
} ct_profiler_opts;

/* The defaults above: schedule {skip_first 0, wait 1, warmup 1, active 3,
 * repeat 1, skip_first_wait 0}, CPU and CUDA activity, no shapes, memory or
 * stacks. */
CT_API ct_profiler_opts ct_profiler_defaults(void);

/* `with torch.profiler.profile(...) as prof:` entered: a NEW profiler that
 * writes its traces into `dir` (created with its parents if missing) as
 * `<name>.<cycle>.pt.trace.json`. `o` NULL means the defaults. `name`
 * tells writers apart (e.g. "rank0"); NULL means "<hostname>_<pid>",
 * tensorboard_trace_handler's default; it must not be empty or contain '/'.
 *
 * Step 0 starts now: its `ProfilerStep#0` range opens, and when the schedule
 * traces step 0 tracing starts here. So create the profiler right before the
 * first step's work, on the thread that runs the steps.
 *
 * NULL + error: CT_EINVAL for a negative count, active < 1, no activity
 * (cpu and cuda both false), a NULL dir or a bad name, each message naming
 * the field; CT_EDEVICE when CUDA is the only activity asked for and no GPU
 * is present (torch asserts "No activities specified" there); CT_EIO naming
 * the path when `dir` cannot be created or is not a directory; CT_ESTATE
 * when another ct_profiler is active (created and not stopped) in this
 * process or libtorch's profiler is already enabled on this thread. */
CT_API ct_profiler *ct_profiler_new(const ct_profiler_opts *o, const char *dir, const char *name);

/* prof.step(): the end of one step (one training batch). Closes the step's
 * `ProfilerStep#<n>` range, moves the schedule to step n + 1 and acts on the
 * change exactly as torch.profiler.profile does: idle -> warm-up prepares
 * tracing, warm-up -> recording starts it, and after a cycle's last active
 * step recording stops and the cycle's trace is written (then the next
 * cycle may prepare or start at once). Opens `ProfilerStep#<n+1>`.
 *
 * A failed write is CT_EIO naming the path; the schedule goes on and the
 * next cycle is still traced. CT_ESTATE: p is stopped, or this is not the
 * thread that created p (nothing changes). Returns a status. */
CT_API int ct_profiler_step(ct_profiler *p);

/* The profiler's __exit__: closes the current step's range; a window still
 * recording (the schedule was in its active steps) is stopped and written,
 * up to and including the current step, as torch does; a warm-up in
 * progress is discarded. Releases the process's profiler slot, so another
 * profiler may be created. Idempotent: a stopped profiler returns 0.
 * CT_ESTATE on another thread than the one that created p (nothing
 * changes); CT_EIO naming the path when the last trace cannot be written
 * (the profiler is stopped all the same). Returns a status. */
CT_API int ct_profiler_stop(ct_profiler *p);

/* The path of the latest trace written ("" if none; NULL if p is NULL):
 * `dir` + "/" + file name. Borrowed: valid until the next call on p. */
CT_API const char *ct_profiler_last_trace(const ct_profiler *p);

/* The number of the step in progress: 0 after ct_profiler_new, one more
 * after each ct_profiler_step (prof.step_num). -1 if p is NULL. */
CT_API int64_t ct_profiler_step_num(const ct_profiler *p);

/* Stops p first (ct_profiler_stop; its error, if any, is dropped), then
 * frees it. Accepts NULL. Call it on the thread that created p: elsewhere
 * a window still recording cannot be stopped (libtorch's state is that
 * thread's), so it is lost and libtorch's profiler stays enabled on that
 * thread. */
CT_API void ct_profiler_free(ct_profiler *p);

/* `with torch.profiler.record_function(name):` entered: a named range on
 * this thread's profile (a user_annotation in the trace, around whatever
 * runs on this thread until it ends). Costs next to nothing when no
 * profiler is recording; a range begun while none records stays out of the
 * trace even if recording starts before it ends. NEW handle: end it with
 * ct_record_function_end on the same thread, ranges nested in reverse order.
 * NULL + CT_EINVAL when name is NULL. */
CT_API ct_record_function *ct_record_function_begin(const char *name);

/* Ends the range and frees r. Accepts NULL. */
CT_API void ct_record_function_end(ct_record_function *r);

#ifdef __cplusplus
}
#endif
#endif
