#include "lifecycle/HookDispatcher.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "abi/HostApi.hpp"
#include "abi/HostError.hpp"
#include "abi/StateDict.hpp"

namespace rh::lifecycle {

const char* event_name(rh_HookEvent event) {
  static const char* const kNames[RH_EVENT_COUNT_V1] = {"before_run",
                                                        "after_run",
                                                        "before_train",
                                                        "after_train",
                                                        "before_train_epoch",
                                                        "after_train_epoch",
                                                        "before_train_iter",
                                                        "after_train_iter",
                                                        "before_val",
                                                        "after_val",
                                                        "before_val_epoch",
                                                        "after_val_epoch",
                                                        "before_val_iter",
                                                        "after_val_iter",
                                                        "before_test",
                                                        "after_test",
                                                        "before_test_epoch",
                                                        "after_test_epoch",
                                                        "before_test_iter",
                                                        "after_test_iter",
                                                        "before_save_checkpoint",
                                                        "after_save_checkpoint",
                                                        "after_load_checkpoint"};
  return event >= 0 && event < RH_EVENT_COUNT_V1 ? kNames[event] : "unknown_event";
}

HookDispatcher::HookDispatcher(host::HostServices& services,
                               std::vector<std::unique_ptr<host::HookInstance>> hooks)
    : services_(services) {
  // State keys and names from the job-file order (before sorting by
  // priority): the n-th hook of a type is "hooks.<type>.<n>." and, n >= 1,
  // "<type>#<n>".
  struct Keyed {
    std::unique_ptr<host::HookInstance> hook;
    std::string key, name;
  };
  std::map<std::string, int> seen;
  std::vector<Keyed> keyed;
  for (auto& h : hooks) {
    const std::string n = std::to_string(seen[h->type()]++);
    const std::string key = "hooks." + h->type() + "." + n + ".";
    const std::string name = n == "0" ? h->type() : h->type() + "#" + n;
    keyed.push_back({std::move(h), key, name});
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    return a.hook->priority() < b.hook->priority();
  });
  for (Keyed& k : keyed) {
    hooks_.push_back(std::move(k.hook));
    state_keys_.push_back(std::move(k.key));
    names_.push_back(std::move(k.name));
  }
  seconds_.assign(hooks_.size(), 0.0);
  nested_.reserve(8);
}

std::string HookDispatcher::prefix(size_t index) const { return state_keys_[index]; }

std::vector<std::pair<std::string, double>> HookDispatcher::seconds_in_hooks() const {
  std::vector<std::pair<std::string, double>> out;
  for (size_t i = 0; i < hooks_.size(); ++i) out.emplace_back(names_[i], seconds_[i]);
  return out;
}

std::string HookDispatcher::legacy_prefix(size_t index) const {
  return "hooks." + std::to_string(index) + "." + hooks_[index]->type() + ".";
}

bool HookDispatcher::has_type(const std::string& type) const {
  for (const auto& h : hooks_)
    if (h->type() == type) return true;
  return false;
}

void HookDispatcher::destroy_hooks() {
  hooks_.clear();
  state_keys_.clear();
  names_.clear();
  seconds_.clear();
}

namespace {

// The event's metrics as the ABI's views, converted once per event (not per
// hook). Up to kInline metrics live on the stack: an iteration's event
// allocates nothing. On the stack rather than in a member because a hook may
// start a nested dispatch (Checkpoint_Save from after_train_iter runs
// before_save_checkpoint) while the outer event's views are in use.
class MetricViews {
 public:
  explicit MetricViews(const Metrics& metrics) : size_(metrics.size()) {
    if (size_ > kInline) heap_.resize(size_);
    rh_Metric* out = data();
    for (size_t i = 0; i < size_; ++i)
      out[i] = {{metrics[i].first.data(), metrics[i].first.size()}, metrics[i].second};
  }
  rh_Metric* data() { return size_ == 0 ? nullptr : size_ > kInline ? heap_.data() : inline_; }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kInline = 16;
  size_t size_;
  rh_Metric inline_[kInline];
  std::vector<rh_Metric> heap_;
};

}  // namespace

void HookDispatcher::call(size_t index, rh_HookEvent event, rh_Metric* metrics, size_t num_metrics,
                          rh_StateDict* dict, const std::string& dir) {
  host::HookInstance& hook = *hooks_[index];
  if (!hook.wants(event)) return;
  // Two clock reads per call (~50 ns here), against the microseconds a
  // hook takes. The time of the calls this one sets off (nested_) is theirs.
  using Clock = std::chrono::steady_clock;
  struct Timed {  // also when the hook throws
    HookDispatcher& d;
    size_t index;
    Clock::time_point start = Clock::now();
    Timed(HookDispatcher& dispatcher, size_t i) : d(dispatcher), index(i) {
      d.nested_.push_back(0);
    }
    ~Timed() {
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      d.seconds_[index] += s - d.nested_.back();
      d.nested_.pop_back();
      if (!d.nested_.empty()) d.nested_.back() += s;
    }
  } timed(*this, index);
  rh_RunState state = services_.run_state();
  rh_HookEventArgs args{RH_HOOK_EVENT_ARGS_STRUCT_SIZE, event, &state, metrics, num_metrics, dict,
                        {dir.data(), dir.size()}};
  rh_HookEvent outer = current_;
  current_ = event;
  try {
    hook.on_event(args);
  } catch (const host::HostError& e) {
    current_ = outer;
    if (hook.warn_on_error()) {
      spdlog::warn("{} (at {}; on_error: warn, the run goes on)", e.what(), event_name(event));
      return;
    }
    throw host::HostError(e.code(), std::string(e.what()) + " (at " + event_name(event) + ")");
  }
  current_ = outer;
}

void HookDispatcher::fire(rh_HookEvent event, const Metrics& metrics,
                          const std::string& checkpoint_dir) {
  MetricViews views(metrics);
  for (size_t i = 0; i < hooks_.size(); ++i)
    call(i, event, views.data(), views.size(), nullptr, checkpoint_dir);
}

void HookDispatcher::before_save(rh_StateDict& checkpoint, const std::string& dir) {
  for (size_t i = 0; i < hooks_.size(); ++i) {
    rh_StateDict own;
    call(i, RH_EVENT_BEFORE_SAVE_CHECKPOINT, nullptr, 0, &own, dir);
    for (auto& [key, entry] : own.entries) checkpoint.entries[prefix(i) + key] = std::move(entry);
  }
}

void HookDispatcher::after_save(const std::string& dir) {
  fire(RH_EVENT_AFTER_SAVE_CHECKPOINT, {}, dir);
}

void HookDispatcher::after_load(const rh_StateDict& checkpoint, const std::string& dir) {
  for (size_t i = 0; i < hooks_.size(); ++i) {
    rh_StateDict own;
    auto take = [&](const std::string& p) {
      for (const auto& [key, entry] : checkpoint.entries)
        if (key.rfind(p, 0) == 0) own.entries[key.substr(p.size())] = entry;
    };
    take(prefix(i));
    if (own.entries.empty()) take(legacy_prefix(i));
    call(i, RH_EVENT_AFTER_LOAD_CHECKPOINT, nullptr, 0, &own, dir);
  }
}

}  // namespace rh::lifecycle
