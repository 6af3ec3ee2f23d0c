// rh/cpp/plugin.hpp — write a plugin component as an ordinary C++ class.
//
// The adapters below generate the C vtable: thin extern-"C"-compatible
// static functions that route each call to the class and catch every
// exception (rh::guard), so nothing C++ crosses the ABI. Optional methods
// that the class does not define become NULL vtable entries (the host's
// documented default); one it defines with another signature than the
// adapter calls is a compile error, not a NULL entry.
//
//   class TraceHook {
//    public:
//     explicit TraceHook(const rh_CreateArgs& args);            // required
//     void on_event(const rh_HookEventArgs& event);              // required
//     uint64_t event_mask() const;                               // optional
//     int32_t priority() const;                                  // optional
//   };
//   const rh_Component kComponents[] = {
//       rh::hook_component<TraceHook>("trace", "records every event")};
//   const rh_PluginInfo kInfo =
//       rh::plugin_info("my_hooks", "0.1.0", RH_NATIVE_TAG_NONE, kComponents);
//   RH_PLUGIN_ENTRY(kInfo)
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "rh/cpp/config.hpp"
#include "rh/cpp/error.hpp"
#include "rh/rh_plugin.h"

namespace rh {

#define RH_DETAIL_DETECT(name, expr) \
  template <class T, class = void>   \
  struct name : std::false_type {};  \
  template <class T>                 \
  struct name<T, std::void_t<decltype(expr)>> : std::true_type {}

// An optional method: `name<T>::value` is whether T defines `method` so that
// the adapter can call it as `expr` does. A class that has a member of that
// name which cannot be called so (a non-const reference where the host passes
// a const one, a missing const, another argument type) does not compile:
// silently leaving the entry NULL would make the plugin look right and skip
// the method. The signature the adapter expects is in the comment above each
// use below and in docs/writing-a-strategy.md.
#define RH_DETAIL_METHOD(name, method, expr)                                         \
  RH_DETAIL_DETECT(name##_callable, expr);                                           \
  RH_DETAIL_DETECT(name##_named, &T::method);                                        \
  template <class T>                                                                 \
  struct name : name##_callable<T> {                                                 \
    static_assert(name##_callable<T>::value || !name##_named<T>::value,              \
                  "rh/cpp/plugin.hpp: " #method                                      \
                  "() has the wrong signature for its vtable entry, which would be " \
                  "left NULL: declare it as the comment in rh/cpp/plugin.hpp says"); \
  }

namespace detail {
// uint64_t event_mask() const; int32_t priority() const.
RH_DETAIL_METHOD(has_event_mask, event_mask, std::declval<const T&>().event_mask());
RH_DETAIL_METHOD(has_priority, priority, std::declval<const T&>().priority());
// void traits(rh_StrategyTraits& out) const.
RH_DETAIL_METHOD(has_traits, traits,
                 std::declval<const T&>().traits(std::declval<rh_StrategyTraits&>()));
// void wrap(const rh_WrapArgs&); void optimizer_params(const rh_OptimParamSink&);
// void sync_gradients(bool sync); void after_optimizer_step();
// void state_export(rh_StateDict*); void state_import(const rh_StateDict*);
// void teardown(); void before_backward(bool sync) (ABI 1.1).
RH_DETAIL_METHOD(has_wrap, wrap, std::declval<T&>().wrap(std::declval<const rh_WrapArgs&>()));
RH_DETAIL_METHOD(has_optimizer_params, optimizer_params,
                 std::declval<T&>().optimizer_params(std::declval<const rh_OptimParamSink&>()));
RH_DETAIL_METHOD(has_sync_gradients, sync_gradients, std::declval<T&>().sync_gradients(true));
RH_DETAIL_METHOD(has_after_optimizer_step, after_optimizer_step,
                 std::declval<T&>().after_optimizer_step());
RH_DETAIL_METHOD(has_state_export, state_export,
                 std::declval<T&>().state_export(std::declval<rh_StateDict*>()));
RH_DETAIL_METHOD(has_state_import, state_import,
                 std::declval<T&>().state_import(std::declval<const rh_StateDict*>()));
RH_DETAIL_METHOD(has_teardown, teardown, std::declval<T&>().teardown());
RH_DETAIL_METHOD(has_before_backward, before_backward, std::declval<T&>().before_backward(true));
// ABI 1.3: double loss_scale(); bool should_step(); double reduce_grad_norm(double norm_type,
// double local); void unit_params(int32_t unit, rh_UnitParamsOp op).
RH_DETAIL_METHOD(has_loss_scale, loss_scale, std::declval<T&>().loss_scale());
RH_DETAIL_METHOD(has_should_step, should_step, std::declval<T&>().should_step());
RH_DETAIL_METHOD(has_reduce_grad_norm, reduce_grad_norm,
                 std::declval<T&>().reduce_grad_norm(2.0, 1.0));
RH_DETAIL_METHOD(has_unit_params, unit_params,
                 std::declval<T&>().unit_params(int32_t{0}, RH_UNIT_PARAMS_GATHER));
// void verify(const rh_CheckpointFileArgs&); void flush();
// ABI 1.5: void load_slices(const rh_CheckpointFileArgs&, const rh_CheckpointSlice*, size_t).
RH_DETAIL_METHOD(has_verify, verify,
                 std::declval<T&>().verify(std::declval<const rh_CheckpointFileArgs&>()));
RH_DETAIL_METHOD(has_flush, flush, std::declval<T&>().flush());
RH_DETAIL_METHOD(has_load_slices, load_slices,
                 std::declval<T&>().load_slices(std::declval<const rh_CheckpointFileArgs&>(),
                                                std::declval<const rh_CheckpointSlice*>(),
                                                size_t{}));
// ABI 1.9: void estimate_memory(const rh_MemoryEstimateArgs& args, rh_MemoryEstimate& out).
RH_DETAIL_METHOD(has_estimate_memory, estimate_memory,
                 std::declval<T&>().estimate_memory(std::declval<const rh_MemoryEstimateArgs&>(),
                                                    std::declval<rh_MemoryEstimate&>()));
// ABI 1.11: void tensor_parallel_plan(rh_TensorParallelPlanArgs& args).
RH_DETAIL_METHOD(
    has_tensor_parallel_plan, tensor_parallel_plan,
    std::declval<T&>().tensor_parallel_plan(std::declval<rh_TensorParallelPlanArgs&>()));
// ABI 1.6: bool saves_in_background() const.
RH_DETAIL_METHOD(has_saves_in_background, saves_in_background,
                 std::declval<const T&>().saves_in_background());

// What every adapter allocates per instance: the host table (to build
// errors) next to the user's object.
template <class T>
struct Box {
  explicit Box(const rh_CreateArgs& args) : host(args.host), impl(args) {}
  const rh_HostApi* host;
  T impl;
};

template <class T, class Handle>
Box<T>* unbox(Handle* handle) {
  return reinterpret_cast<Box<T>*>(handle);
}

template <class T, class Handle>
rh_Error* create(const rh_CreateArgs* args, Handle** out) {
  return guard(args->host, [&] { *out = reinterpret_cast<Handle*>(new Box<T>(*args)); });
}

template <class T, class Handle>
void destroy(Handle* handle) {
  delete unbox<T>(handle);  // destructors must not throw (C++ default)
}
}  // namespace detail

// ---- Hooks ---------------------------------------------------------------
template <class T>
struct HookAdapter {
  using Box = detail::Box<T>;
  static uint64_t EventMask(const rh_HookInstance* h) {
    if constexpr (detail::has_event_mask<T>::value) {
      return detail::unbox<T>(const_cast<rh_HookInstance*>(h))->impl.event_mask();
    } else {
      return RH_EVENT_MASK_ALL;
    }
  }
  static int32_t Priority(const rh_HookInstance* h) {
    if constexpr (detail::has_priority<T>::value) {
      return detail::unbox<T>(const_cast<rh_HookInstance*>(h))->impl.priority();
    } else {
      return RH_PRIORITY_NORMAL;
    }
  }
  static rh_Error* OnEvent(rh_HookInstance* h, const rh_HookEventArgs* args) {
    Box* b = detail::unbox<T>(h);
    return guard(b->host, [&] { b->impl.on_event(*args); });
  }
  static constexpr rh_HookVtable vtable = {
      RH_HOOK_VTABLE_STRUCT_SIZE,
      &detail::create<T, rh_HookInstance>,
      &detail::destroy<T, rh_HookInstance>,
      detail::has_event_mask<T>::value ? &EventMask : nullptr,
      detail::has_priority<T>::value ? &Priority : nullptr,
      &OnEvent,
  };
};

// ---- Strategies ----------------------------------------------------------
template <class T>
struct StrategyAdapter {
  using Box = detail::Box<T>;
  static Box* unbox(rh_StrategyInstance* s) { return detail::unbox<T>(s); }

  static void GetTraits(const rh_StrategyInstance* s, rh_StrategyTraits* out) {
    if constexpr (detail::has_traits<T>::value)
      unbox(const_cast<rh_StrategyInstance*>(s))->impl.traits(*out);
  }
  static rh_Error* SetupEnv(rh_StrategyInstance* s, rh_SetupEnvArgs* args) {
    return guard(unbox(s)->host, [&] { unbox(s)->impl.setup_env(*args); });
  }
  static rh_Error* Wrap(rh_StrategyInstance* s, const rh_WrapArgs* args) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_wrap<T>::value) unbox(s)->impl.wrap(*args);
    });
  }
  static rh_Error* OptimizerParams(rh_StrategyInstance* s, const rh_OptimParamSink* sink) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_optimizer_params<T>::value) unbox(s)->impl.optimizer_params(*sink);
    });
  }
  static rh_Error* SyncGradients(rh_StrategyInstance* s, int32_t sync) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_sync_gradients<T>::value) unbox(s)->impl.sync_gradients(sync != 0);
    });
  }
  static rh_Error* AfterOptimizerStep(rh_StrategyInstance* s) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_after_optimizer_step<T>::value)
        unbox(s)->impl.after_optimizer_step();
    });
  }
  static rh_Error* StateExport(rh_StrategyInstance* s, rh_StateDict* dict) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_state_export<T>::value) unbox(s)->impl.state_export(dict);
    });
  }
  static rh_Error* StateImport(rh_StrategyInstance* s, const rh_StateDict* dict) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_state_import<T>::value) unbox(s)->impl.state_import(dict);
    });
  }
  static rh_Error* Teardown(rh_StrategyInstance* s) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_teardown<T>::value) unbox(s)->impl.teardown();
    });
  }
  static rh_Error* BeforeBackward(rh_StrategyInstance* s, int32_t sync) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_before_backward<T>::value)
        unbox(s)->impl.before_backward(sync != 0);
    });
  }
  static rh_Error* LossScale(rh_StrategyInstance* s, double* scale) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_loss_scale<T>::value) *scale = unbox(s)->impl.loss_scale();
    });
  }
  static rh_Error* ShouldStep(rh_StrategyInstance* s, int32_t* step) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_should_step<T>::value) *step = unbox(s)->impl.should_step() ? 1 : 0;
    });
  }
  static rh_Error* ReduceGradNorm(rh_StrategyInstance* s, double norm_type, double* value) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_reduce_grad_norm<T>::value)
        *value = unbox(s)->impl.reduce_grad_norm(norm_type, *value);
    });
  }
  static rh_Error* UnitParams(rh_StrategyInstance* s, int32_t unit, rh_UnitParamsOp op) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_unit_params<T>::value) unbox(s)->impl.unit_params(unit, op);
    });
  }
  static rh_Error* EstimateMemory(rh_StrategyInstance* s, const rh_MemoryEstimateArgs* args,
                                  rh_MemoryEstimate* out) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_estimate_memory<T>::value)
        unbox(s)->impl.estimate_memory(*args, *out);
    });
  }
  static rh_Error* TensorParallelPlan(rh_StrategyInstance* s, rh_TensorParallelPlanArgs* args) {
    return guard(unbox(s)->host, [&] {
      if constexpr (detail::has_tensor_parallel_plan<T>::value)
        unbox(s)->impl.tensor_parallel_plan(*args);
    });
  }
  static constexpr rh_StrategyVtable vtable = {
      RH_STRATEGY_VTABLE_STRUCT_SIZE,
      &detail::create<T, rh_StrategyInstance>,
      &detail::destroy<T, rh_StrategyInstance>,
      detail::has_traits<T>::value ? &GetTraits : nullptr,
      &SetupEnv,
      detail::has_wrap<T>::value ? &Wrap : nullptr,
      detail::has_optimizer_params<T>::value ? &OptimizerParams : nullptr,
      detail::has_sync_gradients<T>::value ? &SyncGradients : nullptr,
      detail::has_after_optimizer_step<T>::value ? &AfterOptimizerStep : nullptr,
      detail::has_state_export<T>::value ? &StateExport : nullptr,
      detail::has_state_import<T>::value ? &StateImport : nullptr,
      detail::has_teardown<T>::value ? &Teardown : nullptr,
      detail::has_before_backward<T>::value ? &BeforeBackward : nullptr,
      detail::has_loss_scale<T>::value ? &LossScale : nullptr,
      detail::has_should_step<T>::value ? &ShouldStep : nullptr,
      detail::has_reduce_grad_norm<T>::value ? &ReduceGradNorm : nullptr,
      detail::has_unit_params<T>::value ? &UnitParams : nullptr,
      detail::has_estimate_memory<T>::value ? &EstimateMemory : nullptr,
      detail::has_tensor_parallel_plan<T>::value ? &TensorParallelPlan : nullptr,
  };
};

