#include "abi/ComponentInstances.hpp"

#include <utility>

#include "abi/HostError.hpp"
#include "abi/PluginCall.hpp"

namespace rh::host {

HookInstance::HookInstance(InstanceInfo info, rh_HookInstance* handle, int priority, uint64_t mask)
    : info_(std::move(info)), handle_(handle), priority_(priority), mask_(mask) {}

HookInstance::~HookInstance() {
  auto destroy = std::get<rh_HookVtable>(info_.component->vtable).Destroy;
  if (destroy != nullptr)
    delete call_plugin(info_.what + " Destroy", [&]() -> rh_Error* {
      destroy(handle_);
      return nullptr;
    });
}

void HookInstance::on_event(const rh_HookEventArgs& args) {
  auto fn = std::get<rh_HookVtable>(info_.component->vtable).OnEvent;
  rh_Error* err = call_plugin(info_.what, "OnEvent", [&] { return fn(handle_, &args); });
  throw_if_error(err, info_.what);
}

StrategyInstance::StrategyInstance(InstanceInfo info, rh_StrategyInstance* handle)
    : info_(std::move(info)), handle_(handle) {}

StrategyInstance::~StrategyInstance() {
  auto destroy = vtable().Destroy;
  if (destroy != nullptr)
    delete call_plugin(info_.what + " Destroy", [&]() -> rh_Error* {
      destroy(handle_);
      return nullptr;
    });
}

const rh_StrategyVtable& StrategyInstance::vtable() const {
  return std::get<rh_StrategyVtable>(info_.component->vtable);
}

template <class Fn>
void StrategyInstance::call(const char* entry, Fn&& fn) const {
  throw_if_error(call_plugin(info_.what, entry, std::forward<Fn>(fn)), info_.what + " " + entry);
}

rh_StrategyTraits StrategyInstance::traits() const {
  rh_StrategyTraits t{
      RH_STRATEGY_TRAITS_STRUCT_SIZE, RH_LOAD_BEFORE_WRAP, 0, 0, DLDataType{0, 0, 0}, 0, 0,
      rh_StringView{nullptr, 0}};
  if (vtable().GetTraits != nullptr) vtable().GetTraits(handle_, &t);
  return t;
}

void StrategyInstance::setup_env(rh_SetupEnvArgs& args) {
  call("SetupEnv", [&] { return vtable().SetupEnv(handle_, &args); });
}

void StrategyInstance::wrap(const rh_WrapArgs& args) {
  if (has_wrap()) call("Wrap", [&] { return vtable().Wrap(handle_, &args); });
}

void StrategyInstance::optimizer_params(const rh_OptimParamSink& sink) {
  if (has_optimizer_params())
    call("OptimizerParams", [&] { return vtable().OptimizerParams(handle_, &sink); });
}

void StrategyInstance::before_backward(bool sync) {
  if (vtable().BeforeBackward != nullptr)
    call("BeforeBackward", [&] { return vtable().BeforeBackward(handle_, sync ? 1 : 0); });
}

double StrategyInstance::loss_scale() {
  double scale = 1;
  if (vtable().LossScale != nullptr)
    call("LossScale", [&] { return vtable().LossScale(handle_, &scale); });
  return scale;
}

void StrategyInstance::sync_gradients(bool sync) {
  if (has_sync_gradients())
    call("SyncGradients", [&] { return vtable().SyncGradients(handle_, sync ? 1 : 0); });
}

bool StrategyInstance::should_step() {
  int32_t step = 1;
  if (has_should_step()) call("ShouldStep", [&] { return vtable().ShouldStep(handle_, &step); });
  return step != 0;
}

double StrategyInstance::reduce_grad_norm(double norm_type, double local) {
  if (!has_reduce_grad_norm())
    throw HostError(RH_ERROR_FAILED_PRECONDITION,
                    info_.what + " has no ReduceGradNorm (ABI 1.3) to reduce the gradient norm");
  call("ReduceGradNorm", [&] { return vtable().ReduceGradNorm(handle_, norm_type, &local); });
  return local;
}

void StrategyInstance::after_optimizer_step() {
  if (has_after_optimizer_step())
    call("AfterOptimizerStep", [&] { return vtable().AfterOptimizerStep(handle_); });
}

void StrategyInstance::unit_params(int32_t unit, rh_UnitParamsOp op) {
  if (!has_unit_params())
    throw HostError(RH_ERROR_FAILED_PRECONDITION,
                    info_.what + " has no UnitParams (ABI 1.3) to hand over whole parameters");
  call("UnitParams", [&] { return vtable().UnitParams(handle_, unit, op); });
}

void StrategyInstance::state_export(rh_StateDict& dict) {
  if (vtable().StateExport != nullptr)
    call("StateExport", [&] { return vtable().StateExport(handle_, &dict); });
}

void StrategyInstance::state_import(const rh_StateDict& dict) {
  if (has_state_import()) call("StateImport", [&] { return vtable().StateImport(handle_, &dict); });
}

bool StrategyInstance::estimate_memory(const rh_MemoryEstimateArgs& args,
                                       rh_MemoryEstimate& out) const {
  if (!has_estimate_memory()) return false;
  call("EstimateMemory", [&] { return vtable().EstimateMemory(handle_, &args, &out); });
  return true;
}

void StrategyInstance::tensor_parallel_plan(rh_TensorParallelPlanArgs& args) {
  if (has_tensor_parallel_plan())
    call("TensorParallelPlan", [&] { return vtable().TensorParallelPlan(handle_, &args); });
}

void StrategyInstance::teardown() {
  if (vtable().Teardown != nullptr) call("Teardown", [&] { return vtable().Teardown(handle_); });
}

CheckpointIoInstance::CheckpointIoInstance(InstanceInfo info, rh_CheckpointIoInstance* handle)
    : info_(std::move(info)), handle_(handle) {}

CheckpointIoInstance::~CheckpointIoInstance() {
  auto destroy = vtable().Destroy;
  if (destroy != nullptr)
    delete call_plugin(info_.what + " Destroy", [&]() -> rh_Error* {
      destroy(handle_);
      return nullptr;
    });
}

const rh_CheckpointIoVtable& CheckpointIoInstance::vtable() const {
  return std::get<rh_CheckpointIoVtable>(info_.component->vtable);
}

rh_Error* CheckpointIoInstance::save(const rh_CheckpointFileArgs& args) const {
  return call_plugin(info_.what + " Save", [&] { return vtable().Save(handle_, &args); });
}

rh_Error* CheckpointIoInstance::load(const rh_CheckpointFileArgs& args) const {
  return call_plugin(info_.what + " Load", [&] { return vtable().Load(handle_, &args); });
}

rh_Error* CheckpointIoInstance::flush() const {
  if (!has_flush()) return nullptr;
  return call_plugin(info_.what + " Flush", [&] { return vtable().Flush(handle_); });
}

rh_Error* CheckpointIoInstance::verify(const rh_CheckpointFileArgs& args) const {
  if (!has_verify()) return nullptr;
  return call_plugin(info_.what + " Verify", [&] { return vtable().Verify(handle_, &args); });
}

rh_Error* CheckpointIoInstance::load_slices(const rh_CheckpointFileArgs& args,
                                            const rh_CheckpointSlice* slices,
                                            size_t num_slices) const {
  if (!has_load_slices())
    return new_error(RH_ERROR_UNIMPLEMENTED, "it reads whole files only (no LoadSlices)");
  return call_plugin(info_.what + " LoadSlices",
                     [&] { return vtable().LoadSlices(handle_, &args, slices, num_slices); });
}

bool CheckpointIoInstance::saves_in_background() const {
  // The registry's copy of the vtable is zero past the plugin's struct_size.
  const auto fn = vtable().SavesInBackground;
  return fn != nullptr && fn(handle_) != 0;
}

}  // namespace rh::host
