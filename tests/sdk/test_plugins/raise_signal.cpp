// raise_signal.cpp — test hooks that act at train iterations:
// - raise_signal sends a signal to its own process at one train iteration:
//   how the tests make "a worker told to stop" (SIGTERM or SIGUSR1 from a
//   scheduler) at a known point of the run;
// - slow_hook sleeps in every after_train_iter: a hook with a known lower
//   bound on what it adds to an iteration (the train loop's `hooks:` line).
//
//   hooks: [{type: raise_signal, plugin: .../librh_test_raise_signal.so, signal: 15, iter: 2,
//            rank: 1}]   # rank -1 (default): every rank
//   hooks: [{type: slow_hook, plugin: .../librh_test_raise_signal.so, sleep_us: 2000}]
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "rh/cpp/plugin.hpp"

namespace {

class RaiseSignal {
 public:
  explicit RaiseSignal(const rh_CreateArgs& args) {
    rh::Config cfg(args.host, args.config);
    signal_ = static_cast<int>(cfg.get<int64_t>("signal"));
    iter_ = cfg.get<int64_t>("iter");
    rank_ = cfg.get<int64_t>("rank", -1);
  }
  uint64_t event_mask() const { return RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_ITER); }
  void on_event(const rh_HookEventArgs& ev) {
    if (ev.state->iter == iter_ && (rank_ < 0 || ev.state->rank == rank_))
      ::kill(::getpid(), signal_);
  }

 private:
  int signal_ = 0;
  int64_t iter_ = 0;
  int64_t rank_ = -1;
};

class SlowHook {
 public:
  explicit SlowHook(const rh_CreateArgs& args) {
    rh::Config cfg(args.host, args.config);
    sleep_us_ = cfg.get<int64_t>("sleep_us", 0);
  }
  uint64_t event_mask() const { return RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_ITER); }
  void on_event(const rh_HookEventArgs&) {
    if (sleep_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
  }

 private:
  int64_t sleep_us_ = 0;
};

const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_HOOK, RH_STR("raise_signal"),
     RH_STR("sends a signal to its own process at one iteration (preemption tests)"),
     &rh::HookAdapter<RaiseSignal>::vtable},
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_HOOK, RH_STR("slow_hook"),
     RH_STR("sleeps sleep_us in every after_train_iter (hook timing tests)"),
     &rh::HookAdapter<SlowHook>::vtable},
};

const rh_PluginInfo kInfo = {
    RH_PLUGIN_INFO_STRUCT_SIZE,
    RH_ABI_VERSION_MAJOR,
    RH_ABI_VERSION_MINOR,
    RH_STR("rh_test_raise_signal"),
    RH_STR("0.1.0"),
    RH_NATIVE_TAG_NONE,
    kComponents,
    2,
    nullptr,
    nullptr,
};

}  // namespace

extern "C" RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t, uint32_t) { return &kInfo; }
