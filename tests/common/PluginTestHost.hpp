// PluginTestHost — the real host table (rh::host::HostServices: errors, config
// read from YAML, run state, state dicts backed by memory) with the shipped
// plugins loaded through the real registry and created through the real
// component factory (handshake, Create, unknown-key check), and a few table
// entries replaced by recorders:
//   Log                 captured into `logs`
//   Checkpoint_Save     recorded in `checkpoints.calls`; runs the hook's
//                       before_save_checkpoint like the host's protocol and
//                       keeps the state it adds per checkpoint name
//   Checkpoint_Remove   recorded; NOT_FOUND for a name never saved (or
//                       removed), FAILED_PRECONDITION for the latest one
// Used while the real runner and checkpoint protocol are being written.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "abi/ComponentFactory.hpp"
#include "abi/HostApi.hpp"
#include "abi/HostError.hpp"
#include "abi/PluginRegistry.hpp"
#include "abi/StateDict.hpp"
#include "common/TestUtil.hpp"
#include "config/ConfigNode.hpp"
#include "config/JobLoader.hpp"

namespace rh::test {

inline std::filesystem::path shipped_plugin(const std::string& target) {
  return std::filesystem::path(RH_PLUGIN_OUTPUT_DIR) / ("lib" + target + ".so");
}

inline std::string str(rh_StringView s) { return std::string(s.data, s.size); }

struct LogLine {
  rh_LogLevel level;
  std::string text;
};

// What the fake checkpoint protocol saw and did.
struct CheckpointRecorder {
  std::vector<std::string> calls;              // "save epoch_1", "remove epoch_1"
  std::set<std::string> existing;              // published and not removed
  std::map<std::string, rh_StateDict> states;  // the hook's state in each checkpoint
  std::string latest;                          // what `latest` points to
  host::HookInstance* hook = nullptr;          // gets before_save_checkpoint
  rh_RunState state{};                         // the counters that event carries
  std::set<std::string> fail_save;             // Save of these names fails (RH_ERROR_IO)
  std::set<std::string> fail_remove;           // Remove of these names fails (RH_ERROR_IO)
};

// Events with a run state and metrics.
struct Event {
  rh_RunState state{};
  std::vector<std::pair<std::string, double>> metrics;
  rh_StateDict* checkpoint = nullptr;
  std::string dir;

  Event() {
    state.struct_size = RH_RUN_STATE_STRUCT_SIZE;
    state.world_size = 1;
  }
  // Sends `event` to `hook`; returns the error message, "" on success.
  std::string send(host::HookInstance& hook, rh_HookEvent event) {
    std::vector<rh_Metric> m;
    for (const auto& [name, value] : metrics) m.push_back({{name.data(), name.size()}, value});
    rh_HookEventArgs a{};
    a.struct_size = RH_HOOK_EVENT_ARGS_STRUCT_SIZE;
    a.event = event;
    a.state = &state;
    a.metrics = m.empty() ? nullptr : m.data();
    a.num_metrics = m.size();
    a.checkpoint = checkpoint;
    a.checkpoint_dir = {dir.data(), dir.size()};
    if (!hook.wants(event)) return "";  // the host only calls subscribed events
    try {
      hook.on_event(a);
    } catch (const host::HostError& e) {
      return e.what();
    }
    return "";
  }
};

class PluginTestHost {
 public:
  PluginTestHost() {
    current() = this;
    rh_HostApi& api = services.mutable_api();
    api.Log = &Log;
    api.Log_IsEnabled = [](rh_Context*, rh_LogLevel) -> int32_t { return 1; };
    api.Checkpoint_Save = &CheckpointSave;
    api.Checkpoint_Remove = &CheckpointRemove;
  }
  ~PluginTestHost() { current() = nullptr; }
  PluginTestHost(const PluginTestHost&) = delete;
  PluginTestHost& operator=(const PluginTestHost&) = delete;

