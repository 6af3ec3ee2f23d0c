// rh/cpp/torch_compat.hpp — the one place where LibTorch 1.13 (Debian) and
// 2.x (the pip wheel) differ for runner-host code. Include it instead of
// reaching for the differing APIs directly.
#pragma once

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace rh::compat {

// at::fromDLPack takes `const DLManagedTensor*` in 1.13 and `DLManagedTensor*`
// in 2.x; both take ownership (they call src->deleter when the tensor dies).
inline at::Tensor from_dlpack_owning(DLManagedTensor* src) {
#if TORCH_VERSION_MAJOR >= 2
  return at::fromDLPack(src);
#else
  return at::fromDLPack(static_cast<const DLManagedTensor*>(src));
#endif
}

// torch::optim::Optimizer::state() is keyed by the parameter's TensorImpl: its
// address printed as text in 1.13 (c10::guts::to_string), the address itself
// (void*) in 2.x. Pass the optimizer's state() map; the key type picks the form,
// so no version number is needed here.
template <typename StateMap>
typename StateMap::key_type optimizer_state_key(const StateMap& /*state*/,
                                                const at::Tensor& param) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;
    text << static_cast<const void*>(param.unsafeGetTensorImpl());
    return text.str();
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}

}  // namespace rh::compat

// ---- CUDA caching allocator figures (IterationMetrics), CUDA builds only --
#ifdef RH_WITH_C10_CUDA
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstddef>

// Declared (empty) for a LibTorch without it (1.13): see kCudaStatAggregate.
namespace c10::CachingDeviceAllocator {}

namespace rh::compat {

// The allocator's StatType (the index into DeviceStats' arrays) is
// c10::cuda::CUDACachingAllocator::StatType in 1.13 and
// c10::CachingDeviceAllocator::StatType in 2.6 (later versions declare it in
// c10::CachingAllocator and pull it in with a using-directive). Qualified
// lookup through these directives finds it in whichever namespace this
// LibTorch has, so there is no version boundary to get wrong.
namespace cuda_allocator_stats {
using namespace c10::cuda::CUDACachingAllocator;
using namespace c10::CachingDeviceAllocator;
}  // namespace cuda_allocator_stats

// getDeviceStats(device).allocated_bytes[kCudaStatAggregate]: all pools.
inline constexpr std::size_t kCudaStatAggregate =
    static_cast<std::size_t>(cuda_allocator_stats::StatType::AGGREGATE);

}  // namespace rh::compat
#endif  // RH_WITH_C10_CUDA

// ---- Mixed precision and fused attention (the host's AmpOptimWrapper and
// the built-in transformer blocks) ------------------------------------------
namespace rh::compat {

// Autocast for one device type, as `with torch.autocast(device_type, dtype)`:
// enabled with `dtype` for the scope, the previous setting restored after,
// and the cache of casted weights cleared when the outermost scope ends.
// 1.13 has a pair of functions per device type (set_enabled for CUDA,
// set_cpu_enabled for the CPU); 2.4 takes the device type as an argument and
// deprecates the pairs.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device_type, at::ScalarType dtype) : device_type_(device_type) {
    was_enabled_ = enabled(device_type_);
    was_dtype_ = get_dtype(device_type_);
    set(device_type_, true, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set(device_type_, was_enabled_, was_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

  // This thread's autocast setting for a device type.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  static bool enabled(c10::DeviceType t) { return at::autocast::is_autocast_enabled(t); }
  static at::ScalarType get_dtype(c10::DeviceType t) { return at::autocast::get_autocast_dtype(t); }

 private:
  static void set(c10::DeviceType t, bool on, at::ScalarType dtype) {
    at::autocast::set_autocast_dtype(t, dtype);
    at::autocast::set_autocast_enabled(t, on);
  }
#else
  static bool enabled(c10::DeviceType t) {
    return t == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
  }
  static at::ScalarType get_dtype(c10::DeviceType t) {
    return t == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                      : at::autocast::get_autocast_cpu_dtype();
  }

 private:
  static void set(c10::DeviceType t, bool on, at::ScalarType dtype) {
    if (t == c10::DeviceType::CUDA) {
      at::autocast::set_autocast_gpu_dtype(dtype);
      at::autocast::set_enabled(on);
    } else {
      at::autocast::set_autocast_cpu_dtype(dtype);
      at::autocast::set_cpu_enabled(on);
    }
  }
#endif
  c10::DeviceType device_type_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

// Whether autocast on the CPU computes in `dtype`: bfloat16 everywhere;
// float16 from LibTorch 2.4 (1.13 has no float16 matrix multiply on the CPU,
// and its CPU autocast takes only bfloat16).
inline bool cpu_autocast_supports(at::ScalarType dtype) {
  if (dtype == at::kBFloat16) return true;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  return dtype == at::kHalf;
#else
  return false;
#endif
}

// at::scaled_dot_product_attention (LibTorch 2.0; flash / memory-efficient
// kernels on the GPU, a fused kernel or the math path on the CPU), and
// nothing in 1.13, whose callers keep the written-out attention.
#if TORCH_VERSION_MAJOR >= 2
constexpr bool kHasFusedAttention = true;
inline at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k,
                                               const at::Tensor& v, double dropout_p,
                                               bool is_causal) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout_p, is_causal);
}
#else
constexpr bool kHasFusedAttention = false;
inline at::Tensor scaled_dot_product_attention(const at::Tensor&, const at::Tensor&,
                                               const at::Tensor&, double, bool) {
  TORCH_CHECK(false, "scaled_dot_product_attention needs LibTorch 2.0 (this is ", TORCH_VERSION,
              ")");
}
#endif

