// Pieces the sharding strategies (zero, fsdp) share: a collective in flight
// with the DLPack views it borrows, a pool of flat buffers reused from step
// to step, and one rank's gradient taken into a flat buffer. Header-only;
// plugins only (ATen).
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "rh/cpp/error.hpp"
#include "rh/cpp/torch.hpp"
#include "rh/rh_host.h"

namespace rh::sharding {

// A collective in flight: its handle and the DLPack views it borrows (freed
// once it has finished).
struct InFlight {
  rh_CommWork* work = nullptr;
  DLManagedTensor* in = nullptr;
  DLManagedTensor* out = nullptr;

  // Frees the handle and the views without waiting for an error (teardown).
  void destroy(const rh_HostApi* host) {
    if (work) host->CommWork_Destroy(work);
    for (DLManagedTensor* d : {in, out})
      if (d) d->deleter(d);
    *this = InFlight{};
  }

  // Waits for the collective, frees the handle and the views, adds the time
  // waited to `seconds`, then throws the collective's error if it failed.
  void wait(const rh_HostApi* host, double& seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    rh_Error* err = host->CommWork_Wait(work);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    host->CommWork_Destroy(work);
    in->deleter(in);
    out->deleter(out);
    *this = InFlight{};
    rh::check(host, err);
  }
};

// Flat buffers of one size (the largest group's or unit's), reused from step
// to step: a fresh 100 MB buffer per group and step would cost its page
// faults and zeroing every time. take() hands out a free one (or makes
// one), give() takes it back; held_bytes() is what the pool ever made.
class BufferPool {
 public:
  void configure(int64_t elements, at::TensorOptions options) {
    elements_ = elements;
    options_ = options;
  }
  at::Tensor take() {
    if (free_.empty()) {
      free_.push_back(at::empty({elements_}, options_));
      held_bytes_ += free_.back().numel() * static_cast<int64_t>(free_.back().element_size());
    }
    at::Tensor t = std::move(free_.back());
    free_.pop_back();
    return t;
  }
  void give(at::Tensor t) { free_.push_back(std::move(t)); }
  int64_t held_bytes() const { return held_bytes_; }

 private:
  int64_t elements_ = 0;
  at::TensorOptions options_;
  std::vector<at::Tensor> free_;
  int64_t held_bytes_ = 0;
};

// One rank (nothing to reduce): elements [offset, offset + numel) of
// `flat` (a contiguous flat gradient buffer) = the borrowed gradient `src`,
// flattened and cast to flat's dtype, or += it when `add`. A dense float32
// CPU gradient into a float32 CPU buffer is a memcpy: on small parameters a
// LibTorch op (even the narrow() of the slice) would cost more than the
// copy (docs/zero.md, "One rank").
inline void take_into(const at::Tensor& flat, int64_t offset, int64_t numel,
                      const DLManagedTensor* src, bool add) {
  const DLTensor& dl = src->dl_tensor;
  int64_t count = 1, stride = 1;
  bool dense = true;
  for (int32_t d = dl.ndim - 1; d >= 0; --d) {
    if (dl.strides != nullptr && dl.shape[d] > 1 && dl.strides[d] != stride) dense = false;
    stride *= dl.shape[d];
    count *= dl.shape[d];
  }
  if (count != numel)
    throw rh::Exception(RH_ERROR_INTERNAL, "take_into: a gradient of " + std::to_string(count) +
                                               " elements for a slice of " + std::to_string(numel));
  if (!add && dense && dl.device.device_type == kDLCPU && dl.dtype.code == kDLFloat &&
      dl.dtype.bits == 32 && dl.dtype.lanes == 1 && flat.device().is_cpu() &&
      flat.scalar_type() == at::kFloat && flat.is_contiguous()) {
    if (numel > 0)
      std::memcpy(static_cast<float*>(flat.data_ptr()) + offset,
                  static_cast<const char*>(dl.data) + dl.byte_offset,
                  static_cast<size_t>(numel) * sizeof(float));
    return;
  }
  at::NoGradGuard no_grad;
  at::Tensor dst = flat.narrow(0, offset, numel);
  const at::Tensor grad = rh::borrow_tensor(src).reshape({-1});
  if (add)
    dst.add_(grad);
  else
    dst.copy_(grad);
}

}  // namespace rh::sharding
