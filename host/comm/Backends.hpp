// The communicator backends' worlds, built over the c10d store every rank is
// connected to (host/comm only).
#pragma once

#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "comm/Communicator.hpp"

namespace rh::comm::detail {

using StorePtr = c10::intrusive_ptr<c10d::Store>;

std::unique_ptr<Communicator> create_gloo_world(StorePtr store, const RendezvousOptions& o);
#ifdef RH_HAVE_NCCL
std::unique_ptr<Communicator> create_nccl_world(StorePtr store, const RendezvousOptions& o);
#endif

}  // namespace rh::comm::detail
