// rh_HostApi's Comm_* and CommWork_* entries over a Communicator.
#include <dlpack/dlpack.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "abi/HostApi.hpp"
#include "abi/HostError.hpp"
#include "comm/CommInternal.hpp"
#include "comm/Communicator.hpp"

namespace rh::comm::detail {
struct Registry;
}

// Behind the opaque handles.
struct rh_Comm {
  rh::comm::Communicator* comm;
  rh::comm::detail::Registry* registry;  // owns the groups made from this handle
};
struct rh_CommWork {
  std::shared_ptr<rh::comm::Work> work;
};

namespace rh::comm {

// The world of one HostServices and the groups made from it.
struct detail::Registry {
  rh_Comm world{nullptr, nullptr};
  std::mutex mutex;  // guards groups
  std::deque<std::unique_ptr<Communicator>> groups;
  std::deque<std::unique_ptr<rh_Comm>> group_handles;
};

namespace {

using detail::Registry;
using host::HostError;
using host::new_error;

// One registry per HostServices (the C entries carry no user data: Comm_World
// finds its world through rh_Context::services). Never destroyed, so that no
// communicator thread is joined during static destruction.
std::mutex& registries_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<const host::HostServices*, std::unique_ptr<Registry>>& registries() {
  static auto* r = new std::map<const host::HostServices*, std::unique_ptr<Registry>>;
  return *r;
}

template <class Fn>
rh_Error* guarded(const char* what, Fn&& fn) noexcept {
  return host::guard_entry(what, [&]() -> rh_Error* {
    fn();
    return nullptr;
  });
}

Communicator& comm_of(const rh_Comm* c, const char* what) {
  if (c == nullptr || c->comm == nullptr)
    throw HostError(RH_ERROR_INVALID_ARGUMENT, std::string(what) + ": NULL communicator");
  return *c->comm;
}

// A DLPack tensor as a Buffer: row-major contiguous (strides NULL, or equal to
// the compact ones; dimensions of size 1 may have any stride).
Buffer buffer_of(const DLManagedTensor* t, const char* what, const char* name) {
  if (t == nullptr)
    throw HostError(RH_ERROR_INVALID_ARGUMENT, std::string(what) + ": " + name + " is NULL");
  const DLTensor& dl = t->dl_tensor;
  if (dl.ndim < 0 || (dl.ndim > 0 && dl.shape == nullptr))
    throw HostError(RH_ERROR_INVALID_ARGUMENT,
                    std::string(what) + ": " + name + " has a bad shape");
  size_t count = 1;
  for (int i = 0; i < dl.ndim; ++i) {
    if (dl.shape[i] < 0)
      throw HostError(RH_ERROR_INVALID_ARGUMENT,
                      std::string(what) + ": " + name + " has a negative dimension");
    count *= static_cast<size_t>(dl.shape[i]);
  }
  if (dl.strides != nullptr && count > 0) {
    int64_t expected = 1;
    for (int i = dl.ndim - 1; i >= 0; --i) {
      if (dl.shape[i] != 1 && dl.strides[i] != expected)
        throw HostError(RH_ERROR_INVALID_ARGUMENT,
                        std::string(what) + ": " + name + " is not contiguous (dimension " +
                            std::to_string(i) + " has stride " + std::to_string(dl.strides[i]) +
                            ", expected " + std::to_string(expected) +
                            "); pass a contiguous tensor");
      expected *= dl.shape[i];
    }
  }
  void* data = dl.data == nullptr ? nullptr : static_cast<char*>(dl.data) + dl.byte_offset;
  return Buffer{data, count, dl.dtype, dl.device};
}

ReduceOp op_of(rh_ReduceOp op, const char* what) {
  switch (op) {
    case RH_REDUCE_SUM:
      return ReduceOp::Sum;
    case RH_REDUCE_AVG:
      return ReduceOp::Avg;
    case RH_REDUCE_MAX:
      return ReduceOp::Max;
    case RH_REDUCE_MIN:
      return ReduceOp::Min;
  }
  throw HostError(RH_ERROR_INVALID_ARGUMENT,
                  std::string(what) + ": unknown rh_ReduceOp " + std::to_string(op));
}

// Synchronous when work == NULL; otherwise *work receives the handle.
void finish(std::shared_ptr<Work> w, rh_CommWork** work) {
  if (work != nullptr) *work = new rh_CommWork{std::move(w)};
}

rh_Comm* Comm_World(rh_Context* context) {
  if (context == nullptr || context->services == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(registries_mutex());
  auto it = registries().find(context->services);
  if (it == registries().end() || it->second->world.comm == nullptr) return nullptr;
  return &it->second->world;
}

int32_t Comm_Rank(const rh_Comm* comm) { return comm && comm->comm ? comm->comm->rank() : -1; }
int32_t Comm_Size(const rh_Comm* comm) { return comm && comm->comm ? comm->comm->size() : 0; }

rh_Error* Comm_AllReduce(rh_Comm* comm, DLManagedTensor* tensor, rh_ReduceOp op,
                         rh_CommWork** work) {
  return guarded("Comm_AllReduce", [&] {
    if (work) *work = nullptr;
    Communicator& c = comm_of(comm, "Comm_AllReduce");
    Buffer b = buffer_of(tensor, "Comm_AllReduce", "tensor");
    finish(c.all_reduce(b, op_of(op, "Comm_AllReduce"), work != nullptr), work);
  });
}

rh_Error* Comm_AllGather(rh_Comm* comm, const DLManagedTensor* input, DLManagedTensor* output,
                         rh_CommWork** work) {
  return guarded("Comm_AllGather", [&] {
    if (work) *work = nullptr;
    Communicator& c = comm_of(comm, "Comm_AllGather");
    Buffer in = buffer_of(input, "Comm_AllGather", "input");
    Buffer out = buffer_of(output, "Comm_AllGather", "output");
    finish(c.all_gather(in, out, work != nullptr), work);
  });
}

rh_Error* Comm_ReduceScatter(rh_Comm* comm, const DLManagedTensor* input, DLManagedTensor* output,
                             rh_ReduceOp op, rh_CommWork** work) {
  return guarded("Comm_ReduceScatter", [&] {
    if (work) *work = nullptr;
    Communicator& c = comm_of(comm, "Comm_ReduceScatter");
    Buffer in = buffer_of(input, "Comm_ReduceScatter", "input");
    Buffer out = buffer_of(output, "Comm_ReduceScatter", "output");
    finish(c.reduce_scatter(in, out, op_of(op, "Comm_ReduceScatter"), work != nullptr), work);
  });
}

rh_Error* Comm_Broadcast(rh_Comm* comm, DLManagedTensor* tensor, int32_t root, rh_CommWork** work) {
  return guarded("Comm_Broadcast", [&] {
    if (work) *work = nullptr;
    Communicator& c = comm_of(comm, "Comm_Broadcast");
    Buffer b = buffer_of(tensor, "Comm_Broadcast", "tensor");
    finish(c.broadcast(b, root, work != nullptr), work);
  });
}

rh_Error* Comm_Barrier(rh_Comm* comm) {
  return guarded("Comm_Barrier", [&] { comm_of(comm, "Comm_Barrier").barrier(); });
}

rh_Error* Comm_NewGroup(rh_Comm* comm, const int32_t* ranks, size_t num_ranks, rh_Comm** out) {
  return guarded("Comm_NewGroup", [&] {
    if (out == nullptr) throw HostError(RH_ERROR_INVALID_ARGUMENT, "Comm_NewGroup: NULL out");
    *out = nullptr;
    Communicator& c = comm_of(comm, "Comm_NewGroup");
    if (num_ranks > 0 && ranks == nullptr)
      throw HostError(RH_ERROR_INVALID_ARGUMENT, "Comm_NewGroup: NULL ranks");
    std::vector<int> list(ranks, ranks + num_ranks);
    detail::check_group_ranks(list, c.size());
    std::unique_ptr<Communicator> group = c.new_group(list);
    if (!group) return;
    Registry* registry = comm->registry;
    std::lock_guard<std::mutex> lock(registry->mutex);
    registry->groups.push_back(std::move(group));
    registry->group_handles.push_back(
        std::make_unique<rh_Comm>(rh_Comm{registry->groups.back().get(), registry}));
    *out = registry->group_handles.back().get();
  });
}

rh_Error* CommWork_Wait(rh_CommWork* work) {
  return guarded("CommWork_Wait", [&] {
    if (work == nullptr || !work->work)
      throw HostError(RH_ERROR_INVALID_ARGUMENT, "CommWork_Wait: NULL work");
    work->work->wait();
  });
}

int32_t CommWork_IsCompleted(rh_CommWork* work) {
  if (work == nullptr || !work->work) return 1;
  try {
    return work->work->completed() ? 1 : 0;
  } catch (...) {
    return 1;
  }
}

void CommWork_Destroy(rh_CommWork* work) {
  if (work == nullptr) return;
  try {
    if (work->work) work->work->wait();
  } catch (...) {
    // The error was the caller's to collect with CommWork_Wait.
  }
  delete work;
}

}  // namespace

Communicator& communicator_of(const rh_Comm* handle, const char* what) {
  return comm_of(handle, what);
}

void install_comm_api(host::HostServices& services, Communicator* world) {
  std::unique_ptr<Registry> old;
  {
    std::lock_guard<std::mutex> lock(registries_mutex());
    auto& slot = registries()[&services];
    old = std::move(slot);
    if (world != nullptr) {
      slot = std::make_unique<Registry>();
      slot->world = rh_Comm{world, slot.get()};
    } else {
      registries().erase(&services);
    }
  }
  rh_HostApi& api = services.mutable_api();
  const bool on = world != nullptr;
  api.Comm_World = on ? &Comm_World : nullptr;
  api.Comm_Rank = on ? &Comm_Rank : nullptr;
  api.Comm_Size = on ? &Comm_Size : nullptr;
  api.Comm_AllReduce = on ? &Comm_AllReduce : nullptr;
  api.Comm_AllGather = on ? &Comm_AllGather : nullptr;
  api.Comm_ReduceScatter = on ? &Comm_ReduceScatter : nullptr;
  api.Comm_Broadcast = on ? &Comm_Broadcast : nullptr;
  api.Comm_Barrier = on ? &Comm_Barrier : nullptr;
  api.Comm_NewGroup = on ? &Comm_NewGroup : nullptr;
  api.CommWork_Wait = on ? &CommWork_Wait : nullptr;
  api.CommWork_IsCompleted = on ? &CommWork_IsCompleted : nullptr;
  api.CommWork_Destroy = on ? &CommWork_Destroy : nullptr;
  // `old` (the previous world's groups) is destroyed here, outside the lock.
}

}  // namespace rh::comm