// GradScaler.unscale_: every gradient multiplied by `inv_scale` in place;
// returns a one-element float tensor on the gradients' device, 1 when any
// of them has an inf or a nan (read it after agreeing across ranks). CUDA
// gradients go through PyTorch's fused kernel (one launch per dtype), CPU
// ones through plain ops (1.13 has no CPU kernel for it).
inline at::Tensor unscale_and_find_inf(const std::vector<at::Tensor>& grads, double inv_scale) {
  const at::Device device = grads.empty() ? at::Device(at::kCPU) : grads.front().device();
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor found = at::zeros({1}, f32);
  if (grads.empty()) return found;
  const auto inv = static_cast<float>(inv_scale);
  if (device.is_cuda()) {
    const at::Tensor inv_t = at::full({1}, inv, f32);
    std::vector<std::vector<at::Tensor>> by_dtype;
    for (const at::Tensor& g : grads) {
      auto it = std::find_if(by_dtype.begin(), by_dtype.end(), [&](const auto& group) {
        return group.front().scalar_type() == g.scalar_type();
      });
      if (it == by_dtype.end())
        by_dtype.push_back({g});
      else
        it->push_back(g);
    }
    for (auto& group : by_dtype)
      at::_amp_foreach_non_finite_check_and_unscale_(group, found, inv_t);
    return found;
  }
  at::Tensor any = at::zeros({}, at::TensorOptions().dtype(at::kBool));
  for (const at::Tensor& g : grads) {
    at::Tensor gm = g;  // the same tensor: mul_ writes the gradient itself
    gm.mul_(inv);
    any.logical_or_(at::isfinite(g).logical_not().any());
  }
  found.copy_(any.reshape({1}));
  return found;
}

}  // namespace rh::compat

// ---- Fused Adam / AdamW (optimizer `fused: true`, as torch.optim's) --------
namespace rh::compat {

// PyTorch's fused Adam(W) kernels (one multi-tensor launch per step): on CUDA
// from LibTorch 2.0, on the CPU from 2.4. 1.13 has none that this host uses.
inline bool fused_adam_supports(const c10::Device& device) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  return device.is_cuda() || device.is_cpu();
#elif TORCH_VERSION_MAJOR >= 2
  return device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

// One step of torch.optim's _fused_adam(w): `state_steps` (float32 scalars
// on the parameters' device) already incremented; `decoupled`: AdamW.
inline void fused_adam(bool decoupled, at::TensorList params, at::TensorList grads,
                       at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                       at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double lr,
                       double beta1, double beta2, double weight_decay, double eps, bool amsgrad) {
#if TORCH_VERSION_MAJOR >= 2
  if (decoupled)
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1,
                      beta2, weight_decay, eps, amsgrad, /*maximize=*/false);
  else
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1,
                     beta2, weight_decay, eps, amsgrad, /*maximize=*/false);
#else
  (void)decoupled, (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs;
  (void)max_exp_avg_sqs, (void)state_steps, (void)lr, (void)beta1, (void)beta2;
  (void)weight_decay, (void)eps, (void)amsgrad;
  TORCH_CHECK(false, "fused Adam needs LibTorch 2.0 (this is ", TORCH_VERSION, ")");
#endif
}

}  // namespace rh::compat
