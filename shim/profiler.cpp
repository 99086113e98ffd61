// shim/profiler.cpp — torch.profiler.profile driven by torch.profiler.schedule
// over libtorch's Kineto profiler (see profiler.h).
//
// The schedule and the actions taken on each change of state are
// torch/profiler/profiler.py's (torch 2.11): schedule(), profile.start(),
// profile.step(), profile.stop() and the action_map of _transit_action. The
// actions themselves are torch/autograd/profiler.py's: prepare_trace is
// prepareProfiler (Kineto prepares its buffers and, on a GPU, starts CUPTI's
// warm-up), start_trace is enableProfiler (RecordFunction callbacks on this
// thread, Kineto's trace starts), stop_trace is disableProfiler (after a CUDA
// synchronize, as profile.__exit__ does), and the trace handler is
// ProfilerResult::save, torch's export_chrome_trace. Comments name the Python
// they mirror and where ctrial differs.
#include "internal.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/record_function.h>
#include <torch/csrc/Export.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "ctrial/profiler.h"

// Declared in torch/csrc/profiler/kineto_shim.h, which includes Kineto's own
// headers (the torch wheel does not ship them); exported by libtorch_cpu.
namespace torch::autograd::profiler {
TORCH_API void addMetadataJson(const std::string &key, const std::string &value);
TORCH_API void profilerStep();
}  // namespace torch::autograd::profiler

namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ExperimentalConfig;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;
using ct::Failure;

namespace {

[[noreturn]] void fail(int code, const std::string &msg) { throw Failure{code, msg}; }

// torch.profiler.ProfilerAction. kExit stands for Python's `None` (the
// profiler's __exit__).
enum class Action { kNone, kWarmup, kRecord, kRecordAndSave, kExit };

// torch.profiler.schedule's schedule_fn, in 64-bit integers (Python's
// `step / num_steps >= repeat` is `step >= repeat * num_steps` for the
// non-negative integers it sees).
Action schedule_action(const ct_profiler_schedule &s, int64_t step) {
    if (step < s.skip_first) return Action::kNone;
    step -= s.skip_first;
    if (s.skip_first_wait != 0) step += s.wait;
    const int64_t num_steps = int64_t{s.wait} + s.warmup + s.active;
    if (s.repeat > 0 && step >= int64_t{s.repeat} * num_steps) return Action::kNone;
    const int64_t mod_step = step % num_steps;
    if (mod_step < s.wait) return Action::kNone;
    if (mod_step < int64_t{s.wait} + s.warmup) return Action::kWarmup;
    return mod_step < num_steps - 1 ? Action::kRecord : Action::kRecordAndSave;
}

// The cycle a traced step belongs to (the number in the trace's file name).
int64_t cycle_of(const ct_profiler_schedule &s, int64_t step) {
    int64_t t = step - s.skip_first + (s.skip_first_wait != 0 ? s.wait : 0);
    return t / (int64_t{s.wait} + s.warmup + s.active);
}

// The profiler that holds the process's one Kineto session, from
// ct_profiler_new to ct_profiler_stop.
std::atomic<ct_profiler *> g_active{nullptr};
// The slot's value after a profiler was freed on another thread while it
// recorded: libtorch's profiler stays enabled on the profiler's own thread.
char orphan_tag;
ct_profiler *const kOrphan = reinterpret_cast<ct_profiler *>(&orphan_tag);

// torch.autograd.profiler.profile.default_trace_id: a random 128-bit id as
// 32 upper-case hex digits.
std::string new_trace_id() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016llX%016llX", static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()));
    return buf;
}

std::string default_worker_name() {
    char host[256] = {0};
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) std::strcpy(host, "localhost");
    return std::string(host) + "_" + std::to_string(static_cast<long long>(getpid()));
}

void check_opts(const ct_profiler_opts &o) {
    const ct_profiler_schedule &s = o.schedule;
    // torch.profiler.schedule's assertion, one field at a time.
    auto nonneg = [](int v, const char *field) {
        if (v < 0) fail(CT_EINVAL, std::string("schedule.") + field + " is " + std::to_string(v) + " (need >= 0)");
    };
    nonneg(s.skip_first, "skip_first");
    nonneg(s.wait, "wait");
    nonneg(s.warmup, "warmup");
    nonneg(s.repeat, "repeat");
    if (s.active <= 0)
        fail(CT_EINVAL, "schedule.active is " + std::to_string(s.active) + " (need > 0: a cycle must record a step)");
    // Keeps repeat * (wait + warmup + active) within 64 bits.
    const int64_t cycle = int64_t{s.wait} + s.warmup + s.active;
    if (cycle > INT32_MAX)
        fail(CT_EINVAL, "schedule.wait + warmup + active is " + std::to_string(cycle) + " (need <= 2147483647)");
    if (!o.cpu && !o.cuda) fail(CT_EINVAL, "no activity: opts.cpu and opts.cuda are both false");
}

