/*
 * ctrial/ctrial.h — the umbrella header: everything a trial needs.
 *
 *     #include <ctrial/ctrial.h>
 *
 * Areas, one header each, each implemented by one module (docs/design.md):
 * error.h (status codes, messages), dtype.h (dtypes and devices), tensor.h
 * (tensors, ops, autograd, scopes), ops.h (every registered operator by
 * name, through libtorch's dispatcher), nn.h (modules and layers), nn_sequence.h (recurrent layers, attention,
 * transformers), optim.h
 * (optimizers), sched.h (LR schedulers), value.h (state-dict trees), data.h
 * (datasets, samplers, loaders, per-record transforms), vision.h (JPEG and
 * PNG images, image folders, CIFAR, torchvision's transforms), trial.h (trials, the context, ct_fit),
 * fit_opts.h (periods, ct_fit_opts), main.h (ct_main), metrics.h (reducers), callback.h (callbacks), ckpt.h (PyTorch's
 * file format, checkpoint directories, loading a trial from one), dist.h
 * (ranks and collectives under mpirun), cuda.h (GPUs), amp.h (autocast and
 * gradient scaling), profiler.h (libtorch's profiler on torch.profiler's
 * schedule, Chrome/Perfetto traces), summary.h (TensorBoard scalars,
 * histograms, images and text from tensors: SummaryWriter). config.h
 * (generated) says how this copy was built.
 */
#ifndef CTRIAL_CTRIAL_H
#define CTRIAL_CTRIAL_H

#include <ctrial/config.h>
#include "amp.h"
#include "callback.h"
#include "ckpt.h"
#include "cuda.h"
#include "dist.h"
#include "data.h"
#include "dtype.h"
#include "error.h"
#include "export.h"
#include "fit_opts.h"
#include "main.h"
#include "metrics.h"
#include "nn.h"
#include "nn_sequence.h"
#include "ops.h"
#include "optim.h"
#include "profiler.h"
#include "sched.h"
#include "summary.h"
#include "tensor.h"
#include "trial.h"
#include "value.h"
#include "vision.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "0.1.0": the version of the library actually loaded (compare with
 * CTRIAL_VERSION_STRING, the headers' version). */
CT_API const char *ct_version(void);

#ifdef __cplusplus
}
#endif
#endif
