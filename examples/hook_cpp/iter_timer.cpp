// iter_timer.cpp — an out-of-tree runner-host hook written in C++ with the
// SDK's helpers (rh/cpp/plugin.hpp, rh/cpp/config.hpp).
//
// Type `iter_timer`: measures the wall time between before_train_iter and
// after_train_iter and, every `interval` iterations, logs the mean and the
// maximum through the host's logger:
//
//   hooks:
//     - type: iter_timer
//       plugin: /path/to/librh_hook_iter_timer.so
//       interval: 50          # default 50, must be > 0
//
// The class below is ordinary C++: HookAdapter generates the C vtable and
// turns every exception into an rh_Error, so nothing C++ crosses the ABI.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "rh/cpp/config.hpp"
#include "rh/cpp/plugin.hpp"

namespace {

class IterTimer {
 public:
  explicit IterTimer(const rh_CreateArgs& args) : host_(args.host), context_(args.context) {
    rh::Config cfg(args.host, args.config);
    interval_ = cfg.get<int64_t>("interval", 50);
    if (interval_ <= 0) cfg.child("interval").throw_error("must be > 0");
  }

  // Only these events are delivered (the host calls nothing else).
  uint64_t event_mask() const {
    return RH_EVENT_BIT(RH_EVENT_BEFORE_TRAIN_ITER) | RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_ITER);
  }

  void on_event(const rh_HookEventArgs& event) {
    if (event.event == RH_EVENT_BEFORE_TRAIN_ITER) {
      start_ = Clock::now();
      return;
    }
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
    sum_ms_ += ms;
    max_ms_ = std::max(max_ms_, ms);
    if (++count_ < interval_) return;

    char line[128];
    std::snprintf(line, sizeof(line), "iter %lld: %.3f ms/iter mean, %.3f ms max over %lld iters",
                  static_cast<long long>(event.state->iter), sum_ms_ / count_, max_ms_,
                  static_cast<long long>(count_));
    rh::log(host_, context_, RH_LOG_INFO, line);
    count_ = 0;
    sum_ms_ = 0;
    max_ms_ = 0;
  }

 private:
  using Clock = std::chrono::steady_clock;
  const rh_HostApi* host_;
  rh_Context* context_;
  int64_t interval_ = 50;
  Clock::time_point start_{};
  int64_t count_ = 0;
  double sum_ms_ = 0;
  double max_ms_ = 0;
};

const rh_Component kComponents[] = {rh::hook_component<IterTimer>(
    "iter_timer", "logs mean/max train-iteration wall time every `interval` iterations")};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_example_iter_timer", "0.1.0", RH_NATIVE_TAG_NONE, kComponents);

}  // namespace

// The plugin's only exported symbol.
RH_PLUGIN_ENTRY(kInfo)