  const rh_HostApi* api() const { return services.api(); }
  std::filesystem::path work_dir() const { return dir / "work"; }

  // Loads lib<target>.so from the build tree's plugin directory.
  host::Plugin& load(const std::string& target) {
    return registry.load(shipped_plugin(target), "test");
  }

  // `yaml` is one hook map, e.g. "{type: logger, interval: 2}".
  std::unique_ptr<host::HookInstance> create_hook(const std::string& yaml) {
    const config::Node& spec = *job("hooks:\n  - " + yaml + "\n").find("hooks")->seq_items().at(0);
    return factory().create_hook(spec);
  }
  std::unique_ptr<host::CheckpointIoInstance> create_checkpoint_io(const std::string& yaml) {
    return factory().create_checkpoint_io(
        *job("checkpoint_io: " + yaml + "\n").find("checkpoint_io"));
  }
  // The message of a failed create_hook, or "(created)".
  std::string create_hook_error(const std::string& yaml) {
    try {
      create_hook(yaml);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(created)";
  }

  // Log lines at `level` or above, text only.
  std::vector<std::string> log_texts(rh_LogLevel level = RH_LOG_INFO) const {
    std::vector<std::string> out;
    for (const LogLine& l : logs)
      if (l.level >= level) out.push_back(l.text);
    return out;
  }

  host::HostServices services;
  host::PluginRegistry registry{host::NativeTag{}, services};
  TempDir dir;
  std::vector<LogLine> logs;
  CheckpointRecorder checkpoints;

 private:
  static PluginTestHost*& current() {
    static PluginTestHost* host = nullptr;
    return host;
  }

  const config::Node& job(const std::string& text) {
    const auto path =
        dir.write("job" + std::to_string(jobs_.size()) + ".yaml", "model: {type: mlp}\n" + text);
    jobs_.push_back(config::load_job(path.string(), {}));
    return *jobs_.back().root;
  }
  host::ComponentFactory& factory() {
    if (!factory_)
      factory_ = std::make_unique<host::ComponentFactory>(registry, services, dir.path(),
                                                          work_dir().string());
    return *factory_;
  }

  static void Log(rh_Context*, rh_LogLevel level, const char* message, size_t size) {
    current()->logs.push_back({level, std::string(message, size)});
  }

  static rh_Error* CheckpointSave(rh_Context*, const char* n, size_t size) {
    CheckpointRecorder& r = current()->checkpoints;
    const std::string name(n, size);
    r.calls.push_back("save " + name);
    if (r.fail_save.count(name)) return host::new_error(RH_ERROR_IO, "disk full saving " + name);
    rh_StateDict state;
    if (r.hook != nullptr && r.hook->wants(RH_EVENT_BEFORE_SAVE_CHECKPOINT)) {
      Event e;
      e.state = r.state;
      e.checkpoint = &state;
      e.dir = (current()->work_dir() / name).string();
      const std::string error = e.send(*r.hook, RH_EVENT_BEFORE_SAVE_CHECKPOINT);
      if (!error.empty()) return host::new_error(RH_ERROR_INTERNAL, error);
    }
    r.states[name] = state;
    r.existing.insert(name);
    r.latest = name;
    return nullptr;
  }

  static rh_Error* CheckpointRemove(rh_Context*, const char* n, size_t size) {
    CheckpointRecorder& r = current()->checkpoints;
    const std::string name(n, size);
    r.calls.push_back("remove " + name);
    if (r.fail_remove.count(name)) return host::new_error(RH_ERROR_IO, "cannot remove " + name);
    if (name == r.latest)
      return host::new_error(RH_ERROR_FAILED_PRECONDITION, name + " is what latest points to");
    if (r.existing.erase(name) == 0) return host::new_error(RH_ERROR_NOT_FOUND, "no " + name);
    return nullptr;
  }

  std::vector<config::Job> jobs_;  // every job created from, kept alive for the nodes
  std::unique_ptr<host::ComponentFactory> factory_;
};

}  // namespace rh::test
