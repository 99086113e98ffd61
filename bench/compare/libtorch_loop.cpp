// libtorch_loop — issue 8's workloads as a hand-written libtorch C++ training
// loop: the floor of bench/compare (no harness: no loader, no metrics, no
// hooks; a for loop over batches gathered from tensors in memory).
//
//     libtorch_loop --workload mlp|cnn|resnet|charlm|lstm [--data PATH] [--hp K=V ...]
//                   [--window N] [--windows R] [--warmup-windows K]
//                   [--threads T] [--seed S]
//
// It mirrors bench/gpu/torch_eager.py (the plain-PyTorch side) line for line
// in the C++ API, so that the two differ only in the language around the
// same kernels:
//
//   - the same models, built in the same module order right after
//     torch::manual_seed(seed), so the initial weights are the same draws
//     (torch::nn's Linear, Conv2d, Embedding and LSTM initialise as
//     torch.nn's), then re-initialised as the Python models do (resnet18's
//     kaiming_normal_ convolutions, the LSTM model's uniform embedding and
//     decoder);
//   - the same batch order: numpy's RandomState(seed).shuffle per pass,
//     passes back to back, every batch full (reproduced below with
//     std::mt19937, which is numpy's legacy MT19937, and numpy's
//     random_interval);
//   - the same step: forward (resnet: the digits upsampled to image_size
//     and repeated over 3 channels first), cross-entropy (label smoothing
//     for the digits MLP and CNN), backward, [clip_grad_norm_], optimizer
//     step, zero_grad (set to None), and for the digits the batch's
//     accuracy.
//
// What the C++ API does differently, and the reason final losses agree
// within a tolerance rather than bit for bit: torch::optim::Adam and AdamW
// update the first moment as exp_avg.mul_(beta1).add_(grad, 1 - beta1)
// where Python's use exp_avg.lerp_(grad, 1 - beta1) (the same value up to
// rounding). torch::optim::SGD (resnet) computes what Python's does.
//
// Hyperparameters come as --hp K=V (numbers; true/false for flags), which
// bench/compare/run.py resolves from the workload's example config exactly
// as the Python runners do. Prints one JSON line with the same fields as
// bench/compare/common.py's Windows.result().
#include <torch/torch.h>
#include <torch/version.h>

#include "../idx_file.hpp"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace F = torch::nn::functional;

// ---- hyperparameters ------------------------------------------------------

struct Hparams {
    std::map<std::string, double> v;
    double get(const std::string &k, double def) const {
        auto it = v.find(k);
        return it == v.end() ? def : it->second;
    }
    int64_t geti(const std::string &k, int64_t def) const { return int64_t(get(k, double(def))); }
};

void parse_hp(Hparams &hp, const std::string &kv) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) throw std::runtime_error("--hp " + kv + ": expected K=V");
    std::string k = kv.substr(0, eq), s = kv.substr(eq + 1);
    if (s == "true" || s == "false") {
        hp.v[k] = s == "true";
        return;
    }
    char *end = nullptr;
    double x = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end) throw std::runtime_error("--hp " + kv + ": not a number");
    hp.v[k] = x;
}

// ---- data -----------------------------------------------------------------

using bench::read_file;
using bench::read_idx_u8;

// Determined's training order (as ctrial's sampler and torch_eager.py's
// Shuffled): a numpy RandomState(seed).shuffle of 0..n-1 per pass, passes
// back to back, batches cut across pass ends.
class Shuffled {
  public:
    Shuffled(int64_t n, int64_t batch, uint32_t seed) : n_(n), batch_(batch), rng_(seed) {}

    torch::Tensor next() {
        std::vector<int64_t> out;
        out.reserve(size_t(batch_));
        while (int64_t(out.size()) < batch_) {
            if (pos_ == pass_.size()) next_pass();
            out.push_back(pass_[pos_++]);
        }
        return torch::tensor(out, torch::kLong);
    }

  private:
    // numpy's random_interval(max) for max < 2^32: masked rejection.
    uint64_t interval(uint64_t max) {
        if (max == 0) return 0;
        uint64_t mask = max;
        for (int s = 1; s <= 32; s *= 2) mask |= mask >> s;
        uint64_t value;
        while ((value = (rng_() & mask)) > max) {
        }
        return value;
    }

    // numpy's legacy shuffle of a 1-d array: Fisher-Yates from the end.
    void next_pass() {
        pass_.resize(size_t(n_));
        for (int64_t i = 0; i < n_; i++) pass_[size_t(i)] = i;
        for (int64_t i = n_ - 1; i > 0; i--) std::swap(pass_[size_t(i)], pass_[interval(uint64_t(i))]);
        pos_ = 0;
    }

