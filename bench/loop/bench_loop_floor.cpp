// bench_loop_floor — the digits MLP as a hand-written libtorch loop: the
// floor that bench_loop's ct_fit run is measured against (no harness, no
// loader, no metrics kept per batch beyond a running sum tensor).
//
//     bench_loop_floor [--steps N] [--threads T] [--seed S] [--warmup N] [--data DIR]
//
// The same model (Linear 64->128, ReLU, Linear 128->10), data (the digits
// train split as float /255, all in memory), batch size 32, Adam lr 1e-3
// and seed as bench_loop digits. Batches follow ctrial's training stream:
// a new permutation per pass, passes back to back, every batch full (a
// batch may span two passes). Only the order differs (torch::randperm here,
// numpy's shuffle in ctrial's loader), so final losses agree to within the
// noise of the order, not bit for bit.
//
// Prints one JSON line with the same fields as bench_loop digits.
#include <torch/torch.h>

#include "../idx_file.hpp"

#include <sys/resource.h>
#include <time.h>

// Under `valgrind --tool=callgrind --instr-atstart=no` only the timed
// window is counted, as in bench_loop.c.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define COUNT_BEGIN()                                                                                      \
    do {                                                                                                   \
        CALLGRIND_START_INSTRUMENTATION;                                                                   \
        CALLGRIND_ZERO_STATS;                                                                              \
    } while (0)
#define COUNT_END()                                                                                        \
    do {                                                                                                   \
        CALLGRIND_DUMP_STATS_AT("floor");                                                                  \
        CALLGRIND_STOP_INSTRUMENTATION;                                                                    \
    } while (0)
#else
#define COUNT_BEGIN() ((void)0)
#define COUNT_END() ((void)0)
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using bench::read_idx_u8;

// CPU time of the whole process (all threads): on a loaded machine it moves
// less than wall time, as time spent waiting for a core is not counted.
double cpu_now() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// User and system CPU seconds and minor page faults so far (this process).
struct Usage {
    double user, sys;
    long minflt;
};

Usage usage_now() {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return {double(ru.ru_utime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec),
            double(ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_stime.tv_usec), ru.ru_minflt};
}

double seconds_now() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

struct Result {
    double seconds;
    double cpu_seconds;
    Usage usage; // user, sys and minor faults in the window
    double final_loss;      // cross-entropy over the whole training split after training
    double last_train_loss; // mean over the last 100 steps (ctrial's last report)
};

// `steps` steps of Adam on a fresh model seeded with `seed`.
Result train(const torch::Tensor &x, const torch::Tensor &y, int64_t steps, int64_t batch_size, uint64_t seed,
             bool timed) {
    torch::manual_seed(seed);
    torch::nn::Sequential model(torch::nn::Linear(64, 128), torch::nn::ReLU(), torch::nn::Linear(128, 10));
    torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
    const int64_t n = x.size(0);
    torch::Tensor perm = torch::randperm(n);
    int64_t cursor = 0;
    // Running sums stay tensors: no host sync per step.
    torch::Tensor window = torch::zeros({}, torch::kFloat);
    const int64_t window_len = steps % 100 ? steps % 100 : 100;

    if (timed) COUNT_BEGIN();
    double t0 = seconds_now(), c0 = cpu_now();
    Usage u0 = usage_now();
    for (int64_t step = 0; step < steps; step++) {
        if (cursor + batch_size > n) { // the rest of this pass, then the next pass
            perm = torch::cat({perm.slice(0, cursor), torch::randperm(n)});
            cursor = 0;
        }
        torch::Tensor idx = perm.slice(0, cursor, cursor + batch_size);
        cursor += batch_size;
        torch::Tensor loss =
            torch::nn::functional::cross_entropy(model->forward(x.index_select(0, idx)), y.index_select(0, idx));
        opt.zero_grad();
        loss.backward();
        opt.step();
        if (step >= steps - window_len) window += loss.detach();
    }
    double last = window.item<double>() / double(window_len);
    double t1 = seconds_now(), c1 = cpu_now();
    Usage u1 = usage_now();
    if (timed) COUNT_END();

    torch::NoGradGuard no_grad;
    double final_loss = torch::nn::functional::cross_entropy(model->forward(x), y).item<double>();
    return {t1 - t0, c1 - c0, {u1.user - u0.user, u1.sys - u0.sys, u1.minflt - u0.minflt}, final_loss, last};
}

[[noreturn]] void usage() {
    std::fprintf(stderr,
                 "usage: bench_loop_floor [--steps N] [--threads T] [--seed S] [--warmup N] [--data DIR]\n");
    std::exit(2);
}

} // namespace

int main(int argc, char **argv) {
    int64_t steps = 3000, warmup = 200, batch_size = 32;
    int threads = 1;
    uint64_t seed = 0;
    std::string data = "examples/data/digits";
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) usage();
        std::string a = argv[i];
        const char *v = argv[i + 1];
        if (a == "--steps") steps = std::atoll(v);
        else if (a == "--threads") threads = std::atoi(v);
        else if (a == "--seed") seed = std::strtoull(v, nullptr, 10);
        else if (a == "--warmup") warmup = std::atoll(v);
        else if (a == "--batch-size") batch_size = std::atoll(v);
        else if (a == "--data") data = v;
        else usage();
    }
    try {
        if (threads > 0) torch::set_num_threads(threads);
        torch::Tensor images = read_idx_u8(data + "/train-images-idx3-ubyte.gz");
        torch::Tensor labels = read_idx_u8(data + "/train-labels-idx1-ubyte.gz");
        torch::Tensor x = images.to(torch::kFloat).div_(255.0).reshape({images.size(0), -1});
        torch::Tensor y = labels.to(torch::kLong);
        if (warmup > 0) train(x, y, warmup, batch_size, seed, false);
        Result r = train(x, y, steps, batch_size, seed, true);
        std::printf("{\"mode\": \"digits\", \"impl\": \"libtorch\", \"threads\": %d, \"steps\": %lld, "
                    "\"seconds\": %.6f, \"cpu_seconds\": %.6f, \"user_s\": %.6f, \"sys_s\": %.6f, \"minflt\": %ld, "
                    "\"steps_per_s\": %.3f, \"final_loss\": %.6f, \"last_train_loss\": %.6f}\n",
                    torch::get_num_threads(), (long long)steps, r.seconds, r.cpu_seconds, r.usage.user, r.usage.sys,
                    r.usage.minflt, double(steps) / r.seconds, r.final_loss, r.last_train_loss);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_loop_floor: %s\n", e.what());
        return 1;
    }
    return 0;
}