// ---- Checkpoint IO -------------------------------------------------------
template <class T>
struct CheckpointIoAdapter {
  using Box = detail::Box<T>;
  static Box* unbox(rh_CheckpointIoInstance* c) { return detail::unbox<T>(c); }

  static rh_Error* Save(rh_CheckpointIoInstance* c, const rh_CheckpointFileArgs* args) {
    return guard(unbox(c)->host, [&] { unbox(c)->impl.save(*args); });
  }
  static rh_Error* Load(rh_CheckpointIoInstance* c, const rh_CheckpointFileArgs* args) {
    return guard(unbox(c)->host, [&] { unbox(c)->impl.load(*args); });
  }
  static rh_Error* Verify(rh_CheckpointIoInstance* c, const rh_CheckpointFileArgs* args) {
    return guard(unbox(c)->host, [&] {
      if constexpr (detail::has_verify<T>::value) unbox(c)->impl.verify(*args);
    });
  }
  static rh_Error* Flush(rh_CheckpointIoInstance* c) {
    return guard(unbox(c)->host, [&] {
      if constexpr (detail::has_flush<T>::value) unbox(c)->impl.flush();
    });
  }
  static rh_Error* LoadSlices(rh_CheckpointIoInstance* c, const rh_CheckpointFileArgs* args,
                              const rh_CheckpointSlice* slices, size_t n) {
    return guard(unbox(c)->host, [&] {
      if constexpr (detail::has_load_slices<T>::value) unbox(c)->impl.load_slices(*args, slices, n);
    });
  }
  static int32_t SavesInBackground(const rh_CheckpointIoInstance* c) {
    // Only a bool crosses: nothing to throw, so no guard.
    if constexpr (detail::has_saves_in_background<T>::value)
      return reinterpret_cast<const Box*>(c)->impl.saves_in_background() ? 1 : 0;
    return 0;
  }
  static constexpr rh_CheckpointIoVtable vtable = {
      RH_CHECKPOINT_IO_VTABLE_STRUCT_SIZE,
      &detail::create<T, rh_CheckpointIoInstance>,
      &detail::destroy<T, rh_CheckpointIoInstance>,
      &Save,
      &Load,
      detail::has_verify<T>::value ? &Verify : nullptr,
      detail::has_flush<T>::value ? &Flush : nullptr,
      detail::has_load_slices<T>::value ? &LoadSlices : nullptr,
      detail::has_saves_in_background<T>::value ? &SavesInBackground : nullptr,
  };
};

