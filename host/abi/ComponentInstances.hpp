// The instances of plugin components the host made (ComponentFactory), as
// the host calls them: typed methods that own each entry's NULL default
// (rh_strategy.h, rh_hook.h, rh_ckpt_io.h state them), call the plugin
// behind call_plugin's last line of defence, and throw the HostError of a
// failed call naming the component and the entry. The lifecycle calls
// these, never a vtable entry.
#pragma once

#include <cstdint>
#include <string>

#include "abi/PluginRegistry.hpp"

namespace rh::host {

// What every instance shares: which component it is, and its context.
struct InstanceInfo {
  const Component* component = nullptr;
  rh_Context* context = nullptr;
  std::string what;  // "hook 'trace' (rh_hook_trace, /path/librh_hook_trace.so)"
};

class HookInstance {
 public:
  HookInstance(InstanceInfo info, rh_HookInstance* handle, int priority, uint64_t mask);
  ~HookInstance();
  HookInstance(const HookInstance&) = delete;
  HookInstance& operator=(const HookInstance&) = delete;

  const std::string& type() const { return info_.component->type_name; }
  const std::string& what() const { return info_.what; }
  int priority() const { return priority_; }
  bool wants(rh_HookEvent event) const { return (mask_ & RH_EVENT_BIT(event)) != 0; }
  void set_dispatch(int priority, uint64_t mask) {
    priority_ = priority;
    mask_ = mask;
  }
  // Error policy (`on_error:`): false = a failure stops the run (default),
  // true = it is logged as a warning and the run goes on.
  void set_warn_on_error(bool warn) { warn_on_error_ = warn; }
  bool warn_on_error() const { return warn_on_error_; }
  // Throws HostError naming the hook and the event.
  void on_event(const rh_HookEventArgs& args);

 private:
  InstanceInfo info_;
  rh_HookInstance* handle_;
  int priority_;
  uint64_t mask_;
  bool warn_on_error_ = false;
};

// A strategy. The registry's copy of its vtable is zero past the plugin's
// struct_size (PluginRegistry.hpp), so an entry of a newer ABI minor than
// the plugin's is absent like a NULL one: has_*() is the whole test. Every
// call throws HostError "<what> <Entry>: <the plugin's message>".
class StrategyInstance {
 public:
  StrategyInstance(InstanceInfo info, rh_StrategyInstance* handle);
  ~StrategyInstance();
  StrategyInstance(const StrategyInstance&) = delete;
  StrategyInstance& operator=(const StrategyInstance&) = delete;

  const std::string& type() const { return info_.component->type_name; }
  const std::string& what() const { return info_.what; }
  // Traits with the defaults of rh_strategy.h filled in first.
  rh_StrategyTraits traits() const;

  // Which optional entries the plugin has (the host's rules between them
  // and the traits: lifecycle/JobComponents.cpp).
  bool has_wrap() const { return vtable().Wrap != nullptr; }
  bool has_optimizer_params() const { return vtable().OptimizerParams != nullptr; }
  bool has_sync_gradients() const { return vtable().SyncGradients != nullptr; }
  bool has_after_optimizer_step() const { return vtable().AfterOptimizerStep != nullptr; }
  bool has_should_step() const { return vtable().ShouldStep != nullptr; }
  bool has_reduce_grad_norm() const { return vtable().ReduceGradNorm != nullptr; }
  bool has_unit_params() const { return vtable().UnitParams != nullptr; }
  bool has_state_import() const { return vtable().StateImport != nullptr; }
  bool has_estimate_memory() const { return vtable().EstimateMemory != nullptr; }
  bool has_tensor_parallel_plan() const { return vtable().TensorParallelPlan != nullptr; }

  // The entries in lifecycle order; an absent optional one does what its
  // header says NULL means.
  void setup_env(rh_SetupEnvArgs& args);  // required
  void wrap(const rh_WrapArgs& args);     // absent: the model stays as built
  // Absent: the optimizer steps the model's parameters (has_optimizer_params).
  void optimizer_params(const rh_OptimParamSink& sink);
  void before_backward(bool sync);  // absent: nothing
  double loss_scale();              // absent: 1
  void sync_gradients(bool sync);   // absent: nothing (one process)
  bool should_step();               // absent: true
  // The gradient norm over every rank's shards from this rank's `local`
  // (absent: refused at step 1 where it is needed; JobComponents.cpp).
  double reduce_grad_norm(double norm_type, double local);
  void after_optimizer_step();                         // absent: nothing
  void unit_params(int32_t unit, rh_UnitParamsOp op);  // absent: refused at step 1 when needed
  void state_export(rh_StateDict& dict);               // absent: no state
  void state_import(const rh_StateDict& dict);         // absent: nothing
  // Absent: false (the strategy does not estimate its memory); `out` is
  // filled by the plugin otherwise.
  bool estimate_memory(const rh_MemoryEstimateArgs& args, rh_MemoryEstimate& out) const;
  // Absent: args.size stays 1 (no tensor parallelism).
  void tensor_parallel_plan(rh_TensorParallelPlanArgs& args);
  void teardown();  // absent: nothing

 private:
  const rh_StrategyVtable& vtable() const;
  template <class Fn>
  void call(const char* entry, Fn&& fn) const;

  InstanceInfo info_;
  rh_StrategyInstance* handle_;
};

class CheckpointIoInstance {
 public:
  CheckpointIoInstance(InstanceInfo info, rh_CheckpointIoInstance* handle);
  ~CheckpointIoInstance();
  CheckpointIoInstance(const CheckpointIoInstance&) = delete;
  CheckpointIoInstance& operator=(const CheckpointIoInstance&) = delete;

  const std::string& type() const { return info_.component->type_name; }
  const std::string& what() const { return info_.what; }
  // SavesInBackground (ABI 1.6): Save only queues the write.
  bool saves_in_background() const;

  // One method per entry, each called through call_plugin (a C++
  // exception escaping the plugin is contained): the entry's error, owned
  // by the caller, or NULL. The callers name it (CheckpointStore throws it
  // with the checkpoint's path; HostApi's CheckpointIo_* hand it to the
  // plugin that wraps this one).
  rh_Error* save(const rh_CheckpointFileArgs& args) const;
  rh_Error* load(const rh_CheckpointFileArgs& args) const;
  // Optional entries: has_*() says whether the plugin has it; absent, a
  // call does nothing (flush, verify: NULL) or is refused (load_slices:
  // RH_ERROR_UNIMPLEMENTED, "it reads whole files only").
  bool has_flush() const { return vtable().Flush != nullptr; }
  rh_Error* flush() const;
  bool has_verify() const { return vtable().Verify != nullptr; }
  rh_Error* verify(const rh_CheckpointFileArgs& args) const;
  bool has_load_slices() const { return vtable().LoadSlices != nullptr; }
  rh_Error* load_slices(const rh_CheckpointFileArgs& args, const rh_CheckpointSlice* slices,
                        size_t num_slices) const;

 private:
  const rh_CheckpointIoVtable& vtable() const;

  InstanceInfo info_;
  rh_CheckpointIoInstance* handle_;
};

}  // namespace rh::host