    int64_t n_, batch_;
    std::mt19937 rng_; // numpy's legacy MT19937 seeding (init_genrand) and output
    std::vector<int64_t> pass_;
    size_t pos_ = 0;
};

// ---- models (examples/mnist's build_mlp / build_cnn, examples/resnet's
// resnet18, examples/charlm's GPT and LSTM) -------------------------------

torch::nn::Sequential digits_mlp(const Hparams &hp, int64_t h, int64_t w) {
    // One push_back per layer, not Sequential(a, b, ...): C++ leaves the
    // order in which arguments are built unspecified, and the layers must
    // draw their initial weights in PyTorch's order.
    int64_t hidden = hp.geti("hidden", 128);
    torch::nn::Sequential s;
    s->push_back(torch::nn::Flatten());
    s->push_back(torch::nn::Linear(h * w, hidden));
    s->push_back(torch::nn::ReLU());
    s->push_back(torch::nn::Dropout(hp.get("dropout2", 0.5)));
    s->push_back(torch::nn::Linear(hidden, 10));
    return s;
}

torch::nn::Sequential digits_cnn(const Hparams &hp, int64_t h, int64_t w) {
    int64_t f1 = hp.geti("n_filters1", 32), f2 = hp.geti("n_filters2", 64), hidden = hp.geti("hidden", 128);
    bool bn = hp.get("batch_norm", 0) != 0;
    torch::nn::Sequential s;
    s->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, f1, 3).padding(1)));
    if (bn) s->push_back(torch::nn::BatchNorm2d(f1));
    s->push_back(torch::nn::ReLU());
    s->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(f1, f2, 3).padding(1)));
    if (bn) s->push_back(torch::nn::BatchNorm2d(f2));
    s->push_back(torch::nn::ReLU());
    s->push_back(torch::nn::MaxPool2d(2));
    s->push_back(torch::nn::Dropout(hp.get("dropout1", 0.25)));
    s->push_back(torch::nn::Flatten());
    s->push_back(torch::nn::Linear(f2 * (h / 2) * (w / 2), hidden));
    s->push_back(torch::nn::ReLU());
    s->push_back(torch::nn::Dropout(hp.get("dropout2", 0.5)));
    s->push_back(torch::nn::Linear(hidden, 10));
    return s;
}

// torchvision.models.resnet18, built as torchvision builds it so that the
// same random numbers are drawn in the same order: each Conv2d draws its
// default kaiming_uniform_ weights when constructed (torch::nn's as
// torch.nn's), and ResNet.__init__ then redraws every Conv2d's weights with
// kaiming_normal_(fan_out, relu) in module order (and sets every BatchNorm's
// weight to 1 and bias to 0, as they are built).
torch::nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
    return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

torch::nn::Conv2d conv1x1(int64_t in, int64_t out, int64_t stride) {
    return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false));
}

struct BasicBlockImpl : torch::nn::Module {
    // shortcut (the 1x1 convolution and BatchNorm of the identity path, or
    // empty) is built by make_layer before the block, as torchvision's
    // _make_layer does, so it draws its weights before conv1; it is
    // registered after bn2 as "downsample", where the Python block assigns
    // it (the state dict's order, and the order of the redraw).
    BasicBlockImpl(int64_t inplanes, int64_t planes, int64_t stride, torch::nn::Sequential shortcut)
        : conv1(register_module("conv1", conv3x3(inplanes, planes, stride))),
          bn1(register_module("bn1", torch::nn::BatchNorm2d(planes))),
          conv2(register_module("conv2", conv3x3(planes, planes, 1))),
          bn2(register_module("bn2", torch::nn::BatchNorm2d(planes))), downsample(shortcut) {
        if (downsample) register_module("downsample", downsample);
    }

    torch::Tensor forward(const torch::Tensor &x) {
        torch::Tensor out = bn1(conv1(x)).relu_();
        out = bn2(conv2(out));
        out += downsample ? downsample->forward(x) : x;
        return out.relu_();
    }

    torch::nn::Conv2d conv1;
    torch::nn::BatchNorm2d bn1;
    torch::nn::Conv2d conv2;
    torch::nn::BatchNorm2d bn2;
    torch::nn::Sequential downsample;
};
TORCH_MODULE(BasicBlock);