// Creates dir and its parents (tensorboard_trace_handler's os.makedirs).
void make_dir(const std::string &dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) fail(CT_EIO, "cannot create the trace directory '" + dir + "': " + ec.message());
    if (!std::filesystem::is_directory(dir, ec))
        fail(CT_EIO, "the trace directory '" + dir + "' is not a directory");
}

}  // namespace

struct ct_profiler {
    ct_profiler_opts opts;
    std::string dir, name;
    std::set<ActivityType> activities;
    bool cuda = false;  // CUDA activity in effect (asked for and a GPU present)
    std::thread::id owner = std::this_thread::get_id();

    int64_t step_num = 0;  // profile.step_num
    Action current = Action::kNone;  // profile.current_action
    bool stopped = false;

    // Where Kineto is: prepare_trace done (warm-up), start_trace done
    // (recording). The result of the last stop_trace waits for the handler.
    bool prepared = false;
    bool recording = false;
    std::string trace_id;
    std::unique_ptr<prof::ProfilerResult> result;

    std::unique_ptr<at::RecordFunction> step_rec;  // profile.step_rec_fn
    std::string last_trace;

    // autograd.profiler.profile.config(): the same config for prepare and
    // start, with the trace id made at prepare.
    ProfilerConfig config() const {
        return ProfilerConfig(ProfilerState::KINETO, opts.record_shapes, opts.profile_memory, opts.with_stack,
                              /*with_flops=*/false, /*with_modules=*/false, ExperimentalConfig(), trace_id);
    }
};

struct ct_record_function {
    at::RecordFunction rec{at::RecordScope::USER_SCOPE};
};

