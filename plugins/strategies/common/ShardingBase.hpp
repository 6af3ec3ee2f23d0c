// What the sharding strategies (zero, fsdp) are made of beside their
// layout: the host and the model they were handed, the world, the counted
// collectives, the two buffer pools (flat gradients to reduce, gathered
// parameters) and the blocks whose reduction is in flight, with the small
// helpers every file of theirs uses. Each strategy derives from it, keeps
// its blocks (ShardedBlock.hpp) in its layout (ShardLayouts.hpp) and its
// own rules of when to gather, free and reduce.
// Header-only; plugins only (ATen).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "Collectives.hpp"
#include "CommBuffers.hpp"
#include "rh/cpp/error.hpp"
#include "rh/cpp/torch.hpp"
#include "rh/rh_plugin.h"

namespace rh::sharding {

class ShardingBase {
 protected:
  using Clock = std::chrono::steady_clock;

  ShardingBase(const rh_HostApi* host, rh_Context* context)
      : host_(host), context_(context), comm_(host) {}

  rh_ParamInfo param_info(size_t i) const {
    rh_ParamInfo info{};
    info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
    rh::check(host_, api_->Model_GetParam(model_, i, &info));
    return info;
  }
  // Parameter i's tensor (borrowed: valid while the model holds it).
  at::Tensor param(size_t i) const { return rh::borrow_tensor(param_info(i).data); }
  // A block's parameters whole again (their storage back), or freed.
  template <class Members>
  void restore_storage(const Members& members) {
    for (const auto& m : members)
      rh::check(host_, api_->Model_RestoreParamStorage(model_, m.param));
  }
  template <class Members>
  void free_storage(const Members& members) {
    for (const auto& m : members) rh::check(host_, api_->Model_FreeParamStorage(model_, m.param));
  }
  // One rank: a parameter becomes a view of its piece of the master, so
  // the optimizer's in-place update is the parameter's update.
  template <class Layout>
  void alias_to_master(const at::Tensor& master, const typename Layout::Member& m) {
    rh::hand_param_tensor(host_, api_->Model_SetParamData, model_, m.param,
                          Layout::one_rank_view(master, m));
  }

  void put_metric(const std::string& name, double value) {
    rh::check(host_, host_->Metric_Put(context_, name.data(), name.size(), value));
  }
  void log(rh_LogLevel level, const std::string& message) {
    host_->Log(context_, level, message.data(), message.size());
  }

  // Takes block `k` out of the reductions in flight; false when it was not
  // in them.
  bool leave_in_flight(size_t k) {
    const auto it = std::find(in_flight_.begin(), in_flight_.end(), k);
    if (it == in_flight_.end()) return false;
    in_flight_.erase(it);
    return true;
  }

  bool alone() const { return world_size_ == 1; }
  void wait(InFlight& f) { comm_.wait(f); }
  static double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

  const rh_HostApi* host_;
  rh_Context* context_;
  rh_Comm* world_ = nullptr;
  int64_t world_size_ = 1;
  int64_t rank_ = 0;
  at::Tensor world_size_tensor_;  // the divisor of gradients (a tensor: div_out rounds as ddp)
  rh_Model* model_ = nullptr;
  const rh_ModelApi* api_ = nullptr;
  std::vector<std::string> names_;  // per parameter
  Collectives comm_;
  BufferPool grad_pool_;          // flat gradient buffers to reduce
  BufferPool gather_pool_;        // flat buffers of all-gathers
  std::deque<size_t> in_flight_;  // blocks whose reduction is issued, oldest first
};

}  // namespace rh::sharding