struct ResNet18Impl : torch::nn::Module {
    explicit ResNet18Impl(int64_t num_classes)
        : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 64, 7).stride(2).padding(3)
                                                                .bias(false)))),
          bn1(register_module("bn1", torch::nn::BatchNorm2d(64))) {
        layer1 = register_module("layer1", make_layer(64, 1));
        layer2 = register_module("layer2", make_layer(128, 2));
        layer3 = register_module("layer3", make_layer(256, 2));
        layer4 = register_module("layer4", make_layer(512, 2));
        fc = register_module("fc", torch::nn::Linear(512, num_classes));
        for (auto &m : modules(/*include_self=*/false)) {
            if (auto *conv = m->as<torch::nn::Conv2d>()) {
                torch::nn::init::kaiming_normal_(conv->weight, 0, torch::kFanOut, torch::kReLU);
            } else if (auto *bn = m->as<torch::nn::BatchNorm2d>()) {
                torch::nn::init::constant_(bn->weight, 1);
                torch::nn::init::constant_(bn->bias, 0);
            }
        }
    }

    // Two BasicBlocks (resnet18: [2, 2, 2, 2]); the first takes the stride,
    // and the downsample path where the stride or the width changes.
    torch::nn::Sequential make_layer(int64_t planes, int64_t stride) {
        torch::nn::Sequential downsample{nullptr};
        if (stride != 1 || inplanes != planes) {
            downsample = torch::nn::Sequential();
            downsample->push_back(conv1x1(inplanes, planes, stride));
            downsample->push_back(torch::nn::BatchNorm2d(planes));
        }
        torch::nn::Sequential layer;
        layer->push_back(BasicBlock(inplanes, planes, stride, downsample));
        inplanes = planes;
        layer->push_back(BasicBlock(planes, planes, 1, nullptr));
        return layer;
    }

    torch::Tensor forward(const torch::Tensor &x) {
        torch::Tensor y = torch::max_pool2d(bn1(conv1(x)).relu_(), 3, 2, 1);
        y = layer4->forward(layer3->forward(layer2->forward(layer1->forward(y))));
        return fc(torch::flatten(torch::adaptive_avg_pool2d(y, {1, 1}), 1));
    }

    int64_t inplanes = 64;
    torch::nn::Conv2d conv1;
    torch::nn::BatchNorm2d bn1;
    torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
    torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet18);

// examples/resnet's model as its step sees it: the digits upsampled
// (bilinear) to image_size and repeated over 3 channels, then resnet18.
torch::nn::Sequential digits_resnet(const Hparams &hp) {
    const int64_t size = hp.geti("image_size", 32);
    torch::nn::Sequential s;
    s->push_back(torch::nn::Functional([size](const torch::Tensor &x) {
        return F::interpolate(x, F::InterpolateFuncOptions()
                                     .size(std::vector<int64_t>{size, size})
                                     .mode(torch::kBilinear)
                                     .align_corners(false))
            .expand({-1, 3, -1, -1});
    }));
    s->push_back(ResNet18(10));
    return s;
}

struct CausalSelfAttentionImpl : torch::nn::Module {
    CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout)
        : c_attn(register_module("c_attn", torch::nn::Linear(n_embd, 3 * n_embd))),
          c_proj(register_module("c_proj", torch::nn::Linear(n_embd, n_embd))),
          resid_dropout(register_module("resid_dropout", torch::nn::Dropout(dropout))), n_head(n_head),
          n_embd(n_embd), dropout(dropout) {}

    torch::Tensor forward(const torch::Tensor &x) {
        int64_t B = x.size(0), T = x.size(1), C = x.size(2);
        auto qkv = c_attn(x).split(n_embd, 2);
        for (auto &t : qkv) t = t.view({B, T, n_head, C / n_head}).transpose(1, 2);
        auto y = at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, is_training() ? dropout : 0.0,
                                                  /*is_causal=*/true);
        y = y.transpose(1, 2).contiguous().view({B, T, C});
        return resid_dropout(c_proj(y));
    }

    torch::nn::Linear c_attn, c_proj;
    torch::nn::Dropout resid_dropout;
    int64_t n_head, n_embd;
    double dropout;
};
TORCH_MODULE(CausalSelfAttention);