namespace {

// ---- the four actions (_KinetoProfile.prepare_trace / start_trace /
// stop_trace, and the trace handler) --------------------------------------

void prepare_trace(ct_profiler *p) {
    p->trace_id = new_trace_id();
    prof::prepareProfiler(p->config(), p->activities);
    p->prepared = true;
}

void start_trace(ct_profiler *p) {
    if (!p->prepared) return;  // its prepare failed and was reported
    prof::enableProfiler(p->config(), p->activities);
    p->prepared = false;
    p->recording = true;
    // _KinetoProfile.start_trace's metadata (add_metadata_json).
    if (p->opts.profile_memory) prof::addMetadataJson("profile_memory", "1");
    if (p->opts.with_stack) prof::addMetadataJson("with_stack", "1");
    if (p->opts.record_shapes) prof::addMetadataJson("record_shapes", "1");
}

void stop_trace(ct_profiler *p) {
    if (!p->recording) return;  // its start failed and was reported
    // profile.__exit__: torch.cuda.synchronize() first, so that the kernels
    // of the window have finished and CUPTI has their records. A failed
    // synchronize is reported after the profiler is disabled all the same.
    std::exception_ptr sync_error;
    if (p->cuda) {
        try {
            auto &hooks = at::detail::getCUDAHooks();
            hooks.deviceSynchronize(hooks.current_device());
        } catch (...) {
            sync_error = std::current_exception();
        }
    }
    p->recording = false;  // never disable twice: libtorch would pop nothing
    p->result = prof::disableProfiler();
    if (sync_error) std::rethrow_exception(sync_error);
}

// The trace handler: writes the result of the last stop_trace for the cycle
// of `step` (the window's last step).
void trace_ready(ct_profiler *p, int64_t step) {
    if (!p->result) return;  // its stop failed and was reported
    std::unique_ptr<prof::ProfilerResult> result = std::move(p->result);
    const std::string path =
        p->dir + "/" + p->name + "." + std::to_string(cycle_of(p->opts.schedule, step)) + ".pt.trace.json";
    // Kineto writes a temporary file and renames it to `path`, and only logs
    // when it cannot: remove an older file first, so that the file exists
    // afterwards exactly when this write succeeded.
    if (std::remove(path.c_str()) != 0 && errno != ENOENT)
        fail(CT_EIO, "cannot replace the trace file '" + path + "': " + std::strerror(errno));
    result->save(path);
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
        fail(CT_EIO, "writing the trace file '" + path + "' failed (is the directory still there and writable?)");
    p->last_trace = path;
}

// _transit_action(prev, current) with torch's action_map. `step` is the
// number of the step that `prev` was the action of. Every action runs even
// when an earlier one failed (a failed write must not stop the next cycle
// from being traced; one that depends on a failed action does nothing); the
// first failure is returned.
int transit(ct_profiler *p, Action prev, Action cur, int64_t step, const char *fn) {
    int rc = CT_OK;
    auto run = [&](void (*action)(ct_profiler *)) {
        int r = ct::status(fn, [&] { action(p); });
        if (rc == CT_OK) rc = r;
    };
    auto save = [&] {
        int r = ct::status(fn, [&] { trace_ready(p, step); });
        if (rc == CT_OK) rc = r;
    };
    const bool rec_cur = cur == Action::kRecord || cur == Action::kRecordAndSave;
    switch (prev) {
    case Action::kNone:
        if (cur == Action::kWarmup || rec_cur) run(prepare_trace);
        if (rec_cur) run(start_trace);
        break;
    case Action::kWarmup:
        // WARMUP -> NONE ("Incorrect schedule", unreachable with
        // torch.profiler.schedule) and WARMUP -> exit: start and stop to
        // close Kineto's warm-up; nothing is written.
        if (cur == Action::kNone || cur == Action::kExit) {
            run(start_trace);
            run(stop_trace);
            p->result.reset();
        } else if (rec_cur) {
            run(start_trace);
        }
        break;
    case Action::kRecord:
        if (cur == Action::kNone || cur == Action::kWarmup) {
            // "Incorrect schedule: RECORD followed by NONE/WARMUP"
            // (unreachable with torch.profiler.schedule): stop, write nothing.
            run(stop_trace);
            p->result.reset();
        } else if (cur == Action::kExit) {
            run(stop_trace);
            save();
        }
        break;
    case Action::kRecordAndSave:
        run(stop_trace);
        save();
        if (cur == Action::kWarmup || rec_cur) run(prepare_trace);
        if (rec_cur) run(start_trace);
        break;
    case Action::kExit:
        break;
    }
    return rc;
}

// profile.record_function("ProfilerStep#" + str(step_num)).__enter__()
void open_step_range(ct_profiler *p) {
    auto r = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
    if (r->isActive()) r->before("ProfilerStep#" + std::to_string(p->step_num));
    p->step_rec = std::move(r);
}

// Its __exit__: the destructor runs the end callbacks.
void close_step_range(ct_profiler *p) { p->step_rec.reset(); }

// profile.stop(): the step's range, then _transit_action(current, None).
int stop(ct_profiler *p, const char *fn) {
    if (p->stopped) return CT_OK;
    close_step_range(p);
    int rc = transit(p, p->current, Action::kExit, p->step_num, fn);
    p->result.reset();
    p->stopped = true;
    ct_profiler *self = p;
    g_active.compare_exchange_strong(self, nullptr);
    return rc;
}

int check_usable(const ct_profiler *p, const char *fn) {
    if (!p) return ct::fail(CT_EINVAL, fn, "profiler is NULL");
    if (p->owner != std::this_thread::get_id())
        return ct::fail(CT_ESTATE, fn,
                        "called on another thread than the one that created the profiler (libtorch keeps the "
                        "profiler's state per thread)");
    return CT_OK;
}

}  // namespace

extern "C" ct_profiler_opts ct_profiler_defaults(void) {
    ct_profiler_opts o;
    o.schedule.skip_first = 0;
    o.schedule.wait = 1;
    o.schedule.warmup = 1;
    o.schedule.active = 3;
    o.schedule.repeat = 1;
    o.schedule.skip_first_wait = 0;
    o.cpu = true;
    o.cuda = true;
    o.record_shapes = false;
    o.profile_memory = false;
    o.with_stack = false;
    return o;
}

