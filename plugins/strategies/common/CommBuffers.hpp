// Pieces the sharding strategies (zero, fsdp) share: a collective in flight
// with the DLPack views it borrows, and a pool of flat buffers reused from
// step to step. Header-only; plugins only (ATen).
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <vector>

#include "rh/cpp/error.hpp"
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

}  // namespace rh::sharding