struct BlockImpl : torch::nn::Module {
    BlockImpl(int64_t n_embd, int64_t n_head, double dropout)
        : ln_1(register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd})))),
          attn(register_module("attn", CausalSelfAttention(n_embd, n_head, dropout))),
          ln_2(register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd})))),
          c_fc(register_module("c_fc", torch::nn::Linear(n_embd, 4 * n_embd))),
          c_proj(register_module("c_proj", torch::nn::Linear(4 * n_embd, n_embd))),
          dropout(register_module("dropout", torch::nn::Dropout(dropout))) {}

    torch::Tensor forward(torch::Tensor x) {
        x = x + attn(ln_1(x));
        return x + dropout(c_proj(torch::gelu(c_fc(ln_2(x)))));
    }

    torch::nn::LayerNorm ln_1;
    CausalSelfAttention attn;
    torch::nn::LayerNorm ln_2;
    torch::nn::Linear c_fc, c_proj; // the Python model's mlp.c_fc, mlp.c_proj
    torch::nn::Dropout dropout;
};
TORCH_MODULE(Block);

struct GPTImpl : torch::nn::Module {
    GPTImpl(int64_t vocab, int64_t block_size, int64_t n_layer, int64_t n_head, int64_t n_embd, double dropout)
        : wte(register_module("wte", torch::nn::Embedding(vocab, n_embd))),
          wpe(register_module("wpe", torch::nn::Embedding(block_size, n_embd))),
          drop(register_module("drop", torch::nn::Dropout(dropout))) {
        for (int64_t i = 0; i < n_layer; i++)
            h.push_back(register_module("h" + std::to_string(i), Block(n_embd, n_head, dropout)));
        ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd})));
        lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(n_embd, vocab).bias(false)));
    }

    torch::Tensor forward(const torch::Tensor &idx) {
        auto pos = torch::arange(idx.size(1), torch::TensorOptions().dtype(torch::kLong).device(idx.device()));
        auto x = drop(wte(idx) + wpe(pos));
        for (auto &b : h) x = b(x);
        return lm_head(ln_f(x));
    }

    torch::nn::Embedding wte, wpe;
    torch::nn::Dropout drop;
    std::vector<Block> h;
    torch::nn::LayerNorm ln_f{nullptr};
    torch::nn::Linear lm_head{nullptr};
};
TORCH_MODULE(GPT);

// examples/charlm's LSTM model (hparam model "lstm"): PyTorch's
// word_language_model RNNModel, batch first, untied, a fresh state per
// window. torch::nn::LSTM draws its weights as torch.nn.LSTM (uniform in
// +-1/sqrt(hidden), parameter by parameter); then the embedding and the
// decoder are redrawn as RNNModel.init_weights does.
struct RNNModelImpl : torch::nn::Module {
    RNNModelImpl(int64_t ntoken, int64_t ninp, int64_t nhid, int64_t nlayers, double dropout)
        : drop(register_module("drop", torch::nn::Dropout(dropout))),
          encoder(register_module("encoder", torch::nn::Embedding(ntoken, ninp))),
          rnn(register_module("rnn", torch::nn::LSTM(torch::nn::LSTMOptions(ninp, nhid)
                                                         .num_layers(nlayers)
                                                         .dropout(dropout)
                                                         .batch_first(true)))),
          decoder(register_module("decoder", torch::nn::Linear(nhid, ntoken))) {
        const double initrange = 0.1;
        torch::nn::init::uniform_(encoder->weight, -initrange, initrange);
        torch::nn::init::zeros_(decoder->bias);
        torch::nn::init::uniform_(decoder->weight, -initrange, initrange);
    }

    // The logits (the Python model also returns the final state, which the
    // step drops).
    torch::Tensor forward(const torch::Tensor &input) {
        torch::Tensor output = std::get<0>(rnn(drop(encoder(input))));
        return decoder(drop(output));
    }

    torch::nn::Dropout drop;
    torch::nn::Embedding encoder;
    torch::nn::LSTM rnn;
    torch::nn::Linear decoder;
};
TORCH_MODULE(RNNModel);

// ---- the window timer (bench/compare/common.py's Windows) ------------------

double now_s() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

struct Windows {
    int64_t window = 0, windows = 0, warmup = 0;
    std::vector<torch::Tensor> losses;
    std::vector<double> seconds, means;
    double t0 = now_s(); // the first window starts before any set-up
    int64_t count = 0;

    int64_t total_steps() const { return window * (windows + warmup); }

    void step_end(const torch::Tensor &loss) {
        losses.push_back(loss.detach());
        if (++count % window) return;
        double mean = torch::stack(losses).to(torch::kFloat).mean().item<double>();
        double t1 = now_s();
        seconds.push_back(t1 - t0);
        means.push_back(mean);
        losses.clear();
        t0 = t1;
    }
};

