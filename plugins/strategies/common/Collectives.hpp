// The sharding strategies' (zero, fsdp) collectives through the host's
// communicators, counted: what each one moved (comm_bytes) and the time the
// training thread spent issuing and waiting (comm_ms) are the strategies'
// metrics, so every collective goes through here rather than through
// rh_HostApi directly. Header-only; plugins only (ATen).
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>

#include "CommBuffers.hpp"
#include "rh/cpp/error.hpp"
#include "rh/cpp/torch.hpp"
#include "rh/rh_host.h"

namespace rh::sharding {

class Collectives {
 public:
  explicit Collectives(const rh_HostApi* host) : host_(host) {}

  // Issued asynchronously into `f` (finished by wait()); each counts the
  // bytes of the larger side.
  // `out` [group size x in.numel()] = every rank's `in`, in rank order.
  void all_gather(rh_Comm* comm, const at::Tensor& in, const at::Tensor& out, InFlight& f) {
    issue(in, out, f, bytes_of(out),
          [&] { return host_->Comm_AllGather(comm, f.in, f.out, &f.work); });
  }
  // `out` [in.numel() / group size] = chunk `rank` of the ranks' `in`, reduced by `op`.
  void reduce_scatter(rh_Comm* comm, const at::Tensor& in, const at::Tensor& out, rh_ReduceOp op,
                      InFlight& f) {
    issue(in, out, f, bytes_of(in),
          [&] { return host_->Comm_ReduceScatter(comm, f.in, f.out, op, &f.work); });
  }
  // `t` summed over the group, in place.
  void all_reduce_async(rh_Comm* comm, const at::Tensor& t, InFlight& f) {
    issue(t, t, f, bytes_of(t),
          [&] { return host_->Comm_AllReduce(comm, f.out, RH_REDUCE_SUM, &f.work); });
  }

  // Waits for `f` (its time counted), frees it, throws its error.
  void wait(InFlight& f) { f.wait(host_, seconds_); }

  // Blocking, in place; counted in time only (`count_bytes` adds `t`'s
  // bytes: what a caller reports as moved).
  void all_reduce(rh_Comm* comm, at::Tensor& t, rh_ReduceOp op, bool count_bytes = false) {
    blocking(t, count_bytes,
             [&](DLManagedTensor* dl) { return host_->Comm_AllReduce(comm, dl, op, nullptr); });
  }
  void broadcast(rh_Comm* comm, at::Tensor& t, int32_t root, bool count_bytes = false) {
    blocking(t, count_bytes,
             [&](DLManagedTensor* dl) { return host_->Comm_Broadcast(comm, dl, root, nullptr); });
  }

  int64_t bytes() const { return bytes_; }
  double seconds() const { return seconds_; }
  // After a step's metrics are put.
  void reset() {
    bytes_ = 0;
    seconds_ = 0;
  }

  static int64_t bytes_of(const at::Tensor& t) {
    return t.numel() * static_cast<int64_t>(t.element_size());
  }

 private:
  using Clock = std::chrono::steady_clock;

  template <class Call>
  void issue(const at::Tensor& in, const at::Tensor& out, InFlight& f, int64_t bytes, Call call) {
    f.in = rh::export_tensor(in);
    f.out = rh::export_tensor(out);
    const auto t0 = Clock::now();
    rh_Error* err = call();
    seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
    if (err != nullptr) {
      f.destroy(host_);
      rh::check(host_, err);
    }
    bytes_ += bytes;
  }

  template <class Call>
  void blocking(at::Tensor& t, bool count_bytes, Call call) {
    DLManagedTensor* dl = rh::export_tensor(t);
    const auto t0 = Clock::now();
    rh_Error* err = call(dl);
    seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
    dl->deleter(dl);
    rh::check(host_, err);
    if (count_bytes) bytes_ += bytes_of(t);
  }

  const rh_HostApi* host_;
  int64_t bytes_ = 0;
  double seconds_ = 0;
};

}  // namespace rh::sharding
