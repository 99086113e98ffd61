/*
 * ctrial/export.h — bring the model from Python: train a torch.export
 * program from C.
 *
 * A model written in Python (torchvision's, timm's, a team's own modules)
 * is exported once, in Python, to a .pt2 archive: the graph of ATen
 * operators torch.export.export traces (its training IR, in which
 * BatchNorm, dropout and in-place updates are the calls eager PyTorch
 * makes) and the module's weights under their state-dict names.
 * ct_nn_load_exported reads the archive into a ct_module whose forward
 * runs that graph node by node through the dispatcher (ops.h), so autograd
 * gives the backward, and AMP, CUDA graphs, the gradient sync under
 * mpirun and checkpoints work as for any module. No Python runs in the
 * process.
 *
 *     # Python, once (tools/export_model.py does this for any module):
 *     #   python tools/export_model.py torchvision.models:resnet18 \
 *     #       --kwargs '{"num_classes": 10}' --input 'float32[N,3,32,32]' -o resnet18.pt2
 *
 *     // C
 *     ct_module *net = ct_nn_load_exported("resnet18.pt2", NULL);
 *     if (!net) { fprintf(stderr, "%s\n", ct_last_error()); return 1; }
 *     ct_tensor *logits = ct_nn_forward(net, x);       // x: [N, 3, 32, 32], any N
 *     ...
 *     ct_nn_free(net);
 *
 * Intended usage:
 *   1. Export the module in Python with tools/export_model.py: it writes a
 *      training program (the module in train()) and an evaluation program
 *      (in eval()) into one archive, the batch dimension dynamic.
 *   2. Load it where the trial builds its models (init), wrap it as any
 *      module: ct_ctx_wrap_model(ctx, ct_nn_load_exported(path, NULL)).
 *      Parameters are leaf tensors that require grad, named as in the
 *      module's state_dict(), so optimizers, clipping, checkpoints and warm
 *      starts see them as Python does.
 *   3. Train: ct_nn_forward (one tensor in, one out) or ct_nn_call (several
 *      inputs, keywords, tuples and dicts out, as the Python forward takes
 *      and returns them). ct_nn_train(m, false) (what the loop does for
 *      validation) runs the evaluation program.
 *   4. Take the checkpoint back to Python: its models_state_dict loads into
 *      the original nn.Module with strict=True.
 *
 * Training and evaluation. A program exported in train() mode has
 * BatchNorm's batch statistics and dropout's masks baked in. With an
 * archive holding an "eval" program beside the training one (what
 * tools/export_model.py writes), the module runs it in eval mode, sharing
 * the training program's parameters and buffers by name: whatever the
 * module's eval() changes, the graphs say. An archive of one program
 * (torch.export.save's) runs it in eval mode with the flags of the known
 * operators rewritten, as torch.ao.quantization.move_exported_model_to_eval
 * does: BatchNorm on its running statistics (and no num_batches_tracked
 * increment), dropout and the dropout of attention and recurrent layers
 * off. docs/api/export.md says why.
 *
 * Shapes. A dimension exported as dynamic (torch.export.Dim) takes any
 * size within its range, so a short last batch runs; sizes computed from
 * it (x.view(B, -1)) are computed from the actual input. Every call
 * checks its inputs against the program's (dtype, rank, static sizes,
 * ranges) and a mismatch is CT_ESHAPE or CT_EDTYPE naming the input.
 *
 * Devices. Weights are loaded on the CPU; ct_nn_to_device moves them,
 * and the graph's own device arguments (torch.arange(..., device=x.device)
 * traced on the CPU) follow the module.
 *
 * Ownership and threads: as any module (nn.h). One module is not to be run
 * from two threads at once.
 */
#ifndef CTRIAL_EXPORT_H
#define CTRIAL_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    /* The program that trains: NULL for "model" (torch.export.save's
     * name, and the training program of tools/export_model.py), or the
     * only program of an archive that has one. */
    const char *program;
    /* The program of eval mode: NULL for "eval" when the archive has one,
     * else the training program with its flags rewritten (above); "" for
     * the rewrite even when an "eval" program exists. */
    const char *eval_program;
} ct_export_opts;

/* The defaults: both NULL. */
CT_API ct_export_opts ct_export_default_opts(void);

/* Reads the .pt2 archive at path (torch.export.save's, torch 2.11) into a
 * NEW module of type "ExportedProgram" in train mode on the CPU, or NULL +
 * error: CT_EIO (the file), CT_EFORMAT (not a .pt2 archive, truncated or
 * damaged: the file, entry and field), CT_ENOTSUP (another format version;
 * a dtype, argument or higher-order operator ctrial cannot run), CT_EINVAL
 * (an operator the dispatcher does not know: a custom op whose library is
 * not loaded; the message names the node and its source line). opts may
 * be NULL. */
CT_API ct_module *ct_nn_load_exported(const char *path, const ct_export_opts *opts);

/* Whether m is a module ct_nn_load_exported made. */
CT_API bool ct_nn_is_exported(const ct_module *m);

enum { CT_EXPORT_MAX_DIMS = 16 };

/* One tensor an exported program takes or returns, as it was traced. */
typedef struct {
    const char *name;                  /* the forward's argument ("x") or the graph's output name; borrowed */
    ct_dtype dtype;
    int ndim;
    int64_t size[CT_EXPORT_MAX_DIMS];  /* -1 for a dynamic dimension */
} ct_exported_tensor;

/* The training program's flat user inputs and outputs (pytree leaves in
 * order: the positional arguments, then the keywords), counted by
 * *n_inputs and *n_outputs (either may be NULL). Returns a status:
 * CT_EINVAL when m is not an exported module. */
CT_API int ct_nn_exported_arity(const ct_module *m, size_t *n_inputs, size_t *n_outputs);
/* Input or output i into *out. CT_EINDEX past the end; CT_ENOTSUP for one
 * that is not a tensor (a number, None); CT_EINVAL for a module that is
 * not exported. */
CT_API int ct_nn_exported_input(const ct_module *m, size_t i, ct_exported_tensor *out);
CT_API int ct_nn_exported_output(const ct_module *m, size_t i, ct_exported_tensor *out);

#ifdef __cplusplus
}
#endif
#endif