std::string json_list(const std::vector<double> &xs) {
    std::string s = "[";
    char num[64];
    for (size_t i = 0; i < xs.size(); i++) {
        std::snprintf(num, sizeof num, "%s%.17g", i ? ", " : "", xs[i]);
        s += num;
    }
    return s + "]";
}

// ---- the workloads ---------------------------------------------------------

// mlp and cnn: Adam, cross-entropy with label smoothing; resnet: SGD with
// momentum and weight decay, no label smoothing (torch_eager.py's ResNet);
// no clipping.
void train_digits(const std::string &workload, const std::string &data, const Hparams &hp, uint32_t seed,
                  Windows &timer) {
    auto gz_or_plain = [&](const std::string &name) {
        std::string gz = data + "/" + name + ".gz";
        std::FILE *f = std::fopen(gz.c_str(), "rb");
        if (!f) return data + "/" + name;
        std::fclose(f);
        return gz;
    };
    torch::Tensor x = read_idx_u8(gz_or_plain("train-images-idx3-ubyte")).to(torch::kFloat).div_(255).unsqueeze(1);
    torch::Tensor y = read_idx_u8(gz_or_plain("train-labels-idx1-ubyte")).to(torch::kLong);
    const int64_t h = x.size(2), w = x.size(3);
    Shuffled order(x.size(0), hp.geti("global_batch_size", 32), seed);
    const bool resnet = workload == "resnet";
    const double label_smoothing = resnet ? 0.0 : hp.get("label_smoothing", 0.0);

    torch::manual_seed(seed); // as ct_fit and torch_eager.py, right before the model
    torch::nn::Sequential model = workload == "mlp" ? digits_mlp(hp, h, w)
                                  : resnet          ? digits_resnet(hp)
                                                    : digits_cnn(hp, h, w);
    std::unique_ptr<torch::optim::Optimizer> opt;
    if (resnet)
        opt = std::make_unique<torch::optim::SGD>(model->parameters(),
                                                  torch::optim::SGDOptions(hp.get("learning_rate", 0.02))
                                                      .momentum(hp.get("momentum", 0.9))
                                                      .weight_decay(hp.get("weight_decay", 5e-4)));
    else
        opt = std::make_unique<torch::optim::Adam>(model->parameters(),
                                                   torch::optim::AdamOptions(hp.get("learning_rate", 1e-3)));
    model->train();

    for (int64_t step = 0; step < timer.total_steps(); step++) {
        torch::Tensor i = order.next();
        torch::Tensor bx = x.index_select(0, i), by = y.index_select(0, i);
        torch::Tensor out = model->forward(bx);
        torch::Tensor loss =
            F::cross_entropy(out, by, F::CrossEntropyFuncOptions().label_smoothing(label_smoothing));
        loss.backward();
        opt->step();
        opt->zero_grad(/*set_to_none=*/true);
        // The training accuracy, as every other system's digits step (kept
        // on the device, as torch_eager.py's; nothing reads it here).
        torch::Tensor acc = out.argmax(1).eq(by).to(torch::kFloat).mean();
        (void)acc;
        timer.step_end(loss);
    }
}

