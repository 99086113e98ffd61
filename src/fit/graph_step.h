/* src/fit/graph_step.h — the training step as a CUDA graph
 * (ct_fit_opts.cuda_graphs; trial.h says what users see). Internal to
 * ctrial; the loop (loop.c) drives it:
 *
 *     cti_graph_step_new(ctx, &ctx->graph);     // after setup: refuses what cannot be captured
 *     ...
 *     m = cti_graph_step_run(ctx->graph, ctx, batch, epoch, idx, eager_step);   // per batch
 *     ...
 *     cti_graph_step_free(ctx->graph);
 *
 * PyTorch's whole-network recipe (torch.cuda.graphs, "Whole-network
 * capture"), with the loop's batches in place of its loop:
 *   1. warm-up: the first cuda_graph_warmup batches run `step` eagerly on
 *      the graph's side stream (which waits for the current stream before,
 *      and the current stream for it after), so that optimizer state,
 *      cuBLAS workspaces and the allocator's blocks exist before capture;
 *   2. capture: the batch is deep-copied into static input tensors on the
 *      device, every wrapped optimizer's gradients are set to None (backward
 *      then allocates them in the graph's pool), and `step` runs under
 *      capture with the static batch; its metrics are the static outputs.
 *      Capture executes nothing, so the graph is then replayed once for
 *      this batch;
 *   3. replay: each later batch is checked against the static batch
 *      (structure, shapes, dtypes, devices, host values) and copied into it
 *      (device-to-device, asynchronous), the graph is replayed on the
 *      current stream, and the loop gets device clones of the static
 *      outputs (no host sync; the next replay overwrites the outputs);
 *   4. re-capture: before each replay the wrapped optimizers'
 *      hyperparameters are compared on the host with those at capture
 *      (they are baked into the graph as kernel arguments); a difference
 *      re-captures with this batch, once; differences on two batches in a
 *      row are refused (CT_ENOTSUP), since a capture per batch costs more
 *      than eager execution.
 *
 * What is captured is one whole optimizer step (aggregation_frequency 1):
 * accumulation batches would need a second graph, which this mode does
 * not keep. Under mpirun the mode is refused: grad_sync lends bucket slots
 * and launches buckets from host decisions made during each backward.
 * Capturability of the update: SGD runs entirely on the device in all its
 * paths; Adam/AdamW only fused (their foreach and single-tensor updates
 * read the step count with item() on the CPU, so a replay would keep the
 * captured bias correction); RMSprop and Adagrad keep their step count in
 * a CPU tensor that a replay would not advance. Under fp16 AMP the
 * GradScaler's step, unscale and update run on the device only when every
 * optimizer group is fused (otherwise its step reads found_inf on the
 * host), so that is required too; autocast itself is captured as it is. */
#ifndef CTRIAL_FIT_GRAPH_STEP_H
#define CTRIAL_FIT_GRAPH_STEP_H

#include "fit/context.h"

typedef struct cti_graph_step cti_graph_step;

/* One training step run eagerly: train_batch (with simple mode's backward
 * and step). Returns the NEW dict of metrics, tensors detached, or NULL +
 * error. Called inside the loop's per-batch scope. */
typedef ct_value *(*cti_step_fn)(ct_context *ctx, const ct_value *batch, int64_t epoch_idx, int64_t batch_idx);

/* Checks that the trial's setup can be captured (in this order:
 * cuda_graph_warmup >= 1 and aggregation_frequency 1, CT_ECONFIG; one rank
 * and capturable optimizers, CT_ENOTSUP; a CUDA device, CT_ECONFIG, with
 * every optimizer parameter on it, CT_EDEVICE) and makes the graph.
 * *out receives a NEW step, or NULL with the error. */
int cti_graph_step_new(ct_context *ctx, cti_graph_step **out);
/* One batch: warm-up, capture or replay, as above. NEW metrics dict, or
 * NULL + error. */
ct_value *cti_graph_step_run(cti_graph_step *gs, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                            int64_t batch_idx, cti_step_fn step);
/* How many times the step was captured so far (0 for NULL). */
int64_t cti_graph_step_captures(const cti_graph_step *gs);
/* Waits for the device, then frees the graph, its pool and the static
 * tensors. Accepts NULL. */
void cti_graph_step_free(cti_graph_step *gs);

#endif
