// HostServices: the host's implementation of the rh_HostApi table, and the
// per-plugin / per-component contexts handed out with it.
//
// The non-torch entries (errors, logging, config, run state, state dicts)
// are filled here. The torch layer (host/torch_services) fills Tensor_Alloc,
// Device_Current and Stream_Current; the communicator fills Comm_*. Entries
// nobody filled stay NULL, which the ABI defines as "not provided".
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rh/rh_host.h"

namespace rh::config {
class Node;
}
namespace rh::host {
class HostServices;
class CheckpointIoInstance;
}  // namespace rh::host

// Behind the opaque rh_Context: who is calling, for logs and errors.
struct rh_Context {
  std::string plugin;     // plugin name, e.g. "rh_hook_trace"
  std::string component;  // e.g. "hook trace", empty for the plugin itself
  std::string log_name;   // what log lines are prefixed with
  rh::host::HostServices* services;
};

namespace rh::host {

class HostServices {
 public:
  HostServices();
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  const rh_HostApi* api() const { return &api_; }
  // For the layers that provide more entries (torch, comm) at start-up.
  rh_HostApi& mutable_api() { return api_; }

  // A context owned by these services, valid as long as they are.
  rh_Context* new_context(const std::string& plugin, const std::string& component);

  void set_run_state(const rh_RunState& state);
  rh_RunState run_state() const;
  void put_metric(std::string name, double value);
  // Metrics put since the last call, in order.
  std::vector<std::pair<std::string, double>> take_metrics();

  // The device the strategy chose (Device_Current); CPU until SetupEnv.
  void set_device(DLDevice device);
  DLDevice device() const;

  // What Checkpoint_Save / Checkpoint_Remove do: installed by the runner
  // while a run can checkpoint; unset, those calls fail with
  // RH_ERROR_FAILED_PRECONDITION. A handler reports failure by throwing.
  using CheckpointHandler = std::function<void(const std::string& name)>;
  void set_checkpoint_handlers(CheckpointHandler save, CheckpointHandler remove);
  const CheckpointHandler& checkpoint_save() const { return checkpoint_save_; }
  const CheckpointHandler& checkpoint_remove() const { return checkpoint_remove_; }

  // What CheckpointIo_Create does (a checkpoint-IO component wrapping
  // another): installed by the component factory while it exists; unset,
  // the call fails with RH_ERROR_FAILED_PRECONDITION. Throws HostError.
  using CheckpointIoFactory =
      std::function<std::unique_ptr<CheckpointIoInstance>(const config::Node& spec)>;
  void set_checkpoint_io_factory(CheckpointIoFactory factory);
  const CheckpointIoFactory& checkpoint_io_factory() const { return checkpoint_io_factory_; }

 private:
  rh_HostApi api_;
  std::deque<std::unique_ptr<rh_Context>> contexts_;
  mutable std::mutex mutex_;  // guards contexts_, state_, metrics_
  rh_RunState state_;
  std::vector<std::pair<std::string, double>> metrics_;
  DLDevice device_{kDLCPU, 0};
  CheckpointHandler checkpoint_save_;
  CheckpointHandler checkpoint_remove_;
  CheckpointIoFactory checkpoint_io_factory_;
};

}  // namespace rh::host
