// Hook `profiler`: LibTorch's autograd profiler over train iterations
// [begin, end), written as one Chrome trace per rank
// (work_dir/<dir>/rank<r>.json; open it in https://ui.perfetto.dev or
// chrome://tracing).
//
// Config:
//   hooks:
//     - type: profiler
//       begin: 2          # first profiled iteration (0-based, counted over the run)
//       end: 5            # first iteration no longer profiled (> begin)
//       dir: profile      # relative to work_dir (or an absolute path)
//       record_shapes: false  # input shapes of every op in its event's args
//
// What the trace holds: every ATen op the profiled thread runs (and the
// autograd engine's threads, which inherit the profiler state), the
// runner's phases (rh::data, rh::forward, rh::backward, rh::sync,
// rh::optimizer_step, ...; host/lifecycle/TrainStep.cpp), one
// `rh::train_iter <n>` range per iteration (this hook's), and whatever a
// strategy marks with RECORD_USER_SCOPE (ddp: ddp::all_reduce where a
// bucket is issued, ddp::wait, ddp::broadcast_buffers, ...).
//
// The profiler is thread-local: threads that LibTorch did not start (the
// communicator's) record nothing. So that a collective's time in flight is
// still visible, a range whose name starts with "async:" may begin and end
// on different calls (a strategy starts it where it issues the collective
// and ends it where its wait returns): it is written as a Chrome async
// event (ph "b"/"e", its own track in Perfetto), named without the prefix,
// instead of a nested "X" slice. Timestamps are the profiler's clock in
// microseconds, the same on every rank of a host: rank<r>.json files opened
// together line up.
//
// The profiler starts at the end of iteration begin - 1 (so that
// iteration begin's data loading is in the trace; at before_train_iter when
// begin is the run's first iteration, whose data loading is then missed)
// and stops at the end of iteration end - 1, or at the end of training,
// whichever comes first. A run resumed past `end` profiles nothing.
#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "formats/Json.hpp"
#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"

namespace {

namespace fs = std::filesystem;
namespace prof = torch::autograd::profiler;

constexpr std::string_view kAsyncPrefix = "async:";

// JSON strings through the one escaper (formats/Json).
using rh::json::append_string;

// Microseconds with nanosecond resolution (Chrome's ts/dur unit).
void append_us(std::string& out, double us) {
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, us, std::chars_format::fixed, 3);
  out.append(buf, r.ptr);
}

void append_int(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

std::string shapes_text(const std::vector<std::vector<int64_t>>& shapes) {
  std::string s = "[";
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (i) s += ", ";
    s += '[';
    for (size_t j = 0; j < shapes[i].size(); ++j) {
      if (j) s += ", ";
      s += std::to_string(shapes[i][j]);
    }
    s += ']';
  }
  return s + "]";
}

class ProfilerHook {
 public:
  explicit ProfilerHook(const rh_CreateArgs& args) : host_(args.host), context_(args.context) {
    rh::Config cfg(args.host, args.config);
    begin_ = cfg.get<int64_t>("begin", 2);
    end_ = cfg.get<int64_t>("end", 5);
    if (begin_ < 0) cfg.child("begin").throw_error("must be >= 0, got " + std::to_string(begin_));
    if (end_ <= begin_)
      cfg.child(cfg.has("end") ? "end" : "begin")
          .throw_error("the profiled iterations [begin, end) are empty: begin " +
                       std::to_string(begin_) + ", end " + std::to_string(end_));
    const std::string dir = cfg.get<std::string>("dir", "profile");
    if (dir.empty()) cfg.child("dir").throw_error("must not be empty");
    record_shapes_ = cfg.get<bool>("record_shapes", false);
    dir_ = fs::path(rh::to_string(args.work_dir)) / dir;  // an absolute `dir` wins
  }
  // Also reached when the run fails: what was recorded is still written
  // (a trace of the iterations before a failure is what one wants to see).
  ~ProfilerHook() {
    if (!active_) return;
    try {
      stop();
    } catch (const std::exception& e) {
      rh::log(host_, context_, RH_LOG_ERROR, e.what());
    }
  }
  ProfilerHook(const ProfilerHook&) = delete;
  ProfilerHook& operator=(const ProfilerHook&) = delete;