// ---- The library's entry point -------------------------------------------
// One component of this library, its vtable made by T's adapter:
//   const rh_Component kComponents[] = {
//       rh::strategy_component<DdpStrategy>("ddp", "data parallel: ...")};
//   const rh_PluginInfo kInfo =
//       rh::plugin_info("rh_strategy_ddp", "0.1.0", RH_NATIVE_TAG_TORCH, kComponents);
//   RH_PLUGIN_ENTRY(kInfo)
// The strings are literals (static, as rh_Component and rh_PluginInfo ask).
namespace detail {
template <size_t N>
constexpr rh_StringView view(const char (&literal)[N]) {
  return rh_StringView{literal, N - 1};
}
template <size_t N, size_t M>
constexpr rh_Component component(rh_ComponentKind kind, const char (&type_name)[N],
                                 const char (&description)[M], const void* vtable) {
  return {RH_COMPONENT_STRUCT_SIZE, kind, view(type_name), view(description), vtable};
}
}  // namespace detail

template <class T, size_t N, size_t M>
constexpr rh_Component strategy_component(const char (&type_name)[N],
                                          const char (&description)[M]) {
  return detail::component(RH_COMPONENT_STRATEGY, type_name, description,
                           &StrategyAdapter<T>::vtable);
}
template <class T, size_t N, size_t M>
constexpr rh_Component hook_component(const char (&type_name)[N], const char (&description)[M]) {
  return detail::component(RH_COMPONENT_HOOK, type_name, description, &HookAdapter<T>::vtable);
}
template <class T, size_t N, size_t M>
constexpr rh_Component checkpoint_io_component(const char (&type_name)[N],
                                               const char (&description)[M]) {
  return detail::component(RH_COMPONENT_CHECKPOINT_IO, type_name, description,
                           &CheckpointIoAdapter<T>::vtable);
}

