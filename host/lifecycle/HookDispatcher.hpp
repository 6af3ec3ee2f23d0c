// Calls the job's hooks at each lifecycle event: in ascending priority
// (stable for equal priorities, i.e. job-file order), only the hooks that
// subscribed to the event, with the run state and the event's metrics.
// Hooks' own checkpoint state is kept apart per hook instance.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "abi/ComponentInstances.hpp"

struct rh_StateDict;

namespace rh::host {
class HostServices;
}

namespace rh::lifecycle {

using Metrics = std::vector<std::pair<std::string, double>>;

const char* event_name(rh_HookEvent event);  // "before_train_iter"

class HookDispatcher {
 public:
  HookDispatcher(host::HostServices& services,
                 std::vector<std::unique_ptr<host::HookInstance>> hooks);

  // Dispatches `event` with the services' current run state. Throws
  // HostError naming the hook and the event when a hook fails.
  void fire(rh_HookEvent event, const Metrics& metrics = {},
            const std::string& checkpoint_dir = "");
  // before_save_checkpoint: each hook adds its state; stored in `checkpoint`
  // under "hooks.<type>.<n>.<key>", n counting the hooks of that type in
  // job-file order, so that adding or reordering hooks of other types
  // between a save and a resume keeps every hook's state with it.
  void before_save(rh_StateDict& checkpoint, const std::string& dir);
  // after_save_checkpoint.
  void after_save(const std::string& dir);
  // after_load_checkpoint: each hook gets back what it saved (also from
  // checkpoints of runner-host 0.1, keyed "hooks.<sorted index>.<type>.").
  void after_load(const rh_StateDict& checkpoint, const std::string& dir);

  // The event being dispatched (RH_EVENT_COUNT_V1 when none): hooks may call
  // Checkpoint_Save only from some events.
  rh_HookEvent current_event() const { return current_; }
  size_t size() const { return hooks_.size(); }
  // Seconds each hook has spent in its handlers so far, every event, less
  // the handlers of the events it set off itself (a checkpoint hook's
  // before_save_checkpoint to the other hooks counts for them, once): the
  // time the run spent in each hook's code. Named by type, `#n` added for
  // the n-th (n >= 1) hook of a type; in dispatch order.
  std::vector<std::pair<std::string, double>> seconds_in_hooks() const;
  bool has_type(const std::string& type) const;
  // Destroys every hook instance (teardown, before the communicator goes).
  void destroy_hooks();

 private:
  void call(size_t index, rh_HookEvent event, rh_Metric* metrics, size_t num_metrics,
            rh_StateDict* dict, const std::string& dir);
  std::string prefix(size_t index) const;
  std::string legacy_prefix(size_t index) const;

  host::HostServices& services_;
  std::vector<std::unique_ptr<host::HookInstance>> hooks_;  // sorted by priority
  std::vector<std::string> state_keys_;                     // per hooks_ entry: "hooks.<type>.<n>."
  std::vector<std::string> names_;  // per hooks_ entry: "<type>", "<type>#<n>" for n >= 1
  std::vector<double> seconds_;     // per hooks_ entry
  std::vector<double> nested_;      // per call in progress: seconds in the calls it set off
  rh_HookEvent current_ = RH_EVENT_COUNT_V1;
};

}  // namespace rh::lifecycle