// charlm (the GPT) and lstm (the LSTM model): AdamW with two parameter
// groups (decay on matrices only), gradient clipping, tiny shakespeare as
// bytes.
void train_charlm(const std::string &workload, const std::string &data, const Hparams &hp, uint32_t seed,
                  Windows &timer) {
    std::vector<unsigned char> text = read_file(data);
    int64_t lut[256];
    for (auto &v : lut) v = -1;
    for (unsigned char c : text) lut[c] = 0;
    int64_t V = 0;
    for (auto &v : lut)
        if (v == 0) v = V++; // sorted set of the bytes present
    std::vector<int64_t> ids(text.size());
    for (size_t k = 0; k < text.size(); k++) ids[k] = lut[text[k]];
    const int64_t n_train = int64_t(double(ids.size()) * 0.9);
    torch::Tensor train = torch::tensor(std::vector<int64_t>(ids.begin(), ids.begin() + n_train), torch::kLong);

    const int64_t T = hp.geti("block_size", 64), B = hp.geti("global_batch_size", 16);
    torch::Tensor arange = torch::arange(T);
    Shuffled order(n_train - T, B, seed);
    const double grad_clip = hp.get("grad_clip", 1.0);

    torch::manual_seed(seed);
    torch::nn::AnyModule model =
        workload == "lstm" ? torch::nn::AnyModule(RNNModel(V, hp.geti("n_embd", 64), hp.geti("hidden_size", 128),
                                                           hp.geti("n_layer", 2), hp.get("dropout", 0.1)))
                           : torch::nn::AnyModule(GPT(V, T, hp.geti("n_layer", 2), hp.geti("n_head", 4),
                                                      hp.geti("n_embd", 128), hp.get("dropout", 0.1)));
    std::vector<torch::Tensor> params = model.ptr()->parameters(), decay, no_decay;
    for (auto &p : params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    auto opts = torch::optim::AdamWOptions(hp.get("learning_rate", 1e-3)).betas({0.9, hp.get("beta2", 0.99)});
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(opts).weight_decay(hp.get("weight_decay", 0.1))));
    groups.emplace_back(no_decay,
                        std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(opts).weight_decay(0)));
    torch::optim::AdamW opt(std::move(groups), opts);
    model.ptr()->train();

    for (int64_t step = 0; step < timer.total_steps(); step++) {
        torch::Tensor off = order.next().unsqueeze(1) + arange; // [B, T] offsets
        torch::Tensor bx = train.index({off}), by = train.index({off + 1});
        torch::Tensor logits = model.forward(bx);
        torch::Tensor loss = F::cross_entropy(logits.view({-1, V}), by.view({-1}));
        loss.backward();
        if (grad_clip > 0) torch::nn::utils::clip_grad_norm_(params, grad_clip);
        opt.step();
        opt.zero_grad(/*set_to_none=*/true);
        timer.step_end(loss);
    }
}

[[noreturn]] void usage() {
    std::fprintf(stderr, "usage: libtorch_loop --workload mlp|cnn|resnet|charlm|lstm [--data PATH] [--hp K=V ...]\n"
                         "                     [--window N] [--windows R] [--warmup-windows K] [--threads T]\n"
                         "                     [--seed S]\n");
    std::exit(2);
}

} // namespace

int main(int argc, char **argv) {
    std::string workload, data;
    Hparams hp;
    int64_t window = 100, windows = 5, warmup = 1;
    int threads = 1;
    uint32_t seed = 0;
    Windows timer;
    try {
        for (int i = 1; i < argc; i += 2) {
            if (i + 1 >= argc) usage();
            std::string a = argv[i], v = argv[i + 1];
            if (a == "--workload") workload = v;
            else if (a == "--data") data = v;
            else if (a == "--hp") parse_hp(hp, v);
            else if (a == "--window") window = std::stoll(v);
            else if (a == "--windows") windows = std::stoll(v);
            else if (a == "--warmup-windows") warmup = std::stoll(v);
            else if (a == "--threads") threads = std::stoi(v);
            else if (a == "--seed") seed = uint32_t(std::stoul(v));
            else usage();
        }
        const bool lm = workload == "charlm" || workload == "lstm";
        if (!lm && workload != "mlp" && workload != "cnn" && workload != "resnet") usage();
        if (window < 1 || windows < 1 || warmup < 0) throw std::runtime_error("--window/--windows must be >= 1");
        if (data.empty())
            data = lm ? "examples/data/tinyshakespeare/input.txt.gz" : "examples/data/digits";
        timer.window = window;
        timer.windows = windows;
        timer.warmup = warmup;
        if (threads > 0) torch::set_num_threads(threads);
        if (lm) train_charlm(workload, data, hp, seed, timer);
        else train_digits(workload, data, hp, seed, timer);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "libtorch_loop: %s\n", e.what());
        return 1;
    }

    std::vector<double> rates, kept(timer.means.begin() + warmup, timer.means.end());
    for (size_t k = size_t(warmup); k < timer.seconds.size(); k++) rates.push_back(double(window) / timer.seconds[k]);
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    std::printf("{\"system\": \"libtorch\", \"workload\": \"%s\", \"steps_per_s\": %s, \"final_loss\": %.17g, "
                "\"peak_rss_mb\": %.1f, \"losses\": %s, \"window\": %lld, \"windows\": %lld, \"warmup_windows\": "
                "%lld, \"torch\": \"%s\", \"threads\": %d, \"device\": \"cpu\"}\n",
                workload.c_str(), json_list(rates).c_str(), kept.back(), double(ru.ru_maxrss) / 1024.0,
                json_list(timer.means).c_str(), (long long)window, (long long)windows, (long long)warmup,
                TORCH_VERSION, torch::get_num_threads());
    return 0;
}