// The library's rh_PluginInfo: built against this SDK's ABI, `components`
// a namespace-scope array, no Init or Shutdown (write the struct by hand for
// those). `native_tag`: RH_NATIVE_TAG_NONE, or RH_NATIVE_TAG_TORCH
// (rh/cpp/torch.hpp) for a library that links LibTorch.
template <size_t N, size_t V, size_t C>
constexpr rh_PluginInfo plugin_info(const char (&name)[N], const char (&version)[V],
                                    rh_NativeTag native_tag, const rh_Component (&components)[C]) {
  return {RH_PLUGIN_INFO_STRUCT_SIZE,
          RH_ABI_VERSION_MAJOR,
          RH_ABI_VERSION_MINOR,
          detail::view(name),
          detail::view(version),
          native_tag,
          components,
          C,
          nullptr,
          nullptr};
}

}  // namespace rh

// Defines the library's entry point, returning `info` (an rh_PluginInfo at
// namespace scope) to a host of any 1.x ABI.
#define RH_PLUGIN_ENTRY(info) \
  extern "C" RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t, uint32_t) { return &(info); }

namespace rh {

// Logging from a component: rh::log(args.host, args.context, RH_LOG_INFO, "msg").
inline void log(const rh_HostApi* host, rh_Context* context, rh_LogLevel level,
                const std::string& message) {
  host->Log(context, level, message.data(), message.size());
}

}  // namespace rh