extern "C" ct_profiler *ct_profiler_new(const ct_profiler_opts *o, const char *dir, const char *name) {
    std::unique_ptr<ct_profiler> p;
    bool slot = false;
    try {
        const ct_profiler_opts opts = o ? *o : ct_profiler_defaults();
        check_opts(opts);
        if (!dir || !*dir) fail(CT_EINVAL, std::string("dir is ") + (dir ? "empty" : "NULL"));
        std::string worker = name ? name : default_worker_name();
        if (worker.empty()) fail(CT_EINVAL, "name is empty");
        if (worker.find('/') != std::string::npos)
            fail(CT_EINVAL, "name '" + worker + "' contains '/' (it becomes part of a file name)");

        p = std::make_unique<ct_profiler>();
        p->opts = opts;
        p->dir = dir;
        p->name = worker;
        // profile(activities=...): CUDA only where a GPU is present
        // (torch.autograd.profiler.profile drops it with a warning).
        if (opts.cpu) p->activities.insert(ActivityType::CPU);
        p->cuda = opts.cuda && at::hasCUDA();
        if (p->cuda) p->activities.insert(ActivityType::CUDA);
        if (p->activities.empty())
            fail(CT_EDEVICE, "CUDA is the only activity asked for (opts.cpu is false) and no GPU is present");

        ct_profiler *expected = nullptr;
        if (!g_active.compare_exchange_strong(expected, p.get())) {
            if (expected == kOrphan)
                fail(CT_ESTATE, "a ct_profiler freed on another thread while it recorded left libtorch's profiler "
                                "enabled on its own thread: no other profiler can start in this process");
            fail(CT_ESTATE, "another ct_profiler is active in this process (libtorch has one profiler session per "
                            "process): stop it with ct_profiler_stop first");
        }
        slot = true;
        if (torch::profiler::impl::profilerEnabled())
            fail(CT_ESTATE, "libtorch's profiler is already enabled on this thread (by another user of libtorch)");
        make_dir(p->dir);
    } catch (...) {
        if (slot) g_active.store(nullptr);
        ct::fail_exception(__func__);
        return nullptr;
    }
    // profile.start(): _transit_action(NONE, schedule(0)), then step 0's
    // range.
    p->current = schedule_action(p->opts.schedule, 0);
    int rc = transit(p.get(), Action::kNone, p->current, 0, __func__);
    if (rc != CT_OK) {
        // Undo what did start, keeping the first error's message.
        std::string msg = ct_last_error();
        transit(p.get(), p->recording ? Action::kRecord : p->prepared ? Action::kWarmup : Action::kNone,
                Action::kNone, 0, __func__);
        p->result.reset();
        g_active.store(nullptr);
        ct::fail(rc, nullptr, msg);
        return nullptr;
    }
    open_step_range(p.get());
    return p.release();
}

extern "C" int ct_profiler_step(ct_profiler *p) {
    if (int rc = check_usable(p, __func__)) return rc;
    if (p->stopped) return ct::fail(CT_ESTATE, __func__, "the profiler is stopped");
    // profile.step()
    close_step_range(p);
    const Action prev = p->current;
    p->step_num += 1;
    p->current = schedule_action(p->opts.schedule, p->step_num);
    int rc = transit(p, prev, p->current, p->step_num - 1, __func__);
    // KinetoStepTracker.increment_step, which profile.step() calls only for
    // Kineto's on-demand daemon.
    const char *daemon = std::getenv("KINETO_USE_DAEMON");
    if (daemon && *daemon) {
        int r = ct::status(__func__, [] { prof::profilerStep(); });
        if (rc == CT_OK) rc = r;
    }
    int r = ct::status(__func__, [&] { open_step_range(p); });
    return rc != CT_OK ? rc : r;
}

extern "C" int ct_profiler_stop(ct_profiler *p) {
    if (int rc = check_usable(p, __func__)) return rc;
    return stop(p, __func__);
}

extern "C" const char *ct_profiler_last_trace(const ct_profiler *p) { return p ? p->last_trace.c_str() : nullptr; }

extern "C" int64_t ct_profiler_step_num(const ct_profiler *p) { return p ? p->step_num : -1; }

extern "C" void ct_profiler_free(ct_profiler *p) {
    if (!p) return;
    if (!p->stopped) {
        if (p->recording && p->owner != std::this_thread::get_id()) {
            // libtorch's recording state is the owner thread's and cannot be
            // disabled from here: the window is lost and the slot stays
            // taken. (The step's range is freed below; its end callback finds
            // no profiler on this thread and does nothing.)
            g_active.store(kOrphan);
        } else {
            // Idle or warming up (Kineto's warm-up is process-wide and closes
            // from any thread), or on the owner thread. Keep the caller's
            // pending error: free reports nothing.
            const int code = ct_last_code();
            const std::string msg = ct_last_error();
            stop(p, __func__);
            if (code != CT_OK) ct::fail(code, nullptr, msg);
            else ct_clear_error();
        }
    }
    delete p;
}

extern "C" ct_record_function *ct_record_function_begin(const char *name) {
    if (!name) {
        ct::fail(CT_EINVAL, __func__, "name is NULL");
        return nullptr;
    }
    try {
        // torch.ops.profiler._record_function_enter_new(name): a USER_SCOPE
        // RecordFunction whose start callbacks run only when some are active.
        auto r = std::make_unique<ct_record_function>();
        if (r->rec.isActive()) r->rec.before(name);
        return r.release();
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" void ct_record_function_end(ct_record_function *r) {
    if (!r) return;
    try {
        r->rec.end();  // _record_function_exit
    } catch (...) {
        ct::fail_exception(__func__);
    }
    delete r;
}
