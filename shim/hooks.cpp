// shim/hooks.cpp — autograd hooks with C callbacks: the post-accumulate-grad
// hook that gradient synchronisation (src/dist/grad_sync.c) hangs on every
// parameter, as DistributedDataParallel's reducer does.
#include "internal.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>

using ct::Failure;

namespace {

// libtorch owns this object (in the tensor's AutogradMeta) and calls it from
// AccumulateGrad after .grad has been updated. It keeps the caller's handle,
// not a new one: the callback can compare it with its own bookkeeping.
struct CHook final : torch::autograd::PostAccumulateGradHook {
    CHook(ct_tensor *h, ct_post_accumulate_grad_fn f, void *c) : handle(h), fn(f), ctx(c) {}

    void operator()(const torch::autograd::Variable &v) override {
        // Handles are never returned to malloc, so a freed one still reads as
        // dead; a reused one names another tensor. Either way fn is skipped.
        if (handle->magic != ct::kLive || !handle->t.is_same(v)) return;
        try {
            fn(handle, ctx);
        } catch (...) {
            // fn is C and cannot throw; nothing may unwind into autograd's
            // engine from here regardless.
        }
    }

    ct_tensor *handle;
    ct_post_accumulate_grad_fn fn;
    void *ctx;
};

}  // namespace

extern "C" int ct_set_post_accumulate_grad_hook(ct_tensor *t, ct_post_accumulate_grad_fn fn, void *ctx) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] {
        if (!fn) {
            // Removal never materialises autograd metadata the tensor lacks.
            if (torch::autograd::AutogradMeta *meta = torch::autograd::impl::get_autograd_meta(t->t))
                meta->post_acc_grad_hooks_.reset();
            return;
        }
        if (!t->t.requires_grad())
            throw Failure{CT_ESTATE, "cannot register a hook on a tensor that doesn't require gradient (" +
                                         ct::describe(t->t) + ")"};
        if (!t->t.is_leaf())
            throw Failure{CT_ESTATE, "post accumulate grad hooks cannot be registered on non-leaf tensors"};
        torch::autograd::impl::set_post_acc_grad_hooks(t->t, std::make_unique<CHook>(t, fn, ctx));
    });
}