  uint64_t event_mask() const {
    return RH_EVENT_BIT(RH_EVENT_BEFORE_TRAIN_ITER) | RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_ITER) |
           RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN);
  }

  void on_event(const rh_HookEventArgs& e) {
    const int64_t iter = e.state->iter;  // the iteration about to run / that ran
    rank_ = e.state->rank;
    switch (e.event) {
      case RH_EVENT_BEFORE_TRAIN_ITER:
        if (!active_ && !done_ && iter >= begin_ && iter < end_) start();
        if (active_) {
          iter_range_ = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
          if (iter_range_->isActive())
            iter_range_->before("rh::train_iter " + std::to_string(iter));
        }
        break;
      case RH_EVENT_AFTER_TRAIN_ITER:
        iter_range_.reset();  // ends the iteration's range
        if (active_ && iter + 1 >= end_) stop();
        if (!active_ && !done_ && iter + 1 == begin_) start();
        break;
      case RH_EVENT_AFTER_TRAIN:
        if (active_) stop();
        break;
      default:
        break;
    }
  }

 private:
  void start() {
    // Fails (a c10::Error) when a profiler is already on in this thread.
    prof::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(
        torch::profiler::impl::ProfilerState::CPU, record_shapes_));
    active_ = true;
  }

  void stop() {
    iter_range_.reset();
    active_ = false;
    done_ = true;
    const prof::thread_event_lists lists = prof::disableProfilerLegacy();
    write(lists);
  }

  void write(const prof::thread_event_lists& lists) {
    // Ranges are a push and a pop with the same handle, on any thread (an
    // async range may end on another one).
    std::map<at::RecordFunctionHandle, const prof::LegacyEvent*> pushes;
    for (const auto& list : lists)
      for (const auto& ev : list)
        if (ev.kind() == prof::EventKind::PushRange) pushes[ev.handle()] = &ev;
    std::string out;
    out.reserve(1 << 20);
    out += "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
    bool first = true;
    auto next = [&] {
      if (!first) out += ",\n";
      first = false;
    };
    next();
    out += "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": ";
    append_int(out, static_cast<uint64_t>(rank_));
    out += ", \"args\": {\"name\": \"rank " + std::to_string(rank_) + "\"}}";
    size_t ranges = 0;
    for (const auto& list : lists)
      for (const auto& pop : list) {
        if (pop.kind() != prof::EventKind::PopRange) continue;
        auto it = pushes.find(pop.handle());
        if (it == pushes.end()) continue;  // began before the profiler started
        const prof::LegacyEvent& push = *it->second;
        pushes.erase(it);
        std::string_view name = push.name();
        const bool async = name.substr(0, kAsyncPrefix.size()) == kAsyncPrefix;
        if (async) name.remove_prefix(kAsyncPrefix.size());
        const double ts = push.cpuUs();
        const double dur = std::max(0.0, pop.cpuUs() - ts);
        auto common = [&](const char* ph, double at, uint64_t tid) {
          out += "{\"name\": ";
          append_string(out, name);
          out += ", \"cat\": ";
          out += async ? "\"async\"" : "\"cpu\"";
          out += ", \"ph\": \"";
          out += ph;
          out += "\", \"ts\": ";
          append_us(out, at);
          out += ", \"pid\": ";
          append_int(out, static_cast<uint64_t>(rank_));
          out += ", \"tid\": ";
          append_int(out, tid);
        };
        next();
        if (async) {
          common("b", ts, push.threadId());
          out += ", \"id\": ";
          append_int(out, pop.handle());
          out += "},\n";
          common("e", ts + dur, pop.threadId());
          out += ", \"id\": ";
          append_int(out, pop.handle());
          out += '}';
        } else {
          common("X", ts, push.threadId());
          out += ", \"dur\": ";
          append_us(out, dur);
          if (record_shapes_ && !push.shapes().empty()) {
            out += ", \"args\": {\"shapes\": ";
            append_string(out, shapes_text(push.shapes()));
            out += '}';
          }
          out += '}';
        }
        ++ranges;
      }
    out += "\n]}\n";
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec)
      throw rh::Exception(RH_ERROR_IO,
                          "profiler: cannot create " + dir_.string() + ": " + ec.message());
    const fs::path path = dir_ / ("rank" + std::to_string(rank_) + ".json");
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << out;
    f.close();
    if (!f)
      throw rh::Exception(RH_ERROR_IO,
                          "profiler: cannot write " + path.string() + ": " + std::strerror(errno));
    rh::log(host_, context_, RH_LOG_INFO,
            "profiler: " + std::to_string(ranges) + " ranges written to " + path.string());
  }

  const rh_HostApi* host_;
  rh_Context* context_;
  int64_t begin_ = 2;
  int64_t end_ = 5;
  bool record_shapes_ = false;
  fs::path dir_;
  int rank_ = 0;
  bool active_ = false;
  bool done_ = false;
  std::unique_ptr<at::RecordFunction> iter_range_;  // the iteration being profiled
};

const rh_Component kComponents[] = {
    rh::hook_component<ProfilerHook>(
        "profiler",
        "LibTorch's profiler over train iterations [begin, end): a Chrome trace per rank"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_hook_profiler", "0.1.0", RH_NATIVE_TAG_TORCH, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)
